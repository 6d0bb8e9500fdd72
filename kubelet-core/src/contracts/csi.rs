//! The contract for what CSI drivers' registrations change on the node's API objects (Go's
//! `nodeinfomanager`): when a driver registers, the kubelet records it with the node ID and
//! topology the driver reported (`NodeGetInfo`); when its socket goes, it is removed again.
//!
//! In cluster mode an implementation over the API server writes the `CSINode` object's
//! `drivers[]`, the Node's `csi.volume.kubernetes.io/nodeid` annotation and the topology
//! labels; in standalone mode [`NoCsiNodeObjects`] records nothing.

use std::collections::BTreeMap;

use async_trait::async_trait;

/// What a CSI driver reported about this node when it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiDriverNode {
    /// The driver's name (`GetInfo` of its registration socket).
    pub driver: String,
    /// The node's ID in the driver's terms (`NodeGetInfo.node_id`).
    pub node_id: String,
    /// How many volumes of the driver the node can take; 0: no limit reported.
    pub max_volumes: i64,
    /// The topology segments the node is in (`NodeGetInfo.accessible_topology`).
    pub topology: BTreeMap<String, String>,
}

/// Records CSI drivers on the node's API objects. See the module docs. Calls may take a
/// while (API round trips); callers bound them with their own timeout.
#[async_trait]
pub trait CsiNodeObjects: Send + Sync {
    /// The driver registered (Go's `InstallCSIDriver`).
    async fn install_driver(&self, node: &CsiDriverNode) -> Result<(), String>;
    /// The driver is gone (Go's `UninstallCSIDriver`).
    async fn uninstall_driver(&self, driver: &str) -> Result<(), String>;
}

/// The standalone [`CsiNodeObjects`]: there are no API objects to record drivers on.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCsiNodeObjects;

#[async_trait]
impl CsiNodeObjects for NoCsiNodeObjects {
    async fn install_driver(&self, _node: &CsiDriverNode) -> Result<(), String> {
        Ok(())
    }
    async fn uninstall_driver(&self, _driver: &str) -> Result<(), String> {
        Ok(())
    }
}
