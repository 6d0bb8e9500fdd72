//! Expanding a CSI volume's filesystem on the node after its claim grew (Go's
//! `nodeExpandVolume`, with v1.20's `ExpandPersistentVolumes`, `ExpandCSIVolumes` and
//! `ExpandInUsePersistentVolumes` on by default).
//!
//! - **When**: the claim's `status.capacity` is below its PersistentVolume's `spec.capacity`
//!   ([`pending_size`]): the resizer grew the volume and left the filesystem to the node
//!   (`FileSystemResizePending`).
//! - **Where**, as Go: right after `NodeStageVolume` (the staging path as the volume path);
//!   after `NodePublishVolume` when the driver does not stage (the pod's target path); and at
//!   every later set-up of a pod that has the volume (in use: the target path). The staging
//!   path (`globalmount`) is passed in every case.
//! - **What**: `NodeExpandVolume` with the PV's capacity as `required_bytes` (a driver
//!   without `EXPAND_VOLUME` is an error, Go's "to not support node expansion"). A
//!   read-only volume is not expanded: a `FileSystemResizeFailed` event. On success a
//!   `FileSystemResizeSuccessful` event and the claim's status written
//!   ([`finished_status`]: the capacity of the PV, the resize conditions removed), only while
//!   the claim is as it was read (a conflict retries at the next sync).
//!
//! A failure while mounting fails the set-up (a `FailedMount`, retried); a failure for a
//! volume in use is a `FileSystemResizeFailed` event and never stops the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimCondition, Pod,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::stats::VolumeMeasure;
use super::{SetUpVolume, VolumeError, VolumeManager};
use crate::csi::{CsiAccessMode, CsiExpandRequest};
use crate::{pod, resources};

/// The claim conditions a finished resize removes (Go's `knownResizeConditions`).
pub const RESIZE_CONDITIONS: [&str; 2] = ["Resizing", "FileSystemResizePending"];

/// How many times the claim's status write is tried (see `finish_resize`).
pub const STATUS_WRITE_ATTEMPTS: u32 = 5;

/// Go's event reasons.
pub const RESIZE_SUCCEEDED: &str = "FileSystemResizeSuccessful";
/// See [`RESIZE_SUCCEEDED`].
pub const RESIZE_FAILED: &str = "FileSystemResizeFailed";

/// A note of a pod's volume set-up for its events, which the sync loop records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeEvent {
    /// A warning (else normal).
    pub warning: bool,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// The PV's capacity when the claim's `status.capacity` is below it (Go compares the two
/// `storage` quantities); `None` otherwise, or when either cannot be read.
pub fn pending_size(claim: &PersistentVolumeClaim, pv: &PersistentVolume) -> Option<Quantity> {
    let wanted = pv.spec.as_ref()?.capacity.as_ref()?.get("storage")?;
    let has = claim_storage(claim).unwrap_or(Ok(0)).ok()?;
    (resources::value(wanted).ok()? > has).then(|| wanted.clone())
}

/// The claim's `status.capacity` `storage` in bytes; `None` when it has none.
fn claim_storage(
    claim: &PersistentVolumeClaim,
) -> Option<Result<i64, crate::resources::QuantityError>> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .map(resources::value)
}

/// The claim's `status.capacity` and `status.conditions` once the node has expanded it to
/// `size` (Go's `MarkFSResizeFinished`): `storage` set, the resize conditions dropped.
pub fn finished_status(
    claim: &PersistentVolumeClaim,
    size: &Quantity,
) -> (
    BTreeMap<String, Quantity>,
    Vec<PersistentVolumeClaimCondition>,
) {
    let status = claim.status.clone().unwrap_or_default();
    let mut capacity = status.capacity.unwrap_or_default();
    capacity.insert("storage".into(), size.clone());
    let conditions = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !RESIZE_CONDITIONS.contains(&c.type_.as_str()))
        .collect();
    (capacity, conditions)
}

/// Go's `generateVolumeMsg`: `<prefix> for volume "<volume>" <suffix>`.
fn volume_msg(prefix: &str, volume: &str, suffix: &str) -> String {
    format!("{prefix} for volume {volume:?} {suffix}")
}

/// Where an expansion is asked for (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Right after staging.
    Staged,
    /// After publishing, or in use.
    Published,
}

impl VolumeManager {
    /// Expands the CSI PV `pv` mounted at `volume_path` when its claim's resize is pending
    /// (see the module docs). `Ok(false)`: not done yet (the driver does not stage and this is
    /// the staged phase: Go tries again after publishing).
    pub(super) async fn expand_if_pending(
        &self,
        p: &Pod,
        pv: &PersistentVolume,
        source: &CSIPersistentVolumeSource,
        read_only: bool,
        volume_path: &str,
        phase: Phase,
    ) -> Result<bool, VolumeError> {
        let pv_name = pv.metadata.name.clone().unwrap_or_default();
        let spec = pv.spec.clone().unwrap_or_default();
        // A bound PV names its claim; without one there is no claim to compare with.
        let Some((namespace, name)) = spec
            .claim_ref
            .as_ref()
            .and_then(|r| Some((r.namespace.clone().unwrap_or_default(), r.name.clone()?)))
        else {
            return Ok(true);
        };
        let failed = |message: String| VolumeError::Csi {
            volume: pv_name.clone(),
            step: "MountVolume.NodeExpandVolume",
            message,
        };
        let claim = self
            .store
            .persistent_volume_claim(&namespace, &name)
            .await
            .map_err(|e| failed(format!("mountVolume.NodeExpandVolume get PVC failed : {e}")))?;
        let Some(size) = pending_size(&claim, pv) else {
            return Ok(true);
        };
        let uid = pod::uid(p);
        if read_only {
            self.note(
                uid,
                true,
                RESIZE_FAILED,
                volume_msg(
                    "MountVolume.NodeExpandVolume failed",
                    &pv_name,
                    "requested read-only file system",
                ),
            );
            return Ok(true);
        }
        let Some(service) = self.csi.clone() else {
            return Ok(true);
        };
        if phase == Phase::Staged
            && !service
                .supports_stage(&source.driver)
                .await
                .map_err(|e| failed(e.to_string()))?
        {
            return Ok(false);
        }
        let request = CsiExpandRequest {
            volume_id: source.volume_handle.clone(),
            volume_path: volume_path.to_string(),
            staging_path: self.csi_staging_path(&pv_name).display().to_string(),
            required_bytes: resources::value(&size).map_err(|e| failed(e.to_string()))?,
            access_mode: CsiAccessMode::of(spec.access_modes.as_deref()),
            fs_type: source.fs_type.clone().unwrap_or_default(),
            mount_flags: spec.mount_options.clone().unwrap_or_default(),
        };
        let expanded = service
            .expand(&source.driver, &request)
            .await
            .map_err(|e| {
                failed(format!(
                    "Expander.NodeExpand failed to expand the volume : {e}"
                ))
            })?;
        if !expanded {
            return Err(failed(format!(
                "Expander.NodeExpand found CSI plugin kubernetes.io/csi/{} to not support node expansion",
                source.driver
            )));
        }
        self.note(
            uid,
            false,
            RESIZE_SUCCEEDED,
            volume_msg("MountVolume.NodeExpandVolume succeeded", &pv_name, ""),
        );
        self.finish_resize(&namespace, &name, claim, &size)
            .await
            .map_err(|e| {
                failed(format!(
                    "mountVolume.NodeExpandVolume update PVC status failed : {e}"
                ))
            })?;
        tracing::info!(pod = %pod::full_name(p), uid, volume = %pv_name, size = %size.0, "volume expanded on the node");
        Ok(true)
    }

    /// Writes the claim's finished resize ([`finished_status`]) at its resource version. The
    /// claim changes under the node (the resizer, the controllers): after a failed write it is
    /// read again and, while its status is still below `size`, written again, up to
    /// [`STATUS_WRITE_ATTEMPTS`] times.
    async fn finish_resize(
        &self,
        namespace: &str,
        name: &str,
        mut claim: PersistentVolumeClaim,
        size: &Quantity,
    ) -> Result<(), crate::objects::ObjectError> {
        let mut attempt = 1;
        loop {
            let (capacity, conditions) = finished_status(&claim, size);
            let version = claim.metadata.resource_version.clone().unwrap_or_default();
            let written = self
                .store
                .update_claim_status(namespace, name, &version, &capacity, &conditions)
                .await;
            let Err(error) = written else {
                return Ok(());
            };
            if attempt >= STATUS_WRITE_ATTEMPTS {
                return Err(error);
            }
            attempt += 1;
            tracing::debug!(claim = %format!("{namespace}/{name}"), %error, "writing the claim's resize status again");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            claim = self.store.persistent_volume_claim(namespace, name).await?;
            let has = claim_storage(&claim).and_then(Result::ok);
            if has.is_some_and(|h| resources::value(size).is_ok_and(|want| h >= want)) {
                return Ok(());
            }
        }
    }

    /// The in-use check of a CSI claim's volume already set up for the pod (see the module
    /// docs): errors become a `FileSystemResizeFailed` event, never a set-up failure.
    pub(super) async fn expand_in_use(&self, p: &Pod, done: &SetUpVolume) {
        let (Some(claim), VolumeMeasure::Csi { .. }) = (done.claim.as_ref(), &done.measure) else {
            return;
        };
        let outcome = async {
            let c = self
                .store
                .persistent_volume_claim(&claim.namespace, &claim.name)
                .await
                .map_err(|e| e.to_string())?;
            let Some(pv_name) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
                return Ok(());
            };
            let pv = self
                .store
                .persistent_volume(&pv_name)
                .await
                .map_err(|e| e.to_string())?;
            if pending_size(&c, &pv).is_none() {
                return Ok(());
            }
            let Some(source) = pv.spec.as_ref().and_then(|s| s.csi.clone()) else {
                return Ok(());
            };
            let lock = self.pv_lock(&pv_name);
            let _one_at_a_time = lock.lock().await;
            let path = done.host_path.display().to_string();
            self.expand_if_pending(p, &pv, &source, done.read_only, &path, Phase::Published)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        .await;
        if let Err(message) = outcome {
            tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), error = %message, "expanding a volume in use failed");
            self.note(pod::uid(p), true, RESIZE_FAILED, message);
        }
    }

    fn note(&self, uid: &str, warning: bool, reason: &'static str, message: String) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(uid.to_string())
            .or_default()
            .push(VolumeEvent {
                warning,
                reason,
                message,
            });
    }

    /// The events the pod's volume set-up noted since the last call (the sync loop records
    /// them after the set-up).
    pub fn take_events(&self, uid: &str) -> Vec<VolumeEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimStatus, PersistentVolumeSpec};

    fn claim(capacity: Option<&str>, conditions: &[&str]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            status: Some(PersistentVolumeClaimStatus {
                capacity: capacity
                    .map(|c| BTreeMap::from([("storage".to_string(), Quantity(c.into()))])),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|t| PersistentVolumeClaimCondition {
                            type_: t.to_string(),
                            status: "True".into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pv(capacity: &str) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([(
                    "storage".into(),
                    Quantity(capacity.into()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_resize_is_pending_while_the_claims_status_is_below_the_volume() {
        let table = [
            (Some("1Gi"), "2Gi", Some("2Gi")),
            (Some("1Gi"), "1024Mi", None),
            (Some("2Gi"), "1Gi", None),
            (None, "1Gi", Some("1Gi")),
            (Some("1Gi"), "bogus", None),
            (Some("bogus"), "2Gi", None),
        ];
        for (has, wants, pending) in table {
            assert_eq!(
                pending_size(&claim(has, &[]), &pv(wants)).map(|q| q.0),
                pending.map(String::from),
                "{has:?} {wants}"
            );
        }
        assert_eq!(
            pending_size(&claim(Some("1Gi"), &[]), &PersistentVolume::default()),
            None
        );
    }

    #[test]
    fn a_finished_resize_sets_the_capacity_and_drops_only_the_resize_conditions() {
        let c = claim(
            Some("1Gi"),
            &["FileSystemResizePending", "Resizing", "Other"],
        );
        let (capacity, conditions) = finished_status(&c, &Quantity("2Gi".into()));
        assert_eq!(capacity.get("storage"), Some(&Quantity("2Gi".into())));
        let kept: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(kept, vec!["Other"]);
        assert_eq!(
            volume_msg("MountVolume.NodeExpandVolume succeeded", "pv-1", ""),
            "MountVolume.NodeExpandVolume succeeded for volume \"pv-1\" "
        );
    }
}
