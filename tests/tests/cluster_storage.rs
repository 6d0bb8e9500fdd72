//! Persistent storage against the real control plane (v1.20.2: scheduler, PV controller,
//! StatefulSet controller) and containerd: a `local` PersistentVolume on this node with a
//! `kubernetes.io/no-provisioner` StorageClass (`WaitForFirstConsumer`) is bound by the
//! control plane to a StatefulSet's claim; the pod writes to it (the write lands in the
//! host directory: a real bind mount); a restarted kubelet keeps the running pod's mount;
//! the pod deleted and re-created by the StatefulSet finds its data; with the StatefulSet
//! scaled to zero nothing of the volume stays mounted and `volumesInUse` is empty.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;

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
