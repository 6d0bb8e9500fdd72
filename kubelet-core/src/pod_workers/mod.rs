//! Pod workers: one task per pod UID that serializes everything done to that pod.
//!
//! The lifecycle itself — states, events, transitions, who may deliver what — is the pure
//! state machine in [`lifecycle`] (read its module docs first). This module only carries it
//! out: [`PodWorkers::update_pod`] turns the sync loop's requests into events, and each
//! worker's task runs the long actions (sync, stop, cleanup) the machine hands it and feeds
//! their results back.
//!
//! # Who may call
//! Only the sync loop calls [`PodWorkers::update_pod`]; it never blocks: the transition runs
//! under the worker's lock, immediate actions run on the caller, long work waits for the
//! worker. A pod deleted and re-created with the same name has a new UID and so a new worker;
//! a new static pod waits until an old pod with the same full name has finished terminating.

mod lifecycle;

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
use crate::status::WaitingReason;
use crate::sync::{self, SyncOutcome, WorkerMemory};
use crate::telemetry::{PodStep, UpdateType};

use lifecycle::{transition, Action, Ctx, Event, State, SyncResult};

/// The lifecycle state of a pod worker, as the handle reports it: a pod is synced until it
/// must stop, then terminated (its containers stopped with the grace period), then — once
/// it left its source or was deleted — cleaned up and finished.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WorkKind {
    /// Bring the pod to its desired state.
    Sync,
    /// Stop the pod. `removed`: it left the config and should be cleaned up afterwards.
    /// `failure`: the kubelet fails the pod (an eviction): its final status is phase
    /// `Failed` with this reason and message (the first failure asked for wins; it applies
    /// while the pod has not finished stopping).
    Kill {
        grace_override: Option<i64>,
        removed: bool,
        failure: Option<WaitingReason>,
    },
}

/// A worker's shared part: the machine's state, the newest copy of the pod, and the token of
/// a running stop (so a shorter grace period can cancel it).
struct Slot {
    pod: Arc<Pod>,
    state: State,
    stop_token: Option<CancellationToken>,
    /// Why the kubelet fails the pod, handed to the stop (see [`WorkKind::Kill`]).
    failure: Option<WaitingReason>,
    /// A sync of the pod has returned (its images were pulled or found, or the sync failed
    /// before): image garbage collection waits for every syncing pod's first.
    synced_once: bool,
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
    /// Uids whose workers finished and were forgotten (a new worker for one is a restart,
    /// `kubelet_restarted_pods_total`); bounded.
    finished: Mutex<HashSet<String>>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
}

fn jitter(uid: &str, base: Duration) -> Duration {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut h);
    let permille = (h.finish() % 500) as u32;
    base + base * permille / 1000
}

/// The long action a worker runs next, with what it needs.
enum Step {
    Sync(Arc<Pod>),
    Stop(Arc<Pod>, Duration, CancellationToken, Option<WaitingReason>),
    Cleanup(Arc<Pod>),
    Wait(Option<Instant>),
    Exit,
}

impl PodWorkers {
    pub fn new(shutdown: CancellationToken) -> Self {
        PodWorkers {
            workers: Mutex::new(HashMap::new()),
            terminating_names: Mutex::new(HashMap::new()),
            finished: Mutex::new(HashSet::new()),
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
        let mut failure = None;
        let event = match kind {
            WorkKind::Sync if !pod::is_deleted(&p) => Event::Sync,
            WorkKind::Sync => Event::Kill {
                grace: sync::grace_period(&p, None),
                cleanup: true,
            },
            WorkKind::Kill {
                grace_override,
                removed,
                failure: f,
            } => {
                failure = f;
                Event::Kill {
                    grace: sync::grace_period(&p, grace_override),
                    cleanup: removed || pod::is_deleted(&p),
                }
            }
        };
        let worker = {
            let mut map = self.map();
            if let Some(w) = map.get(&uid) {
                w.clone()
            } else {
                let w = Arc::new(Worker {
                    slot: Mutex::new(Slot {
                        pod: p.clone(),
                        state: State::new(),
                        stop_token: None,
                        failure: None,
                        synced_once: false,
                    }),
                    notify: Notify::new(),
                });
                map.insert(uid.clone(), w.clone());
                let metrics = crate::metrics::global();
                if self
                    .finished
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&uid)
                {
                    let is_static = if pod::is_static(&p) { "true" } else { "false" };
                    metrics.restarted_pods.inc(is_static);
                }
                let (workers, engine, w2) = (self.clone(), engine.clone(), w.clone());
                let queued = tokio::time::Instant::now();
                self.tracker.spawn(async move {
                    metrics.pod_worker_start_duration.observe(queued.elapsed());
                    workers.run_worker(engine, w2).await
                });
                w
            }
        };
        let mut slot = worker.lock();
        if slot.state == State::Finished {
            return;
        }
        if failure.is_some()
            && slot.failure.is_none()
            && matches!(slot.state, State::Syncing(_) | State::Terminating { .. })
        {
            slot.failure = failure;
        }
        slot.pod = p;
        self.apply(engine, &mut slot, event);
        drop(slot);
        worker.notify.notify_one();
    }

    /// Runs one transition on the worker's slot and carries out its immediate actions;
    /// returns the long action for the worker, if any.
    /// Runs under the worker's lock, so nobody sees the new state before its immediate
    /// actions are done.
    fn apply(&self, engine: &Engine, slot: &mut Slot, event: Event) -> Step {
        let p = slot.pod.clone();
        let ctx = Ctx {
            now: Instant::now(),
            is_static: pod::is_static(&p),
            deleted: pod::is_deleted(&p),
            static_blocked: event == Event::Wake && self.static_start_blocked(&p),
        };
        let (state, actions) = transition(slot.state, event, &ctx);
        slot.state = state;
        let mut step = Step::Wait(state.deadline());
        for action in actions {
            match action {
                Action::Sync => step = Step::Sync(p.clone()),
                Action::Stop { grace } => {
                    let token = CancellationToken::new();
                    slot.stop_token = Some(token.clone());
                    step = Step::Stop(p.clone(), grace, token, slot.failure.clone());
                }
                Action::Cleanup => step = Step::Cleanup(p.clone()),
                Action::CancelStop => {
                    if let Some(token) = &slot.stop_token {
                        token.cancel();
                    }
                }
                Action::ClaimName => {
                    self.names()
                        .entry(pod::full_name(&p))
                        .or_default()
                        .insert(pod::uid(&p).to_string());
                }
                Action::ReleaseName => self.release_name(&p),
                Action::ReportTerminated => engine.status.terminated(p.clone()),
                Action::Exit => step = Step::Exit,
            }
        }
        step
    }

    /// The state of a pod's worker, if it has one.
    pub fn state(&self, uid: &str) -> Option<WorkerState> {
        self.map().get(uid).map(|w| w.lock().state.phase())
    }

    /// Forgets finished workers whose pods are no longer desired.
    pub fn prune_finished(&self, desired: &dyn Fn(&str) -> bool) -> Vec<String> {
        let mut map = self.map();
        let gone: Vec<String> = map
            .iter()
            .filter(|(uid, w)| w.lock().state == State::Finished && !desired(uid))
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in &gone {
            map.remove(uid);
        }
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        if finished.len() > 10_000 {
            finished.clear();
        }
        finished.extend(gone.iter().cloned());
        gone
    }

    /// How many pods are to run but have not finished their first sync yet (workers in
    /// `Syncing` whose sync never returned).
    pub fn awaiting_first_sync(&self) -> usize {
        self.map()
            .values()
            .filter(|w| {
                let slot = w.lock();
                !slot.synced_once && slot.state.phase() == WorkerState::Syncing
            })
            .count()
    }

    /// Whether the static pod of this `namespace/name` is being stopped: its worker is
    /// terminating and not yet done (Go's `IsPodForMirrorPodTerminatingByFullName`; its
    /// mirror pod stays while it is).
    pub fn static_pod_terminating(&self, full_name: &str) -> bool {
        self.map().values().any(|w| {
            let slot = w.lock();
            pod::is_static(&slot.pod)
                && slot.state.phase() == WorkerState::Terminating
                && pod::full_name(&slot.pod) == full_name
        })
    }

    /// Every worker: its pod's uid, its state, whether the pod is static.
    pub fn states(&self) -> Vec<(String, WorkerState, bool)> {
        self.map()
            .iter()
            .map(|(uid, w)| {
                let slot = w.lock();
                (uid.clone(), slot.state.phase(), pod::is_static(&slot.pod))
            })
            .collect()
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

    fn release_name(&self, p: &Pod) {
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

    /// The worker's task: wake, run the long action the machine hands out, report its
    /// result, repeat; ends when the machine says so or at shutdown.
    async fn run_worker(self: Arc<Self>, engine: Arc<Engine>, worker: Arc<Worker>) {
        let mut memory = WorkerMemory::default();
        // `create` for the worker's first sync, `sync` after (Go's update type, on the span).
        let mut update = UpdateType::Create;
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            let step = {
                let mut slot = worker.lock();
                self.apply(&engine, &mut slot, Event::Wake)
            };
            let done = match step {
                Step::Exit => return,
                Step::Wait(deadline) => {
                    if !self.wait_for_work(&worker, deadline).await {
                        return;
                    }
                    continue;
                }
                Step::Sync(p) => {
                    let done = self.sync(&engine, &p, &mut memory, update).await;
                    update = UpdateType::Sync;
                    Event::SyncDone(done)
                }
                Step::Stop(p, grace, token, failure) => {
                    let uid = pod::uid(&p);
                    if let Some(f) = failure {
                        memory.failure.get_or_insert(f);
                    }
                    tracing::info!(pod = %pod::full_name(&p), uid, grace_seconds = grace.as_secs(), "terminating pod");
                    let result = tokio::select! {
                        _ = self.shutdown.cancelled() => return,
                        _ = token.cancelled() => None,
                        r = Box::pin(tracing::Instrument::instrument(
                            sync::terminate_pod(&engine, &p, grace, &mut memory),
                            otel_span(PodStep::Terminating, &p, None),
                        )) => Some(r),
                    };
                    match result {
                        None => Event::StopCancelled,
                        Some(Ok(())) => {
                            tracing::info!(pod = %pod::full_name(&p), uid, "pod terminated");
                            Event::StopDone { ok: true }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(pod = %pod::full_name(&p), uid, error = %e, "terminating pod failed; retrying");
                            Event::StopDone { ok: false }
                        }
                    }
                }
                Step::Cleanup(p) => {
                    let uid = pod::uid(&p);
                    let span = otel_span(PodStep::Terminated, &p, None);
                    match Box::pin(tracing::Instrument::instrument(
                        sync::cleanup_pod(&engine, &p),
                        span,
                    ))
                    .await
                    {
                        Ok(()) => {
                            tracing::info!(pod = %pod::full_name(&p), uid, "pod cleaned up");
                            Event::CleanupDone { ok: true }
                        }
                        Err(e) => {
                            tracing::warn!(pod = %pod::full_name(&p), uid, error = %e, "cleaning up pod failed; retrying");
                            Event::CleanupDone { ok: false }
                        }
                    }
                }
            };
            let mut slot = worker.lock();
            if matches!(done, Event::StopDone { .. } | Event::StopCancelled) {
                slot.stop_token = None;
            }
            if matches!(done, Event::SyncDone(_)) {
                slot.synced_once = true;
            }
            if let Step::Exit = self.apply(&engine, &mut slot, done) {
                return;
            }
        }
    }

    /// One sync of the pod, timed and counted; the result the machine needs.
    async fn sync(
        &self,
        engine: &Engine,
        p: &Arc<Pod>,
        memory: &mut WorkerMemory,
        update: UpdateType,
    ) -> SyncResult {
        let uid = pod::uid(p);
        let otel = otel_span(PodStep::Sync, p, Some(update));
        let span = tracing::debug_span!("sync", pod = %pod::full_name(p), uid = %uid);
        // Boxed: the sync's state lives on the heap only while it runs, keeping thousands of
        // idle workers small.
        let started = tokio::time::Instant::now();
        let outcome = Box::pin(tracing::Instrument::instrument(
            tracing::Instrument::instrument(sync::sync_pod(engine, p, memory), span),
            otel,
        ))
        .await;
        let metrics = crate::metrics::global();
        metrics
            .pod_worker_duration
            .with("sync")
            .observe(started.elapsed());
        metrics.pod_synced(p, engine.status.get(uid).as_ref(), memory.image_pull);
        match outcome {
            SyncOutcome::Terminal => SyncResult::Terminal {
                grace: sync::grace_period(p, None),
            },
            SyncOutcome::Requeue(d) => {
                let d = if d == engine.config.sync_frequency {
                    jitter(uid, d)
                } else {
                    d
                };
                SyncResult::Requeue(Instant::now() + d)
            }
        }
    }
}

/// The exported span of one worker step for `p` (see [`crate::telemetry`]).
fn otel_span(step: PodStep, p: &Pod, update: Option<UpdateType>) -> tracing::Span {
    crate::telemetry::pod_span(step, pod::namespace(p), pod::name(p), pod::uid(p), update)
}
