//! The pod sync step: what a pod worker runs for each state of its lifecycle
//! ([`crate::pod_workers`]).
//!
//! - [`sync_pod`] (Syncing): read the pod's state from the runtime (from the
//!   [`crate::pod_cache`] while the PLEG has seen no change of the pod since the last read),
//!   publish its status, check `activeDeadlineSeconds`, compute the actions
//!   ([`actions::compute_pod_actions`], pure and table-tested; actions on a cached reading
//!   wait for a sync that reads the runtime afresh), set up its volumes and carry the actions
//!   out ([`start`]: kill, sandbox, init containers, sidecars, app containers), then publish
//!   the status again.
//! - [`stop::terminate_pod`] (Terminating): stop every container with the grace period, then
//!   the sandbox; tear down volumes; publish the final status.
//! - [`stop::cleanup_pod`] (Terminated → Finished): remove containers, sandboxes, the pod
//!   directory and pod-level resources.
//!
//! The sync step composes components with narrow inputs — the image manager
//! ([`crate::images`]), the volume manager ([`crate::volume`]), env resolution
//! ([`crate::env`]), hooks ([`crate::hooks`]), status generation ([`crate::status`]) — none
//! of which knows the engine. Only pod workers call these, one call at a time per pod.

pub mod actions;
mod sandbox;
mod start;
pub(crate) mod stop;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tracing::Instrument;

use crate::clock::{now_time, now_unix_nanos};
use crate::cm::CmError;
use crate::engine::Engine;
use crate::env::FieldValues;
use crate::hooks::MIN_GRACE_SECONDS;
use crate::pod;
use crate::pod_cache::Source;
use crate::pod_status::PodRuntimeStatus;
use crate::runtime::RuntimeError;
use crate::sink::{Event, EventType};
use crate::status::{generate, is_terminal, StatusInputs, WaitingReason};
use crate::telemetry;
use crate::volume::{volume_waiting_reason, VolumeError};

use actions::{compute_pod_actions_with_probes, PodActions};

pub(crate) use stop::{cleanup_pod, terminate_pod};

/// How long to wait before retrying after a failed runtime call.
const ERROR_RETRY: Duration = Duration::from_secs(2);

/// The first retry of a pod's failed volume set-up. The usual first failure of a pod that
/// will start is the kubelet outrunning the API server's own informers: the node authorizer
/// refuses the pod's secret ("no relationship found between node … and this object") and
/// NodeRestriction answers a TokenRequest with the pod "not found" until its caches have the
/// new pod, a few milliseconds later (both seen in `scripts/startup-latency.sh` runs). Go's
/// volume manager waits 500 ms (`initialDurationBeforeRetry`) before its first retry; 100 ms
/// costs such a pod far less and adds a few requests in the first seconds of a pod that
/// really cannot start.
const VOLUME_FIRST_RETRY: Duration = Duration::from_millis(100);

/// The delay before the next set-up after `failures` failed ones in a row: 100 ms, doubling,
/// up to [`ERROR_RETRY`]. Go doubles on up to 2 min 2 s; the cap here stays the pod sync's own
/// retry, so a pod waiting for a configMap created later starts within 2 s of it.
fn volume_retry(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(8);
    VOLUME_FIRST_RETRY
        .saturating_mul(1 << doublings)
        .min(ERROR_RETRY)
}

/// Why a step of the pod sync failed (each variant prints its cause once).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A runtime call failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Setting up or removing pod-level resources failed.
    #[error(transparent)]
    Resources(#[from] CmError),
    /// Setting up or tearing down volumes failed.
    #[error(transparent)]
    Volume(#[from] VolumeError),
    /// Removing a pod file failed.
    #[error("removing {path}: {error}")]
    RemoveFile {
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// What the worker does after a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncOutcome {
    /// The pod reached a terminal phase: terminate it.
    Terminal,
    /// Sync again after this long (or earlier on an event).
    Requeue(Duration),
}

/// Per-pod memory of the worker: why containers last failed to start, termination messages
/// already read, and why the kubelet failed the pod (if it did).
#[derive(Debug, Default)]
pub(crate) struct WorkerMemory {
    pub reasons: HashMap<String, WaitingReason>,
    /// Termination messages by container id.
    pub messages: HashMap<String, String>,
    /// Set when the kubelet fails the pod (`DeadlineExceeded`).
    pub failure: Option<WaitingReason>,
    /// Time spent getting the pod's images (left out of the pod start-up SLI).
    pub image_pull: Duration,
    /// Failed volume set-ups in a row (the retry's backoff, [`volume_retry`]).
    pub volume_failures: u32,
}

/// Go's reason and message for a pod past its `activeDeadlineSeconds`.
const DEADLINE_REASON: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

fn nothing_to_do(a: &PodActions) -> bool {
    !a.kill_pod
        && !a.create_sandbox
        && a.next_init_container.is_none()
        && a.sidecars_to_start.is_empty()
        && a.containers_to_start.is_empty()
        && a.containers_to_kill.is_empty()
        && a.ephemeral_to_start.is_empty()
}

/// Time left before the pod's `activeDeadlineSeconds` (counted from its start time) runs out;
/// `None` when it has no deadline.
fn active_deadline_left(p: &Pod, status: &PodStatus) -> Option<Duration> {
    let deadline = p.spec.as_ref()?.active_deadline_seconds?;
    let start = status.start_time.as_ref()?.0.as_nanosecond();
    let end = start + i128::from(deadline.max(0)) * 1_000_000_000;
    let left = end - i128::from(now_unix_nanos());
    Some(Duration::from_nanos(
        u64::try_from(left.max(0)).unwrap_or(u64::MAX),
    ))
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// The grace period for stopping the pod's containers: an explicit override as given,
/// otherwise the pod's (deletion or spec) grace period, at least 2s.
pub(crate) fn grace_period(p: &Pod, override_seconds: Option<i64>) -> Duration {
    match override_seconds {
        Some(s) => secs(s),
        None => secs(pod::termination_grace_period_seconds(p).max(MIN_GRACE_SECONDS)),
    }
}

/// The values `fieldRef`s, downward API volumes and `/etc/hosts` read that are not in the
/// pod object.
fn field_values(e: &Engine, pod_ip: String) -> FieldValues {
    FieldValues {
        pod_ip,
        host_ip: e.config.node_ips.first().cloned().unwrap_or_default(),
        node_name: e.config.node_name.clone(),
        host_ips: e.config.node_ips.clone(),
    }
}

/// Generates and records the pod's status; returns it.
pub(crate) fn update_status(
    e: &Engine,
    p: &Arc<Pod>,
    rt: &PodRuntimeStatus,
    memory: &WorkerMemory,
    terminated: bool,
) -> PodStatus {
    let old = e.status.get(pod::uid(p));
    let runtime_name = e.runtime_state.name();
    let status = generate(&StatusInputs {
        pod: p,
        runtime: rt,
        reasons: &memory.reasons,
        old: old.as_ref(),
        runtime_name: &runtime_name,
        host_ips: &e.config.node_ips,
        terminated,
        now: now_time(),
        probes: e.prober.as_ref(),
        failure: memory.failure.as_ref(),
    });
    e.status.set(p, status.clone());
    status
}

/// Sets up the pod's volumes for a sync. On failure: a `FailedMount` event, a waiting reason
/// on every container, `false` (the caller retries).
async fn prepare_volumes(
    e: &Engine,
    p: &Arc<Pod>,
    pod_ip: Option<String>,
    memory: &mut WorkerMemory,
) -> bool {
    let fields = field_values(e, pod_ip.unwrap_or_default());
    let node_labels = e
        .node_lister
        .as_ref()
        .and_then(|l| l.node())
        .and_then(|n| n.metadata.labels.clone())
        .unwrap_or_else(|| e.config.node_labels.clone());
    let outcome = e
        .volumes
        .setup_pod(p, &fields, &e.cm.allocatable(), &node_labels)
        .await;
    // What the set-up noted (volume expansions) whether or not it finished.
    for note in e.volumes.take_events(pod::uid(p)) {
        let kind = if note.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        e.sink
            .record_event(Event::for_pod(p, None, kind, note.reason, note.message));
    }
    match outcome {
        Ok(()) => {
            let volume_reason = volume_waiting_reason(p);
            memory.reasons.retain(|_, r| r.reason != volume_reason);
            memory.volume_failures = 0;
            true
        }
        Err(err) => {
            let message = err.to_string();
            memory.volume_failures = memory.volume_failures.saturating_add(1);
            tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), error = %message, "volumes not set up");
            e.sink.record_event(Event::for_pod(
                p,
                None,
                EventType::Warning,
                "FailedMount",
                message.clone(),
            ));
            for name in pod::all_containers(p).map(|c| c.name.clone()) {
                memory.reasons.insert(
                    name,
                    WaitingReason {
                        reason: volume_waiting_reason(p).into(),
                        message: message.clone(),
                    },
                );
            }
            false
        }
    }
}

/// One sync of a pod that should be running. See the module docs.
pub(crate) async fn sync_pod(e: &Engine, p: &Arc<Pod>, memory: &mut WorkerMemory) -> SyncOutcome {
    let _permit = match e.sync_permits.as_ref() {
        Some(s) => s.acquire().await.ok(),
        None => None,
    };
    let uid = pod::uid(p);
    let (mut rt, source) = match e.pod_cache.read(e.runtime.as_ref(), uid).await {
        Ok(read) => read,
        Err(err) => {
            tracing::warn!(pod = %pod::full_name(p), uid, error = %err, "reading pod state from the runtime failed");
            return SyncOutcome::Requeue(ERROR_RETRY);
        }
    };
    stop::fill_termination_messages(e, p, &mut rt, memory).await;
    let status = update_status(e, p, &rt, memory, false);
    if is_terminal(&status) {
        return SyncOutcome::Terminal;
    }
    let deadline_left = match active_deadline_left(p, &status) {
        Some(left) if left.is_zero() => {
            tracing::info!(pod = %pod::full_name(p), uid, "pod exceeded its activeDeadlineSeconds");
            e.sink.record_event(Event::for_pod(
                p,
                None,
                EventType::Warning,
                DEADLINE_REASON,
                DEADLINE_MESSAGE.into(),
            ));
            memory.failure = Some(WaitingReason {
                reason: DEADLINE_REASON.into(),
                message: DEADLINE_MESSAGE.into(),
            });
            update_status(e, p, &rt, memory, false);
            return SyncOutcome::Terminal;
        }
        other => other,
    };
    e.prober.ensure_pod(p);
    let actions = compute_pod_actions_with_probes(p, &rt, e.prober.as_ref());
    if source == Source::Stored && !nothing_to_do(&actions) {
        // Act only on what the runtime says now: a stored reading may lag it by the PLEG's
        // latency. Sync again at once, reading afresh (before the volumes: that sync sets
        // them up).
        e.pod_cache.remove(uid);
        return SyncOutcome::Requeue(Duration::ZERO);
    }
    let volumes_part = telemetry::sync_part_span(telemetry::SyncPart::Volumes);
    let pod_ip = rt.pod_ips().into_iter().next();
    if !prepare_volumes(e, p, pod_ip, memory)
        .instrument(volumes_part)
        .await
    {
        update_status(e, p, &rt, memory, false);
        return SyncOutcome::Requeue(volume_retry(memory.volume_failures));
    }
    if !pod::host_network(p) && !e.runtime_state.network_ready() {
        tracing::debug!(pod = %pod::full_name(p), "network is not ready; waiting");
        return SyncOutcome::Requeue(Duration::from_secs(1));
    }
    let resync = match deadline_left {
        Some(left) => left.min(e.config.sync_frequency),
        None => e.config.sync_frequency,
    };
    if nothing_to_do(&actions) {
        return SyncOutcome::Requeue(resync);
    }
    tracing::debug!(pod = %pod::full_name(p), uid, ?actions, "syncing pod");
    // What is stored describes the pod before the actions: read it afresh after them.
    e.pod_cache.remove(uid);
    let retry = start::execute(e, p, &rt, &actions, memory).await;
    let next = retry.unwrap_or(resync).min(resync);
    match e.pod_cache.read(e.runtime.as_ref(), uid).await {
        Ok((mut rt, _)) => {
            stop::fill_termination_messages(e, p, &mut rt, memory).await;
            let status = update_status(e, p, &rt, memory, false);
            if is_terminal(&status) {
                return SyncOutcome::Terminal;
            }
            SyncOutcome::Requeue(next)
        }
        Err(_) => SyncOutcome::Requeue(ERROR_RETRY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_retries_start_soon_and_stop_at_the_sync_retry() {
        let ms = Duration::from_millis;
        for (failures, want) in [
            (0, ms(100)),
            (1, ms(100)),
            (2, ms(200)),
            (3, ms(400)),
            (4, ms(800)),
            (5, ms(1600)),
            (6, ms(2000)),
            (40, ms(2000)),
            (u32::MAX, ms(2000)),
        ] {
            assert_eq!(volume_retry(failures), want, "after {failures} failures");
        }
    }
}
