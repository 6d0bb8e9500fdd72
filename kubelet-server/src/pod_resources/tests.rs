//! The pod resources API over a real unix socket in a temporary directory, against a fake
//! host, with a tonic client.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::metrics::Metrics;
use kubelet_core::testing::{ContainerBuilder, PodBuilder};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, Endpoint, Uri};

use super::api::pod_resources_lister_client::PodResourcesListerClient;
use super::api::{
    AllocatableResourcesRequest, ContainerDevices, ContainerMemory, GetPodResourcesRequest,
    ListPodResourcesRequest, NumaNode, TopologyInfo,
};
use super::*;

/// The longest any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// A container's devices: resource → NUMA node → ids.
type Assigned = Vec<(String, BTreeMap<i64, Vec<String>>)>;
type MemoryBlocks = Vec<(String, u64, Vec<i64>)>;

/// Pods (with whether they finished) and what the managers hold, keyed by (uid, container).
#[derive(Default)]
struct FakeHost {
    pods: Vec<(Arc<Pod>, bool)>,
    devices: BTreeMap<(String, String), Assigned>,
    cpus: BTreeMap<(String, String), Vec<i64>>,
    allocatable_devices: Vec<(String, String, Vec<i64>)>,
    allocatable_cpus: Vec<i64>,
    memory: BTreeMap<(String, String), MemoryBlocks>,
    allocatable_memory: MemoryBlocks,
}

impl PodResourcesHost for FakeHost {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        self.pods
            .iter()
            .filter(|(_, finished)| !finished)
            .map(|(p, _)| p.clone())
            .collect()
    }
    fn find_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods
            .iter()
            .map(|(p, _)| p)
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned()
    }
    fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, BTreeMap<i64, Vec<String>>)> {
        self.devices
            .get(&(uid.to_string(), container.to_string()))
            .cloned()
            .unwrap_or_default()
    }
    fn container_cpus(&self, uid: &str, container: &str) -> Vec<i64> {
        self.cpus
            .get(&(uid.to_string(), container.to_string()))
            .cloned()
            .unwrap_or_default()
    }
    fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)> {
        self.allocatable_devices.clone()
    }
    fn container_memory(&self, uid: &str, container: &str) -> Vec<(String, u64, Vec<i64>)> {
        self.memory
            .get(&(uid.to_string(), container.to_string()))
            .cloned()
            .unwrap_or_default()
    }
    fn allocatable_memory(&self) -> Vec<(String, u64, Vec<i64>)> {
        self.allocatable_memory.clone()
    }
    fn allocatable_cpus(&self) -> Vec<i64> {
        self.allocatable_cpus.clone()
    }
}

const GPU: &str = "example.com/gpu";

fn key(uid: &str, container: &str) -> (String, String) {
    (uid.to_string(), container.to_string())
}

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn on(node: i64) -> Option<TopologyInfo> {
    Some(TopologyInfo {
        nodes: vec![NumaNode { id: node }],
    })
}

/// `gpu-pod` (an init container, two app containers, an ephemeral one) with GPUs on two
/// NUMA nodes and exclusive CPUs, `web` sharing the pool, `done` finished.
fn host() -> FakeHost {
    let gpu_pod = PodBuilder::new("gpu-pod", "uid-gpu")
        .namespace("ml")
        .init_container(ContainerBuilder::new("setup", "img").build())
        .container(ContainerBuilder::new("trainer", "img").build())
        .container(ContainerBuilder::new("sidecar", "img").build())
        .spec(|s| {
            s.ephemeral_containers = Some(vec![k8s_openapi::api::core::v1::EphemeralContainer {
                name: "debug".into(),
                ..Default::default()
            }])
        })
        .build();
    let web = PodBuilder::new("web", "uid-web")
        .container(ContainerBuilder::new("nginx", "img").build())
        .build();
    let done = PodBuilder::new("done", "uid-done")
        .container(ContainerBuilder::new("job", "img").build())
        .build();
    let mut h = FakeHost {
        pods: vec![
            (Arc::new(web), false),
            (Arc::new(gpu_pod), false),
            (Arc::new(done), true),
        ],
        allocatable_devices: vec![
            (GPU.into(), "gpu-0".into(), vec![0]),
            (GPU.into(), "gpu-1".into(), vec![0, 1]),
            ("example.com/nic".into(), "nic-0".into(), vec![]),
        ],
        allocatable_cpus: vec![1, 2, 3, 5, 6, 7],
        allocatable_memory: vec![
            ("memory".into(), 3 << 30, vec![0]),
            ("memory".into(), 4 << 30, vec![1]),
        ],
        ..Default::default()
    };
    h.memory.insert(
        key("uid-gpu", "trainer"),
        vec![
            ("memory".into(), 1 << 30, vec![0, 1]),
            ("hugepages-2Mi".into(), 4 << 20, vec![0, 1]),
        ],
    );
    let per_node = BTreeMap::from([(0, ids(&["gpu-0"])), (1, ids(&["gpu-1", "gpu-3"]))]);
    h.devices
        .insert(key("uid-gpu", "trainer"), vec![(GPU.into(), per_node)]);
    h.devices.insert(
        key("uid-gpu", "setup"),
        vec![(GPU.into(), BTreeMap::from([(0, ids(&["gpu-9"]))]))],
    );
    h.devices.insert(
        key("uid-done", "job"),
        vec![(GPU.into(), BTreeMap::from([(0, ids(&["gpu-5"]))]))],
    );
    h.cpus.insert(key("uid-gpu", "trainer"), vec![2, 3]);
    h.cpus
        .insert(key("uid-gpu", "sidecar"), vec![0, 1, 4, 5, 6, 7]);
    h.cpus
        .insert(key("uid-web", "nginx"), vec![0, 1, 4, 5, 6, 7]);
    h
}

struct Harness {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    metrics: &'static Metrics,
    shutdown: CancellationToken,
    served: JoinHandle<()>,
}

async fn start(host: FakeHost) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    start_at(dir, socket, host).await
}

async fn start_at(dir: tempfile::TempDir, socket: PathBuf, host: FakeHost) -> Harness {
    let metrics: &'static Metrics = Box::leak(Box::default());
    let listener = PodResourcesListener::bind(&socket).await.unwrap();
    assert_eq!(listener.socket(), socket);
    let service = PodResourcesService::new(Arc::new(host)).with_metrics(metrics);
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(listener.serve(service, shutdown.clone()));
    Harness {
        _dir: dir,
        socket,
        metrics,
        shutdown,
        served,
    }
}

impl Harness {
    async fn client(&self) -> PodResourcesListerClient<Channel> {
        let path = self.socket.clone();
        // The URI is never resolved: the connector dials the socket.
        let endpoint = Endpoint::from_static("http://localhost");
        let connect = endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }));
        let channel = tokio::time::timeout(WAIT, connect)
            .await
            .expect("no connection in time")
            .expect("connected");
        PodResourcesListerClient::new(channel)
    }

    fn requests(&self) -> u64 {
        self.metrics
            .pod_resources_endpoint_requests
            .get(SERVER_API_VERSION)
    }

    async fn shutdown(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.served)
            .await
            .expect("the server did not stop")
            .expect("the server task");
        assert!(!self.socket.exists(), "the socket is left behind");
    }
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(WAIT, f)
        .await
        .expect("no answer in time")
}

#[tokio::test]
async fn list_reports_active_pods_and_their_app_containers() {
    let h = start(host()).await;
    let mut client = h.client().await;
    let list = within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<(&str, &str)> = list
        .pod_resources
        .iter()
        .map(|p| (p.namespace.as_str(), p.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [("default", "web"), ("ml", "gpu-pod")],
        "no finished pod"
    );

    let gpu = &list.pod_resources[1];
    let containers: Vec<&str> = gpu.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(containers, ["trainer", "sidecar"], "app containers only");
    let trainer = &gpu.containers[0];
    assert_eq!(
        trainer.devices,
        [
            ContainerDevices {
                resource_name: GPU.into(),
                device_ids: ids(&["gpu-0"]),
                topology: on(0),
            },
            ContainerDevices {
                resource_name: GPU.into(),
                device_ids: ids(&["gpu-1", "gpu-3"]),
                topology: on(1),
            },
        ]
    );
    assert_eq!(trainer.cpu_ids, [2, 3]);
    let both = Some(TopologyInfo {
        nodes: vec![NumaNode { id: 0 }, NumaNode { id: 1 }],
    });
    assert_eq!(
        trainer.memory,
        [
            ContainerMemory {
                memory_type: "memory".into(),
                size: 1 << 30,
                topology: both.clone(),
            },
            ContainerMemory {
                memory_type: "hugepages-2Mi".into(),
                size: 4 << 20,
                topology: both,
            },
        ]
    );
    assert!(trainer.dynamic_resources.is_empty());
    let sidecar = &gpu.containers[1];
    assert!(sidecar.devices.is_empty());
    assert_eq!(sidecar.cpu_ids, [0, 1, 4, 5, 6, 7]);
    let web = &list.pod_resources[0];
    assert_eq!(web.containers.len(), 1);
    assert_eq!(web.containers[0].cpu_ids, [0, 1, 4, 5, 6, 7]);
    assert_eq!(h.requests(), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn list_without_cpu_manager_or_pods() {
    // The `none` policy: no CPU ids; no pods at all: an empty list.
    let mut fake = host();
    fake.cpus.clear();
    let h = start(fake).await;
    let mut client = h.client().await;
    let list = within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(list
        .pod_resources
        .iter()
        .flat_map(|p| &p.containers)
        .all(|c| c.cpu_ids.is_empty()));
    h.shutdown().await;

    let h = start(FakeHost::default()).await;
    let mut client = h.client().await;
    let list = within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(list.pod_resources.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn allocatable_resources_list_every_device_per_numa_node_and_the_cpus() {
    let h = start(host()).await;
    let mut client = h.client().await;
    let got = within(client.get_allocatable_resources(AllocatableResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    let device = |resource: &str, id: &str, topology| ContainerDevices {
        resource_name: resource.into(),
        device_ids: ids(&[id]),
        topology,
    };
    assert_eq!(
        got.devices,
        [
            device(GPU, "gpu-0", on(0)),
            device(GPU, "gpu-1", on(0)),
            device(GPU, "gpu-1", on(1)),
            device("example.com/nic", "nic-0", None),
        ]
    );
    assert_eq!(got.cpu_ids, [1, 2, 3, 5, 6, 7]);
    let memory: Vec<(u64, Option<TopologyInfo>)> = got
        .memory
        .iter()
        .map(|m| (m.size, m.topology.clone()))
        .collect();
    assert_eq!(memory, [(3 << 30, on(0)), (4 << 30, on(1))]);
    h.shutdown().await;
}

#[tokio::test]
async fn get_reports_one_pod_or_gos_not_found_error() {
    let h = start(host()).await;
    let mut client = h.client().await;
    let request = |name: &str, namespace: &str| GetPodResourcesRequest {
        pod_name: name.into(),
        pod_namespace: namespace.into(),
    };
    let got = within(client.get(request("gpu-pod", "ml")))
        .await
        .unwrap()
        .into_inner()
        .pod_resources
        .expect("the pod");
    assert_eq!(
        (got.name.as_str(), got.namespace.as_str()),
        ("gpu-pod", "ml")
    );
    let containers: Vec<&str> = got.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(containers, ["trainer", "sidecar"]);
    assert_eq!(got.containers[0].cpu_ids, [2, 3]);
    assert_eq!(got.containers[0].devices.len(), 2);

    let err = within(client.get(request("gpu-pod", "default")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(err.message(), "pod gpu-pod in namespace default not found");
    let err = within(client.get(request("nope", "ml"))).await.unwrap_err();
    assert_eq!(err.message(), "pod nope in namespace ml not found");
    h.shutdown().await;
}

#[tokio::test]
async fn every_call_is_counted() {
    let h = start(host()).await;
    let mut client = h.client().await;
    assert_eq!(h.requests(), 0);
    within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap();
    within(client.get_allocatable_resources(AllocatableResourcesRequest {}))
        .await
        .unwrap();
    within(client.get(GetPodResourcesRequest {
        pod_name: "web".into(),
        pod_namespace: "default".into(),
    }))
    .await
    .unwrap();
    within(client.get(GetPodResourcesRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(h.requests(), 4, "failed calls count too");
    let text = h.metrics.render();
    assert!(
        text.contains("kubelet_pod_resources_endpoint_requests_total{server_api_version=\"v1\"} 4"),
        "{text}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn the_socket_is_made_in_a_0750_directory_and_removed_at_shutdown() {
    let h = start(FakeHost::default()).await;
    let meta = std::fs::metadata(&h.socket).unwrap();
    assert!(meta.file_type().is_socket());
    let dir = h.socket.parent().unwrap();
    assert_eq!(dir.file_name().unwrap(), SOCKET_DIR);
    let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o750, 0, "mode {mode:o}");
    // A connected client does not hold the shutdown up.
    let mut client = h.client().await;
    within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap();
    h.shutdown().await;
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_path(dir.path());
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    // What a kubelet that died leaves: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    assert!(UnixStream::connect(&socket).await.is_err());
    let h = start_at(dir, socket, host()).await;
    let mut client = h.client().await;
    let list = within(client.list(ListPodResourcesRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.pod_resources.len(), 2);
    h.shutdown().await;
}

#[tokio::test]
async fn bind_fails_when_the_directory_cannot_be_made() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let err = PodResourcesListener::bind(&socket_path(&file))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PodResourcesError::CreateDir { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("not-a-dir/pod-resources"), "{err}");
}

#[test]
fn the_socket_lives_under_the_root_dir() {
    assert_eq!(
        socket_path(Path::new("/var/lib/kubelet")),
        Path::new("/var/lib/kubelet/pod-resources/kubelet.sock")
    );
}
