//! A pod watch whose resourceVersion fell out of the apiserver's watch cache (410 Gone) is
//! answered by a relist, which neither loses nor duplicates pods.
//!
//! The kubelet's watch requests last 5s here. Between two of them, 150 changes to a pod of
//! another node (events the kubelet's field selector never shows it) push its last
//! resourceVersion out of the apiserver's pod watch cache (100 events), so the next watch is
//! refused with 410 and the kubelet lists again (visible in the audit log as a second `list
//! pods` by this node).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, phase, start_configured};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kubelet_core::runtime::ContainerState;

fn list_requests(audit: &std::path::Path, user: &str) -> usize {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["stage"] == "ResponseComplete"
                && v["user"]["username"] == user
                && v["verb"] == "list"
                && v["objectRef"]["resource"] == "pods"
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_expired_by_410_relists_without_losing_or_duplicating_pods() {
    let Some(node) = start_configured(
        "cluster-relist",
        |_| vec![],
        |cfg| {
            cfg.pod_watch_timeout_seconds = 5;
        },
    )
    .await
    else {
        return;
    };
    let pods = node.pods();
    let user = format!("system:node:{}", node.node_name);
    let web = node.pod("web", "while true; do sleep 1; done", "Always");
    let uid = pods
        .create(&PostParams::default(), &web)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    eventually(Duration::from_secs(90), "web Running", || {
        let pods = pods.clone();
        async move { (phase(&pods.get("web").await.ok()?) == "Running").then_some(()) }
    })
    .await;
    let containers: Vec<String> = node
        .et
        .containers(&uid)
        .await
        .into_iter()
        .map(|c| c.id)
        .collect();
    let lists_before = list_requests(node.cp.audit_log_path(), &user);
    assert!(lists_before >= 1);

    // A pod of another (absent) node, changed 150 times.
    let mut other: Pod = node.pod("elsewhere", "true", "Never");
    other.spec.as_mut().unwrap().node_name = Some(format!("{}-absent", node.node_name));
    pods.create(&PostParams::default(), &other).await.unwrap();
    for i in 0..150 {
        let mut patch = Pod::default();
        patch.metadata.labels = Some([("n".to_string(), i.to_string())].into_iter().collect());
        pods.patch("elsewhere", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let audit = node.cp.audit_log_path().to_path_buf();
    eventually(Duration::from_secs(60), "a relist after 410", || {
        let audit = audit.clone();
        let user = user.clone();
        async move { (list_requests(&audit, &user) > lists_before).then_some(()) }
    })
    .await;

    // Nothing lost or duplicated: one desired pod, its container untouched; the watch works.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let desired: Vec<String> = node
        .handle
        .pods()
        .iter()
        .map(|p| kubelet_core::pod::full_name(p))
        .collect();
    assert_eq!(desired, vec![format!("{}/web", node.et.namespace)]);
    let now: Vec<String> = node
        .et
        .containers(&uid)
        .await
        .into_iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id)
        .collect();
    assert_eq!(now, containers);
    pods.create(
        &PostParams::default(),
        &node.pod("after", "while true; do sleep 1; done", "Always"),
    )
    .await
    .unwrap();
    eventually(
        Duration::from_secs(90),
        "new pod Running after the relist",
        || {
            let pods = pods.clone();
            async move { (phase(&pods.get("after").await.ok()?) == "Running").then_some(()) }
        },
    )
    .await;
    node.finish().await;
}
