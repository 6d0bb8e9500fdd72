//! The engine's shared state: the parts the builder was given plus the small, clearly owned
//! structures the sync loop, pod workers, PLEG and status publisher share.
//!
//! Locks here are `std` mutexes held only for map lookups and updates, never across an
//! `.await`.

use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tokio::sync::Semaphore;

use crate::admission::{AdmitHandler, NodeLister};
use crate::backoff::Backoff;
use crate::cm::ContainerManager;
use crate::config::Config;
use crate::cpumanager::CpuManager;
use crate::credentials::CredentialProvider;
use crate::devicemanager::DeviceManager;
use crate::hooks::Hooks;
use crate::images::gc::ImageGc;
use crate::images::ImageManager;
use crate::memorymanager::MemoryManager;
use crate::objects::ObjectStore;
use crate::pod_cache::PodCache;
use crate::pod_manager::PodManager;
use crate::prober::ProberManager;
use crate::runtime::ContainerRuntime;
use crate::runtime_state::RuntimeState;
use crate::sink::StatusSink;
use crate::status::StatusManager;
use crate::summary::{SummaryCollector, SummaryConfig};
use crate::topologymanager::TopologyManager;
use crate::volume::VolumeManager;

/// Bound of the queue of pods whose probe results changed.
const PROBE_UPDATES_CAPACITY: usize = 1024;

/// Liveness bookkeeping for `/healthz`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// When the sync loop last started an iteration (Unix ns; 0 = never).
    pub sync_loop_entered: AtomicI64,
    /// When the PLEG last started a relist (Unix ns; 0 = never).
    pub pleg_relist_started: AtomicI64,
    /// When the PLEG last finished a relist (Unix ns; 0 = never).
    pub pleg_relist_finished: AtomicI64,
    /// Why storage keeps the node from being Ready (Go's `storageError`), if it does.
    pub storage_error: std::sync::Mutex<Option<String>>,
}

/// Shared engine state. See the module docs.
pub(crate) struct Engine {
    pub config: Config,
    pub runtime: Arc<dyn ContainerRuntime>,
    pub cm: Arc<dyn ContainerManager>,
    pub sink: Arc<dyn StatusSink>,
    pub admit_handlers: Vec<Arc<dyn AdmitHandler>>,
    /// Where admission reads the current Node object (cluster mode), if anywhere.
    pub node_lister: Option<Arc<dyn NodeLister>>,
    pods: RwLock<PodManager>,
    pub status: Arc<StatusManager>,
    /// Probe workers and their results.
    pub prober: Arc<ProberManager>,
    /// Pods whose probe results changed (read by the sync loop, which takes it at start).
    pub probe_updates: Mutex<Option<tokio::sync::mpsc::Receiver<String>>>,
    crash_backoff: Mutex<Backoff>,
    pub images: ImageManager,
    /// Lifecycle hooks and container stops.
    pub hooks: Hooks,
    /// What the engine last learnt from the runtime.
    pub runtime_state: RuntimeState,
    /// Each pod's runtime state as its worker last read it, while the PLEG sees no change.
    pub pod_cache: PodCache,
    pub sources_ready: AtomicBool,
    /// Notified when something the node status reports changed outside its own polling
    /// (the node began or stopped shutting down).
    pub node_status_changed: Arc<tokio::sync::Notify>,
    pub sync_permits: Option<Semaphore>,
    pub health: Health,
    /// Pod directories, volumes and the object store.
    pub volumes: VolumeManager,
    /// The one summary collector (`None` when the container manager does not measure).
    pub stats: Option<Arc<SummaryCollector>>,
    /// Image garbage collection (its own task, and the eviction manager's disk reclaim).
    pub image_gc: ImageGc,
    /// The CPU manager (the `none` policy unless the builder set up another).
    pub cpu_manager: Arc<CpuManager>,
    /// The memory manager (the `None` policy unless the builder set up another).
    pub memory_manager: Arc<MemoryManager>,
    /// The topology manager: the last admission step, which allocates the pod's resources
    /// through the resource managers (the `none` policy unless the builder set up another).
    pub topology: Arc<TopologyManager>,
    /// The device manager (no checkpoint and no plugins unless the builder set it up).
    pub device_manager: Arc<DeviceManager>,
}

impl Engine {
    pub fn new(
        config: Config,
        runtime: Arc<dyn ContainerRuntime>,
        cm: Arc<dyn ContainerManager>,
        sink: Arc<dyn StatusSink>,
        admit_handlers: Vec<Arc<dyn AdmitHandler>>,
        objects: Arc<dyn ObjectStore>,
        credential_providers: Vec<Arc<dyn CredentialProvider>>,
    ) -> Self {
        let images = ImageManager::with_providers(&config, credential_providers);
        let node_status_changed: Arc<tokio::sync::Notify> = Arc::default();
        let mut volumes = VolumeManager::new(&config.root_dir, objects, &config.cluster_domain);
        volumes.set_in_use_notify(node_status_changed.clone());
        let crash_backoff = Backoff::new(config.backoff_initial, config.backoff_max);
        let sync_permits = config
            .max_concurrent_pod_syncs
            .map(|n| Semaphore::new(n.max(1)));
        // Readings are served while the PLEG ends an observation at least every three relist
        // periods (the evented PLEG's heartbeat has the same period).
        let pod_cache = PodCache::new(config.pleg_relist_period.saturating_mul(3));
        let status = Arc::new(StatusManager::new(sink.clone()));
        let (probe_tx, probe_rx) = tokio::sync::mpsc::channel(PROBE_UPDATES_CAPACITY);
        let prober = Arc::new(ProberManager::new(
            runtime.clone(),
            status.clone(),
            sink.clone(),
            probe_tx,
        ));
        let hooks = Hooks::new(runtime.clone(), sink.clone(), prober.http().cloned());
        let stats = cm.node_stats().map(|provider| {
            Arc::new(
                SummaryCollector::new(
                    provider,
                    runtime.clone(),
                    SummaryConfig {
                        pods_system_container: cm.allocatable().contains_key("memory"),
                        ..SummaryConfig::from_config(&config)
                    },
                )
                .with_persistent_volume_stats(volumes.volume_stats_cache()),
            )
        });
        let cpu_manager = Arc::new(CpuManager::none(&config.root_dir));
        let device_manager = Arc::new(DeviceManager::new(None, Vec::new()));
        let memory_manager = Arc::new(MemoryManager::none(&config.root_dir));
        let mut topology = TopologyManager::none();
        topology.add_provider(device_manager.clone());
        topology.add_provider(cpu_manager.clone());
        topology.add_provider(memory_manager.clone());
        Engine {
            cpu_manager,
            memory_manager,
            device_manager,
            topology: Arc::new(topology),
            image_gc: ImageGc::new(config.image_gc.clone()),
            stats,
            status,
            hooks,
            prober,
            probe_updates: Mutex::new(Some(probe_rx)),
            config,
            runtime,
            cm,
            sink,
            admit_handlers,
            node_lister: None,
            pods: RwLock::new(PodManager::new()),
            crash_backoff: Mutex::new(crash_backoff),
            images,
            runtime_state: RuntimeState::default(),
            pod_cache,
            sources_ready: AtomicBool::new(false),
            node_status_changed,
            sync_permits,
            health: Health::default(),
            volumes,
        }
    }

    pub fn pods(&self) -> RwLockReadGuard<'_, PodManager> {
        self.pods.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn pods_mut(&self) -> RwLockWriteGuard<'_, PodManager> {
        self.pods.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn crash_backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.crash_backoff.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pods the engine is to run and that have not finished (Go's `GetActivePods`):
    /// known to the pod manager and not in a terminal phase.
    pub fn active_pods(&self) -> Vec<Arc<k8s_openapi::api::core::v1::Pod>> {
        self.pods()
            .pods()
            .into_iter()
            .filter(|p| !crate::pod::is_mirror(p) && !self.status.is_terminal(crate::pod::uid(p)))
            .collect()
    }

    /// Uids of every pod the engine knows: desired ones and those the last relist saw.
    pub fn known_pod_uids(&self) -> Vec<String> {
        let mut uids: std::collections::BTreeSet<String> = self
            .pods()
            .pods()
            .iter()
            .map(|p| crate::pod::uid(p).to_string())
            .collect();
        uids.extend(
            self.runtime_state
                .pods_except(|_| false)
                .into_iter()
                .map(|r| r.uid),
        );
        uids.into_iter().collect()
    }
}
