//! The eviction manager's loop and its one synchronisation (Go's `managerImpl.synchronize`
//! and `Start`); see the module docs of [`crate::eviction`] for the picture.
//!
//! The decisions are split from the effects: [`State::step`] is the pure part of a
//! synchronisation (thresholds met, grace periods, conditions held for the transition
//! period), tested on the paused clock; [`EvictionManager::synchronize`] adds the effects
//! through an [`EvictionHost`] — the summary, node-level reclaim, events and the eviction
//! request to the pod worker — so the manager knows nothing of the engine.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::local_storage;
use super::messages::eviction_message;
use super::ranking::{rank, ranking_for};
use super::signals::{self, Observations};
use super::thresholds::{self, Signal, Threshold};
use super::{EvictionConfig, PressureCondition, PressureState};
use crate::pod;
use crate::sink::{Event, EventType};
use crate::stats::StatsError;
use crate::summary::Summary;

/// How long the manager waits for evicted pods to stop (Go's `podCleanupTimeout`).
pub(crate) const CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often it checks (Go's `podCleanupPollFreq`).
pub(crate) const CLEANUP_POLL: Duration = Duration::from_secs(1);

/// Node-level resources the manager can reclaim before evicting pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaim {
    /// Dead containers (and sandboxes), also of pods that are not deleted (Go's
    /// `DeleteAllUnusedContainers`).
    Containers,
    /// Every unused image (Go's `DeleteUnusedImages`).
    Images,
}

/// Which pods a summary for the manager measures besides the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MeasuredPods {
    /// None: the node-level signals alone.
    None,
    /// The pods with local-storage limits ([`local_storage::has_limits`]): what every cycle
    /// needs while no threshold is met.
    WithLocalStorageLimits,
    /// Every pod: what ranking them needs.
    All,
}

/// What the manager needs from the kubelet.
#[async_trait]
pub(crate) trait EvictionHost: Send + Sync {
    /// The node's name (events about the node).
    fn node_name(&self) -> String;
    /// Pods that are running or may still run (admitted, not terminated): the candidates.
    fn active_pods(&self) -> Vec<Arc<Pod>>;
    /// A fresh summary (without network interfaces) of the node and of the pods `pods`
    /// selects.
    async fn summary(&self, pods: MeasuredPods) -> Result<Summary, StatsError>;
    /// Whether images have a filesystem of their own.
    fn dedicated_image_fs(&self) -> bool;
    /// Reclaims node-level resources; the error says what failed.
    async fn reclaim(&self, what: Reclaim) -> Result<(), String>;
    /// Asks the pod's worker to kill it with this grace and an `Evicted` failure; false when
    /// the request could not be queued.
    fn evict(&self, pod: &Arc<Pod>, grace_seconds: i64, message: &str) -> bool;
    /// Whether the pod's containers are stopped (or its worker is gone).
    fn pod_cleaned_up(&self, uid: &str) -> bool;
    /// Whether, besides, the runtime holds no container of the pod any more (Go's
    /// `PodResourcesAreReclaimed`: its containers removed; its sandbox may stay).
    fn pod_resources_reclaimed(&self, uid: &str) -> bool;
    /// Records an event.
    fn record_event(&self, event: Event);
}

/// What the manager remembers between synchronisations.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// When each met threshold was first met.
    first_observed: HashMap<usize, Instant>,
    /// When each condition was last observed.
    conditions_last_observed: HashMap<PressureCondition, Instant>,
    /// Thresholds met (grace periods included) and not yet reclaimed.
    thresholds_met: Vec<usize>,
    /// The observations of the last synchronisation.
    last_observations: Observations,
}

/// The decisions of one synchronisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// The node conditions in effect.
    pub conditions: Vec<PressureCondition>,
    /// Thresholds to act on: met past their grace period, on a new measurement.
    pub act_on: Vec<usize>,
}

impl State {
    /// One synchronisation's decisions (pure). See the module docs.
    pub(crate) fn step(
        &mut self,
        thresholds: &[Threshold],
        observations: &Observations,
        now: Instant,
        transition_period: Duration,
    ) -> Step {
        let mut met = thresholds::met(thresholds, 0..thresholds.len(), observations, false);
        if !self.thresholds_met.is_empty() {
            let unresolved = thresholds::met(
                thresholds,
                self.thresholds_met.iter().copied(),
                observations,
                true,
            );
            met = thresholds::merge(met, &unresolved);
        }
        let first = thresholds::first_observed_at(&met, &self.first_observed, now);
        let observed = thresholds::conditions(thresholds, &met);
        let last_at =
            thresholds::conditions_last_observed_at(&observed, &self.conditions_last_observed, now);
        let conditions = thresholds::conditions_observed_since(&last_at, transition_period, now);
        let grace_met = thresholds::met_grace_period(thresholds, &first, now);
        let act_on = grace_met
            .iter()
            .copied()
            .filter(|i| {
                thresholds.get(*i).is_some_and(|t| {
                    signals::updated(t.signal, observations, &self.last_observations)
                })
            })
            .collect();
        self.first_observed = first;
        self.conditions_last_observed = last_at;
        self.thresholds_met = grace_met;
        self.last_observations = observations.clone();
        Step { conditions, act_on }
    }
}

/// The eviction manager. See the module docs.
pub(crate) struct EvictionManager {
    config: EvictionConfig,
    thresholds: Vec<Threshold>,
    state: Mutex<State>,
    pressure: Arc<PressureState>,
}

fn node_event(host: &dyn EvictionHost, reason: &str, message: String) -> Event {
    Event::for_node(&host.node_name(), EventType::Warning, reason, message)
}

impl EvictionManager {
    /// A manager for `config` (its thresholds already validated by the builder) reporting
    /// into `pressure`.
    pub(crate) fn new(
        config: EvictionConfig,
        thresholds: Vec<Threshold>,
        pressure: Arc<PressureState>,
    ) -> Self {
        EvictionManager {
            config,
            thresholds,
            state: Mutex::new(State::default()),
            pressure,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs synchronisations until `shutdown`: after an eviction it waits for the evicted
    /// pods to stop, otherwise for the monitoring interval.
    pub(crate) async fn run(&self, host: Arc<dyn EvictionHost>, shutdown: CancellationToken) {
        if self.thresholds.is_empty() && !self.config.local_storage_capacity_isolation {
            tracing::info!("eviction manager: no eviction thresholds; only reporting no pressure");
            return;
        }
        tracing::info!(
            thresholds = self.thresholds.len(),
            interval = ?self.config.monitoring_interval,
            "eviction manager started"
        );
        loop {
            let evicted = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = self.synchronize(host.as_ref()) => e,
            };
            let Some(evicted) = evicted else {
                tracing::warn!(
                    "eviction manager: the node's stats are not available; it cannot run"
                );
                return;
            };
            // As Go: after an eviction, measure again as soon as the pods are stopped.
            let wait = async {
                if evicted.is_empty() {
                    tokio::time::sleep(self.config.monitoring_interval).await;
                } else {
                    wait_for_cleanup(host.as_ref(), &evicted).await;
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = wait => {}
            }
        }
    }

    /// One synchronisation; the pods it evicted with the grace period each was given, or
    /// `None` when the node cannot be measured at all (no stats provider).
    pub(crate) async fn synchronize(
        &self,
        host: &dyn EvictionHost,
    ) -> Option<Vec<(Arc<Pod>, i64)>> {
        let mut active = host.active_pods();
        // Pods are measured only where this cycle needs them: their local-storage limits
        // now, all of them once ranking needs their usage.
        let measured = if self.config.local_storage_capacity_isolation {
            MeasuredPods::WithLocalStorageLimits
        } else {
            MeasuredPods::None
        };
        let summary = match host.summary(measured).await {
            Ok(s) => s,
            Err(StatsError::Unavailable) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "eviction manager: failed to get summary stats");
                return Some(Vec::new());
            }
        };
        let dedicated = host.dedicated_image_fs();
        let observations = signals::observe(&summary);
        let step = self.state().step(
            &self.thresholds,
            &observations,
            Instant::now(),
            self.config.pressure_transition_period,
        );
        if step.conditions != self.pressure.conditions() {
            tracing::info!(conditions = ?step.conditions, "eviction manager: node conditions changed");
        }
        self.pressure.set(step.conditions.clone());
        if self.config.local_storage_capacity_isolation {
            let stats = signals::pod_stats(&summary);
            let mut evicted = Vec::new();
            for v in local_storage::violations(&active, &stats, dedicated) {
                if evict_pod(host, &v.pod, 0, &v.message, BTreeMap::new()) {
                    crate::metrics::global().evictions.inc(v.signal);
                    evicted.push((v.pod, 0));
                }
            }
            if !evicted.is_empty() {
                return Some(evicted);
            }
        }
        if step.act_on.is_empty() {
            tracing::trace!("eviction manager: no resources are starved");
            return Some(Vec::new());
        }
        let ordered = thresholds::by_eviction_priority(&self.thresholds, &step.act_on);
        let Some(to_reclaim) = ordered.first().and_then(|i| self.thresholds.get(*i)) else {
            return Some(Vec::new());
        };
        let resource = to_reclaim.signal.resource();
        tracing::info!(
            resource = resource.as_str(),
            signal = to_reclaim.signal.as_str(),
            "eviction manager: attempting to reclaim"
        );
        host.record_event(node_event(
            host,
            "EvictionThresholdMet",
            format!("Attempting to reclaim {}", resource.as_str()),
        ));
        if self
            .reclaim_node_level(host, to_reclaim.signal, dedicated)
            .await
        {
            tracing::info!(
                resource = resource.as_str(),
                "eviction manager: able to reduce resource pressure without evicting pods"
            );
            return Some(Vec::new());
        }
        if active.is_empty() {
            tracing::error!("eviction manager: eviction thresholds have been met, but no pods are active to evict");
            return Some(Vec::new());
        }
        let all = match host.summary(MeasuredPods::All).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "eviction manager: failed to get the pods' stats to rank them");
                return Some(Vec::new());
            }
        };
        let stats = signals::pod_stats(&all);
        rank(
            &mut active,
            ranking_for(to_reclaim.signal, dedicated),
            &stats,
        );
        let met: Vec<&Threshold> = ordered
            .iter()
            .filter_map(|i| self.thresholds.get(*i))
            .collect();
        let now = crate::clock::now_unix_nanos();
        for t in &met {
            if let Some(at) = observations.get(&t.signal).and_then(|o| o.time_nanos) {
                let age = u64::try_from(i128::from(now) - at).unwrap_or(0);
                crate::metrics::global()
                    .eviction_stats_age
                    .with(t.signal.as_str())
                    .observe(Duration::from_nanos(age));
            }
        }
        for p in &active {
            let grace = if to_reclaim.is_hard() {
                0
            } else {
                pod::termination_grace_period_seconds(p)
                    .min(self.config.max_pod_grace_period_seconds)
                    .max(0)
            };
            let said = eviction_message(
                resource,
                p,
                stats.get(pod::uid(p)).copied(),
                &met,
                &observations,
            );
            if evict_pod(host, p, grace, &said.message, said.annotations) {
                crate::metrics::global()
                    .evictions
                    .inc(to_reclaim.signal.as_str());
                return Some(vec![(p.clone(), grace)]);
            }
        }
        tracing::info!("eviction manager: unable to evict any pods from the node");
        Some(Vec::new())
    }

    /// Node-level reclaim for a signal (Go's `buildSignalToNodeReclaimFuncs` and
    /// `reclaimNodeLevelResources`): disk signals on the images' filesystem free dead
    /// containers, then unused images; true when afterwards no threshold is met (minimum
    /// reclaim included).
    async fn reclaim_node_level(
        &self,
        host: &dyn EvictionHost,
        signal: Signal,
        dedicated: bool,
    ) -> bool {
        let on_image_fs = match signal {
            Signal::ImageFsAvailable | Signal::ImageFsInodesFree => true,
            Signal::NodeFsAvailable | Signal::NodeFsInodesFree => !dedicated,
            _ => false,
        };
        if !on_image_fs {
            return false;
        }
        for what in [Reclaim::Containers, Reclaim::Images] {
            if let Err(e) = host.reclaim(what).await {
                tracing::info!(?what, error = %e, "eviction manager: unexpected error when attempting to reduce resource pressure");
            }
        }
        let summary = match host.summary(MeasuredPods::None).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "eviction manager: failed to get summary stats after resource reclaim");
                return false;
            }
        };
        let observations = signals::observe(&summary);
        thresholds::met(
            &self.thresholds,
            0..self.thresholds.len(),
            &observations,
            true,
        )
        .is_empty()
    }
}

/// Evicts one pod unless it is critical (Go's `evictPod`): the `Evicted` event (with
/// `annotations`, Go's `AnnotatedEventf`), then the kill request. True when the eviction was
/// asked for.
fn evict_pod(
    host: &dyn EvictionHost,
    p: &Arc<Pod>,
    grace_seconds: i64,
    message: &str,
    annotations: BTreeMap<String, String>,
) -> bool {
    if pod::is_critical(p) {
        tracing::error!(pod = %pod::full_name(p), "eviction manager: cannot evict a critical pod");
        return false;
    }
    host.record_event(
        Event::for_pod(
            p,
            None,
            EventType::Warning,
            super::messages::REASON,
            message.to_string(),
        )
        .with_annotations(annotations),
    );
    tracing::info!(pod = %pod::full_name(p), uid = pod::uid(p), grace_seconds, message, "evicting pod");
    if !host.evict(p, grace_seconds, message) {
        tracing::warn!(pod = %pod::full_name(p), "eviction manager: the eviction request could not be queued; trying again next period");
    }
    true
}

/// How long Go's eviction waits for an evicted pod to be killed before it starts waiting for
/// the cleanup (`killPodNow`: one and a half grace periods, at least 10 s).
pub(crate) fn kill_timeout(grace_seconds: i64) -> Duration {
    let g = u64::try_from(grace_seconds).unwrap_or(0);
    Duration::from_secs((g + g / 2).max(10))
}

/// Waits as Go does after an eviction: until the evicted pods are stopped (Go's `evictPod`
/// blocks on the kill: at most [`kill_timeout`]), then until their resources are reclaimed
/// (`waitForPodsCleanup`: at most [`CLEANUP_TIMEOUT`]). An evicted pod's worker removes its
/// containers once they are stopped (Go's container deletor for evicted pods), so the second
/// wait ends a relist or two later; the runtime frees their writable layers in the background
/// meanwhile, and the next measurement sees the space they held.
async fn wait_for_cleanup(host: &dyn EvictionHost, evicted: &[(Arc<Pod>, i64)]) {
    let kill = evicted
        .iter()
        .map(|(_, g)| kill_timeout(*g))
        .max()
        .unwrap_or_default();
    let stopped = || {
        evicted
            .iter()
            .all(|(p, _)| host.pod_cleaned_up(pod::uid(p)))
    };
    let reclaimed = || {
        evicted
            .iter()
            .all(|(p, _)| host.pod_resources_reclaimed(pod::uid(p)))
    };
    if !poll_until(stopped, kill).await {
        tracing::info!(
            pods = evicted.len(),
            "eviction manager: timed out waiting for pods to be killed"
        );
    }
    if poll_until(reclaimed, CLEANUP_TIMEOUT).await {
        tracing::info!(
            pods = evicted.len(),
            "eviction manager: pods successfully cleaned up"
        );
    } else {
        tracing::info!(
            pods = evicted.len(),
            "eviction manager: timed out waiting for pods to be cleaned up"
        );
    }
}

/// Checks `done` every [`CLEANUP_POLL`] until it holds (true) or `limit` has passed (false).
async fn poll_until(done: impl Fn() -> bool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        tokio::time::sleep(CLEANUP_POLL).await;
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
