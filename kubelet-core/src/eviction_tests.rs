//! The eviction manager inside the whole engine, on the simulated runtime and the paused
//! clock: pressure from the fake stats provider, the eviction through the pod worker (status
//! phase `Failed`, reason `Evicted`, Go's message, the event), admission under pressure, and
//! a static pod that is never evicted.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::eviction::EvictionConfig;
use crate::testing::{
    container, eventually, CgroupUsage, ContainerBuilder, FakeContainerManager, PodBuilder,
    RecordingSink, SimRuntime, StaticSource,
};
use crate::{Config, Kubelet};

const GIB: u64 = 1 << 30;

#[tokio::test(start_paused = true)]
async fn memory_pressure_evicts_through_the_worker_and_rejects_best_effort_pods() {
    let best_effort = PodBuilder::new("besteffort", "u-be")
        .container(container("app", "busybox"))
        .build();
    let guaranteed = PodBuilder::new("guaranteed", "u-g")
        .container(
            ContainerBuilder::new("app", "busybox")
                .requests(&[("memory", "1Gi"), ("cpu", "100m")])
                .limits(&[("memory", "1Gi"), ("cpu", "100m")])
                .build(),
        )
        .build();
    let static_pod = PodBuilder::new("static", "u-static")
        .container(container("app", "busybox"))
        .build();
    let api = Arc::new(StaticSource::new("api", vec![best_effort, guaranteed]));
    let file = Arc::new(StaticSource::new("file", vec![static_pod]));
    let rt = Arc::new(SimRuntime::new());
    let cm = Arc::new(FakeContainerManager::default());
    let sink = Arc::new(RecordingSink::default());
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: "node-1".into(),
            resolv_conf: Default::default(),
            root_dir: Default::default(),
            eviction: EvictionConfig {
                hard: [("memory.available".to_string(), "2Gi".to_string())].into(),
                monitoring_interval: Duration::from_secs(1),
                pressure_transition_period: Duration::from_secs(30),
                ..EvictionConfig::default()
            },
            ..Config::default()
        })
        .runtime(rt.clone())
        .container_manager(cm.clone())
        .status_sink(sink.clone())
        .source(api.clone())
        .source(file)
        .build()
        .unwrap();
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    let phase = |uid: &str| {
        handle
            .pod_status(uid)
            .and_then(|s| s.phase)
            .unwrap_or_default()
    };
    for uid in ["u-be", "u-g", "u-static"] {
        eventually(Duration::from_secs(30), uid, || async {
            (phase(uid) == "Running").then_some(())
        })
        .await;
    }
    let stats = cm.stats();
    stats.set_pod_usage("u-be", CgroupUsage::new(0, 100 << 20));
    stats.set_pod_usage("u-g", CgroupUsage::new(0, 500 << 20));
    stats.set_pod_usage("u-static", CgroupUsage::new(0, 3 * GIB));
    assert!(!handle.node_pressure().memory);

    // 8Gi − 7Gi: 1Gi available, below the 2Gi threshold.
    stats.set_node_usage(Some(CgroupUsage::new(0, 7 * GIB)));
    eventually(
        Duration::from_secs(10),
        "the BestEffort pod evicted",
        || async { (phase("u-be") == "Failed").then_some(()) },
    )
    .await;
    assert!(handle.node_pressure().memory);
    let s = handle.pod_status("u-be").unwrap();
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    let message = s.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1Gi. "
        ),
        "{message}"
    );
    assert_eq!(
        phase("u-g"),
        "Running",
        "the Guaranteed pod is not evicted first"
    );
    let events = sink.events();
    assert!(events
        .iter()
        .any(|e| e.reason == "Evicted" && e.message == message));
    // Its worker removes its stopped containers (Go's container deletor for evicted pods);
    // the sandbox stays until garbage collection.
    eventually(
        Duration::from_secs(5),
        "the evicted pod's containers removed",
        || async { rt.container_ids("u-be", "app").is_empty().then_some(()) },
    )
    .await;
    assert_eq!(rt.sandbox_handlers("u-be").len(), 1, "the sandbox stays");
    let first_eviction = tokio::time::Instant::now();

    // A new BestEffort pod is refused while the node is under memory pressure.
    let newcomer = PodBuilder::new("newcomer", "u-new")
        .container(container("app", "busybox"))
        .build();
    let best_effort_again = handle.pod("u-be").unwrap().as_ref().clone();
    let guaranteed_again = handle.pod("u-g").unwrap().as_ref().clone();
    api.set(vec![best_effort_again, guaranteed_again, newcomer]);
    eventually(Duration::from_secs(10), "the newcomer rejected", || async {
        (phase("u-new") == "Failed").then_some(())
    })
    .await;
    let s = handle.pod_status("u-new").unwrap();
    assert_eq!(s.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: The node had condition: [MemoryPressure]. ")
    );

    // The pressure stays: the Guaranteed pod goes next, as soon as the first one's
    // containers are gone (not after the 30 s cleanup limit); the static pod never does.
    eventually(
        Duration::from_secs(60),
        "the Guaranteed pod evicted",
        || async { (phase("u-g") == "Failed").then_some(()) },
    )
    .await;
    assert!(
        first_eviction.elapsed() < Duration::from_secs(10),
        "the manager measured again once the evicted pod was cleaned up: {:?}",
        first_eviction.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(phase("u-static"), "Running", "a static pod is critical");

    // Lifted: the condition goes after the transition period.
    stats.set_node_usage(Some(CgroupUsage::new(0, GIB)));
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        handle.node_pressure().memory,
        "held for the transition period"
    );
    eventually(Duration::from_secs(20), "no memory pressure", || async {
        (!handle.node_pressure().memory).then_some(())
    })
    .await;

    shutdown.cancel();
    task.await.unwrap().unwrap();
}
