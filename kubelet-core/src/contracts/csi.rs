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

/// Why a call to a CSI driver failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CsiCallError {
    /// No driver of that name is registered (Go's words).
    #[error("driver name {0} not found in the list of registered CSI drivers")]
    NotRegistered(String),
    /// The driver could not be reached or answered an error (the message as Go prints it).
    #[error("{0}")]
    Driver(String),
}

/// A CSI access mode (Go's `asCSIAccessModeV1` of the volume's first access mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsiAccessMode {
    /// `ReadWriteOnce` (and the default).
    SingleNodeWriter,
    /// `ReadOnlyMany`.
    MultiNodeReaderOnly,
    /// `ReadWriteMany`.
    MultiNodeMultiWriter,
    /// Anything else.
    Unknown,
}

impl CsiAccessMode {
    /// The mode of a volume's first access mode (`ReadWriteOnce` when it has none).
    pub fn of(access_modes: Option<&[String]>) -> Self {
        match access_modes.and_then(|m| m.first()).map(String::as_str) {
            None | Some("ReadWriteOnce") => CsiAccessMode::SingleNodeWriter,
            Some("ReadOnlyMany") => CsiAccessMode::MultiNodeReaderOnly,
            Some("ReadWriteMany") => CsiAccessMode::MultiNodeMultiWriter,
            Some(_) => CsiAccessMode::Unknown,
        }
    }
}

/// What `NodeStageVolume` and `NodePublishVolume` carry (a filesystem volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiMountRequest {
    /// The volume's ID in the driver (`volumeHandle`).
    pub volume_id: String,
    /// `publish_context` (from the VolumeAttachment; empty without attach).
    pub publish_context: BTreeMap<String, String>,
    /// The staging path (`globalmount`); publish: empty when the driver does not stage.
    pub staging_path: String,
    /// Publish: the pod's target path; stage: empty.
    pub target_path: String,
    /// The access mode.
    pub access_mode: CsiAccessMode,
    /// `fsType`.
    pub fs_type: String,
    /// The volume's `mountOptions` (`mount_flags`).
    pub mount_flags: Vec<String>,
    /// Publish: read-only.
    pub read_only: bool,
    /// The stage or publish secret's data.
    pub secrets: BTreeMap<String, String>,
    /// `volume_context`: the volume's attributes (publish: with the pod's when the driver
    /// asks for them).
    pub volume_context: BTreeMap<String, String>,
    /// A raw block volume: the capability's access type is `Block` (`fs_type` and
    /// `mount_flags` unused), the target path a file for the device.
    pub block: bool,
}

/// What `NodeExpandVolume` carries (Go's `csiResizeOptions` of a filesystem volume).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiExpandRequest {
    /// The volume's ID in the driver (`volumeHandle`).
    pub volume_id: String,
    /// Where the volume is mounted: the staging path right after staging, the pod's target
    /// path after publishing.
    pub volume_path: String,
    /// The volume's staging path (`globalmount`; Go passes it whether or not the driver stages).
    pub staging_path: String,
    /// The new size in bytes (`capacity_range.required_bytes`).
    pub required_bytes: i64,
    /// The access mode (of the PV's first access mode).
    pub access_mode: CsiAccessMode,
    /// `fsType`.
    pub fs_type: String,
    /// The volume's `mountOptions`.
    pub mount_flags: Vec<String>,
}

/// The calls the volume manager makes on registered CSI drivers, by driver name (Go's
/// `csiDriverClient`). Every call is bounded by the implementation's timeout.
#[async_trait]
pub trait CsiNodeService: Send + Sync {
    /// Whether the driver stages volumes (`STAGE_UNSTAGE_VOLUME` in
    /// `NodeGetCapabilities`).
    async fn supports_stage(&self, driver: &str) -> Result<bool, CsiCallError>;
    /// `NodeStageVolume`.
    async fn stage(&self, driver: &str, request: &CsiMountRequest) -> Result<(), CsiCallError>;
    /// `NodePublishVolume`.
    async fn publish(&self, driver: &str, request: &CsiMountRequest) -> Result<(), CsiCallError>;
    /// `NodeUnpublishVolume`.
    async fn unpublish(
        &self,
        driver: &str,
        volume_id: &str,
        target_path: &str,
    ) -> Result<(), CsiCallError>;
    /// `NodeUnstageVolume`.
    async fn unstage(
        &self,
        driver: &str,
        volume_id: &str,
        staging_path: &str,
    ) -> Result<(), CsiCallError>;
    /// `NodeExpandVolume` when the driver has `EXPAND_VOLUME`; `Ok(false)` when it has not
    /// (nothing is called). Default: `Ok(false)`.
    async fn expand(
        &self,
        _driver: &str,
        _request: &CsiExpandRequest,
    ) -> Result<bool, CsiCallError> {
        Ok(false)
    }
    /// `NodeGetVolumeStats` of a published volume at `volume_path`; `None` when the driver
    /// does not report them (no `GET_VOLUME_STATS` capability). Default: `None`.
    async fn volume_stats(
        &self,
        _driver: &str,
        _volume_id: &str,
        _volume_path: &str,
    ) -> Result<Option<CsiVolumeUsage>, CsiCallError> {
        Ok(None)
    }
}

/// A volume's usage as its driver reports it (`NodeGetVolumeStats`: the `BYTES` and `INODES`
/// entries; what the driver leaves out is 0, as Go reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsiVolumeUsage {
    /// Bytes available.
    pub available_bytes: u64,
    /// Total bytes.
    pub capacity_bytes: u64,
    /// Bytes used.
    pub used_bytes: u64,
    /// Inodes free.
    pub inodes_free: u64,
    /// Total inodes.
    pub inodes: u64,
    /// Inodes used.
    pub inodes_used: u64,
}
