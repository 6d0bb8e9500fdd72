//! Why a volume operation failed: one variant per step, each naming the volume or path.

use std::path::PathBuf;

use super::atomic_writer::AtomicWriteError;
use super::claims::ClaimError;
use super::emptydir::EmptyDirError;
use super::hostpath::HostPathError;
use super::local::LocalError;
use super::subpath::SubpathError;
use crate::objects::ObjectError;

/// Why a volume operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// The volume's name cannot name a directory (it must be one path component: a DNS-1123
    /// label, as the API server validates; static pods are validated by their source, this
    /// guards every other way in).
    #[error("volume {volume:?}: the name must be a DNS-1123 label to name its directory")]
    InvalidName {
        /// Volume name.
        volume: String,
    },
    /// The volume type is not supported by this kubelet.
    #[error("volume {volume}: {kind} volumes are not supported")]
    Unsupported {
        /// Volume name.
        volume: String,
        /// The type.
        kind: String,
    },
    /// An emptyDir failed.
    #[error("volume {volume}: {error}")]
    EmptyDir {
        /// Volume name.
        volume: String,
        /// The error.
        error: EmptyDirError,
    },
    /// A hostPath check failed.
    #[error("volume {volume}: {error}")]
    HostPath {
        /// Volume name.
        volume: String,
        /// The error.
        error: HostPathError,
    },
    /// A `persistentVolumeClaim` could not be resolved to its volume (Go's words).
    #[error("error processing PVC {namespace}/{claim}: {error}")]
    Claim {
        /// The pod's namespace.
        namespace: String,
        /// The claim's name.
        claim: String,
        /// Why (boxed: the largest of the reasons).
        error: Box<ClaimError>,
    },
    /// The PersistentVolume's node affinity does not match this node.
    #[error("MountVolume.NodeAffinity check failed for volume {volume:?} : {message}")]
    NodeAffinity {
        /// The PersistentVolume's name.
        volume: String,
        /// Why.
        message: &'static str,
    },
    /// A `local` PersistentVolume could not be mounted.
    #[error("MountVolume.SetUp failed for volume {volume:?} : {error}")]
    Local {
        /// The PersistentVolume's name.
        volume: String,
        /// The error.
        error: LocalError,
    },
    /// A `local` PersistentVolume's block device could not be formatted or mounted (Go's
    /// "MountVolume.MountDevice failed for volume …").
    #[error("MountVolume.MountDevice failed for volume {volume:?} : {error}")]
    LocalDevice {
        /// The PersistentVolume's name.
        volume: String,
        /// The error.
        error: super::local_device::DeviceError,
    },
    /// A raw block volume could not be mapped for the pod (Go's "MapVolume.MapPodDevice
    /// failed for volume …").
    #[error("MapVolume.MapPodDevice failed for volume {volume:?} : {error}")]
    Block {
        /// The PersistentVolume's name.
        volume: String,
        /// The error.
        error: super::block::BlockError,
    },
    /// A container's `volumeDevices` entry cannot be satisfied (Go's words).
    #[error("{0}")]
    VolumeDevice(String),
    /// A CSI driver's step failed (Go's "MountVolume.SetUp failed for volume …").
    #[error("{step} failed for volume {volume:?} : {message}")]
    Csi {
        /// The PersistentVolume's name.
        volume: String,
        /// The step (`MountVolume.MountDevice`, `MountVolume.SetUp`, …).
        step: &'static str,
        /// The driver's or kubelet's message.
        message: String,
    },
    /// The volume has mount options its type takes none of (Go's check).
    #[error("MountVolume.MountOptionSupport check failed for volume {volume:?} : mount options are not supported for this volume type")]
    MountOptionsUnsupported {
        /// The PersistentVolume's name.
        volume: String,
    },
    /// A referenced config map, secret or token could not be read.
    #[error("volume {volume}: {error}")]
    Object {
        /// Volume name.
        volume: String,
        /// The store's error.
        error: ObjectError,
    },
    /// A listed key is missing from a config map or secret that is not optional.
    #[error("volume {volume}: {kind} references non-existent key: {key}")]
    MissingKey {
        /// Volume name.
        volume: String,
        /// "configmap" or "secret".
        kind: &'static str,
        /// The key.
        key: String,
    },
    /// A downward API field path is not supported.
    #[error("volume {volume}: unsupported fieldRef path {path:?}")]
    FieldRef {
        /// Volume name.
        volume: String,
        /// The path.
        path: String,
    },
    /// A downward API resource field cannot be resolved.
    #[error("volume {volume}: resourceFieldRef {resource:?}: {message}")]
    ResourceField {
        /// Volume name.
        volume: String,
        /// The resource.
        resource: String,
        /// Why.
        message: String,
    },
    /// Writing an API-data volume failed.
    #[error("volume {volume}: {error}")]
    Payload {
        /// Volume name.
        volume: String,
        /// The error.
        error: AtomicWriteError,
    },
    /// A pod directory operation failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What failed.
        op: &'static str,
        /// Where.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// One or more volumes of a pod could not be set up.
    #[error("Unable to attach or mount volumes: unmounted volumes=[{}]: {}", volumes.join(" "), messages.join("; "))]
    Mount {
        /// The pod ("ns/name").
        pod: String,
        /// Names of the failing volumes.
        volumes: Vec<String>,
        /// One message per failing volume.
        messages: Vec<String>,
    },
    /// A volumeMount names a volume the pod does not have (or that is not set up).
    #[error("cannot find volume {volume:?} to mount into container {container:?}")]
    VolumeNotFound {
        /// Container name.
        container: String,
        /// Volume name.
        volume: String,
    },
    /// A subPath could not be prepared (including refused escapes).
    #[error(
        "failed to prepare subPath for volumeMount {volume:?} of container {container:?}: {error}"
    )]
    Subpath {
        /// Container name.
        container: String,
        /// Volume name.
        volume: String,
        /// The error.
        error: SubpathError,
    },
    /// subPathExpr references variables that are not set.
    #[error("subPathExpr of volumeMount {volume:?} of container {container:?}: missing value for {missing}")]
    SubpathExpr {
        /// Container name.
        container: String,
        /// Volume name.
        volume: String,
        /// The missing variables.
        missing: String,
    },
    /// `mountPropagation` is unknown or not allowed for this container.
    #[error("volumeMount {volume:?} of container {container:?}: {message}")]
    Propagation {
        /// Container name.
        container: String,
        /// Volume name.
        volume: String,
        /// Why.
        message: String,
    },
    /// A pod directory still has something mounted below it; it is left in place.
    #[error("pod directory {path} still has mounts below it: {mounts:?}")]
    StillMounted {
        /// The pod directory.
        path: PathBuf,
        /// What is still mounted.
        mounts: Vec<PathBuf>,
    },
    /// The kubelet has no root directory, so the pod's volumes have nowhere to live.
    #[error("pod {pod} has volumes but the kubelet has no root directory")]
    NoRootDir {
        /// The pod ("ns/name").
        pod: String,
    },
    /// The pod's uid cannot name a directory (empty, `.`, `..`, `/` or NUL in it).
    #[error("pod {pod}: uid {uid:?} cannot name a pod directory")]
    UnsafeUid {
        /// The pod ("ns/name").
        pod: String,
        /// The uid.
        uid: String,
    },
    /// A blocking task did not finish.
    #[error("volume task failed: {0}")]
    Task(String),
}
