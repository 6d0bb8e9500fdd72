//! Persistent storage against the real control plane (v1.20.2: scheduler, PV controller,
//! StatefulSet controller) and containerd: a `local` PersistentVolume on this node with a
//! `kubernetes.io/no-provisioner` StorageClass (`WaitForFirstConsumer`) is bound by the
//! control plane to a StatefulSet's claim; the pod writes to it (the write lands in the
//! host directory: a real bind mount); a restarted kubelet keeps the running pod's mount;
//! the pod deleted and re-created by the StatefulSet finds its data; with the StatefulSet
//! scaled to zero nothing of the volume stays mounted and `volumesInUse` is empty.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;
mod csi_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cluster_common::{eventually, phase, start};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, LocalVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec, Pod,
    PodSpec, PodTemplateSpec, VolumeMount, VolumeNodeAffinity, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;

const LONG: Duration = Duration::from_secs(120);

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn storage_class(name: &str) -> StorageClass {
    StorageClass {
        metadata: meta(name),
        provisioner: "kubernetes.io/no-provisioner".into(),
        volume_binding_mode: Some("WaitForFirstConsumer".into()),
        ..Default::default()
    }
}

fn local_pv(name: &str, class: &str, path: &Path, node: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: meta(name),
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(class.into()),
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
                            values: Some(vec![node.into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn stateful_set(class: &str) -> StatefulSet {
    let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
    StatefulSet {
        metadata: meta("db"),
        spec: StatefulSetSpec {
            replicas: Some(1),
            service_name: Some("db".into()),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    automount_service_account_token: Some(false),
                    termination_grace_period_seconds: Some(1),
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some(kubelet_tests::cri::BUSYBOX_IMAGE.into()),
                        command: Some(vec![
                            "sh".into(),
                            "-c".into(),
                            // The first pod stamps the volume; every pod appends its name.
                            "[ -f /data/stamp ] || cat /proc/sys/kernel/random/uuid > /data/stamp; \
                             echo started >> /data/starts; exec sleep 3600"
                                .into(),
                        ]),
                        volume_mounts: Some(vec![VolumeMount {
                            name: "data".into(),
                            mount_path: "/data".into(),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: meta("data"),
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: Some(class.into()),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(BTreeMap::from([(
                            "storage".into(),
                            Quantity("1Gi".into()),
                        )])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    kubelet_core::mount::mount_points_under(dir).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_volume_of_a_stateful_set_survives_pod_and_kubelet_restarts() {
    let Some(mut node) = start("cluster-storage", vec![]).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    let (class, pv_name) = (format!("local-{ns}"), format!("pv-{ns}"));
    let disk = node.et.dir.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let pods_dir = node.et.root_dir().join("pods");
    let classes: Api<StorageClass> = Api::all(node.admin.clone());
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    let sets: Api<StatefulSet> = Api::namespaced(node.admin.clone(), &ns);
    let pods = node.pods();
    let pp = PostParams::default();
    classes.create(&pp, &storage_class(&class)).await.unwrap();
    pvs.create(&pp, &local_pv(&pv_name, &class, &disk, &node.node_name))
        .await
        .unwrap();
    sets.create(&pp, &stateful_set(&class)).await.unwrap();

    let running = |pods: Api<Pod>, old_uid: Option<String>| async move {
        eventually(LONG, "db-0 Running", || {
            let pods = pods.clone();
            let old_uid = old_uid.clone();
            async move {
                let p = pods.get("db-0").await.ok()?;
                let fresh = p.metadata.uid != old_uid;
                (fresh && phase(&p) == "Running").then_some(p)
            }
        })
        .await
    };
    // The scheduler placed the pod here (the only node the volume's affinity allows) and the
    // PV controller bound the claim to the volume.
    let first = running(pods.clone(), None).await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(node.node_name.as_str()));
    let claim = claims.get("data-db-0").await.unwrap();
    assert_eq!(
        claim.spec.and_then(|s| s.volume_name).as_deref(),
        Some(pv_name.as_str())
    );
    let uid1 = first.metadata.uid.clone().unwrap();
    let vol_dir = pods_dir
        .join(&uid1)
        .join("volumes/kubernetes.io~local-volume")
        .join(&pv_name);
    // The pod's write is in the host directory: the volume is a bind mount of it.
    let stamp = eventually(Duration::from_secs(30), "stamp written", || {
        let disk = disk.clone();
        async move { std::fs::read_to_string(disk.join("stamp")).ok() }
    })
    .await;
    assert_eq!(mounts_under(&pods_dir.join(&uid1)), vec![vol_dir.clone()]);
    let container_id = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c[0].container_id.clone())
    };
    let id1 = container_id(&first);

    // A restarted kubelet keeps the running pod's mount and container.
    node.restart_kubelet().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let again = pods.get("db-0").await.unwrap();
    assert_eq!(phase(&again), "Running");
    assert_eq!(container_id(&again), id1, "the container was not restarted");
    assert_eq!(mounts_under(&pods_dir.join(&uid1)), vec![vol_dir.clone()]);
    assert_eq!(
        std::fs::read_to_string(disk.join("starts")).unwrap(),
        "started\n"
    );

    // The pod deleted: the StatefulSet makes it again, and it finds the volume's data.
    pods.delete("db-0", &DeleteParams::default()).await.unwrap();
    let second = running(pods.clone(), Some(uid1.clone())).await;
    let uid2 = second.metadata.uid.clone().unwrap();
    eventually(Duration::from_secs(30), "second start recorded", || {
        let disk = disk.clone();
        async move {
            (std::fs::read_to_string(disk.join("starts")).ok()? == "started\nstarted\n")
                .then_some(())
        }
    })
    .await;
    assert_eq!(std::fs::read_to_string(disk.join("stamp")).unwrap(), stamp);
    eventually(
        Duration::from_secs(30),
        "first pod's directory unmounted and gone",
        || {
            let dir = pods_dir.join(&uid1);
            async move { (!dir.exists()).then_some(()) }
        },
    )
    .await;
    assert_eq!(mounts_under(&pods_dir.join(&uid2)).len(), 1);

    // Scaled to zero: nothing of the volume stays mounted, nothing is reported in use.
    sets.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    eventually(LONG, "db-0 gone and unmounted", || {
        let pods = pods.clone();
        let dir = pods_dir.clone();
        async move {
            let gone = pods.get_opt("db-0").await.ok()?.is_none();
            (gone && mounts_under(&dir).is_empty()).then_some(())
        }
    })
    .await;
    let n = node.nodes().get(&node.node_name).await.unwrap();
    let in_use = n.status.and_then(|s| s.volumes_in_use).unwrap_or_default();
    assert!(in_use.is_empty(), "volumesInUse: {in_use:?}");
    assert!(disk.join("stamp").exists(), "the data stays on the disk");

    let dp = DeleteParams::default();
    let _ = sets.delete("db", &dp).await;
    let _ = claims.delete("data-db-0", &dp).await;
    let _ = pvs.delete(&pv_name, &dp).await;
    let _ = classes.delete(&class, &dp).await;
    node.finish().await;
}

/// A loop device over a sparse file, detached when dropped.
struct LoopDevice(String);

impl LoopDevice {
    fn new(file: &Path, size: u64) -> LoopDevice {
        std::fs::File::create(file).unwrap().set_len(size).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup: {out:?}");
        LoopDevice(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

/// The filesystem type blkid finds on `device` ("" for none).
fn blkid_type(device: &str) -> String {
    let out = std::process::Command::new("blkid")
        .args(["-p", "-s", "TYPE", "-o", "value", device])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The per-mount options of the mount at `path` (from this process's mountinfo).
fn mount_options(path: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(4).map(Path::new) == Some(path)).then(|| f[5].to_string())
    })
}

/// A test's `local` PV on a loop device over `<test dir>/<name>.img` (`size` bytes), with its
/// StorageClass, the PV's spec changed by `edit`; and the API handles for cleaning up.
struct DeviceVolume {
    device: LoopDevice,
    image: PathBuf,
    class: String,
    pv_name: String,
    classes: Api<StorageClass>,
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
}

impl DeviceVolume {
    async fn create(
        node: &cluster_common::ClusterNode,
        name: &str,
        size: u64,
        edit: impl FnOnce(&mut PersistentVolumeSpec),
    ) -> DeviceVolume {
        let ns = &node.et.namespace;
        let (class, pv_name) = (format!("{name}-{ns}"), format!("pv-{name}-{ns}"));
        let image = node.et.dir.path().join(format!("{name}.img"));
        let device = LoopDevice::new(&image, size);
        let classes: Api<StorageClass> = Api::all(node.admin.clone());
        let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), ns);
        let pp = PostParams::default();
        classes.create(&pp, &storage_class(&class)).await.unwrap();
        let mut pv = local_pv(&pv_name, &class, Path::new(&device.0), &node.node_name);
        if let Some(spec) = pv.spec.as_mut() {
            edit(spec);
        }
        pvs.create(&pp, &pv).await.unwrap();
        DeviceVolume {
            device,
            image,
            class,
            pv_name,
            classes,
            pvs,
            claims,
        }
    }

    /// Deletes the claim, the PV and the class (the loop device goes when dropped).
    async fn delete(self, claim: &str) {
        let dp = DeleteParams::default();
        let _ = self.claims.delete(claim, &dp).await;
        let _ = self.pvs.delete(&self.pv_name, &dp).await;
        let _ = self.classes.delete(&self.class, &dp).await;
    }
}

/// A `local` PV on a bare block device (Go's `blockfswithformat`): the kubelet formats it
/// (ext4, the default), mounts it once at Go's device mount path with the PV's options, binds
/// that into each pod using it, and unmounts it after the last pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_volume_on_a_block_device_is_formatted_and_mounted_once_for_its_pods() {
    let Some(node) = start("cluster-storage-block", vec![]).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    // A bind takes noatime; data=ordered is ext4's own and goes to the device mount only.
    let volume = DeviceVolume::create(&node, "block", 64 << 20, |spec| {
        spec.mount_options = Some(vec!["noatime".into(), "data=ordered".into()]);
    })
    .await;
    let (device, pv_name) = (&volume.device, volume.pv_name.clone());
    assert_eq!(blkid_type(&device.0), "", "a blank device");
    let pods = node.pods();
    let pp = PostParams::default();
    volume
        .claims
        .create(
            &pp,
            &csi_common::claim("data", &ns, &volume.class, &pv_name),
        )
        .await
        .unwrap();
    let with_claim = |pod: Pod| csi_common::with_claim(pod, "data");
    let running = |name: &'static str| cluster_common::running(&pods, name, LONG);
    let writer = node.pod("writer", "echo hello > /data/f && exec sleep 3600", "Never");
    pods.create(&pp, &with_claim(writer)).await.unwrap();
    let writer = running("writer").await;

    // Formatted (Go's default ext4) and mounted once at Go's device mount path.
    assert_eq!(blkid_type(&device.0), "ext4");
    let root = node.et.root_dir();
    let global = root
        .join("plugins/kubernetes.io/local-volume/mounts")
        .join(&pv_name);
    assert!(kubelet_core::mount::is_mount_point(&global).unwrap());
    let read = |file: &'static str| {
        let path = global.join(file);
        eventually(Duration::from_secs(30), file, move || {
            let path = path.clone();
            async move { std::fs::read_to_string(path).ok() }
        })
    };
    assert_eq!(read("f").await, "hello\n");
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap();
    let writer_dir = root
        .join("pods")
        .join(uid(&writer))
        .join("volumes/kubernetes.io~local-volume")
        .join(&pv_name);
    let options = mount_options(&writer_dir).expect("the pod's bind mount");
    assert!(options.split(',').any(|o| o == "noatime"), "{options}");

    // A second pod on the node shares the device mount.
    let reader = node.pod(
        "reader",
        "cat /data/f > /data/g && exec sleep 3600",
        "Never",
    );
    pods.create(&pp, &with_claim(reader)).await.unwrap();
    running("reader").await;
    assert_eq!(read("g").await, "hello\n");

    // The writer gone: the reader still has the device mounted.
    pods.delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    eventually(LONG, "writer gone, its directory removed", || {
        let (pods, dir) = (pods.clone(), root.join("pods").join(uid(&writer)));
        async move { (pods.get_opt("writer").await.ok()?.is_none() && !dir.exists()).then_some(()) }
    })
    .await;
    assert!(kubelet_core::mount::is_mount_point(&global).unwrap());

    // The last pod gone: the device is unmounted and its mount path removed; the data stays.
    pods.delete("reader", &DeleteParams::default())
        .await
        .unwrap();
    eventually(LONG, "device unmounted after the last pod", || {
        let global = global.clone();
        async move { (!global.exists()).then_some(()) }
    })
    .await;
    assert_eq!(blkid_type(&device.0), "ext4");
    volume.delete("data").await;
    node.finish().await;
}

/// A `volumeMode: Block` `local` PV in a container's `volumeDevices`: the device node is at
/// its `devicePath` in the container (what the container writes is on the device), mapped at
/// Go's paths (the pod's link to the device, the device bind-mounted on the pod's file under
/// the global map path), and unmapped when the pod goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_block_local_volume_is_the_containers_device() {
    let Some(node) = start("cluster-storage-raw-block", vec![]).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    let volume = DeviceVolume::create(&node, "raw", 8 << 20, |spec| {
        spec.volume_mode = Some("Block".into());
    })
    .await;
    let (device, image, pv_name) = (&volume.device, volume.image.clone(), volume.pv_name.clone());
    let pods = node.pods();
    let pp = PostParams::default();
    let mut claim = csi_common::claim("raw", &ns, &volume.class, &pv_name);
    if let Some(spec) = claim.spec.as_mut() {
        spec.volume_mode = Some("Block".into());
    }
    volume.claims.create(&pp, &claim).await.unwrap();
    let mut pod = node.pod(
        "raw",
        "printf hello | dd of=/dev/xvda conv=notrunc && exec sleep 3600",
        "Never",
    );
    {
        let spec = pod.spec.as_mut().unwrap();
        spec.volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
            name: "raw".into(),
            persistent_volume_claim: Some(
                k8s_openapi::api::core::v1::PersistentVolumeClaimVolumeSource {
                    claim_name: "raw".into(),
                    read_only: None,
                },
            ),
            ..Default::default()
        }]);
        spec.containers[0].volume_devices = Some(vec![k8s_openapi::api::core::v1::VolumeDevice {
            name: "raw".into(),
            device_path: "/dev/xvda".into(),
        }]);
    }
    pods.create(&pp, &pod).await.unwrap();
    let running = cluster_common::running(&pods, "raw", LONG).await;
    // The container's write is on the device (the loop device's backing file).
    eventually(Duration::from_secs(30), "hello on the device", || {
        let image = image.clone();
        async move {
            let bytes = std::fs::read(image).ok()?;
            (bytes.starts_with(b"hello")).then_some(())
        }
    })
    .await;
    let root = node.et.root_dir();
    let uid = running.metadata.uid.clone().unwrap();
    let link = root
        .join("pods")
        .join(&uid)
        .join("volumeDevices/kubernetes.io~local-volume")
        .join(&pv_name);
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new(&device.0));
    let bind_file = root
        .join("plugins/kubernetes.io/local-volume/volumeDevices")
        .join(&pv_name)
        .join(&uid);
    assert!(kubelet_core::mount::is_mount_point(&bind_file).unwrap());

    pods.delete("raw", &DeleteParams::default()).await.unwrap();
    eventually(LONG, "the pod gone and its device unmapped", || {
        let (pods, dir) = (pods.clone(), bind_file.parent().unwrap().to_path_buf());
        async move { (pods.get_opt("raw").await.ok()?.is_none() && !dir.exists()).then_some(()) }
    })
    .await;
    volume.delete("raw").await;
    node.finish().await;
}
