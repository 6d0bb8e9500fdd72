//! Restart policy × exit code on the real runtime, and CrashLoopBackOff timing.
//!
//! The harness configures CrashLoopBackOff at 1s doubling up to 4s (Go: 10s up to 5m) to
//! keep these tests short.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet_core::testing::StaticSource;
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_tests::engine::{
    busybox, container_status, eventually, phase, wait_until, waiting_reason, EngineTest,
};

fn with_policy(mut p: Pod, policy: &str) -> Pod {
    p.spec.as_mut().unwrap().restart_policy = Some(policy.to_string());
    p
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_policy_and_exit_code_matrix() {
    let Some(t) = EngineTest::new("restartmatrix").await else {
        return;
    };
    // (name, policy, exit code, expected phase or None for "keeps restarting")
    let cases = [
        ("never-ok", "Never", 0, Some("Succeeded")),
        ("never-fail", "Never", 3, Some("Failed")),
        ("onfailure-ok", "OnFailure", 0, Some("Succeeded")),
        ("always-fail", "Always", 1, None),
    ];
    let mut uids = BTreeMap::new();
    let mut pods = Vec::new();
    for (name, policy, code, _) in cases {
        let uid = t.uid(name);
        pods.push(with_policy(
            t.pod(
                name,
                &uid,
                vec![busybox("c", &format!("sleep 1; exit {code}"))],
            ),
            policy,
        ));
        uids.insert(name, uid);
    }
    let source = Arc::new(StaticSource::new("file", pods));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);

    for (name, _, code, expected) in cases {
        let uid = &uids[name];
        match expected {
            Some(want) => {
                let s = wait_until(Duration::from_secs(60), &format!("{name} terminal"), || {
                    k.handle
                        .pod_status(uid)
                        .filter(|s| phase(s) == "Succeeded" || phase(s) == "Failed")
                })
                .await;
                assert_eq!(phase(&s), want, "{name}: {s:#?}");
                let c = container_status(&s, "c").unwrap();
                let term = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
                assert_eq!(term.exit_code, code, "{name}: {c:?}");
                let want_reason = if code == 0 { "Completed" } else { "Error" };
                assert_eq!(term.reason.as_deref(), Some(want_reason), "{name}: {c:?}");
                assert_eq!(c.restart_count, 0, "{name}: {c:?}");
                assert!(!c.ready);
            }
            None => {
                let s = wait_until(
                    Duration::from_secs(60),
                    &format!("{name} in CrashLoopBackOff after restarts"),
                    || {
                        k.handle.pod_status(uid).filter(|s| {
                            waiting_reason(s, "c").as_deref() == Some("CrashLoopBackOff")
                                && container_status(s, "c").unwrap().restart_count >= 2
                        })
                    },
                )
                .await;
                assert_eq!(phase(&s), "Running", "{name}: {s:#?}");
                let c = container_status(&s, "c").unwrap();
                let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
                assert_eq!(last.exit_code, 1, "{c:?}");
                assert_eq!(last.reason.as_deref(), Some("Error"), "{c:?}");
                assert!(!c.ready);
            }
        }
    }
    // Terminal pods keep their (exited) containers while they are still desired; the
    // restarting one keeps at most its current and its last dead container.
    for (name, _, _, expected) in cases {
        let containers = t.containers(&uids[name]).await;
        if expected.is_some() {
            assert_eq!(containers.len(), 1, "{name}: {containers:?}");
        }
    }

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pods removed", || async {
        for uid in uids.values() {
            if !t.sandboxes(uid).await.is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn crashing_container_restarts_with_growing_backoff() {
    let Some(t) = EngineTest::new("backoff").await else {
        return;
    };
    let uid = t.uid("crash");
    let pod = t.pod("crash", &uid, vec![busybox("c", "exit 1")]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);

    // Start times of each attempt, with nanosecond precision from the runtime (pod status
    // times have whole seconds). Recorded while polling, so a container GC cannot hide them.
    let mut starts: BTreeMap<u32, i64> = BTreeMap::new();
    let deadline = kubelet_core::clock::monotonic_now() + Duration::from_secs(60);
    while !(0..=3).all(|a| starts.contains_key(&a)) {
        assert!(
            kubelet_core::clock::monotonic_now() < deadline,
            "attempts 0..=3 did not all start within 60s: {starts:?}"
        );
        for c in t.containers(&uid).await {
            if starts.contains_key(&c.attempt) {
                continue;
            }
            if let Ok(st) = t.cri.container_status(&c.id).await {
                if st.started_at > 0 {
                    starts.insert(c.attempt, st.started_at);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let times: Vec<i64> = (0..=3).map(|a| starts[&a]).collect();
    let gaps: Vec<i64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]) / 1_000_000)
        .collect();
    println!("gaps between the starts of attempts 0..=3: {gaps:?} ms");
    // Go's back-off: the first crash restarts at once, then each restart waits at least the
    // delay (1 s here, doubling up to 4 s) after the previous attempt finished, so after it
    // started. Only these lower bounds are asserted: a loaded machine lengthens every gap
    // (the first included, which a "last gap > first gap" check took for a shrinking delay),
    // but no load makes a restart come early. Without the doubling the last gap is ~1 s.
    assert!(
        gaps[1] >= 1_000 && gaps[2] >= 2_000,
        "the delay between restarts does not grow as 1 s, 2 s: {gaps:?}"
    );

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}

/// Go's container garbage collection (every minute, `MaxPerPodContainer` 1, `MinAge` 0)
/// keeps at most one dead container per container of a live pod, so a crash-looping
/// container does not pile up exited containers (and their log files) in the runtime.
/// The GC period is shortened to 5s here to keep the test short.
#[tokio::test(flavor = "multi_thread")]
async fn dead_containers_of_a_crash_looping_container_are_garbage_collected() {
    let Some(t) = EngineTest::new("containergc").await else {
        return;
    };
    let uid = t.uid("crash");
    let pod = t.pod("crash", &uid, vec![busybox("c", "exit 1")]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let config = kubelet_core::Config {
        container_gc_period: Duration::from_secs(5),
        ..t.config()
    };
    let k = t.start_with(config, vec![source.clone() as Arc<dyn PodSource>]);
    wait_until(Duration::from_secs(60), "restartCount 4", || {
        let s = k.handle.pod_status(&uid)?;
        (container_status(&s, "c")?.restart_count >= 4).then_some(())
    })
    .await;
    // The current attempt plus one dead one, after a GC period or two.
    let start = kubelet_core::clock::monotonic_now();
    let mut count = t.containers(&uid).await.len();
    while count > 2 && kubelet_core::clock::elapsed(start) < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        count = t.containers(&uid).await.len();
    }
    assert!(
        count <= 2,
        "{count} containers of one crash-looping container are kept in the runtime"
    );

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}

/// A sandbox that dies under a running pod is re-created with its containers (Go:
/// SandboxChanged), with the containers' restart counts going up.
#[tokio::test(flavor = "multi_thread")]
async fn dead_sandbox_is_recreated_with_its_containers() {
    let Some(t) = EngineTest::new("sandboxchanged").await else {
        return;
    };
    let uid = t.uid("sb");
    let pod = t.pod("sb", &uid, vec![busybox("c", "exec sleep 3600")]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = kubelet_tests::engine::wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let old_ip = s.pod_ip.clone();
    let old = t.sandboxes(&uid).await;
    assert_eq!(old.len(), 1);
    t.cri.stop_pod_sandbox(&old[0].id).await.unwrap();
    let s = wait_until(
        Duration::from_secs(60),
        "pod running in a new sandbox",
        || {
            k.handle.pod_status(&uid).filter(|s| {
                kubelet_tests::engine::running_and_ready(s)
                    && container_status(s, "c").is_some_and(|c| c.restart_count >= 1)
            })
        },
    )
    .await;
    println!("pod IP {old_ip:?} → {:?}", s.pod_ip);
    let now = t.sandboxes(&uid).await;
    let ready: Vec<_> = now
        .iter()
        .filter(|s| s.state == kubelet_core::runtime::SandboxState::Ready)
        .collect();
    assert_eq!(ready.len(), 1, "{now:?}");
    assert_ne!(ready[0].id, old[0].id);
    assert_eq!(ready[0].attempt, 1, "{now:?}");

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}

/// A spec change of one container (its hash changes) restarts that container only.
#[tokio::test(flavor = "multi_thread")]
async fn changed_container_spec_restarts_only_that_container() {
    let Some(t) = EngineTest::new("specchange").await else {
        return;
    };
    let uid = t.uid("spec");
    let pod = t.pod(
        "spec",
        &uid,
        vec![
            busybox("c", "echo v1; exec sleep 3600"),
            busybox("d", "exec sleep 3600"),
        ],
    );
    let source = Arc::new(StaticSource::new("file", vec![pod.clone()]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = kubelet_tests::engine::wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let id = |s: &k8s_openapi::api::core::v1::PodStatus, n: &str| {
        container_status(s, n)
            .unwrap()
            .container_id
            .clone()
            .unwrap()
    };
    let (c1, d1) = (id(&s, "c"), id(&s, "d"));

    let mut changed = pod;
    changed.spec.as_mut().unwrap().containers[0] = busybox("c", "echo v2; exec sleep 3600");
    source.set(vec![changed]);
    let s = wait_until(
        Duration::from_secs(60),
        "c restarted with the new spec",
        || {
            k.handle.pod_status(&uid).filter(|s| {
                kubelet_tests::engine::running_and_ready(s)
                    && container_status(s, "c").unwrap().container_id.as_deref() != Some(&c1)
            })
        },
    )
    .await;
    assert_eq!(container_status(&s, "c").unwrap().restart_count, 1);
    assert_eq!(id(&s, "d"), d1, "the unchanged container kept running");
    assert_eq!(container_status(&s, "d").unwrap().restart_count, 0);
    let log = t
        .pod_logs_dir()
        .join(format!("{}_spec_{uid}", t.namespace))
        .join("c/1.log");
    let text = kubelet_core::testing::poll_until(Duration::from_secs(10), || {
        let log = log.clone();
        async move {
            let text = tokio::fs::read_to_string(&log).await.ok()?;
            text.contains("v2").then_some(text)
        }
    })
    .await;
    assert!(text.is_some(), "{} lacks v2", log.display());

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
