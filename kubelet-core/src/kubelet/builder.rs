//! [`KubeletBuilder`]: the one construction path, for the binary and embedders alike.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Kubelet, KubeletHandle};
use crate::admission::{
    apparmor, sysctl, AdmitHandler, AppArmorAdmitHandler, PredicateAdmitHandler, SysctlAdmitHandler,
};
use crate::cm::ContainerManager;
use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::objects::{ObjectStore, StandaloneObjectStore};
use crate::pod_workers::PodWorkers;
use crate::runtime::ContainerRuntime;
use crate::sink::{NoopStatusSink, StatusSink};
use crate::source::PodSource;

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
        let mut handlers: Vec<Arc<dyn AdmitHandler>> = vec![
            Arc::new(PredicateAdmitHandler),
            Arc::new(sysctls),
            Arc::new(apparmor),
        ];
        handlers.extend(self.admit_handlers);
        let objects = self
            .object_store
            .unwrap_or_else(|| Arc::new(StandaloneObjectStore));
        let engine = Arc::new(Engine::new(
            self.config,
            runtime,
            cm,
            sink,
            handlers,
            objects,
        ));
        let shutdown = CancellationToken::new();
        let workers = Arc::new(PodWorkers::new(shutdown.clone()));
        Ok(Kubelet {
            handle: KubeletHandle { engine, workers },
            sources: self.sources,
            workers_shutdown: shutdown,
        })
    }
}
