//! Graceful node shutdown inside the whole engine, on the simulated runtime and the paused
//! clock: the shutdown signal fails the running pods with Go's reason and message (regular
//! pods first, critical ones in their own share), refuses new pods, says so in the node's
//! shutdown status, and releases the inhibitor lock.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::nodeshutdown::ShutdownConfig;
use crate::testing::{
    container, eventually, FakeContainerManager, PodBuilder, RecordingSink,
    ScriptedShutdownInhibitor, SimRuntime, StaticSource,
};
use crate::{Config, Kubelet};

#[tokio::test(start_paused = true)]
async fn shutdown_fails_pods_in_priority_order_and_refuses_new_ones() {
    let regular = PodBuilder::new("regular", "u-regular")
        .container(container("app", "busybox"))
        .build();
    let critical = PodBuilder::new("critical", "u-critical")
        .container(container("app", "busybox"))
        .priority(2_000_001_000)
        .build();
    let api = Arc::new(StaticSource::new(
        "api",
        vec![regular.clone(), critical.clone()],
    ));
    let rt = Arc::new(SimRuntime::new());
    let (inhibitor, tx) = ScriptedShutdownInhibitor::new(None);
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: "node-1".into(),
            resolv_conf: Default::default(),
            root_dir: Default::default(),
            node_shutdown: ShutdownConfig {
                grace_period: Duration::from_secs(30),
                grace_period_critical_pods: Duration::from_secs(10),
                ..Default::default()
            },
            ..Config::default()
        })
        .runtime(rt.clone())
        .container_manager(Arc::new(FakeContainerManager::default()))
        .status_sink(Arc::new(RecordingSink::default()))
        .source(api.clone())
        .shutdown_inhibitor(inhibitor.clone())
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
    for uid in ["u-regular", "u-critical"] {
        eventually(Duration::from_secs(30), uid, || async {
            (phase(uid) == "Running").then_some(())
        })
        .await;
    }
    assert_eq!(handle.shutdown_status(), None);
    assert_eq!(inhibitor.calls(), ["start 30s"]);

    tx.send(true).await.unwrap();
    eventually(
        Duration::from_secs(10),
        "the regular pod failed",
        || async { (phase("u-regular") == "Failed").then_some(()) },
    )
    .await;
    assert_eq!(handle.shutdown_status(), Some("node is shutting down"));
    let s = handle.pod_status("u-regular").unwrap();
    assert_eq!(s.reason.as_deref(), Some("Terminated"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was terminated in response to imminent node shutdown.")
    );
    eventually(
        Duration::from_secs(30),
        "the critical pod failed",
        || async { (phase("u-critical") == "Failed").then_some(()) },
    )
    .await;
    eventually(Duration::from_secs(30), "the lock released", || async {
        inhibitor.called("release").then_some(())
    })
    .await;

    // A pod that arrives now is refused.
    let newcomer = PodBuilder::new("newcomer", "u-new")
        .container(container("app", "busybox"))
        .build();
    api.set(vec![regular, critical, newcomer]);
    eventually(Duration::from_secs(10), "the newcomer refused", || async {
        (phase("u-new") == "Failed").then_some(())
    })
    .await;
    let s = handle.pod_status("u-new").unwrap();
    assert_eq!(s.reason.as_deref(), Some("NodeShutdown"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Pod was rejected as the node is shutting down."),
        "Go's rejectPod prefixes the handler's message"
    );

    // Cancelled: the node is not shutting down any more and the lock is taken again.
    tx.send(false).await.unwrap();
    eventually(Duration::from_secs(10), "not shutting down", || async {
        handle.shutdown_status().is_none().then_some(())
    })
    .await;
    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert!(inhibitor.called("acquire"));
}
