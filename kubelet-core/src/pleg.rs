//! The pod lifecycle event generator (Go's `GenericPLEG`): relists the runtime every
//! `relist_period`, compares each sandbox's and container's state with the previous relist,
//! and emits an [`Event`] per change to the sync loop, which wakes the pod's worker.
//!
//! Transitions and the events they produce:
//!
//! | old → new | event |
//! |---|---|
//! | any → running | `ContainerStarted` |
//! | any → exited | `ContainerDied` |
//! | any → unknown | `ContainerChanged` |
//! | exited → gone | `ContainerRemoved` |
//! | running/unknown → gone | `ContainerChanged` |
//!
//! Sandboxes produce `SandboxChanged` on any change. The relist also records which pods
//! exist in the runtime (for orphan cleanup) and its timing: a PLEG whose last relist started
//! longer ago than the threshold (3m) is unhealthy, which `/healthz` reports. Each relist is
//! an observation of the [`crate::pod_cache`]: the pods it saw change are read afresh by their
//! workers, every other pod's stored state is current as of the relist.
//!
//! With `Config::evented_pleg` the PLEG task runs [`evented::run`] instead: the runtime's
//! container event stream drives the same events from the same records, and this relist
//! becomes its fallback (see [`evented`] for its state machine).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::clock::now_unix_nanos;
use crate::engine::Engine;
use crate::runtime::{ContainerState, SandboxState};

pub(crate) mod evented;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A container is now running.
    ContainerStarted,
    /// A container exited.
    ContainerDied,
    /// An exited container was removed.
    ContainerRemoved,
    /// A container changed to or from an unknown state.
    ContainerChanged,
    /// A sandbox appeared, changed state or disappeared.
    SandboxChanged,
}

/// One lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The pod the object belongs to.
    pub pod_uid: String,
    /// What changed.
    pub kind: EventKind,
    /// The container or sandbox id.
    pub id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Observed {
    Running,
    Exited,
    Unknown,
    SandboxReady,
    SandboxNotReady,
}

#[derive(Debug, Clone)]
struct Record {
    uid: String,
    state: Observed,
    /// When this state was observed (Unix nanos): the start of the relist that saw it, or the
    /// runtime's time stamp of the event that set it. Older events are stale.
    at: i64,
}

/// The relisting state. Owned by the PLEG task (relist-only, or the evented one in
/// [`evented`], which also applies stream events to the same records).
pub(crate) struct Pleg {
    engine: Arc<Engine>,
    records: HashMap<String, Record>,
    /// When the last successful relist started (Unix nanos; 0 before the first).
    last_relist_at: i64,
    /// When the previous relist started (for `kubelet_pleg_relist_interval_seconds`).
    last_relist: Option<std::time::Instant>,
}

fn container_observed(s: ContainerState) -> Observed {
    match s {
        ContainerState::Running => Observed::Running,
        ContainerState::Exited => Observed::Exited,
        // A created container has not run: Go maps it to unknown as well.
        ContainerState::Created | ContainerState::Unknown => Observed::Unknown,
    }
}

fn transition(old: Option<Observed>, new: Option<Observed>) -> Option<EventKind> {
    if old == new {
        return None;
    }
    let is_sandbox = |o: Option<Observed>| {
        matches!(
            o,
            Some(Observed::SandboxReady) | Some(Observed::SandboxNotReady)
        )
    };
    if is_sandbox(old) || is_sandbox(new) {
        return Some(EventKind::SandboxChanged);
    }
    Some(match new {
        Some(Observed::Running) => EventKind::ContainerStarted,
        Some(Observed::Exited) => EventKind::ContainerDied,
        Some(_) => EventKind::ContainerChanged,
        None => match old {
            Some(Observed::Exited) => EventKind::ContainerRemoved,
            _ => EventKind::ContainerChanged,
        },
    })
}

impl Pleg {
    pub fn new(engine: Arc<Engine>) -> Self {
        Pleg {
            engine,
            records: HashMap::new(),
            last_relist_at: 0,
            last_relist: None,
        }
    }

    /// One relist: returns the events, or the runtime error.
    pub async fn relist(&mut self) -> Result<Vec<Event>, crate::runtime::RuntimeError> {
        let at = now_unix_nanos();
        let observation = self.engine.pod_cache.begin();
        let crate::pod_status::Listing {
            sandboxes,
            containers,
            skipped,
        } = crate::pod_status::list_all(self.engine.runtime.as_ref(), || {
            self.engine.known_pod_uids()
        })
        .await?;
        let mut current: HashMap<String, Record> =
            HashMap::with_capacity(sandboxes.len() + containers.len());
        let mut seen = crate::runtime_state::SeenPods::default();
        for s in sandboxes {
            let state = match s.state {
                SandboxState::Ready => Observed::SandboxReady,
                SandboxState::NotReady => Observed::SandboxNotReady,
            };
            seen.pods
                .entry(s.pod.uid.clone())
                .or_insert_with(|| s.pod.clone());
            current.insert(
                s.id,
                Record {
                    uid: s.pod.uid,
                    state,
                    at,
                },
            );
        }
        for c in containers {
            seen.pods
                .entry(c.pod.uid.clone())
                .or_insert_with(|| c.pod.clone());
            seen.with_containers.insert(c.pod.uid.clone());
            current.insert(
                c.id,
                Record {
                    uid: c.pod.uid,
                    state: container_observed(c.state),
                    at,
                },
            );
        }
        let mut events = Vec::new();
        for (id, new) in &current {
            let old = self.records.get(id).map(|r| r.state);
            if let Some(kind) = transition(old, Some(new.state)) {
                events.push(Event {
                    pod_uid: new.uid.clone(),
                    kind,
                    id: id.clone(),
                });
            }
        }
        for (id, old) in &self.records {
            if !current.contains_key(id) {
                if let Some(kind) = transition(Some(old.state), None) {
                    events.push(Event {
                        pod_uid: old.uid.clone(),
                        kind,
                        id: id.clone(),
                    });
                }
            }
        }
        self.records = current;
        self.last_relist_at = at;
        // A pod this relist could not list is not vouched for: as if it changed.
        let changed = events.iter().map(|e| e.pod_uid.as_str());
        self.engine.pod_cache.observed(
            observation,
            changed.chain(skipped.iter().map(String::as_str)),
        );
        self.publish_counts();
        self.engine.runtime_state.set_pods(seen);
        Ok(events)
    }

    /// Sets the running sandbox/container gauges from the records.
    fn publish_counts(&self) {
        let count = |o: Observed| self.records.values().filter(|r| r.state == o).count();
        crate::metrics::global().set_running(
            count(Observed::SandboxReady),
            count(Observed::Running),
            count(Observed::Exited),
        );
    }

    /// Relists every period and sends events until shutdown.
    pub async fn run(mut self, events: mpsc::Sender<Event>, shutdown: CancellationToken) {
        let period = self.engine.config.pleg_relist_period;
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if !self.relist_and_send(&events, &shutdown).await {
                return;
            }
        }
    }

    /// One relist with its health stamps and metrics, its events sent (one per pod: the
    /// worker re-reads the whole pod anyway). False when the kubelet is shutting down.
    pub(crate) async fn relist_and_send(
        &mut self,
        events: &mpsc::Sender<Event>,
        shutdown: &CancellationToken,
    ) -> bool {
        let engine = self.engine.clone();
        let health = &engine.health;
        health
            .pleg_relist_started
            .store(now_unix_nanos(), Ordering::Relaxed);
        let relist_started = crate::clock::monotonic_now();
        let metrics = crate::metrics::global();
        if let Some(prev) = self.last_relist.replace(relist_started) {
            metrics
                .pleg_relist_interval
                .observe(relist_started.duration_since(prev));
        }
        let relisted = self.relist().await;
        metrics
            .pleg_relist_duration
            .observe(crate::clock::elapsed(relist_started));
        match relisted {
            Ok(evs) => {
                // As Go: the last-seen time moves only when a relist succeeded.
                metrics
                    .pleg_last_seen
                    .set(&[], now_unix_nanos() as f64 / 1e9);
                health
                    .pleg_relist_finished
                    .store(now_unix_nanos(), Ordering::Relaxed);
                let mut sent = std::collections::HashSet::new();
                for e in evs {
                    if !sent.insert(e.pod_uid.clone()) {
                        continue;
                    }
                    if !send(events, e, shutdown).await {
                        return false;
                    }
                }
            }
            Err(e) => {
                engine.pod_cache.observation_failed();
                tracing::warn!(error = %e, "PLEG relist failed");
            }
        }
        true
    }
}

/// Sends one event to the sync loop; false when shutting down or the loop is gone.
async fn send(events: &mpsc::Sender<Event>, e: Event, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        r = events.send(e) => r.is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_table() {
        use EventKind::*;
        use Observed::*;
        let cases = [
            (None, Some(Running), Some(ContainerStarted)),
            (Some(Unknown), Some(Running), Some(ContainerStarted)),
            (Some(Running), Some(Exited), Some(ContainerDied)),
            (None, Some(Exited), Some(ContainerDied)),
            (Some(Running), Some(Unknown), Some(ContainerChanged)),
            (Some(Exited), None, Some(ContainerRemoved)),
            (Some(Running), None, Some(ContainerChanged)),
            (Some(Running), Some(Running), None),
            (None, Some(SandboxReady), Some(SandboxChanged)),
            (
                Some(SandboxReady),
                Some(SandboxNotReady),
                Some(SandboxChanged),
            ),
            (Some(SandboxNotReady), None, Some(SandboxChanged)),
        ];
        for (old, new, want) in cases {
            assert_eq!(transition(old, new), want, "{old:?} -> {new:?}");
        }
    }
}
