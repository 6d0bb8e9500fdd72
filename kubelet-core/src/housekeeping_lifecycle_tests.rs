//! Lifecycle tests of what the engine does beside the pods: surviving a runtime outage,
//! garbage collection of dead containers, and the removal of pod resources nobody owns —
//! the whole engine on the simulated runtime and tokio's paused clock (the harness is
//! `lifecycle_tests`').

use std::sync::Arc;
use std::time::Duration;

use crate::lifecycle_tests::{crashing, env, start, start_with, with_policy, Harness};
use crate::testing::{container, pod, FakeContainerManager, SimRuntime};

#[tokio::test(start_paused = true)]
async fn runtime_outage_is_survived_and_oom_is_reported() {
    let mut oom = container("c", "img:1");
    oom.env = env(&[("SIM_RUN_FOR_MS", "2000"), ("SIM_OOM", "1")]);
    let h = start(vec![
        pod("steady", "u1", vec![container("c", "img:1")]),
        with_policy(pod("oom", "u2", vec![oom]), "Never"),
    ])
    .await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    h.rt.set_unavailable(true);
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.rt.set_unavailable(false);
    h.until(Duration::from_secs(30), "OOM reported", |h| {
        h.phase("u2") == "Failed"
    })
    .await;
    let s = h.status("u2").expect("s");
    let t = s.container_statuses.expect("cs")[0]
        .state
        .clone()
        .expect("state")
        .terminated
        .expect("terminated");
    assert_eq!((t.exit_code, t.reason.as_deref()), (137, Some("OOMKilled")));
    // The steady pod was never restarted through the outage.
    assert_eq!(h.rt.container_ids("u1", "c").len(), 1);
    assert_eq!(h.phase("u1"), "Running");
    assert!(h.handle.check_health().is_ok());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn dead_containers_are_garbage_collected_keeping_the_newest() {
    let h = start(vec![pod("crash", "u1", vec![crashing("c", "1000", "1")])]).await;
    h.until(Duration::from_secs(600), "5 restarts", |h| {
        h.restart_count("u1", "c") >= 5
    })
    .await;
    // Let one more GC period pass: at most the current container and one dead one remain.
    tokio::time::sleep(Duration::from_secs(61)).await;
    let left = h.rt.container_ids("u1", "c");
    assert!(left.len() <= 2, "{} containers left", left.len());
    // lastState still comes from the kept dead container.
    let s = h.status("u1").expect("status");
    let cs = &s.container_statuses.expect("cs")[0];
    assert!(cs.restart_count >= 5);
    assert!(cs
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .is_some());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn leftover_pod_resources_go_at_the_first_housekeeping_then_every_30s() {
    use crate::ContainerManager;
    let cm = FakeContainerManager::default();
    // Left by an earlier kubelet: pod-level resources no pod owns.
    cm.ensure_pod_resources(&pod("old", "left-1", vec![]))
        .await
        .expect("ensure");
    let h = start_with(
        vec![pod("p", "u1", vec![container("c", "img:1")])],
        Arc::new(SimRuntime::new()),
        cm,
        None,
    )
    .await;
    let has = |h: &Harness, uid: &str| h.cm.pod_uids().iter().any(|u| u == uid);
    h.until(Duration::from_secs(5), "the first leftover removed", |h| {
        !has(h, "left-1")
    })
    .await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    // One left later (a failed removal, say) waits for the next scan, not the next
    // housekeeping (every 2 s).
    h.cm.ensure_pod_resources(&pod("old", "left-2", vec![]))
        .await
        .expect("ensure");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(has(&h, "left-2"), "{:?}", h.cm.pod_uids());
    h.until(
        Duration::from_secs(25),
        "the second leftover removed",
        |h| !has(h, "left-2"),
    )
    .await;
    assert!(has(&h, "u1"), "the running pod keeps its resources");
    h.stop().await;
}
