//! # kubelet-runtime-cri
//!
//! A [`ContainerRuntime`] for kubelet-rs that speaks CRI v1 (`runtime.v1.RuntimeService` and
//! `runtime.v1.ImageService`) to containerd, CRI-O or any other CRI runtime over a unix socket.
//! Requests are mapped the way the Go kubelet's `kuberuntime` package maps them (labels,
//! annotations, namespace options, cgroup resources, security context), so objects created by
//! kubelet-rs look like those of a Go kubelet to `crictl` and log shippers, including the
//! `/var/log/containers/<pod>_<ns>_<container>-<id>.log` symlinks.
//!
//! One lazily connected gRPC channel is shared by all calls: when the runtime is down, calls
//! fail with [`RuntimeError::Unavailable`] and work again once it is back, without reconnecting
//! by hand. Every call has a deadline of [`CriConfig::request_timeout`].
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use kubelet_core::ContainerRuntime;
//! use kubelet_runtime_cri::{CriConfig, CriRuntime};
//!
//! let runtime = CriRuntime::connect(CriConfig {
//!     runtime_endpoint: "unix:///run/kubelet-rs/containerd/containerd.sock".into(),
//!     ..CriConfig::default()
//! })
//! .await?;
//! let status = runtime.status().await?;
//! println!("runtime ready: {}, network ready: {}", status.runtime_ready, status.network_ready);
//! # Ok(())
//! # }
//! ```
//!
//! The crate follows CRI's seams, one module per group of calls: sandboxes, containers
//! (with their log files), images (with the image filesystem), streaming, stats and events;
//! [`mapping`] holds the pure translations, unit-tested table by table. Every
//! [`ContainerRuntime`] method is implemented, the optional ones included; a runtime that
//! lacks one answers gRPC `Unimplemented`, which arrives as [`RuntimeError::Unimplemented`]
//! (`GetContainerEvents` on containerd 1.6, for instance).

mod client;
mod container;
mod events;
mod image;
mod image_user;
mod listing;
pub mod mapping;
mod runtime_info;
mod sandbox;
mod stats;
mod streaming;
mod traced;

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use kubelet_core::runtime::{
    AttachRequest, ContainerConfig, ContainerEventStream, ContainerRuntime, ContainerStats,
    ContainerStatus, ContainerSummary, ExecOutput, ExecRequest, ImageFsInfo, ImageInfo, ListFilter,
    PullImageRequest, ResourcesUpdate, RuntimeError, RuntimeResult, RuntimeStatus, RuntimeVersion,
    SandboxConfig, SandboxStatus, SandboxSummary,
};
use tracing::{info, warn};

pub use client::map_status;
pub use events::ESTABLISH_WAIT;
pub use mapping::ImageUser;

/// The CRI API version this backend speaks.
pub const CRI_API_VERSION: &str = "v1";
/// Largest gRPC message sent or accepted (16 MiB, as the Go kubelet).
pub const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
/// The Go kubelet's default runtime endpoint.
pub const DEFAULT_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// Errors of [`CriRuntime::connect`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is not a `unix://` URL (or an absolute socket path).
    #[error("invalid CRI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as configured.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The runtime could not be asked for its version.
    #[error("CRI runtime at {endpoint} did not answer Version: {error}")]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// The failure.
        error: RuntimeError,
    },
    /// The runtime answered, but does not speak CRI v1.
    #[error("CRI runtime at {endpoint} ({runtime}) speaks API {version:?}, kubelet-rs needs {CRI_API_VERSION:?}")]
    UnsupportedApiVersion {
        /// The endpoint.
        endpoint: String,
        /// Runtime name and version.
        runtime: String,
        /// The API version it reported.
        version: String,
    },
}

/// How to reach the CRI runtime and where container logs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriConfig {
    /// Runtime service endpoint, `unix:///path/to.sock`.
    pub runtime_endpoint: String,
    /// Image service endpoint when it differs from the runtime endpoint.
    pub image_endpoint: Option<String>,
    /// Deadline of every call (2 minutes, as the Go kubelet's `--runtime-request-timeout`).
    pub request_timeout: Duration,
    /// Root of the per-pod log directories (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// Directory of the legacy per-container log symlinks (`/var/log/containers`).
    pub containers_log_dir: PathBuf,
    /// Where `Localhost` seccomp profiles live (`<root-dir>/seccomp`).
    pub seccomp_profile_root: PathBuf,
    /// `seccompDefault` (false): `RuntimeDefault` for containers without a seccomp profile.
    pub seccomp_default: bool,
    /// `cpuCFSQuota` (true): enforce container cpu limits with a CFS quota.
    pub cpu_cfs_quota: bool,
    /// `cpuCFSQuotaPeriod` (100ms).
    pub cpu_cfs_quota_period: Duration,
}

impl Default for CriConfig {
    fn default() -> Self {
        CriConfig {
            runtime_endpoint: DEFAULT_RUNTIME_ENDPOINT.to_string(),
            image_endpoint: None,
            request_timeout: Duration::from_secs(120),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            containers_log_dir: PathBuf::from("/var/log/containers"),
            seccomp_profile_root: PathBuf::from("/var/lib/kubelet/seccomp"),
            seccomp_default: false,
            cpu_cfs_quota: true,
            cpu_cfs_quota_period: Duration::from_millis(100),
        }
    }
}

/// The socket path of a `unix://` endpoint (an absolute path is accepted as is).
pub fn socket_path(endpoint: &str) -> Result<PathBuf, Error> {
    let invalid = |reason| Error::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    let path = if let Some(p) = endpoint.strip_prefix("unix://") {
        p
    } else if endpoint.starts_with('/') {
        endpoint
    } else if endpoint.contains("://") {
        return Err(invalid("only unix:// endpoints are supported"));
    } else {
        return Err(invalid("expected unix:///path/to/socket"));
    };
    if !path.starts_with('/') {
        return Err(invalid("the socket path must be absolute"));
    }
    Ok(PathBuf::from(path))
}

/// Reads MemTotal from /proc/meminfo, in bytes.
async fn memory_capacity() -> Option<i64> {
    let text = tokio::fs::read_to_string("/proc/meminfo").await.ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A [`ContainerRuntime`] over CRI v1. Cheap to share behind an `Arc`; all calls go through
/// one gRPC channel (plus one for a separate image endpoint).
///
/// Every call but `PullImage` (and `ExecSync` without a timeout) has the deadline
/// [`CriConfig::request_timeout`]; `StopContainer` and `ExecSync` get theirs on top of it.
#[derive(Debug, Clone)]
pub struct CriRuntime {
    config: CriConfig,
    runtime: RuntimeServiceClient<traced::TracedChannel>,
    /// The runtime service's channel again, for the listings decoded lean ([`listing`]).
    listing: listing::ListingClient,
    images: ImageServiceClient<traced::TracedChannel>,
    options: mapping::Options,
    /// The runtime's sandbox image, asked for once (see [`runtime_info::sandbox_image`]).
    sandbox_image: std::sync::Arc<tokio::sync::OnceCell<Option<String>>>,
    /// The users of the images containers were created from, by image id.
    image_users: std::sync::Arc<image_user::ImageUsers>,
}

impl CriRuntime {
    /// Builds the channels and checks that the runtime answers `Version` with API `v1`.
    pub async fn connect(config: CriConfig) -> Result<CriRuntime, Error> {
        let runtime_socket = socket_path(&config.runtime_endpoint)?;
        let runtime_channel = client::lazy_channel(runtime_socket.clone());
        let image_channel = match config.image_endpoint.as_deref() {
            Some(ep) if socket_path(ep)? != runtime_socket => {
                client::lazy_channel(socket_path(ep)?)
            }
            _ => runtime_channel.clone(),
        };
        let memory_capacity = match memory_capacity().await {
            Some(m) => m,
            None => {
                warn!("cannot read MemTotal from /proc/meminfo; Burstable OOM scores use 999");
                0
            }
        };
        let runtime = CriRuntime {
            listing: listing::client(traced::TracedChannel::new(runtime_channel.clone())),
            runtime: RuntimeServiceClient::new(traced::TracedChannel::new(runtime_channel))
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
            images: ImageServiceClient::new(traced::TracedChannel::new(image_channel))
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
            options: mapping::Options {
                memory_capacity,
                seccomp_profile_root: config.seccomp_profile_root.clone(),
                seccomp_default: config.seccomp_default,
                cpu_cfs_quota: config.cpu_cfs_quota,
                cpu_cfs_quota_period_us: i64::try_from(config.cpu_cfs_quota_period.as_micros())
                    .unwrap_or(mapping::QUOTA_PERIOD),
            },
            config,
            sandbox_image: Default::default(),
            image_users: Default::default(),
        };
        let version = runtime.version().await.map_err(|source| Error::Connect {
            endpoint: runtime.config.runtime_endpoint.clone(),
            error: source,
        })?;
        if version.runtime_api_version != CRI_API_VERSION {
            return Err(Error::UnsupportedApiVersion {
                endpoint: runtime.config.runtime_endpoint.clone(),
                runtime: format!("{} {}", version.runtime_name, version.runtime_version),
                version: version.runtime_api_version,
            });
        }
        info!(
            endpoint = %runtime.config.runtime_endpoint,
            runtime = %version.runtime_name,
            version = %version.runtime_version,
            "connected to CRI runtime"
        );
        Ok(runtime)
    }

    /// The configuration this runtime was connected with.
    pub fn config(&self) -> &CriConfig {
        &self.config
    }

    /// The cgroup driver of the runtime's default handler (`systemd` or `cgroupfs`), as
    /// containerd's verbose `Status` reports it; `None` when the runtime does not say. The
    /// kubelet's `cgroupDriver` must be the same.
    pub async fn cgroup_driver(&self) -> Option<&'static str> {
        runtime_info::cgroup_driver(self).await
    }

    /// The runtime's sandbox image (asked for once; `None` when it does not say).
    pub(crate) async fn sandbox_image(&self) -> Option<String> {
        self.sandbox_image
            .get_or_init(|| runtime_info::sandbox_image(self))
            .await
            .clone()
    }
}

/// Every method forwards to the module of its CRI seam.
#[async_trait]
impl ContainerRuntime for CriRuntime {
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        listing::sandboxes(self, filter).await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        sandbox::run(self, config).await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        sandbox::stop(self, sandbox_id).await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        sandbox::remove(self, sandbox_id).await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        sandbox::status(self, sandbox_id).await
    }

    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        listing::containers(self, filter).await
    }
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        container::status(self, container_id).await
    }
    async fn container_status_listed(
        &self,
        listed: &ContainerSummary,
    ) -> RuntimeResult<ContainerStatus> {
        container::status_listed(self, listed).await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        container::create(self, sandbox_id, config, sandbox).await
    }
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        container::start(self, container_id).await
    }
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        container::stop(self, container_id, timeout).await
    }
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        container::remove(self, container_id).await
    }
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        container::reopen_log(self, container_id).await
    }
    async fn update_container_resources(
        &self,
        container_id: &str,
        update: &ResourcesUpdate,
    ) -> RuntimeResult<()> {
        container::update_resources(self, container_id, update).await
    }

    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        runtime_info::version(self).await
    }
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        runtime_info::status(self).await
    }

    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        image::status(self, image).await
    }
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        image::pull(self, request).await
    }
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        image::list(self).await
    }
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        image::remove(self, image).await
    }
    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        image::fs_info(self).await
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        streaming::exec_sync(self, container_id, cmd, timeout).await
    }
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        streaming::exec_url(self, request).await
    }
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        streaming::attach_url(self, request).await
    }
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        streaming::port_forward_url(self, sandbox_id, ports).await
    }

    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        stats::container(self, container_id).await
    }
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        stats::list(self, filter).await
    }
    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        events::subscribe(self).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_table() {
        let cases = [
            (
                "unix:///run/containerd/containerd.sock",
                Some("/run/containerd/containerd.sock"),
            ),
            ("/run/x.sock", Some("/run/x.sock")),
            ("unix://relative.sock", None),
            ("tcp://127.0.0.1:1234", None),
            ("npipe:////./pipe/x", None),
            ("", None),
        ];
        for (endpoint, want) in cases {
            let got = socket_path(endpoint).ok();
            assert_eq!(got, want.map(PathBuf::from), "{endpoint}");
        }
    }
}
