//! The [`ContainerRuntime`] contract: the runtime operations the pod lifecycle needs.
//!
//! The trait is shaped after CRI v1 so that a CRI backend maps onto it call for call
//! (`RunPodSandbox` ↔ [`ContainerRuntime::run_pod_sandbox`], …), while another backend (a VM
//! manager, a process runner, the simulator behind the `testing` feature) can implement it
//! without knowing anything about the lifecycle. The engine decides *when* to call what; a
//! backend only carries the call out.
//!
//! Requests carry the Kubernetes [`Pod`] and [`Container`] they are for plus everything the
//! engine resolved (restart attempt, spec hash, cgroup parent, log paths, expanded command and
//! environment, mounts), so a backend never re-derives lifecycle decisions.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod};

/// Errors a [`ContainerRuntime`] reports. Callers match on the variant; the message names
/// the object and the operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The named sandbox, container or image does not exist.
    #[error("{kind} {id} not found")]
    NotFound {
        /// What was looked for: "sandbox", "container", "image".
        kind: &'static str,
        /// Its id or reference.
        id: String,
    },
    /// The runtime cannot be reached (not started, restarting, socket missing).
    #[error("container runtime unavailable: {0}")]
    Unavailable(String),
    /// The request was rejected as invalid by the runtime or by the backend's mapping.
    #[error("invalid {what}: {message}")]
    InvalidInput {
        /// The field or object that is wrong.
        what: String,
        /// Why it is wrong.
        message: String,
    },
    /// The call did not finish within its deadline.
    #[error("{operation} timed out")]
    DeadlineExceeded {
        /// The operation that timed out.
        operation: &'static str,
    },
    /// The backend does not offer this optional capability.
    #[error("{operation} is not implemented by this runtime")]
    Unimplemented {
        /// The operation asked for.
        operation: &'static str,
    },
    /// Pulling an image failed (unreachable registry, unknown image, bad credentials).
    #[error("pulling image {image:?} failed: {message}")]
    ImagePull {
        /// The image reference as written in the pod spec.
        image: String,
        /// The runtime's explanation.
        message: String,
    },
    /// Any other failure of a runtime operation.
    #[error("{operation} failed: {message}")]
    OperationFailed {
        /// The operation that failed, e.g. "CreateContainer".
        operation: &'static str,
        /// The runtime's explanation.
        message: String,
    },
}

/// Result alias for runtime operations.
pub type RuntimeResult<T> = Result<T, RuntimeError>;

/// The identity of the pod an object in the runtime belongs to (from the kubelet's labels).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PodRef {
    /// metadata.uid
    pub uid: String,
    /// metadata.name
    pub name: String,
    /// metadata.namespace
    pub namespace: String,
}

impl PodRef {
    /// `namespace/name`, the form used in logs and errors.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Runtime name and versions, from CRI `Version`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeVersion {
    /// e.g. "containerd".
    pub runtime_name: String,
    /// e.g. "1.6.20".
    pub runtime_version: String,
    /// e.g. "v1".
    pub runtime_api_version: String,
}

/// Runtime health, from CRI `Status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeStatus {
    /// The runtime can run containers.
    pub runtime_ready: bool,
    /// The pod network (CNI) is ready.
    pub network_ready: bool,
    /// Human-readable reasons for whatever is not ready.
    pub message: String,
}

/// State of a pod sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxState {
    /// Running, network set up.
    Ready,
    /// Stopped or failed.
    NotReady,
}

/// One sandbox as listed by [`ContainerRuntime::list_pod_sandboxes`].
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

/// Detailed sandbox status from [`ContainerRuntime::pod_sandbox_status`].
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

/// One container as listed by [`ContainerRuntime::list_containers`].
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

/// Detailed container status from [`ContainerRuntime::container_status`].
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

/// Registry credentials for one pull (from image pull secrets).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegistryAuth {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// base64(user:password), as in docker config files.
    pub auth: String,
    /// Registry host the credentials are for.
    pub server_address: String,
    /// Identity token.
    pub identity_token: String,
    /// Registry token.
    pub registry_token: String,
}

/// An image known to the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    /// Image id.
    pub id: String,
    /// Tags, e.g. "docker.io/library/busybox:latest".
    pub repo_tags: Vec<String>,
    /// Digests.
    pub repo_digests: Vec<String>,
    /// Size in bytes.
    pub size_bytes: u64,
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
}

/// Which part of the pod a container belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// spec.initContainers
    Init,
    /// spec.containers
    Regular,
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
}

/// Output of [`ContainerRuntime::exec_sync`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Captured stdout.
    pub stdout: Vec<u8>,
    /// Captured stderr.
    pub stderr: Vec<u8>,
    /// Exit code of the command.
    pub exit_code: i32,
}

/// A streaming exec request (the runtime answers with a URL to its streaming server).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecRequest {
    /// Container id.
    pub container_id: String,
    /// Command and args.
    pub cmd: Vec<String>,
    /// Allocate a TTY.
    pub tty: bool,
    /// Stream stdin.
    pub stdin: bool,
    /// Stream stdout.
    pub stdout: bool,
    /// Stream stderr.
    pub stderr: bool,
}

/// A streaming attach request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttachRequest {
    /// Container id.
    pub container_id: String,
    /// Allocate a TTY.
    pub tty: bool,
    /// Stream stdin.
    pub stdin: bool,
    /// Stream stdout.
    pub stdout: bool,
    /// Stream stderr.
    pub stderr: bool,
}

/// Narrows a listing of sandboxes or containers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only objects of the pod with this uid (CRI: label selector `io.kubernetes.pod.uid`).
    pub pod_uid: Option<String>,
}

impl ListFilter {
    /// Everything the kubelet created.
    pub fn all() -> Self {
        ListFilter::default()
    }
    /// Only the objects of one pod.
    pub fn pod(uid: impl Into<String>) -> Self {
        ListFilter {
            pod_uid: Some(uid.into()),
        }
    }
}

/// An image pull.
#[derive(Debug, Clone)]
pub struct PullImageRequest {
    /// The image reference as written in the pod spec.
    pub image: String,
    /// Credentials from the pod's image pull secrets, if any matched the registry.
    pub auth: Option<RegistryAuth>,
    /// The sandbox the image is pulled for, if known.
    pub sandbox: Option<SandboxConfig>,
}

/// Labels a backend attaches to objects; free-form for backends that need more than [`PodRef`].
pub type Labels = BTreeMap<String, String>;

/// The runtime operations the pod lifecycle needs. See the module docs.
///
/// Optional capabilities (streaming, image removal, …) may answer
/// [`RuntimeError::Unimplemented`]; the engine treats that as "not available here".
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait ContainerRuntime: Send + Sync {
    /// Runtime name and API version (CRI `Version`).
    async fn version(&self) -> RuntimeResult<RuntimeVersion>;
    /// Runtime and network readiness (CRI `Status`).
    async fn status(&self) -> RuntimeResult<RuntimeStatus>;

    /// Sandboxes created by the kubelet, running and exited, narrowed by `filter`.
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>>;
    /// Detailed status of one sandbox.
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus>;
    /// Creates and starts a sandbox; returns its id.
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String>;
    /// Stops a sandbox (and any containers left in it). Stopping a stopped sandbox succeeds.
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()>;
    /// Removes a stopped sandbox. Removing a missing sandbox succeeds.
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()>;

    /// Containers created by the kubelet, in any state, narrowed by `filter`.
    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>>;
    /// Detailed status of one container.
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus>;
    /// Creates a container in a sandbox; returns its id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String>;
    /// Starts a created container.
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()>;
    /// Stops a container: SIGTERM, then SIGKILL after `timeout`. Stopping an exited one succeeds.
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()>;
    /// Removes a container. Removing a missing container succeeds.
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()>;

    /// Looks an image up; `None` when it is not present.
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>>;
    /// Pulls an image; returns the image reference (id or digest).
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String>;
    /// Lists images.
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>>;
    /// Removes an image.
    async fn remove_image(&self, image: &str) -> RuntimeResult<()>;

    /// Runs a command in a container and waits for it (or for `timeout`).
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput>;
    /// URL of the runtime's streaming server for an exec session.
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String>;
    /// URL of the runtime's streaming server for an attach session.
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String>;
    /// URL of the runtime's streaming server for port forwarding into a sandbox.
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String>;
}
