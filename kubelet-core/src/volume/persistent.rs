//! Setting up a `persistentVolumeClaim` volume for a pod: the claim resolved to its volume
//! ([`claims`]), the volume's node affinity checked, then the volume's type: `local` is
//! bind-mounted into the pod's directory ([`local`]) and given the pod's `fsGroup`
//! ([`ownership`]); `hostPath` is used in place after its `type` check, as Go does.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, Volume};

use super::claims::{self, VolumeSource};
use super::ownership::{self, ChangePolicy};
use super::{blocking, hostpath, local, SetUpVolume, VolumeError, VolumeManager};
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
        if bound.mode() == "Block" {
            return Err(VolumeError::Unsupported {
                volume: v.name.clone(),
                kind: format!("persistentVolume {pv}: volumeMode Block"),
            });
        }
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
        let set_up = match claims::source_of(&spec) {
            Ok(VolumeSource::Local(path)) => {
                let dir = self.volume_dir(&uid, local::PLUGIN_DIR, &pv);
                let options = spec.mount_options.clone().unwrap_or_default();
                let (group, policy) = fs_group_policy(p);
                let d = dir.clone();
                let pods_dir = self.pods_dir.clone().unwrap_or_default();
                blocking(move || {
                    let mounted_now = local::setup(&pv, &path, &d, read_only, &options)
                        .map_err(|error| VolumeError::Local {
                            volume: pv.clone(),
                            error,
                        })?;
                    // Go writes the owner once, when the volume is mounted and no other pod
                    // has it mounted, and not on a read-only volume.
                    let shared = mounted_now && local::mounted_by_another_pod(&d, &pods_dir);
                    if let (Some(gid), false, true, false) =
                        (group, read_only, mounted_now, shared)
                    {
                        let changed =
                            ownership::set_volume_ownership(&d, gid, false, policy).map_err(
                                |error| VolumeError::Io {
                                    op: "applying the pod's fsGroup to",
                                    path: d.clone(),
                                    error,
                                },
                            )?;
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
                self.setup_csi(p, &pv, &spec, &source, read_only).await
            }
            Err(kind) => Err(VolumeError::Unsupported {
                volume: v.name.clone(),
                kind: format!("persistentVolume {pv}: {kind}"),
            }),
        }?;
        Ok(SetUpVolume { gid, ..set_up })
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
