//! Expanding CSI volumes on the node (`NodeExpandVolume`) against the real control plane
//! (v1.20.2) and containerd, with the project's CSI test driver and the test acting as the
//! external resizer (none is packaged here): it grows the claim's request (the API server
//! accepts it: the StorageClass allows expansion), then, as a resizer does after the
//! controller's part, grows the PV's capacity and marks the claim `FileSystemResizePending`.
//!
//! - in use: the running pod's next sync expands the volume at the pod's target path (Go's
//!   online expansion), the claim's `status.capacity` becomes 2Gi and the condition goes, and
//!   the pod gets `FileSystemResizeSuccessful`;
//! - before mounting: a claim whose resize is pending when its pod starts is expanded right
//!   after `NodeStageVolume`, at the staging path (Go's order), and its status updated too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;
mod csi_common;

use std::time::Duration;

use cluster_common::{eventually, running};
use csi_common::{claim, csi_pv, start_with_driver, with_claim};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriverSpec, StorageClass};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Api;

const LONG: Duration = Duration::from_secs(120);
const TWO_GI: i64 = 2 << 30;

/// What a resizer does once the controller side is done: the PV's capacity grown, the claim
/// marked for the node's part.
async fn resize_as_the_resizer(
    pvs: &Api<PersistentVolume>,
    claims: &Api<PersistentVolumeClaim>,
    pv: &str,
    claim: &str,
) {
    let pp = PatchParams::default();
    pvs.patch(
        pv,
        &pp,
        &Patch::Merge(serde_json::json!({"spec": {"capacity": {"storage": "2Gi"}}})),
    )
    .await
    .unwrap();
    claims
        .patch_status(
            claim,
            &pp,
            &Patch::Merge(serde_json::json!({"status": {"conditions": [{
                "type": "FileSystemResizePending", "status": "True",
                "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
            }]}})),
        )
        .await
        .unwrap();
}

/// The claim's status once the node finished: 2Gi and no resize condition.
async fn resize_finished(claims: &Api<PersistentVolumeClaim>, name: &str) {
    eventually(LONG, "the claim's status at 2Gi", || {
        let (claims, name) = (claims.clone(), name.to_string());
        async move {
            let c = claims.get(&name).await.ok()?;
            let status = c.status?;
            let capacity = status.capacity?.get("storage")?.0.clone();
            let pending = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "FileSystemResizePending");
            (capacity == "2Gi" && !pending).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_volumes_are_expanded_on_the_node_in_use_and_before_mounting() {
    let Some((node, test_driver, csidrivers)) = start_with_driver(
        "cluster-csi-expand",
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
    let class = format!("csi-{ns}");
    let classes: Api<StorageClass> = Api::all(node.admin.clone());
    classes
        .create(
            &pp,
            &StorageClass {
                metadata: csi_common::meta(&class, None),
                provisioner: driver.clone(),
                allow_volume_expansion: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    let (pv1, pv2) = (format!("{ns}-grow"), format!("{ns}-grown"));
    for (pv, c) in [(&pv1, "grow"), (&pv2, "grown")] {
        pvs.create(&pp, &csi_pv(pv, &driver, &class)).await.unwrap();
        claims
            .create(&pp, &claim(c, &ns, &class, pv))
            .await
            .unwrap();
    }
    let pods = node.pods();
    pods.create(
        &pp,
        &with_claim(node.pod("app", "exec sleep 3600", "Always"), "grow"),
    )
    .await
    .unwrap();
    let app = running(&pods, "app", LONG).await;
    let uid = app.metadata.uid.clone().unwrap();
    let target = node
        .et
        .root_dir()
        .join("pods")
        .join(&uid)
        .join("volumes/kubernetes.io~csi")
        .join(&pv1)
        .join("mount");
    let staging = |pv: &str| {
        node.et
            .root_dir()
            .join("plugins/kubernetes.io/csi/pv")
            .join(pv)
            .join("globalmount")
            .display()
            .to_string()
    };
    // Both claims bound, their status at the PV's 1Gi, before anything is resized (a claim
    // bound later would take the grown capacity from the PV at once).
    for name in ["grow", "grown"] {
        eventually(LONG, "the claim bound at 1Gi", || {
            let claims = claims.clone();
            async move {
                let c = claims.get(name).await.ok()?;
                (c.status?.capacity?.get("storage")?.0 == "1Gi").then_some(())
            }
        })
        .await;
    }

    // In use: the user grows the request, the resizer the volume; a pod update syncs it.
    claims
        .patch(
            "grow",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}),
            ),
        )
        .await
        .unwrap();
    resize_as_the_resizer(&pvs, &claims, &pv1, "grow").await;
    pods.patch(
        "app",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"annotations": {"resize": "now"}}})),
    )
    .await
    .unwrap();
    resize_finished(&claims, "grow").await;
    let expand = |volume: String| {
        let calls = test_driver.calls();
        calls
            .into_iter()
            .find(|c| c["method"] == "NodeExpandVolume" && c["volume"] == volume.as_str())
    };
    let call = expand(format!("handle-{pv1}")).expect("NodeExpandVolume for the pod's volume");
    assert_eq!(call["volumePath"], target.display().to_string());
    assert_eq!(call["staging"], staging(&pv1));
    assert_eq!(call["requiredBytes"], TWO_GI);
    assert_eq!(call["accessMode"], 1, "SINGLE_NODE_WRITER");
    let events: Api<Event> = Api::namespaced(node.admin.clone(), &ns);
    let lp = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
    let ok = eventually(
        Duration::from_secs(30),
        "FileSystemResizeSuccessful",
        || {
            let (events, lp) = (events.clone(), lp.clone());
            async move {
                let list = events.list(&lp).await.ok()?;
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("FileSystemResizeSuccessful"))
            }
        },
    )
    .await;
    assert_eq!(
        ok.message.as_deref(),
        Some(format!("MountVolume.NodeExpandVolume succeeded for volume {pv1:?} ").as_str())
    );
    assert_eq!(
        running(&pods, "app", LONG).await.metadata.uid.as_deref(),
        Some(uid.as_str())
    );

    // Before mounting: the resize is pending when the pod starts; expanded after staging.
    resize_as_the_resizer(&pvs, &claims, &pv2, "grown").await;
    pods.create(
        &pp,
        &with_claim(node.pod("late", "exec sleep 3600", "Always"), "grown"),
    )
    .await
    .unwrap();
    running(&pods, "late", LONG).await;
    resize_finished(&claims, "grown").await;
    let call = expand(format!("handle-{pv2}")).expect("NodeExpandVolume after staging");
    assert_eq!(call["volumePath"], staging(&pv2));
    assert_eq!(call["staging"], staging(&pv2));
    let methods: Vec<String> = test_driver
        .calls()
        .iter()
        .filter(|c| c["volume"] == format!("handle-{pv2}").as_str())
        .map(|c| c["method"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        methods,
        ["NodeStageVolume", "NodeExpandVolume", "NodePublishVolume"],
        "Go's order"
    );

    let dp = DeleteParams::default();
    for p in ["app", "late"] {
        let _ = pods.delete(p, &dp).await;
    }
    eventually(LONG, "pods gone", || {
        let pods = pods.clone();
        async move {
            let left = pods.list(&ListParams::default()).await.ok()?.items.len();
            (left == 0).then_some(())
        }
    })
    .await;
    for (pv, c) in [(&pv1, "grow"), (&pv2, "grown")] {
        let _ = claims.delete(c, &dp).await;
        let _ = pvs.delete(pv, &dp).await;
    }
    let _ = classes.delete(&class, &dp).await;
    let _ = csidrivers.delete(&driver, &dp).await;
    test_driver.finish(&node).await;
    node.finish().await;
}
