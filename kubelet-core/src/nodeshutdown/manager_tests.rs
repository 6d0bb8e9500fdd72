//! The manager on the paused clock with a scripted inhibitor and host.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use crate::nodeshutdown::groups::tests::pod;
use crate::nodeshutdown::groups::{PriorityGracePeriod, SYSTEM_CRITICAL_PRIORITY};
use crate::nodeshutdown::ShutdownError;
use crate::testing::ScriptedShutdownInhibitor;

/// Pods that stop some seconds after they are killed (never, when not listed).
struct Host {
    pods: Vec<Arc<Pod>>,
    stops_after: HashMap<String, Duration>,
    killed: Mutex<Vec<(String, i64, Instant)>>,
    changes: Mutex<usize>,
}

#[async_trait]
impl ShutdownHost for Host {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        self.pods.clone()
    }
    async fn kill(&self, p: &Arc<Pod>, grace_seconds: i64) -> bool {
        self.killed
            .lock()
            .unwrap()
            .push((pod::uid(p).to_string(), grace_seconds, Instant::now()));
        true
    }
    fn pod_stopped(&self, uid: &str) -> bool {
        let killed = self.killed.lock().unwrap();
        let Some((_, _, at)) = killed.iter().find(|(u, _, _)| u == uid) else {
            return false;
        };
        self.stops_after
            .get(uid)
            .is_some_and(|d| Instant::now() >= *at + *d)
    }
    fn state_changed(&self) {
        *self.changes.lock().unwrap() += 1;
    }
}

/// A host whose pods stop `stops_after` their kill (never, when not listed).
fn host(pods: Vec<Arc<Pod>>, stops_after: &[(&str, u64)]) -> Arc<Host> {
    Arc::new(Host {
        pods,
        stops_after: stops_after
            .iter()
            .map(|(uid, s)| (uid.to_string(), Duration::from_secs(*s)))
            .collect(),
        killed: Mutex::default(),
        changes: Mutex::default(),
    })
}

/// Runs the manager on `host` until the returned token is cancelled.
fn spawn(
    m: &Arc<NodeShutdownManager>,
    host: &Arc<Host>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let token = CancellationToken::new();
    let (m, host, t) = (m.clone(), host.clone(), token.clone());
    (
        token,
        tokio::spawn(async move { m.run(host.as_ref(), t).await }),
    )
}

/// Waits until the inhibitor saw `call`.
async fn called(inhibitor: &ScriptedShutdownInhibitor, call: &str) {
    crate::testing::eventually(Duration::from_secs(60), call, || async {
        inhibitor.called(call).then_some(())
    })
    .await;
}

fn setup(
    config: ShutdownConfig,
    start_error: Option<ShutdownError>,
) -> (
    Arc<NodeShutdownManager>,
    Arc<ScriptedShutdownInhibitor>,
    mpsc::Sender<bool>,
    Arc<ShutdownState>,
) {
    let (inhibitor, tx) = ScriptedShutdownInhibitor::new(start_error);
    let state = Arc::new(ShutdownState::default());
    let m = Arc::new(NodeShutdownManager::new(
        config,
        inhibitor.clone(),
        state.clone(),
    ));
    (m, inhibitor, tx, state)
}

fn two_periods(total: u64, critical: u64) -> ShutdownConfig {
    ShutdownConfig {
        grace_period: Duration::from_secs(total),
        grace_period_critical_pods: Duration::from_secs(critical),
        by_pod_priority: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn regular_pods_then_critical_ones_then_the_lock_goes() {
    let (m, inhibitor, tx, state) = setup(two_periods(30, 10), None);
    // The slow pod never stops: its group's 20 s run out.
    let host = host(
        vec![
            pod("regular-slow", None, None),
            pod("regular-quick", Some(1000), Some(3)),
            pod("critical", Some(SYSTEM_CRITICAL_PRIORITY), None),
        ],
        &[("regular-quick", 3), ("critical", 2)],
    );
    let (token, task) = spawn(&m, &host);
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    tx.send(true).await.unwrap();
    called(&inhibitor, "release").await;
    assert!(state.is_shutting_down());
    assert_eq!(*host.changes.lock().unwrap(), 1);
    let killed = host.killed.lock().unwrap().clone();
    let summary: Vec<(&str, i64, u64)> = killed
        .iter()
        .map(|(uid, grace, at)| (uid.as_str(), *grace, (*at - t0).as_secs()))
        .collect();
    assert_eq!(
        summary,
        [
            ("regular-slow", 20, 0),
            ("regular-quick", 3, 0),
            ("critical", 10, 20)
        ],
        "the critical group starts when the regular group's 20 s are over"
    );

    // A cancelled shutdown: not shutting down any more, the lock taken again.
    tx.send(false).await.unwrap();
    called(&inhibitor, "acquire").await;
    assert!(!state.is_shutting_down());
    assert_eq!(inhibitor.calls()[0], "start 30s");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_group_whose_pods_stop_early_does_not_wait_its_whole_period() {
    let config = ShutdownConfig {
        by_pod_priority: vec![
            PriorityGracePeriod {
                priority: 0,
                grace_seconds: 60,
            },
            PriorityGracePeriod {
                priority: 100,
                grace_seconds: 60,
            },
        ],
        ..Default::default()
    };
    let (m, inhibitor, tx, _state) = setup(config, None);
    let host = host(
        vec![pod("low", Some(5), None), pod("high", Some(100), None)],
        &[("low", 4), ("high", 1)],
    );
    let (token, task) = spawn(&m, &host);
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    tx.send(true).await.unwrap();
    called(&inhibitor, "release").await;
    assert!(Instant::now() - t0 < Duration::from_secs(10));
    let killed = host.killed.lock().unwrap().clone();
    assert_eq!(killed[1].0, "high");
    assert!(killed[1].2 - t0 >= Duration::from_secs(4));
    assert_eq!(inhibitor.calls()[0], "start 120s");
    token.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn off_without_a_period_and_not_fatal_when_start_fails() {
    let (m, inhibitor, _tx, _) = setup(ShutdownConfig::default(), None);
    let host = host(Vec::new(), &[]);
    m.run(host.as_ref(), CancellationToken::new()).await;
    assert!(inhibitor.calls().is_empty(), "never started");

    let (m, inhibitor, _tx, _) = setup(
        two_periods(30, 0),
        Some(ShutdownError::Unavailable("no system bus".into())),
    );
    m.run(host.as_ref(), CancellationToken::new()).await;
    assert_eq!(inhibitor.calls(), ["start 30s"]);
}

#[tokio::test(start_paused = true)]
async fn pods_still_stopping_get_the_rest_of_the_period() {
    // The regular group's 20 s end as its pod's grace does; the pod stops a second later
    // (its SIGKILL), and the critical group is empty: the lock waits for it, within 30 s.
    let (m, inhibitor, tx, _state) = setup(two_periods(30, 10), None);
    let host = host(vec![pod("stubborn", None, None)], &[("stubborn", 21)]);
    let (token, task) = spawn(&m, &host);
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    tx.send(true).await.unwrap();
    called(&inhibitor, "release").await;
    let waited = Instant::now() - t0;
    assert!(
        waited >= Duration::from_secs(21) && waited < Duration::from_secs(23),
        "released after {waited:?}"
    );
    token.cancel();
    task.await.unwrap();
}
