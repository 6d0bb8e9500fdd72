//! The mounts of one container ([`VolumeManager::container_mounts`]): its volume mounts,
//! safely resolved subPaths and the kubelet-managed `/etc/hosts`; and the host devices of its
//! raw block volumes ([`VolumeManager::block_devices`]).

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::{blocking, etc_hosts, io, subpath, VolumeError, VolumeManager, ETC_HOSTS};
use crate::env::expand;
use crate::pod;
use crate::runtime::{EnvVar, Mount, MountPropagation};

/// The variables a `subPathExpr` references that are unset or empty, comma-separated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join(", "))]
pub struct UnsetVariables(pub Vec<String>);

/// Expands a `subPathExpr` with the container's environment (Go
/// `ExpandContainerVolumeMounts`): a reference to an unset or empty variable is an error
/// naming them.
pub fn expand_subpath_expr(expr: &str, env: &[EnvVar]) -> Result<String, UnsetVariables> {
    let map: HashMap<&str, &str> = env
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    let missing = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let lookup = |n: &str| match map.get(n).filter(|v| !v.is_empty()) {
        Some(v) => Some(v.to_string()),
        None => {
            missing.borrow_mut().insert(n.to_string());
            Some(String::new())
        }
    };
    let out = expand(expr, &lookup);
    let missing = missing.into_inner();
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(UnsetVariables(missing.into_iter().collect()))
    }
}

impl VolumeManager {
    /// The host devices of a container's `volumeDevices` (Go `makeBlockVolumes`): each raw
    /// block volume's link (the runtime resolves it) at its `devicePath`, `mrw`, or `r` when
    /// the claim is read-only.
    pub fn block_devices(
        &self,
        p: &Pod,
        c: &Container,
    ) -> Result<Vec<crate::devices::DeviceNode>, VolumeError> {
        let volumes = self.volumes(pod::uid(p)).unwrap_or_default();
        let mut out = Vec::new();
        for d in c.volume_devices.iter().flatten() {
            if !Path::new(&d.device_path).is_absolute() {
                return Err(VolumeError::VolumeDevice(format!(
                    "error DevicePath `{}` must be an absolute path",
                    d.device_path
                )));
            }
            let Some(vol) = volumes.get(&d.name).filter(|v| v.block_device) else {
                return Err(VolumeError::VolumeDevice(format!(
                    "cannot find volume {:?} to pass into container {:?}",
                    d.name, c.name
                )));
            };
            out.push(crate::devices::DeviceNode {
                container_path: d.device_path.clone(),
                host_path: vol.host_path.display().to_string(),
                permissions: if vol.read_only { "r" } else { "mrw" }.to_string(),
            });
        }
        Ok(out)
    }

    /// The mounts of a container (Go `makeMounts`): each volumeMount (subPath / subPathExpr
    /// resolved safely and bind-mounted, `readOnly`, `mountPropagation`), then the managed
    /// `/etc/hosts` when the pod has IPs (`pod_ips`) and the container does not mount its own.
    pub async fn container_mounts(
        &self,
        p: &Pod,
        c: &Container,
        env: &[EnvVar],
        pod_ips: &[String],
    ) -> Result<Vec<Mount>, VolumeError> {
        let uid = pod::uid(p);
        let volumes = self.volumes(uid).unwrap_or_default();
        let mut out = Vec::new();
        for (i, vm) in c.volume_mounts.iter().flatten().enumerate() {
            let vol = volumes
                .get(&vm.name)
                .ok_or_else(|| VolumeError::VolumeNotFound {
                    container: c.name.clone(),
                    volume: vm.name.clone(),
                })?;
            let sub = match vm.sub_path_expr.as_deref().filter(|s| !s.is_empty()) {
                Some(expr) => {
                    expand_subpath_expr(expr, env).map_err(|missing| VolumeError::SubpathExpr {
                        container: c.name.clone(),
                        volume: vm.name.clone(),
                        missing: missing.to_string(),
                    })?
                }
                None => vm.sub_path.clone().unwrap_or_default(),
            };
            let mut host_path = vol.host_path.clone();
            if !sub.is_empty() {
                let target = self
                    .pod_dir(uid)
                    .join("volume-subpaths")
                    .join(&vm.name)
                    .join(&c.name)
                    .join(i.to_string());
                let root = vol.host_path.clone();
                let (container, volume) = (c.name.clone(), vm.name.clone());
                host_path = blocking(move || {
                    let mode = std::fs::metadata(&root)
                        .map(|m| m.permissions().mode() & 0o7777)
                        .unwrap_or(0o750);
                    subpath::bind_subpath(&root, &sub, &target, Some(mode)).map_err(|source| {
                        VolumeError::Subpath {
                            container,
                            volume,
                            error: source,
                        }
                    })
                })
                .await?;
            }
            let propagation = match vm.mount_propagation.as_deref().unwrap_or("None") {
                "None" | "" => MountPropagation::Private,
                "HostToContainer" => MountPropagation::HostToContainer,
                "Bidirectional" => {
                    let privileged = c
                        .security_context
                        .as_ref()
                        .and_then(|s| s.privileged)
                        .unwrap_or(false);
                    if !privileged {
                        return Err(VolumeError::Propagation {
                            container: c.name.clone(),
                            volume: vm.name.clone(),
                            message:
                                "Bidirectional mount propagation is available only to privileged containers"
                                    .into(),
                        });
                    }
                    MountPropagation::Bidirectional
                }
                other => {
                    return Err(VolumeError::Propagation {
                        container: c.name.clone(),
                        volume: vm.name.clone(),
                        message: format!("unknown mountPropagation {other:?}"),
                    })
                }
            };
            out.push(Mount {
                container_path: vm.mount_path.clone(),
                host_path,
                read_only: vm.read_only.unwrap_or(false) || vol.read_only,
                propagation,
            });
        }
        let own_hosts = c
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == ETC_HOSTS);
        if !pod_ips.is_empty() && !own_hosts && self.pods_dir.is_some() {
            let file = self.ensure_hosts_file(p, pod_ips).await?;
            out.push(Mount {
                container_path: ETC_HOSTS.into(),
                host_path: file,
                read_only: false,
                propagation: MountPropagation::Private,
            });
        }
        Ok(out)
    }

    /// Writes `<pod>/etc-hosts` unless it exists (it is written once per pod, as in Go).
    async fn ensure_hosts_file(&self, p: &Pod, pod_ips: &[String]) -> Result<PathBuf, VolumeError> {
        let file = self.pod_dir(pod::uid(p)).join("etc-hosts");
        if tokio::fs::symlink_metadata(&file).await.is_ok() {
            return Ok(file);
        }
        let aliases = etc_hosts::aliases(p);
        let content = if pod::host_network(p) {
            let node = tokio::fs::read_to_string(ETC_HOSTS)
                .await
                .map_err(io("reading", Path::new(ETC_HOSTS)))?;
            etc_hosts::host_network_content(&node, &aliases)
        } else {
            let (hostname, domain) = etc_hosts::hostname_and_domain(p, &self.cluster_domain);
            etc_hosts::managed_content(pod_ips, &hostname, &domain, &aliases)
        };
        let tmp = file.with_extension("tmp");
        tokio::fs::write(&tmp, content)
            .await
            .map_err(io("writing", &tmp))?;
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))
            .await
            .map_err(io("setting the mode of", &tmp))?;
        tokio::fs::rename(&tmp, &file)
            .await
            .map_err(io("renaming to", &file))?;
        Ok(file)
    }
}
