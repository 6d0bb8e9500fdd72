//! The kubelet engine: its construction path ([`Kubelet::builder`], in `builder`), the sync
//! loop ([`Kubelet::run`], the loop itself in `sync_loop`) and a handle for reading its state
//! ([`KubeletHandle`], in `handle`).
//!
//! # Tasks
//! `run` starts, under one cancellation token: every pod source, the status publisher, the
//! runtime-state poller (every 5s), the container garbage collector (every
//! `container_gc_period`, see the `gc` module), the node-level managers (the eviction
//! manager, image garbage collection and container log rotation, see `managers`), the PLEG
//! (relisting, or evented with `evented_pleg`: see `pleg::evented`), the CPU manager's
//! reconcile (every `cpuManagerReconcilePeriod`, with a policy other than `none`; the state
//! file is read before anything starts), with a device plugin registry the device manager
//! (the registry listens before the sync loop starts; the device manager applies what it
//! reports, see [`crate::devicemanager`]), and the sync loop itself.
//! The sync loop is one task that selects over merged source updates, PLEG events, eviction
//! requests and the housekeeping tick; it
//! never waits on the runtime, it hands work to pod workers ([`crate::pod_workers`]). While
//! the runtime reports not ready, the loop pauses with a backoff from 100ms to 5s.
//!
//! # Handlers (Go's `HandlePod*`)
//! - **Add**: pods are admitted in creation-time order ([`crate::admission`], then the
//!   topology manager allocating CPUs and devices, then the device plugins' `Allocate`
//!   calls); a rejected pod gets a `Failed` status and never starts; an admitted one gets a
//!   worker.
//! - **Update**: the pod's worker syncs the new spec.
//! - **Delete** (deletion timestamp set): the worker terminates it with its grace period.
//! - **Remove**: the pod left its source: the worker terminates it and cleans up.
//! - **PLEG event**: the pod's worker re-syncs.
//! - **Housekeeping** (every 2s, only once all sources were seen): forgets finished workers,
//!   kills and removes pods found in the runtime that no source wants (orphans), frees the
//!   admission resources of terminal pods, and garbage-collects backoff entries. Leftover
//!   pod-level resources (pod cgroups no pod owns) are looked for at the first housekeeping
//!   and then every 30 s, not every 2 s as Go does: listing them reads the QoS directories of
//!   every cgroup hierarchy (a tenth of an idle node's kubelet CPU at 110 pods, every 2 s),
//!   and a terminated pod's own cleanup already removes its cgroups; what is left is from a
//!   previous kubelet run or a failed removal.
//!
//! On shutdown the kubelet stops its tasks and returns; pods keep running.

mod builder;
mod handle;
mod managers;
mod sync_loop;

use std::path::Path;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::dns::parse_resolv_conf;
use crate::error::Result;
use crate::eviction::manager::EvictionManager;
use crate::nodeshutdown::manager::NodeShutdownManager;
use crate::pleg::Pleg;
use crate::podconfig::PodConfigMerger;
use crate::source::{PodSource, PodUpdate};

pub use builder::KubeletBuilder;
pub use handle::KubeletHandle;
use sync_loop::SyncLoop;

/// Capacity of the PLEG → sync loop channel.
const PLEG_CHANNEL_CAPACITY: usize = 1000;
/// Capacity of the device plugin registry → device manager channel.
const DEVICE_PLUGIN_EVENTS_CAPACITY: usize = 64;

/// The kubelet engine. Build it with [`Kubelet::builder`], then [`Kubelet::run`] it.
pub struct Kubelet {
    handle: KubeletHandle,
    sources: Vec<Arc<dyn PodSource>>,
    workers_shutdown: CancellationToken,
    eviction: Arc<EvictionManager>,
    node_shutdown: Option<Arc<NodeShutdownManager>>,
    device_plugins: Option<Arc<dyn crate::devices::DevicePluginRegistry>>,
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

    /// Runs sources, the sync loop, the PLEG, the status publisher and pod workers until
    /// `shutdown` fires, then stops them all and returns. Pods keep running.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let engine = self.handle.engine.clone();
        engine.cpu_manager.start().await?;
        engine.memory_manager.start().await?;
        engine.device_manager.start().await;
        engine.runtime_state.init(engine.runtime.as_ref()).await;
        if !engine.config.resolv_conf.as_os_str().is_empty() {
            engine
                .runtime_state
                .set_host_dns(read_resolv_conf(&engine.config.resolv_conf).await);
        }
        let tasks = TaskTracker::new();
        let child = shutdown.child_token();
        if let Some(registry) = &self.device_plugins {
            let (tx, rx) = mpsc::channel(DEVICE_PLUGIN_EVENTS_CAPACITY);
            registry.start(tx, child.clone()).await?;
            tasks.spawn(engine.device_manager.clone().run(rx, child.clone()));
        }

        let (tx, rx) = mpsc::channel::<PodUpdate>(engine.config.update_channel_capacity);
        let names: Vec<String> = self.sources.iter().map(|s| s.name().to_string()).collect();
        for source in self.sources {
            let (tx, token) = (tx.clone(), child.clone());
            tasks.spawn(async move {
                if let Err(e) = source.run(tx, token).await {
                    tracing::error!(source = source.name(), error = %e, "pod source stopped");
                }
            });
        }
        drop(tx);
        tasks.spawn(engine.status.clone().run(child.clone()));
        let (e, token) = (engine.clone(), child.clone());
        tasks.spawn(async move {
            crate::runtime_state::run(&e.runtime_state, e.runtime.as_ref(), token).await
        });
        tasks.spawn(crate::gc::run(engine.clone(), child.clone()));
        // The attachable volumes on disk are counted before any is reported free.
        let (e, token) = (engine.clone(), child.clone());
        tasks.spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = e.volumes.reconstruct_in_use() => {}
            }
        });
        let (e, token) = (engine.clone(), child.clone());
        tasks.spawn(async move {
            let period = e.config.volume_stats_agg_period;
            e.volumes.run_volume_stats(period, token).await
        });
        if engine.config.cpu_manager.policy != crate::cpumanager::CpuManagerPolicy::None {
            tasks.spawn(managers::run_cpu_reconcile(engine.clone(), child.clone()));
        }
        // The node-level managers (see `managers`).
        let (eviction_tx, eviction_rx) = mpsc::channel(managers::EVICTION_CHANNEL_CAPACITY);
        let host = Arc::new(managers::EngineEvictionHost {
            engine: engine.clone(),
            workers: self.handle.workers.clone(),
            requests: eviction_tx,
        });
        if let Some(manager) = self.node_shutdown.clone() {
            let host = managers::EngineShutdownHost {
                eviction: host.clone(),
                changed: engine.node_status_changed.clone(),
            };
            let token = child.clone();
            tasks.spawn(async move { manager.run(&host, token).await });
        }
        let (eviction, token) = (self.eviction.clone(), child.clone());
        tasks.spawn(async move { eviction.run(host, token).await });
        tasks.spawn(managers::run_image_gc(
            engine.clone(),
            self.handle.workers.clone(),
            child.clone(),
        ));
        if !engine.config.root_dir.as_os_str().is_empty() {
            let rotator = crate::logs::rotation::LogRotator::new(
                engine.config.container_logs.clone(),
                engine.runtime.clone(),
            );
            tasks.spawn(rotator.run(child.clone()));
        }
        let (pleg_tx, pleg_rx) = mpsc::channel(PLEG_CHANNEL_CAPACITY);
        let pleg = Pleg::new(engine.clone());
        if engine.config.evented_pleg {
            tasks.spawn(crate::pleg::evented::run(pleg, pleg_tx, child.clone()));
        } else {
            tasks.spawn(pleg.run(pleg_tx, child.clone()));
        }

        let mut sync_loop = SyncLoop::new(
            engine.clone(),
            self.handle.workers.clone(),
            PodConfigMerger::new(names),
        );
        tracing::info!(node = %engine.config.node_name, "kubelet sync loop starting");
        let probe_rx = engine
            .probe_updates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        sync_loop
            .run(rx, pleg_rx, probe_rx, eviction_rx, &child)
            .await;

        tracing::info!("kubelet shutting down");
        child.cancel();
        self.workers_shutdown.cancel();
        tasks.close();
        self.handle.workers.wait().await;
        engine.prober.shutdown().await;
        tasks.wait().await;
        Ok(())
    }
}

/// Receives from an optional channel; pending forever when there is none.
pub(super) async fn recv_opt<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn read_resolv_conf(path: &Path) -> crate::runtime::DnsConfig {
    match tokio::fs::read_to_string(path).await {
        Ok(text) => parse_resolv_conf(&text),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read resolvConf; pods get no host DNS settings");
            Default::default()
        }
    }
}
