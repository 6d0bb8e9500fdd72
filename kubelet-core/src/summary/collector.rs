//! [`SummaryCollector`]: the summary of the node and its pods from the contracts — the
//! [`NodeStatsProvider`], the runtime's sandbox and container listings (and, where the
//! runtime has them, its image filesystem and container writable layers), and the pods
//! (with their statuses) the kubelet runs.
//!
//! One collection: list sandboxes and containers; keep the pods with a ready sandbox and,
//! of each, its running containers; unless only CPU and memory are wanted, ask the runtime
//! for its image filesystem (`ImageFsInfo`) and its containers' writable layers
//! (`ListContainerStats`) — each an optional capability: a runtime that answers
//! `Unimplemented` is warned about once and not asked again; ask the provider for one
//! [`Sample`] of all of it (plus the node, its filesystems, the container log directories
//! and the pods' emptyDir volumes); then build the [`Summary`] (in `build`), computing CPU
//! rates against the kept samples (see [`rates`](super::rates)) and dropping the kept
//! samples of cgroups that are gone.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::build::{self, Collected};
use super::rates::CpuRates;
use crate::runtime::{
    ContainerRuntime, ContainerState, FilesystemUsage, ListFilter, RuntimeError, SandboxState,
};
use crate::stats::{MachineInfo, NodeStatsProvider, PodSampleRequest, SampleRequest, StatsError};
use crate::summary::{FsStats, Summary};

/// Minimum age of the kept sample for a CPU rate.
pub const MIN_RATE_WINDOW: Duration = Duration::from_secs(1);

/// Where the collector measures and what it calls the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    /// The node name (`node.nodeName`).
    pub node_name: String,
    /// The kubelet root dir: its filesystem is the node's `fs` (nodefs); the pods' emptyDir
    /// volumes are under it (empty: no volumes are measured).
    pub root_dir: PathBuf,
    /// The CRI pod log root (`/var/log/pods`): container `logs` are measured under it.
    pub pod_logs_dir: PathBuf,
    /// The runtime's image store (e.g. containerd's root) for `runtime.imageFs` when the
    /// runtime does not answer `ImageFsInfo`; `None` then leaves `runtime` out.
    pub image_fs_dir: Option<PathBuf>,
    /// Whether the summary has the `pods` system container (the node allocatable cgroup,
    /// `kubepods`). Its `availableBytes` is that cgroup's memory limit − its working set, as
    /// cAdvisor reports it for Go (none when the cgroup is unlimited): what
    /// `allocatableMemory.available` reads. The limit is capacity − kube/system reserved, not
    /// the node's allocatable (which also subtracts the hard eviction thresholds).
    pub pods_system_container: bool,
}

/// A pod the summary covers, with the start time from its status.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEntry {
    /// The pod.
    pub pod: Arc<Pod>,
    /// `status.startTime`.
    pub start_time: Option<Time>,
}

/// What a collection measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// CPU and memory only (Go's `GetCPUAndMemoryStats`).
    CpuAndMemory,
    /// Everything but network interfaces (what the eviction manager ranks pods by).
    NoNetwork,
    /// Everything but network interfaces, of the node and of the pods passed, which are a
    /// selection rather than every pod (what the eviction manager reads every cycle: its
    /// node-level signals and the pods with local-storage limits). Kept CPU samples of the
    /// pods not passed stay; with no pod passed the runtime's containers are not listed
    /// and no pod is read at all.
    SelectedPods,
    /// Everything.
    Full,
}

/// Whether the image filesystem is a filesystem of its own (0: not known yet).
const DEDICATED_UNKNOWN: u8 = 0;
const DEDICATED_NO: u8 = 1;
const DEDICATED_YES: u8 = 2;

/// The one summary collector. See the module docs.
pub struct SummaryCollector {
    provider: Arc<dyn NodeStatsProvider>,
    runtime: Arc<dyn ContainerRuntime>,
    config: SummaryConfig,
    rates: Mutex<CpuRates>,
    image_fs_unsupported: AtomicBool,
    container_stats_unsupported: AtomicBool,
    dedicated_image_fs: AtomicU8,
    /// The volume manager's last measurement of persistent volumes, by pod uid.
    persistent_volumes: Option<crate::summary::VolumeStatsCache>,
}

impl std::fmt::Debug for SummaryCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryCollector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One container to measure.
pub(super) struct ContainerTarget {
    pub id: String,
    pub name: String,
    pub created_at: i64,
    pub log_dir: PathBuf,
}

/// One emptyDir volume to measure.
pub(super) struct VolumeTarget {
    pub name: String,
    pub path: PathBuf,
    /// `medium: Memory` (tmpfs): not on the node's disk.
    pub memory: bool,
}

/// One pod to measure.
pub(super) struct PodTarget {
    pub pod: Arc<Pod>,
    pub uid: String,
    pub start_time: String,
    pub containers: Vec<ContainerTarget>,
    pub volumes: Vec<VolumeTarget>,
}

impl SummaryCollector {
    /// A collector over `provider` and `runtime`.
    pub fn new(
        provider: Arc<dyn NodeStatsProvider>,
        runtime: Arc<dyn ContainerRuntime>,
        config: SummaryConfig,
    ) -> Self {
        SummaryCollector {
            provider,
            runtime,
            config,
            rates: Mutex::new(CpuRates::new(MIN_RATE_WINDOW)),
            image_fs_unsupported: AtomicBool::new(false),
            container_stats_unsupported: AtomicBool::new(false),
            dedicated_image_fs: AtomicU8::new(DEDICATED_UNKNOWN),
            persistent_volumes: None,
        }
    }

    /// Lists each pod's measured persistent volumes from `cache` (the volume manager's,
    /// refreshed every `volumeStatsAggPeriod`) after its emptyDir volumes.
    pub fn with_persistent_volume_stats(mut self, cache: crate::summary::VolumeStatsCache) -> Self {
        self.persistent_volumes = Some(cache);
        self
    }

    /// Where it measures.
    pub fn config(&self) -> &SummaryConfig {
        &self.config
    }

    /// The machine, from the provider.
    pub fn machine_info(&self) -> Arc<MachineInfo> {
        self.provider.machine_info()
    }

    /// Whether the runtime's image filesystem is another filesystem than the kubelet root
    /// dir's, as the last full collection found (`None` before one found out). Go's
    /// `HasDedicatedImageFs`: it decides which reclaim and ranking the eviction manager uses
    /// for disk signals.
    pub fn has_dedicated_image_fs(&self) -> Option<bool> {
        match self.dedicated_image_fs.load(Ordering::Relaxed) {
            DEDICATED_YES => Some(true),
            DEDICATED_NO => Some(false),
            _ => None,
        }
    }

    /// The summary of the node and of those of `pods` that have a ready sandbox. With
    /// `only_cpu_and_memory`, network, filesystems and logs are left out (Go's
    /// `GetCPUAndMemoryStats`). `pods` should be every pod the kubelet runs: kept CPU
    /// samples of pods not among them are dropped.
    pub async fn summary(
        &self,
        pods: &[PodEntry],
        only_cpu_and_memory: bool,
    ) -> Result<Summary, StatsError> {
        let detail = if only_cpu_and_memory {
            Detail::CpuAndMemory
        } else {
            Detail::Full
        };
        self.collect(pods, detail).await
    }

    /// The image filesystem alone (`runtime.imageFs`, as the summary reports it): what
    /// image garbage collection compares its thresholds with. `None` when neither the
    /// runtime nor a configured image store directory tell where images live.
    pub async fn image_fs(&self) -> Option<FsStats> {
        let cri = self.image_fs_info().await;
        let mount = cri
            .as_ref()
            .map(|f| PathBuf::from(&f.mountpoint))
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| self.config.image_fs_dir.clone())?;
        let sample = self
            .provider
            .sample(SampleRequest {
                filesystems: vec![mount.clone()],
                ..SampleRequest::default()
            })
            .await
            .ok()?;
        let time = build::rfc3339(crate::clock::now_unix_nanos());
        build::image_fs_stats(sample.filesystems.get(&mount), cri.as_ref(), &time)
    }

    /// One collection at the given detail. See the module docs.
    pub(crate) async fn collect(
        &self,
        pods: &[PodEntry],
        detail: Detail,
    ) -> Result<Summary, StatsError> {
        let full = detail != Detail::CpuAndMemory;
        let network = detail == Detail::Full;
        let selected = detail == Detail::SelectedPods;
        let targets = if selected && pods.is_empty() {
            Vec::new()
        } else {
            self.targets(pods, full).await?
        };
        let (image_fs, layers) = match (full, selected && targets.is_empty()) {
            (false, _) => (None, HashMap::new()),
            (true, true) => (self.image_fs_info().await, HashMap::new()),
            (true, false) => tokio::join!(self.image_fs_info(), self.writable_layers()),
        };
        let image_mount = image_fs
            .as_ref()
            .map(|f| PathBuf::from(&f.mountpoint))
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| self.config.image_fs_dir.clone());
        let request = SampleRequest {
            pods: targets
                .iter()
                .map(|t| PodSampleRequest {
                    pod: t.pod.clone(),
                    container_ids: t.containers.iter().map(|c| c.id.clone()).collect(),
                    network: network && !crate::pod::host_network(&t.pod),
                })
                .collect(),
            network,
            filesystems: if full {
                std::iter::once(self.config.root_dir.clone())
                    .chain(image_mount.clone())
                    .collect()
            } else {
                Vec::new()
            },
            directories: if full {
                targets
                    .iter()
                    .flat_map(|t| t.containers.iter().map(|c| c.log_dir.clone()))
                    .collect()
            } else {
                Vec::new()
            },
            disk_usage: if full {
                targets
                    .iter()
                    .flat_map(|t| t.volumes.iter().map(|v| v.path.clone()))
                    .collect()
            } else {
                Vec::new()
            },
        };
        let sample = self.provider.sample(request).await?;
        if full {
            self.note_dedicated(&sample, image_mount.as_ref());
        }
        let machine = self.provider.machine_info();
        let persistent: HashMap<String, Vec<crate::summary::VolumeStats>> =
            match (&self.persistent_volumes, full) {
                (Some(cache), true) => {
                    let cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                    targets
                        .iter()
                        .filter_map(|t| Some((t.uid.clone(), cache.get(&t.uid)?.clone())))
                        .collect()
                }
                _ => HashMap::new(),
            };
        let collected = Collected {
            machine: &machine,
            sample: &sample,
            image_fs: image_fs.as_ref(),
            image_mount: image_mount.as_ref(),
            layers: &layers,
            full,
            network,
            every_pod: !selected,
            persistent_volumes: &persistent,
        };
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        Ok(build::summary(
            &self.config,
            &mut rates,
            targets,
            &collected,
        ))
    }

    fn note_dedicated(&self, sample: &crate::stats::Sample, image_mount: Option<&PathBuf>) {
        let node = sample.filesystems.get(&self.config.root_dir);
        let image = image_mount.and_then(|m| sample.filesystems.get(m));
        let value = match (node, image) {
            (Some(n), Some(i)) if n.fs_id != 0 && i.fs_id != 0 => {
                if n.fs_id == i.fs_id {
                    DEDICATED_NO
                } else {
                    DEDICATED_YES
                }
            }
            // Without an image filesystem, images share the node's.
            (Some(_), None) if image_mount.is_none() => DEDICATED_NO,
            _ => return,
        };
        self.dedicated_image_fs.store(value, Ordering::Relaxed);
    }

    /// The runtime's image filesystem (`ImageFsInfo`), unless it does not have one.
    async fn image_fs_info(&self) -> Option<FilesystemUsage> {
        if self.image_fs_unsupported.load(Ordering::Relaxed) {
            return None;
        }
        match self.runtime.image_fs_info().await {
            Ok(info) => info.image_filesystems.into_iter().next(),
            Err(e) if e.is_unimplemented() => {
                if !self.image_fs_unsupported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "the container runtime reports no image filesystem; runtime.imageFs comes from the configured image store only");
                }
                None
            }
            Err(e) => {
                tracing::debug!(error = %e, "ImageFsInfo failed");
                None
            }
        }
    }

    /// Writable-layer usage by container id (`ListContainerStats`), unless the runtime does
    /// not measure it.
    async fn writable_layers(&self) -> HashMap<String, FilesystemUsage> {
        if self.container_stats_unsupported.load(Ordering::Relaxed) {
            return HashMap::new();
        }
        match self.runtime.list_container_stats(&ListFilter::all()).await {
            Ok(list) => list
                .into_iter()
                .filter_map(|s| s.writable_layer.map(|w| (s.container_id, w)))
                .collect(),
            Err(e) if matches!(e, RuntimeError::Unimplemented { .. }) => {
                if !self
                    .container_stats_unsupported
                    .swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(error = %e, "the container runtime does not measure containers; containers get no rootfs stats");
                }
                HashMap::new()
            }
            Err(e) => {
                tracing::debug!(error = %e, "ListContainerStats failed");
                HashMap::new()
            }
        }
    }

    /// The pods with a ready sandbox and their running containers, sorted by name.
    async fn targets(&self, pods: &[PodEntry], full: bool) -> Result<Vec<PodTarget>, StatsError> {
        let filter = ListFilter::all();
        let (sandboxes, containers) = tokio::try_join!(
            async {
                self.runtime
                    .list_pod_sandboxes(&filter)
                    .await
                    .map_err(|error| StatsError::Runtime {
                        what: "sandboxes",
                        error,
                    })
            },
            async {
                self.runtime
                    .list_containers(&filter)
                    .await
                    .map_err(|error| StatsError::Runtime {
                        what: "containers",
                        error,
                    })
            },
        )?;
        // By pod uid: one pass over each list, not one per pod.
        let ready: HashSet<&str> = sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
            .map(|s| s.pod.uid.as_str())
            .collect();
        let mut running: HashMap<&str, Vec<&crate::runtime::ContainerSummary>> = HashMap::new();
        for c in containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
        {
            running.entry(c.pod.uid.as_str()).or_default().push(c);
        }
        let mut targets = Vec::new();
        for entry in pods {
            let pod = &entry.pod;
            let uid = crate::pod::uid(pod).to_string();
            if !ready.contains(uid.as_str()) {
                continue;
            }
            let pod_log_dir = self.config.pod_logs_dir.join(format!(
                "{}_{}_{}",
                crate::pod::namespace(pod),
                crate::pod::name(pod),
                uid
            ));
            let mut cs: Vec<ContainerTarget> = running
                .get(uid.as_str())
                .into_iter()
                .flatten()
                .map(|c| ContainerTarget {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    created_at: c.created_at,
                    log_dir: if full {
                        pod_log_dir.join(&c.name)
                    } else {
                        PathBuf::new()
                    },
                })
                .collect();
            cs.sort_by(|a, b| a.name.cmp(&b.name));
            targets.push(PodTarget {
                pod: pod.clone(),
                volumes: if full {
                    self.empty_dirs(pod, &uid)
                } else {
                    Vec::new()
                },
                uid,
                start_time: entry
                    .start_time
                    .as_ref()
                    .map(|t| t.0.to_string())
                    .unwrap_or_default(),
                containers: cs,
            });
        }
        Ok(targets)
    }

    /// The pod's emptyDir volumes under the root dir (none without a root dir or for an
    /// unsafe uid).
    fn empty_dirs(&self, pod: &Pod, uid: &str) -> Vec<VolumeTarget> {
        if self.config.root_dir.as_os_str().is_empty() || !crate::pod::is_safe_uid(uid) {
            return Vec::new();
        }
        let base = self
            .config
            .root_dir
            .join("pods")
            .join(uid)
            .join("volumes")
            .join("kubernetes.io~empty-dir");
        pod.spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| {
                let e = v.empty_dir.as_ref()?;
                if v.name.is_empty() || v.name.contains('/') || v.name.starts_with('.') {
                    return None;
                }
                Some(VolumeTarget {
                    name: v.name.clone(),
                    path: base.join(&v.name),
                    memory: e.medium.as_deref() == Some("Memory"),
                })
            })
            .collect()
    }

    /// How many CPU samples are kept (for tests of the pruning).
    #[cfg(test)]
    pub(crate) fn kept_samples(&self) -> usize {
        self.rates.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
