//! The calls on a registered plugin (Go's `endpointImpl.allocate`, `preStartContainer`,
//! `getPreferredAllocation`), each with its own deadline.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::devices::{ContainerAllocation, DevicePlugin, DevicePluginError};
use tonic::transport::Channel;
use tracing::debug;

use super::api;
use super::api::device_plugin_client::DevicePluginClient;

/// Deadline of `Allocate`.
pub const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline of `PreStartContainer` (Go's `KubeletPreStartContainerRPCTimeoutInSecs`).
pub const PRE_START_CONTAINER_TIMEOUT: Duration = Duration::from_secs(30);
/// Deadline of `GetPreferredAllocation`.
pub const PREFERRED_ALLOCATION_TIMEOUT: Duration = Duration::from_secs(10);

/// A plugin endpoint the kubelet calls: the [`DevicePlugin`] handed out in
/// [`DevicePluginEvent::Registered`](kubelet_core::devices::DevicePluginEvent::Registered).
/// Cheap to call concurrently. Once its registration task has seen the `ListAndWatch` stream
/// end, it is *stopped* and every call fails at once, as Go's `endpointImpl` after `stop()`.
pub struct GrpcDevicePlugin {
    resource: String,
    endpoint: u64,
    socket: PathBuf,
    client: DevicePluginClient<Channel>,
    stopped: AtomicBool,
}

impl fmt::Debug for GrpcDevicePlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcDevicePlugin")
            .field("resource", &self.resource)
            .field("endpoint", &self.endpoint)
            .field("socket", &self.socket)
            .field("stopped", &self.is_stopped())
            .finish()
    }
}

impl GrpcDevicePlugin {
    /// Connects to the plugin serving `resource` on `socket`, trying for up to
    /// [`DIAL_TIMEOUT`](super::DIAL_TIMEOUT); `endpoint` is the number it is known by.
    pub async fn connect(
        resource: impl Into<String>,
        endpoint: u64,
        socket: &Path,
    ) -> Result<GrpcDevicePlugin, DevicePluginError> {
        let resource = resource.into();
        match super::endpoint::dial(socket, super::DIAL_TIMEOUT).await {
            Ok(channel) => Ok(GrpcDevicePlugin::new(
                resource,
                endpoint,
                socket.to_path_buf(),
                channel,
            )),
            Err(message) => Err(DevicePluginError::Rpc {
                resource,
                call: "Dial",
                message,
            }),
        }
    }

    pub(super) fn new(
        resource: String,
        endpoint: u64,
        socket: PathBuf,
        channel: Channel,
    ) -> GrpcDevicePlugin {
        GrpcDevicePlugin {
            resource,
            endpoint,
            socket,
            client: DevicePluginClient::new(channel),
            stopped: AtomicBool::new(false),
        }
    }

    /// The extended resource the plugin serves.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The endpoint's number.
    pub fn endpoint(&self) -> u64 {
        self.endpoint
    }

    /// The plugin's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The plugin's stream has ended: calls fail without reaching it.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    pub(super) fn mark_stopped(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// A handle on the generated client (clones share the connection).
    pub(super) fn client(&self) -> DevicePluginClient<Channel> {
        self.client.clone()
    }

    /// `message` with the call's deadline, for the plugin to see.
    pub(super) fn request<T>(message: T, timeout: Duration) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(timeout);
        request
    }

    /// Runs one call under `timeout` and maps its failure.
    pub(super) async fn call<T, F>(
        &self,
        call: &'static str,
        timeout: Duration,
        fut: F,
    ) -> Result<T, DevicePluginError>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        if self.is_stopped() {
            return Err(self.rpc_error(
                call,
                format!(
                    "endpoint {} ({}) has been stopped",
                    self.endpoint, self.resource
                ),
            ));
        }
        let timed_out = || DevicePluginError::Timeout {
            resource: self.resource.clone(),
            call,
            seconds: timeout.as_secs(),
        };
        let result = match tokio::time::timeout(timeout, fut).await {
            Ok(result) => result,
            Err(_) => return Err(timed_out()),
        };
        result.map(tonic::Response::into_inner).map_err(|status| {
            debug!(
                resource = %self.resource,
                endpoint = self.endpoint,
                call,
                code = ?status.code(),
                error = %status.message(),
                "Device plugin call failed"
            );
            match status.code() {
                tonic::Code::DeadlineExceeded => timed_out(),
                // tonic's own client-side deadline.
                tonic::Code::Cancelled if status.message() == "Timeout expired" => timed_out(),
                code => self.rpc_error(
                    call,
                    format!("rpc error: code = {code:?} desc = {}", status.message()),
                ),
            }
        })
    }

    fn rpc_error(&self, call: &'static str, message: String) -> DevicePluginError {
        DevicePluginError::Rpc {
            resource: self.resource.clone(),
            call,
            message,
        }
    }
}

#[async_trait]
impl DevicePlugin for GrpcDevicePlugin {
    async fn allocate(
        &self,
        device_ids: &[String],
    ) -> Result<ContainerAllocation, DevicePluginError> {
        const CALL: &str = "Allocate";
        let mut client = self.client();
        let request = api::AllocateRequest {
            container_requests: vec![api::ContainerAllocateRequest {
                devices_ids: device_ids.to_vec(),
            }],
        };
        let response = self
            .call(
                CALL,
                ALLOCATE_TIMEOUT,
                client.allocate(Self::request(request, ALLOCATE_TIMEOUT)),
            )
            .await?;
        match response.container_responses.into_iter().next() {
            Some(container) => allocation_from(&container).ok_or_else(|| {
                self.rpc_error(CALL, "the allocation response does not decode".to_string())
            }),
            // Nothing else was in the response: it prints as the empty one.
            None => Err(self.rpc_error(
                CALL,
                format!(
                    "no containers return in allocation response {:?}",
                    api::AllocateResponse::default()
                ),
            )),
        }
    }

    async fn pre_start_container(&self, device_ids: &[String]) -> Result<(), DevicePluginError> {
        let mut client = self.client();
        let request = api::PreStartContainerRequest {
            devices_ids: device_ids.to_vec(),
        };
        self.call(
            "PreStartContainer",
            PRE_START_CONTAINER_TIMEOUT,
            client.pre_start_container(Self::request(request, PRE_START_CONTAINER_TIMEOUT)),
        )
        .await
        .map(|_| ())
    }

    async fn preferred_allocation(
        &self,
        available: &[String],
        must_include: &[String],
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError> {
        let mut client = self.client();
        let request = api::PreferredAllocationRequest {
            container_requests: vec![api::ContainerPreferredAllocationRequest {
                available_device_i_ds: available.to_vec(),
                must_include_device_i_ds: must_include.to_vec(),
                allocation_size: i32::try_from(size).unwrap_or(i32::MAX),
            }],
        };
        let response = self
            .call(
                "GetPreferredAllocation",
                PREFERRED_ALLOCATION_TIMEOUT,
                client
                    .get_preferred_allocation(Self::request(request, PREFERRED_ALLOCATION_TIMEOUT)),
            )
            .await?;
        Ok(response
            .container_responses
            .into_iter()
            .next()
            .map(|c| c.device_i_ds)
            .unwrap_or_default())
    }
}

/// The plugin's answer for one container in the contract's terms, through the device
/// manager's codec of the same message (the checkpoint keeps it as these bytes).
fn allocation_from(r: &api::ContainerAllocateResponse) -> Option<ContainerAllocation> {
    kubelet_core::devicemanager::checkpoint::decode_response(&prost::Message::encode_to_vec(r))
}
