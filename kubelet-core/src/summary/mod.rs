//! The `stats.k8s.io/v1alpha1` Summary (Go's `statsapi.Summary`, what metrics-server reads
//! from `/stats/summary`) and [`SummaryCollector`], the one collector that produces it.
//!
//! Times are RFC 3339 strings; optional fields are left out of the JSON when unknown, as in
//! Go's API types.

mod collector;
mod rates;

use serde::{Deserialize, Serialize};

pub use crate::stats::InterfaceStats;
pub use collector::{PodEntry, SummaryCollector, SummaryConfig, MIN_RATE_WINDOW};

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
    /// System containers (kubelet, runtime): not reported yet.
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
    /// Node: capacity minus working set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total usage (page cache included).
    pub usage_bytes: u64,
    /// Working set (what eviction and metrics-server look at).
    pub working_set_bytes: u64,
    /// Anonymous memory.
    pub rss_bytes: u64,
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
    /// The default interface.
    #[serde(flatten)]
    pub default: InterfaceStats,
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
    /// The container's log files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}
