//! What a [`NodeStatsProvider`](super::NodeStatsProvider) measures: one [`SampleRequest`]
//! in, one [`Sample`] out. A measurement the provider cannot take (a cgroup that is gone, a
//! directory that does not exist) is absent from the sample, not an error.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

/// CPU and memory usage of a cgroup (the node, a pod, a container) at one point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceUsage {
    /// When the sample was taken (monotonic; only differences between samples matter).
    pub timestamp: Instant,
    /// Cumulative CPU time in nanoseconds.
    pub cpu_usage_ns: u64,
    /// Memory usage in bytes (page cache included).
    pub memory_usage_bytes: u64,
    /// Working set: usage − inactive file pages (never below zero), as cAdvisor.
    pub memory_working_set_bytes: u64,
    /// Anonymous (RSS) memory in bytes.
    pub memory_rss_bytes: u64,
    /// Page cache in bytes (cgroup v1 `total_cache`, v2 `file`), cAdvisor's `cache`.
    pub memory_cache_bytes: u64,
    /// Page faults (`memory.stat` `pgfault`: on cgroup v1 those of the cgroup's own tasks,
    /// as cAdvisor's container data).
    pub memory_page_faults: u64,
    /// Major page faults (`pgmajfault`).
    pub memory_major_page_faults: u64,
    /// The cgroup's memory limit; `None` when unlimited (cAdvisor: above 2^62 bytes).
    pub memory_limit_bytes: Option<u64>,
}

impl ResourceUsage {
    /// A sample taken at `timestamp` with every counter at zero and no memory limit (what a
    /// measurement fills in).
    pub fn zero(timestamp: Instant) -> Self {
        ResourceUsage {
            timestamp,
            cpu_usage_ns: 0,
            memory_usage_bytes: 0,
            memory_working_set_bytes: 0,
            memory_rss_bytes: 0,
            memory_cache_bytes: 0,
            memory_page_faults: 0,
            memory_major_page_faults: 0,
            memory_limit_bytes: None,
        }
    }

    /// CPU usage rate in nanocores (1e9 = one full CPU) between an `earlier` sample and this
    /// one; `None` when no time passed or the counter went backwards (cgroup re-created).
    pub fn nanocores_since(&self, earlier: &ResourceUsage) -> Option<u64> {
        nanocores(
            earlier.cpu_usage_ns,
            self.cpu_usage_ns,
            self.timestamp.checked_duration_since(earlier.timestamp)?,
        )
    }
}

/// CPU usage rate in nanocores from two cumulative nanosecond counters `elapsed` apart.
pub fn nanocores(prev_ns: u64, cur_ns: u64, elapsed: Duration) -> Option<u64> {
    let delta = cur_ns.checked_sub(prev_ns)?;
    let elapsed_ns = elapsed.as_nanos();
    if elapsed_ns == 0 {
        return None;
    }
    u64::try_from(u128::from(delta) * 1_000_000_000 / elapsed_ns).ok()
}

/// Capacity and usage of a filesystem (`statvfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsUsage {
    /// Total size in bytes.
    pub capacity_bytes: u64,
    /// Bytes available to unprivileged users.
    pub available_bytes: u64,
    /// Bytes in use (capacity − free).
    pub used_bytes: u64,
    /// Total inodes.
    pub inodes: u64,
    /// Free inodes.
    pub inodes_free: u64,
    /// Used inodes.
    pub inodes_used: u64,
    /// The filesystem's id (`statvfs`'s `f_fsid`; 0 when unknown): two paths with the same
    /// non-zero id are on one filesystem (how a dedicated image filesystem is told apart).
    pub fs_id: u64,
}

/// What a directory holds (a container's log directory), and the filesystem it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirUsage {
    /// Bytes of the files under it (symlinks not followed).
    pub used_bytes: u64,
    /// Entries under it (files and directories).
    pub inodes_used: u64,
    /// The filesystem holding it, when it could be read.
    pub filesystem: Option<FsUsage>,
}

/// The node's process limits and use (Go's `RlimitStats`): what `pid.available` is computed
/// from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RlimitSample {
    /// The system-wide limit of tasks: the smaller of `kernel.pid_max` and
    /// `kernel.threads-max`.
    pub max_pid: u64,
    /// Tasks that exist now (`/proc/loadavg`'s total).
    pub running_processes: u64,
}

/// One network interface (also the summary's `InterfaceStats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Send errors.
    pub tx_errors: u64,
}

/// One pod to measure.
#[derive(Debug, Clone)]
pub struct PodSampleRequest {
    /// The pod (the provider finds its cgroup from its uid and QoS class).
    pub pod: Arc<Pod>,
    /// Runtime ids of the containers whose cgroups are read.
    pub container_ids: Vec<String>,
    /// Read the interfaces of the pod's own network namespace (false for host-network pods;
    /// only when [`SampleRequest::network`] is set).
    pub network: bool,
}

/// What one [`NodeStatsProvider::sample`](super::NodeStatsProvider::sample) call measures.
/// The node's CPU and memory are always read.
#[derive(Debug, Clone, Default)]
pub struct SampleRequest {
    /// Pods whose cgroups are read.
    pub pods: Vec<PodSampleRequest>,
    /// Read network interfaces: the node's, and those of pods that ask for it.
    pub network: bool,
    /// Filesystems whose capacity and usage are read (the kubelet root dir, the image store).
    pub filesystems: Vec<PathBuf>,
    /// Directories whose contents are summed (container log directories).
    pub directories: Vec<PathBuf>,
    /// Directories whose disk usage is measured as `du -x` does (allocated blocks, not
    /// leaving the directory's filesystem, bounded: see [`DU_MAX_ENTRIES`]): emptyDir
    /// volumes, for the eviction manager's local-storage limits.
    pub disk_usage: Vec<PathBuf>,
}

/// The most entries one `du`-style measurement of [`SampleRequest::disk_usage`] visits; a
/// tree with more is reported as far as it was read (a lower bound), so one huge directory
/// cannot stall a collection.
pub const DU_MAX_ENTRIES: u64 = 200_000;

/// Measurements of one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSample {
    /// The pod cgroup's usage.
    pub usage: Option<ResourceUsage>,
    /// Container cgroup usage by runtime container id.
    pub containers: HashMap<String, ResourceUsage>,
    /// Interfaces of the pod's network namespace.
    pub interfaces: Option<Vec<InterfaceStats>>,
    /// Processes in the pod's cgroup (what PID-pressure ranking compares).
    pub process_count: Option<u64>,
}

/// Names of the node's system containers besides `pods` (Go's `statsapi.SystemContainer*`).
pub mod system_container {
    /// The kubelet's own cgroup (`--kubelet-cgroups`, else the cgroup it runs in).
    pub const KUBELET: &str = "kubelet";
    /// The container runtime's cgroup (`--runtime-cgroups`).
    pub const RUNTIME: &str = "runtime";
    /// The cgroup of the node's other non-kernel processes (`--system-cgroups`).
    pub const MISC: &str = "misc";
}

/// One measured system container of the node (kubelet, runtime, misc).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemContainerSample {
    /// Its name in the summary ([`system_container`]).
    pub name: String,
    /// The cgroup's usage.
    pub usage: ResourceUsage,
    /// When the cgroup was created, in Unix nanoseconds (cAdvisor's `CreationTime`), if
    /// known.
    pub created_at: Option<i64>,
}

/// The answer to a [`SampleRequest`]; what could not be measured is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// The node's usage (the root cgroup).
    pub node: Option<ResourceUsage>,
    /// The node's interfaces (when network was asked for).
    pub node_interfaces: Option<Vec<InterfaceStats>>,
    /// Pods by uid.
    pub pods: HashMap<String, PodSample>,
    /// Filesystems by the path asked for.
    pub filesystems: HashMap<PathBuf, FsUsage>,
    /// Directories by the path asked for.
    pub directories: HashMap<PathBuf, DirUsage>,
    /// `du`-style usage by the path asked for ([`SampleRequest::disk_usage`]).
    pub disk_usage: HashMap<PathBuf, DirUsage>,
    /// The usage of the cgroup all pods run under (`kubepods`): what
    /// `allocatableMemory.available` is computed from (always read).
    pub pods_cgroup: Option<ResourceUsage>,
    /// The node's process limits (always read).
    pub rlimit: Option<RlimitSample>,
    /// The system containers the provider knows of and could measure (always read).
    pub system_containers: Vec<SystemContainerSample>,
    /// When the pods cgroup was created, in Unix nanoseconds, if known.
    pub pods_cgroup_created_at: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanocores_table() {
        let s = Duration::from_secs(1);
        assert_eq!(nanocores(0, 500_000_000, s), Some(500_000_000));
        assert_eq!(nanocores(1_000, 2_000_001_000, s * 2), Some(1_000_000_000));
        assert_eq!(nanocores(10, 5, s), None, "counter reset");
        assert_eq!(nanocores(0, 5, Duration::ZERO), None);
        let t0 = crate::clock::monotonic_now();
        let a = ResourceUsage::zero(t0);
        let b = ResourceUsage {
            timestamp: t0 + Duration::from_millis(500),
            cpu_usage_ns: 250_000_000,
            ..a
        };
        assert_eq!(b.nanocores_since(&a), Some(500_000_000));
        assert_eq!(a.nanocores_since(&b), None);
    }
}
