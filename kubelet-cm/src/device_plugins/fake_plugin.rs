//! A fake device plugin for the tests: the `DevicePlugin` gRPC service on a real unix socket,
//! and a client of the kubelet's `Registration` service.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Router;
use tonic::{Request, Response, Status};

use super::api;
use super::api::device_plugin_server::{DevicePlugin, DevicePluginServer};
use super::api::registration_client::RegistrationClient;

type Watcher = mpsc::Sender<Result<api::ListAndWatchResponse, Status>>;

/// What the fake serves and what it was asked.
#[derive(Default)]
pub(super) struct FakeState {
    /// The device list every new `ListAndWatch` starts with.
    pub devices: Mutex<Vec<api::Device>>,
    /// What `GetDevicePluginOptions` answers.
    pub options: Mutex<api::DevicePluginOptions>,
    watchers: Mutex<Vec<Watcher>>,
    pub allocate_requests: Mutex<Vec<api::AllocateRequest>>,
    pub pre_start_requests: Mutex<Vec<api::PreStartContainerRequest>>,
    pub preferred_requests: Mutex<Vec<api::PreferredAllocationRequest>>,
    /// `Allocate` answers no container.
    pub empty_allocate: AtomicBool,
    /// `PreStartContainer` fails.
    pub fail_pre_start: AtomicBool,
    /// `PreStartContainer` answers after this many milliseconds.
    pub pre_start_delay_ms: AtomicU64,
}

impl FakeState {
    fn watchers(&self) -> Vec<Watcher> {
        self.watchers.lock().unwrap().clone()
    }

    /// Every `ListAndWatch` stream that is open on the fake's side and still read.
    pub fn open_watchers(&self) -> usize {
        self.watchers().iter().filter(|w| !w.is_closed()).count()
    }
}

struct FakeService(Arc<FakeState>);

/// `dev-0` healthy without topology, `dev-1` unhealthy on NUMA node 1.
pub(super) fn two_devices() -> Vec<api::Device> {
    vec![
        device("dev-0", "Healthy", &[]),
        device("dev-1", "Unhealthy", &[1]),
    ]
}

pub(super) fn device(id: &str, health: &str, numa: &[i64]) -> api::Device {
    api::Device {
        id: id.to_string(),
        health: health.to_string(),
        topology: (!numa.is_empty()).then(|| api::TopologyInfo {
            nodes: numa.iter().map(|&id| api::NumaNode { id }).collect(),
        }),
    }
}

#[tonic::async_trait]
impl DevicePlugin for FakeService {
    async fn get_device_plugin_options(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<api::DevicePluginOptions>, Status> {
        Ok(Response::new(*self.0.options.lock().unwrap()))
    }

    type ListAndWatchStream = ReceiverStream<Result<api::ListAndWatchResponse, Status>>;

    async fn list_and_watch(
        &self,
        _: Request<api::Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = mpsc::channel(8);
        let devices = self.0.devices.lock().unwrap().clone();
        tx.try_send(Ok(api::ListAndWatchResponse { devices }))
            .unwrap();
        self.0.watchers.lock().unwrap().push(tx);
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<api::PreferredAllocationRequest>,
    ) -> Result<Response<api::PreferredAllocationResponse>, Status> {
        let request = request.into_inner();
        self.0
            .preferred_requests
            .lock()
            .unwrap()
            .push(request.clone());
        let container_responses = request
            .container_requests
            .into_iter()
            .map(|c| {
                let size = usize::try_from(c.allocation_size).unwrap();
                let mut ids = c.must_include_device_i_ds.clone();
                for id in c.available_device_i_ds {
                    if ids.len() < size && !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                api::ContainerPreferredAllocationResponse { device_i_ds: ids }
            })
            .collect();
        Ok(Response::new(api::PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        request: Request<api::AllocateRequest>,
    ) -> Result<Response<api::AllocateResponse>, Status> {
        let request = request.into_inner();
        self.0
            .allocate_requests
            .lock()
            .unwrap()
            .push(request.clone());
        if self.0.empty_allocate.load(Ordering::SeqCst) {
            return Ok(Response::new(api::AllocateResponse::default()));
        }
        let container_responses = request
            .container_requests
            .into_iter()
            .map(|c| allocation(&c.devices_ids))
            .collect();
        Ok(Response::new(api::AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        request: Request<api::PreStartContainerRequest>,
    ) -> Result<Response<api::PreStartContainerResponse>, Status> {
        self.0
            .pre_start_requests
            .lock()
            .unwrap()
            .push(request.into_inner());
        let delay = self.0.pre_start_delay_ms.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        if self.0.fail_pre_start.load(Ordering::SeqCst) {
            return Err(Status::internal("pre-start refused"));
        }
        Ok(Response::new(api::PreStartContainerResponse {}))
    }
}

/// What the fake's `Allocate` answers for `ids`.
pub(super) fn allocation(ids: &[String]) -> api::ContainerAllocateResponse {
    api::ContainerAllocateResponse {
        envs: BTreeMap::from([("FAKE_DEVICES".to_string(), ids.join(","))]),
        mounts: vec![api::Mount {
            container_path: "/var/fake".to_string(),
            host_path: "/srv/fake".to_string(),
            read_only: true,
        }],
        devices: ids
            .iter()
            .map(|id| api::DeviceSpec {
                container_path: format!("/dev/{id}"),
                host_path: format!("/dev/fake-{id}"),
                permissions: "rw".to_string(),
            })
            .collect(),
        annotations: BTreeMap::from([("fake.example/devices".to_string(), ids.join(","))]),
        cdi_devices: ids
            .iter()
            .map(|id| api::CdiDevice {
                name: format!("fake.example/gpu={id}"),
            })
            .collect(),
    }
}

/// A running fake plugin.
pub(super) struct FakePlugin {
    pub socket: PathBuf,
    pub state: Arc<FakeState>,
    shutdown: CancellationToken,
    server: JoinHandle<()>,
}

impl FakePlugin {
    /// Serves on `socket` with [`two_devices`].
    pub async fn serve(socket: PathBuf) -> FakePlugin {
        Self::serve_with(socket, FakeState::default(), |router| router).await
    }

    /// Serves on `socket` from `state` (with [`two_devices`]), and whatever else `extra`
    /// adds to the server (the plugin watcher's `Registration` service).
    pub async fn serve_with(
        socket: PathBuf,
        state: FakeState,
        extra: impl FnOnce(Router) -> Router,
    ) -> FakePlugin {
        let state = Arc::new(state);
        *state.devices.lock().unwrap() = two_devices();
        let listener = UnixListener::bind(&socket).unwrap();
        let shutdown = CancellationToken::new();
        let router = tonic::transport::Server::builder()
            .add_service(DevicePluginServer::new(FakeService(state.clone())));
        let server = extra(router).serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            shutdown.clone().cancelled_owned(),
        );
        let server = tokio::spawn(async move { server.await.unwrap() });
        FakePlugin {
            socket,
            state,
            shutdown,
            server,
        }
    }

    /// Sends a new device list on every open `ListAndWatch` stream.
    pub async fn push(&self, devices: Vec<api::Device>) {
        *self.state.devices.lock().unwrap() = devices.clone();
        for watcher in self.state.watchers() {
            let response = api::ListAndWatchResponse {
                devices: devices.clone(),
            };
            // A stream the kubelet no longer reads is skipped.
            let _ = watcher.send(Ok(response)).await;
        }
    }

    /// Ends every stream, stops serving and removes the socket: the plugin is gone.
    pub async fn stop(self) {
        self.state.watchers.lock().unwrap().clear();
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the fake plugin did not stop")
            .unwrap();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A v1beta1 registration of `resource` on the plugin socket `endpoint`, with both options.
pub(super) fn register_request(resource: &str, endpoint: &str) -> api::RegisterRequest {
    api::RegisterRequest {
        version: "v1beta1".to_string(),
        endpoint: endpoint.to_string(),
        resource_name: resource.to_string(),
        options: Some(api::DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        }),
    }
}

/// Calls `Register` on the kubelet's socket.
pub(super) async fn register(
    kubelet_socket: &Path,
    request: api::RegisterRequest,
) -> Result<(), Status> {
    let channel = super::endpoint::dial(kubelet_socket, Duration::from_secs(5))
        .await
        .map_err(Status::unavailable)?;
    RegistrationClient::new(channel)
        .register(request)
        .await
        .map(|_| ())
}
