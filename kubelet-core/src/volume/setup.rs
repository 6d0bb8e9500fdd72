//! Setting up a pod's volumes before its containers start ([`VolumeManager::setup_pod`]).

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Volume};

use super::atomic_writer::{self, Payload};
use super::emptydir::{self, Medium};
use super::{
    blocking, configmap, downward_api, hostpath, io, projected, secret, SetUpVolume, VolumeError,
    VolumeManager,
};
use crate::cm::ResourceList;
use crate::env::FieldValues;
use crate::pod;

/// What kind of data an API-data volume carries, for its directory and medium.
fn api_plugin(v: &Volume) -> Option<(&'static str, Medium)> {
    if v.config_map.is_some() {
        Some(("configmap", Medium::Disk))
    } else if v.secret.is_some() {
        Some(("secret", Medium::Memory))
    } else if v.downward_api.is_some() {
        Some(("downward-api", Medium::Memory))
    } else if v.projected.is_some() {
        Some(("projected", Medium::Memory))
    } else {
        None
    }
}

/// How many of a pod's own volumes are set up at once.
const VOLUMES_AT_ONCE: usize = 8;

/// Whether `v`'s set-up touches nothing but its own directory (API data, emptyDir, hostPath),
/// so that it may run beside the pod's other volumes.
fn sets_up_alone(v: &Volume) -> bool {
    api_plugin(v).is_some() || v.empty_dir.is_some() || v.host_path.is_some()
}

/// The pod's `securityContext.fsGroup`.
fn fs_group(p: &Pod) -> Option<u32> {
    p.spec
        .as_ref()?
        .security_context
        .as_ref()?
        .fs_group
        .and_then(|g| u32::try_from(g).ok())
}

/// The name of the volume type for "not supported" errors.
pub(super) fn kind_of(v: &Volume) -> String {
    first_field_except(v, &["name"]).unwrap_or_else(|| "unknown".into())
}

/// The first field `value` serializes that is not among `except` (which source a volume or
/// PersistentVolume spec has, for "not supported" errors).
pub(super) fn first_field_except<T: serde::Serialize>(
    value: &T,
    except: &[&str],
) -> Option<String> {
    serde_json::to_value(value).ok().and_then(|j| {
        j.as_object()
            .and_then(|o| o.keys().find(|k| !except.contains(&k.as_str())).cloned())
    })
}

impl VolumeManager {
    /// Sets up the pod's directories and every volume; see the module docs. `node_labels`
    /// are the node's (a PersistentVolume's node affinity is checked against them).
    pub async fn setup_pod(
        &self,
        p: &Pod,
        fields: &FieldValues,
        allocatable: &ResourceList,
        node_labels: &BTreeMap<String, String>,
    ) -> Result<(), VolumeError> {
        let uid = pod::uid(p).to_string();
        let has_volumes = p
            .spec
            .as_ref()
            .is_some_and(|s| s.volumes.as_ref().is_some_and(|v| !v.is_empty()));
        if self.pods_dir.is_none() {
            if has_volumes {
                return Err(VolumeError::NoRootDir {
                    pod: pod::full_name(p),
                });
            }
            return Ok(());
        }
        if !pod::is_safe_uid(&uid) {
            return Err(VolumeError::UnsafeUid {
                pod: pod::full_name(p),
                uid,
            });
        }
        let pod_dir = self.pod_dir(&uid);
        blocking({
            let pod_dir = pod_dir.clone();
            move || {
                for sub in ["volumes", "plugins", "containers"] {
                    let d = pod_dir.join(sub);
                    std::fs::create_dir_all(&d).map_err(io("creating directory", &d))?;
                }
                std::fs::set_permissions(&pod_dir, std::fs::Permissions::from_mode(0o750))
                    .map_err(io("setting the mode of", &pod_dir))
            }
        })
        .await?;
        self.store.register_pod(p);
        let volumes: Vec<&Volume> = p
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .collect();
        // The pod's own volumes are set up together, a few at a time: each writes its own
        // directory only, and those of API objects wait on the API server. Claims and CSI
        // volumes go one after the other (two volumes may name one claim, whose set-up must
        // not run twice at once).
        let mut alone = Vec::new();
        let mut others = Vec::new();
        for &v in &volumes {
            match sets_up_alone(v) {
                true => alone.push(self.setup_volume(p, v, fields, allocatable, node_labels)),
                false => others.push(v),
            }
        }
        let together = futures::stream::iter(alone)
            .buffered(VOLUMES_AT_ONCE)
            .collect::<Vec<_>>();
        let in_turn = async {
            let mut out = Vec::new();
            for v in others {
                out.push(
                    self.setup_volume(p, v, fields, allocatable, node_labels)
                        .await,
                );
            }
            out
        };
        let (together, in_turn) = futures::join!(together, in_turn);
        let (mut together, mut in_turn) = (together.into_iter(), in_turn.into_iter());
        let mut set_up = HashMap::new();
        let mut failed = Vec::new();
        let mut messages = Vec::new();
        for v in volumes {
            let result = match sets_up_alone(v) {
                true => together.next(),
                false => in_turn.next(),
            };
            match result {
                Some(Ok(mut s)) => {
                    s.claim = super::stats::claim_ref(
                        pod::namespace(p),
                        v.persistent_volume_claim
                            .as_ref()
                            .map(|c| c.claim_name.as_str()),
                    );
                    set_up.insert(v.name.clone(), s);
                }
                Some(Err(e)) => {
                    failed.push(v.name.clone());
                    messages.push(e.to_string());
                }
                None => {}
            }
        }
        if !failed.is_empty() {
            return Err(VolumeError::Mount {
                pod: pod::full_name(p),
                volumes: failed,
                messages,
            });
        }
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid, set_up);
        Ok(())
    }

    async fn setup_volume(
        &self,
        p: &Pod,
        v: &Volume,
        fields: &FieldValues,
        allocatable: &ResourceList,
        node_labels: &BTreeMap<String, String>,
    ) -> Result<SetUpVolume, VolumeError> {
        let uid = pod::uid(p);
        let name = v.name.clone();
        if !is_dns_label(&name) {
            return Err(VolumeError::InvalidName { volume: name });
        }
        if let Some(claim) = v.persistent_volume_claim.as_ref() {
            return self.setup_claim(p, v, claim, node_labels).await;
        }
        if let Some(csi) = v.csi.as_ref() {
            return self.setup_inline_csi(p, &name, csi).await;
        }
        let fs_group = fs_group(p);
        if let Some(ed) = v.empty_dir.as_ref() {
            let wrap = |source| VolumeError::EmptyDir {
                volume: name.clone(),
                error: source,
            };
            let medium = emptydir::medium(ed).map_err(wrap)?;
            let size = match medium {
                Medium::Memory => emptydir::memory_size(ed, p, allocatable).map_err(wrap)?,
                Medium::Disk => None,
            };
            let dir = self.volume_dir(uid, "empty-dir", &name);
            let d = dir.clone();
            blocking(move || {
                emptydir::setup(&d, medium, size, fs_group).map_err(|source| {
                    VolumeError::EmptyDir {
                        volume: name,
                        error: source,
                    }
                })
            })
            .await?;
            return Ok(SetUpVolume {
                host_path: dir,
                read_only: false,
                ..SetUpVolume::default()
            });
        }
        if let Some(hp) = v.host_path.as_ref() {
            let (path, type_) = (hp.path.clone(), hp.type_.clone());
            let checked = path.clone();
            blocking(move || {
                hostpath::check_type(&checked, type_.as_deref()).map_err(|source| {
                    VolumeError::HostPath {
                        volume: name,
                        error: source,
                    }
                })
            })
            .await?;
            return Ok(SetUpVolume {
                host_path: PathBuf::from(path),
                read_only: false,
                ..SetUpVolume::default()
            });
        }
        let Some((plugin, medium)) = api_plugin(v) else {
            return Err(VolumeError::Unsupported {
                volume: name,
                kind: kind_of(v),
            });
        };
        let mut payload = self.api_payload(p, v, fields, allocatable).await?;
        if fs_group.is_some() {
            // Readable by the group, as Go's SetVolumeOwnership for read-only volumes.
            for f in payload.values_mut() {
                f.mode |= 0o440;
            }
        }
        let dir = self.volume_dir(uid, plugin, &name);
        let d = dir.clone();
        let pod_name = pod::full_name(p);
        blocking(move || {
            emptydir::setup(&d, medium, None, None).map_err(|source| VolumeError::EmptyDir {
                volume: name.clone(),
                error: source,
            })?;
            let changed = atomic_writer::write_payload_with_group(&d, &payload, fs_group).map_err(
                |source| VolumeError::Payload {
                    volume: name.clone(),
                    error: source,
                },
            )?;
            if changed {
                tracing::info!(pod = %pod_name, volume = %name, "volume content written");
            }
            Ok(())
        })
        .await?;
        Ok(SetUpVolume {
            host_path: dir,
            read_only: true,
            ..SetUpVolume::default()
        })
    }

    async fn api_payload(
        &self,
        p: &Pod,
        v: &Volume,
        fields: &FieldValues,
        allocatable: &ResourceList,
    ) -> Result<Payload, VolumeError> {
        let ns = pod::namespace(p);
        let name = v.name.as_str();
        let object_err = |source| VolumeError::Object {
            volume: name.to_string(),
            error: source,
        };
        // configMap and secret volumes differ only in where the keys come from.
        let keyed = if let Some(src) = v.config_map.as_ref() {
            let optional = src.optional.unwrap_or(false);
            let data = self
                .store
                .config_map(ns, &src.name)
                .await
                .map(|cm| configmap::data_of(&cm));
            Some((
                "configmap",
                data,
                optional,
                src.items.as_deref(),
                src.default_mode,
            ))
        } else if let Some(src) = v.secret.as_ref() {
            let optional = src.optional.unwrap_or(false);
            let secret_name = src.secret_name.clone().unwrap_or_default();
            let data = self
                .store
                .secret(ns, &secret_name)
                .await
                .map(|s| secret::data_of(&s));
            Some((
                "secret",
                data,
                optional,
                src.items.as_deref(),
                src.default_mode,
            ))
        } else {
            None
        };
        if let Some((kind, data, optional, items, mode)) = keyed {
            let data = match data {
                Ok(d) => d,
                Err(e) if e.is_not_found() && optional => Default::default(),
                Err(e) => return Err(object_err(e)),
            };
            return configmap::key_payload(
                name,
                kind,
                &data,
                items,
                mode.unwrap_or(configmap::DEFAULT_MODE),
                optional,
            );
        }
        if let Some(src) = v.downward_api.as_ref() {
            return downward_api::payload(
                name,
                p,
                src.items.as_deref().unwrap_or_default(),
                src.default_mode.unwrap_or(configmap::DEFAULT_MODE),
                fields,
                allocatable,
            );
        }
        if let Some(src) = v.projected.as_ref() {
            return projected::payload(name, p, src, self.store.as_ref(), fields, allocatable)
                .await;
        }
        Err(VolumeError::Unsupported {
            volume: name.to_string(),
            kind: kind_of(v),
        })
    }
}

/// A DNS-1123 label: 1–63 lower-case alphanumerics or '-', starting and ending alphanumeric.
fn is_dns_label(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Secret, Service};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::objects::{
        MemoryObjectStore, ObjectError, ObjectStore, ServiceAccountToken, TokenRequest,
    };

    /// A store whose config map reads answer only once `n` of them are waiting at once.
    struct AnswersTogether {
        inner: MemoryObjectStore,
        barrier: tokio::sync::Barrier,
    }

    #[async_trait]
    impl ObjectStore for AnswersTogether {
        async fn config_map(&self, ns: &str, name: &str) -> Result<ConfigMap, ObjectError> {
            self.barrier.wait().await;
            self.inner.config_map(ns, name).await
        }
        async fn secret(&self, ns: &str, name: &str) -> Result<Secret, ObjectError> {
            self.inner.secret(ns, name).await
        }
        async fn service_account_token(
            &self,
            request: &TokenRequest,
        ) -> Result<ServiceAccountToken, ObjectError> {
            self.inner.service_account_token(request).await
        }
        async fn services(&self, ns: &str) -> Result<Vec<Service>, ObjectError> {
            self.inner.services(ns).await
        }
    }

    #[tokio::test]
    async fn a_pods_config_map_volumes_are_set_up_together() {
        let root = tempfile::tempdir().expect("tempdir");
        let names = ["a", "b", "c"];
        let inner = MemoryObjectStore::new();
        for name in names {
            inner.put_config_map(ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    ..Default::default()
                },
                data: Some([("k".to_string(), name.to_string())].into()),
                ..Default::default()
            });
        }
        let store = Arc::new(AnswersTogether {
            inner,
            barrier: tokio::sync::Barrier::new(names.len()),
        });
        let vm = VolumeManager::new(root.path(), store, "");
        let volumes = names
            .iter()
            .map(|&name| Volume {
                name: name.into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: name.into(),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let p = crate::volume::tests::pod(volumes, vec![]);
        // One after the other, the first read would wait for the others for ever.
        let (fields, allocatable) = (FieldValues::default(), ResourceList::new());
        let labels = BTreeMap::new();
        let set_up = vm.setup_pod(&p, &fields, &allocatable, &labels);
        tokio::time::timeout(Duration::from_secs(20), set_up)
            .await
            .expect("the three reads in flight together")
            .expect("set up");
        for name in names {
            let file = vm.volume_dir("uid-1", "configmap", name).join("k");
            assert_eq!(std::fs::read_to_string(file).expect("written"), name);
        }
    }

    #[test]
    fn volume_names_must_be_dns_labels() {
        for ok in ["data", "a", "cache-1", "0x"] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in [
            "",
            "/tmp/x",
            "../x",
            "..",
            ".",
            "a/b",
            "Data",
            "-a",
            "a-",
            &"a".repeat(64),
        ] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
