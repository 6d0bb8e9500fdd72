//! [`KubeletBuilder`]: the one construction path, for the binary and embedders alike.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Kubelet, KubeletHandle};
use crate::admission::{
    apparmor, sysctl, AdmitHandler, AppArmorAdmitHandler, NodeLister, PredicateAdmitHandler,
    SysctlAdmitHandler,
};
use crate::cm::ContainerManager;
use crate::config::Config;
use crate::cpumanager::{CpuManager, CpuManagerPolicy, CpuTopology};
use crate::credentials::CredentialProvider;
use crate::devicemanager::{DeviceManager, DEVICE_PLUGIN_DIR};
use crate::devices::DevicePluginRegistry;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::eviction::admission::EvictionAdmitHandler;
use crate::eviction::manager::EvictionManager;
use crate::eviction::PressureState;
use crate::memorymanager::{self, MemoryManager, MemoryManagerPolicy};
use crate::nodeshutdown::manager::NodeShutdownManager;
use crate::nodeshutdown::{ShutdownAdmitHandler, ShutdownInhibitor, ShutdownState};
use crate::objects::{ObjectStore, StandaloneObjectStore};
use crate::pod_workers::PodWorkers;
use crate::runtime::ContainerRuntime;
use crate::sink::{NoopStatusSink, StatusSink};
use crate::source::PodSource;
use crate::topologymanager::TopologyManager;

/// Builds a [`Kubelet`]: the one construction path for the binary and embedders.
#[derive(Default)]
pub struct KubeletBuilder {
    config: Config,
    runtime: Option<Arc<dyn ContainerRuntime>>,
    container_manager: Option<Arc<dyn ContainerManager>>,
    status_sink: Option<Arc<dyn StatusSink>>,
    sources: Vec<Arc<dyn PodSource>>,
    admit_handlers: Vec<Arc<dyn AdmitHandler>>,
    object_store: Option<Arc<dyn ObjectStore>>,
    credential_providers: Vec<Arc<dyn CredentialProvider>>,
    node_lister: Option<Arc<dyn NodeLister>>,
    shutdown_inhibitor: Option<Arc<dyn ShutdownInhibitor>>,
    device_plugins: Option<Arc<dyn DevicePluginRegistry>>,
    csi: Option<Arc<dyn crate::csi::CsiNodeService>>,
}

impl KubeletBuilder {
    /// Sets the engine configuration (defaults: the Go kubelet's).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }
    /// Sets the container runtime backend (required).
    pub fn runtime(mut self, runtime: Arc<dyn ContainerRuntime>) -> Self {
        self.runtime = Some(runtime);
        self
    }
    /// Sets the container manager (required).
    pub fn container_manager(mut self, cm: Arc<dyn ContainerManager>) -> Self {
        self.container_manager = Some(cm);
        self
    }
    /// Sets where status and events go (default: [`NoopStatusSink`]).
    pub fn status_sink(mut self, sink: Arc<dyn StatusSink>) -> Self {
        self.status_sink = Some(sink);
        self
    }
    /// Adds a pod source. Source names must be unique.
    pub fn source(mut self, source: Arc<dyn PodSource>) -> Self {
        self.sources.push(source);
        self
    }
    /// Adds an admission handler, consulted after the built-in checks.
    pub fn admit_handler(mut self, handler: Arc<dyn AdmitHandler>) -> Self {
        self.admit_handlers.push(handler);
        self
    }
    /// Sets where config maps, secrets, service-account tokens and services come from
    /// (default: [`StandaloneObjectStore`], which has none).
    pub fn object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.object_store = Some(store);
        self
    }
    /// Adds a source of registry credentials (e.g. a credential provider plugin), consulted
    /// for every pull after the pod's image pull secrets, in the order added.
    pub fn credential_provider(mut self, provider: Arc<dyn CredentialProvider>) -> Self {
        self.credential_providers.push(provider);
        self
    }

    /// Sets where admission reads the current Node object (its labels and extended
    /// resources); without one, or while it knows no Node, admission uses
    /// [`Config::node_labels`].
    pub fn node_lister(mut self, lister: Arc<dyn NodeLister>) -> Self {
        self.node_lister = Some(lister);
        self
    }
    /// Sets the host side of graceful node shutdown (logind's inhibitor lock and shutdown
    /// signal); without one, `node_shutdown` in the configuration has no effect.
    pub fn shutdown_inhibitor(mut self, inhibitor: Arc<dyn ShutdownInhibitor>) -> Self {
        self.shutdown_inhibitor = Some(inhibitor);
        self
    }

    /// Sets how CSI volumes reach their drivers (kubelet-cm's gRPC client over the drivers
    /// registered through the plugin manager); without one, CSI volumes are refused.
    pub fn csi_node_service(mut self, service: Arc<dyn crate::csi::CsiNodeService>) -> Self {
        self.csi = Some(service);
        self
    }

    /// Where device plugins register (kubelet-cm's `deviceplugin/v1beta1` server on
    /// `<root-dir>/device-plugins/kubelet.sock`); without one, no device plugin resources.
    pub fn device_plugin_registry(mut self, registry: Arc<dyn DevicePluginRegistry>) -> Self {
        self.device_plugins = Some(registry);
        self
    }

    /// Validates the parts and builds the kubelet.
    pub fn build(self) -> Result<Kubelet> {
        let c = &self.config;
        if c.node_name.is_empty() {
            return Err(Error::InvalidConfig {
                field: "nodeName",
                message: "must not be empty".into(),
            });
        }
        for (field, d) in [
            ("syncFrequency", c.sync_frequency),
            ("housekeepingInterval", c.housekeeping_interval),
            ("plegRelistPeriod", c.pleg_relist_period),
            ("containerGCPeriod", c.container_gc_period),
        ] {
            if d.is_zero() {
                return Err(Error::InvalidConfig {
                    field,
                    message: "must be greater than 0".into(),
                });
            }
        }
        let thresholds = c.eviction.thresholds().map_err(|e| Error::InvalidConfig {
            field: e.field,
            message: format!("{}: {}", e.signal, e.message),
        })?;
        for (field, d) in [
            ("evictionMonitoringPeriod", c.eviction.monitoring_interval),
            (
                "containerLogMonitorInterval",
                c.container_logs.monitor_interval,
            ),
            ("imageGCPeriod", c.image_gc.period),
        ] {
            if d.is_zero() {
                return Err(Error::InvalidConfig {
                    field,
                    message: "must be greater than 0".into(),
                });
            }
        }
        c.node_shutdown
            .validate()
            .map_err(|(field, message)| Error::InvalidConfig { field, message })?;
        c.image_gc
            .validate()
            .map_err(|(field, message)| Error::InvalidConfig { field, message })?;
        if c.container_logs.max_size >= 0 && c.container_logs.max_files < 2 {
            return Err(Error::InvalidConfig {
                field: "containerLogMaxFiles",
                message: format!("invalid {}, must be > 1", c.container_logs.max_files),
            });
        }
        if c.container_logs.max_workers == 0 {
            return Err(Error::InvalidConfig {
                field: "containerLogMaxWorkers",
                message: "must be greater than 0".into(),
            });
        }
        if c.update_channel_capacity == 0 {
            return Err(Error::InvalidConfig {
                field: "updateChannelCapacity",
                message: "must be greater than 0".into(),
            });
        }
        let mut names = std::collections::HashSet::new();
        for s in &self.sources {
            if !names.insert(s.name().to_string()) {
                return Err(Error::InvalidConfig {
                    field: "sources",
                    message: format!("two pod sources are named {:?}", s.name()),
                });
            }
        }
        let runtime = self.runtime.ok_or(Error::MissingComponent("runtime"))?;
        crate::metrics::global().set_node_name(&c.node_name);
        let cm = self
            .container_manager
            .ok_or(Error::MissingComponent("container manager"))?;
        let sink = self.status_sink.unwrap_or_else(|| Arc::new(NoopStatusSink));
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| sysctl::kernel_version(&r))
            .unwrap_or((0, 0));
        let sysctls =
            SysctlAdmitHandler::new(&c.allowed_unsafe_sysctls, kernel).map_err(|message| {
                Error::InvalidConfig {
                    field: "allowedUnsafeSysctls",
                    message,
                }
            })?;
        let apparmor = AppArmorAdmitHandler {
            host_enabled: c.apparmor_enabled.unwrap_or_else(apparmor::host_enabled),
        };
        // As Go: the eviction manager's admission first, then the predicates.
        let pressure = Arc::new(PressureState::default());
        let eviction = Arc::new(EvictionManager::new(
            self.config.eviction.clone(),
            thresholds,
            pressure.clone(),
        ));
        let shutdown_state = Arc::new(ShutdownState::default());
        let node_shutdown = self.shutdown_inhibitor.map(|inhibitor| {
            Arc::new(NodeShutdownManager::new(
                self.config.node_shutdown.clone(),
                inhibitor,
                shutdown_state.clone(),
            ))
        });
        let cpu_manager = Arc::new(cpu_manager(&self.config, cm.as_ref())?);
        let memory_manager = Arc::new(memory_manager(&self.config, cm.as_ref())?);
        let c_topology = (
            self.config.topology_manager_policy,
            self.config.topology_manager_scope,
        );
        // Go's order: eviction, predicates, sysctls, AppArmor, then the shutdown manager. The
        // CPU manager allocates once every handler admitted the pod (the sync loop).
        let mut handlers: Vec<Arc<dyn AdmitHandler>> = vec![
            Arc::new(EvictionAdmitHandler::new(pressure.clone())),
            Arc::new(PredicateAdmitHandler),
            Arc::new(sysctls),
            Arc::new(apparmor),
            Arc::new(ShutdownAdmitHandler::new(shutdown_state.clone())),
        ];
        handlers.extend(self.admit_handlers);
        let objects = self
            .object_store
            .unwrap_or_else(|| Arc::new(StandaloneObjectStore));
        let mut engine = Engine::new(
            self.config,
            runtime,
            cm,
            sink,
            handlers,
            objects,
            self.credential_providers,
        );
        if let Some(lister) = self.node_lister.clone() {
            engine.volumes.set_node_lister(lister);
        }
        engine.node_lister = self.node_lister;
        if let Some(csi) = self.csi {
            let node = engine.config.node_name.clone();
            engine.volumes.set_csi(csi, &node);
        }
        let mut topology = TopologyManager::with_max_numa_nodes(
            c_topology.0,
            c_topology.1,
            numa_nodes(engine.cm.as_ref()),
            engine.config.topology_manager_max_numa_nodes,
        )
        .map_err(|message| Error::InvalidConfig {
            field: "topologyManagerPolicy",
            message,
        })?;
        // Go's order: the device manager's hints and allocation, then the CPU manager's,
        // then the memory manager's.
        let numa: Vec<u32> = numa_nodes(engine.cm.as_ref());
        let device_manager = Arc::new(DeviceManager::new(
            (!engine.config.root_dir.as_os_str().is_empty())
                .then(|| engine.config.root_dir.join(DEVICE_PLUGIN_DIR))
                .as_deref(),
            numa,
        ));
        topology.add_provider(device_manager.clone());
        topology.add_provider(cpu_manager.clone());
        topology.add_provider(memory_manager.clone());
        engine.topology = Arc::new(topology);
        engine.cpu_manager = cpu_manager;
        engine.memory_manager = memory_manager;
        engine.device_manager = device_manager;
        let engine = Arc::new(engine);
        let shutdown = CancellationToken::new();
        let workers = Arc::new(PodWorkers::new(shutdown.clone()));
        Ok(Kubelet {
            handle: KubeletHandle {
                engine,
                workers,
                pressure,
                shutdown_state,
            },
            sources: self.sources,
            workers_shutdown: shutdown,
            eviction,
            node_shutdown,
            device_plugins: self.device_plugins,
        })
    }
}

/// The CPU manager of `config` on the machine `cm` measures: the `static` policy needs the
/// machine's CPU topology and takes the node's cpu reservation (capacity − allocatable).
fn cpu_manager(config: &Config, cm: &dyn ContainerManager) -> Result<CpuManager> {
    let invalid = |message: String| Error::InvalidConfig {
        field: "cpuManagerPolicy",
        message,
    };
    let topology = match config.cpu_manager.policy {
        CpuManagerPolicy::None => CpuTopology::default(),
        CpuManagerPolicy::Static => {
            let stats = cm.node_stats().ok_or_else(|| {
                invalid("the static policy needs the machine's CPU topology, and this container manager does not measure the machine".into())
            })?;
            CpuTopology::new(&stats.machine_info().topology)
        }
    };
    let cpu = |list: &crate::cm::ResourceList| crate::resources::amount(list, "cpu").unwrap_or(0);
    let reserved = cpu(&cm.capacity()).saturating_sub(cpu(&cm.allocatable()));
    CpuManager::new(
        config.cpu_manager.clone(),
        topology,
        reserved,
        &config.root_dir,
    )
    .map_err(|e| invalid(e.to_string()))
}

/// The memory manager of `config` on the machine `cm` measures: the `Static` policy needs
/// the memory of the machine's NUMA nodes (one node of all the memory on a kernel without
/// NUMA information, as cAdvisor) and takes node allocatable's memory reservation
/// (capacity − allocatable: kube- and system-reserved and the hard eviction threshold).
fn memory_manager(config: &Config, cm: &dyn ContainerManager) -> Result<MemoryManager> {
    let invalid = |message: String| Error::InvalidConfig {
        field: "memoryManagerPolicy",
        message,
    };
    let mut machine = Vec::new();
    let mut reservation = Default::default();
    if config.memory_manager.policy == MemoryManagerPolicy::Static {
        let stats = cm.node_stats().ok_or_else(|| {
            invalid("the Static policy needs the machine's NUMA nodes, and this container manager does not measure the machine".into())
        })?;
        let info = stats.machine_info();
        machine.clone_from(&info.numa_memory);
        if machine.is_empty() {
            machine.push(crate::stats::NumaMemory {
                node: 0,
                memory_bytes: info.memory_capacity,
                hugepages: info.hugepages.clone(),
            });
        }
        reservation =
            memorymanager::node_allocatable_reservation(&cm.capacity(), &cm.allocatable());
    }
    MemoryManager::new(
        config.memory_manager.clone(),
        machine,
        &reservation,
        &config.root_dir,
    )
    .map_err(|e| invalid(e.to_string()))
}

/// The machine's NUMA nodes, from the container manager's measurements (`[0]` without them).
fn numa_nodes(cm: &dyn ContainerManager) -> Vec<u32> {
    let nodes: std::collections::BTreeSet<u32> = cm
        .node_stats()
        .map(|s| {
            s.machine_info()
                .topology
                .iter()
                .map(|c| c.numa_node)
                .collect()
        })
        .unwrap_or_default();
    if nodes.is_empty() {
        vec![0]
    } else {
        nodes.into_iter().collect()
    }
}
