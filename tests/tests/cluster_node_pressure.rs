//! The eviction manager's pressure on a cluster member against the real v1.20 control plane:
//! a soft `memory.available` threshold above the machine's memory (always met; its grace
//! period is longer than the test, so nothing is evicted and the shared machine is not
//! touched) makes the Node's MemoryPressure True with Go's reason and message, records Go's
//! `NodeHasInsufficientMemory` event, and the node lifecycle controller taints the node
//! `node.kubernetes.io/memory-pressure:NoSchedule`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, start_engine_configured};
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::Api;
use kubelet_core::eviction::EvictionConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_pressure_reaches_the_node_condition_and_its_taint() {
    let Some(node) = start_engine_configured(
        "cluster-pressure",
        |_| vec![],
        |_| {},
        |c| {
            c.eviction = EvictionConfig {
                soft: [("memory.available".to_string(), "1Pi".to_string())]
                    .into_iter()
                    .collect(),
                soft_grace_period: [("memory.available".to_string(), Duration::from_secs(3600))]
                    .into_iter()
                    .collect(),
                enforce_pods_allocatable: false,
                local_storage_capacity_isolation: false,
                monitoring_interval: Duration::from_secs(2),
                ..EvictionConfig::disabled()
            };
        },
    )
    .await
    else {
        return;
    };
    let name = node.node_name.clone();
    let nodes = node.nodes();
    let condition = eventually(Duration::from_secs(90), "MemoryPressure True", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            let n = nodes.get_opt(&name).await.ok()??;
            n.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "MemoryPressure" && c.status == "True")
        }
    })
    .await;
    assert_eq!(
        condition.reason.as_deref(),
        Some("KubeletHasInsufficientMemory")
    );
    assert_eq!(
        condition.message.as_deref(),
        Some("kubelet has insufficient memory available")
    );
    assert!(condition.last_transition_time.is_some());
    assert!(node.handle.node_pressure().memory);

    // The node lifecycle controller follows the condition with the taint.
    let taint = eventually(Duration::from_secs(90), "memory-pressure taint", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            let n = nodes.get_opt(&name).await.ok()??;
            n.spec?
                .taints?
                .into_iter()
                .find(|t| t.key == "node.kubernetes.io/memory-pressure")
        }
    })
    .await;
    assert_eq!(taint.effect, "NoSchedule");

    // Go's node event.
    let events: Api<Event> = Api::namespaced(node.admin.clone(), "default");
    eventually(Duration::from_secs(30), "NodeHasInsufficientMemory", || {
        let (events, name) = (events.clone(), name.clone());
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("NodeHasInsufficientMemory")
                    && e.involved_object.name.as_deref() == Some(name.as_str())
            })
        }
    })
    .await;
    node.finish().await;
}
