//! Admission through the whole engine (the simulated runtime, tokio's paused clock): what does
//! not fit is rejected in creation order, and node selectors match the Node object's labels
//! when a lister knows it, the kubelet's own labels otherwise.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::lifecycle_tests::{config, start_customised, start_with};
use crate::testing::{container, pod, FakeContainerManager, SimRuntime};

fn requesting(name: &str, uid: &str, memory: &str) -> Pod {
    let mut c = container("c", "img:1");
    c.resources = Some(ResourceRequirements {
        requests: Some(
            [("memory".to_string(), Quantity(memory.into()))]
                .into_iter()
                .collect(),
        ),
        ..Default::default()
    });
    pod(name, uid, vec![c])
}

#[tokio::test(start_paused = true)]
async fn admission_rejects_what_does_not_fit_in_creation_order() {
    let mut first = requesting("a", "u1", "800Mi");
    first.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(100).expect("t"),
    ));
    let mut second = requesting("b", "u2", "500Mi");
    second.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(200).expect("t"),
    ));
    let cm =
        FakeContainerManager::with_capacity(&[("cpu", "2"), ("memory", "1Gi"), ("pods", "10")]);
    // Delivered in reverse order: admission still goes by creation time.
    let h = start_with(vec![second, first], Arc::new(SimRuntime::new()), cm, None).await;
    h.until(Duration::from_secs(10), "a running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let s = h.status("u2").expect("rejected status");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("OutOfmemory"));
    assert!(s.message.as_deref().is_some_and(
        |m| m.starts_with("Pod was rejected: Node didn't have enough resource: memory")
    ));
    assert!(h.rt.container_ids("u2", "c").is_empty());
    h.stop().await;
}

/// A [`crate::NodeLister`] holding a fixed Node.
struct FixedNode(Arc<k8s_openapi::api::core::v1::Node>);

impl crate::NodeLister for FixedNode {
    fn node(&self) -> Option<Arc<k8s_openapi::api::core::v1::Node>> {
        Some(self.0.clone())
    }
}

fn selecting(name: &str, uid: &str, key: &str, value: &str) -> Pod {
    let mut p = pod(name, uid, vec![container("c", "img:1")]);
    if let Some(s) = p.spec.as_mut() {
        s.node_selector = Some([(key.to_string(), value.to_string())].into_iter().collect());
    }
    p
}

#[tokio::test(start_paused = true)]
async fn admission_matches_the_node_objects_labels_when_a_lister_knows_it() {
    // The Node object carries a label someone added with kubectl; the kubelet's own
    // configured labels do not have it (and have one the Node lost).
    let node = k8s_openapi::api::core::v1::Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("node-1".into()),
            labels: Some(
                [("e2e-label".to_string(), "yes".to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    let lister = Arc::new(FixedNode(Arc::new(node)));
    let h = start_customised(
        vec![
            selecting("added", "u1", "e2e-label", "yes"),
            selecting("own", "u2", "own-label", "yes"),
        ],
        Arc::new(SimRuntime::new()),
        FakeContainerManager::default(),
        None,
        |b| {
            let mut c = config();
            c.node_labels = [("own-label".to_string(), "yes".to_string())]
                .into_iter()
                .collect();
            b.config(c).node_lister(lister)
        },
    )
    .await;
    h.until(
        Duration::from_secs(10),
        "the Node-labelled pod running",
        |h| h.phase("u1") == "Running",
    )
    .await;
    let s = h.status("u2").expect("rejected status");
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("NodeAffinity"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Predicate NodeAffinity failed")
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn admission_uses_the_own_labels_without_a_node_object() {
    let h = start_customised(
        vec![selecting("own", "u1", "own-label", "yes")],
        Arc::new(SimRuntime::new()),
        FakeContainerManager::default(),
        None,
        |b| {
            let mut c = config();
            c.node_labels = [("own-label".to_string(), "yes".to_string())]
                .into_iter()
                .collect();
            b.config(c)
        },
    )
    .await;
    h.until(Duration::from_secs(10), "running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    h.stop().await;
}
