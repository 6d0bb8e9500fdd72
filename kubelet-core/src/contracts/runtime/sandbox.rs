//! Pod sandboxes: what the engine asks for ([`SandboxConfig`]) and what a backend reports
//! ([`SandboxSummary`], [`SandboxStatus`]).

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::PodRef;

/// State of a pod sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxState {
    /// Running, network set up.
    Ready,
    /// Stopped or failed.
    NotReady,
}

/// One sandbox as listed by [`ContainerRuntime::list_pod_sandboxes`](super::ContainerRuntime::list_pod_sandboxes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSummary {
    /// Runtime id.
    pub id: String,
    /// The pod it belongs to.
    pub pod: PodRef,
    /// How many sandboxes were created for this pod before this one.
    pub attempt: u32,
    /// Current state.
    pub state: SandboxState,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_at: i64,
}

impl SandboxSummary {
    /// A sandbox just created from `config` under `id`: [`SandboxState::Ready`], created now
    /// (tokio's clock, [`crate::clock::now_unix_nanos`]).
    pub fn new(id: impl Into<String>, config: &SandboxConfig) -> SandboxSummary {
        SandboxSummary {
            id: id.into(),
            pod: PodRef::of(&config.pod),
            attempt: config.attempt,
            state: SandboxState::Ready,
            created_at: crate::clock::now_unix_nanos(),
        }
    }
}

/// Detailed sandbox status from [`ContainerRuntime::pod_sandbox_status`](super::ContainerRuntime::pod_sandbox_status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    /// Runtime id.
    pub id: String,
    /// The pod it belongs to.
    pub pod: PodRef,
    /// Attempt number, as in [`SandboxSummary::attempt`].
    pub attempt: u32,
    /// Current state.
    pub state: SandboxState,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// Primary pod IP, when the sandbox has its own network.
    pub ip: Option<String>,
    /// Further pod IPs (dual stack).
    pub additional_ips: Vec<String>,
    /// The sandbox shares the host's network namespace.
    pub host_network: bool,
}

/// DNS configuration for a sandbox, computed from dnsPolicy, dnsConfig and the kubelet config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DnsConfig {
    /// Nameservers.
    pub servers: Vec<String>,
    /// Search domains.
    pub searches: Vec<String>,
    /// resolv.conf options.
    pub options: Vec<String>,
}

/// Everything needed to create a pod sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Attempt number (number of sandboxes created for this pod before).
    pub attempt: u32,
    /// Hostname for the pod (from spec.hostname / metadata.name).
    pub hostname: String,
    /// Directory for the pod's container logs: `/var/log/pods/<ns>_<name>_<uid>`.
    pub log_directory: PathBuf,
    /// Cgroup parent from the container manager, if it manages cgroups.
    pub cgroup_parent: Option<String>,
    /// DNS settings; `None` lets the runtime use its default.
    pub dns: Option<DnsConfig>,
    /// The runtime handler of the pod's RuntimeClass (CRI `RunPodSandbox.runtime_handler`);
    /// empty: the runtime's default handler.
    pub runtime_handler: String,
}
