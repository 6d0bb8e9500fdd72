//! Raw block CSI volumes (`volumeMode: Block` CSI PersistentVolumes in a container's
//! `volumeDevices`), laid out as Go's `csiBlockMapper` lays them out under
//! `<root-dir>/plugins/kubernetes.io/csi/volumeDevices`:
//! - `<pv>/data/vol_data.json`: the volume's record (Go's keys), read by the teardown, also
//!   after a restart;
//! - `staging/<pv>`: `NodeStageVolume`'s staging path, when the driver stages (passed to
//!   `NodePublishVolume` in any case, as Go does);
//! - `publish/<pv>/<pod-uid>`: `NodePublishVolume`'s target, a file the driver puts the device
//!   on;
//! - `<pv>/dev/<pod-uid>`: the global map path, that file bind-mounted (see [`super::block`]);
//! - and the pod's link `<root-dir>/pods/<uid>/volumeDevices/kubernetes.io~csi/<pv>` to the
//!   publish path, the device's host path for the runtime.
//!
//! States of a volume, one operation at a time (the volume's lock): unstaged → the first
//! pod's set-up stages it (a driver that stages) → staged; per pod: published and mapped →
//! mapped (a later set-up keeps it). The pod's teardown: unmapped, unpublished, the link
//! removed; the last pod's also unstages and removes the volume's directories. The request
//! carries the `Block` access type, the access mode of the PV's first one, the volume's
//! attributes and the secrets; no mount options (Go's). Drivers that need attaching are
//! refused for block volumes (kubelet-rs does not track attachments of block volumes).
//! Housekeeping (the orphan cleanup) unstages a staged volume that no
//! pod maps or publishes (a pod removed between its stage and its map).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume, Pod};

use super::csi::{
    attachment_name, csi_error, make_dir, read_json, write_json, VolumeData, PLUGIN_DIR,
    VOL_DATA_FILE,
};
use super::{block, blocking, io, SetUpVolume, VolumeError, VolumeManager};
use crate::csi::{CsiAccessMode, CsiMountRequest};
use crate::pod;

/// The block volumes' directory under the root dir.
pub const BLOCK_DIR: &str = "plugins/kubernetes.io/csi/volumeDevices";

/// The paths of one block volume (see the module docs).
struct Paths {
    data: PathBuf,
    staging: PathBuf,
    publish_dir: PathBuf,
    global: PathBuf,
}

impl Paths {
    fn of(root: &Path, pv: &str) -> Paths {
        let base = root.join(BLOCK_DIR);
        Paths {
            data: base.join(pv).join("data"),
            staging: base.join("staging").join(pv),
            publish_dir: base.join("publish").join(pv),
            global: base.join(pv).join("dev"),
        }
    }
}

impl VolumeManager {
    /// Sets up the CSI block volume `volume` for the pod's `volumeDevices` (see the module
    /// docs).
    pub(super) async fn setup_csi_block(
        &self,
        p: &Pod,
        volume: &PersistentVolume,
        source: &CSIPersistentVolumeSource,
        read_only: bool,
    ) -> Result<SetUpVolume, VolumeError> {
        let pv = volume.metadata.name.as_deref().unwrap_or_default();
        let spec = volume.spec.clone().unwrap_or_default();
        let driver = source.driver.clone();
        let (service, policy) = self
            .persistent_driver(pv, &driver, "MapVolume.SetUpDevice")
            .await?;
        if policy.attach_required {
            return Err(VolumeError::Unsupported {
                volume: pv.to_string(),
                kind: format!(
                    "persistentVolume {pv}: volumeMode Block of a CSI driver that needs attaching"
                ),
            });
        }
        let uid = pod::uid(p).to_string();
        let paths = Paths::of(&self.root_dir(), pv);
        let pods_dir = self.pods_dir.clone().unwrap_or_default();
        let link = block::pod_device_link(&pods_dir, &uid, PLUGIN_DIR, pv);
        let publish = paths.publish_dir.join(&uid);
        let set_up = SetUpVolume {
            host_path: link.clone(),
            read_only,
            block_device: true,
            ..SetUpVolume::default()
        };
        let lock = self.pv_lock(pv);
        let _one_at_a_time = lock.lock().await;
        let bind_file = paths.global.join(&uid);
        if blocking(move || {
            super::mount::is_mount_point(&bind_file)
                .map_err(io("reading mountinfo for", &bind_file))
        })
        .await?
        {
            return Ok(set_up);
        }
        let data = VolumeData {
            spec_vol_id: pv.to_string(),
            volume_handle: source.volume_handle.clone(),
            driver_name: driver.clone(),
            node_name: self.node_name.clone(),
            attachment_id: Some(attachment_name(
                &source.volume_handle,
                &driver,
                &self.node_name,
            )),
            lifecycle_mode: String::new(),
        };
        let dirs = (paths.data.clone(), paths.publish_dir.clone());
        blocking(move || {
            make_dir(&dirs.0)?;
            make_dir(&dirs.1)?;
            write_json(&dirs.0.join(VOL_DATA_FILE), &data)
        })
        .await?;
        let attributes = source.volume_attributes.clone().unwrap_or_default();
        let request = |staging: &Path, target: &Path, secrets, read_only| CsiMountRequest {
            volume_id: source.volume_handle.clone(),
            publish_context: Default::default(),
            staging_path: staging.display().to_string(),
            target_path: target.display().to_string(),
            access_mode: CsiAccessMode::of(spec.access_modes.as_deref()),
            fs_type: String::new(),
            mount_flags: Vec::new(),
            read_only,
            secrets,
            volume_context: attributes.clone(),
            block: true,
        };
        if !self.staged().contains(pv)
            && service
                .supports_stage(&driver)
                .await
                .map_err(|e| csi_error(pv, "MapVolume.SetUpDevice", e))?
        {
            let staging = paths.staging.clone();
            blocking(move || make_dir(&staging)).await?;
            let secrets = self
                .secret_ref_data(pv, source.node_stage_secret_ref.as_ref())
                .await?;
            service
                .stage(
                    &driver,
                    &request(&paths.staging, Path::new(""), secrets, false),
                )
                .await
                .map_err(|e| csi_error(pv, "MapVolume.SetUpDevice", e))?;
            self.staged().insert(pv.to_string());
        }
        let secrets = self
            .secret_ref_data(pv, source.node_publish_secret_ref.as_ref())
            .await?;
        service
            .publish(
                &driver,
                &request(&paths.staging, &publish, secrets, read_only),
            )
            .await
            .map_err(|e| csi_error(pv, "MapVolume.MapPodDevice", e))?;
        let (global, volume) = (paths.global.clone(), pv.to_string());
        blocking(move || {
            block::map_device_at(&global, &link, &uid, &publish)
                .map_err(|error| VolumeError::Block { volume, error })
        })
        .await?;
        Ok(set_up)
    }

    /// Tears down the pod's CSI block volumes (see the module docs). Returns the first
    /// failure; the rest is still tried.
    pub(super) async fn teardown_csi_block(&self, uid: &str) -> Result<(), VolumeError> {
        let Some(service) = self.csi.clone() else {
            return Ok(());
        };
        let links = self
            .pods_dir
            .clone()
            .unwrap_or_default()
            .join(uid)
            .join("volumeDevices")
            .join(format!("kubernetes.io~{PLUGIN_DIR}"));
        let volumes: Vec<String> = blocking(move || {
            Ok(std::fs::read_dir(&links)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect())
        })
        .await?;
        let mut first_error = None;
        for pv in volumes {
            let lock = self.pv_lock(&pv);
            let _one_at_a_time = lock.lock().await;
            if let Err(e) = self.unmap_csi_block(service.as_ref(), uid, &pv).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn unmap_csi_block(
        &self,
        service: &dyn crate::csi::CsiNodeService,
        uid: &str,
        pv: &str,
    ) -> Result<(), VolumeError> {
        let paths = Paths::of(&self.root_dir(), pv);
        let data_file = paths.data.join(VOL_DATA_FILE);
        let data = blocking(move || Ok(read_json(&data_file))).await?;
        let (global, who, volume) = (paths.global.clone(), uid.to_string(), pv.to_string());
        let last = blocking(move || {
            block::unmap_device_at(&global, &who)
                .map_err(|error| VolumeError::Block { volume, error })
        })
        .await?;
        let publish = paths.publish_dir.join(uid);
        if let Some(d) = data.as_ref() {
            service
                .unpublish(
                    &d.driver_name,
                    &d.volume_handle,
                    &publish.display().to_string(),
                )
                .await
                .map_err(|e| csi_error(pv, "UnmapVolume.UnmapPodDevice", e))?;
        }
        let link = block::pod_device_link(
            &self.pods_dir.clone().unwrap_or_default(),
            uid,
            PLUGIN_DIR,
            pv,
        );
        blocking(move || {
            for f in [&publish, &link] {
                match std::fs::remove_file(f) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io("removing", f)(e))
                    }
                    _ => {}
                }
            }
            Ok(())
        })
        .await?;
        if !last {
            return Ok(());
        }
        self.unstage_block(service, pv, paths, data.as_ref()).await
    }

    /// The last pod gone: unstaged (when staged), the volume's directories removed (each
    /// only once empty: never a removal through a mount). Under the volume's lock.
    async fn unstage_block(
        &self,
        service: &dyn crate::csi::CsiNodeService,
        pv: &str,
        paths: Paths,
        data: Option<&VolumeData>,
    ) -> Result<(), VolumeError> {
        let staging = paths.staging.clone();
        let staged = blocking(move || Ok(staging.exists())).await?;
        if let (true, Some(d)) = (staged, data) {
            service
                .unstage(
                    &d.driver_name,
                    &d.volume_handle,
                    &paths.staging.display().to_string(),
                )
                .await
                .map_err(|e| csi_error(pv, "UnmapDevice.TearDownDevice", e))?;
        }
        self.staged().remove(pv);
        blocking(move || {
            let _ = std::fs::remove_file(paths.data.join(VOL_DATA_FILE));
            for dir in [&paths.data, &paths.staging, &paths.publish_dir] {
                match std::fs::remove_dir(dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io("removing", dir)(e))
                    }
                    _ => {}
                }
            }
            if let Some(volume_dir) = paths.data.parent() {
                drop(std::fs::remove_dir(volume_dir));
            }
            Ok(())
        })
        .await
    }

    /// Unstages staged block volumes that no pod maps or publishes (housekeeping): a pod
    /// removed while its set-up had staged but not yet mapped, or while the kubelet was down.
    /// Each under its volume's lock, so a pod's set-up is never raced.
    pub(super) async fn cleanup_csi_block_staged(&self) {
        let Some(service) = self.csi.clone() else {
            return;
        };
        let root = self.root_dir();
        let staging_dir = root.join(BLOCK_DIR).join("staging");
        let staged: Vec<String> = blocking(move || {
            Ok(std::fs::read_dir(&staging_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect())
        })
        .await
        .unwrap_or_default();
        for pv in staged {
            let lock = self.pv_lock(&pv);
            let _one_at_a_time = lock.lock().await;
            let paths = Paths::of(&root, &pv);
            let (global, publish, data_file) = (
                paths.global.clone(),
                paths.publish_dir.clone(),
                paths.data.join(VOL_DATA_FILE),
            );
            let found = blocking(move || {
                let busy = |d: &Path| std::fs::read_dir(d).is_ok_and(|mut e| e.next().is_some());
                Ok((busy(&global) || busy(&publish), read_json(&data_file)))
            })
            .await;
            // Without its record the driver and handle are unknown: left alone.
            let Ok((false, Some(data))) = found else {
                continue;
            };
            match self
                .unstage_block(service.as_ref(), &pv, paths, Some(&data))
                .await
            {
                Ok(()) => tracing::info!(volume = %pv, "unstaged a block volume no pod uses"),
                Err(error) => {
                    tracing::warn!(volume = %pv, %error, "unstaging a block volume no pod uses failed")
                }
            }
        }
    }
}
