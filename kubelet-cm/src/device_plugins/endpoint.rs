//! A registration's task (Go's `addEndpoint` + `runEndpoint` + `endpointImpl.run`): dial the
//! plugin back, report it `Registered`, report each `ListAndWatch` snapshot as `Devices`, and
//! report `Stopped` when the stream is over (or the plugin watcher deregistered it). Both
//! ways in share it: a `Register` call ([`run`]) and a plugin-watcher registration
//! ([`spawn`], from [`super::watcher_handler`]). The states are in the module docs of
//! [`super`]; this is the only code that reports events for an endpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::devices::{Device, DevicePluginEvent, DevicePluginOptions};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tracing::{debug, error, info};

use super::api;
use super::client::GrpcDevicePlugin;
use super::registration::Context;

/// The `Health` of a usable device (Go's `pluginapi.Healthy`).
const HEALTHY: &str = "Healthy";

/// Runs one accepted `Register` call until its plugin's stream ends or shutdown: dials the
/// plugin back, then serves the endpoint as [`spawn`]'s task does.
pub(super) async fn run(context: Arc<Context>, request: api::RegisterRequest) {
    let resource = request.resource_name;
    let socket = plugin_socket(&context.socket_dir, &request.endpoint);
    let dialled = tokio::select! {
        biased;
        () = context.shutdown.cancelled() => return,
        dialled = dial(&socket, context.dial_timeout) => dialled,
    };
    let channel = match dialled {
        Ok(channel) => channel,
        Err(message) => {
            error!(
                resource = %resource,
                socket = %socket.display(),
                error = %message,
                "Failed to dial device plugin"
            );
            return;
        }
    };
    let options = request.options.map(options_from).unwrap_or_default();
    let plugin = new_plugin(resource, socket, channel);
    // The stop token of an RPC registration is never cancelled: only its stream ends it.
    serve(context, plugin, options, CancellationToken::new()).await;
}

/// Starts serving a plugin that is already connected (the plugin watcher's registration,
/// Go's `RegisterPlugin` → `registerEndpoint` + `runEndpoint`): takes a fresh endpoint
/// number and spawns the endpoint's task on the registry's tracker, which reports
/// `Registered`, then `Devices`…, then `Stopped` once the stream ends or `stop` is
/// cancelled. Returns the endpoint number.
pub(super) fn spawn(
    context: &Arc<Context>,
    resource: String,
    socket: PathBuf,
    channel: Channel,
    options: DevicePluginOptions,
    stop: CancellationToken,
) -> u64 {
    let plugin = new_plugin(resource, socket, channel);
    let endpoint = plugin.endpoint();
    context
        .tasks
        .spawn(serve(context.clone(), plugin, options, stop));
    endpoint
}

/// A plugin client under a fresh endpoint number.
fn new_plugin(resource: String, socket: PathBuf, channel: Channel) -> Arc<GrpcDevicePlugin> {
    Arc::new(GrpcDevicePlugin::new(
        resource,
        super::next_endpoint(),
        socket,
        channel,
    ))
}

/// The endpoint's life once connected: `Registered`, every `ListAndWatch` snapshot as
/// `Devices`, and `Stopped` when the stream is over or `stop` is cancelled (nothing more
/// at shutdown).
async fn serve(
    context: Arc<Context>,
    plugin: Arc<GrpcDevicePlugin>,
    options: DevicePluginOptions,
    stop: CancellationToken,
) {
    let resource = plugin.resource().to_string();
    let endpoint = plugin.endpoint();
    info!(resource = %resource, endpoint, ?options, "Registered device plugin endpoint");
    let registered = DevicePluginEvent::Registered {
        resource: resource.clone(),
        endpoint,
        options,
        plugin: plugin.clone(),
    };
    let still_reporting = context.report(registered).await && watch(&context, &plugin, &stop).await;
    plugin.mark_stopped();
    if still_reporting {
        info!(resource = %resource, endpoint, "Device plugin endpoint stopped");
        context
            .report(DevicePluginEvent::Stopped { resource, endpoint })
            .await;
    }
}

/// Reads `ListAndWatch` until it ends or fails or `stop` is cancelled (true: report
/// `Stopped`), or until shutdown or the receiver going away (false: report nothing more).
async fn watch(context: &Context, plugin: &GrpcDevicePlugin, stop: &CancellationToken) -> bool {
    let resource = plugin.resource();
    let endpoint = plugin.endpoint();
    let mut client = plugin.client();
    let opened = tokio::select! {
        biased;
        () = context.shutdown.cancelled() => return false,
        () = stop.cancelled() => return stopped(resource, endpoint),
        opened = client.list_and_watch(api::Empty {}) => opened,
    };
    let mut stream = match opened {
        Ok(response) => response.into_inner(),
        Err(status) => {
            error!(resource, endpoint, error = %status, "listAndWatch ended unexpectedly for device plugin");
            return true;
        }
    };
    loop {
        let next = tokio::select! {
            biased;
            () = context.shutdown.cancelled() => return false,
            () = stop.cancelled() => return stopped(resource, endpoint),
            next = stream.message() => next,
        };
        match next {
            Ok(Some(response)) => {
                debug!(
                    resource,
                    endpoint,
                    devices = response.devices.len(),
                    "State pushed for device plugin"
                );
                let event = DevicePluginEvent::Devices {
                    resource: resource.to_string(),
                    endpoint,
                    devices: response.devices.into_iter().map(device_from).collect(),
                };
                if !context.report(event).await {
                    return false;
                }
            }
            Ok(None) => {
                info!(
                    resource,
                    endpoint, "listAndWatch stream of device plugin ended"
                );
                return true;
            }
            Err(status) => {
                error!(resource, endpoint, error = %status, "listAndWatch ended unexpectedly for device plugin");
                return true;
            }
        }
    }
}

/// `<socket_dir>/<endpoint>` the way Go's `filepath.Join` puts it: an absolute endpoint
/// still names a path under the directory.
fn plugin_socket(socket_dir: &Path, endpoint: &str) -> PathBuf {
    socket_dir.join(endpoint.trim_start_matches('/'))
}

/// `stop` was cancelled (Go's `endpointImpl.stop()` from `DeRegisterPlugin`).
fn stopped(resource: &str, endpoint: u64) -> bool {
    info!(
        resource,
        endpoint, "Device plugin endpoint stopped by deregistration"
    );
    true
}

/// Connects to a plugin's socket, trying again until `timeout` (Go's blocking dial). The
/// channel reconnects by itself after a broken connection, as a Go `ClientConn` does.
pub(super) async fn dial(socket: &Path, timeout: Duration) -> Result<Channel, String> {
    crate::uds::dial(socket, timeout)
        .await
        .map_err(|e| format!("failed to dial device plugin: {e}"))
}

pub(super) fn options_from(o: api::DevicePluginOptions) -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: o.pre_start_required,
        get_preferred_allocation_available: o.get_preferred_allocation_available,
    }
}

fn device_from(d: api::Device) -> Device {
    Device {
        healthy: d.health == HEALTHY,
        numa_nodes: d
            .topology
            .map(|t| t.nodes.into_iter().map(|n| n.id).collect())
            .unwrap_or_default(),
        id: d.id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_convert() {
        let d = device_from(api::Device {
            id: "a".into(),
            health: "Unhealthy".into(),
            topology: Some(api::TopologyInfo {
                nodes: vec![api::NumaNode { id: 0 }, api::NumaNode { id: 3 }],
            }),
        });
        assert_eq!(
            d,
            Device {
                id: "a".into(),
                healthy: false,
                numa_nodes: vec![0, 3]
            }
        );
        let d = device_from(api::Device {
            id: "b".into(),
            health: "Healthy".into(),
            topology: None,
        });
        assert!(d.healthy && d.numa_nodes.is_empty());
        // Only the exact word counts.
        assert!(
            !device_from(api::Device {
                health: "healthy".into(),
                ..Default::default()
            })
            .healthy
        );
    }

    #[test]
    fn plugin_sockets_stay_in_the_directory() {
        let dir = Path::new("/var/lib/kubelet/device-plugins");
        assert_eq!(plugin_socket(dir, "gpu.sock"), dir.join("gpu.sock"));
        assert_eq!(plugin_socket(dir, "/gpu.sock"), dir.join("gpu.sock"));
    }
}
