//! A `local` PersistentVolume through the volume manager on real bind mounts (root).

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, LocalVolumeSource, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, ObjectReference, PersistentVolume, PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec, PodSecurityContext, PodSpec, VolumeMount, VolumeNodeAffinity,
};
use k8s_openapi::api::core::v1::{Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cm::ResourceList;
use crate::env::FieldValues;
use crate::objects::MemoryObjectStore;
use crate::volume::{mount, VolumeError, VolumeManager};

fn store_with(pv_spec: PersistentVolumeSpec) -> Arc<MemoryObjectStore> {
    let store = Arc::new(MemoryObjectStore::new());
    store.put_persistent_volume_claim(crate::volume::claims::tests::claim("Bound", Some("pv-a")));
    store.put_persistent_volume(PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv-a".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            claim_ref: Some(ObjectReference {
                uid: Some("claim-uid".into()),
                ..Default::default()
            }),
            ..pv_spec
        }),
        ..Default::default()
    });
    store
}

fn local(path: &Path) -> PersistentVolumeSpec {
    PersistentVolumeSpec {
        local: Some(LocalVolumeSource {
            path: path.to_string_lossy().into_owned(),
            ..Default::default()
        }),
        node_affinity: Some(VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "kubernetes.io/hostname".into(),
                        operator: "In".into(),
                        values: Some(vec!["node-a".into()]),
                    }]),
                    match_fields: None,
                }],
            }),
        }),
        ..Default::default()
    }
}

/// Pod `ns/p-<uid>` mounting the claim `data` at `/data` (volume `vol`).
pub(in crate::volume) fn pod(uid: &str, read_only: bool, fs_group: Option<i64>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("p-{uid}")),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                volume_mounts: Some(vec![VolumeMount {
                    name: "vol".into(),
                    mount_path: "/data".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            volumes: Some(vec![Volume {
                name: "vol".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: "data".into(),
                    read_only: Some(read_only),
                }),
                ..Default::default()
            }]),
            security_context: fs_group.map(|g| PodSecurityContext {
                fs_group: Some(g),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn labels(host: &str) -> BTreeMap<String, String> {
    [("kubernetes.io/hostname".to_string(), host.to_string())].into()
}

async fn setup(vm: &VolumeManager, p: &Pod, host: &str) -> Result<(), VolumeError> {
    vm.setup_pod(
        p,
        &FieldValues::default(),
        &ResourceList::new(),
        &labels(host),
    )
    .await
}

#[tokio::test]
async fn a_local_volume_is_bind_mounted_kept_and_unmounted_without_losing_data() {
    let root = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    std::fs::write(disk.path().join("old"), "kept").unwrap();
    let vm = VolumeManager::new(root.path(), store_with(local(disk.path())), "");

    // Another node's volume is refused with Go's message, and nothing is mounted.
    let p = pod("u1", false, Some(4321));
    let err = setup(&vm, &p, "node-b").await.unwrap_err().to_string();
    assert!(
        err.contains("MountVolume.NodeAffinity check failed for volume \"pv-a\" : no matching NodeSelectorTerms"),
        "{err}"
    );
    let dir = vm.volume_dir("u1", "local-volume", "pv-a");
    assert!(!mount::is_mount_point(&dir).unwrap());

    setup(&vm, &p, "node-a").await.unwrap();
    assert!(mount::is_mount_point(&dir).unwrap());
    assert_eq!(std::fs::read_to_string(dir.join("old")).unwrap(), "kept");
    std::fs::write(dir.join("new"), "written by the pod").unwrap();
    // The pod's fsGroup reached the volume's files.
    let meta = std::fs::metadata(disk.path().join("old")).unwrap();
    assert_eq!(meta.gid(), 4321);
    assert_eq!(
        std::fs::metadata(disk.path()).unwrap().permissions().mode() & 0o2000,
        0o2000
    );
    let set_up = vm.volumes("u1").unwrap();
    assert_eq!(set_up["vol"].host_path, dir);
    assert!(!set_up["vol"].read_only);
    // No gid annotation: no extra group.
    assert!(vm.extra_supplemental_groups(&p).is_empty());

    // Measured by statfs of the mount (Go's MetricsStatFS), with the claim.
    vm.refresh_volume_stats().await;
    let cache = vm.volume_stats_cache();
    let stats = cache.lock().unwrap()["u1"].clone();
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert_eq!(stats[0].name, "vol");
    let claim = stats[0].pvc_ref.clone().unwrap();
    assert_eq!(
        (claim.namespace.as_str(), claim.name.as_str()),
        ("ns", "data")
    );
    let fs = &stats[0].fs;
    let (capacity, available, used) = (
        fs.capacity_bytes.unwrap(),
        fs.available_bytes.unwrap(),
        fs.used_bytes.unwrap(),
    );
    assert!(
        capacity > 0 && available <= capacity && used <= capacity,
        "{fs:?}"
    );
    assert!(fs.inodes.unwrap() >= fs.inodes_used.unwrap(), "{fs:?}");
    assert!(!fs.time.is_empty());

    // Idempotent: a second sync (or a restarted kubelet) keeps the one mount.
    let vm2 = VolumeManager::new(root.path(), store_with(local(disk.path())), "");
    setup(&vm2, &p, "node-a").await.unwrap();
    let mounts = mount::mount_points_under(&dir).unwrap();
    assert_eq!(mounts, vec![dir.clone()]);

    // Teardown unmounts and removes the pod's directory; the data stays on the disk.
    vm2.teardown_pod("u1").await.unwrap();
    assert!(!vm2.pod_dir("u1").exists());
    assert_eq!(
        std::fs::read_to_string(disk.path().join("new")).unwrap(),
        "written by the pod"
    );
}

#[tokio::test]
async fn a_read_only_claim_mounts_read_only() {
    let root = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    let vm = VolumeManager::new(root.path(), store_with(local(disk.path())), "");
    let p = pod("u2", true, Some(4321));
    setup(&vm, &p, "node-a").await.unwrap();
    let dir = vm.volume_dir("u2", "local-volume", "pv-a");
    let err = std::fs::write(dir.join("x"), "x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(30), "EROFS: {err}");
    assert!(vm.volumes("u2").unwrap()["vol"].read_only);
    // No fsGroup on a read-only volume (Go).
    assert_ne!(std::fs::metadata(disk.path()).unwrap().gid(), 4321);
    vm.teardown_pod("u2").await.unwrap();
}

#[tokio::test]
async fn host_path_volumes_are_used_in_place_and_others_are_named() {
    let root = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    let spec = PersistentVolumeSpec {
        host_path: Some(HostPathVolumeSource {
            path: disk.path().to_string_lossy().into_owned(),
            type_: Some("Directory".into()),
        }),
        ..Default::default()
    };
    let store = store_with(spec);
    // Go's `pv.beta.kubernetes.io/gid`: an extra group of the pod's containers, unless the
    // pod has it already.
    let mut pv = crate::objects::ObjectStore::persistent_volume(store.as_ref(), "pv-a")
        .await
        .unwrap();
    pv.metadata.annotations = Some(
        [(super::GID_ANNOTATION.to_string(), "1234".to_string())]
            .into_iter()
            .collect(),
    );
    store.put_persistent_volume(pv);
    let vm = VolumeManager::new(root.path(), store, "");
    let p = pod("u3", false, None);
    setup(&vm, &p, "node-a").await.unwrap();
    assert_eq!(vm.volumes("u3").unwrap()["vol"].host_path, disk.path());
    assert_eq!(vm.extra_supplemental_groups(&p), vec![1234]);
    let mut own = p.clone();
    if let Some(spec) = own.spec.as_mut() {
        spec.security_context
            .get_or_insert_with(Default::default)
            .supplemental_groups = Some(vec![1234]);
    }
    assert!(vm.extra_supplemental_groups(&own).is_empty());

    let vm = VolumeManager::new(root.path(), store_with(PersistentVolumeSpec::default()), "");
    let err = setup(&vm, &pod("u4", false, None), "node-a")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("volume vol: persistentVolume pv-a: no source volumes are not supported"),
        "{err}"
    );
}
