//! The plugin manager's handler for `DevicePlugin` plugins (Go's device manager as a
//! `cache.PluginHandler`: `GetWatcherHandler`, `ValidatePlugin`, `RegisterPlugin`,
//! `DeRegisterPlugin`). A plugin that registers through `<root-dir>/plugins_registry` is
//! checked as a `Register` call is, dialled at its endpoint, asked for its options, and then
//! served by the same endpoint task as a `Register`ed plugin ([`super::endpoint::spawn`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::devices::DEVICE_PLUGIN_API_VERSION;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info};

use super::api;
use super::api::device_plugin_client::DevicePluginClient;
use super::endpoint;
use super::registration::{self, Context, WatcherEndpoint};
use crate::plugin_manager::PluginHandler;

/// The file in the device plugin socket directory that tells plugins to register through
/// the plugin watcher rather than the `Register` call (Go's `GetWatcherHandler`).
pub const DEPRECATION_FILE: &str = "DEPRECATION";

/// Deadline of `GetDevicePluginOptions` during a registration (Go sets none).
pub const OPTIONS_TIMEOUT: Duration = Duration::from_secs(10);

/// The `DevicePlugin` handler of the plugin manager, obtained from a started
/// [`GrpcDevicePluginRegistry`](super::GrpcDevicePluginRegistry) with
/// [`watcher_handler`](super::GrpcDevicePluginRegistry::watcher_handler). The plugin's name
/// is the extended resource it serves; its endpoint is the socket of its `DevicePlugin`
/// service.
pub struct DevicePluginHandler {
    context: Arc<Context>,
}

impl fmt::Debug for DevicePluginHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevicePluginHandler")
            .field("socket_dir", &self.context.socket_dir)
            .finish_non_exhaustive()
    }
}

impl DevicePluginHandler {
    pub(super) fn new(context: Arc<Context>) -> DevicePluginHandler {
        DevicePluginHandler { context }
    }

    fn endpoints(&self) -> MutexGuard<'_, std::collections::HashMap<String, WatcherEndpoint>> {
        self.context
            .watcher_endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Creates the empty `<socket_dir>/DEPRECATION` (truncating one that exists); a failure is
/// logged only, as Go's `GetWatcherHandler` does.
pub(super) async fn write_deprecation_file(socket_dir: &Path) {
    let path = socket_dir.join(DEPRECATION_FILE);
    match tokio::fs::File::create(&path).await {
        Ok(_) => debug!(path = %path.display(), "Created deprecation file"),
        Err(e) => error!(path = %path.display(), error = %e, "Failed to create deprecation file"),
    }
}

/// Go's `ValidatePlugin` checks with its messages: the versions must include `v1beta1`, the
/// name must be an extended resource name.
fn validate(name: &str, versions: &[String]) -> Result<(), String> {
    if !versions.iter().any(|v| v == DEVICE_PLUGIN_API_VERSION) {
        return Err(format!(
            "manager version, {DEVICE_PLUGIN_API_VERSION}, is not among plugin supported versions [{}]",
            versions.join(" ")
        ));
    }
    if !registration::is_valid_resource_name(name) {
        return Err(format!(
            "invalid name of device plugin socket: {}",
            registration::invalid_resource_name(name)
        ));
    }
    Ok(())
}

#[async_trait]
impl PluginHandler for DevicePluginHandler {
    fn validate_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        info!(
            resource = name,
            endpoint,
            ?versions,
            "Got device plugin from the plugin watcher"
        );
        validate(name, versions)
    }

    async fn register_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        info!(
            resource = name,
            endpoint,
            ?versions,
            "Registering device plugin"
        );
        let context = &self.context;
        let socket = PathBuf::from(endpoint);
        let shutting_down = || "the device plugin registry is shutting down".to_string();
        let dialled = tokio::select! {
            biased;
            () = context.shutdown.cancelled() => return Err(shutting_down()),
            dialled = endpoint::dial(&socket, context.dial_timeout) => dialled,
        };
        let channel = dialled
            .map_err(|e| format!("failed to dial device plugin with socketPath {endpoint}: {e}"))?;
        let mut client = DevicePluginClient::new(channel.clone());
        let mut request = tonic::Request::new(api::Empty {});
        request.set_timeout(OPTIONS_TIMEOUT);
        let asked = tokio::select! {
            biased;
            () = context.shutdown.cancelled() => return Err(shutting_down()),
            asked = tokio::time::timeout(OPTIONS_TIMEOUT, client.get_device_plugin_options(request)) => asked,
        };
        let options = match asked {
            Ok(Ok(options)) => endpoint::options_from(options.into_inner()),
            Ok(Err(status)) => {
                return Err(format!(
                    "failed to get device plugin options: {}",
                    crate::uds::status_message(&status)
                ))
            }
            Err(_) => {
                return Err(format!(
                    "failed to get device plugin options: no answer within {}s",
                    OPTIONS_TIMEOUT.as_secs()
                ))
            }
        };
        // From here on nothing awaits: the endpoint is started and recorded together.
        let stop = CancellationToken::new();
        let number = endpoint::spawn(
            context,
            name.to_string(),
            socket,
            channel,
            options,
            stop.clone(),
        );
        // A newer registration of the resource replaces the older one here; the older
        // endpoint runs on until its stream ends, as in Go.
        self.endpoints().insert(
            name.to_string(),
            WatcherEndpoint {
                endpoint: number,
                stop,
            },
        );
        Ok(())
    }

    fn deregister_plugin(&self, name: &str) {
        match self.endpoints().remove(name) {
            Some(current) => {
                info!(
                    resource = name,
                    endpoint = current.endpoint,
                    "Deregistering device plugin: stopping its endpoint"
                );
                current.stop.cancel();
            }
            None => debug!(resource = name, "Deregistering device plugin: no endpoint"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn validation_messages_are_gos() {
        assert_eq!(validate("example.com/gpu", &versions(&["v1beta1"])), Ok(()));
        assert_eq!(
            validate("example.com/gpu", &versions(&["v1alpha", "v1beta1", "v2"])),
            Ok(())
        );
        assert_eq!(
            validate("example.com/gpu", &versions(&["v1alpha", "v2"])),
            Err(
                "manager version, v1beta1, is not among plugin supported versions [v1alpha v2]"
                    .to_string()
            )
        );
        assert_eq!(
            validate("example.com/gpu", &[]),
            Err("manager version, v1beta1, is not among plugin supported versions []".to_string())
        );
        assert_eq!(
            validate("gpu", &versions(&["v1beta1"])),
            Err(
                "invalid name of device plugin socket: the ResourceName \"gpu\" is invalid"
                    .to_string()
            )
        );
    }
}
