//! The eviction manager's pressure on a cluster member against the real v1.20 control plane:
//! a soft `memory.available` threshold above the machine's memory (always met; its grace
//! period is longer than the test, so nothing is evicted and the shared machine is not
//! touched) makes the Node's MemoryPressure True with Go's reason and message, records Go's
//! `NodeHasInsufficientMemory` event, and the node lifecycle controller taints the node
//! `node.kubernetes.io/memory-pressure:NoSchedule`.
//!
//! Disk pressure on a small dedicated filesystem (the member's root dir and pod logs on a
//! 64 MiB tmpfs, [`SmallFs`]; images on containerd's own disk, so nodefs has no node-level
//! reclaim, as in Go with a dedicated image filesystem): a pod filling it is evicted and its
//! status — phase `Failed`, reason `Evicted`, Go's message — reaches the API server while the
//! pod object stays (Go's kubelet never deletes an evicted pod; whoever owns it does). The
//! Node's DiskPressure is True with Go's reason and message, the node lifecycle controller
//! (v1.20.2, taint-nodes-by-condition) taints it `node.kubernetes.io/disk-pressure:NoSchedule`;
//! once the pod is deleted and its log gone, the condition returns to False after the
//! transition period and the controller removes the taint.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, phase, start_engine_configured, start_prepared};
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod, Taint};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use kubelet_core::eviction::EvictionConfig;
use kubelet_core::logs::ContainerLogConfig;
use kubelet_tests::small_fs::SmallFs;

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

async fn disk_condition(nodes: &Api<Node>, name: &str) -> Option<NodeCondition> {
    let n = nodes.get_opt(name).await.ok()??;
    n.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "DiskPressure")
}

async fn disk_taint(nodes: &Api<Node>, name: &str) -> Option<Option<Taint>> {
    let n = nodes.get_opt(name).await.ok()??;
    Some(
        n.spec?
            .taints
            .unwrap_or_default()
            .into_iter()
            .find(|t| t.key == "node.kubernetes.io/disk-pressure"),
    )
}

/// The evicted hog pod's object: still there, still Failed, not being deleted.
async fn evicted_pod_stays(pods: &Api<Pod>, evicted: &Pod) {
    let p = pods
        .get_opt("hog")
        .await
        .unwrap()
        .expect("the evicted pod stays");
    assert_eq!(phase(&p), "Failed");
    assert!(p.metadata.deletion_timestamp.is_none());
    assert_eq!(p.metadata.uid, evicted.metadata.uid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_pod_status_reaches_the_api_server_and_the_pod_stays() {
    // The evicted pod's container and log go within seconds (as in Go), so the condition
    // stays True only for this long after: time for the controller to taint the node.
    const TRANSITION: Duration = Duration::from_secs(30);
    let Some((node, fs)) = start_prepared(
        "cluster-disk",
        |et| SmallFs::mount_for(et, 64),
        |_| vec![],
        |_| {},
        |c| {
            c.eviction = EvictionConfig {
                hard: [("nodefs.available".to_string(), "24Mi".to_string())]
                    .into_iter()
                    .collect(),
                enforce_pods_allocatable: false,
                local_storage_capacity_isolation: false,
                monitoring_interval: Duration::from_secs(2),
                pressure_transition_period: TRANSITION,
                ..EvictionConfig::disabled()
            };
            // The log is the load: no rotation.
            c.container_logs = ContainerLogConfig {
                max_size: 1 << 30,
                ..ContainerLogConfig::default()
            };
        },
    )
    .await
    else {
        return;
    };
    let name = node.node_name.clone();
    let nodes = node.nodes();
    let pods = node.pods();
    eventually(Duration::from_secs(60), "DiskPressure False", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move { (disk_condition(&nodes, &name).await?.status == "False").then_some(()) }
    })
    .await;

    // 45 MiB of log on the 64 MiB filesystem leaves less than 24 MiB.
    let hog = node.pod(
        "hog",
        "dd if=/dev/zero bs=1048576 count=45 2>/dev/null; exec sleep 3600",
        "Always",
    );
    pods.create(&PostParams::default(), &hog).await.unwrap();
    let evicted = eventually(Duration::from_secs(120), "hog Failed in the API", || {
        let pods = pods.clone();
        async move {
            let p = pods.get_opt("hog").await.ok()??;
            (phase(&p) == "Failed").then_some(p)
        }
    })
    .await;
    let status = evicted.status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("Evicted"), "{status:?}");
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 24Mi, available: "
        ),
        "{message}"
    );
    assert!(
        message.contains("Container main was using ")
            && message.ends_with("request is 0, has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    assert!(evicted.metadata.deletion_timestamp.is_none());

    // The condition with Go's reason and message, and the controller's taint.
    let condition = eventually(Duration::from_secs(60), "DiskPressure True", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            disk_condition(&nodes, &name)
                .await
                .filter(|c| c.status == "True")
        }
    })
    .await;
    assert_eq!(condition.reason.as_deref(), Some("KubeletHasDiskPressure"));
    assert_eq!(
        condition.message.as_deref(),
        Some("kubelet has disk pressure")
    );
    let taint = eventually(Duration::from_secs(90), "disk-pressure taint", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move { disk_taint(&nodes, &name).await? }
    })
    .await;
    assert_eq!(taint.effect, "NoSchedule");

    // Go's Evicted event on the pod.
    let events: Api<Event> = Api::namespaced(node.admin.clone(), &node.et.namespace);
    let event = eventually(Duration::from_secs(30), "the Evicted event", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("Evicted")
                    && e.involved_object.name.as_deref() == Some("hog")
            })
        }
    })
    .await;
    assert_eq!(event.message.as_deref(), Some(message.as_str()));
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // The kubelet leaves the evicted pod object alone: still there, still Failed.
    tokio::time::sleep(Duration::from_secs(10)).await;
    evicted_pod_stays(&pods, &evicted).await;

    // Its stopped container goes, and the container's log with it (Go's container deletor
    // for evicted pods): the space comes back while the pod object stays, the condition
    // returns to False after the transition period and the taint goes.
    let condition = eventually(Duration::from_secs(90), "DiskPressure False", || {
        let (nodes, name) = (nodes.clone(), name.clone());
        async move {
            disk_condition(&nodes, &name)
                .await
                .filter(|c| c.status == "False")
        }
    })
    .await;
    assert_eq!(
        condition.reason.as_deref(),
        Some("KubeletHasNoDiskPressure")
    );
    assert_eq!(
        condition.message.as_deref(),
        Some("kubelet has no disk pressure")
    );
    eventually(
        Duration::from_secs(90),
        "disk-pressure taint removed",
        || {
            let (nodes, name) = (nodes.clone(), name.clone());
            async move { disk_taint(&nodes, &name).await?.is_none().then_some(()) }
        },
    )
    .await;
    assert!(fs.available() > 24 << 20, "{} bytes free", fs.available());
    evicted_pod_stays(&pods, &evicted).await;

    // Its owner (here the test) deletes it: gone.
    pods.delete("hog", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "the hog pod gone", || {
        let pods = pods.clone();
        async move { pods.get_opt("hog").await.ok()?.is_none().then_some(()) }
    })
    .await;
    node.finish().await;
    drop(fs);
}
