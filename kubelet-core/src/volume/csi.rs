//! CSI persistent volumes (Go's `pkg/volume/csi` mounter and device mounter), through the
//! registered driver ([`CsiNodeService`]):
//!
//! ```text
//! <root>/plugins/kubernetes.io/csi/pv/<pv>/vol_data.json   {driverName, volumeHandle}
//! <root>/plugins/kubernetes.io/csi/pv/<pv>/globalmount     NodeStageVolume's target
//! <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/vol_data.json
//! <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount   NodePublishVolume's target
//! ```
//!
//! Set-up, per pod and volume: the CSIDriver object decides (`attachRequired`, default true
//! without the object: the set-up waits until the volume is attached, see [`super::attach`],
//! and passes the attachment's metadata to the driver as `publish_context`;
//! `podInfoOnMount` adds the pod's `csi.storage.k8s.io/*` attributes; `fsGroupPolicy`);
//! when the driver stages volumes, `NodeStageVolume` into the volume's `globalmount` once
//! (again after a kubelet restart: drivers answer an already staged volume with success);
//! then
//! `NodePublishVolume` into the pod's `mount` (skipped when it is mounted already, as after a
//! kubelet restart); then the pod's `fsGroup` as the policy allows.
//!
//! An inline volume (`volumes[].csi`, Go's ephemeral lifecycle mode) is only published, at
//! the pod's `kubernetes.io~csi/<volume>/mount`, under a handle made from the pod's uid and
//! the volume's name; its driver must list `Ephemeral` in its CSIDriver object.
//!
//! Teardown of a pod's volumes reads each `vol_data.json` (so it works after a restart, as
//! Go's reconstruction does): `NodeUnpublishVolume`, the directory removed; a volume no other
//! pod has published any more is unstaged (`NodeUnstageVolume`) and its global directory
//! removed. A failing driver leaves the directories for the next try.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec, Pod};
use serde::{Deserialize, Serialize};

use super::attach::unique_volume_name;
use super::expand::Phase;
use super::ownership::{self, ChangePolicy};
use super::stats::VolumeMeasure;
use super::{blocking, io, mount, SetUpVolume, VolumeError, VolumeManager};
use crate::csi::{CsiAccessMode, CsiMountRequest};
use crate::pod;

/// The plugin's directory name under a pod's `volumes` and under `plugins`.
pub const PLUGIN_DIR: &str = "csi";
/// Go's per-volume metadata file.
pub const VOL_DATA_FILE: &str = "vol_data.json";

/// `vol_data.json` (Go's keys; the global one has only the driver and handle).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeData {
    /// The pod's volume name for this volume (the PV's name).
    #[serde(
        rename = "specVolID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub spec_vol_id: String,
    /// The volume's ID in the driver.
    #[serde(rename = "volumeHandle")]
    pub volume_handle: String,
    /// The driver.
    #[serde(rename = "driverName")]
    pub driver_name: String,
    /// The node.
    #[serde(rename = "nodeName", default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// The VolumeAttachment's name (Go's [`attachment_name`]).
    #[serde(
        rename = "attachmentID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub attachment_id: Option<String>,
    /// `Persistent` or `Ephemeral`.
    #[serde(
        rename = "volumeLifecycleMode",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub lifecycle_mode: String,
}

pub use super::csi_driver::{check_lifecycle_mode, DriverPolicy};

/// The VolumeAttachment name of a volume on a node (Go's `getAttachmentName`): `csi-` and the
/// SHA-256 of the handle, the driver and the node's name. Recorded in `vol_data.json`.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{handle}{driver}{node}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// An inline volume's handle (Go's `makeVolumeHandle`): `csi-` and the SHA-256 of the pod's
/// uid and the volume's name.
pub fn inline_volume_handle(pod_uid: &str, volume: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{pod_uid}{volume}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// The pod's attributes a driver with `podInfoOnMount` gets (Go's `podAttributes`).
pub fn pod_attributes(p: &Pod, ephemeral: bool) -> BTreeMap<String, String> {
    let sa = p
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_default();
    BTreeMap::from([
        (
            "csi.storage.k8s.io/pod.name".into(),
            pod::name(p).to_string(),
        ),
        (
            "csi.storage.k8s.io/pod.namespace".into(),
            pod::namespace(p).to_string(),
        ),
        ("csi.storage.k8s.io/pod.uid".into(), pod::uid(p).to_string()),
        ("csi.storage.k8s.io/serviceAccount.name".into(), sa),
        ("csi.storage.k8s.io/ephemeral".into(), ephemeral.to_string()),
    ])
}

pub(super) fn write_json(path: &Path, data: &VolumeData) -> Result<(), VolumeError> {
    let text = serde_json::to_vec(data).map_err(|e| VolumeError::Io {
        op: "encoding",
        path: path.to_path_buf(),
        error: std::io::Error::other(e),
    })?;
    std::fs::write(path, text).map_err(io("writing", path))
}

/// Creates `dir` (and its parents) with Go's mode 0750.
pub(super) fn make_dir(dir: &Path) -> Result<(), VolumeError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(io("creating directory", dir))
}

pub(super) fn read_json(path: &Path) -> Option<VolumeData> {
    let text = std::fs::read(path).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Whether `path` is a mount point (read off the runtime's threads).
async fn is_mounted(path: &Path) -> Result<bool, VolumeError> {
    let p = path.to_path_buf();
    blocking(move || mount::is_mount_point(&p).map_err(io("reading mountinfo for", &p))).await
}

/// Removes a directory that is no mount point any more, and its `vol_data.json` and parent
/// (Go's `removeMountDir`). A directory still mounted after the driver's unpublish or
/// unstage is an error: nothing is removed, and the volume is not unstaged under it.
fn remove_mount_dir(dir: &Path) -> Result<(), VolumeError> {
    if mount::is_mount_point(dir).map_err(io("reading mountinfo for", dir))? {
        return Err(VolumeError::StillMounted {
            path: dir.to_path_buf(),
            mounts: vec![dir.to_path_buf()],
        });
    }
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    for (path, is_dir) in [
        (dir.to_path_buf(), true),
        (parent.join(VOL_DATA_FILE), false),
        (parent.clone(), true),
    ] {
        let r = if is_dir {
            std::fs::remove_dir(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match r {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("removing", &path)(e)),
        }
    }
    Ok(())
}

pub(super) fn csi_error(
    volume: &str,
    step: &'static str,
    error: crate::csi::CsiCallError,
) -> VolumeError {
    VolumeError::Csi {
        volume: volume.to_string(),
        step,
        message: error.to_string(),
    }
}

impl VolumeManager {
    /// `<root>/plugins/kubernetes.io/csi/pv/<pv>/globalmount`.
    pub fn csi_staging_path(&self, pv: &str) -> PathBuf {
        self.csi_pv_root().join(pv).join("globalmount")
    }

    /// `<root>/plugins/kubernetes.io/csi/pv`: one directory per staged volume.
    pub(super) fn csi_pv_root(&self) -> PathBuf {
        self.root_dir().join("plugins/kubernetes.io/csi/pv")
    }

    /// The driver's CSIDriver object; `None` when there is none (or no API server to ask):
    /// Go's defaults then apply.
    pub(super) async fn csi_driver_object(
        &self,
        volume: &str,
        driver: &str,
    ) -> Result<Option<k8s_openapi::api::storage::v1::CSIDriver>, VolumeError> {
        match self.store.csi_driver(driver).await {
            Ok(d) => Ok(Some(d)),
            Err(e)
                if e.is_not_found()
                    || matches!(e, crate::objects::ObjectError::NotAvailable { .. }) =>
            {
                Ok(None)
            }
            Err(error) => Err(VolumeError::Object {
                volume: volume.to_string(),
                error,
            }),
        }
    }

    /// The PVs staged since start (Go's device-mount state): staged once, not per pod.
    pub(super) fn staged(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.csi_staged.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn root_dir(&self) -> PathBuf {
        self.pods_dir
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    async fn secret_data(
        &self,
        volume: &str,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, VolumeError> {
        let secret =
            self.store
                .secret(namespace, name)
                .await
                .map_err(|error| VolumeError::Object {
                    volume: volume.to_string(),
                    error,
                })?;
        let mut out: BTreeMap<String, String> = secret.string_data.unwrap_or_default();
        for (k, v) in secret.data.unwrap_or_default() {
            out.insert(k, String::from_utf8_lossy(&v.0).into_owned());
        }
        Ok(out)
    }

    /// The data of a PersistentVolume's stage or publish secret; empty without one.
    pub(super) async fn secret_ref_data(
        &self,
        volume: &str,
        reference: Option<&k8s_openapi::api::core::v1::SecretReference>,
    ) -> Result<BTreeMap<String, String>, VolumeError> {
        let Some(r) = reference else {
            return Ok(BTreeMap::new());
        };
        let namespace = r.namespace.as_deref().unwrap_or_default();
        self.secret_data(volume, namespace, r.name.as_deref().unwrap_or_default())
            .await
    }

    /// The CSI calls and the driver's policy for setting up the persistent volume `pv`:
    /// refused without CSI drivers, or when the driver's CSIDriver leaves out the
    /// `Persistent` lifecycle mode (an error of `step`).
    pub(super) async fn persistent_driver(
        &self,
        pv: &str,
        driver: &str,
        step: &'static str,
    ) -> Result<(Arc<dyn crate::csi::CsiNodeService>, DriverPolicy), VolumeError> {
        let Some(service) = self.csi.clone() else {
            return Err(VolumeError::Unsupported {
                volume: pv.to_string(),
                kind: format!("persistentVolume {pv}: csi (no CSI drivers in this kubelet)"),
            });
        };
        let object = self.csi_driver_object(pv, driver).await?;
        check_lifecycle_mode(driver, object.as_ref(), "Persistent").map_err(|message| {
            VolumeError::Csi {
                volume: pv.to_string(),
                step,
                message,
            }
        })?;
        Ok((service, DriverPolicy::of(object.as_ref())))
    }

    /// Sets up the CSI persistent volume `pv` for the pod (see the module docs).
    pub(super) async fn setup_csi(
        &self,
        p: &Pod,
        volume: &k8s_openapi::api::core::v1::PersistentVolume,
        spec: &PersistentVolumeSpec,
        source: &CSIPersistentVolumeSource,
        read_only: bool,
    ) -> Result<SetUpVolume, VolumeError> {
        let pv = volume.metadata.name.as_deref().unwrap_or_default();
        let driver = source.driver.clone();
        let (service, policy) = self
            .persistent_driver(pv, &driver, "MountVolume.SetUp")
            .await?;
        let uid = pod::uid(p).to_string();
        let unique = unique_volume_name(&driver, &source.volume_handle);
        if policy.attach_required {
            self.want_attached(&uid, pv, &unique);
        }
        let target = self.volume_dir(&uid, PLUGIN_DIR, pv).join("mount");
        let lock = self.pv_lock(pv);
        let _one_at_a_time = lock.lock().await;
        if is_mounted(&target).await? {
            return Ok(SetUpVolume {
                host_path: target,
                read_only,
                measure: VolumeMeasure::Csi {
                    driver: driver.clone(),
                    volume_id: source.volume_handle.clone(),
                },
                ..SetUpVolume::default()
            });
        }
        let attachment = attachment_name(&source.volume_handle, &driver, &self.node_name);
        let publish_context = if policy.attach_required {
            self.verify_attached(pv, &unique, &attachment).await?
        } else {
            BTreeMap::new()
        };
        let access_mode = CsiAccessMode::of(spec.access_modes.as_deref());
        let fs_type = source.fs_type.clone().unwrap_or_default();
        let mount_flags = spec.mount_options.clone().unwrap_or_default();
        let attributes = source.volume_attributes.clone().unwrap_or_default();
        let staged_before = self.staged().contains(pv);
        let mut resized = false;
        let staging = if staged_before {
            self.csi_staging_path(pv).display().to_string()
        } else if service
            .supports_stage(&driver)
            .await
            .map_err(|e| csi_error(pv, "NodeGetCapabilities", e))?
        {
            let staging = self.csi_staging_path(pv);
            let data = VolumeData {
                volume_handle: source.volume_handle.clone(),
                driver_name: driver.clone(),
                ..VolumeData::default()
            };
            let s = staging.clone();
            blocking(move || {
                make_dir(&s)?;
                let parent = s.parent().map(Path::to_path_buf).unwrap_or_default();
                write_json(&parent.join(VOL_DATA_FILE), &data)
            })
            .await?;
            let secrets = self
                .secret_ref_data(pv, source.node_stage_secret_ref.as_ref())
                .await?;
            let request = CsiMountRequest {
                volume_id: source.volume_handle.clone(),
                publish_context: publish_context.clone(),
                staging_path: staging.display().to_string(),
                target_path: String::new(),
                access_mode,
                fs_type: fs_type.clone(),
                mount_flags: mount_flags.clone(),
                read_only: false,
                secrets,
                volume_context: attributes.clone(),
                block: false,
            };
            service
                .stage(&driver, &request)
                .await
                .map_err(|e| csi_error(pv, "MountVolume.MountDevice", e))?;
            self.staged().insert(pv.to_string());
            if policy.attach_required {
                self.mark_mounted(pv, &unique);
            }
            let at = staging.display().to_string();
            resized = self
                .expand_if_pending(p, volume, source, read_only, &at, Phase::Staged)
                .await?;
            at
        } else {
            String::new()
        };
        let dir = self.volume_dir(&uid, PLUGIN_DIR, pv);
        let data = VolumeData {
            spec_vol_id: pv.to_string(),
            volume_handle: source.volume_handle.clone(),
            driver_name: driver.clone(),
            node_name: self.node_name.clone(),
            attachment_id: Some(attachment),
            lifecycle_mode: "Persistent".into(),
        };
        let d = dir.clone();
        blocking(move || {
            make_dir(&d)?;
            write_json(&d.join(VOL_DATA_FILE), &data)
        })
        .await?;
        let secrets = self
            .secret_ref_data(pv, source.node_publish_secret_ref.as_ref())
            .await?;
        let mut volume_context = attributes;
        if policy.pod_info_on_mount {
            volume_context.extend(pod_attributes(p, false));
        }
        let request = CsiMountRequest {
            volume_id: source.volume_handle.clone(),
            publish_context,
            staging_path: staging,
            target_path: target.display().to_string(),
            access_mode,
            fs_type: fs_type.clone(),
            mount_flags,
            read_only,
            secrets,
            volume_context,
            block: false,
        };
        service
            .publish(&driver, &request)
            .await
            .map_err(|e| csi_error(pv, "MountVolume.SetUp", e))?;
        if policy.attach_required {
            self.mark_mounted(pv, &unique);
        }
        if !resized {
            let at = target.display().to_string();
            self.expand_if_pending(p, volume, source, read_only, &at, Phase::Published)
                .await?;
        }
        if !read_only && policy.applies_fs_group(&fs_type, spec.access_modes.as_deref()) {
            self.apply_fs_group(p, &target).await?;
        }
        Ok(SetUpVolume {
            host_path: target,
            read_only,
            measure: VolumeMeasure::Csi {
                driver,
                volume_id: source.volume_handle.clone(),
            },
            ..SetUpVolume::default()
        })
    }

    /// Sets up an inline (ephemeral) CSI volume of the pod (`volumes[].csi`): no staging and
    /// no attach; the driver must list `Ephemeral` in its CSIDriver's lifecycle modes.
    pub(super) async fn setup_inline_csi(
        &self,
        p: &Pod,
        volume: &str,
        source: &k8s_openapi::api::core::v1::CSIVolumeSource,
    ) -> Result<SetUpVolume, VolumeError> {
        let Some(service) = self.csi.clone() else {
            return Err(VolumeError::Unsupported {
                volume: volume.to_string(),
                kind: "csi (no CSI drivers in this kubelet)".into(),
            });
        };
        let driver = source.driver.clone();
        let object = self.csi_driver_object(volume, &driver).await?;
        check_lifecycle_mode(&driver, object.as_ref(), "Ephemeral").map_err(|message| {
            VolumeError::Csi {
                volume: volume.to_string(),
                step: "MountVolume.SetUp",
                message,
            }
        })?;
        let policy = DriverPolicy::of(object.as_ref());
        let uid = pod::uid(p).to_string();
        let read_only = source.read_only.unwrap_or(false);
        let dir = self.volume_dir(&uid, PLUGIN_DIR, volume);
        let target = dir.join("mount");
        if is_mounted(&target).await? {
            return Ok(SetUpVolume {
                host_path: target,
                read_only,
                measure: VolumeMeasure::Csi {
                    driver,
                    volume_id: inline_volume_handle(&uid, volume),
                },
                ..SetUpVolume::default()
            });
        }
        let handle = inline_volume_handle(&uid, volume);
        let data = VolumeData {
            spec_vol_id: volume.to_string(),
            volume_handle: handle.clone(),
            driver_name: driver.clone(),
            node_name: self.node_name.clone(),
            attachment_id: Some(attachment_name(&handle, &driver, &self.node_name)),
            lifecycle_mode: "Ephemeral".into(),
        };
        let d = dir.clone();
        blocking(move || {
            make_dir(&d)?;
            write_json(&d.join(VOL_DATA_FILE), &data)
        })
        .await?;
        let secrets = match source.node_publish_secret_ref.as_ref() {
            Some(r) => self.secret_data(volume, pod::namespace(p), &r.name).await?,
            None => BTreeMap::new(),
        };
        let mut volume_context = source.volume_attributes.clone().unwrap_or_default();
        if policy.pod_info_on_mount {
            volume_context.extend(pod_attributes(p, true));
        }
        let request = CsiMountRequest {
            volume_id: handle,
            publish_context: BTreeMap::new(),
            staging_path: String::new(),
            target_path: target.display().to_string(),
            access_mode: CsiAccessMode::SingleNodeWriter,
            fs_type: source.fs_type.clone().unwrap_or_default(),
            mount_flags: Vec::new(),
            read_only,
            secrets,
            volume_context,
            block: false,
        };
        service
            .publish(&driver, &request)
            .await
            .map_err(|e| csi_error(volume, "MountVolume.SetUp", e))?;
        // Go's supportsFSGroup for an inline volume: only the `File` policy (no access modes).
        if !read_only && policy.fs_group_policy == "File" {
            self.apply_fs_group(p, &target).await?;
        }
        Ok(SetUpVolume {
            host_path: target,
            read_only,
            measure: VolumeMeasure::Csi {
                driver,
                volume_id: request.volume_id,
            },
            ..SetUpVolume::default()
        })
    }

    /// The pod's `fsGroup` (if any) on a published CSI volume, by its change policy.
    async fn apply_fs_group(&self, p: &Pod, target: &Path) -> Result<(), VolumeError> {
        let sc = p.spec.as_ref().and_then(|s| s.security_context.as_ref());
        let Some(gid) = sc
            .and_then(|s| s.fs_group)
            .and_then(|g| u32::try_from(g).ok())
        else {
            return Ok(());
        };
        let change = ChangePolicy::from_field(sc.and_then(|s| s.fs_group_change_policy.as_deref()));
        let t = target.to_path_buf();
        blocking(move || {
            ownership::set_volume_ownership(&t, gid, false, change)
                .map(|_| ())
                .map_err(io("applying the pod's fsGroup to", &t))
        })
        .await
    }

    /// Unpublishes the pod's CSI volumes and unstages those no other pod has published
    /// (see the module docs). Returns the first failure; the rest is still tried.
    pub(super) async fn teardown_csi(&self, uid: &str) -> Result<(), VolumeError> {
        let Some(service) = self.csi.clone() else {
            return Ok(());
        };
        let plugin_dir = self
            .pod_dir(uid)
            .join("volumes")
            .join(format!("kubernetes.io~{PLUGIN_DIR}"));
        let found = blocking(move || Ok(volume_data_under(&plugin_dir))).await?;
        let mut first_error = None;
        // Every volume unpublished first, then the unused ones unstaged (Go's order: the
        // pod's TearDowns, then UnmountDevice).
        let mut unpublished = Vec::new();
        for (dir, data) in found {
            let target = dir.join("mount");
            let lock = self.pv_lock(&data.spec_vol_id);
            let _one_at_a_time = lock.lock().await;
            let result = service
                .unpublish(
                    &data.driver_name,
                    &data.volume_handle,
                    &target.display().to_string(),
                )
                .await
                .map_err(|e| csi_error(&data.spec_vol_id, "UnmountVolume.TearDown", e));
            let result = match result {
                Ok(()) => blocking(move || remove_mount_dir(&target)).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(()) if data.lifecycle_mode == "Ephemeral" => {}
                Ok(()) => unpublished.push(data),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for data in unpublished {
            let lock = self.pv_lock(&data.spec_vol_id);
            let _one_at_a_time = lock.lock().await;
            if let Err(e) = self.unstage_unused(service.as_ref(), &data, uid).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Unstages staged CSI volumes no pod uses any more (housekeeping): those whose unstage
    /// failed at their last pod's teardown, or that a pod removed while the kubelet was down
    /// left behind. Each under its volume's lock, so a pod's set-up is never raced.
    pub(super) async fn cleanup_csi_staged(&self) {
        let Some(service) = self.csi.clone() else {
            return;
        };
        let pv_root = self.csi_pv_root();
        let found = blocking(move || Ok(staged_volume_data(&pv_root)))
            .await
            .unwrap_or_default();
        for data in found {
            let lock = self.pv_lock(&data.spec_vol_id);
            let _one_at_a_time = lock.lock().await;
            if let Err(e) = self.unstage_unused(service.as_ref(), &data, "").await {
                tracing::debug!(volume = %data.spec_vol_id, error = %e, "unstaging an unused CSI volume failed; trying again later");
            }
        }
    }

    /// Unstages the volume when no pod but `uid` has it published any more.
    async fn unstage_unused(
        &self,
        service: &dyn crate::csi::CsiNodeService,
        data: &VolumeData,
        uid: &str,
    ) -> Result<(), VolumeError> {
        let pv = data.spec_vol_id.clone();
        let staging = self.csi_staging_path(&pv);
        let Some(pods_dir) = self.pods_dir.clone() else {
            return Ok(());
        };
        let (pv2, uid2, staging2) = (pv.clone(), uid.to_string(), staging.clone());
        let (in_use, staged) = blocking(move || {
            let in_use = std::fs::read_dir(&pods_dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy() != uid2)
                .any(|e| {
                    e.path()
                        .join("volumes")
                        .join(format!("kubernetes.io~{PLUGIN_DIR}"))
                        .join(&pv2)
                        .exists()
                });
            let staged = staging2
                .parent()
                .is_some_and(|p| p.join(VOL_DATA_FILE).exists());
            Ok((in_use, staged))
        })
        .await?;
        if in_use {
            return Ok(());
        }
        if !staged {
            self.mark_unmounted(&pv);
            return Ok(());
        }
        let global = staging.parent().map(Path::to_path_buf).unwrap_or_default();
        let recorded = blocking(move || Ok(read_json(&global.join(VOL_DATA_FILE)))).await?;
        let data = recorded.unwrap_or_else(|| data.clone());
        let stages = service
            .supports_stage(&data.driver_name)
            .await
            .map_err(|e| csi_error(&pv, "UnmountDevice", e))?;
        if stages {
            service
                .unstage(
                    &data.driver_name,
                    &data.volume_handle,
                    &staging.display().to_string(),
                )
                .await
                .map_err(|e| csi_error(&pv, "UnmountDevice", e))?;
        }
        self.staged().remove(&pv);
        blocking(move || remove_mount_dir(&staging)).await?;
        self.mark_unmounted(&pv);
        Ok(())
    }
}

/// The staged volumes' `<pv_root>/<pv>/vol_data.json`, each named by its directory.
pub(super) fn staged_volume_data(pv_root: &Path) -> Vec<VolumeData> {
    std::fs::read_dir(pv_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let mut data = read_json(&e.path().join(VOL_DATA_FILE))?;
            data.spec_vol_id = e.file_name().to_string_lossy().into_owned();
            Some(data)
        })
        .collect()
}

/// Every `<dir>/<volume>/vol_data.json` below a pod's CSI plugin directory.
pub(super) fn volume_data_under(plugin_dir: &Path) -> Vec<(PathBuf, VolumeData)> {
    std::fs::read_dir(plugin_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let dir = e.path();
            let mut data = read_json(&dir.join(VOL_DATA_FILE))?;
            if data.spec_vol_id.is_empty() {
                data.spec_vol_id = e.file_name().to_string_lossy().into_owned();
            }
            Some((dir, data))
        })
        .collect()
}

#[cfg(test)]
#[path = "csi_tests.rs"]
mod tests;
