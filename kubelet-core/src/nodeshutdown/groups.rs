//! Which pods stop in which order and with how much time: Go's `migrateConfig` (the two
//! periods `shutdownGracePeriod` / `shutdownGracePeriodCriticalPods` as two priority groups)
//! and `groupByPriority`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

/// Go's `scheduling.SystemCriticalPriority`: the lowest priority of the critical group.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// One entry of `shutdownGracePeriodByPodPriority`: pods of at least this priority (and
/// below the next entry's) get this many seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityGracePeriod {
    /// The lowest priority of the group.
    pub priority: i32,
    /// The group's share of the shutdown, in seconds.
    pub grace_seconds: i64,
}

/// The graceful node shutdown settings (`shutdownGracePeriod`,
/// `shutdownGracePeriodCriticalPods`, `shutdownGracePeriodByPodPriority`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownConfig {
    /// `shutdownGracePeriod` (0: graceful node shutdown is off).
    pub grace_period: Duration,
    /// `shutdownGracePeriodCriticalPods`: the part of it kept for critical pods.
    pub grace_period_critical_pods: Duration,
    /// `shutdownGracePeriodByPodPriority`; when set, it replaces the two periods.
    pub by_pod_priority: Vec<PriorityGracePeriod>,
}

impl ShutdownConfig {
    /// The groups, lowest priority first (Go's `migrateConfig` when no per-priority list is
    /// given: priority 0 gets `shutdownGracePeriod − shutdownGracePeriodCriticalPods`,
    /// priority [`SYSTEM_CRITICAL_PRIORITY`] the rest). Empty: the manager is off.
    pub fn groups(&self) -> Vec<PriorityGracePeriod> {
        let mut groups = if self.by_pod_priority.is_empty() {
            migrate(self.grace_period, self.grace_period_critical_pods)
        } else {
            self.by_pod_priority.clone()
        };
        groups.sort_by_key(|g| g.priority);
        groups
    }

    /// The whole period the kubelet holds shutdown back for: the groups' periods summed (Go's
    /// `periodRequested`).
    pub fn period(&self) -> Duration {
        let secs: i64 = self
            .groups()
            .iter()
            .map(|g| g.grace_seconds.max(0))
            .fold(0, i64::saturating_add);
        Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// Checks the settings with Go's validation and messages; the error names the field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let (period, critical) = (self.grace_period, self.grace_period_critical_pods);
        if critical > period {
            return Err((
                "shutdownGracePeriodCriticalPods",
                format!("shutdownGracePeriod {period:?} must be >= 0, shutdownGracePeriodCriticalPods {critical:?} must be >= 0, and shutdownGracePeriodCriticalPods {critical:?} must be <= shutdownGracePeriod {period:?}"),
            ));
        }
        for (field, d) in [
            ("shutdownGracePeriod", period),
            ("shutdownGracePeriodCriticalPods", critical),
        ] {
            if !d.is_zero() && d < Duration::from_secs(1) {
                return Err((
                    field,
                    format!("{field} {d:?} must be either zero or otherwise >= 1 sec"),
                ));
            }
        }
        let periods_set = !period.is_zero() || !critical.is_zero();
        if !self.by_pod_priority.is_empty() && periods_set {
            return Err((
                "shutdownGracePeriodByPodPriority",
                "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time".into(),
            ));
        }
        if let Some(g) = self.by_pod_priority.iter().find(|g| g.grace_seconds < 0) {
            return Err((
                "shutdownGracePeriodByPodPriority",
                format!(
                    "shutdownGracePeriodSeconds {} of priority {} must not be negative",
                    g.grace_seconds, g.priority
                ),
            ));
        }
        Ok(())
    }
}

/// Go's `migrateConfig`.
fn migrate(period: Duration, critical: Duration) -> Vec<PriorityGracePeriod> {
    if period.is_zero() {
        return Vec::new();
    }
    let Some(regular) = period.checked_sub(critical) else {
        return Vec::new();
    };
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    vec![
        PriorityGracePeriod {
            priority: 0,
            grace_seconds: secs(regular),
        },
        PriorityGracePeriod {
            priority: SYSTEM_CRITICAL_PRIORITY,
            grace_seconds: secs(period - regular),
        },
    ]
}

/// Go's `groupByPriority`: every pod in the group of the highest priority not above its own
/// (below the lowest: the lowest; above the highest: the highest). `groups` sorted ascending.
pub fn group_pods(
    groups: &[PriorityGracePeriod],
    pods: Vec<Arc<Pod>>,
) -> Vec<(PriorityGracePeriod, Vec<Arc<Pod>>)> {
    let mut out: Vec<(PriorityGracePeriod, Vec<Arc<Pod>>)> =
        groups.iter().map(|g| (*g, Vec::new())).collect();
    if out.is_empty() {
        return out;
    }
    for p in pods {
        let priority = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        let index = groups
            .iter()
            .rposition(|g| g.priority <= priority)
            .unwrap_or(0);
        out[index].1.push(p);
    }
    out
}

/// The grace period a pod is stopped with: its group's, or its own
/// `terminationGracePeriodSeconds` when that is shorter.
pub fn pod_grace_seconds(pod: &Pod, group_seconds: i64) -> i64 {
    match pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        Some(own) if own <= group_seconds => own,
        _ => group_seconds,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::{container, PodBuilder};

    /// A one-container pod named (and uid'ed) `name` with this priority and grace period.
    pub(crate) fn pod(name: &str, priority: Option<i32>, grace: Option<i64>) -> Arc<Pod> {
        let mut b = PodBuilder::new(name, name).container(container("app", "busybox"));
        if let Some(p) = priority {
            b = b.priority(p);
        }
        if let Some(g) = grace {
            b = b.grace_period(g);
        }
        Arc::new(b.build())
    }

    fn g(priority: i32, grace_seconds: i64) -> PriorityGracePeriod {
        PriorityGracePeriod {
            priority,
            grace_seconds,
        }
    }

    #[test]
    fn the_two_periods_become_two_groups() {
        let c = ShutdownConfig {
            grace_period: Duration::from_secs(30),
            grace_period_critical_pods: Duration::from_secs(10),
            ..Default::default()
        };
        assert_eq!(c.groups(), [g(0, 20), g(SYSTEM_CRITICAL_PRIORITY, 10)]);
        assert_eq!(c.period(), Duration::from_secs(30));
        assert!(ShutdownConfig::default().groups().is_empty(), "off");
        let bad = ShutdownConfig {
            grace_period: Duration::from_secs(5),
            grace_period_critical_pods: Duration::from_secs(10),
            ..Default::default()
        };
        assert!(bad.groups().is_empty());
        assert_eq!(
            bad.validate().unwrap_err().0,
            "shutdownGracePeriodCriticalPods"
        );
    }

    #[test]
    fn by_priority_is_sorted_and_summed() {
        let c = ShutdownConfig {
            by_pod_priority: vec![g(100_000, 120), g(0, 60), g(10_000, 30)],
            ..Default::default()
        };
        assert_eq!(c.groups(), [g(0, 60), g(10_000, 30), g(100_000, 120)]);
        assert_eq!(c.period(), Duration::from_secs(210));
        c.validate().unwrap();
    }

    #[test]
    fn pods_go_to_the_group_at_or_below_their_priority() {
        let groups = [g(0, 10), g(10_000, 20), g(SYSTEM_CRITICAL_PRIORITY, 30)];
        let pods = vec![
            pod("none", None, None),
            pod("negative", Some(-5), None),
            pod("mid", Some(10_000), None),
            pod("between", Some(500_000), None),
            pod("critical", Some(2_000_001_000), None),
        ];
        let grouped = group_pods(&groups, pods);
        let names: Vec<Vec<&str>> = grouped
            .iter()
            .map(|(_, pods)| {
                pods.iter()
                    .map(|p| p.metadata.name.as_deref().unwrap_or(""))
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            vec![
                vec!["none", "negative"],
                vec!["mid", "between"],
                vec!["critical"]
            ]
        );
    }

    #[test]
    fn a_pods_own_shorter_grace_wins() {
        assert_eq!(pod_grace_seconds(&pod("a", None, Some(5)), 20), 5);
        assert_eq!(pod_grace_seconds(&pod("b", None, Some(60)), 20), 20);
        assert_eq!(pod_grace_seconds(&pod("c", None, None), 20), 20);
    }
}
