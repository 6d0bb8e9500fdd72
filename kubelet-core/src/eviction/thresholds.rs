//! Eviction signals and thresholds (Go's `eviction/api` and the threshold half of
//! `eviction/helpers.go`): parsing `evictionHard` / `evictionSoft` /
//! `evictionSoftGracePeriod` / `evictionMinimumReclaim`, and the pure set operations the
//! manager's synchronisation is made of (met, first observed, grace period satisfied, node
//! conditions observed within the transition period).
//!
//! Thresholds are identified by their index in the configured list: every set the manager
//! keeps (met, first observed at, not yet reclaimed) is a set of configured thresholds.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use super::signals::Observations;
use super::PressureCondition;
use crate::resources;

/// An eviction signal (Go's `evictionapi.Signal`). Every signal is "available" of
/// something: a threshold is met when the observed value is *less than* it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// `memory.available`: node memory capacity − the root cgroup's working set.
    MemoryAvailable,
    /// `allocatableMemory.available`: allocatable memory − the pods cgroup's working set.
    AllocatableMemoryAvailable,
    /// `nodefs.available`: bytes available on the kubelet root dir's filesystem.
    NodeFsAvailable,
    /// `nodefs.inodesFree`: free inodes there.
    NodeFsInodesFree,
    /// `imagefs.available`: bytes available on the runtime's image filesystem.
    ImageFsAvailable,
    /// `imagefs.inodesFree`: free inodes there.
    ImageFsInodesFree,
    /// `pid.available`: the task limit − the tasks that exist.
    PidAvailable,
}

/// What a signal measures (Go's `signalToResource`), as named in eviction messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// `memory`
    Memory,
    /// `ephemeral-storage`
    EphemeralStorage,
    /// `inodes`
    Inodes,
    /// `pids`
    Pids,
}

impl Resource {
    /// The name Go's messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Memory => "memory",
            Resource::EphemeralStorage => "ephemeral-storage",
            Resource::Inodes => "inodes",
            Resource::Pids => "pids",
        }
    }
}

impl Signal {
    /// Every signal.
    pub const ALL: [Signal; 7] = [
        Signal::MemoryAvailable,
        Signal::AllocatableMemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    /// The configuration name, e.g. `memory.available`.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::AllocatableMemoryAvailable => "allocatableMemory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    /// The signal with this configuration name.
    pub fn parse(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// What it measures.
    pub fn resource(self) -> Resource {
        match self {
            Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => Resource::Memory,
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => Resource::EphemeralStorage,
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => Resource::Inodes,
            Signal::PidAvailable => Resource::Pids,
        }
    }

    /// The node condition a met threshold of this signal reports.
    pub fn condition(self) -> PressureCondition {
        match self.resource() {
            Resource::Memory => PressureCondition::MemoryPressure,
            Resource::EphemeralStorage | Resource::Inodes => PressureCondition::DiskPressure,
            Resource::Pids => PressureCondition::PidPressure,
        }
    }

    /// A memory signal (ranked first, as Go's `byEvictionPriority`).
    pub fn is_memory(self) -> bool {
        self.resource() == Resource::Memory
    }
}

/// A threshold's value: an amount, or a fraction of the signal's capacity.
#[derive(Debug, Clone, PartialEq)]
pub enum ThresholdValue {
    /// An amount (bytes, inodes, pids), with the text it was written as (for messages).
    Quantity {
        /// The amount.
        value: i64,
        /// As configured, e.g. `100Mi`.
        text: String,
    },
    /// A fraction of the capacity, 0 < p ≤ 1 (single precision, as Go).
    Percentage(f32),
}

impl ThresholdValue {
    /// The amount against a capacity (Go's `GetThresholdQuantity`).
    pub fn amount(&self, capacity: i64) -> i64 {
        match self {
            ThresholdValue::Quantity { value, .. } => *value,
            // As Go: float64(capacity) * float64(percentage), truncated.
            ThresholdValue::Percentage(p) => (capacity as f64 * f64::from(*p)) as i64,
        }
    }
}

/// One threshold (Go's `evictionapi.Threshold`).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// What is measured.
    pub signal: Signal,
    /// Met when the observed value is below this.
    pub value: ThresholdValue,
    /// How long it must be met before pods are evicted (zero: a hard threshold).
    pub grace_period: Duration,
    /// Once met, it stays met until this much more than the threshold is available.
    pub min_reclaim: Option<ThresholdValue>,
}

impl Threshold {
    /// A hard threshold: no grace period (Go's `isHardEvictionThreshold`).
    pub fn is_hard(&self) -> bool {
        self.grace_period.is_zero()
    }
}

/// A threshold setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {signal}: {message}")]
pub struct ThresholdError {
    /// The setting, e.g. `evictionHard`.
    pub field: &'static str,
    /// The signal as written.
    pub signal: String,
    /// What is wrong.
    pub message: String,
}

fn invalid(field: &'static str, signal: &str, message: impl Into<String>) -> ThresholdError {
    ThresholdError {
        field,
        signal: signal.to_string(),
        message: message.into(),
    }
}

fn signal_of(field: &'static str, name: &str) -> Result<Signal, ThresholdError> {
    Signal::parse(name).ok_or_else(|| invalid(field, name, "unsupported eviction signal"))
}

fn percentage(field: &'static str, name: &str, text: &str) -> Result<f32, ThresholdError> {
    let number = text.trim_end_matches('%');
    number
        .parse::<f32>()
        .map(|p| p / 100.0)
        .map_err(|_| invalid(field, name, format!("invalid percentage {text:?}")))
}

fn quantity(field: &'static str, name: &str, text: &str) -> Result<i64, ThresholdError> {
    resources::value(&k8s_openapi::apimachinery::pkg::api::resource::Quantity(
        text.to_string(),
    ))
    .map_err(|e| invalid(field, name, format!("invalid quantity {text:?}: {e}")))
}

/// One `signal: value` statement; `None` for the ignored `0%` and `100%` (Go's
/// `parseThresholdStatement`).
fn statement(
    field: &'static str,
    name: &str,
    text: &str,
) -> Result<Option<(Signal, ThresholdValue)>, ThresholdError> {
    let signal = signal_of(field, name)?;
    let text = text.trim();
    if text.ends_with('%') {
        if text == "0%" || text == "100%" {
            return Ok(None);
        }
        let p = percentage(field, name, text)?;
        if p < 0.0 {
            return Err(invalid(
                field,
                name,
                format!("percentage {text} must be >= 0%"),
            ));
        }
        if p > 1.0 {
            return Err(invalid(
                field,
                name,
                format!("percentage {text} must be <= 100%"),
            ));
        }
        return Ok(Some((signal, ThresholdValue::Percentage(p))));
    }
    let value = quantity(field, name, text)?;
    if value <= 0 {
        return Err(invalid(
            field,
            name,
            format!("threshold {text} must be positive"),
        ));
    }
    Ok(Some((
        signal,
        ThresholdValue::Quantity {
            value,
            text: text.to_string(),
        },
    )))
}

/// The configured thresholds as settings maps (Go's `ParseThresholdConfig` input).
#[derive(Debug, Clone, Copy)]
pub struct ThresholdSettings<'a> {
    /// `evictionHard`.
    pub hard: &'a BTreeMap<String, String>,
    /// `evictionSoft`.
    pub soft: &'a BTreeMap<String, String>,
    /// `evictionSoftGracePeriod`.
    pub soft_grace_period: &'a BTreeMap<String, Duration>,
    /// `evictionMinimumReclaim`.
    pub minimum_reclaim: &'a BTreeMap<String, String>,
    /// `enforceNodeAllocatable` contains `pods`: the hard `memory.available` threshold is
    /// copied to `allocatableMemory.available`.
    pub enforce_pods_allocatable: bool,
}

/// Parses the thresholds (Go's `ParseThresholdConfig`): hard ones, then soft ones with
/// their grace periods (required), minimum reclaims attached by signal, and the
/// `allocatableMemory.available` copy of the hard `memory.available` threshold.
pub fn parse_thresholds(s: ThresholdSettings<'_>) -> Result<Vec<Threshold>, ThresholdError> {
    let mut grace: HashMap<Signal, Duration> = HashMap::new();
    for (name, d) in s.soft_grace_period {
        grace.insert(signal_of("evictionSoftGracePeriod", name)?, *d);
    }
    let mut reclaim: HashMap<Signal, ThresholdValue> = HashMap::new();
    for (name, text) in s.minimum_reclaim {
        let field = "evictionMinimumReclaim";
        let signal = signal_of(field, name)?;
        let text = text.trim();
        let v = if text.ends_with('%') {
            let p = percentage(field, name, text)?;
            if p <= 0.0 {
                return Err(invalid(
                    field,
                    name,
                    format!("percentage {text} must be positive"),
                ));
            }
            ThresholdValue::Percentage(p)
        } else {
            let value = quantity(field, name, text)?;
            if value < 0 {
                return Err(invalid(field, name, format!("{text} must not be negative")));
            }
            ThresholdValue::Quantity {
                value,
                text: text.to_string(),
            }
        };
        reclaim.insert(signal, v);
    }
    let mut out = Vec::new();
    for (name, text) in s.hard {
        if let Some((signal, value)) = statement("evictionHard", name, text)? {
            out.push(Threshold {
                signal,
                value,
                grace_period: Duration::ZERO,
                min_reclaim: None,
            });
        }
    }
    for (name, text) in s.soft {
        if let Some((signal, value)) = statement("evictionSoft", name, text)? {
            let grace_period = *grace.get(&signal).ok_or_else(|| {
                invalid(
                    "evictionSoftGracePeriod",
                    name,
                    "a grace period must be specified for the soft eviction threshold",
                )
            })?;
            out.push(Threshold {
                signal,
                value,
                grace_period,
                min_reclaim: None,
            });
        }
    }
    for t in &mut out {
        t.min_reclaim = reclaim.get(&t.signal).cloned();
    }
    if s.enforce_pods_allocatable {
        let copies: Vec<Threshold> = out
            .iter()
            .filter(|t| t.signal == Signal::MemoryAvailable && t.is_hard())
            .map(|t| Threshold {
                signal: Signal::AllocatableMemoryAvailable,
                ..t.clone()
            })
            .collect();
        out.extend(copies);
    }
    Ok(out)
}

/// The thresholds among `candidates` (indices into `thresholds`) that `observations` meet
/// (Go's `thresholdsMet`); with `enforce_min_reclaim`, "met" means below threshold + minimum
/// reclaim. Signals without an observation are not met.
pub fn met(
    thresholds: &[Threshold],
    candidates: impl IntoIterator<Item = usize>,
    observations: &Observations,
    enforce_min_reclaim: bool,
) -> Vec<usize> {
    candidates
        .into_iter()
        .filter(|&i| {
            let Some(t) = thresholds.get(i) else {
                return false;
            };
            let Some(o) = observations.get(&t.signal) else {
                return false;
            };
            let mut amount = t.value.amount(o.capacity);
            if enforce_min_reclaim {
                if let Some(r) = &t.min_reclaim {
                    amount = amount.saturating_add(r.amount(o.capacity));
                }
            }
            amount > o.available
        })
        .collect()
}

/// `a` followed by the elements of `b` not in it (Go's `mergeThresholds`).
pub fn merge(mut a: Vec<usize>, b: &[usize]) -> Vec<usize> {
    for i in b {
        if !a.contains(i) {
            a.push(*i);
        }
    }
    a
}

/// When each of `current` was first met: kept from `before`, else `now` (Go's
/// `thresholdsFirstObservedAt`); thresholds no longer met are forgotten.
pub fn first_observed_at(
    current: &[usize],
    before: &HashMap<usize, Instant>,
    now: Instant,
) -> HashMap<usize, Instant> {
    current
        .iter()
        .map(|i| (*i, before.get(i).copied().unwrap_or(now)))
        .collect()
}

/// The thresholds met for at least their grace period (Go's `thresholdsMetGracePeriod`), in
/// index order.
pub fn met_grace_period(
    thresholds: &[Threshold],
    observed_at: &HashMap<usize, Instant>,
    now: Instant,
) -> Vec<usize> {
    let mut out: Vec<usize> = observed_at
        .iter()
        .filter(|(i, at)| {
            thresholds
                .get(**i)
                .is_some_and(|t| now.saturating_duration_since(**at) >= t.grace_period)
        })
        .map(|(i, _)| *i)
        .collect();
    out.sort_unstable();
    out
}

/// The node conditions the thresholds report, each once, in order (Go's `nodeConditions`).
pub fn conditions(thresholds: &[Threshold], met: &[usize]) -> Vec<PressureCondition> {
    let mut out = Vec::new();
    for i in met {
        if let Some(t) = thresholds.get(*i) {
            let c = t.signal.condition();
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// When each condition was last observed: `now` for `current`, the earlier time for the
/// others (Go's `nodeConditionsLastObservedAt`).
pub fn conditions_last_observed_at(
    current: &[PressureCondition],
    before: &HashMap<PressureCondition, Instant>,
    now: Instant,
) -> HashMap<PressureCondition, Instant> {
    let mut out = before.clone();
    for c in current {
        out.insert(*c, now);
    }
    out
}

/// The conditions observed less than `period` ago (Go's `nodeConditionsObservedSince`),
/// sorted.
pub fn conditions_observed_since(
    observed_at: &HashMap<PressureCondition, Instant>,
    period: Duration,
    now: Instant,
) -> Vec<PressureCondition> {
    let mut out: Vec<PressureCondition> = observed_at
        .iter()
        .filter(|(_, at)| now.saturating_duration_since(**at) < period)
        .map(|(c, _)| *c)
        .collect();
    out.sort();
    out
}

/// `met` ordered for reclaim: memory signals first, the rest as configured (Go's
/// `byEvictionPriority`, made stable).
pub fn by_eviction_priority(thresholds: &[Threshold], met: &[usize]) -> Vec<usize> {
    let mut out = met.to_vec();
    out.sort_by_key(|i| {
        (
            !thresholds.get(*i).is_some_and(|t| t.signal.is_memory()),
            *i,
        )
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::signals::Observation;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(
        hard: &[(&str, &str)],
        soft: &[(&str, &str)],
        grace: &[(&str, u64)],
        reclaim: &[(&str, &str)],
    ) -> Result<Vec<Threshold>, ThresholdError> {
        let grace = grace
            .iter()
            .map(|(k, secs)| (k.to_string(), Duration::from_secs(*secs)))
            .collect();
        parse_thresholds(ThresholdSettings {
            hard: &map(hard),
            soft: &map(soft),
            soft_grace_period: &grace,
            minimum_reclaim: &map(reclaim),
            enforce_pods_allocatable: true,
        })
    }

    #[test]
    fn parsing_table() {
        let t = parse(
            &[("memory.available", "100Mi"), ("nodefs.available", "10%")],
            &[("imagefs.available", "20%")],
            &[("imagefs.available", 90)],
            &[("memory.available", "0.5Gi"), ("imagefs.available", "2%")],
        )
        .unwrap();
        let signals: Vec<(&str, bool)> =
            t.iter().map(|t| (t.signal.as_str(), t.is_hard())).collect();
        assert_eq!(
            signals,
            [
                ("memory.available", true),
                ("nodefs.available", true),
                ("imagefs.available", false),
                ("allocatableMemory.available", true),
            ]
        );
        assert_eq!(
            t[0].value,
            ThresholdValue::Quantity {
                value: 100 << 20,
                text: "100Mi".into()
            }
        );
        assert_eq!(t[1].value, ThresholdValue::Percentage(0.1));
        assert_eq!(t[2].grace_period, Duration::from_secs(90));
        assert_eq!(t[2].min_reclaim, Some(ThresholdValue::Percentage(0.02)));
        assert_eq!(
            t[3].min_reclaim, t[0].min_reclaim,
            "the copy keeps the reclaim"
        );
        assert_eq!(t[0].value.amount(0), 100 << 20);
        assert_eq!(t[1].value.amount(1000), 100);

        // 0% and 100% are ignored, as Go does.
        assert!(parse(
            &[("nodefs.available", "0%"), ("imagefs.available", "100%")],
            &[],
            &[],
            &[]
        )
        .unwrap()
        .is_empty());
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, u64)],
            &'a [(&'a str, &'a str)],
            &'a str,
        );
        let errors: &[Case<'_>] = &[
            (
                &[("memory.free", "1Gi")],
                &[],
                &[],
                &[],
                "unsupported eviction signal",
            ),
            (
                &[("memory.available", "-1Mi")],
                &[],
                &[],
                &[],
                "must be positive",
            ),
            (
                &[("memory.available", "0")],
                &[],
                &[],
                &[],
                "must be positive",
            ),
            (&[("nodefs.available", "101%")], &[], &[], &[], "<= 100%"),
            (&[("nodefs.available", "-5%")], &[], &[], &[], ">= 0%"),
            (
                &[("nodefs.available", "x%")],
                &[],
                &[],
                &[],
                "invalid percentage",
            ),
            (
                &[("memory.available", "lots")],
                &[],
                &[],
                &[],
                "invalid quantity",
            ),
            (
                &[],
                &[("memory.available", "1Gi")],
                &[],
                &[],
                "grace period must be specified",
            ),
            (
                &[],
                &[],
                &[("memory.free", 1)],
                &[],
                "unsupported eviction signal",
            ),
            (
                &[],
                &[],
                &[],
                &[("memory.available", "0%")],
                "must be positive",
            ),
            (
                &[],
                &[],
                &[],
                &[("memory.available", "-1")],
                "must not be negative",
            ),
        ];
        for (hard, soft, grace, reclaim, want) in errors {
            let e = parse(hard, soft, grace, reclaim).unwrap_err();
            assert!(e.to_string().contains(want), "{e} should say {want:?}");
        }
    }

    fn observations(pairs: &[(Signal, i64, i64)]) -> Observations {
        pairs
            .iter()
            .map(|(s, available, capacity)| {
                (
                    *s,
                    Observation {
                        available: *available,
                        capacity: *capacity,
                        time_nanos: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn met_with_and_without_minimum_reclaim() {
        let t = parse(
            &[("memory.available", "100")],
            &[],
            &[],
            &[("memory.available", "50")],
        )
        .unwrap();
        let all = || 0..t.len();
        // (available, met, met with min reclaim)
        for (available, plain, reclaim) in
            [(99, true, true), (120, false, true), (150, false, false)]
        {
            let o = observations(&[
                (Signal::MemoryAvailable, available, 1000),
                (Signal::AllocatableMemoryAvailable, 1000, 1000),
            ]);
            assert_eq!(met(&t, all(), &o, false) == vec![0], plain, "{available}");
            assert_eq!(met(&t, all(), &o, true) == vec![0], reclaim, "{available}");
        }
        // No observation: not met.
        assert!(met(&t, all(), &Observations::new(), false).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn grace_periods_and_the_transition_period_on_the_paused_clock() {
        let t = parse(
            &[("memory.available", "100")],
            &[("nodefs.available", "50%")],
            &[("nodefs.available", 30)],
            &[],
        )
        .unwrap();
        let t0 = Instant::now();
        let first = first_observed_at(&[0, 1], &HashMap::new(), t0);
        assert_eq!(met_grace_period(&t, &first, t0), vec![0], "hard: at once");
        tokio::time::advance(Duration::from_secs(29)).await;
        let now = Instant::now();
        let kept = first_observed_at(&[0, 1], &first, now);
        assert_eq!(kept[&1], t0, "first observation kept");
        assert_eq!(met_grace_period(&t, &kept, now), vec![0]);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(met_grace_period(&t, &kept, Instant::now()), vec![0, 1]);
        // Unmet once: forgotten, the grace period starts over.
        let reset = first_observed_at(&[0], &kept, Instant::now());
        assert!(!reset.contains_key(&1));

        let conds = conditions(&t, &[1, 0, 2]);
        assert_eq!(
            conds,
            [
                PressureCondition::DiskPressure,
                PressureCondition::MemoryPressure
            ]
        );
        let period = Duration::from_secs(300);
        let at = conditions_last_observed_at(&conds, &HashMap::new(), Instant::now());
        tokio::time::advance(Duration::from_secs(299)).await;
        // Memory still observed, disk not: disk is held for the rest of the period.
        let at =
            conditions_last_observed_at(&[PressureCondition::MemoryPressure], &at, Instant::now());
        assert_eq!(
            conditions_observed_since(&at, period, Instant::now()).len(),
            2
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            conditions_observed_since(&at, period, Instant::now()),
            [PressureCondition::MemoryPressure]
        );
    }

    #[test]
    fn memory_is_reclaimed_first() {
        let t = parse(
            &[
                ("nodefs.available", "1"),
                ("memory.available", "1"),
                ("pid.available", "1"),
            ],
            &[],
            &[],
            &[],
        )
        .unwrap();
        let order: Vec<Signal> = by_eviction_priority(&t, &[0, 1, 2, 3])
            .into_iter()
            .map(|i| t[i].signal)
            .collect();
        // BTreeMap order: memory, nodefs, pid; then the allocatable copy.
        assert_eq!(
            order,
            [
                Signal::MemoryAvailable,
                Signal::AllocatableMemoryAvailable,
                Signal::NodeFsAvailable,
                Signal::PidAvailable
            ]
        );
        assert_eq!(merge(vec![2, 0], &[0, 3]), vec![2, 0, 3]);
    }
}
