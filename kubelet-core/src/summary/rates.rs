//! CPU rates from cumulative counters: the earlier sample of every cgroup, kept between
//! collections.
//!
//! For each cgroup the collector measures, [`CpuRates::rate`] compares the new sample with
//! the kept one: when the kept one is at least [`MIN_RATE_WINDOW`](super::MIN_RATE_WINDOW)
//! older, the rate between them is reported and the new sample is kept in its place; when it
//! is younger, the kept sample stays (so frequent scrapes still measure over at least the
//! window) and the last rate taken is reported again, as cAdvisor reports its last
//! housekeeping's rate however often it is asked; the first sample of a cgroup is kept and
//! reports none, as does a counter that went backwards.
//! [`CpuRates::retain`] then drops the samples of every cgroup the collection did not see
//! (pods and containers that are gone), so the table never outgrows what runs.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::stats::ResourceUsage;

/// Whose CPU a kept sample measures.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum RateKey {
    /// The node (root cgroup).
    Node,
    /// The cgroup all pods run under (the `pods` system container).
    PodsCgroup,
    /// A system container other than `pods`, by name.
    SystemContainer(String),
    /// A pod cgroup, by pod uid.
    Pod(String),
    /// A container cgroup, by runtime container id.
    Container(String),
}

/// The kept samples. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct CpuRates {
    window: Duration,
    /// Per cgroup: the kept sample and the last rate taken.
    kept: HashMap<RateKey, (ResourceUsage, Option<u64>)>,
}

impl CpuRates {
    /// Rates over at least `window`.
    pub(crate) fn new(window: Duration) -> Self {
        CpuRates {
            window,
            kept: HashMap::new(),
        }
    }

    /// The rate in nanocores between the kept sample of `key` and `usage`, if the kept one
    /// is at least the window older (keeping `usage` in its place), else the last rate taken;
    /// keeps `usage` when there was none.
    pub(crate) fn rate(&mut self, key: RateKey, usage: &ResourceUsage) -> Option<u64> {
        match self.kept.get(&key) {
            Some((prev, _))
                if usage
                    .timestamp
                    .checked_duration_since(prev.timestamp)
                    .is_some_and(|d| d >= self.window) =>
            {
                let r = usage.nanocores_since(prev);
                self.kept.insert(key, (*usage, r));
                r
            }
            // Too close to the kept sample for a new rate: the last one.
            Some((_, last)) => *last,
            None => {
                self.kept.insert(key, (*usage, None));
                None
            }
        }
    }

    /// Drops the kept samples of cgroups not in `seen`.
    pub(crate) fn retain(&mut self, seen: &HashSet<RateKey>) {
        self.kept.retain(|k, _| seen.contains(k));
    }

    /// How many samples are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn usage(t0: Instant, ms: u64, cpu_ns: u64) -> ResourceUsage {
        ResourceUsage {
            cpu_usage_ns: cpu_ns,
            ..ResourceUsage::zero(t0 + Duration::from_millis(ms))
        }
    }

    #[test]
    fn rates_need_a_sample_a_window_older() {
        let t0 = crate::clock::monotonic_now();
        let mut r = CpuRates::new(Duration::from_secs(1));
        let k = || RateKey::Container("c1".into());
        // (ms, cumulative cpu ns, expected rate)
        let steps: &[(u64, u64, Option<u64>)] = &[
            (0, 0, None),                            // first: kept
            (500, 250_000_000, None),                // too close: kept one stays
            (1_000, 500_000_000, Some(500_000_000)), // 0.5s of CPU in 1s
            (1_999, 600_000_000, Some(500_000_000)), // too close: the last rate again
            (3_000, 2_500_000_000, Some(1_000_000_000)),
            (4_000, 100, None), // counter reset: no rate, kept anew
            (4_500, 100, None), // and none to repeat
            (5_000, 250_000_100, Some(250_000_000)),
        ];
        for (ms, cpu, want) in steps {
            assert_eq!(r.rate(k(), &usage(t0, *ms, *cpu)), *want, "at {ms}ms");
        }
    }

    #[test]
    fn samples_of_unseen_cgroups_are_dropped() {
        let t0 = crate::clock::monotonic_now();
        let mut r = CpuRates::new(Duration::from_secs(1));
        for key in [
            RateKey::Node,
            RateKey::Pod("p1".into()),
            RateKey::Container("c1".into()),
            RateKey::Pod("p2".into()),
        ] {
            r.rate(key, &usage(t0, 0, 0));
        }
        assert_eq!(r.len(), 4);
        let seen: HashSet<RateKey> = [RateKey::Node, RateKey::Pod("p2".into())].into();
        r.retain(&seen);
        assert_eq!(r.len(), 2);
        // A pod seen again after being dropped starts over (no rate from a stale sample).
        assert_eq!(
            r.rate(RateKey::Pod("p1".into()), &usage(t0, 2_000, 1_000_000_000)),
            None
        );
        assert_eq!(
            r.rate(RateKey::Pod("p2".into()), &usage(t0, 2_000, 1_000_000_000)),
            Some(500_000_000)
        );
    }
}
