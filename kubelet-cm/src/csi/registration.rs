//! CSI drivers taken from the plugin manager (Go's `csi.RegistrationHandler`): a driver's
//! registration socket (served by `node-driver-registrar` beside it, type `CSIPlugin`)
//! names the driver, its endpoint and CSI versions. Registering checks the versions, asks
//! the driver for the node's ID and topology (`NodeGetInfo`), records the driver in
//! [`CsiDrivers`] and on the node's API objects ([`CsiNodeObjects`]); a failure on the way
//! leaves neither record. Deregistering removes both.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::csi::{CsiDriverNode, CsiNodeObjects};

use super::client::CsiNodeClient;
use super::version::{format_list, highest_supported, Version};
use super::{CsiDriver, CsiDrivers};
use crate::plugin_manager::PluginHandler;

/// The prefix Go's CSI plugin puts on its messages.
const LOG_PREFIX: &str = "kubernetes.io/csi: ";

/// How long registration waits for the driver's socket, and then for `NodeGetInfo`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(8);
/// How long recording the driver on the node's API objects may take: with the calls above,
/// inside the plugin manager's 30 s bound on a registration, so a failure is cleaned up
/// here rather than cut off.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(12);

/// The plugin manager's handler of `CSIPlugin` sockets. See the module docs.
pub struct CsiRegistrationHandler {
    drivers: Arc<CsiDrivers>,
    objects: Arc<dyn CsiNodeObjects>,
}

impl CsiRegistrationHandler {
    /// A handler recording drivers in `drivers` and through `objects`.
    pub fn new(drivers: Arc<CsiDrivers>, objects: Arc<dyn CsiNodeObjects>) -> Self {
        CsiRegistrationHandler { drivers, objects }
    }

    /// Go's `validateVersions`: the highest supported version, which must be above that of a
    /// driver of the same name already registered.
    fn validate_versions(
        &self,
        caller: &str,
        name: &str,
        versions: &[String],
    ) -> Result<Version, String> {
        if versions.is_empty() {
            return Err(format!(
                "{LOG_PREFIX}{caller} for CSI driver {name:?} failed. Plugin returned an empty list for supported versions"
            ));
        }
        let highest = highest_supported(versions).map_err(|e| {
            format!(
                "{LOG_PREFIX}{caller} for CSI driver {name:?} failed. None of the versions specified {:?} are supported. err={e}",
                format_list(versions)
            )
        })?;
        // A registration that did not finish (its node info unknown) may be replaced.
        if let Some(existing) = self.drivers.get(name).filter(|d| d.node.is_some()) {
            if existing.version >= highest {
                return Err(format!(
                    "{LOG_PREFIX}{caller} for CSI driver {name:?} failed. Another driver with the same name is already registered with a higher supported version: {:?}",
                    existing.version.to_string()
                ));
            }
        }
        Ok(highest)
    }

    /// Removes the driver from both records (Go's `unregisterDriver`).
    async fn unregister(drivers: &CsiDrivers, objects: &dyn CsiNodeObjects, name: &str) {
        drivers.remove(name);
        if let Err(e) = objects.uninstall_driver(name).await {
            tracing::error!(driver = name, error = %e, "Error uninstalling CSI driver");
        }
    }
}

#[async_trait]
impl PluginHandler for CsiRegistrationHandler {
    fn validate_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        tracing::info!(driver = name, endpoint, versions = %versions.join(","), "Trying to validate a new CSI Driver");
        self.validate_versions("ValidatePlugin", name, versions)
            .map(|_| ())
            .map_err(|e| {
                format!("validation failed for CSI Driver {name} at endpoint {endpoint}: {e}")
            })
    }

    async fn register_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        tracing::info!(driver = name, endpoint, "Register new plugin");
        let version = self.validate_versions("RegisterPlugin", name, versions)?;
        self.drivers.set(CsiDriver {
            name: name.to_string(),
            endpoint: endpoint.to_string(),
            version,
            node: None,
        });
        let info = async {
            let mut client = CsiNodeClient::dial(endpoint, CALL_TIMEOUT).await?;
            client.node_get_info(CALL_TIMEOUT).await
        }
        .await;
        let info = match info {
            Ok(info) => info,
            Err(e) => {
                Self::unregister(&self.drivers, self.objects.as_ref(), name).await;
                return Err(e.to_string());
            }
        };
        let node = CsiDriverNode {
            driver: name.to_string(),
            node_id: info.node_id,
            max_volumes: info.max_volumes,
            topology: info.topology,
        };
        let installed = tokio::time::timeout(INSTALL_TIMEOUT, self.objects.install_driver(&node))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "recording the driver on the node's objects took over {}s",
                    INSTALL_TIMEOUT.as_secs()
                ))
            });
        if let Err(e) = installed {
            Self::unregister(&self.drivers, self.objects.as_ref(), name).await;
            return Err(e);
        }
        self.drivers.set_node(name, node);
        Ok(())
    }

    fn deregister_plugin(&self, name: &str) {
        tracing::info!(
            driver = name,
            "registrationHandler.DeRegisterPlugin request for plugin"
        );
        self.drivers.remove(name);
        // Must return at once: the API objects are updated on a task of their own (which
        // leaves the drivers' store alone: the driver may register again meanwhile).
        let (objects, name) = (self.objects.clone(), name.to_string());
        tokio::spawn(async move {
            if let Err(e) = objects.uninstall_driver(&name).await {
                tracing::error!(driver = %name, error = %e, "Error uninstalling CSI driver");
            }
        });
    }
}

#[cfg(test)]
#[path = "registration_tests.rs"]
mod tests;
