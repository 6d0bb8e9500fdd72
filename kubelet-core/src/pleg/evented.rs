//! The evented PLEG (Go's `EventedPLEG`, `pkg/kubelet/pleg/evented.go`): the runtime's
//! container event stream ([`ContainerRuntime::container_events`], CRI `GetContainerEvents`)
//! drives pod syncs, and the relist of the parent module stays as the fallback.
//!
//! Each stream event is applied to the relist's own records (one record per container and
//! sandbox id, with the time its state was observed) and mapped through the same transition
//! table, so an event becomes the [`Event`] the relist would have produced for it, for the
//! pod's uid; the event drops the pod's stored state in the [`crate::pod_cache`] and the sync
//! loop wakes that pod's worker, which reads the pod's status afresh from the runtime. Because
//! relist and stream share the records, a change seen by both is reported once: the second
//! sight finds the state already recorded. An event older than the
//! record it would change (stamped before the relist that saw a later state) is stale and
//! dropped, so a stream buffered during a relist does not undo what the relist saw.
//!
//! # States
//!
//! | state | relist period | left when |
//! |---|---|---|
//! | **Connecting** | — | the subscription answers: `Ok` → a relist, then **Streaming**; `Unimplemented` → **Unsupported**; another error → **Fallback** |
//! | **Streaming** | `pleg_evented_relist_period` (300s) | the stream yields an error or ends → a relist at once, then **Fallback**; an `Unimplemented` error item → **Unsupported** |
//! | **Fallback** | `pleg_relist_period` (1s) | the retry delay (1s, doubling to [`MAX_RETRY_DELAY`]) passes → **Connecting** |
//! | **Unsupported** | `pleg_relist_period` (1s) | never: the runtime has no events; this is the plain relisting PLEG |
//!
//! The relist after every (re)connection runs after subscribing and before the first event
//! is read: a change made while no stream was open is found by the relist, one made after
//! the subscription is in the stream (buffered meanwhile), so none is lost; one seen by both
//! is reported once (above). While streaming, the PLEG stamps its health marks every
//! `pleg_relist_period` (the task is alive and reading), so the 3m health threshold holds
//! with a 300s relist; each such heartbeat is also a pod cache observation without a change
//! (as Go's evented PLEG moves its cache's global time forward), so a steady pod's resync is
//! served from the cache while streaming.
//!
//! Only the PLEG task calls into this module ([`run`], spawned by `Kubelet::run` when
//! `Config::evented_pleg` is set); it owns the [`Pleg`] and its records, so no locking. Stream
//! events do not refresh the runtime-state pod list used for orphan cleanup: the relists do.
//!
//! [`ContainerRuntime::container_events`]: crate::runtime::ContainerRuntime::container_events

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{send, transition, Event, Observed, Pleg, Record};
use crate::clock::now_unix_nanos;
use crate::runtime::{ContainerEvent, ContainerEventKind, ContainerEventStream, RuntimeError};

/// The longest wait between two attempts to reopen a broken stream.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Where the PLEG is (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Subscribing to the runtime's events.
    Connecting,
    /// Events drive syncs; relists every `pleg_evented_relist_period`.
    Streaming,
    /// The stream broke or could not be opened; relists every `pleg_relist_period` and
    /// retries the subscription.
    Fallback,
    /// The runtime has no event stream; relists every `pleg_relist_period` for good.
    Unsupported,
}

/// How a streaming session ended.
enum Ended {
    Shutdown,
    Broken(RuntimeError),
}

/// Runs the evented PLEG until shutdown (see the module docs).
pub(crate) async fn run(mut pleg: Pleg, events: mpsc::Sender<Event>, shutdown: CancellationToken) {
    let normal = pleg.engine.config.pleg_relist_period;
    let mut retry_delay = normal;
    let mut state = State::Connecting;
    let mut open: Option<ContainerEventStream> = None;
    loop {
        tracing::debug!(?state, "evented PLEG");
        state = match state {
            State::Connecting => {
                let subscribed = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = pleg.engine.runtime.container_events() => r,
                };
                match subscribed {
                    Ok(stream) => {
                        // The reconnect relist: after subscribing, before the first event.
                        if !pleg.relist_and_send(&events, &shutdown).await {
                            return;
                        }
                        open = Some(stream);
                        State::Streaming
                    }
                    Err(e) if e.is_unimplemented() => State::Unsupported,
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?retry_delay, "PLEG: cannot open the container event stream; relisting");
                        State::Fallback
                    }
                }
            }
            State::Streaming => {
                let Some(stream) = open.take() else {
                    state = State::Connecting;
                    continue;
                };
                tracing::info!(fallback_period = ?pleg.engine.config.pleg_evented_relist_period, "PLEG: container event stream open");
                match stream_events(&mut pleg, stream, &events, &shutdown).await {
                    Ended::Shutdown => return,
                    Ended::Broken(e) if e.is_unimplemented() => State::Unsupported,
                    Ended::Broken(e) => {
                        tracing::warn!(error = %e, period = ?normal, "PLEG: container event stream broke; relisting");
                        retry_delay = normal;
                        // The relist takes over at once.
                        if !pleg.relist_and_send(&events, &shutdown).await {
                            return;
                        }
                        State::Fallback
                    }
                }
            }
            State::Fallback => {
                if !relist_for(&mut pleg, retry_delay, &events, &shutdown).await {
                    return;
                }
                retry_delay = (retry_delay * 2).min(MAX_RETRY_DELAY);
                State::Connecting
            }
            State::Unsupported => {
                tracing::info!("PLEG: the runtime has no container events; relisting");
                pleg.run(events, shutdown).await;
                return;
            }
        };
    }
}

/// Relists every `pleg_relist_period` for `span`; false on shutdown.
async fn relist_for(
    pleg: &mut Pleg,
    span: Duration,
    events: &mpsc::Sender<Event>,
    shutdown: &CancellationToken,
) -> bool {
    let period = pleg.engine.config.pleg_relist_period;
    let until = tokio::time::Instant::now() + span;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep_until(until) => return true,
            _ = tick.tick() => {
                if !pleg.relist_and_send(events, shutdown).await {
                    return false;
                }
            }
        }
    }
}

/// The **Streaming** state: applies events until the stream breaks or shutdown.
async fn stream_events(
    pleg: &mut Pleg,
    mut stream: ContainerEventStream,
    events: &mpsc::Sender<Event>,
    shutdown: &CancellationToken,
) -> Ended {
    let cfg = &pleg.engine.config;
    let (long, beat) = (cfg.pleg_evented_relist_period, cfg.pleg_relist_period);
    let now = tokio::time::Instant::now();
    let mut relist = tokio::time::interval_at(now + long, long);
    relist.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heartbeat = tokio::time::interval_at(now + beat, beat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => return Ended::Shutdown,
            item = stream.next() => match item {
                Some(Ok(e)) => {
                    if let Some(ev) = pleg.apply(&e) {
                        if !send(events, ev, shutdown).await {
                            return Ended::Shutdown;
                        }
                    }
                }
                Some(Err(e)) => return Ended::Broken(e),
                None => return Ended::Broken(RuntimeError::Unavailable(
                    "the container event stream ended".into(),
                )),
            },
            _ = relist.tick() => {
                if !pleg.relist_and_send(events, shutdown).await {
                    return Ended::Shutdown;
                }
            }
            _ = heartbeat.tick() => {
                // Every change up to now came as an event: what the workers stored is
                // current (the pod cache's observation without a change).
                let cache = &pleg.engine.pod_cache;
                cache.observed(cache.begin(), []);
                let health = &pleg.engine.health;
                let now = now_unix_nanos();
                health.pleg_relist_started.store(now, Ordering::Relaxed);
                health.pleg_relist_finished.store(now, Ordering::Relaxed);
                crate::metrics::global().pleg_last_seen.set(&[], now as f64 / 1e9);
            }
        }
    }
}

/// What a container event says the object's state is now (`None`: gone). A sandbox's own
/// events carry its id as the container id.
fn observed(e: &ContainerEvent) -> Option<Observed> {
    let sandbox = !e.sandbox_id.is_empty() && e.container_id == e.sandbox_id;
    match (sandbox, e.kind) {
        (_, ContainerEventKind::Deleted) => None,
        (false, ContainerEventKind::Created) => Some(Observed::Unknown),
        (false, ContainerEventKind::Started) => Some(Observed::Running),
        (false, ContainerEventKind::Stopped) => Some(Observed::Exited),
        (true, ContainerEventKind::Started) => Some(Observed::SandboxReady),
        (true, ContainerEventKind::Created | ContainerEventKind::Stopped) => {
            Some(Observed::SandboxNotReady)
        }
    }
}

impl Pleg {
    /// Applies one stream event to the records; the lifecycle event it means, if any (none
    /// when stale, already recorded, or of no pod of ours).
    pub(crate) fn apply(&mut self, e: &ContainerEvent) -> Option<Event> {
        let id = &e.container_id;
        let old = self.records.get(id);
        if e.created_at < old.map_or(self.last_relist_at, |r| r.at) {
            tracing::trace!(container = %id, kind = ?e.kind, "PLEG: stale container event dropped");
            return None;
        }
        let uid = if !e.pod.uid.is_empty() {
            e.pod.uid.clone()
        } else if let Some(r) = old.or_else(|| self.records.get(&e.sandbox_id)) {
            r.uid.clone()
        } else {
            return None;
        };
        let new = observed(e);
        let kind = transition(old.map(|r| r.state), new);
        match new {
            Some(state) => {
                self.records.insert(
                    id.clone(),
                    Record {
                        uid: uid.clone(),
                        state,
                        at: e.created_at,
                    },
                );
            }
            None => {
                self.records.remove(id);
            }
        }
        let kind = kind?;
        self.engine.pod_cache.changed(&uid);
        self.publish_counts();
        Some(Event {
            pod_uid: uid,
            kind,
            id: id.clone(),
        })
    }
}

#[cfg(test)]
#[path = "evented_tests.rs"]
mod tests;
