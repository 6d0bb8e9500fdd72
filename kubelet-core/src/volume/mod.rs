//! The volume manager: the pod directories and volumes a pod's containers mount.
//!
//! # Layout (as the Go kubelet)
//! ```text
//! <root-dir>/pods/<uid>/
//!     volumes/kubernetes.io~<plugin>/<name>   emptyDir, configMap, secret, downwardAPI, projected
//!     volumes/kubernetes.io~local-volume/<pv>  a bind mount of a `local` PersistentVolume
//!     volume-subpaths/<volume>/<container>/<i>  bind mounts of safely resolved subPaths
//!     containers/                              per-container data
//!     etc-hosts                                the kubelet-managed /etc/hosts
//! ```
//!
//! # Lifecycle
//! Every sync of a pod that should run calls [`VolumeManager::setup_pod`] before containers are
//! started: it creates the directories, sets up every volume (idempotent: an emptyDir tmpfs is
//! mounted once, API-data volumes are rewritten by the [`atomic_writer`] only when their
//! content changed — which is how config map, secret and token updates reach running pods;
//! the pod's own volumes — API data, emptyDir, hostPath — up to eight at once, as Go's volume
//! manager mounts a pod's volumes in parallel; claims and CSI volumes one after the other)
//! and reports every failing volume in one error; the engine turns that into a `FailedMount`
//! event and a waiting reason and retries, other pods are not affected. Container creation
//! asks [`VolumeManager::container_mounts`] for the mounts (subPath binds, `/etc/hosts`).
//! After a pod was terminated and removed, [`VolumeManager::teardown_pod`] unmounts what is
//! mounted under its directory and removes it; housekeeping does the same for directories of
//! pods nobody knows ([`VolumeManager::cleanup_orphans`]), never removing a directory that
//! still has a mount below it.
//!
//! A `persistentVolumeClaim` is resolved to its PersistentVolume ([`claims`]) until the pod's
//! volume is set up; `local` volumes are bind-mounted ([`local`]) and get the pod's `fsGroup`
//! ([`ownership`]), `hostPath` volumes are used in place. A kubelet restart finds a running
//! pod's bind mount in place and keeps it.
//!
//! Cluster objects come through an [`crate::objects::ObjectStore`]; in standalone mode a pod that
//! references one gets a clear "not available in standalone mode" error.
//!
//! An empty root directory (as engine tests use) means "no pod files": pods without volumes
//! run without pod directories and without a managed `/etc/hosts`; pods with volumes fail
//! with [`VolumeError::NoRootDir`].

pub mod atomic_writer;
pub mod attach;
pub mod block;
pub mod claims;
pub mod configmap;
pub mod csi;
pub mod csi_block;
pub mod csi_driver;
pub mod downward_api;
pub mod emptydir;
pub mod etc_hosts;
pub mod expand;
pub mod hostpath;
pub mod local;
pub mod local_device;
pub mod mount;
pub mod ownership;

pub mod projected;
pub mod secret;
pub mod stats;
pub mod subpath;

mod error;
mod mounts;
mod persistent;
mod setup;
mod teardown;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::objects::ObjectStore;

pub use error::VolumeError;

/// The waiting reason of containers whose volumes are not set up: the default Go leaves them
/// in, `ContainerCreating`, or `PodInitializing` in a pod with init containers (Go's
/// `convertToAPIContainerStatuses`; the InitContainer conformance specs watch for exactly that).
pub fn volume_waiting_reason(pod: &k8s_openapi::api::core::v1::Pod) -> &'static str {
    let has_inits = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|i| !i.is_empty());
    if has_inits {
        "PodInitializing"
    } else {
        "ContainerCreating"
    }
}
/// Path of the kubelet-managed hosts file inside containers.
const ETC_HOSTS: &str = "/etc/hosts";

/// A volume that is set up for a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetUpVolume {
    /// Where it is on the host.
    pub host_path: PathBuf,
    /// Mounted read-only whatever the volumeMount says (configMap, secret, downwardAPI,
    /// projected).
    pub read_only: bool,
    /// How its usage is measured (see [`stats`]).
    pub measure: stats::VolumeMeasure,
    /// The claim it stands for (a `persistentVolumeClaim` volume).
    pub claim: Option<crate::summary::PvcReference>,
    /// Its PersistentVolume's `pv.beta.kubernetes.io/gid` annotation, as written.
    pub gid: Option<String>,
    /// A raw block volume: `host_path` is the pod's link to the device (see [`block`]), for
    /// the containers' `volumeDevices`, never mounted.
    pub block_device: bool,
}

/// See the module docs.
pub struct VolumeManager {
    /// `<root>/pods`; `None` without a root directory.
    pods_dir: Option<PathBuf>,
    store: Arc<dyn ObjectStore>,
    cluster_domain: String,
    state: Mutex<HashMap<String, HashMap<String, SetUpVolume>>>,
    /// The registered CSI drivers' calls; `None`: CSI volumes are refused.
    csi: Option<Arc<dyn crate::csi::CsiNodeService>>,
    /// The node's name (recorded in CSI volumes' `vol_data.json`).
    node_name: String,
    /// CSI volumes (PV names) staged since this kubelet started.
    csi_staged: Mutex<std::collections::HashSet<String>>,
    /// Events of pods' volume set-ups not yet taken (see [`VolumeManager::take_events`]).
    events: Mutex<HashMap<String, Vec<expand::VolumeEvent>>>,
    /// One lock per persistent volume in use (see [`VolumeManager::pv_lock`]).
    pv_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Attachable volumes in use and reported (see [`attach`]).
    attach: Mutex<attach::AttachState>,
    /// The Node (its `status.volumesAttached`); `None`: not checked.
    node_lister: Option<Arc<dyn crate::admission::NodeLister>>,
    /// Woken when the attachable volumes in use changed.
    in_use_changed: Arc<tokio::sync::Notify>,
    /// The last measurement of the measured volumes (see [`stats`]).
    volume_stats: stats::VolumeStatsCache,
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
    move |error| VolumeError::Io { op, path, error }
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
            csi: None,
            node_name: String::new(),
            csi_staged: Mutex::default(),
            events: Mutex::default(),
            pv_locks: Mutex::default(),
            attach: Mutex::default(),
            node_lister: None,
            in_use_changed: Arc::default(),
            volume_stats: Arc::default(),
        }
    }

    /// Checks attachable volumes against this Node's `status.volumesAttached` (see
    /// [`attach`]); without it, only their VolumeAttachments are checked.
    pub fn set_node_lister(&mut self, lister: Arc<dyn crate::admission::NodeLister>) {
        self.node_lister = Some(lister);
    }

    /// Wakes `notify` whenever the attachable volumes in use change (the node status writer
    /// reports them at once).
    pub fn set_in_use_notify(&mut self, notify: Arc<tokio::sync::Notify>) {
        self.in_use_changed = notify;
    }

    /// Mounts CSI volumes through `service` (the registered drivers) for the node
    /// `node_name`; without it, CSI volumes are refused.
    pub fn set_csi(&mut self, service: Arc<dyn crate::csi::CsiNodeService>, node_name: &str) {
        self.csi = Some(service);
        self.node_name = node_name.to_string();
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

    /// The lock of one PersistentVolume (by name): a CSI volume's stage, publishes, unpublishes
    /// and unstage, and a local block device's mount, binds and unmount, run one at a time
    /// (Go's one operation per volume), so a pod's set-up never meets another's unstage.
    pub(super) fn pv_lock(&self, pv: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.pv_locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.retain(|_, l| Arc::strong_count(l) > 1);
        locks.entry(pv.to_string()).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::ResourceList;
    use crate::env::FieldValues;
    use crate::objects;
    use crate::objects::MemoryObjectStore;
    use crate::runtime::{EnvVar, Mount};
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, PodSpec,
        VolumeMount,
    };
    use k8s_openapi::api::core::v1::{Container, Pod, Volume};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use mounts::expand_subpath_expr;
    use setup::kind_of;

    /// Pod `ns/p` (uid `uid-1`) with `volumes` and one container `c` mounting `mounts`.
    pub(super) fn pod(volumes: Vec<Volume>, mounts: Vec<VolumeMount>) -> Pod {
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
            expand_subpath_expr("$(NOPE)/$(EMPTY)", &env)
                .unwrap_err()
                .to_string(),
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
        vm.setup_pod(&p, &fields, &ResourceList::new(), &Default::default())
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
        vm.setup_pod(&p, &fields, &ResourceList::new(), &Default::default())
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
            .setup_pod(
                &p,
                &FieldValues::default(),
                &ResourceList::new(),
                &Default::default(),
            )
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
        vm.setup_pod(
            &plain,
            &FieldValues::default(),
            &ResourceList::new(),
            &Default::default(),
        )
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
            .setup_pod(
                &with,
                &FieldValues::default(),
                &ResourceList::new(),
                &Default::default(),
            )
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
