//! The `stats.k8s.io/v1alpha1` Summary (Go's `statsapi.Summary`, what metrics-server reads
//! from `/stats/summary`) and [`SummaryCollector`], the one collector that produces it.
//!
//! Times are RFC 3339 strings; optional fields are left out of the JSON when unknown, as in
//! Go's API types.
//!
//! What it reports and where each number comes from:
//!
//! | field | source |
//! |---|---|
//! | node `cpu`, `memory` | the root cgroup ([`NodeStatsProvider`](crate::stats::NodeStatsProvider)); `availableBytes` = capacity − working set |
//! | node `systemContainers["pods"]` | the cgroup all pods run under; `availableBytes` = allocatable − working set |
//! | node `systemContainers["kubelet"/"runtime"/"misc"]` | the kubelet's, the runtime's and the system cgroups, when configured (the kubelet's own cgroup otherwise); start time: the cgroup's creation (the kubelet's: when the stats provider was made, as Go) |
//! | node `network`, pod `network` | `/proc/…/net/dev` of the node and of a process in each pod |
//! | node `fs` (nodefs) | `statvfs` of the kubelet root dir |
//! | node `runtime.imageFs` | CRI `ImageFsInfo` (used bytes and inodes) on `statvfs` of its mount point; else `statvfs` of the configured image store |
//! | node `rlimit` | the task limit and the tasks that exist |
//! | container `rootfs` | CRI `ListContainerStats` (writable layer) on the image filesystem |
//! | container `logs` | the container's log directory, on its filesystem |
//! | pod `volume` | emptyDir volumes, measured `du`-style |
//! | pod `ephemeral-storage` | containers' `rootfs` + `logs` + disk-backed emptyDirs, on nodefs |
//! | pod `process_stats` | processes in the pod's cgroup |

mod build;
mod collector;
#[cfg(test)]
mod collector_tests;
mod rates;

use serde::{Deserialize, Serialize};

pub use crate::stats::InterfaceStats;
pub(crate) use collector::Detail;
pub use collector::{PodEntry, SummaryCollector, SummaryConfig, MIN_RATE_WINDOW};

/// The volume manager's last measurement of each pod's measured persistent volumes, by pod
/// uid: what the summary lists after a pod's emptyDir volumes.
pub type VolumeStatsCache =
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<VolumeStats>>>>;

/// Now, as the summary's sample times are written (RFC 3339).
pub(crate) fn rfc3339_now() -> String {
    build::rfc3339(crate::clock::now_unix_nanos())
}

/// The name of the system container that stands for all pods (Go's
/// `SystemContainerPods`): its memory's `availableBytes` is allocatable memory minus the
/// pods' working set, what `allocatableMemory.available` reads.
pub const SYSTEM_CONTAINER_PODS: &str = "pods";

/// The summary (Go's `statsapi.Summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Node-level stats.
    pub node: NodeStats,
    /// Per-pod stats.
    pub pods: Vec<PodStats>,
}

/// Node-level stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node name.
    pub node_name: String,
    /// System containers: `kubelet`, `runtime` and `misc` when the provider measures them
    /// ([`crate::stats::system_container`]), then `pods` ([`SYSTEM_CONTAINER_PODS`], the
    /// cgroup all pods run under).
    #[serde(default)]
    pub system_containers: Vec<ContainerStats>,
    /// Boot time.
    pub start_time: String,
    /// CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// Network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The filesystem of the kubelet root dir (nodefs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    /// The runtime's image filesystem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    /// The node's process limits (what `pid.available` reads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

/// The node's process limits (Go's `RlimitStats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RlimitStats {
    /// Sample time.
    pub time: String,
    /// The most tasks the node allows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<u64>,
    /// Tasks that exist now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<u64>,
}

/// Processes of a pod (Go's `ProcessStats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessStats {
    /// Processes in the pod's cgroup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

/// One volume of a pod (Go's `VolumeStats`): its usage on its filesystem.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VolumeStats {
    /// Usage (`usedBytes`/`inodesUsed`: what the volume holds) and its filesystem's
    /// capacity.
    #[serde(flatten)]
    pub fs: FsStats,
    /// The volume's name in the pod spec.
    pub name: String,
    /// The claim, for a `persistentVolumeClaim` volume.
    #[serde(rename = "pvcRef", default, skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
}

/// A PersistentVolumeClaim a volume stands for (Go's `PVCReference`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PvcReference {
    /// The claim's name.
    pub name: String,
    /// The claim's namespace.
    pub namespace: String,
}

/// Runtime stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// The filesystem images are stored on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

/// CPU stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// Sample time.
    pub time: String,
    /// Usage rate in nanocores, when two samples exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative CPU time in ns.
    pub usage_core_nano_seconds: u64,
}

/// Memory stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// Sample time.
    pub time: String,
    /// Node: capacity minus working set; `pods`: allocatable minus working set; a cgroup
    /// with a memory limit: the limit minus working set (cAdvisor's); else none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total usage (page cache included).
    pub usage_bytes: u64,
    /// Working set (what eviction and metrics-server look at).
    pub working_set_bytes: u64,
    /// Anonymous memory.
    pub rss_bytes: u64,
    /// Page faults (cAdvisor's container data: on cgroup v1, the cgroup's own tasks').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    /// Major page faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    /// Page cache (not part of Go's Summary API, so never serialized; `/metrics/cadvisor`'s
    /// `container_memory_cache` reads it).
    #[serde(skip)]
    pub cache_bytes: Option<u64>,
}

/// Network stats: the default interface inline, all in `interfaces`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    /// Sample time.
    pub time: String,
    /// The default interface: `eth0`, as Go's `cadvisorInfoToNetworkStats` picks it; none
    /// (no inline fields) on a host without one.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub default: Option<InterfaceStats>,
    /// All interfaces.
    pub interfaces: Vec<InterfaceStats>,
}

/// Filesystem stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// Sample time.
    pub time: String,
    /// Bytes available to unprivileged users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Bytes used (by the object measured, or the whole filesystem).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    /// Total inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    /// Used inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// A pod's identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodReference {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
}

/// Per-pod stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// The pod.
    pub pod_ref: PodReference,
    /// When the kubelet started the pod.
    pub start_time: String,
    /// Its containers.
    pub containers: Vec<ContainerStats>,
    /// Pod cgroup CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Pod cgroup memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod network namespace's interfaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The pod's measured volumes (emptyDir).
    #[serde(rename = "volume", default, skip_serializing_if = "Vec::is_empty")]
    pub volume: Vec<VolumeStats>,
    /// Local ephemeral storage: its containers' writable layers and logs plus its emptyDir
    /// volumes on the node's filesystem (Go's `calcEphemeralStorage`).
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    /// Processes.
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

/// Per-container stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// The container's name in the pod spec.
    pub name: String,
    /// Creation time of the running instance.
    pub start_time: String,
    /// CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The container's writable layer (from the runtime), on the image filesystem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    /// The container's log files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}
