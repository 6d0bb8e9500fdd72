//! A container manager with fixed capacity and no cgroups, and a node stats provider that
//! answers with the usage a test sets.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::{CmError, ContainerManager, PodResources, ResourceList};
use crate::pod;
use crate::stats::{
    CpuTopology, DirUsage, FsUsage, InterfaceStats, MachineInfo, NodeStatsProvider, PodSample,
    ResourceUsage, RlimitSample, Sample, SampleRequest, StatsError, SystemContainerSample,
};

/// Reports the capacity it was given, remembers which pods it "set up" and measures the
/// node through a [`FakeNodeStats`] ([`FakeContainerManager::stats`]).
#[derive(Debug)]
pub struct FakeContainerManager {
    capacity: ResourceList,
    pods: Mutex<HashSet<String>>,
    stats: Arc<FakeNodeStats>,
}

/// The capacity of [`FakeContainerManager::default`].
const DEFAULT_CAPACITY: [(&str, &str); 4] = [
    ("cpu", "4"),
    ("memory", "8Gi"),
    ("pods", "110"),
    ("ephemeral-storage", "100Gi"),
];

/// How many sampled requests [`FakeNodeStats::requests`] keeps.
const KEPT_REQUESTS: usize = 64;

fn resource_list(resources: &[(&str, &str)]) -> ResourceList {
    resources
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

impl Default for FakeContainerManager {
    /// 4 CPUs, 8Gi memory, 110 pods, 100Gi ephemeral storage.
    fn default() -> Self {
        Self::with_capacity(&DEFAULT_CAPACITY)
    }
}

impl FakeContainerManager {
    /// A manager reporting this capacity (and the same allocatable); its machine has the
    /// capacity's CPUs, memory and ephemeral storage.
    pub fn with_capacity(resources: &[(&str, &str)]) -> Self {
        let capacity = resource_list(resources);
        FakeContainerManager {
            stats: Arc::new(FakeNodeStats::new(FakeNodeStats::machine_for(&capacity))),
            capacity,
            pods: Mutex::new(HashSet::new()),
        }
    }

    /// The [`Default`] manager's capacity with room for `pods` pods instead of 110 (a node
    /// with a larger `maxPods`: admission counts pods against the allocatable `pods` too).
    pub fn with_pods(pods: u32) -> Self {
        let pods = pods.to_string();
        let resources: Vec<(&str, &str)> = DEFAULT_CAPACITY
            .iter()
            .map(|&(name, value)| (name, if name == "pods" { pods.as_str() } else { value }))
            .collect();
        Self::with_capacity(&resources)
    }

    /// Uids with resources set up right now.
    pub fn pod_uids(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// The stats provider [`ContainerManager::node_stats`] returns, to set usage on.
    pub fn stats(&self) -> Arc<FakeNodeStats> {
        self.stats.clone()
    }
}

#[async_trait]
impl ContainerManager for FakeContainerManager {
    fn capacity(&self) -> ResourceList {
        self.capacity.clone()
    }

    fn allocatable(&self) -> ResourceList {
        self.capacity.clone()
    }

    async fn ensure_pod_resources(&self, p: &Pod) -> Result<PodResources, CmError> {
        let uid = pod::uid(p).to_string();
        let parent = format!("/kubepods/pod{uid}");
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid);
        Ok(PodResources {
            cgroup_parent: Some(parent),
        })
    }

    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(pod_uid);
        Ok(())
    }

    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError> {
        Ok(self.pod_uids())
    }

    fn node_stats(&self) -> Option<Arc<dyn NodeStatsProvider>> {
        Some(self.stats.clone())
    }
}

/// The counters of one fake cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupUsage {
    /// Cumulative CPU time in nanoseconds.
    pub cpu_usage_ns: u64,
    /// Memory usage in bytes.
    pub memory_usage_bytes: u64,
    /// Working set in bytes.
    pub memory_working_set_bytes: u64,
    /// RSS in bytes.
    pub memory_rss_bytes: u64,
    /// Page faults.
    pub memory_page_faults: u64,
    /// The memory limit (`None`: unlimited).
    pub memory_limit_bytes: Option<u64>,
}

impl CgroupUsage {
    /// Usage of `cpu_usage_ns` CPU time and `working_set_bytes` memory (usage and RSS the
    /// same).
    pub fn new(cpu_usage_ns: u64, working_set_bytes: u64) -> Self {
        CgroupUsage {
            cpu_usage_ns,
            memory_usage_bytes: working_set_bytes,
            memory_working_set_bytes: working_set_bytes,
            memory_rss_bytes: working_set_bytes,
            memory_page_faults: 0,
            memory_limit_bytes: None,
        }
    }

    /// The same usage under a memory limit.
    pub fn with_limit(self, limit_bytes: u64) -> Self {
        CgroupUsage {
            memory_limit_bytes: Some(limit_bytes),
            ..self
        }
    }

    fn at(self, timestamp: std::time::Instant) -> ResourceUsage {
        ResourceUsage {
            timestamp,
            cpu_usage_ns: self.cpu_usage_ns,
            memory_usage_bytes: self.memory_usage_bytes,
            memory_working_set_bytes: self.memory_working_set_bytes,
            memory_rss_bytes: self.memory_rss_bytes,
            memory_cache_bytes: self
                .memory_usage_bytes
                .saturating_sub(self.memory_rss_bytes),
            memory_page_faults: self.memory_page_faults,
            memory_major_page_faults: 0,
            memory_limit_bytes: self.memory_limit_bytes,
        }
    }
}

#[derive(Debug, Default)]
struct FakeStatsState {
    node: Option<CgroupUsage>,
    pods: HashMap<String, CgroupUsage>,
    containers: HashMap<String, CgroupUsage>,
    node_interfaces: Vec<InterfaceStats>,
    pod_interfaces: HashMap<String, Vec<InterfaceStats>>,
    filesystems: HashMap<PathBuf, FsUsage>,
    default_filesystem: Option<FsUsage>,
    directories: HashMap<PathBuf, DirUsage>,
    disk_usage: HashMap<PathBuf, DirUsage>,
    pods_cgroup: Option<CgroupUsage>,
    system_containers: Vec<(String, CgroupUsage, Option<i64>)>,
    rlimit: Option<RlimitSample>,
    process_counts: HashMap<String, u64>,
    requests: Vec<SampleRequest>,
}

/// A [`NodeStatsProvider`] answering with what a test set: usage of the node, of pods (by
/// uid) and containers (by runtime id), interfaces, filesystems and directories. Samples are
/// stamped with tokio's clock, so CPU rates follow a paused clock. What was not set is not
/// measured (absent from the sample), except the node's usage (zero until set) and any
/// filesystem (the default one: the machine's ephemeral storage, half used, unless
/// [`clear_default_filesystem`](FakeNodeStats::clear_default_filesystem)).
#[derive(Debug)]
pub struct FakeNodeStats {
    machine: Arc<MachineInfo>,
    state: Mutex<FakeStatsState>,
}

impl Default for FakeNodeStats {
    /// The machine of [`FakeContainerManager::default`].
    fn default() -> Self {
        FakeNodeStats::new(FakeNodeStats::machine_for(&resource_list(
            &DEFAULT_CAPACITY,
        )))
    }
}

impl FakeNodeStats {
    /// A provider for `machine`.
    pub fn new(machine: MachineInfo) -> Self {
        let half = |v: u64| v / 2;
        let cap = machine.ephemeral_storage_capacity;
        let inodes = machine.ephemeral_storage_inodes;
        let fs = FsUsage {
            capacity_bytes: cap,
            available_bytes: half(cap),
            used_bytes: cap - half(cap),
            inodes,
            inodes_free: half(inodes),
            inodes_used: inodes - half(inodes),
            fs_id: 1,
        };
        FakeNodeStats {
            machine: Arc::new(machine),
            state: Mutex::new(FakeStatsState {
                node: Some(CgroupUsage::default()),
                default_filesystem: Some(fs),
                ..Default::default()
            }),
        }
    }

    /// A fake machine with the CPUs, memory and ephemeral storage of `capacity` (one
    /// socket and NUMA node, one core per CPU, fixed ids, booted at 2023-11-14T22:13:20Z).
    pub fn machine_for(capacity: &ResourceList) -> MachineInfo {
        let amount = |name: &str, milli: bool| {
            capacity
                .get(name)
                .and_then(|q| {
                    if milli {
                        crate::resources::milli_value(q).ok().map(|m| m / 1000)
                    } else {
                        crate::resources::value(q).ok()
                    }
                })
                .and_then(|v| u64::try_from(v).ok())
                .unwrap_or(0)
        };
        let cores = u32::try_from(amount("cpu", true)).unwrap_or(u32::MAX);
        MachineInfo {
            num_cores: cores,
            num_physical_cores: cores,
            num_sockets: u32::from(cores > 0),
            topology: (0..cores)
                .map(|cpu| CpuTopology {
                    cpu,
                    core: cpu,
                    socket: 0,
                    numa_node: 0,
                })
                .collect(),
            memory_capacity: amount("memory", false),
            hugepages: Vec::new(),
            numa_memory: vec![crate::stats::NumaMemory {
                node: 0,
                memory_bytes: amount("memory", false),
                hugepages: Vec::new(),
            }],
            boot_id: "fake-boot-id".into(),
            machine_id: "fake-machine-id".into(),
            system_uuid: "fake-system-uuid".into(),
            kernel_version: "6.1.0-fake".into(),
            os_image: "Fake Linux".into(),
            max_pids: 32768,
            ephemeral_storage_capacity: amount("ephemeral-storage", false),
            ephemeral_storage_inodes: 6_553_600,
            boot_time_seconds: 1_700_000_000,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeStatsState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node's usage (`None`: not measurable).
    pub fn set_node_usage(&self, usage: Option<CgroupUsage>) {
        self.state().node = usage;
    }

    /// A pod cgroup's usage.
    pub fn set_pod_usage(&self, pod_uid: &str, usage: CgroupUsage) {
        self.state().pods.insert(pod_uid.to_string(), usage);
    }

    /// A container cgroup's usage, by runtime container id.
    pub fn set_container_usage(&self, container_id: &str, usage: CgroupUsage) {
        self.state()
            .containers
            .insert(container_id.to_string(), usage);
    }

    /// Forgets a pod's cgroup (as if it were removed), and its interfaces.
    pub fn remove_pod(&self, pod_uid: &str) {
        let mut st = self.state();
        st.pods.remove(pod_uid);
        st.pod_interfaces.remove(pod_uid);
    }

    /// Forgets a container's cgroup.
    pub fn remove_container(&self, container_id: &str) {
        self.state().containers.remove(container_id);
    }

    /// The node's interfaces.
    pub fn set_node_interfaces(&self, interfaces: Vec<InterfaceStats>) {
        self.state().node_interfaces = interfaces;
    }

    /// A pod network namespace's interfaces.
    pub fn set_pod_interfaces(&self, pod_uid: &str, interfaces: Vec<InterfaceStats>) {
        self.state()
            .pod_interfaces
            .insert(pod_uid.to_string(), interfaces);
    }

    /// The filesystem holding `path`.
    pub fn set_filesystem(&self, path: &Path, fs: FsUsage) {
        self.state().filesystems.insert(path.to_path_buf(), fs);
    }

    /// Only filesystems set with [`set_filesystem`](FakeNodeStats::set_filesystem) are
    /// measured.
    pub fn clear_default_filesystem(&self) {
        self.state().default_filesystem = None;
    }

    /// What the directory `path` holds.
    pub fn set_directory(&self, path: &Path, usage: DirUsage) {
        self.state().directories.insert(path.to_path_buf(), usage);
    }

    /// What a `du`-style measurement of `path` finds ([`SampleRequest::disk_usage`]).
    pub fn set_disk_usage(&self, path: &Path, usage: DirUsage) {
        self.state().disk_usage.insert(path.to_path_buf(), usage);
    }

    /// The usage of the cgroup all pods run under (`None`: not measurable, the default).
    pub fn set_pods_cgroup_usage(&self, usage: Option<CgroupUsage>) {
        self.state().pods_cgroup = usage;
    }

    /// A system container (`kubelet`, `runtime`, `misc`) the provider measures, with its
    /// creation time in Unix nanoseconds; set again to replace.
    pub fn set_system_container(&self, name: &str, usage: CgroupUsage, created_at: Option<i64>) {
        let mut st = self.state();
        st.system_containers.retain(|(n, _, _)| n != name);
        st.system_containers
            .push((name.to_string(), usage, created_at));
    }

    /// The node's process limits (`None`, the default: not measured).
    pub fn set_rlimit(&self, rlimit: Option<RlimitSample>) {
        self.state().rlimit = rlimit;
    }

    /// The processes in a pod's cgroup.
    pub fn set_pod_process_count(&self, pod_uid: &str, count: u64) {
        self.state()
            .process_counts
            .insert(pod_uid.to_string(), count);
    }

    /// The latest requests sampled (at most 64), oldest first.
    pub fn requests(&self) -> Vec<SampleRequest> {
        self.state().requests.clone()
    }
}

#[async_trait]
impl NodeStatsProvider for FakeNodeStats {
    fn machine_info(&self) -> Arc<MachineInfo> {
        self.machine.clone()
    }

    async fn sample(&self, request: SampleRequest) -> Result<Sample, StatsError> {
        let now = tokio::time::Instant::now().into_std();
        let mut st = self.state();
        let pods = request
            .pods
            .iter()
            .map(|p| {
                let uid = pod::uid(&p.pod).to_string();
                let sample = PodSample {
                    usage: st.pods.get(&uid).map(|u| u.at(now)),
                    containers: p
                        .container_ids
                        .iter()
                        .filter_map(|id| st.containers.get(id).map(|u| (id.clone(), u.at(now))))
                        .collect(),
                    interfaces: (request.network && p.network)
                        .then(|| st.pod_interfaces.get(&uid).cloned())
                        .flatten(),
                    process_count: st.process_counts.get(&uid).copied(),
                };
                (uid, sample)
            })
            .collect();
        let sample = Sample {
            node: st.node.map(|u| u.at(now)),
            node_interfaces: request.network.then(|| st.node_interfaces.clone()),
            pods,
            filesystems: request
                .filesystems
                .iter()
                .filter_map(|p| {
                    st.filesystems
                        .get(p)
                        .or(st.default_filesystem.as_ref())
                        .map(|f| (p.clone(), *f))
                })
                .collect(),
            directories: request
                .directories
                .iter()
                .filter_map(|p| st.directories.get(p).map(|d| (p.clone(), *d)))
                .collect(),
            disk_usage: request
                .disk_usage
                .iter()
                .filter_map(|p| st.disk_usage.get(p).map(|d| (p.clone(), *d)))
                .collect(),
            pods_cgroup: st.pods_cgroup.map(|u| u.at(now)),
            pods_cgroup_created_at: None,
            system_containers: st
                .system_containers
                .iter()
                .map(|(name, u, created_at)| SystemContainerSample {
                    name: name.clone(),
                    usage: u.at(now),
                    created_at: *created_at,
                })
                .collect(),
            rlimit: st.rlimit,
        };
        if st.requests.len() >= KEPT_REQUESTS {
            st.requests.remove(0);
        }
        st.requests.push(request);
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_pods_changes_only_the_pods() {
        let (default, larger) = (
            FakeContainerManager::default(),
            FakeContainerManager::with_pods(530),
        );
        let mut expected = default.capacity();
        expected.insert("pods".to_string(), Quantity("530".to_string()));
        assert_eq!(larger.capacity(), expected);
        assert_eq!(larger.allocatable(), expected);
    }

    #[tokio::test]
    async fn fake_machine_follows_capacity_and_answers_every_request() {
        let cm = FakeContainerManager::default();
        let stats = cm.node_stats().unwrap();
        let m = stats.machine_info();
        assert_eq!(m.num_cores, 4);
        assert_eq!(m.topology.len(), 4);
        assert_eq!(m.memory_capacity, 8 << 30);
        assert_eq!(m.ephemeral_storage_capacity, 100 << 30);
        assert!(!m.boot_id.is_empty() && !m.machine_id.is_empty());

        let p = Arc::new(crate::testing::pod("p", "u1", vec![]));
        cm.stats().set_pod_usage("u1", CgroupUsage::new(5, 6));
        let s = stats
            .sample(SampleRequest {
                pods: vec![crate::stats::PodSampleRequest {
                    pod: p,
                    container_ids: vec!["missing".into()],
                    network: true,
                }],
                network: true,
                filesystems: vec!["/any".into()],
                directories: vec!["/unknown".into()],
                disk_usage: vec![],
            })
            .await
            .unwrap();
        assert_eq!(s.node.unwrap().cpu_usage_ns, 0);
        assert_eq!(s.node_interfaces, Some(vec![]));
        assert_eq!(s.pods["u1"].usage.unwrap().memory_working_set_bytes, 6);
        assert!(s.pods["u1"].containers.is_empty());
        assert_eq!(s.filesystems[Path::new("/any")].capacity_bytes, 100 << 30);
        assert!(s.directories.is_empty());
        cm.stats().clear_default_filesystem();
        let s = stats
            .sample(SampleRequest {
                filesystems: vec!["/any".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(s.filesystems.is_empty());
        assert_eq!(cm.stats().requests().len(), 2);
    }
}
