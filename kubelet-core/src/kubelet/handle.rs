//! [`KubeletHandle`]: read access to a running kubelet.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::clock::now_unix_nanos;
use crate::cm::ContainerManager;
use crate::config::Config;
use crate::engine::Engine;
use crate::eviction::{NodePressure, PressureCondition, PressureState};
use crate::pod_workers::{PodWorkers, WorkerState};
use crate::runtime::ContainerRuntime;
use crate::stats::StatsError;
use crate::summary::{PodEntry, Summary, SummaryCollector, SummaryConfig};

/// Read access to a running kubelet: desired pods, their statuses, health.
#[derive(Clone)]
pub struct KubeletHandle {
    pub(super) engine: Arc<Engine>,
    pub(super) workers: Arc<PodWorkers>,
    pub(super) pressure: Arc<PressureState>,
    pub(super) shutdown_state: Arc<crate::nodeshutdown::ShutdownState>,
}

impl KubeletHandle {
    /// The engine configuration in effect.
    pub fn config(&self) -> &Config {
        &self.engine.config
    }

    /// The container runtime the kubelet uses.
    pub fn runtime(&self) -> Arc<dyn ContainerRuntime> {
        self.engine.runtime.clone()
    }

    /// The container manager the kubelet uses.
    pub fn container_manager(&self) -> Arc<dyn ContainerManager> {
        self.engine.cm.clone()
    }

    /// The kubelet's one summary collector (over its container manager's
    /// [`node_stats`](ContainerManager::node_stats) and its runtime): what `/stats/summary`,
    /// `/metrics/resource`, node status, the eviction manager and image garbage collection
    /// share. `None` when the container manager does not measure.
    pub fn stats(&self) -> Option<Arc<SummaryCollector>> {
        self.engine.stats.clone()
    }

    /// The desired pods (from all sources), excluding mirror pods.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.engine.pods().pods()
    }

    /// The desired pods that have not finished (Go's `GetActivePods`): [`pods`](Self::pods)
    /// without those in a terminal phase (`Succeeded` / `Failed`).
    pub fn active_pods(&self) -> Vec<Arc<Pod>> {
        self.engine.active_pods()
    }

    /// The desired pod with this UID.
    pub fn pod(&self, uid: &str) -> Option<Arc<Pod>> {
        self.engine.pods().get(uid)
    }

    /// The desired pod with this `namespace/name`.
    pub fn pod_by_full_name(&self, full_name: &str) -> Option<Arc<Pod>> {
        self.engine.pods().get_by_full_name(full_name)
    }

    /// The latest status the kubelet generated for a pod.
    pub fn pod_status(&self, uid: &str) -> Option<PodStatus> {
        self.engine.status.get(uid)
    }

    /// The state of the pod's worker, if it has one.
    pub fn worker_state(&self, uid: &str) -> Option<WorkerState> {
        self.workers.state(uid)
    }

    /// Whether the static pod of this `namespace/name` is still being stopped (its mirror
    /// pod is kept until it is: Go's `IsPodForMirrorPodTerminatingByFullName`).
    pub fn static_pod_terminating(&self, full_name: &str) -> bool {
        self.workers.static_pod_terminating(full_name)
    }

    /// The pressure the eviction manager reports (MemoryPressure / DiskPressure /
    /// PIDPressure), what node status sets the conditions from.
    pub fn node_pressure(&self) -> NodePressure {
        self.pressure.pressure()
    }

    /// Why the node is not ready because it is shutting down (Go's `ShutdownStatus`):
    /// `Some("node is shutting down")` between a shutdown signal and its cancellation.
    pub fn shutdown_status(&self) -> Option<&'static str> {
        self.shutdown_state
            .is_shutting_down()
            .then_some(crate::nodeshutdown::NOT_READY_MESSAGE)
    }

    /// Wakes whoever reports the node's status (the shutdown state or the attachable volumes
    /// in use changed).
    pub fn node_status_changed(&self) -> Arc<tokio::sync::Notify> {
        self.engine.node_status_changed.clone()
    }

    /// Storage keeps the node from being Ready for this reason (`Some`), or no longer
    /// (`None`): Go's `SetKubeletError`, e.g. "CSINode is not yet initialized". Wakes the node
    /// status writer.
    pub fn set_storage_error(&self, error: Option<String>) {
        *self
            .engine
            .health
            .storage_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = error;
        self.engine.node_status_changed.notify_one();
    }

    /// See [`KubeletHandle::set_storage_error`].
    pub fn storage_error(&self) -> Option<String> {
        self.engine
            .health
            .storage_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The attachable volumes in use, for the node's `status.volumesInUse`; `None` while
    /// the volumes on disk are not counted yet (leave the field as it is).
    pub fn volumes_in_use(&self) -> Option<Vec<String>> {
        self.engine.volumes.volumes_in_use()
    }

    /// The node status now reports these volumes in use: call after each successful write
    /// of `status.volumesInUse`, with what was written.
    pub fn mark_volumes_reported_in_use(&self, names: &[String]) {
        self.engine.volumes.mark_volumes_reported_in_use(names);
    }

    /// The pressure conditions in effect, sorted.
    pub fn pressure_conditions(&self) -> Vec<PressureCondition> {
        self.pressure.conditions()
    }

    /// The NUMA affinity the topology manager chose for a container at admission (`None`
    /// under its `none` policy, or for a container it did not admit).
    pub fn topology_affinity(
        &self,
        uid: &str,
        container: &str,
    ) -> Option<crate::topologymanager::TopologyHint> {
        self.engine.topology.affinity(uid, container)
    }

    /// The device plugins' resources: capacity (every device) and allocatable (the healthy
    /// ones), a resource whose plugin is gone past its grace period at 0 (Go's
    /// `GetCapacity`, as the node status applies it).
    pub fn device_capacity(&self) -> (crate::cm::ResourceList, crate::cm::ResourceList) {
        self.engine.device_manager.capacity()
    }

    /// The devices a container holds: resource → NUMA node → device ids.
    pub fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, std::collections::BTreeMap<i64, Vec<String>>)> {
        self.engine.device_manager.container_devices(uid, container)
    }

    /// The device manager's state as its checkpoint holds it.
    pub fn device_checkpoint(&self) -> crate::devicemanager::DeviceCheckpoint {
        self.engine.device_manager.checkpoint()
    }

    /// Every healthy device of every device plugin resource: `(resource, device id, NUMA
    /// nodes)`, sorted by resource then id ([`DeviceManager::allocatable_devices`](crate::devicemanager::DeviceManager::allocatable_devices)).
    pub fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)> {
        self.engine.device_manager.allocatable_devices()
    }

    /// The CPU manager's state (what `cpu_manager_state` holds once written).
    pub fn cpu_manager_state(&self) -> crate::cpumanager::CpuManagerCheckpoint {
        self.engine.cpu_manager.state()
    }

    /// The CPUs a container of pod `uid` runs on as the CPU manager sees it: its exclusive
    /// set, else the shared pool; `None` under the `none` policy (the runtime's default)
    /// ([`CpuManager::container_cpus`](crate::cpumanager::CpuManager::container_cpus)).
    pub fn container_cpus(&self, uid: &str, container: &str) -> Option<crate::cpumanager::CpuSet> {
        self.engine.cpu_manager.container_cpus(uid, container)
    }

    /// The CPUs the CPU manager may hand out: every CPU but the reserved ones under the
    /// `static` policy, none under `none`
    /// ([`CpuManager::allocatable_cpus`](crate::cpumanager::CpuManager::allocatable_cpus)).
    pub fn allocatable_cpus(&self) -> crate::cpumanager::CpuSet {
        self.engine.cpu_manager.allocatable_cpus()
    }

    /// The memory the memory manager pinned for a container (its blocks).
    pub fn container_memory(&self, uid: &str, container: &str) -> Vec<crate::memorymanager::Block> {
        self.engine.memory_manager.container_memory(uid, container)
    }

    /// What the memory manager may pin, per NUMA node and resource.
    pub fn allocatable_memory(&self) -> Vec<crate::memorymanager::Block> {
        self.engine.memory_manager.allocatable_memory()
    }

    /// The memory manager's state (what `<root-dir>/memory_manager_state` holds).
    pub fn memory_manager_state(&self) -> crate::memorymanager::MemoryManagerState {
        self.engine.memory_manager.state()
    }

    /// Whether every pod source has delivered its first full state.
    pub fn sources_ready(&self) -> bool {
        self.engine.sources_ready.load(Ordering::Relaxed)
    }

    /// Whether the runtime reported itself ready at the last check.
    pub fn runtime_ready(&self) -> bool {
        self.engine.runtime_state.ready()
    }

    /// A snapshot of `prober_probe_total` (probe runs by type, result, container and pod).
    pub fn probe_counts(&self) -> Vec<(crate::prober::ProbeCountKey, u64)> {
        self.engine.prober.probe_counts()
    }

    /// `prober_probe_total` in the Prometheus text format (`/metrics/probes`).
    pub fn probe_metrics(&self) -> String {
        crate::prober::render_probe_metrics(&self.engine.prober.probe_counts())
    }

    /// Number of running probe workers.
    pub fn probe_worker_count(&self) -> usize {
        self.engine.prober.worker_count()
    }

    /// Ok when the sync loop and PLEG are alive (Go's `syncloop` and `pleg` health checks);
    /// the error says what is not.
    pub fn check_health(&self) -> std::result::Result<(), String> {
        let now = now_unix_nanos();
        let cfg = &self.engine.config;
        let limit = (cfg.sync_frequency * 2).max(Duration::from_secs(300));
        let entered = self.engine.health.sync_loop_entered.load(Ordering::Relaxed);
        if entered != 0 && now - entered > nanos(limit) {
            return Err(format!(
                "sync loop took longer than expected: last iteration {}s ago, limit {}s",
                (now - entered) / 1_000_000_000,
                limit.as_secs()
            ));
        }
        let started = self
            .engine
            .health
            .pleg_relist_started
            .load(Ordering::Relaxed);
        if started != 0 && now - started > nanos(cfg.pleg_relist_threshold) {
            return Err(format!(
                "PLEG is not healthy: pleg was last seen active {}s ago; threshold is {}s",
                (now - started) / 1_000_000_000,
                cfg.pleg_relist_threshold.as_secs()
            ));
        }
        Ok(())
    }

    /// The kubelet's Prometheus metrics ([`crate::metrics::global`]).
    pub fn metrics(&self) -> &'static crate::metrics::Metrics {
        crate::metrics::global()
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
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

impl SummaryCollector {
    /// A new collector over a running kubelet's runtime, its container manager's
    /// [`node_stats`](crate::ContainerManager::node_stats) and [`SummaryConfig::from_config`];
    /// `None` when the container manager does not measure. Prefer the kubelet's own,
    /// [`KubeletHandle::stats`]: a second collector keeps CPU samples of its own.
    pub fn for_kubelet(handle: &KubeletHandle) -> Option<Self> {
        let provider = handle.container_manager().node_stats()?;
        Some(
            Self::new(
                provider,
                handle.runtime(),
                SummaryConfig::from_config(handle.config()),
            )
            .with_persistent_volume_stats(handle.engine.volumes.volume_stats_cache()),
        )
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
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::sync::Arc;

    use k8s_openapi::api::core::v1::PodStatus;

    use crate::devices::{Device, DevicePluginEvent, DevicePluginOptions};
    use crate::testing::{ContainerBuilder, FakeContainerManager, PodBuilder, SimRuntime};
    use crate::{Kubelet, KubeletHandle};

    fn handle() -> KubeletHandle {
        Kubelet::builder()
            .config(crate::lifecycle_tests::config())
            .runtime(Arc::new(SimRuntime::new()))
            .container_manager(Arc::new(FakeContainerManager::default()))
            .build()
            .unwrap()
            .handle()
    }

    fn add_pod(h: &KubeletHandle, uid: &str, phase: Option<&str>) {
        let p = Arc::new(
            PodBuilder::new(uid, uid)
                .container(ContainerBuilder::new("app", "img:1").build())
                .build(),
        );
        h.engine.pods_mut().upsert(p.clone());
        if let Some(phase) = phase {
            h.engine.status.set(
                &p,
                PodStatus {
                    phase: Some(phase.into()),
                    ..Default::default()
                },
            );
        }
    }

    #[test]
    fn active_pods_leave_out_finished_ones() {
        let h = handle();
        add_pod(&h, "new", None);
        add_pod(&h, "running", Some("Running"));
        add_pod(&h, "done", Some("Succeeded"));
        add_pod(&h, "failed", Some("Failed"));
        let uids = |pods: Vec<Arc<k8s_openapi::api::core::v1::Pod>>| {
            let mut u: Vec<String> = pods
                .iter()
                .map(|p| crate::pod::uid(p).to_string())
                .collect();
            u.sort();
            u
        };
        assert_eq!(uids(h.active_pods()), ["new", "running"]);
        assert_eq!(uids(h.pods()), ["done", "failed", "new", "running"]);
    }

    use crate::testing::NoopDevicePlugin as NoPlugin;

    #[test]
    fn allocatable_devices_come_from_the_device_manager() {
        let h = handle();
        assert!(h.allocatable_devices().is_empty());
        let dm = &h.engine.device_manager;
        dm.apply(DevicePluginEvent::Registered {
            resource: "example.com/gpu".into(),
            endpoint: 1,
            options: DevicePluginOptions::default(),
            plugin: Arc::new(NoPlugin),
        });
        dm.apply(DevicePluginEvent::Devices {
            resource: "example.com/gpu".into(),
            endpoint: 1,
            devices: vec![
                Device {
                    id: "gpu-0".into(),
                    healthy: true,
                    numa_nodes: vec![0],
                },
                Device {
                    id: "gpu-1".into(),
                    healthy: false,
                    numa_nodes: vec![1],
                },
            ],
        });
        assert_eq!(
            h.allocatable_devices(),
            [("example.com/gpu".to_string(), "gpu-0".to_string(), vec![0])]
        );
    }

    #[test]
    fn cpus_under_the_none_policy_are_the_runtimes() {
        let h = handle();
        assert!(h.allocatable_cpus().is_empty());
        assert_eq!(h.container_cpus("any", "app"), None);
    }
}
