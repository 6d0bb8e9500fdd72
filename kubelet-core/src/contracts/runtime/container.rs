//! Containers: what the engine asks for ([`ContainerConfig`]) and what a backend reports
//! ([`ContainerSummary`], [`ContainerStatus`]).

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::PodRef;

/// State of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerState {
    /// Created, not started.
    Created,
    /// Running.
    Running,
    /// Exited (has an exit code).
    Exited,
    /// The runtime cannot tell.
    Unknown,
}

/// One container as listed by [`ContainerRuntime::list_containers`](super::ContainerRuntime::list_containers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSummary {
    /// Runtime id.
    pub id: String,
    /// Sandbox the container lives in.
    pub sandbox_id: String,
    /// The pod it belongs to.
    pub pod: PodRef,
    /// The container's name in the pod spec.
    pub name: String,
    /// Restart count at creation (CRI `attempt`).
    pub attempt: u32,
    /// Hash of the container spec it was created from ([`crate::hash::container_hash`]).
    pub hash: u64,
    /// Image as requested.
    pub image: String,
    /// Image reference the runtime resolved (digest or id).
    pub image_ref: String,
    /// Current state.
    pub state: ContainerState,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_at: i64,
}

/// Detailed container status from [`ContainerRuntime::container_status`](super::ContainerRuntime::container_status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStatus {
    /// What the listing also says.
    pub summary: ContainerSummary,
    /// Start time, ns since the epoch (0 when never started).
    pub started_at: i64,
    /// Exit time, ns since the epoch (0 when not exited).
    pub finished_at: i64,
    /// Exit code (meaningful when exited).
    pub exit_code: i32,
    /// Brief reason, e.g. "OOMKilled", "Error", "Completed".
    pub reason: String,
    /// Longer message (e.g. the termination message).
    pub message: String,
    /// Absolute path of the container's log file, if any.
    pub log_path: Option<PathBuf>,
}

impl ContainerStatus {
    /// A container just created from `config` under `id` in the sandbox `sandbox`:
    /// [`ContainerState::Created`], created now (tokio's clock), its log at
    /// `sandbox.log_directory/config.log_path`.
    pub fn new(
        id: impl Into<String>,
        sandbox_id: impl Into<String>,
        config: &ContainerConfig,
        sandbox: &super::SandboxConfig,
    ) -> ContainerStatus {
        ContainerStatus {
            summary: ContainerSummary {
                id: id.into(),
                sandbox_id: sandbox_id.into(),
                pod: PodRef::of(&config.pod),
                name: config.container.name.clone(),
                attempt: config.restart_count,
                hash: config.hash,
                image: config.container.image.clone().unwrap_or_default(),
                image_ref: config.image_ref.clone(),
                state: ContainerState::Created,
                created_at: crate::clock::now_unix_nanos(),
            },
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            log_path: Some(sandbox.log_directory.join(&config.log_path)),
        }
    }

    /// Marks the container running since now.
    pub fn set_running(&mut self) {
        self.summary.state = ContainerState::Running;
        self.started_at = crate::clock::now_unix_nanos();
    }

    /// Marks the container exited at `at` (ns since the epoch) with `exit_code`; the reason
    /// is "OOMKilled" when `oom`, else "Completed" for 0 and "Error" otherwise (as CRI
    /// runtimes report them).
    pub fn set_exited(&mut self, at: i64, exit_code: i32, oom: bool) {
        self.summary.state = ContainerState::Exited;
        self.finished_at = at;
        self.exit_code = exit_code;
        self.reason = if oom {
            "OOMKilled".into()
        } else if exit_code == 0 {
            "Completed".into()
        } else {
            "Error".into()
        };
    }
}

/// Which part of the pod a container belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// spec.initContainers
    Init,
    /// spec.containers
    Regular,
    /// spec.ephemeralContainers (`kubectl debug`): started once in the running pod, never
    /// restarted.
    Ephemeral {
        /// Runtime id of the running container named by `targetContainerName`, whose
        /// process namespace the ephemeral container joins (CRI namespace mode `TARGET`,
        /// when the pod does not share one process namespace anyway).
        target_id: Option<String>,
    },
}

/// A resolved environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvVar {
    /// Name.
    pub name: String,
    /// Fully expanded value.
    pub value: String,
}

/// Mount propagation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MountPropagation {
    /// No propagation.
    #[default]
    Private,
    /// Host mounts propagate into the container.
    HostToContainer,
    /// Both directions.
    Bidirectional,
}

/// A resolved mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Path inside the container.
    pub container_path: String,
    /// Path on the host.
    pub host_path: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
    /// Propagation mode.
    pub propagation: MountPropagation,
}

/// Everything needed to create a container in a sandbox.
#[derive(Debug, Clone)]
pub struct ContainerConfig {
    /// The pod.
    pub pod: Arc<Pod>,
    /// The container spec as written in the pod.
    pub container: Container,
    /// Init or regular container.
    pub kind: ContainerKind,
    /// Restart count of this container (CRI attempt).
    pub restart_count: u32,
    /// Hash of the container spec ([`crate::hash::container_hash`]).
    pub hash: u64,
    /// The image reference returned by the pull / image status.
    pub image_ref: String,
    /// Command after `$(VAR)` expansion (empty: image entrypoint).
    pub command: Vec<String>,
    /// Args after `$(VAR)` expansion (empty: image cmd).
    pub args: Vec<String>,
    /// Environment after resolution and expansion.
    pub env: Vec<EnvVar>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Log path relative to the sandbox log directory: `<container>/<restartCount>.log`.
    pub log_path: PathBuf,
    /// The CPUs the container may run on (the CPU manager's choice, a Linux CPU list);
    /// `None`: the runtime's default (every CPU of its cgroup parent).
    pub cpuset_cpus: Option<String>,
    /// The memory nodes the container may allocate on (the memory manager's choice,
    /// cgroup `cpuset.mems`, Go's comma-separated list); `None`: the runtime's default.
    pub cpuset_mems: Option<String>,
    /// What device plugins add beyond env and mounts (which are in `env` and `mounts`).
    pub devices: DeviceSettings,
    /// Groups the container gets besides the pod's `supplementalGroups` and `fsGroup`: its
    /// volumes' (Go's `GetExtraSupplementalGroupsForPod`).
    pub extra_supplemental_groups: Vec<i64>,
}

/// What device plugins' `Allocate` answers add to a container besides its env and mounts
/// (Go's `DeviceRunContainerOptions` devices, annotations and CDI devices).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceSettings {
    /// Host device nodes made available in the container.
    pub nodes: Vec<crate::devices::DeviceNode>,
    /// Annotations for the runtime (the kubelet's own annotations win over them).
    pub annotations: Vec<(String, String)>,
    /// Fully qualified CDI device names.
    pub cdi_devices: Vec<String>,
}

/// A change of a container's Linux resources ([`update_container_resources`]); `None`
/// fields are left as they are.
///
/// [`update_container_resources`]: super::ContainerRuntime::update_container_resources
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourcesUpdate {
    /// CPUs (cgroup `cpuset.cpus`), a Linux CPU list.
    pub cpuset_cpus: Option<String>,
}
