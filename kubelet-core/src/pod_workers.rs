//! Pod workers: one task per pod UID that serializes everything done to that pod.
//!
//! # States
//! ```text
//!            Sync updates                 kill (removed, deleted, terminal)
//!   ┌──────────────┐                        │
//!   ▼              │                        ▼
//! Syncing ──(sync_pod)──► Terminating ──(all stopped)──► Terminated ──(cleanup)──► Finished
//!                          ▲   │ a shorter grace period                 ▲
//!                          └───┘ restarts the stop                      │ only once the pod
//!                                                                       │ left the config or
//!                                                                       │ is being deleted
//! ```
//! - **Syncing**: every update runs [`crate::sync`]'s `sync_pod`: create what is missing,
//!   restart what the restart policy allows, publish status. The worker re-syncs on its own
//!   after `syncFrequency` (with a per-pod jitter of up to 50%) or earlier when a backoff
//!   expires. A sync that finds the pod in a terminal phase moves it to Terminating.
//! - **Terminating**: stops all containers with the grace period, then the sandbox. A later
//!   kill request may only *shorten* the grace period; doing so restarts the stop with the
//!   shorter period. Sync updates are ignored from here on: a terminating pod never runs again.
//! - **Terminated**: nothing runs. The final status is recorded. A pod that is still desired
//!   (it completed) stays here, its exited containers kept for logs.
//! - **Finished**: the pod was removed from its source (or deleted): containers, sandboxes and
//!   pod-level resources are removed, the status sink is told, and the task ends. The sync
//!   loop forgets the worker at housekeeping once the pod is gone from the pod manager.
//!
//! # Who may call
//! Only the sync loop calls [`PodWorkers::update_pod`]; updates never block it: a pending sync
//! is coalesced with a newer one (latest wins), and kill requests are folded into the state.
//! A pod deleted and re-created with the same name has a new UID and so a new worker; a new
//! static pod waits until an old pod with the same full name has finished terminating.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::engine::Engine;
use crate::pod;
use crate::sync::{SyncOutcome, WorkerMemory};

/// The lifecycle state of a pod worker. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerState {
    /// Running the pod.
    Syncing,
    /// Stopping the pod.
    Terminating,
    /// Stopped; waiting for the pod to be removed.
    Terminated,
    /// Cleaned up; the task has ended.
    Finished,
}

/// What the sync loop asks of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkKind {
    /// Bring the pod to its desired state.
    Sync,
    /// Stop the pod. `removed`: it left the config and should be cleaned up afterwards.
    Kill {
        grace_override: Option<i64>,
        removed: bool,
    },
}

struct Slot {
    pod: Arc<Pod>,
    state: WorkerState,
    sync_pending: bool,
    kill_grace: Option<Duration>,
    removed: bool,
    /// Cancels an in-flight stop when the grace period is shortened (made when stopping starts).
    cancel_stop: Option<CancellationToken>,
}

struct Worker {
    slot: Mutex<Slot>,
    notify: Notify,
}

impl Worker {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// All pod workers. See the module docs.
pub(crate) struct PodWorkers {
    workers: Mutex<HashMap<String, Arc<Worker>>>,
    /// full name → uids of static pods being terminated under that name.
    terminating_names: Mutex<HashMap<String, HashSet<String>>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

const STOP_RETRY: Duration = Duration::from_secs(2);

fn jitter(uid: &str, base: Duration) -> Duration {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut h);
    let permille = (h.finish() % 500) as u32;
    base + base * permille / 1000
}

impl PodWorkers {
    pub fn new(shutdown: CancellationToken) -> Self {
        PodWorkers {
            workers: Mutex::new(HashMap::new()),
            terminating_names: Mutex::new(HashMap::new()),
            tracker: TaskTracker::new(),
            shutdown,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Worker>>> {
        self.workers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn names(&self) -> MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.terminating_names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Delivers an update to the pod's worker, starting the worker if needed. Never blocks.
    pub fn update_pod(self: &Arc<Self>, engine: &Arc<Engine>, p: Arc<Pod>, kind: WorkKind) {
        let uid = pod::uid(&p).to_string();
        let kind = match kind {
            WorkKind::Sync if pod::is_deleted(&p) => WorkKind::Kill {
                grace_override: None,
                removed: false,
            },
            k => k,
        };
        let worker = {
            let mut map = self.map();
            if let Some(w) = map.get(&uid) {
                w.clone()
            } else {
                let w = Arc::new(Worker {
                    slot: Mutex::new(Slot {
                        pod: p.clone(),
                        state: WorkerState::Syncing,
                        sync_pending: false,
                        kill_grace: None,
                        removed: false,
                        cancel_stop: None,
                    }),
                    notify: Notify::new(),
                });
                map.insert(uid.clone(), w.clone());
                let (workers, engine, w2) = (self.clone(), engine.clone(), w.clone());
                self.tracker
                    .spawn(async move { workers.run_worker(engine, w2).await });
                w
            }
        };
        let mut slot = worker.lock();
        if slot.state == WorkerState::Finished {
            return;
        }
        slot.pod = p.clone();
        match kind {
            WorkKind::Sync => {
                if slot.kill_grace.is_none() {
                    slot.sync_pending = true;
                }
            }
            WorkKind::Kill {
                grace_override,
                removed,
            } => {
                slot.removed |= removed;
                let grace = engine.grace_period(&p, grace_override);
                match slot.kill_grace {
                    None => {
                        slot.kill_grace = Some(grace);
                        if pod::is_static(&p) {
                            self.names()
                                .entry(pod::full_name(&p))
                                .or_default()
                                .insert(uid.clone());
                        }
                    }
                    Some(old) if grace < old => {
                        slot.kill_grace = Some(grace);
                        if let Some(token) = &slot.cancel_stop {
                            token.cancel();
                        }
                    }
                    Some(_) => {}
                }
            }
        }
        drop(slot);
        worker.notify.notify_one();
    }

    /// The state of a pod's worker, if it has one.
    pub fn state(&self, uid: &str) -> Option<WorkerState> {
        self.map().get(uid).map(|w| w.lock().state)
    }

    /// Forgets finished workers whose pods are no longer desired.
    pub fn prune_finished(&self, desired: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut map = self.map();
        let gone: Vec<String> = map
            .iter()
            .filter(|(uid, w)| w.lock().state == WorkerState::Finished && !desired(uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in &gone {
            map.remove(uid);
        }
        gone
    }

    /// Waits for every worker task to end (after shutdown was signalled).
    pub async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    fn static_start_blocked(&self, p: &Pod) -> bool {
        if !pod::is_static(p) {
            return false;
        }
        let uid = pod::uid(p);
        self.names()
            .get(&pod::full_name(p))
            .is_some_and(|uids| uids.iter().any(|u| u != uid))
    }

    fn finish_terminating(&self, p: &Pod) {
        let full = pod::full_name(p);
        let mut names = self.names();
        if let Some(set) = names.get_mut(&full) {
            set.remove(pod::uid(p));
            if set.is_empty() {
                names.remove(&full);
            }
        }
    }

    /// Waits for a notification, the deadline, or shutdown; false on shutdown.
    async fn wait_for_work(&self, worker: &Worker, deadline: Option<Instant>) -> bool {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = worker.notify.notified() => true,
            _ = sleep => true,
        }
    }

    async fn run_worker(self: Arc<Self>, engine: Arc<Engine>, worker: Arc<Worker>) {
        let mut memory = WorkerMemory::default();
        let mut next_sync: Option<Instant> = None;
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            let (state, p, kill_grace, removed, sync_due, cancel) = {
                let mut slot = worker.lock();
                let due = slot.sync_pending || next_sync.is_some_and(|t| t <= Instant::now());
                slot.sync_pending = false;
                let cancel = match slot.state {
                    WorkerState::Terminating => Some(
                        slot.cancel_stop
                            .get_or_insert_with(CancellationToken::new)
                            .clone(),
                    ),
                    _ => None,
                };
                (
                    slot.state,
                    slot.pod.clone(),
                    slot.kill_grace,
                    slot.removed,
                    due,
                    cancel,
                )
            };
            let uid = pod::uid(&p).to_string();
            match state {
                WorkerState::Syncing if kill_grace.is_some() => {
                    worker.lock().state = WorkerState::Terminating;
                }
                WorkerState::Syncing => {
                    if sync_due {
                        if self.static_start_blocked(&p) {
                            tracing::debug!(pod = %pod::full_name(&p), uid, "waiting for the previous static pod of this name to terminate");
                            next_sync = Some(Instant::now() + Duration::from_millis(500));
                        } else {
                            let span =
                                tracing::debug_span!("sync", pod = %pod::full_name(&p), uid = %uid);
                            // Boxed: the sync's state lives on the heap only while it runs,
                            // keeping thousands of idle workers small.
                            let outcome = Box::pin(tracing::Instrument::instrument(
                                engine.sync_pod(&p, &mut memory),
                                span,
                            ))
                            .await;
                            match outcome {
                                SyncOutcome::Terminal => {
                                    let mut slot = worker.lock();
                                    if slot.kill_grace.is_none() {
                                        slot.kill_grace = Some(engine.grace_period(&p, None));
                                    }
                                    continue;
                                }
                                SyncOutcome::Requeue(d) => {
                                    let d = if d == engine.config.sync_frequency {
                                        jitter(&uid, d)
                                    } else {
                                        d
                                    };
                                    next_sync = Some(Instant::now() + d);
                                }
                            }
                        }
                    }
                    if !self.wait_for_work(&worker, next_sync).await {
                        return;
                    }
                }
                WorkerState::Terminating => {
                    let grace = kill_grace.unwrap_or(STOP_RETRY);
                    tracing::info!(pod = %pod::full_name(&p), uid, grace_seconds = grace.as_secs(), "terminating pod");
                    let cancel = cancel.unwrap_or_default();
                    let result = tokio::select! {
                        _ = self.shutdown.cancelled() => return,
                        _ = cancel.cancelled() => {
                            worker.lock().cancel_stop = None;
                            continue;
                        }
                        r = Box::pin(engine.terminate_pod(&p, grace, &mut memory)) => r,
                    };
                    match result {
                        Ok(()) => {
                            worker.lock().state = WorkerState::Terminated;
                            self.finish_terminating(&p);
                            tracing::info!(pod = %pod::full_name(&p), uid, "pod terminated");
                        }
                        Err(e) => {
                            tracing::warn!(pod = %pod::full_name(&p), uid, error = %e, "terminating pod failed; retrying");
                            if !self
                                .wait_for_work(&worker, Some(Instant::now() + STOP_RETRY))
                                .await
                            {
                                return;
                            }
                        }
                    }
                }
                WorkerState::Terminated => {
                    if removed || pod::is_deleted(&p) {
                        match Box::pin(engine.cleanup_pod(&p)).await {
                            Ok(()) => {
                                if pod::is_deleted(&p) {
                                    engine.status.terminated(p.clone());
                                }
                                worker.lock().state = WorkerState::Finished;
                                tracing::info!(pod = %pod::full_name(&p), uid, "pod cleaned up");
                                return;
                            }
                            Err(e) => {
                                tracing::warn!(pod = %pod::full_name(&p), uid, error = %e, "cleaning up pod failed; retrying");
                                if !self
                                    .wait_for_work(&worker, Some(Instant::now() + STOP_RETRY))
                                    .await
                                {
                                    return;
                                }
                            }
                        }
                    } else if !self.wait_for_work(&worker, None).await {
                        return;
                    }
                }
                WorkerState::Finished => return,
            }
        }
    }
}
