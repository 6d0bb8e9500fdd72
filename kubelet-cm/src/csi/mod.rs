//! CSI drivers on the node (Go's `pkg/volume/csi`, CSI spec v1): drivers register through
//! the plugin manager ([`registration`], type [`CSI_PLUGIN`](crate::plugin_manager::CSI_PLUGIN)),
//! the kubelet keeps the registered ones in [`CsiDrivers`] (name → endpoint, version, what
//! `NodeGetInfo` said) and calls them through [`client`]; the volume manager reaches them
//! through [`node_service::GrpcCsiNodeService`].
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use kubelet_cm::csi::{CsiDrivers, registration::CsiRegistrationHandler};
//! use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, CSI_PLUGIN};
//! let drivers = Arc::new(CsiDrivers::default());
//! let handler = Arc::new(CsiRegistrationHandler::new(
//!     drivers.clone(),
//!     Arc::new(kubelet_core::csi::NoCsiNodeObjects),
//! )) as Arc<dyn PluginHandler>;
//! let dir = kubelet_cm::plugin_manager::plugins_registry_dir("/var/lib/kubelet".as_ref());
//! let manager = PluginManager::new(dir, BTreeMap::from([(CSI_PLUGIN.to_string(), handler)]));
//! ```

pub mod api;
pub mod client;
pub mod node_service;
pub mod registration;
pub mod version;

use std::collections::BTreeMap;
use std::sync::Mutex;

use kubelet_core::csi::CsiDriverNode;

use version::Version;

/// A registered CSI driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriver {
    /// The driver's name.
    pub name: String,
    /// Its CSI socket (`unix:///path` or a path).
    pub endpoint: String,
    /// The highest CSI version both sides support.
    pub version: Version,
    /// What `NodeGetInfo` said; `None` while the registration is still running.
    pub node: Option<CsiDriverNode>,
}

/// The registered CSI drivers by name (Go's `csiDrivers` store).
#[derive(Debug, Default)]
pub struct CsiDrivers {
    drivers: Mutex<BTreeMap<String, CsiDriver>>,
}

impl CsiDrivers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CsiDriver>> {
        self.drivers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The driver `name`, when registered.
    pub fn get(&self, name: &str) -> Option<CsiDriver> {
        self.lock().get(name).cloned()
    }

    /// Every registered driver.
    pub fn all(&self) -> Vec<CsiDriver> {
        self.lock().values().cloned().collect()
    }

    fn set(&self, driver: CsiDriver) {
        self.lock().insert(driver.name.clone(), driver);
    }

    fn set_node(&self, name: &str, node: CsiDriverNode) {
        if let Some(d) = self.lock().get_mut(name) {
            d.node = Some(node);
        }
    }

    fn remove(&self, name: &str) {
        self.lock().remove(name);
    }
}
