//! The `PodResourcesLister` service over a [`PodResourcesHost`], and the unix socket it is
//! served on.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet_core::metrics::Metrics;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use tracing::{debug, error, info, warn};

use super::api::pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer};
use super::api::{
    AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices, ContainerMemory,
    ContainerResources, GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest,
    ListPodResourcesResponse, NumaNode, PodResources, TopologyInfo,
};
use super::{PodResourcesHost, SERVER_API_VERSION};

/// How long the server may take to finish its open calls after shutdown before they are
/// abandoned.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Why the pod resources socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// The socket's directory could not be made.
    #[error("creating the pod resources socket directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file left at the socket's path could not be removed.
    #[error("removing the stale pod resources socket {path}: {source}")]
    RemoveStale {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The socket could not be bound.
    #[error("listening on the pod resources socket {path}: {source}")]
    Bind {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The `PodResourcesLister` service (Go's `v1PodResourcesServer`): see the [module
/// docs](super) for what each call answers.
#[derive(Clone)]
pub struct PodResourcesService {
    host: Arc<dyn PodResourcesHost>,
    metrics: &'static Metrics,
}

impl fmt::Debug for PodResourcesService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodResourcesService")
            .finish_non_exhaustive()
    }
}

impl PodResourcesService {
    /// The service over `host`, counting its calls in the kubelet's metrics
    /// ([`kubelet_core::metrics::global`]).
    pub fn new(host: Arc<dyn PodResourcesHost>) -> PodResourcesService {
        PodResourcesService {
            host,
            metrics: kubelet_core::metrics::global(),
        }
    }

    /// Counts the calls in `metrics` instead of the kubelet's (tests).
    pub fn with_metrics(mut self, metrics: &'static Metrics) -> PodResourcesService {
        self.metrics = metrics;
        self
    }

    fn count(&self) {
        self.metrics
            .pod_resources_endpoint_requests
            .inc(SERVER_API_VERSION);
    }

    /// A pod with the resources of each of its app containers.
    fn pod_resources(&self, pod: &Pod) -> PodResources {
        let uid = kubelet_core::pod::uid(pod);
        let containers = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| ContainerResources {
                name: c.name.clone(),
                devices: assigned_devices(self.host.container_devices(uid, &c.name)),
                cpu_ids: self.host.container_cpus(uid, &c.name),
                memory: container_memory(self.host.container_memory(uid, &c.name)),
                dynamic_resources: Vec::new(),
            })
            .collect();
        PodResources {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            containers,
        }
    }
}

/// The memory manager's blocks as Go's `containerMemoryFromBlock` reports them: the
/// topology always present, its nodes those of the block.
fn container_memory(blocks: Vec<(String, u64, Vec<i64>)>) -> Vec<ContainerMemory> {
    blocks
        .into_iter()
        .map(|(memory_type, size, nodes)| ContainerMemory {
            memory_type,
            size,
            topology: Some(TopologyInfo {
                nodes: nodes.into_iter().map(|id| NumaNode { id }).collect(),
            }),
        })
        .collect()
}

/// One entry per resource and NUMA node, that node as its topology (Go's
/// `getContainerDevices`).
fn assigned_devices(assigned: Vec<(String, BTreeMap<i64, Vec<String>>)>) -> Vec<ContainerDevices> {
    assigned
        .into_iter()
        .flat_map(|(resource, per_node)| {
            per_node
                .into_iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(move |(node, ids)| ContainerDevices {
                    resource_name: resource.clone(),
                    device_ids: ids,
                    topology: Some(on_node(node)),
                })
        })
        .collect()
}

/// One entry per device and NUMA node; a device without topology gets one entry without
/// (Go's `containerDevicesFromResourceDeviceInstances`).
fn allocatable_devices(devices: Vec<(String, String, Vec<i64>)>) -> Vec<ContainerDevices> {
    let mut out = Vec::with_capacity(devices.len());
    for (resource, id, nodes) in devices {
        if nodes.is_empty() {
            out.push(ContainerDevices {
                resource_name: resource,
                device_ids: vec![id],
                topology: None,
            });
            continue;
        }
        for node in nodes {
            out.push(ContainerDevices {
                resource_name: resource.clone(),
                device_ids: vec![id.clone()],
                topology: Some(on_node(node)),
            });
        }
    }
    out
}

fn on_node(id: i64) -> TopologyInfo {
    TopologyInfo {
        nodes: vec![NumaNode { id }],
    }
}

#[tonic::async_trait]
impl PodResourcesLister for PodResourcesService {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        self.count();
        let mut pods = self.host.active_pods();
        pods.sort_by_key(|p| kubelet_core::pod::full_name(p));
        let pod_resources: Vec<PodResources> = pods.iter().map(|p| self.pod_resources(p)).collect();
        debug!(pods = pod_resources.len(), "pod resources: List");
        Ok(Response::new(ListPodResourcesResponse { pod_resources }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        self.count();
        let devices = allocatable_devices(self.host.allocatable_devices());
        let cpu_ids = self.host.allocatable_cpus();
        debug!(
            devices = devices.len(),
            cpus = cpu_ids.len(),
            "pod resources: GetAllocatableResources"
        );
        Ok(Response::new(AllocatableResourcesResponse {
            devices,
            cpu_ids,
            memory: container_memory(self.host.allocatable_memory()),
        }))
    }

    async fn get(
        &self,
        request: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        self.count();
        let GetPodResourcesRequest {
            pod_name,
            pod_namespace,
        } = request.into_inner();
        let Some(pod) = self.host.find_pod(&pod_namespace, &pod_name) else {
            debug!(pod = %pod_name, namespace = %pod_namespace, "pod resources: Get of an unknown pod");
            // Go answers with a plain error: gRPC's Unknown code.
            return Err(Status::unknown(format!(
                "pod {pod_name} in namespace {pod_namespace} not found"
            )));
        };
        Ok(Response::new(GetPodResourcesResponse {
            pod_resources: Some(self.pod_resources(&pod)),
        }))
    }
}

/// The bound pod resources socket, ready to [`serve`](Self::serve).
#[derive(Debug)]
pub struct PodResourcesListener {
    listener: UnixListener,
    socket: PathBuf,
}

impl PodResourcesListener {
    /// Makes the socket's directory (mode 0750 when it is new, as Go's kubelet), removes
    /// whatever a previous kubelet left at `socket`, and binds it.
    pub async fn bind(socket: &Path) -> Result<PodResourcesListener, PodResourcesError> {
        if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(dir)
                .await
                .map_err(|source| PodResourcesError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        match tokio::fs::remove_file(socket).await {
            Ok(()) => {
                debug!(socket = %socket.display(), "Removed the stale pod resources socket")
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(PodResourcesError::RemoveStale {
                    path: socket.to_path_buf(),
                    source,
                })
            }
        }
        let listener = UnixListener::bind(socket).map_err(|source| PodResourcesError::Bind {
            path: socket.to_path_buf(),
            source,
        })?;
        Ok(PodResourcesListener {
            listener,
            socket: socket.to_path_buf(),
        })
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Serves `service` until `shutdown`, then removes the socket. Calls still open 5 s
    /// after the shutdown are abandoned.
    pub async fn serve(self, service: PodResourcesService, shutdown: CancellationToken) {
        let PodResourcesListener { listener, socket } = self;
        let tasks = TaskTracker::new();
        // Ends the accept loop and the connection relays: at shutdown, or when the server
        // stops on its own.
        let relays = shutdown.child_token();
        info!(socket = %socket.display(), "Serving the pod resources API");
        let server = tonic::transport::Server::builder()
            .add_service(PodResourcesListerServer::new(service))
            .serve_with_incoming_shutdown(
                kubelet_core::grpc_uds::incoming(listener, relays.clone(), tasks.clone()),
                shutdown.clone().cancelled_owned(),
            );
        let grace = async {
            shutdown.cancelled().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            result = server => match result {
                Ok(()) => debug!(socket = %socket.display(), "Pod resources server stopped"),
                Err(e) => error!(socket = %socket.display(), error = %e, "Pod resources server failed"),
            },
            () = grace => warn!(
                socket = %socket.display(),
                grace_seconds = SHUTDOWN_GRACE.as_secs(),
                "Pod resources server did not stop in time; abandoning its connections"
            ),
        }
        relays.cancel();
        tasks.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
            .await
            .is_err()
        {
            warn!(socket = %socket.display(), "Pod resources connection relays did not stop in time");
        }
        match tokio::fs::remove_file(&socket).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                warn!(socket = %socket.display(), error = %e, "Failed to remove the pod resources socket")
            }
        }
    }
}
