//! Engine tests of probes, lifecycle hooks, grace periods, active deadlines and sidecars,
//! on the simulated runtime and tokio's paused clock (see `lifecycle_tests` for the harness).

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, Lifecycle, LifecycleHandler, Pod, PodCondition, Probe, SleepAction,
};
use tokio::time::Instant;

use crate::lifecycle_tests::{env, start, with_policy, Harness};
use crate::runtime::{ContainerRuntime, ContainerState};
use crate::testing::{container, pod};

fn exec(cmd: &[&str]) -> Option<ExecAction> {
    Some(ExecAction {
        command: Some(cmd.iter().map(|s| s.to_string()).collect()),
    })
}

fn probe(cmd: &[&str], period: i32, failure: i32) -> Probe {
    Probe {
        exec: exec(cmd),
        period_seconds: Some(period),
        failure_threshold: Some(failure),
        ..Default::default()
    }
}

fn hook(cmd: &[&str]) -> LifecycleHandler {
    LifecycleHandler {
        exec: exec(cmd),
        ..Default::default()
    }
}

fn condition(h: &Harness, uid: &str, t: &str) -> Option<PodCondition> {
    h.status(uid)?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == t)
}

fn is_true(h: &Harness, uid: &str, t: &str) -> bool {
    condition(h, uid, t).is_some_and(|c| c.status == "True")
}

fn container_status(
    h: &Harness,
    uid: &str,
    c: &str,
) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    let s = h.status(uid)?;
    s.container_statuses
        .into_iter()
        .chain(s.init_container_statuses)
        .flatten()
        .find(|s| s.name == c)
}

fn ready(h: &Harness, uid: &str, c: &str) -> bool {
    container_status(h, uid, c).is_some_and(|s| s.ready)
}

/// Id of the newest container of that name.
fn newest(h: &Harness, uid: &str, c: &str) -> String {
    h.rt.container_ids(uid, c)
        .last()
        .cloned()
        .unwrap_or_default()
}

async fn run_in(h: &Harness, uid: &str, c: &str, cmd: &[&str]) {
    let id = newest(h, uid, c);
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    h.rt.exec_sync(&id, &cmd, Duration::from_secs(1))
        .await
        .expect("exec");
}

fn execs_of(h: &Harness, c: &str, cmd0: &str, cmd1: &str) -> Vec<i64> {
    h.rt.execs()
        .into_iter()
        .filter(|e| {
            e.container == c
                && e.cmd.first().map(String::as_str) == Some(cmd0)
                && e.cmd.get(1).map(String::as_str) == Some(cmd1)
        })
        .map(|e| e.at)
        .collect()
}

fn one(c: Container, uid: &str) -> Pod {
    pod(uid, uid, vec![c])
}

#[tokio::test(start_paused = true)]
async fn readiness_probe_drives_ready_with_thresholds() {
    let mut c = container("web", "img:1");
    let mut p = probe(&["test", "-f", "/ready"], 2, 3);
    p.success_threshold = Some(2);
    c.readiness_probe = Some(p);
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    // Running but not ready: the initial readiness result is Failure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!ready(&h, "u1", "web"));
    assert!(!is_true(&h, "u1", "Ready") && !is_true(&h, "u1", "ContainersReady"));
    assert_eq!(
        condition(&h, "u1", "Ready")
            .and_then(|c| c.reason)
            .as_deref(),
        Some("ContainersNotReady")
    );
    run_in(&h, "u1", "web", &["touch", "/ready"]).await;
    let t0 = Instant::now();
    h.until(Duration::from_secs(10), "Ready", |h| {
        is_true(h, "u1", "Ready")
    })
    .await;
    // successThreshold 2 at a 2s period: two passing probes, so at least one period.
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took <= Duration::from_secs(5),
        "{took:?}"
    );
    assert!(is_true(&h, "u1", "ContainersReady") && ready(&h, "u1", "web"));
    run_in(&h, "u1", "web", &["rm", "/ready"]).await;
    let t0 = Instant::now();
    h.until(Duration::from_secs(15), "not Ready", |h| {
        !is_true(h, "u1", "Ready")
    })
    .await;
    // failureThreshold 3 at a 2s period: three failing probes.
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(4) && took <= Duration::from_secs(7),
        "{took:?}"
    );
    // Readiness never restarts anything.
    assert_eq!(h.restart_count("u1", "web"), 0);
    let counts = h.handle.probe_counts();
    let count = |result: &str| {
        counts
            .iter()
            .filter(|(k, _)| {
                k.probe_type == "Readiness" && k.result == result && k.container == "web"
            })
            .map(|(_, v)| *v)
            .sum::<u64>()
    };
    assert!(
        count("successful") >= 2 && count("failed") >= 5,
        "{counts:?}"
    );
    assert!(h
        .handle
        .probe_metrics()
        .contains("prober_probe_total{container=\"web\""));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn initial_delay_postpones_the_first_probe() {
    let mut c = container("web", "img:1");
    let mut p = probe(&["test", "-f", "/x"], 1, 3);
    p.initial_delay_seconds = Some(8);
    c.readiness_probe = Some(p);
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let started = crate::clock::now_unix_nanos();
    tokio::time::sleep(Duration::from_secs(12)).await;
    let first = execs_of(&h, "web", "test", "-f");
    assert!(!first.is_empty());
    let started_at =
        h.rt.container_status(&newest(&h, "u1", "web"))
            .await
            .expect("status")
            .started_at;
    assert!(
        first[0] - started_at >= 8_000_000_000,
        "first probe {}ns after start",
        first[0] - started_at
    );
    assert!(started_at <= started);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_restarts_with_reason_and_backoff() {
    let mut c = container("app", "img:1");
    c.env = env(&[("SIM_FILES", "/alive")]);
    c.liveness_probe = Some(probe(&["test", "-f", "/alive"], 1, 2));
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        h.restart_count("u1", "app"),
        0,
        "a passing liveness probe restarts nothing"
    );
    run_in(&h, "u1", "app", &["rm", "/alive"]).await;
    h.until(Duration::from_secs(10), "first restart", |h| {
        h.restart_count("u1", "app") == 1
    })
    .await;
    let events = h.sink.events();
    assert!(events
        .iter()
        .any(|e| e.reason == "Unhealthy" && e.message.starts_with("Liveness probe failed")));
    assert!(events.iter().any(|e| e.reason == "Killing"
        && e.message == "Container app failed liveness probe, will be restarted"));
    let last = container_status(&h, "u1", "app")
        .and_then(|s| s.last_state)
        .and_then(|s| s.terminated);
    assert_eq!(last.map(|t| t.exit_code), Some(143));
    // The new container passes again (its /alive is back) and keeps running.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(h.restart_count("u1", "app"), 1);
    // Repeated liveness failures go through the crash back-off as in Go (doBackOff looks at
    // the newest exited attempt): the second restart is immediate and registers the back-off,
    // the third waits for the 10s back-off.
    let mut gaps = Vec::new();
    for n in 2..=3 {
        run_in(&h, "u1", "app", &["rm", "/alive"]).await;
        let t0 = Instant::now();
        h.until(Duration::from_secs(60), "restart", |h| {
            h.restart_count("u1", "app") == n
                && container_status(h, "u1", "app")
                    .is_some_and(|s| s.state.and_then(|s| s.running).is_some())
        })
        .await;
        gaps.push(t0.elapsed());
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert!(gaps[0] < Duration::from_secs(5), "{gaps:?}");
    assert!(gaps[1] >= Duration::from_secs(10), "{gaps:?}");
    assert!(h.sink.events().iter().any(|e| e.reason == "BackOff"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn liveness_failure_under_never_only_kills() {
    let mut c = container("app", "img:1");
    c.liveness_probe = Some(probe(&["exit", "1"], 1, 1));
    let h = start(vec![with_policy(one(c, "u1"), "Never")]).await;
    h.until(Duration::from_secs(20), "Failed", |h| {
        h.phase("u1") == "Failed"
    })
    .await;
    assert_eq!(h.restart_count("u1", "app"), 0);
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| e.message == "Container app failed liveness probe"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn startup_probe_gates_liveness_and_readiness() {
    let mut c = container("app", "img:1");
    c.startup_probe = Some(probe(&["test", "-f", "/started"], 1, 30));
    c.liveness_probe = Some(probe(&["echo", "live"], 1, 3));
    c.readiness_probe = Some(probe(&["echo", "ready"], 1, 3));
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let s = container_status(&h, "u1", "app").expect("status");
    assert_eq!(s.started, Some(false));
    assert!(!s.ready);
    assert!(
        execs_of(&h, "app", "echo", "live").is_empty(),
        "liveness ran before startup passed"
    );
    assert!(
        execs_of(&h, "app", "echo", "ready").is_empty(),
        "readiness ran before startup passed"
    );
    run_in(&h, "u1", "app", &["touch", "/started"]).await;
    h.until(Duration::from_secs(10), "started and ready", |h| {
        container_status(h, "u1", "app").is_some_and(|s| s.started == Some(true) && s.ready)
    })
    .await;
    assert!(!execs_of(&h, "app", "echo", "live").is_empty());
    // Once started, the startup probe stops probing.
    let n = execs_of(&h, "app", "test", "-f").len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(execs_of(&h, "app", "test", "-f").len(), n);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn startup_failure_kills_with_the_probe_grace_period() {
    let mut c = container("app", "img:1");
    c.env = env(&[("SIM_IGNORE_TERM", "1")]);
    let mut p = probe(&["exit", "1"], 1, 3);
    p.termination_grace_period_seconds = Some(3);
    c.startup_probe = Some(p);
    let mut pd = one(c, "u1");
    if let Some(s) = pd.spec.as_mut() {
        s.termination_grace_period_seconds = Some(60);
    }
    let h = start(vec![pd]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    h.until(Duration::from_secs(30), "restart", |h| {
        h.restart_count("u1", "app") >= 1
    })
    .await;
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| e.message == "Container app failed startup probe, will be restarted"));
    // The first container ignored SIGTERM: it was killed after the probe's 3s, not the pod's 60s.
    let first = h.rt.container_ids("u1", "app")[0].clone();
    let st = h.rt.container_status(&first).await.expect("status");
    assert_eq!(st.summary.state, ContainerState::Exited);
    assert_eq!(st.exit_code, 137);
    let lived = Duration::from_nanos(u64::try_from(st.finished_at - st.started_at).unwrap_or(0));
    assert!(
        lived >= Duration::from_secs(5) && lived < Duration::from_secs(10),
        "{lived:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn exec_probe_timeout_is_a_failure() {
    let mut c = container("app", "img:1");
    let mut p = probe(&["sleep", "5"], 2, 1);
    p.timeout_seconds = Some(1);
    c.liveness_probe = Some(p);
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(20), "restart", |h| {
        h.restart_count("u1", "app") >= 1
    })
    .await;
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| e.reason == "Unhealthy" && e.message.contains("timed out")));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn post_start_hook_runs_and_its_failure_kills_the_container() {
    let mut good = container("good", "img:1");
    good.lifecycle = Some(Lifecycle {
        post_start: Some(hook(&["touch", "/hooked"])),
        ..Default::default()
    });
    let mut bad = container("bad", "img:1");
    bad.lifecycle = Some(Lifecycle {
        post_start: Some(hook(&["exit", "3"])),
        ..Default::default()
    });
    let h = start(vec![one(good, "u1"), one(bad, "u2")]).await;
    h.until(Duration::from_secs(10), "good Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    assert!(h.rt.has_file(&newest(&h, "u1", "good"), "/hooked"));
    h.until(Duration::from_secs(30), "bad restarted", |h| {
        h.restart_count("u2", "bad") >= 1
    })
    .await;
    let events = h.sink.events();
    assert!(
        events
            .iter()
            .any(|e| e.reason == "FailedPostStartHook" && e.message.contains("exited with 3")),
        "{events:?}"
    );
    h.until(Duration::from_secs(60), "bad in back-off", |h| {
        matches!(
            h.waiting_reason("u2", "bad").as_deref(),
            Some("CrashLoopBackOff") | Some("PostStartHookError")
        )
    })
    .await;
    h.stop().await;
}

/// How long the pod's removal took, and when its preStop ran relative to the container's end.
async fn removal(h: &Harness, uid: &str, keep: Vec<Pod>) -> Duration {
    let t0 = Instant::now();
    h.src.set(keep);
    h.until(Duration::from_secs(120), "removed", |h| {
        matches!(
            h.handle.worker_state(uid),
            None | Some(crate::WorkerState::Finished)
        )
    })
    .await;
    t0.elapsed()
}

#[tokio::test(start_paused = true)]
async fn pre_stop_runs_first_and_shares_the_grace_period() {
    let mk = |uid: &str, sleep: &str| {
        let mut c = container("app", "img:1");
        c.env = env(&[("SIM_IGNORE_TERM", "1")]);
        c.lifecycle = Some(Lifecycle {
            pre_stop: Some(hook(&["sleep", sleep])),
            ..Default::default()
        });
        let mut p = one(c, uid);
        if let Some(s) = p.spec.as_mut() {
            s.termination_grace_period_seconds = Some(10);
        }
        p
    };
    let h = start(vec![mk("u1", "3"), mk("u2", "30")]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running" && h.phase("u2") == "Running"
    })
    .await;
    let id1 = newest(&h, "u1", "app");
    // preStop 3s + the remaining 7s of the 10s grace (the container ignores SIGTERM).
    let took = removal(&h, "u1", vec![mk("u2", "30")]).await;
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(12),
        "{took:?}"
    );
    let hook_at = execs_of(&h, "app", "sleep", "3");
    assert_eq!(hook_at.len(), 1);
    let _ = id1;
    // A preStop longer than the grace period is cut at 10s; the stop still gets the 2s minimum.
    let took = removal(&h, "u2", vec![]).await;
    assert!(
        took >= Duration::from_secs(12) && took < Duration::from_secs(14),
        "{took:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn pre_stop_sleep_action_and_min_grace() {
    let mut c = container("app", "img:1");
    c.env = env(&[("SIM_IGNORE_TERM", "1")]);
    c.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            sleep: Some(SleepAction { seconds: 4 }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut p = one(c, "u1");
    if let Some(s) = p.spec.as_mut() {
        s.termination_grace_period_seconds = Some(5);
    }
    let h = start(vec![p]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    // 4s sleep, 1s left → raised to the 2s minimum: 6s.
    let took = removal(&h, "u1", vec![]).await;
    assert!(
        took >= Duration::from_secs(6) && took < Duration::from_secs(8),
        "{took:?}"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn active_deadline_fails_the_pod() {
    let mut p = one(container("app", "img:1"), "u1");
    if let Some(s) = p.spec.as_mut() {
        s.active_deadline_seconds = Some(7);
    }
    let h = start(vec![p]).await;
    h.until(Duration::from_secs(5), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let t0 = Instant::now();
    h.until(Duration::from_secs(30), "Failed", |h| {
        h.phase("u1") == "Failed"
    })
    .await;
    let s = h.status("u1").expect("status");
    assert_eq!(s.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was active on the node longer than the specified deadline")
    );
    assert!(t0.elapsed() <= Duration::from_secs(8), "{:?}", t0.elapsed());
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| e.reason == "DeadlineExceeded"));
    h.until(Duration::from_secs(10), "stopped", |h| {
        h.rt.container_ids("u1", "app").iter().all(|id| {
            futures::executor::block_on(h.rt.container_status(id))
                .is_ok_and(|s| s.summary.state == ContainerState::Exited)
        })
    })
    .await;
    h.stop().await;
}

fn sidecar(name: &str) -> Container {
    let mut c = container(name, "img:1");
    c.restart_policy = Some("Always".into());
    c
}

#[tokio::test(start_paused = true)]
async fn sidecars_start_in_order_keep_running_and_do_not_hold_completion() {
    let mut log = sidecar("log");
    log.startup_probe = Some(probe(&["test", "-f", "/up"], 1, 30));
    let mut init = container("init", "img:1");
    init.env = env(&[("SIM_RUN_FOR_MS", "1000")]);
    let mut app = container("app", "img:1");
    app.env = env(&[("SIM_RUN_FOR_MS", "20000")]);
    let mut p = with_policy(one(app, "u1"), "Never");
    if let Some(s) = p.spec.as_mut() {
        s.init_containers = Some(vec![log, init]);
    }
    let h = start(vec![p]).await;
    h.until(Duration::from_secs(10), "sidecar running", |h| {
        container_status(h, "u1", "log").is_some_and(|s| s.state.and_then(|s| s.running).is_some())
    })
    .await;
    // The next init container waits for the sidecar's startup probe.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(h.rt.container_ids("u1", "init").is_empty());
    assert_eq!(h.phase("u1"), "Pending");
    run_in(&h, "u1", "log", &["touch", "/up"]).await;
    h.until(Duration::from_secs(15), "app running", |h| {
        container_status(h, "u1", "app").is_some_and(|s| s.state.and_then(|s| s.running).is_some())
    })
    .await;
    assert_eq!(h.phase("u1"), "Running");
    assert!(is_true(&h, "u1", "Initialized"));
    // The sidecar crashing is restarted even under restartPolicy Never.
    let id = newest(&h, "u1", "log");
    h.rt.stop_container(&id, Duration::from_secs(1))
        .await
        .expect("stop");
    h.until(Duration::from_secs(15), "sidecar restarted", |h| {
        container_status(h, "u1", "log")
            .is_some_and(|s| s.restart_count == 1 && s.state.and_then(|s| s.running).is_some())
    })
    .await;
    // The app completes: the pod succeeds and the sidecar is stopped.
    h.until(Duration::from_secs(40), "Succeeded", |h| {
        h.phase("u1") == "Succeeded"
    })
    .await;
    h.until(Duration::from_secs(10), "sidecar stopped", |h| {
        futures::executor::block_on(h.rt.container_status(&newest(h, "u1", "log")))
            .is_ok_and(|s| s.summary.state == ContainerState::Exited)
    })
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn probe_workers_stop_with_their_pod() {
    let mut c = container("app", "img:1");
    c.readiness_probe = Some(probe(&["echo", "r"], 1, 3));
    c.liveness_probe = Some(probe(&["echo", "l"], 1, 3));
    let h = start(vec![one(c, "u1")]).await;
    h.until(Duration::from_secs(10), "ready", |h| ready(h, "u1", "app"))
        .await;
    assert_eq!(h.handle.probe_worker_count(), 2);
    removal(&h, "u1", vec![]).await;
    assert_eq!(h.handle.probe_worker_count(), 0);
    let n = h.rt.execs().len();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        h.rt.execs().len(),
        n,
        "a probe ran after the pod was removed"
    );
    assert!(h.handle.probe_counts().is_empty());
    h.stop().await;
}
