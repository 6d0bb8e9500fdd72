//! The device plugin contract: the registry that device plugins register with, and the calls
//! the device manager ([`crate::devicemanager`]) makes on a registered plugin.
//!
//! A [`DevicePluginRegistry`] (kubelet-cm's gRPC server on `<root-dir>/device-plugins/
//! kubelet.sock`, API `deviceplugin/v1beta1`) accepts registrations, dials each plugin back,
//! reads its `ListAndWatch` stream, and reports what happens as [`DevicePluginEvent`]s on a
//! bounded channel. Every event names the plugin *endpoint* it comes from (a number the
//! registry never reuses): a plugin that registers again for the same resource gets a new
//! endpoint, and the device manager ignores what the replaced endpoint still reports (Go's
//! `old.e == e` check), so the old stream ending does not mark the new plugin's devices
//! unhealthy.
//!
//! The registry decides nothing about pods: which devices a container gets, when a resource
//! is gone, and what the node reports are the device manager's.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The API version the kubelet serves and accepts from plugins (Go's `pluginapi.Version`).
pub const DEVICE_PLUGIN_API_VERSION: &str = "v1beta1";

/// Why a call to a device plugin failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DevicePluginError {
    /// The plugin answered with an error, or the connection failed.
    #[error("device plugin {resource} {call} rpc failed: {message}")]
    Rpc {
        /// The plugin's resource.
        resource: String,
        /// The call (`Allocate`, `PreStartContainer`, …).
        call: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The plugin did not answer within the call's timeout.
    #[error("device plugin {resource} {call} timed out after {seconds}s")]
    Timeout {
        /// The plugin's resource.
        resource: String,
        /// The call.
        call: &'static str,
        /// The timeout.
        seconds: u64,
    },
    /// The registry could not serve (its socket could not be made or bound).
    #[error("device plugin registry at {path}: {message}")]
    Serve {
        /// The socket or directory.
        path: String,
        /// Why.
        message: String,
    },
}

/// A plugin's options (`DevicePluginOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevicePluginOptions {
    /// `PreStartContainer` is called before each container start.
    pub pre_start_required: bool,
    /// `GetPreferredAllocation` may be asked at admission.
    pub get_preferred_allocation_available: bool,
}

/// One device as its plugin lists it (`Device`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Device {
    /// The plugin's id for it.
    pub id: String,
    /// `Health == "Healthy"`.
    pub healthy: bool,
    /// The NUMA nodes it is attached to (`Topology.Nodes`); empty when the plugin gives none.
    pub numa_nodes: Vec<i64>,
}

/// A host path mounted into the container (`Mount`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceMount {
    /// Where in the container.
    pub container_path: String,
    /// Which host path.
    pub host_path: String,
    /// Read-only.
    pub read_only: bool,
}

/// A host device node made available in the container (`DeviceSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceNode {
    /// Its path in the container.
    pub container_path: String,
    /// Its path on the host.
    pub host_path: String,
    /// Cgroup permissions (`r`, `w`, `m`).
    pub permissions: String,
}

/// What a plugin's `Allocate` says a container needs for its devices
/// (`ContainerAllocateResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerAllocation {
    /// Environment variables.
    pub envs: BTreeMap<String, String>,
    /// Host paths to mount.
    pub mounts: Vec<DeviceMount>,
    /// Device nodes.
    pub devices: Vec<DeviceNode>,
    /// Annotations for the runtime.
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names.
    pub cdi_devices: Vec<String>,
}

/// A registered plugin endpoint: the calls the device manager makes on it. Each call has its
/// own timeout inside the implementation (Go: 10 s to dial, 30 s for `PreStartContainer`).
#[async_trait]
pub trait DevicePlugin: Send + Sync + std::fmt::Debug {
    /// `Allocate` for one container's devices.
    async fn allocate(
        &self,
        device_ids: &[String],
    ) -> Result<ContainerAllocation, DevicePluginError>;
    /// `PreStartContainer` for one container's devices.
    async fn pre_start_container(&self, device_ids: &[String]) -> Result<(), DevicePluginError>;
    /// `GetPreferredAllocation` for one container: `size` devices from `available`, with
    /// every one of `must_include`.
    async fn preferred_allocation(
        &self,
        available: &[String],
        must_include: &[String],
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError>;
}

/// What the registry reports.
#[derive(Debug, Clone)]
pub enum DevicePluginEvent {
    /// A plugin registered for `resource` and was dialled back: `endpoint` now serves it.
    Registered {
        /// The extended resource name.
        resource: String,
        /// The endpoint's number.
        endpoint: u64,
        /// Its options (from the registration request).
        options: DevicePluginOptions,
        /// The calls.
        plugin: Arc<dyn DevicePlugin>,
    },
    /// The endpoint's `ListAndWatch` sent the resource's whole device list.
    Devices {
        /// The resource.
        resource: String,
        /// The endpoint.
        endpoint: u64,
        /// Every device, healthy or not.
        devices: Vec<Device>,
    },
    /// The endpoint's stream ended or failed: the plugin is gone.
    Stopped {
        /// The resource.
        resource: String,
        /// The endpoint.
        endpoint: u64,
    },
}

/// Where device plugins register (Go's device manager server and its plugin watcher handler).
#[async_trait]
pub trait DevicePluginRegistry: Send + Sync {
    /// Starts serving: returns once the registration socket listens (an error when it
    /// cannot), then reports on `events` until `shutdown`.
    async fn start(
        &self,
        events: mpsc::Sender<DevicePluginEvent>,
        shutdown: CancellationToken,
    ) -> Result<(), DevicePluginError>;
}
