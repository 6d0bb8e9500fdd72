//! CSI volumes end to end against the real control plane (v1.20.2) and containerd, with the
//! project's CSI test driver (`kubelet-rs-csi-test-driver`, a separate process: real gRPC on
//! real sockets, real bind mounts) registered through the kubelet's plugin manager:
//!
//! - the driver registers: `CSINode` lists it;
//! - a pod's claim, bound by the PV controller to a CSI PersistentVolume of the driver
//!   (its CSIDriver object: `attachRequired: false`, `podInfoOnMount: true`), is staged at
//!   Go's `globalmount` and published at the pod's `kubernetes.io~csi/<pv>/mount` with the
//!   volume's attributes and the pod's; the pod's write lands in the driver's volume;
//! - while the driver fails `NodePublishVolume`, a second pod stays `ContainerCreating` with
//!   a `FailedMount` event naming the failure and the first keeps running; once the driver
//!   recovers the second pod starts (no kubelet restart);
//! - an inline (ephemeral) volume of the driver in the same pod is published only (no
//!   staging), with `csi.storage.k8s.io/ephemeral: "true"`;
//! - the pods deleted: each volume is unpublished, then unstaged, and Go's directories go.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;
mod csi_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, phase, start_built_configured};
use csi_common::{
    calls, claim, create_csi_driver, csi_pv, failed_mount, has_call, with_claim, TestDriver,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Volume, VolumeMount};
use k8s_openapi::api::storage::v1::CSIDriverSpec;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_cm::csi::node_service::GrpcCsiNodeService;
use kubelet_cm::csi::CsiDrivers;

const LONG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_volumes_are_staged_published_retried_and_torn_down() {
    let drivers = Arc::new(CsiDrivers::default());
    let service = Arc::new(GrpcCsiNodeService::new(drivers.clone()));
    // Volumes measured every second (Go's default: a minute).
    let Some(node) = start_built_configured(
        "cluster-csi-vol",
        |c| c.volume_stats_agg_period = Duration::from_secs(1),
        move |b| b.csi_node_service(service),
    )
    .await
    else {
        return;
    };
    let ns = node.et.namespace.clone();
    let root = node.et.root_dir();
    let test_driver = TestDriver::start(&node, drivers).await;
    let driver = test_driver.name.clone();
    let (calls_file, fail_file, data_dir) = (
        test_driver.calls_file.clone(),
        test_driver.fail_file.clone(),
        test_driver.data_dir.clone(),
    );

    let pp = PostParams::default();
    let csidrivers = create_csi_driver(
        &node,
        &driver,
        CSIDriverSpec {
            attach_required: Some(false),
            pod_info_on_mount: Some(true),
            volume_lifecycle_modes: Some(vec!["Persistent".into(), "Ephemeral".into()]),
            ..Default::default()
        },
    )
    .await;
    let class = format!("csi-{ns}");
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    let (pv1, pv2) = (format!("{ns}-a"), format!("{ns}-b"));
    for (pv, c) in [(&pv1, "claim-a"), (&pv2, "claim-b")] {
        // Go's `pv.beta.kubernetes.io/gid`: the pod's containers get the group.
        let mut volume = csi_pv(pv, &driver, &class);
        volume.metadata.annotations = Some(BTreeMap::from([(
            "pv.beta.kubernetes.io/gid".to_string(),
            "4242".to_string(),
        )]));
        pvs.create(&pp, &volume).await.unwrap();
        claims
            .create(&pp, &claim(c, &ns, &class, pv))
            .await
            .unwrap();
    }
    let pods = node.pods();
    let mut p1 = with_claim(
        node.pod(
            "one",
            "echo hello > /data/hello; id -G > /scratch/groups; echo inline > /scratch/note; sleep 3600",
            "Always",
        ),
        "claim-a",
    );
    // And an inline (ephemeral) volume of the driver.
    if let Some(spec) = p1.spec.as_mut() {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: "scratch".into(),
            csi: Some(k8s_openapi::api::core::v1::CSIVolumeSource {
                driver: driver.clone(),
                volume_attributes: Some(BTreeMap::from([("size".into(), "10Mi".into())])),
                ..Default::default()
            }),
            ..Default::default()
        });
        spec.containers[0]
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: "scratch".into(),
                mount_path: "/scratch".into(),
                ..Default::default()
            });
    }
    pods.create(&pp, &p1).await.unwrap();
    let running = |name: &'static str| cluster_common::running(&pods, name, LONG);
    let one = running("one").await;
    let uid1 = one.metadata.uid.clone().unwrap();
    let handle1 = format!("handle-{pv1}");
    eventually(
        Duration::from_secs(30),
        "the pod's write in the driver's volume",
        || {
            let f = data_dir.join(&handle1).join("hello");
            async move { (std::fs::read_to_string(f).ok()? == "hello\n").then_some(()) }
        },
    )
    .await;
    let seen = calls(&calls_file);
    let publish = seen
        .iter()
        .find(|c| c["method"] == "NodePublishVolume" && c["volume"] == handle1.as_str())
        .expect("NodePublishVolume")
        .clone();
    let staging = root.join(format!("plugins/kubernetes.io/csi/pv/{pv1}/globalmount"));
    let target = root.join(format!("pods/{uid1}/volumes/kubernetes.io~csi/{pv1}/mount"));
    assert_eq!(publish["staging"], staging.display().to_string());
    assert_eq!(publish["target"], target.display().to_string());
    assert_eq!(publish["readonly"], false);
    assert_eq!(publish["accessMode"], 1, "SINGLE_NODE_WRITER");
    assert_eq!(publish["context"]["color"], "blue");
    assert_eq!(publish["context"]["csi.storage.k8s.io/pod.name"], "one");
    assert_eq!(
        publish["context"]["csi.storage.k8s.io/pod.namespace"],
        ns.as_str()
    );
    assert_eq!(
        publish["context"]["csi.storage.k8s.io/pod.uid"],
        uid1.as_str()
    );
    assert_eq!(publish["context"]["csi.storage.k8s.io/ephemeral"], "false");
    assert!(has_call(&seen, "NodeStageVolume", &handle1));
    let inline = seen
        .iter()
        .find(|c| {
            c["method"] == "NodePublishVolume"
                && c["context"]["csi.storage.k8s.io/ephemeral"] == "true"
        })
        .expect("the inline volume published")
        .clone();
    assert_eq!(inline["staging"], "");
    assert_eq!(inline["context"]["size"], "10Mi");
    assert_eq!(
        inline["target"],
        root.join(format!(
            "pods/{uid1}/volumes/kubernetes.io~csi/scratch/mount"
        ))
        .display()
        .to_string()
    );
    let inline_handle = inline["volume"].as_str().unwrap().to_string();
    assert!(inline_handle.starts_with("csi-"), "{inline_handle}");
    eventually(
        Duration::from_secs(30),
        "the pod's write in the inline volume",
        || {
            let f = data_dir.join(&inline_handle).join("note");
            async move { (std::fs::read_to_string(f).ok()? == "inline\n").then_some(()) }
        },
    )
    .await;
    let groups = std::fs::read_to_string(data_dir.join(&inline_handle).join("groups")).unwrap();
    assert!(
        groups.split_whitespace().any(|g| g == "4242"),
        "the volume's gid among the container's groups: {groups}"
    );

    // The driver's NodeGetVolumeStats in the summary (with the claim) and the metrics.
    let stats = node.handle.stats().expect("the node is measured");
    let volume = eventually(LONG, "the claim's volume in the summary", || {
        let (stats, handle) = (stats.clone(), node.handle.clone());
        async move {
            let summary = stats.summary_of(&handle, false).await.ok()?;
            let pod = summary.pods.into_iter().find(|p| p.pod_ref.name == "one")?;
            let v = pod.volume.into_iter().find(|v| v.name == "data")?;
            (v.fs.used_bytes == Some(6)).then_some(v)
        }
    })
    .await;
    let claim_ref = volume.pvc_ref.clone().expect("pvcRef");
    assert_eq!(
        (claim_ref.name.as_str(), claim_ref.namespace.as_str()),
        ("claim-a", ns.as_str())
    );
    assert!(volume.fs.capacity_bytes.unwrap_or(0) > 0, "{volume:?}");
    assert!(volume.fs.inodes.unwrap_or(0) > 0, "{volume:?}");
    assert_eq!(
        volume.fs.inodes_used,
        Some(2),
        "the root and hello: {volume:?}"
    );
    let metrics = node.handle.metrics().render();
    let series = format!(
        "kubelet_volume_stats_used_bytes{{namespace=\"{ns}\",persistentvolumeclaim=\"claim-a\"}} 6"
    );
    assert!(metrics.contains(&series), "{series} in:\n{metrics}");
    assert!(metrics.contains("# TYPE kubelet_volume_stats_capacity_bytes gauge"));

    // A failing driver: the second pod waits with the reason, the first keeps running.
    std::fs::write(&fail_file, "").unwrap();
    let p2 = with_claim(node.pod("two", "sleep 3600", "Always"), "claim-b");
    pods.create(&pp, &p2).await.unwrap();
    // (An earlier FailedMount may say the claim is not bound yet: the PV controller binds it
    // while the pod is already on the node, and the kubelet retries.)
    let failed = failed_mount(&node, "two", "injected NodePublishVolume failure", LONG).await;
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("MountVolume.SetUp failed for volume")
            && message.contains("injected NodePublishVolume failure"),
        "{message}"
    );
    let two = pods.get("two").await.unwrap();
    let waiting = two
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c[0].state.as_ref()?.waiting.as_ref()?.reason.clone());
    assert_eq!(waiting.as_deref(), Some("ContainerCreating"));
    assert_eq!(phase(&pods.get("one").await.unwrap()), "Running");
    std::fs::remove_file(&fail_file).unwrap();
    let two = running("two").await;
    let uid2 = two.metadata.uid.clone().unwrap();

    // Deleted: unpublished, unstaged, Go's directories gone.
    for name in ["one", "two"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let handle2 = format!("handle-{pv2}");
    eventually(LONG, "both volumes unpublished and unstaged", || {
        let (calls_file, h1, h2) = (calls_file.clone(), handle1.clone(), handle2.clone());
        async move {
            let c = calls(&calls_file);
            let persistent = [&h1, &h2].iter().all(|h| {
                has_call(&c, "NodeUnpublishVolume", h) && has_call(&c, "NodeUnstageVolume", h)
            });
            let inline = c.iter().any(|x| {
                x["method"] == "NodeUnpublishVolume"
                    && x["volume"].as_str().is_some_and(|v| v.starts_with("csi-"))
            });
            (persistent && inline).then_some(())
        }
    })
    .await;
    eventually(Duration::from_secs(30), "directories removed", || {
        let dirs = [
            root.join(format!("plugins/kubernetes.io/csi/pv/{pv1}")),
            root.join(format!("plugins/kubernetes.io/csi/pv/{pv2}")),
            root.join(format!("pods/{uid1}")),
            root.join(format!("pods/{uid2}")),
        ];
        async move { dirs.iter().all(|d| !d.exists()).then_some(()) }
    })
    .await;
    assert!(
        data_dir.join(&handle1).join("hello").exists(),
        "the data stays with the driver"
    );

    let dp = DeleteParams::default();
    for c in ["claim-a", "claim-b"] {
        let _ = claims.delete(c, &dp).await;
    }
    for pv in [&pv1, &pv2] {
        let _ = pvs.delete(pv, &dp).await;
    }
    let _ = csidrivers.delete(&driver, &dp).await;
    test_driver.finish(&node).await;
    node.finish().await;
}
