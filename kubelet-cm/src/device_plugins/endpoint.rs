//! A registration's task (Go's `addEndpoint` + `runEndpoint` + `endpointImpl.run`): dial the
//! plugin back, report it `Registered`, report each `ListAndWatch` snapshot as `Devices`, and
//! report `Stopped` when the stream is over. The states are in the module docs of
//! [`super`]; this is the only code that reports events for an endpoint.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use kubelet_core::devices::{Device, DevicePluginEvent, DevicePluginOptions};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::{debug, error, info};

use super::api;
use super::client::GrpcDevicePlugin;
use super::registration::Context;

/// The `Health` of a usable device (Go's `pluginapi.Healthy`).
const HEALTHY: &str = "Healthy";

/// First and longest pause between attempts to connect to a plugin.
const DIAL_RETRY_MIN: Duration = Duration::from_millis(100);
const DIAL_RETRY_MAX: Duration = Duration::from_secs(1);

/// Runs one accepted registration until its plugin's stream ends or shutdown.
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
    let endpoint = super::next_endpoint();
    let options = request.options.map(options_from).unwrap_or_default();
    let plugin = Arc::new(GrpcDevicePlugin::new(
        resource.clone(),
        endpoint,
        socket,
        channel,
    ));
    info!(resource = %resource, endpoint, ?options, "Registered device plugin endpoint");
    let registered = DevicePluginEvent::Registered {
        resource: resource.clone(),
        endpoint,
        options,
        plugin: plugin.clone(),
    };
    let still_reporting = context.report(registered).await && watch(&context, &plugin).await;
    plugin.mark_stopped();
    if still_reporting {
        info!(resource = %resource, endpoint, "Device plugin endpoint stopped");
        context
            .report(DevicePluginEvent::Stopped { resource, endpoint })
            .await;
    }
}

/// Reads `ListAndWatch` until it ends or fails (true: report `Stopped`), or until shutdown or
/// the receiver going away (false: report nothing more).
async fn watch(context: &Context, plugin: &GrpcDevicePlugin) -> bool {
    let resource = plugin.resource();
    let endpoint = plugin.endpoint();
    let mut client = plugin.client();
    let opened = tokio::select! {
        biased;
        () = context.shutdown.cancelled() => return false,
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

/// Connects to a plugin's socket, trying again until `timeout` (Go's blocking dial). The
/// channel reconnects by itself after a broken connection, as a Go `ClientConn` does.
pub(super) async fn dial(socket: &Path, timeout: Duration) -> Result<Channel, String> {
    let mut last_error = String::from("no connection attempt finished");
    let attempts = async {
        let mut pause = DIAL_RETRY_MIN;
        loop {
            match connect(socket).await {
                Ok(channel) => return channel,
                Err(e) => {
                    last_error = e;
                    debug!(socket = %socket.display(), error = %last_error, "Device plugin not reachable yet");
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(DIAL_RETRY_MAX);
        }
    };
    let dialled = tokio::time::timeout(timeout, attempts).await;
    dialled.map_err(|_| {
        format!(
            "failed to dial device plugin: no connection within {}s: {last_error}",
            timeout.as_secs_f64()
        )
    })
}

/// One attempt to connect to `socket`.
async fn connect(socket: &Path) -> Result<Channel, String> {
    let path = socket.to_path_buf();
    // The URI is never resolved: the connector dials the socket.
    Endpoint::from_static("http://device-plugin.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .map_err(|e| error_chain(&e))
}

/// An error and its sources, `: `-separated (tonic's transport error says little alone).
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn options_from(o: api::DevicePluginOptions) -> DevicePluginOptions {
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
