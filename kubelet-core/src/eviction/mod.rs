//! The eviction manager (Go's `pkg/kubelet/eviction`): it watches memory, disk and PIDs,
//! reports the node's pressure conditions, refuses pods the node cannot take, reclaims
//! node-level resources and, when that is not enough, evicts pods one at a time.
//!
//! # The monitoring loop
//! Every `monitoring_interval` (10s) one synchronisation (the `manager` module) runs:
//!
//! ```text
//!  summary ──► observations ──► thresholds met (now, or not yet reclaimed: below
//!  (the one      (signals.rs)      threshold + minimum reclaim) ──► first observed at
//!  collector)                             │                          │
//!                                         ▼                          ▼
//!                         node conditions, held for the        grace period over?
//!                         pressure transition period            (hard: at once)
//!                         ──► MemoryPressure/DiskPressure/            │
//!                             PIDPressure (node status,               ▼
//!                             admission)                   measured since last time?
//!                                                                     │
//!   local storage limits (emptyDir sizeLimit, ephemeral-storage) ─────┤ evict every
//!                                                                     │ violating pod
//!                                                                     ▼
//!   reclaim the first threshold's resource (memory first): node level first —
//!   dead containers and unused images for disk signals — then, if still met,
//!   rank the active pods (ranking.rs) and evict the first non-critical one.
//! ```
//! After evicting, the loop waits as Go's does (polling every second): until the evicted
//! pods are stopped (at most the grace period and half again, at least 10 s), then until the
//! runtime holds no container of them (at most 30 s; the worker of an evicted pod removes its
//! stopped containers, as Go's container deletor does, so this takes a relist or two and the
//! runtime frees their writable layers meanwhile) before it measures again; otherwise it
//! sleeps until the next period. State carried between runs: when each threshold was first met, when each
//! condition was last observed, the thresholds met (so reclaim continues until the minimum
//! reclaim is reached), and the last observations (a measurement is acted on once).
//!
//! # Evicting a pod
//! Through the pod worker, never around it: the manager asks the sync loop (a bounded
//! channel) to kill the pod with a failure of reason `Evicted` and Go's message; the worker
//! stops it — grace 0 for a hard threshold or a local-storage limit (container stops still
//! get the runtime's 2s minimum), min(pod's grace, `evictionMaxPodGracePeriod`) for a soft
//! one — and its final status is phase `Failed`, reason `Evicted`. An `Evicted` event is
//! recorded. Critical pods (static, mirror, priority ≥ 2000000000) are never evicted.
//!
//! # Admission
//! [`admission::EvictionAdmitHandler`] (Go's `Admit`): under memory pressure alone,
//! BestEffort pods are refused unless they tolerate the `node.kubernetes.io/memory-pressure`
//! taint; under any other pressure every pod is refused; critical pods always pass.

pub mod admission;
pub(crate) mod local_storage;
pub(crate) mod manager;
pub mod messages;
pub(crate) mod ranking;
pub mod signals;
pub mod thresholds;

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

pub use thresholds::{parse_thresholds, Signal, Threshold, ThresholdError, ThresholdSettings};

/// A node condition the eviction manager owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PressureCondition {
    /// `MemoryPressure`
    MemoryPressure,
    /// `DiskPressure`
    DiskPressure,
    /// `PIDPressure`
    PidPressure,
}

impl PressureCondition {
    /// The condition type.
    pub fn as_str(self) -> &'static str {
        match self {
            PressureCondition::MemoryPressure => "MemoryPressure",
            PressureCondition::DiskPressure => "DiskPressure",
            PressureCondition::PidPressure => "PIDPressure",
        }
    }
}

/// The pressure the node is under, as the eviction manager last decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodePressure {
    /// `MemoryPressure` is True.
    pub memory: bool,
    /// `DiskPressure` is True.
    pub disk: bool,
    /// `PIDPressure` is True.
    pub pid: bool,
}

/// The conditions in effect, shared by the manager (which writes them) and admission, node
/// status and the handle (which read them).
#[derive(Debug, Default)]
pub struct PressureState {
    conditions: RwLock<Vec<PressureCondition>>,
}

impl PressureState {
    /// The conditions in effect, sorted.
    pub fn conditions(&self) -> Vec<PressureCondition> {
        self.conditions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The conditions as three flags.
    pub fn pressure(&self) -> NodePressure {
        let c = self.conditions();
        NodePressure {
            memory: c.contains(&PressureCondition::MemoryPressure),
            disk: c.contains(&PressureCondition::DiskPressure),
            pid: c.contains(&PressureCondition::PidPressure),
        }
    }

    pub(crate) fn set(&self, mut conditions: Vec<PressureCondition>) {
        conditions.sort();
        *self.conditions.write().unwrap_or_else(|e| e.into_inner()) = conditions;
    }
}

/// The eviction manager's configuration, with the Go kubelet's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionConfig {
    /// `evictionHard` (Go's defaults: `memory.available<100Mi`, `nodefs.available<10%`,
    /// `nodefs.inodesFree<5%`, `imagefs.available<15%`). Empty: no hard thresholds.
    pub hard: BTreeMap<String, String>,
    /// `evictionSoft`.
    pub soft: BTreeMap<String, String>,
    /// `evictionSoftGracePeriod`: required for every soft threshold.
    pub soft_grace_period: BTreeMap<String, Duration>,
    /// `evictionMinimumReclaim`.
    pub minimum_reclaim: BTreeMap<String, String>,
    /// `evictionPressureTransitionPeriod` (5m): how long a condition stays True after its
    /// thresholds are no longer met.
    pub pressure_transition_period: Duration,
    /// `evictionMaxPodGracePeriod` (0): the most grace a soft eviction gives.
    pub max_pod_grace_period_seconds: i64,
    /// How often the manager measures (Go's `evictionMonitoringPeriod`, 10s).
    pub monitoring_interval: Duration,
    /// Copy the hard `memory.available` threshold to `allocatableMemory.available`
    /// (`enforceNodeAllocatable` contains `pods`, the default).
    pub enforce_pods_allocatable: bool,
    /// Evict pods over their local storage limits (Go's `LocalStorageCapacityIsolation`,
    /// on by default).
    pub local_storage_capacity_isolation: bool,
}

/// Go's default `evictionHard` thresholds.
pub fn default_eviction_hard() -> BTreeMap<String, String> {
    [
        ("memory.available", "100Mi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig {
            hard: default_eviction_hard(),
            soft: BTreeMap::new(),
            soft_grace_period: BTreeMap::new(),
            minimum_reclaim: BTreeMap::new(),
            pressure_transition_period: Duration::from_secs(300),
            max_pod_grace_period_seconds: 0,
            monitoring_interval: Duration::from_secs(10),
            enforce_pods_allocatable: true,
            local_storage_capacity_isolation: true,
        }
    }
}

impl EvictionConfig {
    /// No thresholds and no local storage limits: the manager only reports no pressure.
    pub fn disabled() -> Self {
        EvictionConfig {
            hard: BTreeMap::new(),
            local_storage_capacity_isolation: false,
            ..EvictionConfig::default()
        }
    }

    /// The thresholds this configuration sets (see [`parse_thresholds`]).
    pub fn thresholds(&self) -> Result<Vec<Threshold>, ThresholdError> {
        parse_thresholds(ThresholdSettings {
            hard: &self.hard,
            soft: &self.soft,
            soft_grace_period: &self.soft_grace_period,
            minimum_reclaim: &self.minimum_reclaim,
            enforce_pods_allocatable: self.enforce_pods_allocatable,
        })
    }
}
