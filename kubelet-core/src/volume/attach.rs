//! Attachable volumes (Go's `VolumesInUse` and `VerifyControllerAttachedVolume` in the
//! volume manager, and the CSI attacher's `WaitForAttach`): CSI persistent volumes whose
//! driver needs attaching (`attachRequired`, or no CSIDriver object).
//!
//! The attach/detach controller attaches such a volume (it creates the VolumeAttachment the
//! driver's external attacher answers) and must not detach it while the node may still
//! use it: the node says so in `status.volumesInUse`, with Go's unique names
//! (`kubernetes.io/csi/<driver>^<handle>`).
//!
//! # States of one volume on this node
//! ```text
//!             set-up of a pod starts            stage or publish succeeded
//!   (none) ───────────────────────────► wanted ─────────────────────────► mounted
//!      ▲      (the pod is forgotten:                                         │
//!      │       torn down or orphaned)                                        │
//!      └─────────────────────────────────────────────────────────────────────┘
//!               no pod publishes it any more and it is unstaged
//! ```
//! A volume is *in use* while some pod wants it or it is mounted. [`VolumeManager::volumes_in_use`]
//! answers `None` until the volumes found on disk at start ([`VolumeManager::reconstruct_in_use`])
//! are counted (Go reports nothing before its reconciler has synced, so a restarted kubelet
//! never tells the controller its mounted volumes are free).
//!
//! A pod's set-up of such a volume goes on only when (in Go's order) the node status has
//! reported the volume in use ([`VolumeManager::mark_volumes_reported_in_use`], called by
//! whoever writes the node status after each successful write), the node's
//! `status.volumesAttached` lists it, and its VolumeAttachment (named by
//! [`super::csi::attachment_name`]) is attached; the attachment's metadata is the driver's
//! `publish_context` for stage and publish. Each check that fails is an error the pod's
//! sync reports and retries.
//!
//! Who calls: the CSI set-up and teardown (`csi`), the engine at start
//! (`reconstruct_in_use`), the node status writer (`volumes_in_use`,
//! `mark_volumes_reported_in_use`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use super::csi::{staged_volume_data, volume_data_under, DriverPolicy, VolumeData, PLUGIN_DIR};
use super::{blocking, VolumeError, VolumeManager};

/// Go's unique name of a CSI volume (`GetUniqueVolumeNameFromSpec`): the plugin's name, then
/// the driver and the handle joined by `^`.
pub fn unique_volume_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

/// What the manager knows of attachable volumes (see the module docs).
#[derive(Debug, Default)]
pub(super) struct AttachState {
    /// The volumes on disk are counted.
    synced: bool,
    /// Pod uid → PV → unique name: pods whose set-up wants the volume.
    wanted: HashMap<String, BTreeMap<String, String>>,
    /// PV → unique name: staged or published here.
    mounted: BTreeMap<String, String>,
    /// The unique names the node status last reported in use.
    reported: HashSet<String>,
}

impl AttachState {
    fn in_use(&self) -> BTreeSet<String> {
        self.wanted
            .values()
            .flat_map(|m| m.values())
            .chain(self.mounted.values())
            .cloned()
            .collect()
    }
}

fn attach_error(volume: &str, message: String) -> VolumeError {
    VolumeError::Csi {
        volume: volume.to_string(),
        step: "attach",
        message,
    }
}

impl VolumeManager {
    fn attach(&self) -> std::sync::MutexGuard<'_, AttachState> {
        self.attach.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `change` on the state and wakes the node status writer when the set in use
    /// changed.
    fn change_in_use(&self, change: impl FnOnce(&mut AttachState)) {
        let changed = {
            let mut state = self.attach();
            let before = state.in_use();
            change(&mut state);
            state.synced && state.in_use() != before
        };
        if changed {
            self.in_use_changed.notify_one();
        }
    }

    /// The unique names of the attachable volumes this node uses, sorted (Go's
    /// `GetVolumesInUse`); `None` until [`VolumeManager::reconstruct_in_use`] ran.
    pub fn volumes_in_use(&self) -> Option<Vec<String>> {
        let state = self.attach();
        state.synced.then(|| state.in_use().into_iter().collect())
    }

    /// The node status now reports these volumes in use (Go's
    /// `MarkVolumesAsReportedInUse`): their set-ups may go on.
    pub fn mark_volumes_reported_in_use(&self, names: &[String]) {
        self.attach().reported = names.iter().cloned().collect();
    }

    /// Counts the attachable CSI volumes found on disk (staged, or published in a pod's
    /// directory) as mounted, then starts answering [`VolumeManager::volumes_in_use`]. A
    /// driver whose CSIDriver object cannot be read counts as attachable (the safe side).
    pub async fn reconstruct_in_use(&self) {
        let found = match (self.pods_dir.clone(), self.csi.is_some()) {
            (Some(pods_dir), true) => {
                let pv_root = self.csi_pv_root();
                blocking(move || Ok(volumes_on_disk(&pods_dir, &pv_root)))
                    .await
                    .unwrap_or_default()
            }
            _ => Vec::new(),
        };
        let mut attachable: HashMap<String, bool> = HashMap::new();
        let mut mounted = BTreeMap::new();
        for data in found {
            let required = match attachable.get(&data.driver_name) {
                Some(r) => *r,
                None => {
                    let r = match self
                        .csi_driver_object(&data.spec_vol_id, &data.driver_name)
                        .await
                    {
                        Ok(object) => DriverPolicy::of(object.as_ref()).attach_required,
                        Err(_) => true,
                    };
                    attachable.insert(data.driver_name.clone(), r);
                    r
                }
            };
            if required {
                mounted.insert(
                    data.spec_vol_id.clone(),
                    unique_volume_name(&data.driver_name, &data.volume_handle),
                );
            }
        }
        {
            let mut state = self.attach();
            state.mounted.extend(mounted);
            state.synced = true;
        }
        self.in_use_changed.notify_one();
    }

    /// The pod's set-up wants the attachable volume `pv`.
    pub(super) fn want_attached(&self, uid: &str, pv: &str, unique: &str) {
        self.change_in_use(|s| {
            s.wanted
                .entry(uid.to_string())
                .or_default()
                .insert(pv.to_string(), unique.to_string());
        });
    }

    /// The attachable volume `pv` is staged or published here.
    pub(super) fn mark_mounted(&self, pv: &str, unique: &str) {
        self.change_in_use(|s| {
            s.mounted.insert(pv.to_string(), unique.to_string());
        });
    }

    /// No pod publishes `pv` any more and it is not staged.
    pub(super) fn mark_unmounted(&self, pv: &str) {
        self.change_in_use(|s| {
            s.mounted.remove(pv);
        });
    }

    /// The pod's volumes are torn down: it wants none any more.
    pub(super) fn forget_pod_volumes(&self, uid: &str) {
        self.change_in_use(|s| {
            s.wanted.remove(uid);
        });
    }

    /// Only pods `keep` names want volumes (housekeeping).
    pub(super) fn retain_pods_wanting(&self, keep: &dyn Fn(&str) -> bool) {
        self.change_in_use(|s| s.wanted.retain(|uid, _| keep(uid)));
    }

    /// Whether the attach/detach controller attached the volume to this node, in Go's
    /// order (see the module docs); the VolumeAttachment's metadata when it did.
    pub(super) async fn verify_attached(
        &self,
        pv: &str,
        unique: &str,
        attachment: &str,
    ) -> Result<BTreeMap<String, String>, VolumeError> {
        if !self.attach().reported.contains(unique) {
            return Err(attach_error(
                pv,
                format!("Volume {unique} has not been added to the list of VolumesInUse in the node's volume status"),
            ));
        }
        if let Some(lister) = self.node_lister.as_ref() {
            let node = lister
                .node()
                .ok_or_else(|| attach_error(pv, "the Node object is not known yet".to_string()))?;
            let attached = node
                .status
                .as_ref()
                .and_then(|s| s.volumes_attached.as_ref())
                .is_some_and(|a| a.iter().any(|v| v.name == unique));
            if !attached {
                return Err(attach_error(
                    pv,
                    format!("Volume {unique} not attached according to node status"),
                ));
            }
        }
        let va = self
            .store
            .volume_attachment(attachment)
            .await
            .map_err(|e| {
                attach_error(
                    pv,
                    format!("volume attachment {attachment} cannot be read: {e}"),
                )
            })?;
        if va.metadata.deletion_timestamp.is_some() {
            return Err(attach_error(
                pv,
                format!("volume attachment {attachment} is being deleted"),
            ));
        }
        let status = va.status.unwrap_or_default();
        if status.attached {
            return Ok(status.attachment_metadata.unwrap_or_default());
        }
        let message = match status.attach_error.and_then(|e| e.message) {
            Some(m) => format!("volume attachment {attachment} failed: {m}"),
            None => format!("volume attachment {attachment} is not attached yet"),
        };
        Err(attach_error(pv, message))
    }
}

/// The persistent CSI volumes on disk: staged (`<pv_root>/<pv>/vol_data.json`) or published
/// in a pod's directory.
fn volumes_on_disk(pods_dir: &Path, pv_root: &Path) -> Vec<VolumeData> {
    let mut out = staged_volume_data(pv_root);
    for pod in std::fs::read_dir(pods_dir).into_iter().flatten().flatten() {
        let plugin = pod
            .path()
            .join("volumes")
            .join(format!("kubernetes.io~{PLUGIN_DIR}"));
        out.extend(
            volume_data_under(&plugin)
                .into_iter()
                .map(|(_, data)| data)
                .filter(|data| data.lifecycle_mode != "Ephemeral"),
        );
    }
    out
}
