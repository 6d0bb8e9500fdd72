//! Setting up a `persistentVolumeClaim` volume for a pod: the claim resolved to its volume
//! ([`claims`]), the volume's node affinity checked, then the volume's type: `local` is
//! bind-mounted into the pod's directory ([`local`]; a block device is mounted for the node
//! first, [`local_device`]) and given the pod's `fsGroup` ([`ownership`]); `hostPath` is used
//! in place after its `type` check, as Go does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, Volume};

use super::claims::{self, VolumeSource};
use super::ownership::{self, ChangePolicy};
use super::{
    block, blocking, hostpath, local, local_device, SetUpVolume, VolumeError, VolumeManager,
};
use crate::pod;

/// Whether the pod's containers use the volume `name` in `volumeMounts` and in
/// `volumeDevices`.
fn uses(p: &Pod, name: &str) -> (bool, bool) {
    let Some(spec) = p.spec.as_ref() else {
        return (false, false);
    };
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let (mut mounted, mut device) = (false, false);
    for c in containers {
        mounted |= c.volume_mounts.iter().flatten().any(|m| m.name == name);
        device |= c.volume_devices.iter().flatten().any(|d| d.name == name);
    }
    (mounted, device)
}

fn fs_group_policy(p: &Pod) -> (Option<u32>, ChangePolicy) {
    let sc = p.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let group = sc
        .and_then(|s| s.fs_group)
        .and_then(|g| u32::try_from(g).ok());
    let policy = ChangePolicy::from_field(sc.and_then(|s| s.fs_group_change_policy.as_deref()));
    (group, policy)
}

impl VolumeManager {
    /// Sets up the claim's volume for the pod (see the module docs). A volume set up for the
    /// pod before is not resolved again: the claim's binding cannot change while a pod uses
    /// it, and a running pod keeps its volume even once its claim is being deleted (Go).
    pub(super) async fn setup_claim(
        &self,
        p: &Pod,
        v: &Volume,
        source: &PersistentVolumeClaimVolumeSource,
        node_labels: &BTreeMap<String, String>,
    ) -> Result<SetUpVolume, VolumeError> {
        let uid = pod::uid(p).to_string();
        if let Some(done) = self.volumes(&uid).and_then(|m| m.get(&v.name).cloned()) {
            let path = done.host_path.clone();
            if blocking(move || Ok(path.exists())).await? {
                self.expand_in_use(p, &done).await;
                return Ok(done);
            }
        }
        let namespace = pod::namespace(p).to_string();
        let (mounted, as_device) = uses(p, &v.name);
        let bound = claims::resolve(
            self.store.as_ref(),
            &namespace,
            &source.claim_name,
            source.read_only.unwrap_or(false),
            &v.name,
            mounted,
            as_device,
        )
        .await
        .map_err(|error| VolumeError::Claim {
            namespace: namespace.clone(),
            claim: source.claim_name.clone(),
            error: Box::new(error),
        })?;
        let pv = bound.name.clone();
        let block = bound.mode() == "Block";
        claims::check_node_affinity(&bound.pv, node_labels).map_err(|message| {
            VolumeError::NodeAffinity {
                volume: pv.clone(),
                message,
            }
        })?;
        let spec = bound.spec();
        let read_only = bound.read_only;
        // Go's `pv.beta.kubernetes.io/gid`: a group the pod's containers get.
        let gid = bound
            .pv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GID_ANNOTATION))
            .cloned();
        if block {
            let set_up = match claims::source_of(&spec) {
                Ok(VolumeSource::Csi(source)) => {
                    self.setup_csi_block(p, &bound.pv, &source, read_only)
                        .await?
                }
                _ => self.setup_block(p, v, &pv, &spec, read_only).await?,
            };
            return Ok(SetUpVolume { gid, ..set_up });
        }
        let set_up = match claims::source_of(&spec) {
            Ok(VolumeSource::Local(path)) => {
                let fs_type = spec.local.as_ref().and_then(|l| l.fs_type.clone());
                let options = spec.mount_options.clone().unwrap_or_default();
                self.setup_local(p, &pv, path, fs_type, read_only, options)
                    .await
            }
            Ok(VolumeSource::HostPath { path, type_ }) => {
                if spec.mount_options.as_ref().is_some_and(|o| !o.is_empty()) {
                    // Go's operation generator: the hostPath plugin takes no mount options.
                    return Err(VolumeError::MountOptionsUnsupported { volume: pv });
                }
                let checked = path.clone();
                blocking(move || {
                    hostpath::check_type(&checked, type_.as_deref())
                        .map_err(|error| VolumeError::HostPath { volume: pv, error })
                })
                .await?;
                Ok(SetUpVolume {
                    host_path: PathBuf::from(path),
                    read_only,
                    ..SetUpVolume::default()
                })
            }
            Ok(VolumeSource::Csi(source)) => {
                self.setup_csi(p, &bound.pv, &spec, &source, read_only)
                    .await
            }
            Err(kind) => Err(VolumeError::Unsupported {
                volume: v.name.clone(),
                kind: format!("persistentVolume {pv}: {kind}"),
            }),
        }?;
        Ok(SetUpVolume { gid, ..set_up })
    }

    /// Sets up a `local` volume for the pod: a directory is bind-mounted on the pod's
    /// directory; a block device is mounted once for the node first (formatted when it has no
    /// filesystem, see [`local_device`]) and that mount is bind-mounted. Under the volume's
    /// lock, so a teardown never unmounts the device between the two.
    async fn setup_local(
        &self,
        p: &Pod,
        pv: &str,
        path: String,
        fs_type: Option<String>,
        read_only: bool,
        options: Vec<String>,
    ) -> Result<SetUpVolume, VolumeError> {
        let uid = pod::uid(p);
        let dir = self.volume_dir(uid, local::PLUGIN_DIR, pv);
        let (group, policy) = fs_group_policy(p);
        let pods_dir = self.pods_dir.clone().unwrap_or_default();
        let probe = PathBuf::from(&path);
        let is_device = blocking(move || {
            use std::os::unix::fs::FileTypeExt;
            Ok(std::fs::metadata(&probe).is_ok_and(|m| m.file_type().is_block_device()))
        })
        .await?;
        let lock = self.pv_lock(pv);
        let _one_at_a_time = lock.lock().await;
        let (source, options) = if is_device {
            let target = local_device::device_mount_path(&self.root_dir(), pv);
            local_device::mount_device(&path, &target, fs_type.as_deref(), read_only, &options)
                .await
                .map_err(|error| VolumeError::LocalDevice {
                    volume: pv.to_string(),
                    error,
                })?;
            // The device mount took the filesystem's options; the bind those a bind takes.
            let bind = options
                .into_iter()
                .filter(|o| local::mount_flags(false, std::slice::from_ref(o)).is_ok())
                .collect();
            (target.display().to_string(), bind)
        } else {
            (path, options)
        };
        let (d, pv) = (dir.clone(), pv.to_string());
        blocking(move || {
            let mounted_now =
                local::setup(&pv, &source, &d, read_only, &options).map_err(|error| {
                    VolumeError::Local {
                        volume: pv.clone(),
                        error,
                    }
                })?;
            // Go writes the owner once, when the volume is mounted and no other pod has it
            // mounted, and not on a read-only volume.
            let shared = mounted_now && local::mounted_by_another_pod(&d, &pods_dir);
            if let (Some(gid), false, true, false) = (group, read_only, mounted_now, shared) {
                let changed =
                    ownership::set_volume_ownership(&d, gid, false, policy).map_err(|error| {
                        VolumeError::Io {
                            op: "applying the pod's fsGroup to",
                            path: d.clone(),
                            error,
                        }
                    })?;
                tracing::debug!(volume = %pv, gid, changed, "fsGroup applied to the volume");
            }
            Ok(())
        })
        .await?;
        Ok(SetUpVolume {
            host_path: dir,
            read_only,
            measure: super::stats::VolumeMeasure::StatFs,
            ..SetUpVolume::default()
        })
    }

    /// Maps a `volumeMode: Block` volume for the pod's `volumeDevices` (see [`block`]): a
    /// `local` volume on a block device; other types but CSI (`csi_block`) are refused.
    async fn setup_block(
        &self,
        p: &Pod,
        v: &Volume,
        pv: &str,
        spec: &k8s_openapi::api::core::v1::PersistentVolumeSpec,
        read_only: bool,
    ) -> Result<SetUpVolume, VolumeError> {
        let Ok(VolumeSource::Local(device)) = claims::source_of(spec) else {
            return Err(VolumeError::Unsupported {
                volume: v.name.clone(),
                kind: format!(
                    "persistentVolume {pv}: volumeMode Block (kubelet-rs maps local and CSI volumes only)"
                ),
            });
        };
        let (root, pods_dir) = (self.root_dir(), self.pods_dir.clone().unwrap_or_default());
        let (uid, volume) = (pod::uid(p).to_string(), pv.to_string());
        let lock = self.pv_lock(pv);
        let _one_at_a_time = lock.lock().await;
        let link = blocking(move || {
            block::map_device(&root, &pods_dir, &uid, &volume, &device)
                .map_err(|error| VolumeError::Block { volume, error })
        })
        .await?;
        Ok(SetUpVolume {
            host_path: link,
            read_only,
            block_device: true,
            ..SetUpVolume::default()
        })
    }

    /// Unmounts the `local` volumes' block devices that no pod has bind-mounted any more (see
    /// [`local_device`]), each under its volume's lock and checked again there. A failure is
    /// logged and tried again at the next teardown or orphan cleanup.
    pub(super) async fn unmount_unused_local_devices(&self) {
        let Some(pods_dir) = self.pods_dir.clone() else {
            return;
        };
        let root = self.root_dir();
        let list = {
            let (root, pods_dir) = (root.clone(), pods_dir.clone());
            move || local_device::unused_device_mounts(&root, &pods_dir)
        };
        let unused = match tokio::task::spawn_blocking(list.clone()).await {
            Ok(Ok(unused)) => unused,
            Ok(Err(error)) => {
                tracing::warn!(%error, "listing the local volumes' device mounts failed");
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "listing the local volumes' device mounts failed");
                return;
            }
        };
        for pv in unused {
            let lock = self.pv_lock(&pv);
            let _one_at_a_time = lock.lock().await;
            let (list, root, volume) = (list.clone(), root.clone(), pv.clone());
            let done = tokio::task::spawn_blocking(move || -> Result<bool, String> {
                // A pod may have bound it between the listing and the lock.
                if !list().map_err(|e| e.to_string())?.contains(&volume) {
                    return Ok(false);
                }
                local_device::unmount_device(&root, &volume)
                    .map(|()| true)
                    .map_err(|e| e.to_string())
            })
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
            match done {
                Ok(true) => tracing::info!(volume = %pv, "unmounted the local volume's device"),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(volume = %pv, %error, "unmounting the local volume's device failed")
                }
            }
        }
    }

    /// The groups the pod's containers get beyond its own supplemental groups (Go's
    /// `GetExtraSupplementalGroupsForPod`): the `pv.beta.kubernetes.io/gid` of its set-up
    /// volumes that are numbers and not among the pod's `supplementalGroups`, in Go's order
    /// (sorted as text).
    pub fn extra_supplemental_groups(&self, p: &Pod) -> Vec<i64> {
        let mut values: Vec<String> = self
            .volumes(pod::uid(p))
            .into_iter()
            .flat_map(|m| m.into_values())
            .filter_map(|v| v.gid)
            .collect();
        values.sort();
        values.dedup();
        let own = p
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default();
        values
            .iter()
            .filter_map(|v| v.parse::<i64>().ok())
            .filter(|g| !own.contains(g))
            .collect()
    }
}

/// The PersistentVolume annotation naming a group its users get (Go's
/// `VolumeGidAnnotationKey`).
pub const GID_ANNOTATION: &str = "pv.beta.kubernetes.io/gid";

#[cfg(test)]
#[path = "persistent_tests.rs"]
pub(super) mod tests;
