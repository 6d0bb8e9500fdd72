//! The [`ContainerManager`] contract: node resources and pod-level resource setup.
//!
//! A container manager reports what the node offers (capacity and allocatable), prepares the
//! pod-level resources before the sandbox is created (for cgroupfs: the `pod<uid>` cgroup under
//! its QoS parent, handed to the runtime as the cgroup parent) and tears them down after the
//! pod's containers are gone. The engine's resource admission reads allocatable from it.
//!
//! A manager that also measures the node (machine info, cgroup usage, filesystems) offers a
//! [`NodeStatsProvider`] through [`ContainerManager::node_stats`]; see [`crate::stats`].

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::stats::NodeStatsProvider;

/// A Kubernetes resource list: resource name ("cpu", "memory", "pods", …) → quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Errors from a container manager.
#[derive(Debug, thiserror::Error)]
pub enum CmError {
    /// Setting up pod resources failed.
    #[error("setting up resources of pod {pod} failed: {message}")]
    PodSetup {
        /// `ns/name`.
        pod: String,
        /// Why.
        message: String,
    },
    /// Removing pod resources failed.
    #[error("removing resources of pod uid {uid} failed: {message}")]
    PodTeardown {
        /// Pod uid.
        uid: String,
        /// Why.
        message: String,
    },
    /// Reading node or cgroup state failed.
    #[error("reading {what} failed: {message}")]
    Read {
        /// What was read.
        what: String,
        /// Why.
        message: String,
    },
}

/// What the container manager set up for a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodResources {
    /// Cgroup parent for the sandbox (`None`: the runtime chooses).
    pub cgroup_parent: Option<String>,
}

/// Node resources and pod-level resource management. See the module docs.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait ContainerManager: Send + Sync {
    /// Node capacity (cpu, memory, pods, ephemeral-storage, hugepages-*).
    fn capacity(&self) -> ResourceList;
    /// Node allocatable: capacity minus reservations and hard eviction thresholds.
    fn allocatable(&self) -> ResourceList;
    /// Prepares pod-level resources before the sandbox is created. Idempotent.
    async fn ensure_pod_resources(&self, pod: &Pod) -> Result<PodResources, CmError>;
    /// Removes pod-level resources after all containers of the pod are gone. Idempotent.
    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError>;
    /// Uids of pods that have resources set up (for orphan cleanup at housekeeping).
    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError>;
    /// The node's measurements (machine info, cgroup usage, network, filesystems), when this
    /// manager takes them: what node status, the summary collector and `/spec/` read.
    /// `None` (the default): it does not measure.
    fn node_stats(&self) -> Option<Arc<dyn NodeStatsProvider>> {
        None
    }
    /// The cgroup (cgroupfs path) the pod's sandbox and containers live under, without
    /// creating anything — what cAdvisor's `id` label starts with. Default: unknown.
    fn pod_cgroup_parent(&self, _pod: &Pod) -> Option<String> {
        None
    }
    /// The cgroup (cgroupfs path below the hierarchy root) the runtime put the pod's container
    /// or sandbox `container_id` in — cAdvisor's `id` label: `<pod cgroup>/<id>` with
    /// cgroupfs, a `cri-containerd-<id>.scope` in the pod's slice with systemd. May read the
    /// cgroup filesystem: call it off the async runtime's threads. Default: the id below
    /// [`pod_cgroup_parent`](Self::pod_cgroup_parent).
    fn container_cgroup(&self, pod: &Pod, container_id: &str) -> Option<String> {
        self.pod_cgroup_parent(pod)
            .map(|parent| format!("{parent}/{container_id}"))
    }
}
