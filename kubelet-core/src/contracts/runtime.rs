//! The [`ContainerRuntime`] contract: the runtime operations the pod lifecycle needs.
//!
//! The trait is shaped after CRI v1 so that a CRI backend maps onto it call for call
//! (`RunPodSandbox` ↔ [`ContainerRuntime::run_pod_sandbox`], …), while another backend (a VM
//! manager, a process runner, the simulator behind the `testing` feature) can implement it
//! without knowing anything about the lifecycle. The engine decides *when* to call what; a
//! backend only carries the call out.
//!
//! Requests carry the Kubernetes [`Pod`] and
//! [`Container`](k8s_openapi::api::core::v1::Container) they are for plus everything the
//! engine resolved (restart attempt, spec hash, cgroup parent, log paths, expanded command and
//! environment, mounts), so a backend never re-derives lifecycle decisions.
//!
//! # One trait: a required core, defaults for everything else
//!
//! [`ContainerRuntime`] is one object-safe trait (the engine holds an
//! `Arc<dyn ContainerRuntime>`; wrappers such as
//! [`InstrumentedRuntime`](crate::metrics::InstrumentedRuntime) forward it whole). Its methods
//! come in three groups:
//!
//! 1. **The core** — required, nine methods: the lifecycle cannot run without listing,
//!    creating, stopping and removing sandboxes and containers, and a container's detailed
//!    status (its exit code drives the restart policy): [`list_pod_sandboxes`],
//!    [`run_pod_sandbox`], [`stop_pod_sandbox`], [`remove_pod_sandbox`], [`list_containers`],
//!    [`container_status`], [`create_container`], [`stop_container`], [`remove_container`].
//! 2. **Core with a sensible default** — a backend overrides them when it knows better:
//!    [`pod_sandbox_status`] (default: the listed sandbox, sharing the node's network, no pod
//!    IP of its own), [`start_container`] (default: nothing to do — for backends whose
//!    `create_container` already starts the container), [`version`] (an `unknown` runtime),
//!    [`status`] (runtime and network ready), [`image_status`] (every image is present, its
//!    reference is its id) and [`pull_image`] (nothing to pull; the reference is the image).
//! 3. **Optional capabilities** — default [`RuntimeError::Unimplemented`], which every caller
//!    treats as "not available here" (an exec probe on a backend without [`exec_sync`] fails
//!    with a message saying so; the node status lists no images without [`list_images`]):
//!    [`exec_sync`], [`exec_url`], [`attach_url`], [`port_forward_url`], [`list_images`],
//!    [`remove_image`], [`image_fs_info`], [`container_stats`] ([`list_container_stats`]
//!    defaults to it, container by container), [`reopen_container_log`] and
//!    [`container_events`].
//!
//! Why not a core trait plus capability traits: a capability trait would have to be
//! discovered through the `dyn ContainerRuntime` the engine holds (an `as_exec()`-style
//! accessor per capability), every wrapper would have to re-expose each accessor, and CRI
//! decides some capabilities only at run time (`GetContainerEvents` exists in containerd 1.7,
//! not in 1.6). "The call answers `Unimplemented`" covers both cases with one rule, so
//! capability detection is simply calling.
//!
//! A wrapper (metrics, scoping, fault injection) must forward **every** method, the defaulted
//! ones included: a wrapper that leaves a method to its default silently replaces the wrapped
//! backend's answer with the default one.
//!
//! A complete backend in under 30 lines of trait code is `examples/custom_backend.rs`; the
//! `mock` feature generates `MockContainerRuntime` (mockall) for unit tests of code that
//! drives a runtime.
//!
//! [`list_pod_sandboxes`]: ContainerRuntime::list_pod_sandboxes
//! [`run_pod_sandbox`]: ContainerRuntime::run_pod_sandbox
//! [`stop_pod_sandbox`]: ContainerRuntime::stop_pod_sandbox
//! [`remove_pod_sandbox`]: ContainerRuntime::remove_pod_sandbox
//! [`list_containers`]: ContainerRuntime::list_containers
//! [`container_status`]: ContainerRuntime::container_status
//! [`create_container`]: ContainerRuntime::create_container
//! [`stop_container`]: ContainerRuntime::stop_container
//! [`remove_container`]: ContainerRuntime::remove_container
//! [`pod_sandbox_status`]: ContainerRuntime::pod_sandbox_status
//! [`start_container`]: ContainerRuntime::start_container
//! [`version`]: ContainerRuntime::version
//! [`status`]: ContainerRuntime::status
//! [`image_status`]: ContainerRuntime::image_status
//! [`pull_image`]: ContainerRuntime::pull_image
//! [`exec_sync`]: ContainerRuntime::exec_sync
//! [`exec_url`]: ContainerRuntime::exec_url
//! [`attach_url`]: ContainerRuntime::attach_url
//! [`port_forward_url`]: ContainerRuntime::port_forward_url
//! [`list_images`]: ContainerRuntime::list_images
//! [`remove_image`]: ContainerRuntime::remove_image
//! [`image_fs_info`]: ContainerRuntime::image_fs_info
//! [`container_stats`]: ContainerRuntime::container_stats
//! [`list_container_stats`]: ContainerRuntime::list_container_stats
//! [`reopen_container_log`]: ContainerRuntime::reopen_container_log
//! [`container_events`]: ContainerRuntime::container_events

mod container;
mod events;
mod image;
mod sandbox;
mod stats;
mod streaming;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;

pub use container::{
    ContainerConfig, ContainerKind, ContainerState, ContainerStatus, ContainerSummary,
    DeviceSettings, EnvVar, Mount, MountPropagation, ResourcesUpdate,
};
pub use events::{ContainerEvent, ContainerEventKind, ContainerEventStream};
pub use image::{ImageInfo, PullImageRequest, RegistryAuth};
pub use sandbox::{DnsConfig, SandboxConfig, SandboxState, SandboxStatus, SandboxSummary};
pub use stats::{ContainerStats, CpuUsage, FilesystemUsage, ImageFsInfo, MemoryUsage};
pub use streaming::{AttachRequest, ExecOutput, ExecRequest};

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
        /// The operation asked for (the CRI name, e.g. "ExecSync").
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
    /// The answer exceeds the message size limit between kubelet and runtime (a listing of
    /// too many or too large objects); a narrower request (one pod's objects) may still work.
    #[error("{operation}: the runtime's answer is too large: {message}")]
    TooLarge {
        /// The operation, e.g. "ListPodSandbox".
        operation: &'static str,
        /// The transport's explanation.
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

impl RuntimeError {
    /// Whether this is the answer of a backend without the capability asked for.
    pub fn is_unimplemented(&self) -> bool {
        matches!(self, RuntimeError::Unimplemented { .. })
    }
}

/// Result alias for runtime operations.
pub type RuntimeResult<T> = Result<T, RuntimeError>;

fn unimplemented<T>(operation: &'static str) -> RuntimeResult<T> {
    Err(RuntimeError::Unimplemented { operation })
}

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
    /// The identity of `pod`.
    pub fn of(pod: &Pod) -> PodRef {
        PodRef {
            uid: crate::pod::uid(pod).to_string(),
            name: crate::pod::name(pod).to_string(),
            namespace: crate::pod::namespace(pod).to_string(),
        }
    }

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
    /// The runtime handlers the runtime reports (CRI `runtime_handlers`; empty when the
    /// runtime does not say, as containerd 1.6 and 1.7 do not).
    pub handlers: Vec<RuntimeHandler>,
    /// CRI `RuntimeFeatures.supplemental_groups_policy` (`None`: not reported).
    pub supplemental_groups_policy: Option<bool>,
}

/// One runtime handler (a RuntimeClass `handler`) and what it supports, from CRI `Status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeHandler {
    /// Handler name; empty is the default handler.
    pub name: String,
    /// It supports recursive read-only mounts.
    pub recursive_read_only_mounts: bool,
    /// It supports user namespaces as Kubernetes uses them (`hostUsers: false`).
    pub user_namespaces: bool,
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
    /// Whether an object of `pod` passes the filter.
    pub fn matches(&self, pod: &PodRef) -> bool {
        self.pod_uid.as_deref().is_none_or(|uid| uid == pod.uid)
    }
}

/// Labels a backend attaches to objects; free-form for backends that need more than [`PodRef`].
pub type Labels = BTreeMap<String, String>;

/// The runtime operations the pod lifecycle needs: nine required methods, the rest with
/// defaults. See the module docs for the three groups and what the defaults answer.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait ContainerRuntime: Send + Sync {
    // ----- The core (required) -----

    /// Sandboxes created by the kubelet, running and exited, narrowed by `filter`.
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>>;
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
    /// Detailed status of a container the caller has just listed (`listed` comes from
    /// [`list_containers`](Self::list_containers)): a runtime whose status call lacks
    /// something the listing has (CRI's `ContainerStatus` does not name the sandbox) takes it
    /// from `listed` instead of asking again.
    ///
    /// Default: [`container_status`](Self::container_status) of `listed.id`.
    async fn container_status_listed(
        &self,
        listed: &ContainerSummary,
    ) -> RuntimeResult<ContainerStatus> {
        self.container_status(&listed.id).await
    }
    /// Creates a container in a sandbox; returns its id.
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String>;
    /// Stops a container: SIGTERM, then SIGKILL after `timeout`. Stopping an exited one succeeds.
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()>;
    /// Removes a container. Removing a missing container succeeds.
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()>;

    // ----- The core with defaults -----

    /// Detailed status of one sandbox.
    ///
    /// Default: the sandbox as [`list_pod_sandboxes`](Self::list_pod_sandboxes) lists it
    /// (`NotFound` when it does not), sharing the node's network (`host_network`, no pod IP of
    /// its own) — right for backends without a pod network; backends with one override it.
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        let listed = self.list_pod_sandboxes(&ListFilter::all()).await?;
        let s = listed
            .into_iter()
            .find(|s| s.id == sandbox_id)
            .ok_or_else(|| RuntimeError::NotFound {
                kind: "sandbox",
                id: sandbox_id.to_string(),
            })?;
        Ok(SandboxStatus {
            id: s.id,
            pod: s.pod,
            attempt: s.attempt,
            state: s.state,
            created_at: s.created_at,
            ip: None,
            additional_ips: Vec::new(),
            host_network: true,
        })
    }
    /// Starts a created container.
    ///
    /// Default: succeeds without doing anything, for backends whose
    /// [`create_container`](Self::create_container) already starts the container.
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        let _ = container_id;
        Ok(())
    }
    /// Runtime name and API version (CRI `Version`). The name prefixes container ids in pod
    /// statuses (`<name>://<id>`).
    ///
    /// Default: runtime `unknown`, version `0.0.0`, API `v1`.
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        Ok(RuntimeVersion {
            runtime_name: "unknown".into(),
            runtime_version: "0.0.0".into(),
            runtime_api_version: "v1".into(),
        })
    }
    /// Runtime and network readiness (CRI `Status`).
    ///
    /// Default: both ready.
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        Ok(RuntimeStatus {
            runtime_ready: true,
            network_ready: true,
            ..Default::default()
        })
    }
    /// Looks an image up; `None` when it is not present.
    ///
    /// Default: every image is present, its id is its reference (for backends that have no
    /// images, or fetch them as part of `create_container`).
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        Ok(Some(ImageInfo {
            id: image.to_string(),
            repo_tags: vec![image.to_string()],
            ..ImageInfo::default()
        }))
    }
    /// Pulls an image; returns the image reference (id or digest).
    ///
    /// Default: nothing to pull; the reference is the image as written.
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        Ok(request.image.clone())
    }

    // ----- Optional capabilities (default: Unimplemented) -----

    /// Lists images (node status, image garbage collection).
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        unimplemented("ListImages")
    }
    /// Removes an image (image garbage collection).
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let _ = image;
        unimplemented("RemoveImage")
    }
    /// The filesystems images (and container layers) are stored on, with their use (CRI
    /// `ImageFsInfo`; image garbage collection and eviction).
    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        unimplemented("ImageFsInfo")
    }

    /// Changes a created or running container's Linux resources (CRI
    /// `UpdateContainerResources`); what `update` leaves `None` stays as it is. The CPU
    /// manager moves containers between CPU sets with it.
    async fn update_container_resources(
        &self,
        container_id: &str,
        update: &ResourcesUpdate,
    ) -> RuntimeResult<()> {
        let _ = (container_id, update);
        unimplemented("UpdateContainerResources")
    }

    /// Runs a command in a container and waits for it (or for `timeout`; zero: no timeout).
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        let _ = (container_id, cmd, timeout);
        unimplemented("ExecSync")
    }
    /// URL of the runtime's streaming server for an exec session.
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        let _ = request;
        unimplemented("Exec")
    }
    /// URL of the runtime's streaming server for an attach session.
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        let _ = request;
        unimplemented("Attach")
    }
    /// URL of the runtime's streaming server for port forwarding into a sandbox.
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        let _ = (sandbox_id, ports);
        unimplemented("PortForward")
    }

    /// Resource usage of one container (CRI `ContainerStats`).
    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        let _ = container_id;
        unimplemented("ContainerStats")
    }
    /// Resource usage of the containers `filter` selects (CRI `ListContainerStats`).
    ///
    /// Default: [`container_stats`](Self::container_stats) of every listed container
    /// (containers removed in between are skipped), so it is unimplemented exactly when that
    /// is — and trivially empty when there are no containers.
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        let containers = self.list_containers(filter).await?;
        let mut out = Vec::with_capacity(containers.len());
        for c in containers {
            match self.container_stats(&c.id).await {
                Ok(s) => out.push(s),
                Err(RuntimeError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
    /// Makes the runtime reopen a container's log file, after the kubelet rotated it (CRI
    /// `ReopenContainerLog`). Fails for a container that is not running.
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        let _ = container_id;
        unimplemented("ReopenContainerLog")
    }
    /// A stream of container lifecycle events (CRI `GetContainerEvents`; see
    /// [`ContainerEventStream`] for its guarantees). A runtime without events answers
    /// `Unimplemented` here, not on the stream.
    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        unimplemented("GetContainerEvents")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    /// A backend with only the required core: one sandbox, no containers.
    struct Core(Mutex<Vec<SandboxSummary>>);

    #[async_trait]
    impl ContainerRuntime for Core {
        async fn list_pod_sandboxes(&self, f: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
            let all = self.0.lock().unwrap().clone();
            Ok(all.into_iter().filter(|s| f.matches(&s.pod)).collect())
        }
        async fn run_pod_sandbox(&self, _: &SandboxConfig) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn list_containers(&self, _: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
            Ok(Vec::new())
        }
        async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
            Err(RuntimeError::NotFound {
                kind: "container",
                id: id.into(),
            })
        }
        async fn create_container(
            &self,
            _: &str,
            _: &ContainerConfig,
            _: &SandboxConfig,
        ) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_container(&self, _: &str, _: Duration) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_container(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
    }

    fn core() -> Core {
        let config = SandboxConfig {
            pod: Arc::new(pod("web", "uid-1", vec![])),
            attempt: 2,
            hostname: "web".into(),
            log_directory: PathBuf::from("/var/log/pods/x"),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        };
        Core(Mutex::new(vec![SandboxSummary::new("sb-1", &config)]))
    }

    #[tokio::test]
    async fn defaults_of_the_core() {
        let rt = core();
        let s = rt.pod_sandbox_status("sb-1").await.unwrap();
        assert_eq!((s.id.as_str(), s.attempt), ("sb-1", 2));
        assert_eq!(s.pod.uid, "uid-1");
        assert_eq!(s.state, SandboxState::Ready);
        assert!(s.host_network && s.ip.is_none());
        assert!(matches!(
            rt.pod_sandbox_status("nope").await,
            Err(RuntimeError::NotFound {
                kind: "sandbox",
                ..
            })
        ));
        rt.start_container("c").await.unwrap();
        let st = rt.status().await.unwrap();
        assert!(st.runtime_ready && st.network_ready);
        assert_eq!(rt.version().await.unwrap().runtime_name, "unknown");
        let img = rt.image_status("busybox").await.unwrap().unwrap();
        assert_eq!(img.id, "busybox");
        let pulled = rt
            .pull_image(&PullImageRequest {
                image: "busybox".into(),
                auth: None,
                sandbox: None,
            })
            .await
            .unwrap();
        assert_eq!(pulled, "busybox");
    }

    #[tokio::test]
    async fn optional_capabilities_answer_unimplemented() {
        let rt = core();
        let ops: Vec<(&str, RuntimeError)> = vec![
            ("ListImages", rt.list_images().await.unwrap_err()),
            ("RemoveImage", rt.remove_image("x").await.unwrap_err()),
            ("ImageFsInfo", rt.image_fs_info().await.unwrap_err()),
            (
                "ExecSync",
                rt.exec_sync("c", &[], Duration::ZERO).await.unwrap_err(),
            ),
            (
                "Exec",
                rt.exec_url(&ExecRequest::default()).await.unwrap_err(),
            ),
            (
                "Attach",
                rt.attach_url(&AttachRequest::default()).await.unwrap_err(),
            ),
            (
                "PortForward",
                rt.port_forward_url("s", &[80]).await.unwrap_err(),
            ),
            ("ContainerStats", rt.container_stats("c").await.unwrap_err()),
            (
                "ReopenContainerLog",
                rt.reopen_container_log("c").await.unwrap_err(),
            ),
            (
                "GetContainerEvents",
                rt.container_events().await.err().unwrap(),
            ),
        ];
        for (op, err) in ops {
            assert!(err.is_unimplemented(), "{op}: {err:?}");
            assert_eq!(err, RuntimeError::Unimplemented { operation: op });
            assert_eq!(
                err.to_string(),
                format!("{op} is not implemented by this runtime")
            );
        }
        // No containers: the derived listing has nothing to ask about.
        assert!(rt
            .list_container_stats(&ListFilter::all())
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn an_exec_probe_without_exec_sync_fails_saying_why() {
        use crate::prober::probe::{run_exec, Outcome, Target};
        let container = k8s_openapi::api::core::v1::Container::default();
        let action = k8s_openapi::api::core::v1::ExecAction {
            command: Some(vec!["cat".into(), "/tmp/healthy".into()]),
        };
        let target = Target {
            container_id: "c1",
            container: &container,
            pod_ip: "",
        };
        match run_exec(&core(), target, &action, Duration::from_secs(1)).await {
            Outcome::Failure(m) => assert_eq!(
                m,
                "command \"cat /tmp/healthy\" cannot run: ExecSync is not implemented by this runtime"
            ),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn list_filter_matches() {
        let pod = PodRef {
            uid: "u1".into(),
            ..PodRef::default()
        };
        assert!(ListFilter::all().matches(&pod));
        assert!(ListFilter::pod("u1").matches(&pod));
        assert!(!ListFilter::pod("u2").matches(&pod));
    }

    #[test]
    fn container_status_transitions() {
        let p = Arc::new(pod("web", "uid-1", vec![]));
        let sandbox = SandboxConfig {
            pod: p.clone(),
            attempt: 0,
            hostname: "web".into(),
            log_directory: PathBuf::from("/var/log/pods/x"),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        };
        let config = ContainerConfig {
            pod: p,
            container: k8s_openapi::api::core::v1::Container {
                name: "app".into(),
                image: Some("busybox".into()),
                ..Default::default()
            },
            kind: ContainerKind::Regular,
            restart_count: 1,
            hash: 7,
            image_ref: "sha256:b".into(),
            command: vec![],
            args: vec![],
            env: vec![],
            mounts: vec![],
            log_path: PathBuf::from("app/1.log"),
            cpuset_cpus: None,
            cpuset_mems: None,
            devices: Default::default(),
            extra_supplemental_groups: Vec::new(),
        };
        let mut c = ContainerStatus::new("c1", "sb-1", &config, &sandbox);
        assert_eq!(c.summary.state, ContainerState::Created);
        assert_eq!((c.summary.attempt, c.summary.hash), (1, 7));
        assert_eq!(c.summary.image, "busybox");
        assert_eq!(
            c.log_path.as_deref(),
            Some(std::path::Path::new("/var/log/pods/x/app/1.log"))
        );
        c.set_running();
        assert_eq!(c.summary.state, ContainerState::Running);
        assert!(c.started_at > 0);
        for (code, oom, reason) in [
            (0, false, "Completed"),
            (3, false, "Error"),
            (137, true, "OOMKilled"),
        ] {
            c.set_exited(42, code, oom);
            assert_eq!(c.summary.state, ContainerState::Exited);
            assert_eq!(
                (c.finished_at, c.exit_code, c.reason.as_str()),
                (42, code, reason)
            );
        }
    }
}
