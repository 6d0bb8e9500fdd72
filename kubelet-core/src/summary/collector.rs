//! [`SummaryCollector`]: the summary of the node and its pods from the contracts — the
//! [`NodeStatsProvider`], the runtime's sandbox and container listings, and the pods (with
//! their statuses) the kubelet runs.
//!
//! One collection: list sandboxes and containers; keep the pods with a ready sandbox and,
//! of each, its running containers; ask the provider for one [`Sample`] of all of them (plus
//! the node, its filesystems and the container log directories unless only CPU and memory
//! are wanted); then build the [`Summary`], computing CPU rates against the kept samples
//! (see [`rates`](super::rates)) and dropping the kept samples of cgroups that are gone.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::rates::{CpuRates, RateKey};
use crate::config::Config;
use crate::runtime::{ContainerRuntime, ContainerState, ListFilter, SandboxState};
use crate::stats::{
    DirUsage, FsUsage, InterfaceStats, MachineInfo, NodeStatsProvider, PodSampleRequest,
    ResourceUsage, Sample, SampleRequest, StatsError,
};
use crate::summary::{
    ContainerStats, CpuStats, FsStats, MemoryStats, NetworkStats, NodeStats, PodReference,
    PodStats, RuntimeStats, Summary,
};
use crate::KubeletHandle;

/// Minimum age of the kept sample for a CPU rate.
pub const MIN_RATE_WINDOW: Duration = Duration::from_secs(1);

/// Where the collector measures and what it calls the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryConfig {
    /// The node name (`node.nodeName`).
    pub node_name: String,
    /// The kubelet root dir: its filesystem is the node's `fs` (nodefs).
    pub root_dir: PathBuf,
    /// The CRI pod log root (`/var/log/pods`): container `logs` are measured under it.
    pub pod_logs_dir: PathBuf,
    /// The runtime's image store (e.g. containerd's root) for `runtime.imageFs`; `None`
    /// leaves `runtime` out.
    pub image_fs_dir: Option<PathBuf>,
}

impl SummaryConfig {
    /// The node name, root dir and pod log root of an engine configuration; no image fs.
    pub fn from_config(config: &Config) -> Self {
        SummaryConfig {
            node_name: config.node_name.clone(),
            root_dir: config.root_dir.clone(),
            pod_logs_dir: config.pod_logs_dir.clone(),
            image_fs_dir: None,
        }
    }
}

/// A pod the summary covers, with the start time from its status.
#[derive(Debug, Clone, PartialEq)]
pub struct PodEntry {
    /// The pod.
    pub pod: Arc<Pod>,
    /// `status.startTime`.
    pub start_time: Option<Time>,
}

impl PodEntry {
    /// The pods a running kubelet runs, with their latest statuses' start times.
    pub fn of_kubelet(handle: &KubeletHandle) -> Vec<PodEntry> {
        handle
            .pods()
            .into_iter()
            .map(|pod| {
                let start_time = handle
                    .pod_status(crate::pod::uid(&pod))
                    .and_then(|s| s.start_time);
                PodEntry { pod, start_time }
            })
            .collect()
    }
}

/// The one summary collector. See the module docs.
pub struct SummaryCollector {
    provider: Arc<dyn NodeStatsProvider>,
    runtime: Arc<dyn ContainerRuntime>,
    config: SummaryConfig,
    rates: Mutex<CpuRates>,
}

impl std::fmt::Debug for SummaryCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryCollector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// One container to measure.
struct ContainerTarget {
    id: String,
    name: String,
    created_at: i64,
    log_dir: PathBuf,
}

/// One pod to measure.
struct PodTarget {
    pod: Arc<Pod>,
    uid: String,
    start_time: String,
    containers: Vec<ContainerTarget>,
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
        }
    }

    /// The collector of a running kubelet: its runtime, its container manager's
    /// [`node_stats`](crate::ContainerManager::node_stats) and [`SummaryConfig::from_config`];
    /// `None` when the container manager does not measure.
    pub fn for_kubelet(handle: &KubeletHandle) -> Option<Self> {
        let provider = handle.container_manager().node_stats()?;
        Some(Self::new(
            provider,
            handle.runtime(),
            SummaryConfig::from_config(handle.config()),
        ))
    }

    /// Where it measures.
    pub fn config(&self) -> &SummaryConfig {
        &self.config
    }

    /// The machine, from the provider.
    pub fn machine_info(&self) -> Arc<MachineInfo> {
        self.provider.machine_info()
    }

    /// The summary of the node and the pods `handle` runs ([`PodEntry::of_kubelet`]).
    pub async fn summary_of(
        &self,
        handle: &KubeletHandle,
        only_cpu_and_memory: bool,
    ) -> Result<Summary, StatsError> {
        self.summary(&PodEntry::of_kubelet(handle), only_cpu_and_memory)
            .await
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
        let targets = self.targets(pods, only_cpu_and_memory).await?;
        let full = !only_cpu_and_memory;
        let request = SampleRequest {
            pods: targets
                .iter()
                .map(|t| PodSampleRequest {
                    pod: t.pod.clone(),
                    container_ids: t.containers.iter().map(|c| c.id.clone()).collect(),
                    network: full && !host_network(&t.pod),
                })
                .collect(),
            network: full,
            filesystems: if full {
                std::iter::once(self.config.root_dir.clone())
                    .chain(self.config.image_fs_dir.clone())
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
        };
        let sample = self.provider.sample(request).await?;
        let machine = self.provider.machine_info();
        Ok(self.build(&machine, targets, &sample, full))
    }

    /// The pods with a ready sandbox and their running containers, sorted by name.
    async fn targets(
        &self,
        pods: &[PodEntry],
        only_cpu_and_memory: bool,
    ) -> Result<Vec<PodTarget>, StatsError> {
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
        let mut targets = Vec::new();
        for entry in pods {
            let pod = &entry.pod;
            let uid = crate::pod::uid(pod).to_string();
            let ready = sandboxes
                .iter()
                .any(|s| s.pod.uid == uid && s.state == SandboxState::Ready);
            if !ready {
                continue;
            }
            let pod_log_dir = self.config.pod_logs_dir.join(format!(
                "{}_{}_{}",
                crate::pod::namespace(pod),
                crate::pod::name(pod),
                uid
            ));
            let mut cs: Vec<ContainerTarget> = containers
                .iter()
                .filter(|c| c.pod.uid == uid && c.state == ContainerState::Running)
                .map(|c| ContainerTarget {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    created_at: c.created_at,
                    log_dir: if only_cpu_and_memory {
                        PathBuf::new()
                    } else {
                        pod_log_dir.join(&c.name)
                    },
                })
                .collect();
            cs.sort_by(|a, b| a.name.cmp(&b.name));
            targets.push(PodTarget {
                pod: pod.clone(),
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

    /// The summary from one sample; CPU rates against (and pruning of) the kept samples.
    fn build(
        &self,
        machine: &MachineInfo,
        targets: Vec<PodTarget>,
        sample: &Sample,
        full: bool,
    ) -> Summary {
        let time = rfc3339(crate::clock::now_unix_nanos());
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = HashSet::new();
        let mut cpu = |key: RateKey, u: &ResourceUsage| {
            seen.insert(key.clone());
            CpuStats {
                time: time.clone(),
                usage_nano_cores: rates.rate(key, u),
                usage_core_nano_seconds: u.cpu_usage_ns,
            }
        };
        let node = NodeStats {
            node_name: self.config.node_name.clone(),
            system_containers: Vec::new(),
            start_time: rfc3339(machine.boot_time_seconds.saturating_mul(1_000_000_000)),
            cpu: sample.node.as_ref().map(|u| cpu(RateKey::Node, u)),
            memory: sample
                .node
                .as_ref()
                .map(|u| memory(u, &time, Some(machine.memory_capacity))),
            network: sample
                .node_interfaces
                .as_deref()
                .filter(|_| full)
                .and_then(|i| network(i, &time)),
            fs: full
                .then(|| sample.filesystems.get(&self.config.root_dir))
                .flatten()
                .map(|f| fs_stats(f, &time)),
            runtime: self
                .config
                .image_fs_dir
                .as_deref()
                .filter(|_| full)
                .map(|d| RuntimeStats {
                    image_fs: sample.filesystems.get(d).map(|f| fs_stats(f, &time)),
                }),
        };
        let pods = targets
            .into_iter()
            .map(|t| {
                let measured = sample.pods.get(&t.uid);
                let containers = t
                    .containers
                    .iter()
                    .map(|c| {
                        let usage = measured.and_then(|m| m.containers.get(&c.id));
                        ContainerStats {
                            name: c.name.clone(),
                            start_time: rfc3339(c.created_at),
                            cpu: usage.map(|u| cpu(RateKey::Container(c.id.clone()), u)),
                            memory: usage.map(|u| memory(u, &time, None)),
                            logs: full.then(|| {
                                log_stats(
                                    &sample
                                        .directories
                                        .get(&c.log_dir)
                                        .copied()
                                        .unwrap_or_default(),
                                    &time,
                                )
                            }),
                        }
                    })
                    .collect();
                let pod_usage = measured.and_then(|m| m.usage.as_ref());
                PodStats {
                    pod_ref: PodReference {
                        name: crate::pod::name(&t.pod).to_string(),
                        namespace: crate::pod::namespace(&t.pod).to_string(),
                        uid: t.uid.clone(),
                    },
                    start_time: t.start_time,
                    containers,
                    cpu: pod_usage.map(|u| cpu(RateKey::Pod(t.uid.clone()), u)),
                    memory: pod_usage.map(|u| memory(u, &time, None)),
                    network: measured
                        .and_then(|m| m.interfaces.as_deref())
                        .filter(|_| full && !host_network(&t.pod))
                        .and_then(|i| network(i, &time)),
                }
            })
            .collect();
        rates.retain(&seen);
        Summary { node, pods }
    }

    /// How many CPU samples are kept (for tests of the pruning).
    #[cfg(test)]
    pub(crate) fn kept_samples(&self) -> usize {
        self.rates.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// RFC 3339 of Unix nanoseconds (empty when out of range).
fn rfc3339(nanos: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn memory(u: &ResourceUsage, time: &str, capacity: Option<u64>) -> MemoryStats {
    MemoryStats {
        time: time.to_string(),
        available_bytes: capacity.map(|c| c.saturating_sub(u.memory_working_set_bytes)),
        usage_bytes: u.memory_usage_bytes,
        working_set_bytes: u.memory_working_set_bytes,
        rss_bytes: u.memory_rss_bytes,
        cache_bytes: Some(u.memory_cache_bytes),
    }
}

/// Network stats: all interfaces sorted by name, the default one (eth0 when there is one,
/// else the busiest) inline; `None` without interfaces.
fn network(interfaces: &[InterfaceStats], time: &str) -> Option<NetworkStats> {
    let mut interfaces = interfaces.to_vec();
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    let default = interfaces
        .iter()
        .find(|i| i.name == "eth0")
        .or_else(|| {
            interfaces
                .iter()
                .max_by_key(|i| i.rx_bytes.saturating_add(i.tx_bytes))
        })?
        .clone();
    Some(NetworkStats {
        time: time.to_string(),
        default,
        interfaces,
    })
}

fn fs_stats(f: &FsUsage, time: &str) -> FsStats {
    FsStats {
        time: time.to_string(),
        available_bytes: Some(f.available_bytes),
        capacity_bytes: Some(f.capacity_bytes),
        used_bytes: Some(f.used_bytes),
        inodes_free: Some(f.inodes_free),
        inodes: Some(f.inodes),
        inodes_used: Some(f.inodes_used),
    }
}

/// A log directory: what it holds, on what its filesystem offers.
fn log_stats(d: &DirUsage, time: &str) -> FsStats {
    let fs = d.filesystem.as_ref().map(|f| fs_stats(f, time));
    FsStats {
        time: time.to_string(),
        used_bytes: Some(d.used_bytes),
        inodes_used: Some(d.inodes_used),
        ..fs.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerConfig, ContainerKind, SandboxConfig};
    use crate::stats::DirUsage;
    use crate::testing::{container, pod, CgroupUsage, FakeNodeStats, SimRuntime};
    use std::collections::HashMap;
    use std::path::Path;

    const GIB: u64 = 1 << 30;

    fn eth(name: &str, rx: u64, tx: u64) -> InterfaceStats {
        InterfaceStats {
            name: name.into(),
            rx_bytes: rx,
            rx_errors: 0,
            tx_bytes: tx,
            tx_errors: 0,
        }
    }

    /// Runs the pod's sandbox and containers on the simulator; returns the container ids by
    /// name.
    async fn run(sim: &SimRuntime, p: &Arc<Pod>) -> HashMap<String, String> {
        let sandbox = SandboxConfig {
            pod: p.clone(),
            attempt: 0,
            hostname: crate::pod::name(p).into(),
            log_directory: PathBuf::from("/logs"),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        };
        let sb = sim.run_pod_sandbox(&sandbox).await.unwrap();
        let mut ids = HashMap::new();
        for c in &p.spec.as_ref().unwrap().containers {
            let config = ContainerConfig {
                pod: p.clone(),
                container: c.clone(),
                kind: ContainerKind::Regular,
                restart_count: 0,
                hash: 0,
                image_ref: "sha256:img".into(),
                command: vec![],
                args: vec![],
                env: vec![],
                mounts: vec![],
                log_path: PathBuf::from(format!("{}/0.log", c.name)),
            };
            let id = sim.create_container(&sb, &config, &sandbox).await.unwrap();
            sim.start_container(&id).await.unwrap();
            ids.insert(c.name.clone(), id);
        }
        ids
    }

    fn config() -> SummaryConfig {
        SummaryConfig {
            node_name: "node-1".into(),
            root_dir: PathBuf::from("/var/lib/kubelet"),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            image_fs_dir: Some(PathBuf::from("/var/lib/containerd")),
        }
    }

    fn entry(p: &Arc<Pod>) -> PodEntry {
        PodEntry {
            pod: p.clone(),
            start_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_714_557_600).unwrap(),
            )),
        }
    }

    type Fixture = (
        Arc<SimRuntime>,
        Arc<FakeNodeStats>,
        SummaryCollector,
        Arc<Pod>,
        HashMap<String, String>,
    );

    async fn fixture() -> Fixture {
        let sim = Arc::new(SimRuntime::new());
        let stats = Arc::new(FakeNodeStats::default());
        let web = Arc::new(pod(
            "web",
            "u1",
            vec![container("side", "busybox"), container("app", "busybox")],
        ));
        let ids = run(&sim, &web).await;
        let collector = SummaryCollector::new(stats.clone(), sim.clone(), config());
        (sim, stats, collector, web, ids)
    }

    #[tokio::test(start_paused = true)]
    async fn summary_of_a_pod_with_rates_two_samples_a_second_apart() {
        let (_sim, stats, collector, web, ids) = fixture().await;
        let (app, side) = (&ids["app"], &ids["side"]);
        stats.set_node_usage(Some(CgroupUsage::new(0, 2 * GIB)));
        stats.set_pod_usage("u1", CgroupUsage::new(0, 300));
        stats.set_container_usage(app, CgroupUsage::new(0, 200));
        stats.set_container_usage(side, CgroupUsage::new(0, 100));
        stats.set_node_interfaces(vec![eth("ens3", 10, 10), eth("ens4", 100, 1)]);
        stats.set_pod_interfaces("u1", vec![eth("net1", 500, 500), eth("eth0", 1, 2)]);
        let app_logs = Path::new("/var/log/pods/default_web_u1/app");
        stats.set_directory(
            app_logs,
            DirUsage {
                used_bytes: 4096,
                inodes_used: 3,
                filesystem: None,
            },
        );
        let pods = [entry(&web)];

        let s = collector.summary(&pods, false).await.unwrap();
        let node = &s.node;
        assert_eq!(node.node_name, "node-1");
        assert_eq!(node.start_time, "2023-11-14T22:13:20Z");
        let cpu = node.cpu.as_ref().unwrap();
        assert_eq!(cpu.usage_nano_cores, None, "one sample: no rate yet");
        assert_eq!(cpu.usage_core_nano_seconds, 0);
        let mem = node.memory.as_ref().unwrap();
        assert_eq!(mem.working_set_bytes, 2 * GIB);
        assert_eq!(
            mem.available_bytes,
            Some(6 * GIB),
            "8Gi capacity − working set"
        );
        let net = node.network.as_ref().unwrap();
        assert_eq!(net.default.name, "ens4", "no eth0: the busiest");
        assert_eq!(
            net.interfaces
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>(),
            ["ens3", "ens4"]
        );
        let fs = node.fs.as_ref().unwrap();
        assert_eq!(fs.capacity_bytes, Some(100 * GIB));
        assert_eq!(fs.available_bytes, Some(50 * GIB));
        assert!(node.runtime.as_ref().unwrap().image_fs.is_some());

        assert_eq!(s.pods.len(), 1);
        let p = &s.pods[0];
        assert_eq!(
            (
                p.pod_ref.namespace.as_str(),
                p.pod_ref.name.as_str(),
                p.pod_ref.uid.as_str()
            ),
            ("default", "web", "u1")
        );
        assert_eq!(p.start_time, "2024-05-01T10:00:00Z");
        assert_eq!(p.memory.as_ref().unwrap().working_set_bytes, 300);
        assert_eq!(p.memory.as_ref().unwrap().available_bytes, None);
        assert_eq!(p.network.as_ref().unwrap().default.name, "eth0");
        let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["app", "side"], "sorted by name");
        let logs = p.containers[0].logs.as_ref().unwrap();
        assert_eq!((logs.used_bytes, logs.inodes_used), (Some(4096), Some(3)));
        assert_eq!(logs.capacity_bytes, None, "its filesystem was not measured");
        assert!(!logs.time.is_empty());
        let side_logs = p.containers[1].logs.as_ref().unwrap();
        assert_eq!(
            side_logs.used_bytes,
            Some(0),
            "an unmeasured directory is empty"
        );

        // 0.5s later: too close to the kept samples for a rate.
        tokio::time::advance(Duration::from_millis(500)).await;
        stats.set_node_usage(Some(CgroupUsage::new(1_000_000_000, 2 * GIB)));
        let s = collector.summary(&pods, true).await.unwrap();
        assert_eq!(s.node.cpu.as_ref().unwrap().usage_nano_cores, None);

        // 1s after the first: rates over that second.
        tokio::time::advance(Duration::from_millis(500)).await;
        stats.set_node_usage(Some(CgroupUsage::new(2_000_000_000, 2 * GIB)));
        stats.set_pod_usage("u1", CgroupUsage::new(750_000_000, 300));
        stats.set_container_usage(app, CgroupUsage::new(500_000_000, 200));
        stats.set_container_usage(side, CgroupUsage::new(250_000_000, 100));
        let s = collector.summary(&pods, true).await.unwrap();
        assert_eq!(
            s.node.cpu.as_ref().unwrap().usage_nano_cores,
            Some(2_000_000_000)
        );
        let p = &s.pods[0];
        assert_eq!(p.cpu.as_ref().unwrap().usage_nano_cores, Some(750_000_000));
        assert_eq!(
            p.containers[0].cpu.as_ref().unwrap().usage_nano_cores,
            Some(500_000_000)
        );
        assert_eq!(
            p.containers[1].cpu.as_ref().unwrap().usage_nano_cores,
            Some(250_000_000)
        );
        assert_eq!(
            p.containers[1]
                .cpu
                .as_ref()
                .unwrap()
                .usage_core_nano_seconds,
            250_000_000
        );
        // CPU and memory only: no network, filesystems or logs, and none asked for.
        assert!(s.node.network.is_none() && s.node.fs.is_none() && s.node.runtime.is_none());
        assert!(p.network.is_none() && p.containers[0].logs.is_none());
        let last = stats.requests().pop().unwrap();
        assert!(!last.network && last.filesystems.is_empty() && last.directories.is_empty());
        assert_eq!(last.pods.len(), 1);
        assert_eq!(last.pods[0].container_ids.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn kept_samples_of_gone_pods_and_containers_are_dropped() {
        let (sim, stats, collector, web, ids) = fixture().await;
        let db = Arc::new(pod("db", "u2", vec![container("db", "busybox")]));
        let db_ids = run(&sim, &db).await;
        for (uid, cs) in [("u1", &ids), ("u2", &db_ids)] {
            stats.set_pod_usage(uid, CgroupUsage::new(1, 1));
            for id in cs.values() {
                stats.set_container_usage(id, CgroupUsage::new(1, 1));
            }
        }
        collector
            .summary(&[entry(&web), entry(&db)], true)
            .await
            .unwrap();
        // node + 2 pods + 3 containers.
        assert_eq!(collector.kept_samples(), 6);

        // db's sandbox stops (its pod is not measured any more) and web's side container
        // exits: their samples go.
        let db_sandbox = sim
            .list_pod_sandboxes(&ListFilter::pod("u2"))
            .await
            .unwrap()
            .remove(0)
            .id;
        sim.stop_pod_sandbox(&db_sandbox).await.unwrap();
        sim.crash(&ids["side"], 1);
        let s = collector
            .summary(&[entry(&web), entry(&db)], true)
            .await
            .unwrap();
        assert_eq!(s.pods.len(), 1);
        assert_eq!(s.pods[0].containers.len(), 1);
        assert_eq!(
            collector.kept_samples(),
            3,
            "node, web and its app container"
        );

        // A pod the kubelet no longer runs is not measured, even with a ready sandbox.
        let s = collector.summary(&[], true).await.unwrap();
        assert!(s.pods.is_empty());
        assert_eq!(collector.kept_samples(), 1);

        // A cgroup that cannot be read (removed) reports no usage and keeps no sample.
        stats.remove_pod("u1");
        stats.remove_container(&ids["app"]);
        let s = collector.summary(&[entry(&web)], true).await.unwrap();
        assert!(s.pods[0].cpu.is_none() && s.pods[0].containers[0].cpu.is_none());
        assert_eq!(collector.kept_samples(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn host_network_pods_and_runtime_errors() {
        let (sim, stats, collector, _web, _ids) = fixture().await;
        let mut host = pod("host", "u3", vec![container("c", "busybox")]);
        if let Some(spec) = host.spec.as_mut() {
            spec.host_network = Some(true);
        }
        let host = Arc::new(host);
        run(&sim, &host).await;
        stats.set_pod_interfaces("u3", vec![eth("eth0", 1, 1)]);
        let s = collector.summary(&[entry(&host)], false).await.unwrap();
        assert!(s.pods[0].network.is_none(), "host network: the node's");
        assert!(!stats.requests().pop().unwrap().pods[0].network);

        sim.set_unavailable(true);
        let err = collector.summary(&[entry(&host)], false).await.unwrap_err();
        assert!(
            matches!(
                err,
                StatsError::Runtime {
                    what: "sandboxes",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn config_from_engine_config() {
        let c = Config {
            node_name: "n".into(),
            ..Config::default()
        };
        let s = SummaryConfig::from_config(&c);
        assert_eq!(s.node_name, "n");
        assert_eq!(s.root_dir, c.root_dir);
        assert_eq!(s.pod_logs_dir, c.pod_logs_dir);
        assert_eq!(s.image_fs_dir, None);
    }
}
