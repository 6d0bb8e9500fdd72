//! The narrow interface the server needs from the kubelet (Go's `server.HostInterface`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kubelet_core::{ContainerRuntime, KubeletHandle};
use serde_json::Value;

use crate::pod_resources::PodResourcesHost;
use crate::stats::{machine_spec, MachineInfo, StatsError, Summary, SummaryCollector};

/// What the HTTP server reads from the kubelet. Everything the endpoints serve goes through
/// it, so an embedder implementing it gets the whole API.
#[async_trait]
pub trait Host: Send + Sync + 'static {
    /// The node name (authorization attributes name `nodes/<this>`).
    fn node_name(&self) -> String;
    /// Ok when the sync loop and PLEG are alive; the error says what is not.
    fn health(&self) -> Result<(), String>;
    /// The pods this kubelet runs, each with its latest status, sorted by full name.
    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)>;
    /// The pod named `namespace/name`.
    fn pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
    /// The container runtime: containers of a pod, their log paths, streaming URLs,
    /// exec.
    fn runtime(&self) -> Arc<dyn ContainerRuntime>;
    /// The CRI pod log directory root (`/var/log/pods`).
    fn pod_logs_dir(&self) -> PathBuf;
    /// The node log directory `/logs/` serves (`/var/log`); None disables `/logs/`.
    fn node_logs_dir(&self) -> Option<PathBuf> {
        Some(PathBuf::from("/var/log"))
    }
    /// The machine description `/spec/` serves (cAdvisor's `MachineInfo` fields).
    fn machine_spec(&self) -> Option<Value> {
        None
    }
    /// The effective `KubeletConfiguration` `/configz` serves.
    fn configz(&self) -> Option<Value> {
        None
    }
    /// `/stats/summary`.
    async fn stats_summary(&self, only_cpu_and_memory: bool) -> Result<Summary, StatsError> {
        let _ = only_cpu_and_memory;
        Err(StatsError::Unavailable)
    }
    /// `/metrics` in the Prometheus text format.
    fn metrics_text(&self) -> Option<String> {
        None
    }
    /// `/metrics/probes` (`prober_probe_total`) in the Prometheus text format.
    fn probe_metrics_text(&self) -> Option<String> {
        None
    }
    /// `/metrics/cadvisor` ([`crate::cadvisor`]) in the Prometheus text format.
    async fn cadvisor_metrics_text(&self) -> Result<String, StatsError> {
        Err(StatsError::Unavailable)
    }
}

fn handle_pods(handle: &KubeletHandle) -> Vec<(Arc<Pod>, Option<PodStatus>)> {
    let mut pods: Vec<(Arc<Pod>, Option<PodStatus>)> = handle
        .pods()
        .into_iter()
        .map(|p| {
            let status = handle.pod_status(kubelet_core::pod::uid(&p));
            (p, status)
        })
        .collect();
    pods.sort_by_key(|(p, _)| kubelet_core::pod::full_name(p));
    pods
}

/// The bare engine handle: pods, health, logs, streaming; no stats, spec or configz.
#[async_trait]
impl Host for KubeletHandle {
    fn node_name(&self) -> String {
        self.config().node_name.clone()
    }
    fn health(&self) -> Result<(), String> {
        self.check_health()
    }
    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)> {
        handle_pods(self)
    }
    fn pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pod_by_full_name(&format!("{namespace}/{name}"))
    }
    fn runtime(&self) -> Arc<dyn ContainerRuntime> {
        KubeletHandle::runtime(self)
    }
    fn pod_logs_dir(&self) -> PathBuf {
        self.config().pod_logs_dir.clone()
    }
    fn metrics_text(&self) -> Option<String> {
        Some(self.metrics().render())
    }
    fn probe_metrics_text(&self) -> Option<String> {
        Some(self.probe_metrics())
    }
}

/// The stock kubelet's host: the engine handle plus node stats (the core
/// [`SummaryCollector`]), the machine spec and the configuration, which the bare handle does
/// not serve.
#[derive(Clone)]
pub struct KubeletHost {
    handle: KubeletHandle,
    stats: Option<Arc<SummaryCollector>>,
    spec: Option<Value>,
    configz: Option<Value>,
    node_logs_dir: Option<PathBuf>,
}

impl KubeletHost {
    /// A host over `handle`; add the parts with the `with_*` methods.
    pub fn new(handle: KubeletHandle) -> KubeletHost {
        KubeletHost {
            handle,
            stats: None,
            spec: None,
            configz: None,
            node_logs_dir: Some(PathBuf::from("/var/log")),
        }
    }
    /// Serve `/stats/summary` and `/metrics/resource` from `stats` (over the pods of the
    /// handle).
    pub fn with_stats(mut self, stats: Arc<SummaryCollector>) -> Self {
        self.stats = Some(stats);
        self
    }
    /// Serve `/spec/` from this machine info ([`machine_spec`]).
    pub fn with_machine_info(self, machine: &MachineInfo) -> Self {
        self.with_spec(machine_spec(machine))
    }
    /// Serve `/spec/` with this machine description.
    pub fn with_spec(mut self, spec: Value) -> Self {
        self.spec = Some(spec);
        self
    }
    /// Serve `/configz` with this configuration (Go wraps it as `{"kubeletconfig": …}`).
    pub fn with_configz(mut self, config: Value) -> Self {
        self.configz = Some(config);
        self
    }
    /// The directory `/logs/` serves (None: off).
    pub fn with_node_logs_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.node_logs_dir = dir;
        self
    }
}

#[async_trait]
impl Host for KubeletHost {
    fn node_name(&self) -> String {
        Host::node_name(&self.handle)
    }
    fn health(&self) -> Result<(), String> {
        self.handle.check_health()
    }
    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)> {
        handle_pods(&self.handle)
    }
    fn pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        Host::pod_by_name(&self.handle, namespace, name)
    }
    fn runtime(&self) -> Arc<dyn ContainerRuntime> {
        self.handle.runtime()
    }
    fn pod_logs_dir(&self) -> PathBuf {
        self.handle.config().pod_logs_dir.clone()
    }
    fn node_logs_dir(&self) -> Option<PathBuf> {
        self.node_logs_dir.clone()
    }
    fn machine_spec(&self) -> Option<Value> {
        self.spec.clone()
    }
    fn configz(&self) -> Option<Value> {
        self.configz.clone()
    }
    async fn stats_summary(&self, only_cpu_and_memory: bool) -> Result<Summary, StatsError> {
        match &self.stats {
            Some(s) => s.summary_of(&self.handle, only_cpu_and_memory).await,
            None => Err(StatsError::Unavailable),
        }
    }
    fn metrics_text(&self) -> Option<String> {
        Some(self.handle.metrics().render())
    }
    fn probe_metrics_text(&self) -> Option<String> {
        Some(self.handle.probe_metrics())
    }
    async fn cadvisor_metrics_text(&self) -> Result<String, StatsError> {
        let Some(stats) = &self.stats else {
            return Err(StatsError::Unavailable);
        };
        let summary = stats.summary_of(&self.handle, false).await?;
        let rt = self.handle.runtime();
        let all = kubelet_core::runtime::ListFilter::all();
        let (containers, sandboxes, runtime_stats) = tokio::join!(
            rt.list_containers(&all),
            rt.list_pod_sandboxes(&all),
            rt.list_container_stats(&all)
        );
        let cm = self.handle.container_manager();
        let pods = self.handle.pods();
        let machine = stats.machine_info();
        let containers = containers.unwrap_or_default();
        let sandboxes = sandboxes.unwrap_or_default();
        // The cgroups of the pods' containers and sandboxes (the `id` label): the container
        // manager may look at the cgroup filesystem for them.
        let owned: Vec<(Arc<Pod>, String)> = {
            let by_uid: std::collections::HashMap<&str, &Arc<Pod>> = pods
                .iter()
                .map(|p| (kubelet_core::pod::uid(p), p))
                .collect();
            let running = containers
                .iter()
                .filter(|c| c.state == kubelet_core::runtime::ContainerState::Running)
                .map(|c| (c.pod.uid.as_str(), c.id.clone()));
            let sandbox_ids = sandboxes.iter().map(|s| (s.pod.uid.as_str(), s.id.clone()));
            running
                .chain(sandbox_ids)
                .filter_map(|(uid, id)| by_uid.get(uid).map(|p| (Arc::clone(p), id)))
                .collect()
        };
        let cgroups: std::collections::HashMap<String, String> =
            tokio::task::spawn_blocking(move || {
                owned
                    .into_iter()
                    .filter_map(|(p, id)| cm.container_cgroup(&p, &id).map(|cg| (id, cg)))
                    .collect()
            })
            .await
            .unwrap_or_default();
        Ok(crate::cadvisor::render(&crate::cadvisor::CadvisorInput {
            summary: &summary,
            pods: &pods,
            containers: &containers,
            sandboxes: &sandboxes,
            runtime_stats: &runtime_stats.unwrap_or_default(),
            container_cgroup: &|id| cgroups.get(id).cloned(),
            machine: Some(&machine),
        }))
    }
}

fn cpu_ids(cpus: Option<kubelet_core::cpumanager::CpuSet>) -> Vec<i64> {
    cpus.map(|s| s.iter().map(i64::from).collect())
        .unwrap_or_default()
}

/// The engine's pod manager (active pods), device, CPU and memory managers (Go's pods,
/// devices, CPUs and memory providers).
impl PodResourcesHost for KubeletHandle {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        KubeletHandle::active_pods(self)
    }
    fn find_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pod_by_full_name(&format!("{namespace}/{name}"))
    }
    fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, BTreeMap<i64, Vec<String>>)> {
        KubeletHandle::container_devices(self, uid, container)
    }
    fn container_cpus(&self, uid: &str, container: &str) -> Vec<i64> {
        cpu_ids(KubeletHandle::container_cpus(self, uid, container))
    }
    fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)> {
        KubeletHandle::allocatable_devices(self)
    }
    fn allocatable_cpus(&self) -> Vec<i64> {
        cpu_ids(Some(KubeletHandle::allocatable_cpus(self)))
    }
    fn container_memory(&self, uid: &str, container: &str) -> Vec<(String, u64, Vec<i64>)> {
        memory_blocks(KubeletHandle::container_memory(self, uid, container))
    }
    fn allocatable_memory(&self) -> Vec<(String, u64, Vec<i64>)> {
        memory_blocks(KubeletHandle::allocatable_memory(self))
    }
}

fn memory_blocks(blocks: Vec<kubelet_core::memorymanager::Block>) -> Vec<(String, u64, Vec<i64>)> {
    blocks
        .into_iter()
        .map(|b| {
            let nodes = b.numa_affinity.iter().map(|n| i64::from(*n)).collect();
            (b.resource, b.size, nodes)
        })
        .collect()
}

/// The stock kubelet's host answers as its engine handle.
impl PodResourcesHost for KubeletHost {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        PodResourcesHost::active_pods(&self.handle)
    }
    fn find_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        PodResourcesHost::find_pod(&self.handle, namespace, name)
    }
    fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, BTreeMap<i64, Vec<String>>)> {
        PodResourcesHost::container_devices(&self.handle, uid, container)
    }
    fn container_cpus(&self, uid: &str, container: &str) -> Vec<i64> {
        PodResourcesHost::container_cpus(&self.handle, uid, container)
    }
    fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)> {
        PodResourcesHost::allocatable_devices(&self.handle)
    }
    fn allocatable_cpus(&self) -> Vec<i64> {
        PodResourcesHost::allocatable_cpus(&self.handle)
    }
    fn container_memory(&self, uid: &str, container: &str) -> Vec<(String, u64, Vec<i64>)> {
        PodResourcesHost::container_memory(&self.handle, uid, container)
    }
    fn allocatable_memory(&self) -> Vec<(String, u64, Vec<i64>)> {
        PodResourcesHost::allocatable_memory(&self.handle)
    }
}
