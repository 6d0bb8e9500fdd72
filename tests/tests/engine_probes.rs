//! Container probes on the real runtime (Go's prober: readiness gates `ready`, liveness
//! restarts the container).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ExecAction, Probe};
use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{
    busybox, condition, container_status, eventually, phase, wait_until, EngineTest,
};

fn exec_probe(cmd: &[&str]) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(cmd.iter().map(|s| s.to_string()).collect()),
        }),
        period_seconds: Some(1),
        failure_threshold: Some(1),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_readiness_probe_keeps_the_container_unready() {
    let Some(t) = EngineTest::new("readiness").await else {
        return;
    };
    let uid = t.uid("unready");
    let mut c = busybox("c", "exec sleep 3600");
    c.readiness_probe = Some(exec_probe(&["false"]));
    let pod = t.pod("unready", &uid, vec![c]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = wait_until(Duration::from_secs(60), "container running", || {
        k.handle.pod_status(&uid).filter(|s| {
            phase(s) == "Running"
                && container_status(s, "c")
                    .and_then(|c| c.state.as_ref())
                    .is_some_and(|st| st.running.is_some())
        })
    })
    .await;
    // Several probe periods later, still not ready.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = k.handle.pod_status(&uid).unwrap_or(s);
    let result = (
        container_status(&s, "c").unwrap().ready,
        condition(&s, "Ready"),
    );
    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
    assert_eq!(
        result,
        (false, Some("False".into())),
        "ready with a failing readiness probe"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_liveness_probe_restarts_the_container() {
    let Some(t) = EngineTest::new("liveness").await else {
        return;
    };
    let uid = t.uid("dead");
    let mut c = busybox("c", "exec sleep 3600");
    c.liveness_probe = Some(exec_probe(&["false"]));
    let pod = t.pod("dead", &uid, vec![c]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let restarted = kubelet_core::testing::poll_until(Duration::from_secs(30), || {
        let s = k.handle.pod_status(&uid);
        async move {
            let s = s?;
            (container_status(&s, "c")?.restart_count >= 1).then_some(())
        }
    })
    .await;
    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
    assert!(
        restarted.is_some(),
        "never restarted by its failing liveness probe"
    );
}
