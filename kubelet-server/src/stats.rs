//! `/stats/summary` (the `stats.k8s.io/v1alpha1` Summary that metrics-server reads) and
//! `/metrics/resource`, from cgroups (node, pod and container CPU and memory),
//! `/proc/<pid>/net/dev` (node and pod network), `statvfs` (node and image filesystems) and
//! the container log files.
//!
//! CPU rates (`usageNanoCores`) need two samples: each cgroup's previous sample is kept,
//! and a rate is reported once a sample at least a second older exists.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet_cm::{CgroupName, LinuxContainerManager, Usage};
use kubelet_core::runtime::{ContainerState, ListFilter, SandboxState};
use kubelet_core::KubeletHandle;
use serde::{Deserialize, Serialize};

/// Minimum age of the earlier sample for a CPU rate.
const MIN_RATE_WINDOW: Duration = Duration::from_secs(1);

/// Errors producing stats.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// This host does not collect stats.
    #[error("stats are not available on this node")]
    Unavailable,
    /// Asking the runtime failed.
    #[error("listing {what} from the runtime: {source}")]
    Runtime {
        /// What was listed.
        what: &'static str,
        /// The runtime error.
        source: kubelet_core::RuntimeError,
    },
    /// A blocking reader task failed.
    #[error("stats reader task failed: {0}")]
    Task(String),
}

/// The summary (Go's `statsapi.Summary`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Node-level stats.
    pub node: NodeStats,
    /// Per-pod stats.
    pub pods: Vec<PodStats>,
}

/// Node-level stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    /// The node name.
    pub node_name: String,
    /// System containers (kubelet, runtime): not reported yet.
    #[serde(default)]
    pub system_containers: Vec<ContainerStats>,
    /// Boot time.
    pub start_time: String,
    /// CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// Network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    /// The filesystem of the kubelet root dir (nodefs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    /// The runtime's image filesystem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
}

/// Runtime stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    /// The filesystem images are stored on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

/// CPU stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    /// Sample time.
    pub time: String,
    /// Usage rate in nanocores, when two samples exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    /// Cumulative CPU time in ns.
    pub usage_core_nano_seconds: u64,
}

/// Memory stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    /// Sample time.
    pub time: String,
    /// Node: capacity minus working set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total usage (page cache included).
    pub usage_bytes: u64,
    /// Working set (what eviction and metrics-server look at).
    pub working_set_bytes: u64,
    /// Anonymous memory.
    pub rss_bytes: u64,
}

/// One network interface.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    /// Interface name.
    pub name: String,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Send errors.
    pub tx_errors: u64,
}

/// Network stats: the default interface inline, all in `interfaces`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStats {
    /// Sample time.
    pub time: String,
    /// The default interface.
    #[serde(flatten)]
    pub default: InterfaceStats,
    /// All interfaces.
    pub interfaces: Vec<InterfaceStats>,
}

/// Filesystem stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    /// Sample time.
    pub time: String,
    /// Bytes available to unprivileged users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    /// Total size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    /// Bytes used (by the object measured, or the whole filesystem).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Free inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    /// Total inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    /// Used inodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

/// A pod's identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodReference {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID.
    pub uid: String,
}

/// Per-pod stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    /// The pod.
    pub pod_ref: PodReference,
    /// When the kubelet started the pod.
    pub start_time: String,
    /// Its containers.
    pub containers: Vec<ContainerStats>,
    /// Pod cgroup CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Pod cgroup memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The pod network namespace's interfaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
}

/// Per-container stats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    /// The container's name in the pod spec.
    pub name: String,
    /// Creation time of the running instance.
    pub start_time: String,
    /// CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    /// The container's log files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

fn rfc3339(nanos: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// Parses `/proc/<pid>/net/dev`, leaving out loopback and host-side virtual devices.
pub fn parse_net_dev(text: &str) -> Vec<InterfaceStats> {
    const IGNORED: [&str; 7] = ["lo", "veth", "docker", "cni", "flannel", "cali", "virbr"];
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let name = name.trim();
            if IGNORED
                .iter()
                .any(|p| name == *p || (*p != "lo" && name.starts_with(p)))
            {
                return None;
            }
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0))
                .collect();
            Some(InterfaceStats {
                name: name.to_string(),
                rx_bytes: *f.first()?,
                rx_errors: *f.get(2)?,
                tx_bytes: *f.get(8)?,
                tx_errors: *f.get(10)?,
            })
        })
        .collect()
}

fn network(path: &Path, time: &str) -> Option<NetworkStats> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut interfaces = parse_net_dev(&text);
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    // The default interface: eth0 when there is one, else the busiest.
    let default = interfaces
        .iter()
        .find(|i| i.name == "eth0")
        .or_else(|| interfaces.iter().max_by_key(|i| i.rx_bytes + i.tx_bytes))?
        .clone();
    Some(NetworkStats {
        time: time.to_string(),
        default,
        interfaces,
    })
}

fn fs_stats(path: &Path, time: &str) -> Option<FsStats> {
    let st = rustix::fs::statvfs(path).ok()?;
    let frsize = st.f_frsize;
    let capacity = st.f_blocks.saturating_mul(frsize);
    let available = st.f_bavail.saturating_mul(frsize);
    let free = st.f_bfree.saturating_mul(frsize);
    Some(FsStats {
        time: time.to_string(),
        available_bytes: Some(available),
        capacity_bytes: Some(capacity),
        used_bytes: Some(capacity.saturating_sub(free)),
        inodes_free: Some(st.f_ffree),
        inodes: Some(st.f_files),
        inodes_used: Some(st.f_files.saturating_sub(st.f_ffree)),
    })
}

/// Bytes and files under `dir` (not following symlinks).
fn dir_usage(dir: &Path) -> (u64, u64) {
    let mut bytes = 0;
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            files += 1;
            if m.is_dir() {
                stack.push(e.path());
            } else {
                bytes += m.len();
            }
        }
    }
    (bytes, files)
}

fn boot_time_nanos() -> i64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<i64>().ok())
        })
        .map(|s| s.saturating_mul(1_000_000_000))
        .unwrap_or_default()
}

/// Collects the summary. Keeps the previous CPU sample of every cgroup for rates.
pub struct StatsCollector {
    cm: LinuxContainerManager,
    root_dir: PathBuf,
    image_fs_dir: Option<PathBuf>,
    samples: Mutex<HashMap<String, Usage>>,
}

impl std::fmt::Debug for StatsCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsCollector")
            .field("root_dir", &self.root_dir)
            .field("image_fs_dir", &self.image_fs_dir)
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
    cgroup: Option<CgroupName>,
    start_time: String,
    host_network: bool,
    containers: Vec<ContainerTarget>,
}

impl StatsCollector {
    /// Stats from `cm`'s cgroups, the filesystem of `root_dir` (nodefs) and of
    /// `image_fs_dir` (the runtime's image store, e.g. containerd's root).
    pub fn new(
        cm: LinuxContainerManager,
        root_dir: PathBuf,
        image_fs_dir: Option<PathBuf>,
    ) -> Self {
        StatsCollector {
            cm,
            root_dir,
            image_fs_dir,
            samples: Mutex::new(HashMap::new()),
        }
    }

    fn cpu(&self, key: &str, u: &Usage, time: &str) -> CpuStats {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let rate = match samples.get(key) {
            Some(prev)
                if u.timestamp
                    .checked_duration_since(prev.timestamp)
                    .is_some_and(|d| d >= MIN_RATE_WINDOW) =>
            {
                let r = u.nanocores_since(prev);
                samples.insert(key.to_string(), *u);
                r
            }
            // Too close to the kept sample for a meaningful rate.
            Some(_) => None,
            None => {
                samples.insert(key.to_string(), *u);
                None
            }
        };
        CpuStats {
            time: time.to_string(),
            usage_nano_cores: rate,
            usage_core_nano_seconds: u.cpu_usage_ns,
        }
    }

    fn memory(u: &Usage, time: &str, capacity: Option<u64>) -> MemoryStats {
        MemoryStats {
            time: time.to_string(),
            available_bytes: capacity.map(|c| c.saturating_sub(u.memory_working_set_bytes)),
            usage_bytes: u.memory_usage_bytes,
            working_set_bytes: u.memory_working_set_bytes,
            rss_bytes: u.memory_rss_bytes,
        }
    }

    /// The summary of the node and the pods `handle` runs.
    pub async fn summary(
        self: &Arc<Self>,
        handle: &KubeletHandle,
        only_cpu_and_memory: bool,
    ) -> Result<Summary, StatsError> {
        let runtime = handle.runtime();
        let filter = ListFilter::all();
        let (sandboxes, containers) = tokio::try_join!(
            async {
                runtime
                    .list_pod_sandboxes(&filter)
                    .await
                    .map_err(|source| StatsError::Runtime {
                        what: "sandboxes",
                        source,
                    })
            },
            async {
                runtime
                    .list_containers(&filter)
                    .await
                    .map_err(|source| StatsError::Runtime {
                        what: "containers",
                        source,
                    })
            },
        )?;
        let logs_root = handle.config().pod_logs_dir.clone();
        let mut targets = Vec::new();
        for pod in handle.pods() {
            let uid = kubelet_core::pod::uid(&pod).to_string();
            let ready = sandboxes
                .iter()
                .any(|s| s.pod.uid == uid && s.state == SandboxState::Ready);
            if !ready {
                continue;
            }
            let status = handle.pod_status(&uid);
            let start_time = status
                .and_then(|s| s.start_time)
                .map(|t| t.0.to_string())
                .unwrap_or_default();
            let pod_log_dir = logs_root.join(format!(
                "{}_{}_{}",
                kubelet_core::pod::namespace(&pod),
                kubelet_core::pod::name(&pod),
                uid
            ));
            let mut cs: Vec<ContainerTarget> = containers
                .iter()
                .filter(|c| c.pod.uid == uid && c.state == ContainerState::Running)
                .map(|c| ContainerTarget {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    created_at: c.created_at,
                    log_dir: pod_log_dir.join(&c.name),
                })
                .collect();
            cs.sort_by(|a, b| a.name.cmp(&b.name));
            targets.push(PodTarget {
                cgroup: self.cm.pod_cgroup_name(&pod),
                host_network: pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.host_network)
                    .unwrap_or(false),
                pod,
                start_time,
                containers: cs,
            });
        }
        let me = self.clone();
        let node_name = handle.config().node_name.clone();
        tokio::task::spawn_blocking(move || me.collect(node_name, targets, only_cpu_and_memory))
            .await
            .map_err(|e| StatsError::Task(e.to_string()))
    }

    fn collect(&self, node_name: String, targets: Vec<PodTarget>, cpu_mem_only: bool) -> Summary {
        let time = rfc3339(now_nanos());
        let capacity = self.cm.machine_info().memory_capacity;
        let node_usage = self.cm.node_usage().ok();
        let node = NodeStats {
            node_name,
            system_containers: Vec::new(),
            start_time: rfc3339(boot_time_nanos()),
            cpu: node_usage.as_ref().map(|u| self.cpu("node", u, &time)),
            memory: node_usage
                .as_ref()
                .map(|u| Self::memory(u, &time, Some(capacity))),
            network: (!cpu_mem_only)
                .then(|| network(Path::new("/proc/net/dev"), &time))
                .flatten(),
            fs: (!cpu_mem_only)
                .then(|| fs_stats(&self.root_dir, &time))
                .flatten(),
            runtime: self
                .image_fs_dir
                .as_deref()
                .filter(|_| !cpu_mem_only)
                .map(|d| RuntimeStats {
                    image_fs: fs_stats(d, &time),
                }),
        };
        let cgroups = self.cm.cgroup_manager();
        let pods = targets
            .into_iter()
            .map(|t| {
                let uid = kubelet_core::pod::uid(&t.pod).to_string();
                let pod_usage = t.cgroup.as_ref().and_then(|c| cgroups.usage(c).ok());
                let containers = t
                    .containers
                    .iter()
                    .map(|c| {
                        let usage = t
                            .cgroup
                            .as_ref()
                            .and_then(|p| cgroups.usage(&p.child(&c.id)).ok());
                        ContainerStats {
                            name: c.name.clone(),
                            start_time: rfc3339(c.created_at),
                            cpu: usage.as_ref().map(|u| self.cpu(&c.id, u, &time)),
                            memory: usage.as_ref().map(|u| Self::memory(u, &time, None)),
                            logs: (!cpu_mem_only).then(|| {
                                let (used, files) = dir_usage(&c.log_dir);
                                let fs = fs_stats(&c.log_dir, &time).unwrap_or_default();
                                FsStats {
                                    used_bytes: Some(used),
                                    inodes_used: Some(files),
                                    ..fs
                                }
                            }),
                        }
                    })
                    .collect();
                let network = if cpu_mem_only || t.host_network {
                    None
                } else {
                    t.cgroup
                        .as_ref()
                        .and_then(|c| cgroups.pids(c).ok())
                        .and_then(|pids| pids.first().copied())
                        .and_then(|pid| {
                            network(&PathBuf::from(format!("/proc/{pid}/net/dev")), &time)
                        })
                };
                PodStats {
                    pod_ref: PodReference {
                        name: kubelet_core::pod::name(&t.pod).to_string(),
                        namespace: kubelet_core::pod::namespace(&t.pod).to_string(),
                        uid: uid.clone(),
                    },
                    start_time: t.start_time,
                    containers,
                    cpu: pod_usage
                        .as_ref()
                        .map(|u| self.cpu(&format!("pod{uid}"), u, &time)),
                    memory: pod_usage.as_ref().map(|u| Self::memory(u, &time, None)),
                    network,
                }
            })
            .collect();
        Summary { node, pods }
    }
}

/// `/metrics/resource` (Go's resource metrics collector) from a summary.
pub fn resource_metrics(s: &Summary) -> String {
    use std::fmt::Write as _;
    let ms = |t: &str| {
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .unwrap_or_default()
    };
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut out = String::new();
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}");
    };
    head(
        &mut out,
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
    );
    for p in &s.pods {
        for c in &p.containers {
            if let Some(cpu) = &c.cpu {
                let _ = writeln!(out, "container_cpu_usage_seconds_total{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {} {}", c.name, p.pod_ref.namespace, p.pod_ref.name, secs(cpu.usage_core_nano_seconds), ms(&cpu.time));
            }
        }
    }
    head(
        &mut out,
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
    );
    for p in &s.pods {
        for c in &p.containers {
            if let Some(m) = &c.memory {
                let _ = writeln!(out, "container_memory_working_set_bytes{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {} {}", c.name, p.pod_ref.namespace, p.pod_ref.name, m.working_set_bytes, ms(&m.time));
            }
        }
    }
    head(
        &mut out,
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds",
    );
    for p in &s.pods {
        for c in &p.containers {
            let t = ms(&c.start_time);
            let _ = writeln!(
                out,
                "container_start_time_seconds{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {}",
                c.name,
                p.pod_ref.namespace,
                p.pod_ref.name,
                t as f64 / 1e3
            );
        }
    }
    head(
        &mut out,
        "node_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the node in core-seconds",
    );
    if let Some(cpu) = &s.node.cpu {
        let _ = writeln!(
            out,
            "node_cpu_usage_seconds_total {} {}",
            secs(cpu.usage_core_nano_seconds),
            ms(&cpu.time)
        );
    }
    head(
        &mut out,
        "node_memory_working_set_bytes",
        "gauge",
        "Current working set of the node in bytes",
    );
    if let Some(m) = &s.node.memory {
        let _ = writeln!(
            out,
            "node_memory_working_set_bytes {} {}",
            m.working_set_bytes,
            ms(&m.time)
        );
    }
    head(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
    );
    for p in &s.pods {
        if let Some(cpu) = &p.cpu {
            let _ = writeln!(
                out,
                "pod_cpu_usage_seconds_total{{namespace=\"{}\",pod=\"{}\"}} {} {}",
                p.pod_ref.namespace,
                p.pod_ref.name,
                secs(cpu.usage_core_nano_seconds),
                ms(&cpu.time)
            );
        }
    }
    head(
        &mut out,
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
    );
    for p in &s.pods {
        if let Some(m) = &p.memory {
            let _ = writeln!(
                out,
                "pod_memory_working_set_bytes{{namespace=\"{}\",pod=\"{}\"}} {} {}",
                p.pod_ref.namespace,
                p.pod_ref.name,
                m.working_set_bytes,
                ms(&m.time)
            );
        }
    }
    head(
        &mut out,
        "scrape_error",
        "gauge",
        "1 if there was an error while getting container metrics, 0 otherwise",
    );
    let _ = writeln!(out, "scrape_error 0");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_dev_parsing() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n  eth0: 2000 10 3 0 0 0 0 0 5000 20 4 0 0 0 0 0\nveth12: 7 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n";
        let v = parse_net_dev(text);
        assert_eq!(
            v,
            vec![InterfaceStats {
                name: "eth0".into(),
                rx_bytes: 2000,
                rx_errors: 3,
                tx_bytes: 5000,
                tx_errors: 4
            }]
        );
    }

    #[test]
    fn summary_json_shape_and_resource_metrics() {
        let t = "2024-05-01T10:00:00Z".to_string();
        let s = Summary {
            node: NodeStats {
                node_name: "n".into(),
                start_time: t.clone(),
                cpu: Some(CpuStats {
                    time: t.clone(),
                    usage_nano_cores: Some(5),
                    usage_core_nano_seconds: 2_500_000_000,
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "ns".into(),
                    uid: "u".into(),
                },
                start_time: t.clone(),
                containers: vec![ContainerStats {
                    name: "c".into(),
                    start_time: t.clone(),
                    memory: Some(MemoryStats {
                        time: t.clone(),
                        working_set_bytes: 42,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["node"]["nodeName"], "n");
        assert_eq!(v["node"]["cpu"]["usageNanoCores"], 5);
        assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 2_500_000_000u64);
        assert_eq!(v["pods"][0]["podRef"]["namespace"], "ns");
        assert_eq!(
            v["pods"][0]["containers"][0]["memory"]["workingSetBytes"],
            42
        );
        let m = resource_metrics(&s);
        assert!(
            m.contains("node_cpu_usage_seconds_total 2.5 1714557600000\n"),
            "{m}"
        );
        assert!(m.contains("container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 42 1714557600000\n"), "{m}");
        assert!(m.contains("scrape_error 0\n"));
    }
}
