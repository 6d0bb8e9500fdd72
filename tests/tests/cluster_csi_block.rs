//! A raw block CSI volume (`volumeMode: Block`, in a container's `volumeDevices`) against the
//! real control plane (v1.20.2) and containerd, with the project's CSI test driver (a loop
//! device per block volume): staged at Go's `volumeDevices/staging/<pv>` and published on
//! Go's `volumeDevices/publish/<pv>/<pod-uid>` with the `Block` access type, mapped (the
//! global map path's bind file, the pod's link), the device at `/dev/xvda` in the container
//! (what it writes is on the device); the pod deleted: unmapped, unpublished, unstaged, the
//! volume's directories gone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;
mod csi_common;

use std::time::Duration;

use cluster_common::{eventually, running};
use csi_common::{claim, csi_pv, start_with_driver};
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Volume,
    VolumeDevice,
};
use k8s_openapi::api::storage::v1::CSIDriverSpec;
use kube::api::{DeleteParams, PostParams};
use kube::Api;

const LONG: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_block_csi_volume_is_the_containers_device_at_gos_paths() {
    let Some((node, test_driver, csidrivers)) = start_with_driver(
        "cluster-csi-block",
        CSIDriverSpec {
            attach_required: Some(false),
            ..Default::default()
        },
    )
    .await
    else {
        return;
    };
    let ns = node.et.namespace.clone();
    let driver = test_driver.name.clone();
    let pp = PostParams::default();
    let (class, pv) = (format!("csi-{ns}"), format!("{ns}-raw"));
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    let mut volume = csi_pv(&pv, &driver, &class);
    volume.spec.as_mut().unwrap().volume_mode = Some("Block".into());
    pvs.create(&pp, &volume).await.unwrap();
    let mut c = claim("raw", &ns, &class, &pv);
    c.spec.as_mut().unwrap().volume_mode = Some("Block".into());
    claims.create(&pp, &c).await.unwrap();
    let mut pod = node.pod(
        "raw",
        "printf hello | dd of=/dev/xvda conv=notrunc && exec sleep 3600",
        "Always",
    );
    {
        let spec = pod.spec.as_mut().unwrap();
        spec.volumes = Some(vec![Volume {
            name: "raw".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: "raw".into(),
                read_only: None,
            }),
            ..Default::default()
        }]);
        spec.containers[0].volume_devices = Some(vec![VolumeDevice {
            name: "raw".into(),
            device_path: "/dev/xvda".into(),
        }]);
    }
    let pods = node.pods();
    pods.create(&pp, &pod).await.unwrap();
    let p = running(&pods, "raw", LONG).await;
    let uid = p.metadata.uid.clone().unwrap();
    let handle = format!("handle-{pv}");
    let image = test_driver.data_dir.join(format!("{handle}.img"));
    eventually(Duration::from_secs(30), "hello on the device", || {
        let image = image.clone();
        async move {
            std::fs::read(image)
                .ok()?
                .starts_with(b"hello")
                .then_some(())
        }
    })
    .await;

    let root = node.et.root_dir();
    let base = root.join("plugins/kubernetes.io/csi/volumeDevices");
    let (staging, publish) = (
        base.join("staging").join(&pv),
        base.join("publish").join(&pv).join(&uid),
    );
    let calls = test_driver.calls();
    let stage = calls
        .iter()
        .find(|c| c["method"] == "NodeStageVolume" && c["volume"] == handle.as_str())
        .expect("NodeStageVolume");
    assert_eq!(stage["staging"], staging.display().to_string());
    assert_eq!(stage["block"], true);
    let publish_call = calls
        .iter()
        .find(|c| c["method"] == "NodePublishVolume" && c["volume"] == handle.as_str())
        .expect("NodePublishVolume");
    assert_eq!(publish_call["target"], publish.display().to_string());
    assert_eq!(publish_call["staging"], staging.display().to_string());
    assert_eq!(publish_call["block"], true);
    assert_eq!(publish_call["mountFlags"], serde_json::json!([]));
    let link = root
        .join("pods")
        .join(&uid)
        .join("volumeDevices/kubernetes.io~csi")
        .join(&pv);
    assert_eq!(std::fs::read_link(&link).unwrap(), publish);
    let bind_file = base.join(&pv).join("dev").join(&uid);
    assert!(kubelet_core::mount::is_mount_point(&bind_file).unwrap());
    let data: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.join(&pv).join("data/vol_data.json")).unwrap())
            .unwrap();
    assert_eq!(data["specVolID"], pv.as_str());
    assert_eq!(data["volumeHandle"], handle.as_str());
    assert_eq!(data["driverName"], driver.as_str());

    // Deleted: unpublished and unstaged, every path of the volume gone.
    pods.delete("raw", &DeleteParams::default()).await.unwrap();
    eventually(LONG, "unstaged and the volume's directories gone", || {
        let (pods, base, pv) = (pods.clone(), base.clone(), pv.clone());
        let calls = test_driver.calls();
        async move {
            let gone = pods.get_opt("raw").await.ok()?.is_none();
            let unstaged = calls.iter().any(|c| c["method"] == "NodeUnstageVolume");
            let clean = !base.join(&pv).exists()
                && !base.join("staging").join(&pv).exists()
                && !base.join("publish").join(&pv).exists();
            (gone && unstaged && clean).then_some(())
        }
    })
    .await;
    let methods: Vec<String> = test_driver
        .calls()
        .iter()
        .filter(|c| c["volume"] == handle.as_str())
        .map(|c| c["method"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        methods,
        [
            "NodeStageVolume",
            "NodePublishVolume",
            "NodeUnpublishVolume",
            "NodeUnstageVolume"
        ]
    );

    let dp = DeleteParams::default();
    let _ = claims.delete("raw", &dp).await;
    let _ = pvs.delete(&pv, &dp).await;
    let _ = csidrivers.delete(&driver, &dp).await;
    test_driver.finish(&node).await;
    node.finish().await;
}
