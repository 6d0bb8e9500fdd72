//! CSI volumes through the volume manager, against a recording driver that bind-mounts as a
//! real one would (root).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolumeSpec, Volume, VolumeMount,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::cm::ResourceList;
use crate::csi::{CsiCallError, CsiNodeService};
use crate::env::FieldValues;
use crate::objects::{MemoryObjectStore, ObjectStore};

/// Records the calls; publish bind-mounts the driver's backing directory on the target.
struct Driver {
    backing: PathBuf,
    stages: bool,
    calls: Mutex<Vec<String>>,
    contexts: Mutex<Vec<BTreeMap<String, String>>>,
    publish_contexts: Mutex<Vec<BTreeMap<String, String>>>,
}

#[async_trait]
impl CsiNodeService for Driver {
    async fn supports_stage(&self, driver: &str) -> Result<bool, CsiCallError> {
        if driver != "csi.test" {
            return Err(CsiCallError::NotRegistered(driver.into()));
        }
        Ok(self.stages)
    }
    async fn stage(&self, _: &str, r: &CsiMountRequest) -> Result<(), CsiCallError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("stage {} {}", r.volume_id, r.staging_path));
        self.publish_contexts
            .lock()
            .unwrap()
            .push(r.publish_context.clone());
        Ok(())
    }
    async fn publish(&self, _: &str, r: &CsiMountRequest) -> Result<(), CsiCallError> {
        self.calls.lock().unwrap().push(format!(
            "publish {} {} staging={} ro={}",
            r.volume_id, r.target_path, r.staging_path, r.read_only
        ));
        self.contexts.lock().unwrap().push(r.volume_context.clone());
        self.publish_contexts
            .lock()
            .unwrap()
            .push(r.publish_context.clone());
        std::fs::create_dir_all(&r.target_path).unwrap();
        mount::bind(&self.backing, Path::new(&r.target_path)).unwrap();
        Ok(())
    }
    async fn unpublish(&self, _: &str, id: &str, target: &str) -> Result<(), CsiCallError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("unpublish {id} {target}"));
        mount::unmount(Path::new(target)).unwrap();
        Ok(())
    }
    async fn expand(
        &self,
        _: &str,
        r: &crate::csi::CsiExpandRequest,
    ) -> Result<bool, CsiCallError> {
        self.calls.lock().unwrap().push(format!(
            "expand {} {} staging={} bytes={}",
            r.volume_id, r.volume_path, r.staging_path, r.required_bytes
        ));
        Ok(true)
    }
    async fn volume_stats(
        &self,
        _: &str,
        id: &str,
        path: &str,
    ) -> Result<Option<crate::csi::CsiVolumeUsage>, CsiCallError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("stats {id} {path}"));
        Ok(Some(crate::csi::CsiVolumeUsage {
            available_bytes: 70,
            capacity_bytes: 100,
            used_bytes: 30,
            inodes_free: 9,
            inodes: 10,
            inodes_used: 1,
        }))
    }
    async fn unstage(&self, _: &str, id: &str, staging: &str) -> Result<(), CsiCallError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("unstage {id} {staging}"));
        Ok(())
    }
}

/// A recording driver bind-mounting `backing`; `stages`: it has STAGE_UNSTAGE_VOLUME.
fn driver(backing: &Path, stages: bool) -> Arc<Driver> {
    Arc::new(Driver {
        backing: backing.to_path_buf(),
        stages,
        calls: Mutex::default(),
        contexts: Mutex::default(),
        publish_contexts: Mutex::default(),
    })
}

fn store(attach_required: Option<bool>) -> Arc<MemoryObjectStore> {
    let store = Arc::new(MemoryObjectStore::new());
    store.put_persistent_volume_claim(crate::volume::claims::tests::claim("Bound", Some("pv-c")));
    store.put_persistent_volume(k8s_openapi::api::core::v1::PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv-c".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            claim_ref: Some(k8s_openapi::api::core::v1::ObjectReference {
                uid: Some("claim-uid".into()),
                ..Default::default()
            }),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: "csi.test".into(),
                volume_handle: "vol-1".into(),
                volume_attributes: Some(BTreeMap::from([("size".into(), "1Gi".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    if let Some(attach) = attach_required {
        store.put_csi_driver(CSIDriver {
            metadata: ObjectMeta {
                name: Some("csi.test".into()),
                ..Default::default()
            },
            spec: CSIDriverSpec {
                attach_required: Some(attach),
                pod_info_on_mount: Some(true),
                ..Default::default()
            },
        });
    }
    store
}

/// The claim pod of the persistent-volume tests, with a service account.
fn pod(uid: &str) -> Pod {
    let mut p = crate::volume::persistent::tests::pod(uid, false, None);
    if let Some(spec) = p.spec.as_mut() {
        spec.service_account_name = Some("sa".into());
    }
    p
}

async fn setup(vm: &VolumeManager, p: &Pod) -> Result<(), VolumeError> {
    vm.setup_pod(
        p,
        &FieldValues::default(),
        &ResourceList::new(),
        &BTreeMap::new(),
    )
    .await
}

fn manager(root: &Path, store: Arc<MemoryObjectStore>, driver: Arc<Driver>) -> VolumeManager {
    let mut vm = VolumeManager::new(root, store, "");
    vm.set_csi(driver, "node-a");
    vm
}

#[tokio::test]
async fn a_csi_volume_is_staged_published_and_torn_down_in_gos_layout() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    let vm = manager(root.path(), store(Some(false)), driver.clone());
    let (p1, p2) = (pod("u1"), pod("u2"));
    setup(&vm, &p1).await.unwrap();
    setup(&vm, &p2).await.unwrap();
    let staging = root
        .path()
        .join("plugins/kubernetes.io/csi/pv/pv-c/globalmount");
    let target1 = root
        .path()
        .join("pods/u1/volumes/kubernetes.io~csi/pv-c/mount");
    let target2 = root
        .path()
        .join("pods/u2/volumes/kubernetes.io~csi/pv-c/mount");
    assert_eq!(vm.volumes("u1").unwrap()["vol"].host_path, target1);
    let data: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            root.path()
                .join("pods/u1/volumes/kubernetes.io~csi/pv-c/vol_data.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        data,
        serde_json::json!({"specVolID": "pv-c", "volumeHandle": "vol-1", "driverName": "csi.test",
            "nodeName": "node-a", "volumeLifecycleMode": "Persistent",
            "attachmentID": "csi-1e38e96827f58d9f755c6d41545664e4aa03cf276d05341a8bfc69907d8b5b6c"})
    );
    let global: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            root.path()
                .join("plugins/kubernetes.io/csi/pv/pv-c/vol_data.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        global,
        serde_json::json!({"volumeHandle": "vol-1", "driverName": "csi.test"})
    );
    let context = driver.contexts.lock().unwrap()[0].clone();
    assert_eq!(context["size"], "1Gi");
    assert_eq!(context["csi.storage.k8s.io/pod.name"], "p-u1");
    assert_eq!(context["csi.storage.k8s.io/serviceAccount.name"], "sa");
    assert_eq!(context["csi.storage.k8s.io/ephemeral"], "false");

    // Measured through the driver on each pod's target path, with the claim.
    vm.refresh_volume_stats().await;
    let stats = vm.volume_stats_cache().lock().unwrap()["u1"].clone();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert_eq!(stats[0].fs.used_bytes, Some(30));
    assert_eq!(stats[0].fs.inodes_free, Some(9));
    assert_eq!(stats[0].pvc_ref.as_ref().unwrap().name, "data");
    let calls: Vec<String> = driver.calls.lock().unwrap().drain(..).collect();
    let t1 = target1.display().to_string();
    assert!(calls.contains(&format!("stats vol-1 {t1}")), "{calls:?}");
    let stage_and_publishes: Vec<String> = calls
        .into_iter()
        .filter(|c| !c.starts_with("stats "))
        .collect();
    driver.calls.lock().unwrap().extend(stage_and_publishes);

    // A second sync of a published volume calls nothing.
    let before = driver.calls.lock().unwrap().len();
    setup(&vm, &p1).await.unwrap();
    assert_eq!(driver.calls.lock().unwrap().len(), before);

    // The first pod goes: unpublished, still staged for the second; then the second goes.
    vm.teardown_pod("u1").await.unwrap();
    vm.teardown_pod("u2").await.unwrap();
    let (s, t1, t2) = (staging.display(), target1.display(), target2.display());
    assert_eq!(
        driver.calls.lock().unwrap().clone(),
        vec![
            format!("stage vol-1 {s}"),
            format!("publish vol-1 {t1} staging={s} ro=false"),
            format!("publish vol-1 {t2} staging={s} ro=false"),
            format!("unpublish vol-1 {t1}"),
            format!("unpublish vol-1 {t2}"),
            format!("unstage vol-1 {s}"),
        ]
    );
    assert!(!root
        .path()
        .join("plugins/kubernetes.io/csi/pv/pv-c")
        .exists());
    assert!(!root.path().join("pods/u1").exists());
}

/// The Node as the test sets it.
#[derive(Default)]
struct TestNode(Mutex<Option<Arc<k8s_openapi::api::core::v1::Node>>>);

impl crate::admission::NodeLister for TestNode {
    fn node(&self) -> Option<Arc<k8s_openapi::api::core::v1::Node>> {
        self.0.lock().unwrap().clone()
    }
}

impl TestNode {
    fn set_attached(&self, names: &[&str]) {
        let node = k8s_openapi::api::core::v1::Node {
            status: Some(k8s_openapi::api::core::v1::NodeStatus {
                volumes_attached: Some(
                    names
                        .iter()
                        .map(|n| k8s_openapi::api::core::v1::AttachedVolume {
                            name: n.to_string(),
                            device_path: String::new(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        *self.0.lock().unwrap() = Some(Arc::new(node));
    }
}

fn attachment(
    attached: bool,
    error: Option<&str>,
) -> k8s_openapi::api::storage::v1::VolumeAttachment {
    use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentStatus, VolumeError};
    VolumeAttachment {
        metadata: ObjectMeta {
            name: Some(attachment_name("vol-1", "csi.test", "node-a")),
            ..Default::default()
        },
        status: Some(VolumeAttachmentStatus {
            attached,
            attach_error: error.map(|m| VolumeError {
                message: Some(m.into()),
                ..Default::default()
            }),
            attachment_metadata: Some(BTreeMap::from([("lun".into(), "7".into())])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn an_attachable_volume_waits_for_in_use_then_attached_and_gets_the_metadata() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    for attach_required in [None, Some(true)] {
        let store = store(attach_required);
        let node = Arc::new(TestNode::default());
        let mut vm = manager(root.path(), store.clone(), driver.clone());
        vm.set_node_lister(node.clone());
        let unique = "kubernetes.io/csi/csi.test^vol-1";
        assert_eq!(
            vm.volumes_in_use(),
            None,
            "not before the volumes on disk are counted"
        );
        vm.reconstruct_in_use().await;
        assert_eq!(vm.volumes_in_use(), Some(vec![]));
        let p = pod("u3");
        // Each of Go's checks in turn, each a clear error naming the volume.
        type Fix<'a> = Box<dyn Fn() + 'a>;
        let steps: Vec<(&str, Fix)> = vec![
            (
                "has not been added to the list of VolumesInUse in the node's volume status",
                Box::new(|| vm.mark_volumes_reported_in_use(&[unique.to_string()])),
            ),
            (
                "the Node object is not known yet",
                Box::new(|| node.set_attached(&[])),
            ),
            (
                "not attached according to node status",
                Box::new(|| node.set_attached(&[unique])),
            ),
            (
                "cannot be read: ",
                Box::new(|| store.put_volume_attachment(attachment(false, Some("no such disk")))),
            ),
            (
                "failed: no such disk",
                Box::new(|| store.put_volume_attachment(attachment(false, None))),
            ),
            (
                "is not attached yet",
                Box::new(|| store.put_volume_attachment(attachment(true, None))),
            ),
        ];
        for (expected, fix) in steps {
            let err = setup(&vm, &p).await.unwrap_err().to_string();
            assert!(err.contains("attach failed for volume \"pv-c\""), "{err}");
            assert!(err.contains(expected), "{expected}: {err}");
            // Wanted, so in use, from the set-up's start.
            assert_eq!(vm.volumes_in_use(), Some(vec![unique.to_string()]));
            fix();
        }
        assert!(driver.calls.lock().unwrap().is_empty());
        setup(&vm, &p).await.unwrap();
        let contexts = driver.publish_contexts.lock().unwrap().clone();
        assert_eq!(contexts.len(), 2, "stage and publish");
        assert!(contexts.iter().all(|c| c["lun"] == "7"), "{contexts:?}");

        // A restarted kubelet counts the volume on disk as in use before any pod syncs.
        let mut restarted = manager(root.path(), store.clone(), driver.clone());
        restarted.set_node_lister(node.clone());
        restarted.reconstruct_in_use().await;
        assert_eq!(restarted.volumes_in_use(), Some(vec![unique.to_string()]));

        vm.teardown_pod("u3").await.unwrap();
        assert_eq!(
            vm.volumes_in_use(),
            Some(vec![]),
            "unpublished and unstaged"
        );
        driver.calls.lock().unwrap().clear();
        driver.publish_contexts.lock().unwrap().clear();
    }
}

#[tokio::test]
async fn volumes_not_needing_attach_are_never_in_use_and_unknown_drivers_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    let vm = manager(root.path(), store(Some(false)), driver.clone());
    vm.reconstruct_in_use().await;
    setup(&vm, &pod("u5")).await.unwrap();
    assert_eq!(vm.volumes_in_use(), Some(vec![]));
    vm.teardown_pod("u5").await.unwrap();
    let vm = VolumeManager::new(root.path(), store(Some(false)), "");
    let err = setup(&vm, &pod("u4")).await.unwrap_err().to_string();
    assert!(err.contains("no CSI drivers in this kubelet"), "{err}");
}

fn inline_pod(uid: &str) -> Pod {
    let mut p = pod(uid);
    if let Some(spec) = p.spec.as_mut() {
        spec.volumes = Some(vec![Volume {
            name: "scratch".into(),
            csi: Some(k8s_openapi::api::core::v1::CSIVolumeSource {
                driver: "csi.test".into(),
                volume_attributes: Some(BTreeMap::from([("size".into(), "10Mi".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        spec.containers[0].volume_mounts = Some(vec![VolumeMount {
            name: "scratch".into(),
            mount_path: "/scratch".into(),
            ..Default::default()
        }]);
    }
    p
}

#[tokio::test]
async fn inline_volumes_are_published_only_and_need_the_ephemeral_mode() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    // The CSIDriver lists only Persistent (the default): refused in Go's words.
    let objects = store(Some(false));
    let vm = manager(root.path(), objects.clone(), driver.clone());
    let err = setup(&vm, &inline_pod("u5")).await.unwrap_err().to_string();
    assert!(
        err.contains("volume mode \"Ephemeral\" not supported by driver csi.test (only supports [\"Persistent\"])"),
        "{err}"
    );
    objects.put_csi_driver(CSIDriver {
        metadata: ObjectMeta {
            name: Some("csi.test".into()),
            ..Default::default()
        },
        spec: CSIDriverSpec {
            attach_required: Some(false),
            pod_info_on_mount: Some(true),
            volume_lifecycle_modes: Some(vec!["Persistent".into(), "Ephemeral".into()]),
            ..Default::default()
        },
    });
    setup(&vm, &inline_pod("u5")).await.unwrap();
    let handle = "csi-6c3bbccf5140fde19557815af470258099c3b7ee8288d163c1306c477569f1fc";
    assert_eq!(inline_volume_handle("u5", "scratch"), handle);
    let target = root
        .path()
        .join("pods/u5/volumes/kubernetes.io~csi/scratch/mount");
    let context = driver.contexts.lock().unwrap()[0].clone();
    assert_eq!(context["size"], "10Mi");
    assert_eq!(context["csi.storage.k8s.io/ephemeral"], "true");
    vm.teardown_pod("u5").await.unwrap();
    let t = target.display();
    assert_eq!(
        driver.calls.lock().unwrap().clone(),
        vec![
            format!("publish {handle} {t} staging= ro=false"),
            format!("unpublish {handle} {t}"),
        ]
    );
}

#[test]
fn lifecycle_modes_without_a_csidriver() {
    assert_eq!(check_lifecycle_mode("d", None, "Persistent"), Ok(()));
    assert_eq!(
        check_lifecycle_mode("d", None, "Ephemeral"),
        Err("volume mode \"Ephemeral\" not supported by driver d (no CSIDriver object)".into())
    );
}

#[tokio::test]
async fn housekeeping_unstages_a_staged_volume_no_pod_uses() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    let vm = manager(root.path(), store(Some(false)), driver.clone());
    setup(&vm, &pod("u6")).await.unwrap();
    // The pod's directory is gone without a teardown (its unstage failed, or the kubelet was
    // down): the volume stays staged until housekeeping.
    let target = root
        .path()
        .join("pods/u6/volumes/kubernetes.io~csi/pv-c/mount");
    mount::unmount(&target).unwrap();
    std::fs::remove_dir_all(root.path().join("pods/u6")).unwrap();
    vm.cleanup_orphans(|_| true).await;
    let staging = root
        .path()
        .join("plugins/kubernetes.io/csi/pv/pv-c/globalmount");
    assert_eq!(
        driver.calls.lock().unwrap().last().cloned(),
        Some(format!("unstage vol-1 {}", staging.display()))
    );
    assert!(!root
        .path()
        .join("plugins/kubernetes.io/csi/pv/pv-c")
        .exists());
}

/// Sets the claim's status capacity (resource version "7") and the PV's capacity and claim
/// reference: a resize from `has` to `wants` pending.
async fn pending_resize(store: &MemoryObjectStore, has: &str, wants: &str) {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let mut c = crate::volume::claims::tests::claim("Bound", Some("pv-c"));
    c.metadata.resource_version = Some("7".into());
    if let Some(status) = c.status.as_mut() {
        status.capacity = Some(BTreeMap::from([("storage".into(), Quantity(has.into()))]));
        status.conditions = Some(vec![
            k8s_openapi::api::core::v1::PersistentVolumeClaimCondition {
                type_: "FileSystemResizePending".into(),
                status: "True".into(),
                ..Default::default()
            },
        ]);
    }
    store.put_persistent_volume_claim(c);
    let mut pv = store.persistent_volume("pv-c").await.unwrap();
    if let Some(spec) = pv.spec.as_mut() {
        spec.capacity = Some(BTreeMap::from([("storage".into(), Quantity(wants.into()))]));
        if let Some(r) = spec.claim_ref.as_mut() {
            r.namespace = Some("ns".into());
            r.name = Some("data".into());
        }
    }
    store.put_persistent_volume(pv);
}

#[tokio::test]
async fn a_pending_resize_is_expanded_after_staging_then_in_use_and_the_claim_written() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    let objects = store(Some(false));
    pending_resize(&objects, "1Gi", "2Gi").await;
    let vm = manager(root.path(), objects.clone(), driver.clone());
    let p = pod("u1");
    setup(&vm, &p).await.unwrap();
    let staging = root
        .path()
        .join("plugins/kubernetes.io/csi/pv/pv-c/globalmount");
    let target = root
        .path()
        .join("pods/u1/volumes/kubernetes.io~csi/pv-c/mount");
    let (s, t) = (staging.display().to_string(), target.display().to_string());
    let calls: Vec<String> = driver.calls.lock().unwrap().drain(..).collect();
    // Right after staging, at the staging path (Go's order), before publishing.
    assert_eq!(calls[0], format!("stage vol-1 {s}"));
    assert_eq!(
        calls[1],
        format!("expand vol-1 {s} staging={s} bytes={}", 2u64 << 30)
    );
    assert!(calls[2].starts_with("publish vol-1"), "{calls:?}");
    let claim = objects.persistent_volume_claim("ns", "data").await.unwrap();
    let status = claim.status.unwrap();
    assert_eq!(status.capacity.unwrap()["storage"].0, "2Gi");
    assert_eq!(status.conditions, None, "the resize condition is gone");
    let events = vm.take_events("u1");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (
            events[0].warning,
            events[0].reason,
            events[0].message.as_str()
        ),
        (
            false,
            "FileSystemResizeSuccessful",
            "MountVolume.NodeExpandVolume succeeded for volume \"pv-c\" "
        )
    );
    assert!(vm.take_events("u1").is_empty());

    // In use: grown again while the pod runs; its next set-up expands at the target path.
    pending_resize(&objects, "2Gi", "3Gi").await;
    setup(&vm, &p).await.unwrap();
    let calls: Vec<String> = driver.calls.lock().unwrap().drain(..).collect();
    assert_eq!(
        calls,
        vec![format!("expand vol-1 {t} staging={s} bytes={}", 3u64 << 30)]
    );
    let claim = objects.persistent_volume_claim("ns", "data").await.unwrap();
    assert_eq!(claim.status.unwrap().capacity.unwrap()["storage"].0, "3Gi");
    // Nothing pending: nothing called.
    setup(&vm, &p).await.unwrap();
    assert!(driver.calls.lock().unwrap().is_empty());

    vm.teardown_pod("u1").await.unwrap();
}

/// The claim pod with the volume in `volumeDevices` at `/dev/xvda` instead of mounted.
fn block_pod(uid: &str) -> Pod {
    let mut p = pod(uid);
    if let Some(c) = p.spec.as_mut().map(|s| &mut s.containers[0]) {
        c.volume_mounts = None;
        c.volume_devices = Some(vec![k8s_openapi::api::core::v1::VolumeDevice {
            name: "vol".into(),
            device_path: "/dev/xvda".into(),
        }]);
    }
    p
}

/// Marks the test PV and claim `volumeMode: Block`.
async fn block_mode(store: &MemoryObjectStore) {
    let mut pv = store.persistent_volume("pv-c").await.unwrap();
    if let Some(spec) = pv.spec.as_mut() {
        spec.volume_mode = Some("Block".into());
    }
    store.put_persistent_volume(pv);
}

#[tokio::test]
async fn block_volumes_of_drivers_that_attach_are_refused_and_devices_need_a_block_volume() {
    let root = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let driver = driver(backing.path(), true);
    let objects = store(Some(true));
    block_mode(&objects).await;
    let vm = manager(root.path(), objects, driver.clone());
    let err = setup(&vm, &block_pod("u9")).await.unwrap_err().to_string();
    assert!(
        err.contains("volumeMode Block of a CSI driver that needs attaching"),
        "{err}"
    );
    assert!(driver.calls.lock().unwrap().is_empty(), "nothing staged");

    // A container's volumeDevices entry needs a set-up block volume and an absolute path.
    let p = block_pod("u9");
    let c = p.spec.as_ref().unwrap().containers[0].clone();
    let err = vm.block_devices(&p, &c).unwrap_err().to_string();
    assert_eq!(
        err,
        "cannot find volume \"vol\" to pass into container \"c\""
    );
    let mut relative = c.clone();
    relative.volume_devices.as_mut().unwrap()[0].device_path = "dev/xvda".into();
    let err = vm.block_devices(&p, &relative).unwrap_err().to_string();
    assert_eq!(err, "error DevicePath `dev/xvda` must be an absolute path");
}
