//! The engine survives a restart of the real containerd, and the pod's container (kept alive
//! by its shim) is adopted, not re-created. Restarts the node's containerd: run alone with
//! `cargo test -p kubelet-tests --test engine_containerd_restart -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{
    busybox, container_status, eventually, restart_node_containerd, wait_running, wait_until,
    EngineTest,
};

#[tokio::test(flavor = "multi_thread")]
#[ignore = "disrupts other tests: run alone"]
async fn engine_keeps_running_and_pod_survives_containerd_restart() {
    let Some(t) = EngineTest::new("containerdrestart").await else {
        return;
    };
    let uid = t.uid("survivor");
    let pod = t.pod("survivor", &uid, vec![busybox("c", "exec sleep 3600")]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let id = container_status(&s, "c").unwrap().container_id.clone();
    let sandbox = t.sandboxes(&uid).await[0].id.clone();

    restart_node_containerd().await;
    assert!(
        k.handle.check_health().is_ok(),
        "{:?}",
        k.handle.check_health()
    );
    assert!(!k.join.is_finished(), "the engine stopped");

    // Runtime ready again (polled every 5s), then the same container keeps running.
    wait_until(Duration::from_secs(30), "runtime ready again", || {
        k.handle.runtime_ready().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = wait_running(&k.handle, &uid, Duration::from_secs(30)).await;
    let c = container_status(&s, "c").unwrap();
    assert_eq!(c.container_id, id, "the container was re-created");
    assert_eq!(c.restart_count, 0);
    let sandboxes = t.sandboxes(&uid).await;
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(sandboxes[0].id, sandbox);
    assert!(
        k.handle.check_health().is_ok(),
        "{:?}",
        k.handle.check_health()
    );

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
