//! Node measurements behind a contract, and the one summary collector built over it.
//!
//! ## The contract
//!
//! A [`NodeStatsProvider`] knows the machine ([`MachineInfo`], read once at start: CPUs and
//! their topology, memory, huge pages, machine/system/boot ids, kernel, OS image, `pid_max`,
//! the root filesystem's size, the boot time) and takes [`Sample`]s: the CPU and memory usage
//! of the node, of the cgroup all pods run under and of pod and container cgroups (with the
//! pods' process counts), the node's process limits, network interfaces of the node and of
//! pod network namespaces, filesystems (`statvfs`), directory usage and bounded `du`-style
//! disk usage (emptyDir volumes). One
//! [`SampleRequest`] names everything one collection needs, so a provider reading cgroups
//! and `/proc` does all its blocking reads in one blocking task per collection. kubelet-cm
//! implements it from cgroups, `/proc` and `statvfs`;
//! `testing::FakeNodeStats` (feature `testing`) is a complete fake.
//!
//! The provider is its own trait, reached through
//! [`ContainerManager::node_stats`](crate::ContainerManager::node_stats) (an optional
//! capability, `None` by default), rather than more methods on `ContainerManager`: measuring
//! is a different job from setting up pod cgroups (a backend may do one without the other,
//! or an embedder may measure through another source), the trait stays two methods wide,
//! and yet everything that is handed the kubelet's container manager — the engine, node
//! status, the HTTP server — reaches the measurements without another slot in the builder.
//!
//! ## The collector
//!
//! [`crate::summary::SummaryCollector`] turns samples into the `stats.k8s.io/v1alpha1`
//! [`crate::summary::Summary`] from the contracts alone: the stats provider, the runtime's sandbox
//! and container listings and the kubelet's pods with their statuses. It is what
//! `/stats/summary`, `/metrics/resource`, the eviction manager and image garbage collection
//! read. CPU rates
//! (`usageNanoCores`) need two samples at least a second apart: the collector keeps each
//! cgroup's earlier sample and drops those of cgroups a collection no longer sees.

mod machine;
mod sample;

use std::sync::Arc;

use async_trait::async_trait;

pub use machine::{CpuTopology, HugePages, MachineInfo, NumaMemory};
pub use sample::{
    nanocores, system_container, DirUsage, FsUsage, InterfaceStats, PodSample, PodSampleRequest,
    ResourceUsage, RlimitSample, Sample, SampleRequest, SystemContainerSample, DU_MAX_ENTRIES,
};

/// Errors producing stats.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// This node does not collect stats.
    #[error("stats are not available on this node")]
    Unavailable,
    /// Asking the runtime failed.
    #[error("listing {what} from the runtime: {error}")]
    Runtime {
        /// What was listed.
        what: &'static str,
        /// The runtime error.
        error: crate::RuntimeError,
    },
    /// A blocking reader task failed (panicked or was cancelled).
    #[error("stats reader task failed: {0}")]
    Task(String),
}

/// Node measurements. See the module docs.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait NodeStatsProvider: Send + Sync {
    /// What the node is made of, as read at start (no IO).
    fn machine_info(&self) -> Arc<MachineInfo>;
    /// Takes one sample of what `request` names (and of the node's CPU and memory). What
    /// cannot be measured is left out of the sample; an error means nothing could be read.
    async fn sample(&self, request: SampleRequest) -> Result<Sample, StatsError>;
}
