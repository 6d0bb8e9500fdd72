//! The pod resources API, `podresources/v1` (Go's `pkg/kubelet/apis/podresources`): a
//! read-only gRPC service on the unix socket `<root-dir>/pod-resources/kubelet.sock` that
//! tells node agents (GPU exporters, topology exporters) which devices and CPUs the kubelet
//! gave each container, and what the node can hand out at all.
//!
//! | call | answers |
//! |---|---|
//! | `List` | every active pod (not `Succeeded` / `Failed`), each app container (`spec.containers`; not init or ephemeral ones) with its devices (one entry per resource and NUMA node) and its CPUs (its exclusive set, else the shared pool; none under the CPU manager's `none` policy) |
//! | `GetAllocatableResources` | every healthy device (one entry per device and NUMA node; no topology when the plugin gave none) and the CPUs the CPU manager may hand out (all but the reserved ones under `static`, none under `none`) |
//! | `Get` | one pod by namespace and name, as `List` reports it; an unknown pod is an error with Go's message `pod <name> in namespace <namespace> not found` |
//!
//! Dynamic resources are always empty. Every call counts
//! in `kubelet_pod_resources_endpoint_requests_total{server_api_version="v1"}`.
//!
//! The service reads the kubelet through the narrow [`PodResourcesHost`] trait, which
//! [`KubeletHandle`](kubelet_core::KubeletHandle) and [`KubeletHost`](crate::KubeletHost)
//! implement.
//!
//! # The socket's life
//! | step | what |
//! |---|---|
//! | [`PodResourcesListener::bind`] | makes the directory (mode 0750 when new), removes a stale `kubelet.sock`, binds it |
//! | [`PodResourcesListener::serve`] | serves [`PodResourcesService`] (each connection relayed by [`kubelet_core::grpc_uds`], so old grpc-go clients sending the socket path as `:authority` are served) until the shutdown token, then removes the socket |
//!
//! ```no_run
//! # async fn example(handle: kubelet_core::KubeletHandle) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kubelet_server::pod_resources::{socket_path, PodResourcesListener, PodResourcesService};
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let listener = PodResourcesListener::bind(&socket_path("/var/lib/kubelet".as_ref())).await?;
//! let service = PodResourcesService::new(Arc::new(handle));
//! tokio::spawn(listener.serve(service, shutdown.clone()));
//! # Ok(())
//! # }
//! ```

pub mod api;
mod server;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

pub use server::{PodResourcesError, PodResourcesListener, PodResourcesService};

/// The socket directory under the kubelet's root directory (Go's `podResourcesDir`).
pub const SOCKET_DIR: &str = "pod-resources";
/// The socket's name in [`SOCKET_DIR`] (Go's `podResourcesSocketName`).
pub const SOCKET_NAME: &str = "kubelet.sock";
/// The API version the server reports in its metric.
pub const SERVER_API_VERSION: &str = "v1";

/// The socket of a kubelet whose root directory is `root_dir`:
/// `<root_dir>/pod-resources/kubelet.sock`.
pub fn socket_path(root_dir: &Path) -> PathBuf {
    root_dir.join(SOCKET_DIR).join(SOCKET_NAME)
}

/// What the pod resources server reads from the kubelet (Go's `PodsProvider`,
/// `DevicesProvider` and `CPUsProvider`).
pub trait PodResourcesHost: Send + Sync + 'static {
    /// The pods `List` reports: every pod the kubelet runs that has not finished.
    fn active_pods(&self) -> Vec<Arc<Pod>>;
    /// The pod `Get` reports: the one named `namespace/name` the kubelet knows, finished or
    /// not.
    fn find_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// The devices the device manager gave a container of pod `uid`: resource → NUMA node →
    /// device ids.
    fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, BTreeMap<i64, Vec<String>>)>;
    /// The CPUs a container of pod `uid` runs on as the CPU manager sees it (its exclusive
    /// set, else the shared pool), ascending; empty when the CPU manager assigns none.
    fn container_cpus(&self, uid: &str, container: &str) -> Vec<i64>;
    /// Every healthy device: `(resource, device id, NUMA nodes)`, the NUMA nodes empty when
    /// its plugin gave none.
    fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)>;
    /// The CPUs the CPU manager may hand out, ascending.
    fn allocatable_cpus(&self) -> Vec<i64>;
    /// The memory the memory manager pinned for a container of pod `uid`: its blocks
    /// `(resource, bytes, NUMA nodes)`; empty when it pins none.
    fn container_memory(&self, uid: &str, container: &str) -> Vec<(String, u64, Vec<i64>)>;
    /// What the memory manager may pin: `(resource, bytes, NUMA node)` blocks.
    fn allocatable_memory(&self) -> Vec<(String, u64, Vec<i64>)>;
}
