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

pub mod mapping;

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use kubelet_core::runtime::{
    AttachRequest, ContainerConfig, ContainerRuntime, ContainerStatus, ContainerSummary,
    ExecOutput, ExecRequest, ImageInfo, ListFilter, PullImageRequest, RuntimeError, RuntimeResult,
    RuntimeStatus, RuntimeVersion, SandboxConfig, SandboxStatus, SandboxSummary,
};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::{debug, info, warn};

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
    #[error("CRI runtime at {endpoint} did not answer Version: {source}")]
    Connect {
        /// The endpoint.
        endpoint: String,
        /// The failure.
        #[source]
        source: RuntimeError,
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
}

impl Default for CriConfig {
    fn default() -> Self {
        CriConfig {
            runtime_endpoint: DEFAULT_RUNTIME_ENDPOINT.to_string(),
            image_endpoint: None,
            request_timeout: Duration::from_secs(120),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            containers_log_dir: PathBuf::from("/var/log/containers"),
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

/// A channel that dials the unix socket on first use and again after every disconnect.
fn lazy_channel(socket: PathBuf) -> Channel {
    // The URI is never resolved: the connector below dials the socket.
    Endpoint::from_static("http://cri.local").connect_with_connector_lazy(tower::service_fn(
        move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        },
    ))
}

/// Maps a gRPC status to a [`RuntimeError`] for `operation` on the object `kind`/`id`.
pub fn map_status(
    operation: &'static str,
    kind: &'static str,
    id: &str,
    status: &tonic::Status,
) -> RuntimeError {
    use tonic::Code;
    let message = status.message().to_string();
    match status.code() {
        Code::NotFound => RuntimeError::NotFound {
            kind,
            id: id.to_string(),
        },
        Code::Unavailable => RuntimeError::Unavailable(format!("{operation}: {message}")),
        Code::InvalidArgument => RuntimeError::InvalidInput {
            what: format!("{operation} request for {kind} {id}"),
            message,
        },
        Code::DeadlineExceeded => RuntimeError::DeadlineExceeded { operation },
        Code::Unimplemented => RuntimeError::Unimplemented { operation },
        // Transport failures tonic reports without a server answer (connection refused, the
        // connection dropped under an in-flight call). This client never cancels calls itself.
        Code::Unknown | Code::Cancelled if is_transport_failure(&message) => {
            RuntimeError::Unavailable(format!("{operation}: {message}"))
        }
        _ => RuntimeError::OperationFailed { operation, message },
    }
}

fn is_transport_failure(message: &str) -> bool {
    const SIGNS: [&str; 7] = [
        "transport error",
        "Service was not ready",
        "error trying to connect",
        "operation was canceled",
        "connection reset",
        "broken pipe",
        "connection closed",
    ];
    SIGNS.iter().any(|s| message.contains(s))
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
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    memory_capacity: i64,
}

/// What an error is about: the operation and the object.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    operation: &'static str,
    kind: &'static str,
    id: &'a str,
    /// The image the call uses, to tell "image not found" from "sandbox not found".
    image: Option<&'a str>,
}

fn ctx<'a>(operation: &'static str, kind: &'static str, id: &'a str) -> Ctx<'a> {
    Ctx {
        operation,
        kind,
        id,
        image: None,
    }
}

impl CriRuntime {
    /// Builds the channels and checks that the runtime answers `Version` with API `v1`.
    pub async fn connect(config: CriConfig) -> Result<CriRuntime, Error> {
        let runtime_socket = socket_path(&config.runtime_endpoint)?;
        let runtime_channel = lazy_channel(runtime_socket.clone());
        let image_channel = match config.image_endpoint.as_deref() {
            Some(ep) if socket_path(ep)? != runtime_socket => lazy_channel(socket_path(ep)?),
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
            runtime: RuntimeServiceClient::new(runtime_channel)
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
            images: ImageServiceClient::new(image_channel)
                .max_decoding_message_size(MAX_MESSAGE_SIZE)
                .max_encoding_message_size(MAX_MESSAGE_SIZE),
            config,
            memory_capacity,
        };
        let version = runtime.version().await.map_err(|source| Error::Connect {
            endpoint: runtime.config.runtime_endpoint.clone(),
            source,
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

    fn request<T>(&self, message: T, timeout: Option<Duration>) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        request
    }

    /// Runs one call with the client-side deadline and maps its error.
    async fn call<T, F>(&self, c: Ctx<'_>, timeout: Option<Duration>, fut: F) -> RuntimeResult<T>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let result = match timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(RuntimeError::DeadlineExceeded {
                        operation: c.operation,
                    })
                }
            },
            None => fut.await,
        };
        match result {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => {
                let err = match c.image {
                    Some(image)
                        if status.code() == tonic::Code::NotFound
                            && status.message().contains("image") =>
                    {
                        RuntimeError::NotFound {
                            kind: "image",
                            id: image.to_string(),
                        }
                    }
                    _ => map_status(c.operation, c.kind, c.id, &status),
                };
                debug!(operation = c.operation, id = c.id, code = ?status.code(), error = %err, "CRI call failed");
                Err(err)
            }
        }
    }

    fn deadline(&self) -> Option<Duration> {
        Some(self.config.request_timeout)
    }

    async fn raw_container_status(&self, id: &str) -> RuntimeResult<cri::ContainerStatus> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::ContainerStatusRequest {
                container_id: id.to_string(),
                verbose: false,
            },
            self.deadline(),
        );
        let resp = self
            .call(
                ctx("ContainerStatus", "container", id),
                self.deadline(),
                client.container_status(req),
            )
            .await?;
        resp.status.ok_or_else(|| RuntimeError::NotFound {
            kind: "container",
            id: id.to_string(),
        })
    }

    async fn raw_image_status(&self, image: &str) -> RuntimeResult<Option<cri::Image>> {
        let mut client = self.images.clone();
        let req = self.request(
            cri::ImageStatusRequest {
                image: Some(cri::ImageSpec {
                    image: image.to_string(),
                    ..Default::default()
                }),
                verbose: false,
            },
            self.deadline(),
        );
        match self
            .call(
                ctx("ImageStatus", "image", image),
                self.deadline(),
                client.image_status(req),
            )
            .await
        {
            Ok(resp) => Ok(resp.image),
            Err(RuntimeError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The user an image runs as (Go `getImageUser`): a numeric uid, a user name, or root
    /// when the image names no user.
    async fn image_user(&self, config: &ContainerConfig) -> RuntimeResult<ImageUser> {
        let mut image = self.raw_image_status(&config.image_ref).await?;
        if image.is_none() {
            if let Some(spec_image) = config.container.image.as_deref() {
                image = self.raw_image_status(spec_image).await?;
            }
        }
        // As Go: a numeric uid, else a user name, else (no user, or no image) root.
        let root = ImageUser {
            uid: Some(0),
            username: String::new(),
        };
        Ok(match image {
            Some(i) => match i.uid {
                Some(uid) => ImageUser {
                    uid: Some(uid.value),
                    username: String::new(),
                },
                None if !i.username.is_empty() => ImageUser {
                    uid: None,
                    username: i.username,
                },
                None => root,
            },
            None => root,
        })
    }

    fn log_symlink(&self, pod: &str, namespace: &str, container: &str, id: &str) -> PathBuf {
        self.config
            .containers_log_dir
            .join(mapping::log_symlink_name(pod, namespace, container, id))
    }
}

fn image_info(i: cri::Image) -> ImageInfo {
    ImageInfo {
        id: i.id,
        repo_tags: i.repo_tags,
        repo_digests: i.repo_digests,
        size_bytes: i.size,
    }
}

fn uid_selector(filter: &ListFilter) -> std::collections::HashMap<String, String> {
    filter
        .pod_uid
        .iter()
        .map(|uid| (mapping::POD_UID_LABEL.to_string(), uid.clone()))
        .collect()
}

async fn remove_file_if_present(path: &Path) {
    match tokio::fs::remove_file(path).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warn!(path = %path.display(), error = %e, "cannot remove file"),
    }
}

fn whole_seconds_up(d: Duration) -> i64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

#[async_trait]
impl ContainerRuntime for CriRuntime {
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::VersionRequest {
                version: CRI_API_VERSION.to_string(),
            },
            self.deadline(),
        );
        let v = self
            .call(
                ctx("Version", "runtime", ""),
                self.deadline(),
                client.version(req),
            )
            .await?;
        Ok(RuntimeVersion {
            runtime_name: v.runtime_name,
            runtime_version: v.runtime_version,
            runtime_api_version: v.runtime_api_version,
        })
    }

    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        let mut client = self.runtime.clone();
        let req = self.request(cri::StatusRequest { verbose: false }, self.deadline());
        let resp = self
            .call(
                ctx("Status", "runtime", ""),
                self.deadline(),
                client.status(req),
            )
            .await?;
        let conditions = resp.status.map(|s| s.conditions).unwrap_or_default();
        let ready = |t: &str| conditions.iter().any(|c| c.r#type == t && c.status);
        let message = conditions
            .iter()
            .filter(|c| !c.status)
            .map(|c| format!("{} is false: {}: {}", c.r#type, c.reason, c.message))
            .collect::<Vec<_>>()
            .join("; ");
        Ok(RuntimeStatus {
            runtime_ready: ready("RuntimeReady"),
            network_ready: ready("NetworkReady"),
            message,
        })
    }

    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::ListPodSandboxRequest {
                filter: Some(cri::PodSandboxFilter {
                    label_selector: uid_selector(filter),
                    ..Default::default()
                }),
            },
            self.deadline(),
        );
        let resp = self
            .call(
                ctx("ListPodSandbox", "sandbox", ""),
                self.deadline(),
                client.list_pod_sandbox(req),
            )
            .await?;
        Ok(resp
            .items
            .iter()
            .filter_map(mapping::sandbox_summary)
            .collect())
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::PodSandboxStatusRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                verbose: false,
            },
            self.deadline(),
        );
        let resp = self
            .call(
                ctx("PodSandboxStatus", "sandbox", sandbox_id),
                self.deadline(),
                client.pod_sandbox_status(req),
            )
            .await?;
        resp.status
            .as_ref()
            .and_then(mapping::sandbox_status)
            .ok_or_else(|| RuntimeError::NotFound {
                kind: "sandbox",
                id: sandbox_id.to_string(),
            })
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        let pod = kubelet_core::pod::full_name(&config.pod);
        let uid = kubelet_core::pod::uid(&config.pod).to_string();
        if let Err(e) = tokio::fs::create_dir_all(&config.log_directory).await {
            return Err(RuntimeError::OperationFailed {
                operation: "RunPodSandbox",
                message: format!(
                    "creating pod log directory {}: {e}",
                    config.log_directory.display()
                ),
            });
        }
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::RunPodSandboxRequest {
                config: Some(mapping::sandbox_config(config)),
                runtime_handler: String::new(),
            },
            self.deadline(),
        );
        let resp = self
            .call(
                ctx("RunPodSandbox", "sandbox", &pod),
                self.deadline(),
                client.run_pod_sandbox(req),
            )
            .await?;
        info!(pod = %pod, uid = %uid, sandbox = %resp.pod_sandbox_id, attempt = config.attempt, "pod sandbox running");
        Ok(resp.pod_sandbox_id)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::StopPodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            },
            self.deadline(),
        );
        self.call(
            ctx("StopPodSandbox", "sandbox", sandbox_id),
            self.deadline(),
            client.stop_pod_sandbox(req),
        )
        .await?;
        debug!(sandbox = sandbox_id, "pod sandbox stopped");
        Ok(())
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::RemovePodSandboxRequest {
                pod_sandbox_id: sandbox_id.to_string(),
            },
            self.deadline(),
        );
        match self
            .call(
                ctx("RemovePodSandbox", "sandbox", sandbox_id),
                self.deadline(),
                client.remove_pod_sandbox(req),
            )
            .await
        {
            Ok(_) | Err(RuntimeError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    label_selector: uid_selector(filter),
                    ..Default::default()
                }),
            },
            self.deadline(),
        );
        let resp = self
            .call(
                ctx("ListContainers", "container", ""),
                self.deadline(),
                client.list_containers(req),
            )
            .await?;
        Ok(resp
            .containers
            .iter()
            .filter_map(mapping::container_summary)
            .collect())
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        let status = self.raw_container_status(container_id).await?;
        // CRI's ContainerStatus does not name the sandbox; the listing does.
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::ListContainersRequest {
                filter: Some(cri::ContainerFilter {
                    id: container_id.to_string(),
                    ..Default::default()
                }),
            },
            self.deadline(),
        );
        let listed = self
            .call(
                ctx("ListContainers", "container", container_id),
                self.deadline(),
                client.list_containers(req),
            )
            .await?;
        let sandbox_id = listed
            .containers
            .iter()
            .find(|c| c.id == status.id)
            .map(|c| c.pod_sandbox_id.clone())
            .unwrap_or_default();
        mapping::container_status(&status, &sandbox_id).ok_or_else(|| RuntimeError::NotFound {
            kind: "container",
            id: container_id.to_string(),
        })
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        let pod = &config.pod;
        let pod_name = kubelet_core::pod::name(pod);
        let namespace = kubelet_core::pod::namespace(pod);
        let name = config.container.name.as_str();
        let image_user = self.image_user(config).await?;
        let container_config =
            mapping::container_config(config, &image_user, self.memory_capacity)?;
        let log_file = sandbox.log_directory.join(&config.log_path);
        if let Some(dir) = log_file.parent() {
            if let Err(e) = tokio::fs::create_dir_all(dir).await {
                return Err(RuntimeError::OperationFailed {
                    operation: "CreateContainer",
                    message: format!("creating container log directory {}: {e}", dir.display()),
                });
            }
        }
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::CreateContainerRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                config: Some(container_config),
                sandbox_config: Some(mapping::sandbox_config(sandbox)),
            },
            self.deadline(),
        );
        let id = self
            .call(
                Ctx {
                    image: Some(&config.image_ref),
                    ..ctx("CreateContainer", "sandbox", sandbox_id)
                },
                self.deadline(),
                client.create_container(req),
            )
            .await?
            .container_id;

        // The legacy symlink log shippers read (Go creates it after a successful start; the
        // target appears when the runtime opens the log).
        let link = self.log_symlink(pod_name, namespace, name, &id);
        if let Err(e) = tokio::fs::create_dir_all(&self.config.containers_log_dir).await {
            warn!(dir = %self.config.containers_log_dir.display(), error = %e, "cannot create containers log directory");
        } else {
            remove_file_if_present(&link).await;
            if let Err(e) = tokio::fs::symlink(&log_file, &link).await {
                warn!(link = %link.display(), target = %log_file.display(), error = %e, "cannot create container log symlink");
            }
        }
        info!(pod = %format!("{namespace}/{pod_name}"), uid = kubelet_core::pod::uid(pod), container = name, id = %id, attempt = config.restart_count, "container created");
        Ok(id)
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::StartContainerRequest {
                container_id: container_id.to_string(),
            },
            self.deadline(),
        );
        self.call(
            ctx("StartContainer", "container", container_id),
            self.deadline(),
            client.start_container(req),
        )
        .await?;
        Ok(())
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        let mut client = self.runtime.clone();
        let deadline = self.config.request_timeout.saturating_add(timeout);
        let req = self.request(
            cri::StopContainerRequest {
                container_id: container_id.to_string(),
                timeout: whole_seconds_up(timeout),
            },
            Some(deadline),
        );
        self.call(
            ctx("StopContainer", "container", container_id),
            Some(deadline),
            client.stop_container(req),
        )
        .await?;
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        // As Go's removeContainerLog: drop the log file and the legacy symlink first.
        match self.raw_container_status(container_id).await {
            Ok(status) => {
                let label = |k: &str| status.labels.get(k).cloned().unwrap_or_default();
                if !status.log_path.is_empty() {
                    remove_file_if_present(Path::new(&status.log_path)).await;
                }
                let link = self.log_symlink(
                    &label(mapping::POD_NAME_LABEL),
                    &label(mapping::POD_NAMESPACE_LABEL),
                    &label(mapping::CONTAINER_NAME_LABEL),
                    &status.id,
                );
                remove_file_if_present(&link).await;
            }
            Err(RuntimeError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::RemoveContainerRequest {
                container_id: container_id.to_string(),
            },
            self.deadline(),
        );
        match self
            .call(
                ctx("RemoveContainer", "container", container_id),
                self.deadline(),
                client.remove_container(req),
            )
            .await
        {
            Ok(_) | Err(RuntimeError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        Ok(self.raw_image_status(image).await?.map(image_info))
    }

    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        // As Go: a pull has no deadline (large images take longer than request_timeout).
        let mut client = self.images.clone();
        let req = self.request(
            cri::PullImageRequest {
                image: Some(cri::ImageSpec {
                    image: request.image.clone(),
                    ..Default::default()
                }),
                auth: request.auth.as_ref().map(|a| cri::AuthConfig {
                    username: a.username.clone(),
                    password: a.password.clone(),
                    auth: a.auth.clone(),
                    server_address: a.server_address.clone(),
                    identity_token: a.identity_token.clone(),
                    registry_token: a.registry_token.clone(),
                }),
                sandbox_config: request.sandbox.as_ref().map(mapping::sandbox_config),
            },
            None,
        );
        match self
            .call(
                ctx("PullImage", "image", &request.image),
                None,
                client.pull_image(req),
            )
            .await
        {
            Ok(resp) => Ok(resp.image_ref),
            Err(e @ (RuntimeError::Unavailable(_) | RuntimeError::DeadlineExceeded { .. })) => {
                Err(e)
            }
            Err(RuntimeError::NotFound { .. }) => Err(RuntimeError::ImagePull {
                image: request.image.clone(),
                message: "image not found".into(),
            }),
            Err(
                RuntimeError::OperationFailed { message, .. }
                | RuntimeError::InvalidInput { message, .. },
            ) => Err(RuntimeError::ImagePull {
                image: request.image.clone(),
                message,
            }),
            Err(e) => Err(RuntimeError::ImagePull {
                image: request.image.clone(),
                message: e.to_string(),
            }),
        }
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        let mut client = self.images.clone();
        let req = self.request(cri::ListImagesRequest { filter: None }, self.deadline());
        let resp = self
            .call(
                ctx("ListImages", "image", ""),
                self.deadline(),
                client.list_images(req),
            )
            .await?;
        Ok(resp.images.into_iter().map(image_info).collect())
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let mut client = self.images.clone();
        let req = self.request(
            cri::RemoveImageRequest {
                image: Some(cri::ImageSpec {
                    image: image.to_string(),
                    ..Default::default()
                }),
            },
            self.deadline(),
        );
        self.call(
            ctx("RemoveImage", "image", image),
            self.deadline(),
            client.remove_image(req),
        )
        .await?;
        Ok(())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        let mut client = self.runtime.clone();
        // As Go: the command's timeout plus the request timeout, or no deadline at all when
        // the command has none.
        let deadline =
            (!timeout.is_zero()).then(|| self.config.request_timeout.saturating_add(timeout));
        let req = self.request(
            cri::ExecSyncRequest {
                container_id: container_id.to_string(),
                cmd: cmd.to_vec(),
                timeout: whole_seconds_up(timeout),
            },
            deadline,
        );
        let resp = self
            .call(
                ctx("ExecSync", "container", container_id),
                deadline,
                client.exec_sync(req),
            )
            .await?;
        Ok(ExecOutput {
            stdout: resp.stdout,
            stderr: resp.stderr,
            exit_code: resp.exit_code,
        })
    }

    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::ExecRequest {
                container_id: request.container_id.clone(),
                cmd: request.cmd.clone(),
                tty: request.tty,
                stdin: request.stdin,
                stdout: request.stdout,
                stderr: request.stderr,
            },
            self.deadline(),
        );
        Ok(self
            .call(
                ctx("Exec", "container", &request.container_id),
                self.deadline(),
                client.exec(req),
            )
            .await?
            .url)
    }

    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::AttachRequest {
                container_id: request.container_id.clone(),
                stdin: request.stdin,
                tty: request.tty,
                stdout: request.stdout,
                stderr: request.stderr,
            },
            self.deadline(),
        );
        Ok(self
            .call(
                ctx("Attach", "container", &request.container_id),
                self.deadline(),
                client.attach(req),
            )
            .await?
            .url)
    }

    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        let mut client = self.runtime.clone();
        let req = self.request(
            cri::PortForwardRequest {
                pod_sandbox_id: sandbox_id.to_string(),
                port: ports.to_vec(),
            },
            self.deadline(),
        );
        Ok(self
            .call(
                ctx("PortForward", "sandbox", sandbox_id),
                self.deadline(),
                client.port_forward(req),
            )
            .await?
            .url)
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

    #[test]
    fn status_codes_table() {
        use tonic::{Code, Status};
        type Check = fn(&RuntimeError) -> bool;
        let cases: Vec<(Status, Check)> = vec![
            (
                Status::not_found("x"),
                |e| matches!(e, RuntimeError::NotFound { kind: "container", id } if id == "c1"),
            ),
            (Status::unavailable("down"), |e| {
                matches!(e, RuntimeError::Unavailable(_))
            }),
            (
                Status::invalid_argument("bad"),
                |e| matches!(e, RuntimeError::InvalidInput { message, .. } if message == "bad"),
            ),
            (Status::deadline_exceeded("slow"), |e| {
                matches!(
                    e,
                    RuntimeError::DeadlineExceeded {
                        operation: "CreateContainer"
                    }
                )
            }),
            (Status::unimplemented("no"), |e| {
                matches!(
                    e,
                    RuntimeError::Unimplemented {
                        operation: "CreateContainer"
                    }
                )
            }),
            (Status::new(Code::Unknown, "transport error"), |e| {
                matches!(e, RuntimeError::Unavailable(_))
            }),
            (
                Status::new(Code::Cancelled, "operation was canceled"),
                |e| matches!(e, RuntimeError::Unavailable(_)),
            ),
            (Status::new(Code::Unknown, "image is broken"), |e| {
                matches!(e, RuntimeError::OperationFailed { .. })
            }),
            (
                Status::internal("boom"),
                |e| matches!(e, RuntimeError::OperationFailed { operation: "CreateContainer", message } if message == "boom"),
            ),
        ];
        for (status, check) in cases {
            let err = map_status("CreateContainer", "container", "c1", &status);
            assert!(check(&err), "{status:?} -> {err:?}");
        }
    }

    #[test]
    fn timeouts_round_up() {
        assert_eq!(whole_seconds_up(Duration::ZERO), 0);
        assert_eq!(whole_seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds_up(Duration::from_secs(30)), 30);
        assert_eq!(whole_seconds_up(Duration::from_millis(30_500)), 31);
    }
}
