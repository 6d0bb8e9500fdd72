//! A CSI volume whose driver needs attaching (`attachRequired: true`), end to end against the
//! real control plane (v1.20.2: its attach/detach controller) and containerd, with the
//! project's CSI test driver and no external attacher (the test answers for it):
//!
//! - the pod's volume is in the Node's `status.volumesInUse` (Go's unique name,
//!   `kubernetes.io/csi/<driver>^<handle>`) before anything is mounted; the controller creates
//!   the VolumeAttachment Go names (`csi-<sha256(handle, driver, node)>`); the pod waits
//!   (a `FailedMount` saying the volume is not attached according to the node's status) and
//!   nothing is staged;
//! - the test marks the attachment attached, with metadata: the controller adds the volume to
//!   the Node's `status.volumesAttached`, the kubelet stages and publishes it with the
//!   metadata as `publish_context`, and the pod runs;
//! - the pod deleted: unpublished, unstaged, `volumesInUse` empty, and the controller
//!   detaches (the VolumeAttachment is deleted and `volumesAttached` no longer lists it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;
mod csi_common;

use std::time::Duration;

use cluster_common::{eventually, phase};
use csi_common::{claim, csi_pv, failed_mount, has_call, start_with_driver, with_claim};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSIDriverSpec, VolumeAttachment};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use kubelet_core::{attachment_name, unique_volume_name};

const LONG: Duration = Duration::from_secs(120);

fn node_lists(node: &Node, field: &str, unique: &str) -> bool {
    let Some(status) = node.status.as_ref() else {
        return false;
    };
    match field {
        "volumesInUse" => status
            .volumes_in_use
            .as_ref()
            .is_some_and(|v| v.iter().any(|n| n == unique)),
        _ => status
            .volumes_attached
            .as_ref()
            .is_some_and(|v| v.iter().any(|a| a.name == unique)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attachable_csi_volume_waits_for_its_attachment_and_is_detached_after_use() {
    let Some((node, test_driver, csidrivers)) = start_with_driver(
        "cluster-csi-attach",
        CSIDriverSpec {
            attach_required: Some(true),
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
    let pv = format!("{ns}-att");
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    pvs.create(&pp, &csi_pv(&pv, &driver, &class))
        .await
        .unwrap();
    claims
        .create(&pp, &claim("claim", &ns, &class, &pv))
        .await
        .unwrap();
    let handle = format!("handle-{pv}");
    let unique = unique_volume_name(&driver, &handle);
    let va_name = attachment_name(&handle, &driver, &node.node_name);
    let pods = node.pods();
    pods.create(
        &pp,
        &with_claim(
            node.pod("app", "echo hi > /data/hi; sleep 3600", "Always"),
            "claim",
        ),
    )
    .await
    .unwrap();

    // In use, attachment created by the controller, the pod waiting, nothing staged.
    let nodes = node.nodes();
    eventually(LONG, "volumesInUse lists the volume", || {
        let (nodes, name, unique) = (nodes.clone(), node.node_name.clone(), unique.clone());
        async move {
            let n = nodes.get(&name).await.ok()?;
            node_lists(&n, "volumesInUse", &unique).then_some(())
        }
    })
    .await;
    let vas: Api<VolumeAttachment> = Api::all(node.admin.clone());
    let va = eventually(LONG, "the controller's VolumeAttachment", || {
        let (vas, name) = (vas.clone(), va_name.clone());
        async move { vas.get(&name).await.ok() }
    })
    .await;
    assert_eq!(va.spec.attacher, driver);
    assert_eq!(va.spec.node_name, node.node_name);
    assert_eq!(
        va.spec.source.persistent_volume_name.as_deref(),
        Some(pv.as_str())
    );
    let waiting = failed_mount(&node, "app", "not attached according to node status", LONG).await;
    assert!(
        waiting
            .message
            .as_deref()
            .unwrap_or_default()
            .contains(&unique),
        "{waiting:?}"
    );
    let app = pods.get("app").await.unwrap();
    assert_ne!(phase(&app), "Running");
    assert!(!has_call(&test_driver.calls(), "NodeStageVolume", &handle));

    // The test answers as the external attacher would.
    let status = serde_json::json!({"status": {
        "attached": true,
        "attachmentMetadata": {"devicePath": "/dev/kubelet-rs-test"}
    }});
    vas.patch_status(&va_name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    eventually(LONG, "pod app Running", || {
        let pods = pods.clone();
        async move { (phase(&pods.get("app").await.ok()?) == "Running").then_some(()) }
    })
    .await;
    let n = nodes.get(&node.node_name).await.unwrap();
    assert!(node_lists(&n, "volumesAttached", &unique), "{:?}", n.status);
    let calls = test_driver.calls();
    for method in ["NodeStageVolume", "NodePublishVolume"] {
        let call = calls
            .iter()
            .find(|c| c["method"] == method && c["volume"] == handle.as_str())
            .unwrap_or_else(|| panic!("{method}: {calls:?}"));
        assert_eq!(
            call["publishContext"],
            serde_json::json!({"devicePath": "/dev/kubelet-rs-test"}),
            "{method}"
        );
    }

    // Deleted: torn down, no longer in use, detached by the controller.
    pods.delete("app", &DeleteParams::default()).await.unwrap();
    eventually(LONG, "unpublished and unstaged", || {
        let (calls, handle) = (test_driver.calls(), handle.clone());
        async move {
            (has_call(&calls, "NodeUnpublishVolume", &handle)
                && has_call(&calls, "NodeUnstageVolume", &handle))
            .then_some(())
        }
    })
    .await;
    eventually(
        LONG,
        "detached: no VolumeAttachment, not in use or attached",
        || {
            let (nodes, vas) = (nodes.clone(), vas.clone());
            let (name, unique, va_name) = (node.node_name.clone(), unique.clone(), va_name.clone());
            async move {
                let n = nodes.get(&name).await.ok()?;
                let gone =
                    matches!(vas.get(&va_name).await, Err(kube::Error::Api(e)) if e.code == 404);
                (gone
                    && !node_lists(&n, "volumesInUse", &unique)
                    && !node_lists(&n, "volumesAttached", &unique))
                .then_some(())
            }
        },
    )
    .await;

    let dp = DeleteParams::default();
    let _ = claims.delete("claim", &dp).await;
    let _ = pvs.delete(&pv, &dp).await;
    let _ = csidrivers.delete(&driver, &dp).await;
    test_driver.finish(&node).await;
    node.finish().await;
}
