//! The evented PLEG on a real containerd 1.7: a container's exit reaches its pod status from
//! the `GetContainerEvents` stream without waiting for a relist, and when the stream breaks
//! the relist takes over. Needs a runtime with container events: run it against a containerd
//! 1.7 instance of your own, e.g.
//!
//! ```text
//! KUBELET_RS_NODE_INSTANCE=perf scripts/node-env.sh up --containerd 1.7
//! KUBELET_RS_CRI_ENDPOINT=unix:///run/kubelet-rs-perf/containerd/containerd.sock \
//!     cargo test -p kubelet-tests --test engine_evented_pleg
//! ```
//!
//! On a runtime without events (containerd 1.6) the test is skipped with a message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use kubelet_core::runtime::ContainerRuntime;
use kubelet_core::testing::StaticSource;
use kubelet_core::{Config, KubeletHandle, PodSource};
use kubelet_tests::cri::endpoint;
use kubelet_tests::engine::{busybox, container_status, wait_running, EngineTest};

/// The relist period: long enough that an exit seen within [`EVENT_BOUND`] came from an event.
const RELIST: Duration = Duration::from_secs(10);
/// How soon an exit must reach the status from the event stream.
const EVENT_BOUND: Duration = Duration::from_secs(2);

/// Stops the pod's container `c` through CRI; returns, once its status shows it exited, the
/// time from the stop's return.
async fn stop_and_wait(
    t: &EngineTest,
    handle: &KubeletHandle,
    uid: &str,
    limit: Duration,
) -> Duration {
    let s = handle.pod_status(uid).expect("status");
    let id = container_status(&s, "c")
        .unwrap()
        .container_id
        .clone()
        .unwrap();
    let id = id.rsplit("://").next().unwrap().to_string();
    let called = Instant::now();
    t.cri.stop_container(&id, Duration::ZERO).await.unwrap();
    let t0 = Instant::now();
    eprintln!("StopContainer took {:?}", t0 - called);
    loop {
        let exited = handle
            .pod_status(uid)
            .and_then(|s| container_status(&s, "c").cloned())
            .and_then(|c| c.state?.terminated)
            .is_some();
        if exited {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < limit,
            "exit not in the status after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exits_arrive_by_event_and_the_relist_takes_over_when_the_stream_breaks() {
    let Some(t) = EngineTest::new("eventedpleg").await else {
        return;
    };
    if let Err(e) = t.cri.container_events().await {
        eprintln!(
            "SKIPPED eventedpleg: the runtime at {} has no container events ({e}); it needs containerd 1.7: \
             `KUBELET_RS_NODE_INSTANCE=NAME scripts/node-env.sh up --containerd 1.7` and \
             KUBELET_RS_CRI_ENDPOINT=unix:///run/kubelet-rs-NAME/containerd/containerd.sock",
            endpoint()
        );
        return;
    }
    let (a, b) = (t.uid("a"), t.uid("b"));
    let pod = |name: &str, uid: &str| {
        let mut p = t.pod(name, uid, vec![busybox("c", "exec sleep 3600")]);
        p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        p
    };
    let source = Arc::new(StaticSource::new("file", vec![pod("a", &a), pod("b", &b)]));
    let config = Config {
        evented_pleg: true,
        pleg_relist_period: RELIST,
        ..t.config()
    };
    let k = t.start_with(config, vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &a, Duration::from_secs(60)).await;
    wait_running(&k.handle, &b, Duration::from_secs(60)).await;

    // Streaming: the exit comes by event (the relist runs every 300s now).
    let took = stop_and_wait(&t, &k.handle, &a, RELIST).await;
    eprintln!("exit -> status by event: {took:?}");
    assert!(took < EVENT_BOUND, "took {took:?}");

    // The stream breaks and events are gone: the relist (every RELIST) takes over.
    t.runtime.cut_events();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let took = stop_and_wait(&t, &k.handle, &b, RELIST * 2 + Duration::from_secs(5)).await;
    eprintln!("exit -> status by relist: {took:?}");
    assert!(
        k.handle.check_health().is_ok(),
        "{:?}",
        k.handle.check_health()
    );

    k.stop().await;
}
