//! `persistentVolumeClaim` volumes: the claim resolved to its PersistentVolume the way Go's
//! desired-state populator resolves it (`getPVCExtractPV`, `getPVSpec`: the claim must be
//! bound and not being deleted, the volume must point back at the claim's uid), the volume's
//! `nodeAffinity` checked against the node's labels before anything is mounted (Go's
//! `checkNodeAffinity` in the mount operation), and which volume types kubelet-rs mounts.
//!
//! The claim and the volume are read afresh at every try (as Go does), so a claim bound
//! after a pod was admitted is seen at the next sync; once a pod's volume is set up it is not
//! resolved again (see [`super::VolumeManager::setup_pod`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};

use crate::admission::{term_matches, NodeInfo};
use crate::objects::{ObjectError, ObjectStore};

/// Why a claim could not be resolved to a volume, in Go's words.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ClaimError {
    /// The claim could not be read.
    #[error("failed to fetch PVC from API server: {0}")]
    FetchClaim(ObjectError),
    /// The claim has a deletion timestamp (Go's StorageObjectInUseProtection: a pod must not
    /// start on a claim that is going away).
    #[error("PVC is being deleted")]
    BeingDeleted,
    /// The claim's phase is not `Bound`.
    #[error("PVC is not bound")]
    NotBound,
    /// The claim is bound but names no volume.
    #[error("PVC has empty pvc.Spec.VolumeName")]
    NoVolumeName,
    /// The volume could not be read.
    #[error("failed to fetch PV {name} from API server: {error}")]
    FetchVolume {
        /// The volume's name.
        name: String,
        /// The store's error.
        error: ObjectError,
    },
    /// The volume is not bound to any claim yet.
    #[error("found PV object {name} but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim")]
    VolumeNotBound {
        /// The volume's name.
        name: String,
    },
    /// The volume is bound to another claim (an older one of the same name, say).
    #[error("found PV object {name} but its pv.Spec.ClaimRef.UID {found} does not point to claim.UID {expected}")]
    OtherClaim {
        /// The volume's name.
        name: String,
        /// The uid in the volume's `claimRef`.
        found: String,
        /// The claim's uid.
        expected: String,
    },
    /// A filesystem volume is used as a device or a block volume is mounted as a directory.
    #[error("volume {volume} has volumeMode {mode}, but is specified in {used_in}")]
    VolumeMode {
        /// The pod's volume name.
        volume: String,
        /// The volume's mode.
        mode: String,
        /// `volumeMounts` or `volumeDevices`.
        used_in: &'static str,
    },
}

/// A claim resolved to the volume bound to it.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundVolume {
    /// The PersistentVolume.
    pub pv: PersistentVolume,
    /// The volume's name (the directory name under the pod's volumes, as in Go).
    pub name: String,
    /// Mounted read-only: the pod's `persistentVolumeClaim.readOnly`.
    pub read_only: bool,
}

impl BoundVolume {
    /// The volume's spec (a volume without one has no source and is refused later).
    pub fn spec(&self) -> PersistentVolumeSpec {
        self.pv.spec.clone().unwrap_or_default()
    }

    /// `volumeMode` (default `Filesystem`).
    pub fn mode(&self) -> String {
        self.pv
            .spec
            .as_ref()
            .and_then(|s| s.volume_mode.clone())
            .unwrap_or_else(|| "Filesystem".into())
    }
}

/// Resolves the claim `namespace/claim` of the pod's volume `volume` (Go's
/// `createVolumeSpec` for a claim): read the claim, check it, read its volume, check that it
/// points back at the claim, and check the mode against how the pod uses the volume
/// (`mounted`: in some container's `volumeMounts`; `as_device`: in `volumeDevices`).
pub async fn resolve(
    store: &dyn ObjectStore,
    namespace: &str,
    claim: &str,
    read_only: bool,
    volume: &str,
    mounted: bool,
    as_device: bool,
) -> Result<BoundVolume, ClaimError> {
    let pvc = store
        .persistent_volume_claim(namespace, claim)
        .await
        .map_err(ClaimError::FetchClaim)?;
    if pvc.metadata.deletion_timestamp.is_some() {
        return Err(ClaimError::BeingDeleted);
    }
    let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Bound") {
        return Err(ClaimError::NotBound);
    }
    let name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|n| !n.is_empty())
        .ok_or(ClaimError::NoVolumeName)?;
    let pv = store
        .persistent_volume(&name)
        .await
        .map_err(|error| ClaimError::FetchVolume {
            name: name.clone(),
            error,
        })?;
    let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(ClaimError::VolumeNotBound { name });
    };
    let found = claim_ref.uid.clone().unwrap_or_default();
    let expected = pvc.metadata.uid.clone().unwrap_or_default();
    if found != expected {
        return Err(ClaimError::OtherClaim {
            name,
            found,
            expected,
        });
    }
    let bound = BoundVolume {
        pv,
        name,
        read_only,
    };
    let mode = bound.mode();
    let misuse = if mounted && mode != "Filesystem" {
        Some("volumeMounts")
    } else if as_device && mode != "Block" {
        Some("volumeDevices")
    } else {
        None
    };
    if let Some(used_in) = misuse {
        return Err(ClaimError::VolumeMode {
            volume: volume.to_string(),
            mode,
            used_in,
        });
    }
    Ok(bound)
}

/// Go's `CheckNodeAffinity`: a volume with required node affinity is usable only on a node
/// whose labels match one of its terms (matched as a Node with these labels and no name).
pub fn check_node_affinity(
    pv: &PersistentVolume,
    node_labels: &BTreeMap<String, String>,
) -> Result<(), &'static str> {
    let Some(required) = pv
        .spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    else {
        return Ok(());
    };
    let node = NodeInfo {
        labels: node_labels.clone(),
        ..NodeInfo::default()
    };
    if required
        .node_selector_terms
        .iter()
        .any(|t| term_matches(t, &node))
    {
        Ok(())
    } else {
        Err("no matching NodeSelectorTerms")
    }
}

/// The PersistentVolume types kubelet-rs mounts.
#[derive(Debug, Clone, PartialEq)]
pub enum VolumeSource {
    /// `local`: a directory (or device) on this node, at this path.
    Local(String),
    /// `hostPath`: a path on the host, with its optional `type`.
    HostPath {
        /// The path.
        path: String,
        /// The `type` check.
        type_: Option<String>,
    },
    /// `csi`: a volume of a CSI driver.
    Csi(Box<k8s_openapi::api::core::v1::CSIPersistentVolumeSource>),
}

/// The volume's source, or the name of its (unsupported) type.
pub fn source_of(spec: &PersistentVolumeSpec) -> Result<VolumeSource, String> {
    if let Some(l) = spec.local.as_ref() {
        return Ok(VolumeSource::Local(l.path.clone()));
    }
    if let Some(c) = spec.csi.as_ref() {
        return Ok(VolumeSource::Csi(Box::new(c.clone())));
    }
    if let Some(h) = spec.host_path.as_ref() {
        return Ok(VolumeSource::HostPath {
            path: h.path.clone(),
            type_: h.type_.clone(),
        });
    }
    const NOT_SOURCES: [&str; 8] = [
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeMode",
    ];
    let kind =
        super::setup::first_field_except(spec, &NOT_SOURCES).unwrap_or_else(|| "no source".into());
    Err(kind)
}

#[cfg(test)]
#[path = "claims_tests.rs"]
pub(super) mod tests;
