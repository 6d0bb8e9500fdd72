//! Signal observations from a [`Summary`] (Go's `makeSignalObservations`): for each signal
//! the amount available, the capacity percentages are taken of, and when it was measured.

use std::collections::HashMap;

use super::thresholds::Signal;
use crate::summary::{FsStats, PodStats, Summary, SYSTEM_CONTAINER_PODS};

/// One signal's observed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// What is available (bytes, inodes or pids).
    pub available: i64,
    /// What percentages are taken of.
    pub capacity: i64,
    /// When it was measured (Unix ns; `None` when unknown).
    pub time_nanos: Option<i128>,
}

/// Observations by signal.
pub type Observations = HashMap<Signal, Observation>;

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn time(t: &str) -> Option<i128> {
    t.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_nanosecond())
}

fn fs_observations(fs: &FsStats, bytes: Signal, inodes: Signal, out: &mut Observations) {
    if let (Some(available), Some(capacity)) = (fs.available_bytes, fs.capacity_bytes) {
        out.insert(
            bytes,
            Observation {
                available: int(available),
                capacity: int(capacity),
                time_nanos: time(&fs.time),
            },
        );
    }
    if let (Some(free), Some(total)) = (fs.inodes_free, fs.inodes) {
        out.insert(
            inodes,
            Observation {
                available: int(free),
                capacity: int(total),
                time_nanos: time(&fs.time),
            },
        );
    }
}

/// The observations a summary gives. See the module docs.
pub fn observe(summary: &Summary) -> Observations {
    let mut out = Observations::new();
    let node = &summary.node;
    if let Some(m) = &node.memory {
        if let Some(available) = m.available_bytes {
            out.insert(
                Signal::MemoryAvailable,
                Observation {
                    available: int(available),
                    capacity: int(available.saturating_add(m.working_set_bytes)),
                    time_nanos: time(&m.time),
                },
            );
        }
    }
    let pods = node
        .system_containers
        .iter()
        .find(|c| c.name == SYSTEM_CONTAINER_PODS)
        .and_then(|c| c.memory.as_ref());
    if let Some(m) = pods {
        if let Some(available) = m.available_bytes {
            out.insert(
                Signal::AllocatableMemoryAvailable,
                Observation {
                    available: int(available),
                    capacity: int(available.saturating_add(m.working_set_bytes)),
                    time_nanos: time(&m.time),
                },
            );
        }
    }
    if let Some(fs) = &node.fs {
        fs_observations(
            fs,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
            &mut out,
        );
    }
    if let Some(fs) = node.runtime.as_ref().and_then(|r| r.image_fs.as_ref()) {
        fs_observations(
            fs,
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
            &mut out,
        );
    }
    if let Some(r) = &node.rlimit {
        if let (Some(max), Some(cur)) = (r.maxpid, r.curproc) {
            out.insert(
                Signal::PidAvailable,
                Observation {
                    available: int(max).saturating_sub(int(cur)),
                    capacity: int(max),
                    time_nanos: time(&r.time),
                },
            );
        }
    }
    out
}

/// The pods' stats by uid (Go's `cachedStatsFunc`).
pub fn pod_stats(summary: &Summary) -> HashMap<&str, &PodStats> {
    summary
        .pods
        .iter()
        .map(|p| (p.pod_ref.uid.as_str(), p))
        .collect()
}

/// Whether a signal's observation is newer than the last one (Go's
/// `thresholdsUpdatedStats`): acting twice on one measurement would evict twice for one
/// shortage.
pub fn updated(signal: Signal, now: &Observations, last: &Observations) -> bool {
    let Some(o) = now.get(&signal) else {
        return false;
    };
    match (last.get(&signal), o.time_nanos) {
        (None, _) | (_, None) => true,
        (Some(l), Some(t)) => l.time_nanos.is_none_or(|lt| t > lt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{ContainerStats, MemoryStats, NodeStats, RlimitStats, RuntimeStats};

    #[test]
    fn observations_from_a_summary() {
        let fs = |avail, cap| FsStats {
            time: "2024-05-01T10:00:00Z".into(),
            available_bytes: Some(avail),
            capacity_bytes: Some(cap),
            inodes_free: Some(10),
            inodes: Some(100),
            ..Default::default()
        };
        let s = Summary {
            node: NodeStats {
                memory: Some(MemoryStats {
                    time: "2024-05-01T10:00:00Z".into(),
                    available_bytes: Some(300),
                    working_set_bytes: 700,
                    ..Default::default()
                }),
                system_containers: vec![ContainerStats {
                    name: "pods".into(),
                    memory: Some(MemoryStats {
                        available_bytes: Some(50),
                        working_set_bytes: 450,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                fs: Some(fs(20, 200)),
                runtime: Some(RuntimeStats {
                    image_fs: Some(fs(30, 300)),
                }),
                rlimit: Some(RlimitStats {
                    time: String::new(),
                    maxpid: Some(1000),
                    curproc: Some(900),
                }),
                ..Default::default()
            },
            pods: vec![],
        };
        let o = observe(&s);
        let get = |sig| o.get(&sig).map(|o| (o.available, o.capacity));
        assert_eq!(get(Signal::MemoryAvailable), Some((300, 1000)));
        assert_eq!(get(Signal::AllocatableMemoryAvailable), Some((50, 500)));
        assert_eq!(get(Signal::NodeFsAvailable), Some((20, 200)));
        assert_eq!(get(Signal::NodeFsInodesFree), Some((10, 100)));
        assert_eq!(get(Signal::ImageFsAvailable), Some((30, 300)));
        assert_eq!(get(Signal::PidAvailable), Some((100, 1000)));
        assert!(o[&Signal::MemoryAvailable].time_nanos.is_some());
        assert!(o[&Signal::PidAvailable].time_nanos.is_none());

        assert!(updated(Signal::MemoryAvailable, &o, &Observations::new()));
        assert!(
            !updated(Signal::MemoryAvailable, &o, &o),
            "same measurement"
        );
        assert!(updated(Signal::PidAvailable, &o, &o), "no time: always new");
        assert!(!updated(Signal::MemoryAvailable, &Observations::new(), &o));
    }
}
