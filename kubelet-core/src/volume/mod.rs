//! The volume manager: the pod directories and volumes a pod's containers mount.
//!
//! # Layout (as the Go kubelet)
//! ```text
//! <root-dir>/pods/<uid>/
//!     volumes/kubernetes.io~<plugin>/<name>   emptyDir, configMap, secret, downwardAPI, projected
//!     volume-subpaths/<volume>/<container>/<i>  bind mounts of safely resolved subPaths
//!     containers/                              per-container data
//!     etc-hosts                                the kubelet-managed /etc/hosts
//! ```
//!
//! # Lifecycle
//! Every sync of a pod that should run calls [`VolumeManager::setup_pod`] before containers are
//! started: it creates the directories, sets up every volume (idempotent: an emptyDir tmpfs is
//! mounted once, API-data volumes are rewritten by the [`atomic_writer`] only when their
//! content changed — which is how config map, secret and token updates reach running pods)
//! and reports every failing volume in one error; the engine turns that into a `FailedMount`
//! event and a waiting reason and retries, other pods are not affected. Container creation
//! asks [`VolumeManager::container_mounts`] for the mounts (subPath binds, `/etc/hosts`).
//! After a pod was terminated and removed, [`VolumeManager::teardown_pod`] unmounts what is
//! mounted under its directory and removes it; housekeeping does the same for directories of
//! pods nobody knows ([`VolumeManager::cleanup_orphans`]), never removing a directory that
//! still has a mount below it.
//!
//! Cluster objects come through an [`crate::objects::ObjectStore`]; in standalone mode a pod that
//! references one gets a clear "not available in standalone mode" error.
//!
//! An empty root directory (as engine tests use) means "no pod files": pods without volumes
//! run without pod directories and without a managed `/etc/hosts`; pods with volumes fail
//! with [`VolumeError::NoRootDir`].

pub mod atomic_writer;
pub mod configmap;
pub mod downward_api;
pub mod emptydir;
pub mod etc_hosts;
pub mod hostpath;
pub mod mount;

pub mod projected;
pub mod secret;
pub mod subpath;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, Pod, Volume};

use crate::cm::ResourceList;
use crate::env::{expand, FieldValues};
use crate::pod;
use crate::runtime::{EnvVar, Mount, MountPropagation};

use crate::objects::{self, ObjectError, ObjectStore};
use atomic_writer::{AtomicWriteError, Payload};
use emptydir::{EmptyDirError, Medium};
use hostpath::HostPathError;
use subpath::SubpathError;

/// The waiting reason of containers whose volumes are not set up (as Go leaves them).
pub const VOLUME_WAITING_REASON: &str = "ContainerCreating";
/// Path of the kubelet-managed hosts file inside containers.
const ETC_HOSTS: &str = "/etc/hosts";

/// Why a volume operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// The volume type is not supported by this kubelet.
    #[error("volume {volume}: {kind} volumes are not supported")]
    Unsupported {
        /// Volume name.
        volume: String,
        /// The type.
        kind: String,
    },
    /// An emptyDir failed.
    #[error("volume {volume}: {source}")]
    EmptyDir {
        /// Volume name.
        volume: String,
        /// The error.
        source: EmptyDirError,
    },
    /// A hostPath check failed.
    #[error("volume {volume}: {source}")]
    HostPath {
        /// Volume name.
        volume: String,
        /// The error.
        source: HostPathError,
    },
    /// A referenced config map, secret or token could not be read.
    #[error("volume {volume}: {source}")]
    Object {
        /// Volume name.
        volume: String,
        /// The store's error.
        source: ObjectError,
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
    #[error("volume {volume}: {source}")]
    Payload {
        /// Volume name.
        volume: String,
        /// The error.
        source: AtomicWriteError,
    },
    /// A pod directory operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What failed.
        op: &'static str,
        /// Where.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
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
        "failed to prepare subPath for volumeMount {volume:?} of container {container:?}: {source}"
    )]
    Subpath {
        /// Container name.
        container: String,
        /// Volume name.
        volume: String,
        /// The error.
        source: SubpathError,
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

/// A volume that is set up for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetUpVolume {
    /// Where it is on the host.
    pub host_path: PathBuf,
    /// Mounted read-only whatever the volumeMount says (configMap, secret, downwardAPI,
    /// projected).
    pub read_only: bool,
}

/// See the module docs.
pub struct VolumeManager {
    /// `<root>/pods`; `None` without a root directory.
    pods_dir: Option<PathBuf>,
    store: Arc<dyn ObjectStore>,
    cluster_domain: String,
    state: Mutex<HashMap<String, HashMap<String, SetUpVolume>>>,
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, VolumeError> + Send + 'static,
) -> Result<T, VolumeError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| VolumeError::Task(e.to_string()))?
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError {
    let path = path.to_path_buf();
    move |source| VolumeError::Io { op, path, source }
}

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
fn kind_of(v: &Volume) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|j| {
            j.as_object()
                .and_then(|o| o.keys().find(|k| *k != "name").cloned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Expands a `subPathExpr` with the container's environment (Go
/// `ExpandContainerVolumeMounts`): a reference to an unset or empty variable is an error.
pub fn expand_subpath_expr(expr: &str, env: &[EnvVar]) -> Result<String, String> {
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
        Err(missing.into_iter().collect::<Vec<_>>().join(", "))
    }
}

impl VolumeManager {
    /// A manager keeping pod directories under `<root_dir>/pods` (an empty `root_dir`: none,
    /// see the module docs).
    pub fn new(root_dir: &Path, store: Arc<dyn ObjectStore>, cluster_domain: &str) -> Self {
        VolumeManager {
            pods_dir: (!root_dir.as_os_str().is_empty()).then(|| root_dir.join("pods")),
            store,
            cluster_domain: cluster_domain.to_string(),
            state: Mutex::new(HashMap::new()),
        }
    }

    /// The object store volumes and environment read from.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// `<root>/pods/<uid>` (relative `pods/<uid>` without a root directory).
    pub fn pod_dir(&self, uid: &str) -> PathBuf {
        match &self.pods_dir {
            Some(d) => d.join(uid),
            None => Path::new("pods").join(uid),
        }
    }

    /// `<root>/pods/<uid>/volumes/kubernetes.io~<plugin>/<name>`.
    pub fn volume_dir(&self, uid: &str, plugin: &str, name: &str) -> PathBuf {
        self.pod_dir(uid)
            .join("volumes")
            .join(format!("kubernetes.io~{plugin}"))
            .join(name)
    }

    /// The volumes set up for a pod at its last successful [`VolumeManager::setup_pod`].
    pub fn volumes(&self, uid: &str) -> Option<HashMap<String, SetUpVolume>> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
    }

    /// Sets up the pod's directories and every volume; see the module docs.
    pub async fn setup_pod(
        &self,
        p: &Pod,
        fields: &FieldValues,
        allocatable: &ResourceList,
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
        let mut set_up = HashMap::new();
        let mut failed = Vec::new();
        let mut messages = Vec::new();
        for v in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            match self.setup_volume(p, v, fields, allocatable).await {
                Ok(s) => {
                    set_up.insert(v.name.clone(), s);
                }
                Err(e) => {
                    failed.push(v.name.clone());
                    messages.push(e.to_string());
                }
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
    ) -> Result<SetUpVolume, VolumeError> {
        let uid = pod::uid(p);
        let name = v.name.clone();
        let fs_group = fs_group(p);
        if let Some(ed) = v.empty_dir.as_ref() {
            let wrap = |source| VolumeError::EmptyDir {
                volume: name.clone(),
                source,
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
                        source,
                    }
                })
            })
            .await?;
            return Ok(SetUpVolume {
                host_path: dir,
                read_only: false,
            });
        }
        if let Some(hp) = v.host_path.as_ref() {
            let (path, type_) = (hp.path.clone(), hp.type_.clone());
            let checked = path.clone();
            blocking(move || {
                hostpath::check_type(&checked, type_.as_deref()).map_err(|source| {
                    VolumeError::HostPath {
                        volume: name,
                        source,
                    }
                })
            })
            .await?;
            return Ok(SetUpVolume {
                host_path: PathBuf::from(path),
                read_only: false,
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
                source,
            })?;
            let changed = atomic_writer::write_payload_with_group(&d, &payload, fs_group).map_err(
                |source| VolumeError::Payload {
                    volume: name.clone(),
                    source,
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
            source,
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
                        missing,
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
                            source,
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

    /// Unmounts everything below the pod's directory and removes it. A directory that still
    /// has a mount below it afterwards is left alone ([`VolumeError::StillMounted`]).
    pub async fn teardown_pod(&self, uid: &str) -> Result<(), VolumeError> {
        if self.pods_dir.is_none() || !crate::pod::is_safe_uid(uid) {
            return Ok(());
        }
        let dir = self.pod_dir(uid);
        blocking(move || teardown_dir(&dir, true)).await?;
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.store.unregister_pod(uid);
        Ok(())
    }

    /// Unmounts everything below the pod's directory and removes its `volumes` and
    /// `volume-subpaths`, keeping the rest (container data such as termination messages,
    /// `etc-hosts`) until [`VolumeManager::teardown_pod`]. For pods that terminated.
    pub async fn unmount_volumes(&self, uid: &str) -> Result<(), VolumeError> {
        if self.pods_dir.is_none() || !crate::pod::is_safe_uid(uid) {
            return Ok(());
        }
        let dir = self.pod_dir(uid);
        blocking(move || teardown_dir(&dir, false)).await?;
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        Ok(())
    }

    /// Uids that have a pod directory.
    pub async fn pod_dirs(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Some(pods_dir) = self.pods_dir.as_ref() else {
            return out;
        };
        if let Ok(mut rd) = tokio::fs::read_dir(pods_dir).await {
            while let Ok(Some(e)) = rd.next_entry().await {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        out
    }

    /// Tears down the directories of pods for which `keep` is false (housekeeping).
    pub async fn cleanup_orphans(&self, keep: impl Fn(&str) -> bool) {
        let orphans: Vec<String> = self
            .pod_dirs()
            .await
            .into_iter()
            .filter(|uid| !keep(uid))
            .collect();
        for uid in orphans {
            match self.teardown_pod(&uid).await {
                Ok(()) => tracing::info!(uid, "removed orphaned pod directory"),
                Err(e) => {
                    tracing::warn!(uid, error = %e, "cleaning up orphaned pod directory failed")
                }
            }
        }
    }
}

/// Unmounts everything below `dir`, then removes `dir` (`whole`) or only its volume
/// directories; refuses to remove anything while a mount is left below.
fn teardown_dir(dir: &Path, whole: bool) -> Result<(), VolumeError> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    let mounted = mount::mount_points_under(dir).map_err(io("reading mountinfo for", dir))?;
    for m in &mounted {
        if let Err(e) = mount::unmount(m) {
            tracing::warn!(path = %m.display(), error = %e, "unmounting failed");
        }
    }
    let left = mount::mount_points_under(dir).map_err(io("reading mountinfo for", dir))?;
    if !left.is_empty() {
        return Err(VolumeError::StillMounted {
            path: dir.to_path_buf(),
            mounts: left,
        });
    }
    if whole {
        return std::fs::remove_dir_all(dir).map_err(io("removing", dir));
    }
    for sub in ["volumes", "volume-subpaths"] {
        let d = dir.join(sub);
        match std::fs::remove_dir_all(&d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("removing", &d)(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::MemoryObjectStore;
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, PodSpec,
        VolumeMount,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(volumes: Vec<Volume>, mounts: Vec<VolumeMount>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    volume_mounts: Some(mounts),
                    ..Default::default()
                }],
                volumes: Some(volumes),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn mount(volume: &str, path: &str) -> VolumeMount {
        VolumeMount {
            name: volume.into(),
            mount_path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn subpath_expr_expansion() {
        let env = vec![
            EnvVar {
                name: "POD".into(),
                value: "p1".into(),
            },
            EnvVar {
                name: "EMPTY".into(),
                value: String::new(),
            },
        ];
        assert_eq!(expand_subpath_expr("logs/$(POD)", &env).unwrap(), "logs/p1");
        assert_eq!(expand_subpath_expr("$$(POD)", &env).unwrap(), "$(POD)");
        assert_eq!(
            expand_subpath_expr("$(NOPE)/$(EMPTY)", &env).unwrap_err(),
            "EMPTY, NOPE"
        );
    }

    #[tokio::test]
    async fn setup_mounts_and_teardown() {
        let root = tempfile::tempdir().unwrap();
        let host = tempfile::tempdir().unwrap();
        let store = Arc::new(MemoryObjectStore::new());
        store.put_config_map(ConfigMap {
            metadata: ObjectMeta {
                name: Some("cfg".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some([("k".to_string(), "v1".to_string())].into()),
            ..Default::default()
        });
        let vm = VolumeManager::new(root.path(), store.clone(), "cluster.local");
        let p = pod(
            vec![
                Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Default::default()
                },
                Volume {
                    name: "cfg".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "cfg".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "host".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: host.path().to_string_lossy().into_owned(),
                        type_: Some("Directory".into()),
                    }),
                    ..Default::default()
                },
            ],
            vec![
                mount("scratch", "/scratch"),
                VolumeMount {
                    read_only: Some(false),
                    ..mount("cfg", "/cfg")
                },
                mount("host", "/host"),
                // One key of the config map as a file: the user-visible link and `..data`
                // are symlinks inside the volume.
                VolumeMount {
                    sub_path: Some("k".into()),
                    ..mount("cfg", "/etc/app.conf")
                },
            ],
        );
        let fields = FieldValues::default();
        vm.setup_pod(&p, &fields, &ResourceList::new())
            .await
            .unwrap();
        let cfg_dir = vm.volume_dir("uid-1", "configmap", "cfg");
        assert_eq!(std::fs::read_to_string(cfg_dir.join("k")).unwrap(), "v1");
        assert!(vm.volume_dir("uid-1", "empty-dir", "scratch").is_dir());
        for d in ["containers", "volumes", "plugins"] {
            assert!(vm.pod_dir("uid-1").join(d).is_dir(), "{d}");
        }
        // Updated in place on the next setup.
        store.put_config_map(ConfigMap {
            metadata: ObjectMeta {
                name: Some("cfg".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some([("k".to_string(), "v2".to_string())].into()),
            ..Default::default()
        });
        vm.setup_pod(&p, &fields, &ResourceList::new())
            .await
            .unwrap();
        assert_eq!(std::fs::read_to_string(cfg_dir.join("k")).unwrap(), "v2");

        let c = &p.spec.as_ref().unwrap().containers[0];
        let mounts = vm
            .container_mounts(&p, c, &[], &["10.1.2.3".into()])
            .await
            .unwrap();
        let by_path: HashMap<&str, &Mount> = mounts
            .iter()
            .map(|m| (m.container_path.as_str(), m))
            .collect();
        assert!(by_path["/cfg"].read_only, "API data volumes are read-only");
        assert!(!by_path["/scratch"].read_only);
        assert_eq!(by_path["/host"].host_path, host.path());
        let hosts = std::fs::read_to_string(&by_path["/etc/hosts"].host_path).unwrap();
        assert!(hosts.contains("10.1.2.3\tp\n"), "{hosts}");
        let key = &by_path["/etc/app.conf"];
        assert_eq!(
            key.host_path,
            vm.pod_dir("uid-1").join("volume-subpaths/cfg/c/3")
        );
        assert!(key.read_only);
        assert_eq!(std::fs::read_to_string(&key.host_path).unwrap(), "v2");
        assert!(mount::is_mount_point(&key.host_path).unwrap());

        vm.teardown_pod("uid-1").await.unwrap();
        assert!(!vm.pod_dir("uid-1").exists());
        assert!(!mount::is_mount_point(&key.host_path).unwrap());
        assert!(host.path().is_dir(), "hostPath untouched");
    }

    #[tokio::test]
    async fn failures_name_every_volume_and_standalone_is_clear() {
        let root = tempfile::tempdir().unwrap();
        let vm = VolumeManager::new(root.path(), Arc::new(objects::StandaloneObjectStore), "");
        let p = pod(
            vec![
                Volume {
                    name: "cfg".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "cfg".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "missing".into(),
                    host_path: Some(HostPathVolumeSource {
                        path: "/nonexistent/kubelet-rs".into(),
                        type_: Some("Directory".into()),
                    }),
                    ..Default::default()
                },
            ],
            vec![],
        );
        let e = vm
            .setup_pod(&p, &FieldValues::default(), &ResourceList::new())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("unmounted volumes=[cfg missing]"), "{e}");
        assert!(e.contains("not available in standalone mode"), "{e}");
        assert!(e.contains("is not a directory"), "{e}");
        // A mount of a volume that was never set up is an error, not a panic.
        let c = &p.spec.as_ref().unwrap().containers[0];
        let mut c = c.clone();
        c.volume_mounts = Some(vec![mount("cfg", "/x")]);
        assert!(vm.container_mounts(&p, &c, &[], &[]).await.is_err());
    }

    #[tokio::test]
    async fn without_a_root_dir_only_pods_without_volumes_run() {
        let vm = VolumeManager::new(Path::new(""), Arc::new(objects::StandaloneObjectStore), "");
        let plain = pod(vec![], vec![]);
        vm.setup_pod(&plain, &FieldValues::default(), &ResourceList::new())
            .await
            .unwrap();
        let c = &plain.spec.as_ref().unwrap().containers[0];
        let mounts = vm
            .container_mounts(&plain, c, &[], &["10.0.0.1".into()])
            .await
            .unwrap();
        assert!(mounts.is_empty(), "no /etc/hosts without pod directories");
        assert!(vm.pod_dirs().await.is_empty());
        let with = pod(
            vec![Volume {
                name: "v".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            }],
            vec![],
        );
        let e = vm
            .setup_pod(&with, &FieldValues::default(), &ResourceList::new())
            .await
            .unwrap_err();
        assert!(matches!(e, VolumeError::NoRootDir { .. }), "{e}");
        vm.teardown_pod("uid-1").await.unwrap();
    }

    #[test]
    fn unsupported_kind_is_named() {
        let v: Volume = serde_json::from_value(serde_json::json!({
            "name": "data", "persistentVolumeClaim": {"claimName": "x"}
        }))
        .unwrap();
        assert_eq!(kind_of(&v), "persistentVolumeClaim");
    }
}
