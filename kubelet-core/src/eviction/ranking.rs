//! Which pod goes first (Go's `rankMemoryPressure`, `rankPIDPressure` and
//! `rankDiskPressureFunc`): a stable sort by a chain of comparisons, the first pod is
//! evicted first.
//!
//! - **memory**: pods without stats first; then pods using more than they request; then
//!   lower priority; then the larger usage above the request.
//! - **pids**: lower priority; then more processes.
//! - **disk** (bytes or inodes): as memory, over the local storage the signal's filesystem
//!   holds — with a dedicated image filesystem, nodefs signals count logs and local volumes
//!   and imagefs signals the writable layers; on a shared one every signal counts all three.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Volume};

use super::thresholds::Signal;
use crate::resources::pod_request;
use crate::summary::PodStats;

/// What a disk ranking counts of a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsMeasure {
    /// Containers' writable layers.
    pub root: bool,
    /// Containers' logs.
    pub logs: bool,
    /// Local volumes (emptyDir on disk, hostPath, configMap, gitRepo).
    pub local_volumes: bool,
}

/// How pods are ranked for a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranking {
    /// Memory pressure.
    Memory,
    /// PID pressure.
    Pids,
    /// Disk pressure over these stats; `inodes` ranks by inodes instead of bytes.
    Disk {
        /// What is counted.
        measure: FsMeasure,
        /// Rank by inodes.
        inodes: bool,
    },
}

/// The ranking for a signal (Go's `buildSignalToRankFunc`).
pub fn ranking_for(signal: Signal, dedicated_image_fs: bool) -> Ranking {
    let all = FsMeasure {
        root: true,
        logs: true,
        local_volumes: true,
    };
    let (measure, inodes) = match signal {
        Signal::MemoryAvailable | Signal::AllocatableMemoryAvailable => return Ranking::Memory,
        Signal::PidAvailable => return Ranking::Pids,
        Signal::NodeFsAvailable | Signal::NodeFsInodesFree if dedicated_image_fs => (
            FsMeasure { root: false, ..all },
            signal == Signal::NodeFsInodesFree,
        ),
        Signal::ImageFsAvailable | Signal::ImageFsInodesFree if dedicated_image_fs => (
            FsMeasure {
                root: true,
                logs: false,
                local_volumes: false,
            },
            signal == Signal::ImageFsInodesFree,
        ),
        s => (
            all,
            matches!(s, Signal::NodeFsInodesFree | Signal::ImageFsInodesFree),
        ),
    };
    Ranking::Disk { measure, inodes }
}

fn priority(p: &Pod) -> i32 {
    p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Go's `IsLocalEphemeralVolume` plus hostPath (`localVolumeNames`).
fn is_local(v: &Volume) -> bool {
    v.host_path.is_some()
        || v.git_repo.is_some()
        || v.config_map.is_some()
        || v.empty_dir
            .as_ref()
            .is_some_and(|e| e.medium.as_deref().unwrap_or("").is_empty())
}

/// A pod's disk use (bytes, inodes) over what `m` counts (Go's `podDiskUsage`).
pub fn disk_usage(stats: &PodStats, pod: &Pod, m: FsMeasure) -> (i64, i64) {
    let (mut bytes, mut inodes) = (0i64, 0i64);
    let mut add = |f: Option<&crate::summary::FsStats>| {
        if let Some(f) = f {
            bytes = bytes.saturating_add(int(f.used_bytes.unwrap_or(0)));
            inodes = inodes.saturating_add(int(f.inodes_used.unwrap_or(0)));
        }
    };
    for c in &stats.containers {
        if m.root {
            add(c.rootfs.as_ref());
        }
        if m.logs {
            add(c.logs.as_ref());
        }
    }
    if m.local_volumes {
        let local: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter(|v| is_local(v))
            .map(|v| v.name.as_str())
            .collect();
        for v in &stats.volume {
            if local.contains(&v.name.as_str()) {
                add(Some(&v.fs));
            }
        }
    }
    (bytes, inodes)
}

/// The ranked pod's inputs, computed once per pod.
struct Key {
    has_stats: bool,
    exceeds: bool,
    priority: i32,
    /// Usage minus request (memory, disk) or the process count (pids).
    usage: i64,
}

fn key(p: &Pod, stats: Option<&&PodStats>, ranking: Ranking) -> Key {
    let Some(s) = stats else {
        return Key {
            has_stats: false,
            exceeds: false,
            priority: priority(p),
            usage: 0,
        };
    };
    let (usage, request) = match ranking {
        Ranking::Memory => (
            int(s.memory.as_ref().map(|m| m.working_set_bytes).unwrap_or(0)),
            pod_request(p, "memory").unwrap_or(0),
        ),
        Ranking::Pids => (
            int(s
                .process_stats
                .as_ref()
                .and_then(|ps| ps.process_count)
                .unwrap_or(0)),
            0,
        ),
        Ranking::Disk { measure, inodes } => {
            let (bytes, count) = disk_usage(s, p, measure);
            // As Go: the usage above the request subtracts the ephemeral-storage request
            // (pods cannot request inodes).
            (
                if inodes { count } else { bytes },
                pod_request(p, "ephemeral-storage").unwrap_or(0),
            )
        }
    };
    let exceeds = match ranking {
        Ranking::Disk { inodes: true, .. } => usage > 0,
        _ => usage > request,
    };
    Key {
        has_stats: true,
        exceeds,
        priority: priority(p),
        usage: if ranking == Ranking::Pids {
            usage
        } else {
            usage.saturating_sub(request)
        },
    }
}

fn compare(a: &Key, b: &Key, ranking: Ranking) -> Ordering {
    // `true` first.
    let first = |x: bool, y: bool| y.cmp(&x);
    if ranking != Ranking::Pids {
        if !a.has_stats || !b.has_stats {
            return first(!a.has_stats, !b.has_stats);
        }
        let o = first(a.exceeds, b.exceeds);
        if o != Ordering::Equal {
            return o;
        }
    } else if !a.has_stats || !b.has_stats {
        // Go's process comparison puts pods without stats first, after priority.
        return a
            .priority
            .cmp(&b.priority)
            .then(first(!a.has_stats, !b.has_stats));
    }
    a.priority
        .cmp(&b.priority)
        .then_with(|| b.usage.cmp(&a.usage))
}

/// Orders `pods` for eviction under `ranking`; the first is evicted first.
pub fn rank(pods: &mut [Arc<Pod>], ranking: Ranking, stats: &HashMap<&str, &PodStats>) {
    let mut keyed: Vec<(Key, Arc<Pod>)> = pods
        .iter()
        .map(|p| (key(p, stats.get(crate::pod::uid(p)), ranking), p.clone()))
        .collect();
    keyed.sort_by(|(a, _), (b, _)| compare(a, b, ranking));
    for (slot, (_, p)) in pods.iter_mut().zip(keyed) {
        *slot = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{
        ContainerStats, FsStats, MemoryStats, PodReference, ProcessStats, VolumeStats,
    };
    use crate::testing::{ContainerBuilder, PodBuilder};
    use k8s_openapi::api::core::v1::EmptyDirVolumeSource;

    fn pod(name: &str, priority: i32, requests: &[(&str, &str)]) -> Arc<Pod> {
        let mut c = ContainerBuilder::new("c", "busybox");
        if !requests.is_empty() {
            c = c.requests(requests);
        }
        Arc::new(
            PodBuilder::new(name, name)
                .container(c.build())
                .spec(|s| s.priority = Some(priority))
                .volume(Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Default::default()
                })
                .build(),
        )
    }

    fn stats(uid: &str, memory: u64, procs: u64, disk: (u64, u64, u64)) -> PodStats {
        let fs = |b: u64| {
            Some(FsStats {
                used_bytes: Some(b),
                inodes_used: Some(b / 100),
                ..Default::default()
            })
        };
        PodStats {
            pod_ref: PodReference {
                uid: uid.into(),
                ..Default::default()
            },
            memory: Some(MemoryStats {
                working_set_bytes: memory,
                ..Default::default()
            }),
            containers: vec![ContainerStats {
                name: "c".into(),
                rootfs: fs(disk.0),
                logs: fs(disk.1),
                ..Default::default()
            }],
            volume: vec![VolumeStats {
                fs: fs(disk.2).unwrap_or_default(),
                name: "scratch".into(),
                pvc_ref: None,
            }],
            process_stats: Some(ProcessStats {
                process_count: Some(procs),
            }),
            ..Default::default()
        }
    }

    fn order(pods: &[Arc<Pod>], ranking: Ranking, all: &[PodStats]) -> Vec<String> {
        let by_uid: HashMap<&str, &PodStats> =
            all.iter().map(|s| (s.pod_ref.uid.as_str(), s)).collect();
        let mut pods = pods.to_vec();
        rank(&mut pods, ranking, &by_uid);
        pods.iter()
            .map(|p| crate::pod::name(p).to_string())
            .collect()
    }

    #[test]
    fn memory_ranking_usage_over_requests_then_priority_then_usage() {
        const MI: u64 = 1 << 20;
        let pods = vec![
            pod("guaranteed-within", 0, &[("memory", "100Mi")]),
            pod("besteffort-small", 0, &[]),
            pod("besteffort-big", 0, &[]),
            pod("burstable-over", 0, &[("memory", "10Mi")]),
            pod("high-priority-over", 1000, &[]),
            pod("no-stats", 1000, &[]),
        ];
        let all = [
            stats("guaranteed-within", 90 * MI, 0, (0, 0, 0)),
            stats("besteffort-small", 5 * MI, 0, (0, 0, 0)),
            stats("besteffort-big", 50 * MI, 0, (0, 0, 0)),
            stats("burstable-over", 70 * MI, 0, (0, 0, 0)),
            stats("high-priority-over", 500 * MI, 0, (0, 0, 0)),
        ];
        assert_eq!(
            order(&pods, Ranking::Memory, &all),
            [
                "no-stats",
                "burstable-over",   // 60Mi over its request
                "besteffort-big",   // 50Mi over
                "besteffort-small", // 5Mi over
                "high-priority-over",
                "guaranteed-within",
            ]
        );
    }

    #[test]
    fn pid_ranking_priority_then_processes() {
        let pods = vec![pod("few", 0, &[]), pod("many", 0, &[]), pod("vip", 10, &[])];
        let all = [
            stats("few", 0, 3, (0, 0, 0)),
            stats("many", 0, 300, (0, 0, 0)),
            stats("vip", 0, 3000, (0, 0, 0)),
        ];
        assert_eq!(order(&pods, Ranking::Pids, &all), ["many", "few", "vip"]);
    }

    #[test]
    fn disk_ranking_counts_what_the_signals_filesystem_holds() {
        let pods = vec![
            pod("logs-heavy", 0, &[]),
            pod("layer-heavy", 0, &[]),
            pod("volume-heavy", 0, &[("ephemeral-storage", "1Gi")]),
        ];
        let all = [
            stats("logs-heavy", 0, 0, (10, 5000, 0)),
            stats("layer-heavy", 0, 0, (9000, 10, 0)),
            stats("volume-heavy", 0, 0, (0, 0, 100_000)),
        ];
        let rank_for = |s, dedicated| order(&pods, ranking_for(s, dedicated), &all);
        // Shared filesystem: everything counts; the volume pod is within its request.
        assert_eq!(
            rank_for(Signal::NodeFsAvailable, false),
            ["layer-heavy", "logs-heavy", "volume-heavy"]
        );
        // Dedicated image fs: nodefs counts logs and volumes, imagefs the writable layers.
        assert_eq!(
            rank_for(Signal::NodeFsAvailable, true),
            ["logs-heavy", "layer-heavy", "volume-heavy"]
        );
        assert_eq!(
            rank_for(Signal::ImageFsAvailable, true),
            ["layer-heavy", "logs-heavy", "volume-heavy"]
        );
        assert_eq!(ranking_for(Signal::MemoryAvailable, true), Ranking::Memory);
        assert_eq!(ranking_for(Signal::PidAvailable, false), Ranking::Pids);
        assert!(matches!(
            ranking_for(Signal::ImageFsInodesFree, false),
            Ranking::Disk { inodes: true, .. }
        ));
    }
}
