//! The node-level managers `run` starts beside the sync loop, each a task of its own on
//! tokio's clock with the kubelet's cancellation token: the eviction manager (through
//! [`EngineEvictionHost`], which gives it the summary, node-level reclaim and the pod
//! workers), image garbage collection (every `image_gc.period`) and container log rotation
//! (every `container_logs.monitor_interval`), and the CPU manager's reconcile
//! ([`run_cpu_reconcile`]).
//!
//! Images are removed — by the periodic collection and by the eviction manager's disk
//! reclaim alike — only once it is safe by construction ([`images_removable`]): every pod
//! source has been seen (`sourcesReady`), so every pod the node is to run is known, and
//! every pod to run has been synced once, so its images were pulled or found; and the
//! images that pods which may still start containers name are kept as in use
//! ([`crate::images::in_use`]). Until then the periodic collection checks again every
//! second and collects as soon as it may; the reclaim reports that it cannot run yet.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::eviction::manager::{EvictionHost, MeasuredPods, Reclaim};
use crate::images::gc::ImageGcError;
use crate::images::in_use::{may_start_containers, ImageRefs};
use crate::nodeshutdown::manager::ShutdownHost;
use crate::pod;
use crate::pod_workers::{PodWorkers, WorkerState};
use crate::sink::{Event, EventType};
use crate::stats::StatsError;
use crate::summary::{Detail, PodEntry, Summary};

/// Capacity of the eviction manager → sync loop channel.
pub(super) const EVICTION_CHANNEL_CAPACITY: usize = 16;

/// The eviction manager (or the node shutdown manager) asks the sync loop to kill a pod
/// and fail it.
#[derive(Debug, Clone)]
pub(super) struct EvictionRequest {
    /// The pod's uid.
    pub uid: String,
    /// The grace period override.
    pub grace_seconds: i64,
    /// The failed status' reason (`Evicted`, or `Terminated` for a node shutdown).
    pub reason: &'static str,
    /// Its message (Go's eviction message, the event's too).
    pub message: String,
}

/// The eviction manager's view of the engine.
pub(super) struct EngineEvictionHost {
    pub engine: Arc<Engine>,
    pub workers: Arc<PodWorkers>,
    pub requests: mpsc::Sender<EvictionRequest>,
}

impl EngineEvictionHost {
    fn entries(&self) -> Vec<PodEntry> {
        self.engine
            .pods()
            .pods()
            .into_iter()
            .map(|pod| {
                let start_time = self.engine.status.start_time(pod::uid(&pod));
                PodEntry { pod, start_time }
            })
            .collect()
    }
}

#[async_trait]
impl EvictionHost for EngineEvictionHost {
    fn node_name(&self) -> String {
        self.engine.config.node_name.clone()
    }

    fn active_pods(&self) -> Vec<Arc<Pod>> {
        self.engine
            .pods()
            .pods()
            .into_iter()
            .filter(|p| {
                let uid = pod::uid(p);
                self.workers.state(uid) == Some(WorkerState::Syncing)
                    && !self.engine.status.is_terminal(uid)
            })
            .collect()
    }

    async fn summary(&self, pods: MeasuredPods) -> Result<Summary, StatsError> {
        let stats = self.engine.stats.as_ref().ok_or(StatsError::Unavailable)?;
        match pods {
            MeasuredPods::All => stats.collect(&self.entries(), Detail::NoNetwork).await,
            MeasuredPods::WithLocalStorageLimits => {
                let mut entries = self.entries();
                entries.retain(|e| crate::eviction::local_storage::has_limits(&e.pod));
                stats.collect(&entries, Detail::SelectedPods).await
            }
            MeasuredPods::None => stats.collect(&[], Detail::SelectedPods).await,
        }
    }

    fn dedicated_image_fs(&self) -> bool {
        self.engine
            .stats
            .as_ref()
            .and_then(|s| s.has_dedicated_image_fs())
            .unwrap_or(false)
    }

    async fn reclaim(&self, what: Reclaim) -> Result<(), String> {
        match what {
            Reclaim::Containers => {
                let workers = self.workers.clone();
                let terminated = move |uid: &str| {
                    matches!(
                        workers.state(uid),
                        Some(WorkerState::Terminated | WorkerState::Finished)
                    )
                };
                tracing::info!("attempting to delete unused containers");
                crate::gc::collect(
                    &self.engine,
                    crate::gc::Reclaim {
                        terminated: &terminated,
                    },
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            }
            Reclaim::Images => {
                let wanted = images_removable(&self.engine, &self.workers)?;
                self.engine
                    .image_gc
                    .delete_unused(self.engine.runtime.as_ref(), &wanted)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }

    fn evict(&self, p: &Arc<Pod>, grace_seconds: i64, message: &str) -> bool {
        self.requests
            .try_send(EvictionRequest {
                uid: pod::uid(p).to_string(),
                grace_seconds,
                reason: crate::eviction::messages::REASON,
                message: message.to_string(),
            })
            .is_ok()
    }

    fn pod_cleaned_up(&self, uid: &str) -> bool {
        !matches!(
            self.workers.state(uid),
            Some(WorkerState::Syncing | WorkerState::Terminating)
        )
    }

    fn pod_resources_reclaimed(&self, uid: &str) -> bool {
        self.pod_cleaned_up(uid) && !self.engine.runtime_state.has_containers(uid)
    }

    fn record_event(&self, event: Event) {
        self.engine.sink.record_event(event);
    }
}

/// The node shutdown manager's view of the engine: the eviction host's pods and kill path,
/// and the node status' wake-up.
pub(super) struct EngineShutdownHost {
    pub eviction: Arc<EngineEvictionHost>,
    pub changed: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl ShutdownHost for EngineShutdownHost {
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        self.eviction.active_pods()
    }

    async fn kill(&self, p: &Arc<Pod>, grace_seconds: i64) -> bool {
        self.eviction
            .requests
            .send(EvictionRequest {
                uid: pod::uid(p).to_string(),
                grace_seconds,
                reason: crate::nodeshutdown::REASON,
                message: crate::nodeshutdown::MESSAGE.to_string(),
            })
            .await
            .is_ok()
    }

    fn pod_stopped(&self, uid: &str) -> bool {
        self.eviction.pod_cleaned_up(uid)
    }

    fn state_changed(&self) {
        self.changed.notify_one();
    }
}

fn node_event(engine: &Engine, reason: &str, message: String) {
    engine.sink.record_event(Event::for_node(
        &engine.config.node_name,
        EventType::Warning,
        reason,
        message,
    ));
}

/// How often image garbage collection checks whether it may run yet (see the module docs).
const IMAGE_GC_READY_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether images may be removed now (see the module docs): the images of the pods that may
/// still start containers, to keep; or why not yet.
pub(super) fn images_removable(engine: &Engine, workers: &PodWorkers) -> Result<ImageRefs, String> {
    if !engine
        .sources_ready
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return Err("not every pod source has been seen yet".into());
    }
    let waiting = workers.awaiting_first_sync();
    if waiting > 0 {
        return Err(format!("{waiting} pods have not been synced yet"));
    }
    let pods = engine.pods().pods();
    let status = &engine.status;
    Ok(ImageRefs::of_pods(pods.iter().map(|p| p.as_ref()).filter(
        |p| may_start_containers(p, |uid| status.is_terminal(uid)),
    )))
}

/// Image garbage collection every `image_gc.period` (Go's `StartGarbageCollection`'s image
/// half), the first as soon as images may be removed (see the module docs):
/// `ImageGCFailed` when it fails twice in a row, `FreeDiskSpaceFailed` when it cannot free
/// enough, `InvalidDiskCapacity` when the image filesystem reports none.
pub(super) async fn run_image_gc(
    engine: Arc<Engine>,
    workers: Arc<PodWorkers>,
    shutdown: CancellationToken,
) {
    let gc = &engine.image_gc;
    if !gc.policy().enabled() {
        tracing::info!("imageGCHighThresholdPercent is 100: image garbage collection is off");
        return;
    }
    let mut tick = tokio::time::interval(gc.policy().period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failed_before = false;
    let mut waited = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let wanted = loop {
            match images_removable(&engine, &workers) {
                Ok(w) if engine.runtime_state.ready() => break w,
                Ok(_) => tracing::debug!("image garbage collection waits for the runtime"),
                Err(why) if !waited => {
                    tracing::info!(reason = %why, "image garbage collection waits until every pod is known and synced once");
                    waited = true;
                }
                Err(why) => tracing::debug!(reason = %why, "image garbage collection waits"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(IMAGE_GC_READY_POLL) => {}
            }
        };
        let image_fs = match engine.stats.as_ref() {
            Some(s) => s.image_fs().await,
            None => None,
        };
        let result = gc
            .garbage_collect(engine.runtime.as_ref(), image_fs.as_ref(), &wanted)
            .await;
        if gc.unsupported() {
            return;
        }
        match result {
            Ok(()) => failed_before = false,
            Err(e) => {
                match &e {
                    ImageGcError::NotEnough { .. } => {
                        node_event(&engine, "FreeDiskSpaceFailed", e.to_string())
                    }
                    ImageGcError::InvalidCapacity => {
                        node_event(&engine, "InvalidDiskCapacity", e.to_string())
                    }
                    _ => {}
                }
                if failed_before {
                    tracing::error!(error = %e, "image garbage collection failed multiple times in a row");
                    node_event(&engine, "ImageGCFailed", e.to_string());
                } else {
                    tracing::warn!(error = %e, "image garbage collection failed once; stats initialization may not have completed yet");
                }
                failed_before = true;
            }
        }
    }
}

/// The CPU manager's reconcile, every `cpuManagerReconcilePeriod` until `shutdown`: stale
/// assignments released, the state file written, and running containers whose CPUs changed
/// updated through the runtime (see [`crate::cpumanager::manager`]).
pub(super) async fn run_cpu_reconcile(engine: Arc<Engine>, shutdown: CancellationToken) {
    let manager = engine.cpu_manager.clone();
    let mut tick = tokio::time::interval(manager.config().reconcile_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let listed = match engine
            .runtime
            .list_containers(&crate::runtime::ListFilter::all())
            .await
        {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(error = %e, "cpu manager: reconcile cannot list containers");
                continue;
            }
        };
        let ready = engine
            .sources_ready
            .load(std::sync::atomic::Ordering::Acquire);
        let plan = manager.reconcile_plan(&engine.active_pods(), ready, &listed);
        if let Err(e) = manager.persist().await {
            tracing::error!(error = %e, "cpu manager: writing the state file failed");
        }
        for (id, cpus) in plan {
            let update = crate::runtime::ResourcesUpdate {
                cpuset_cpus: Some(cpus.to_string()),
            };
            match engine
                .runtime
                .update_container_resources(&id, &update)
                .await
            {
                Ok(()) => {
                    tracing::debug!(container = %id, cpus = %cpus, "cpu manager: container CPUs updated");
                    manager.applied(&id, cpus);
                }
                Err(e) => {
                    tracing::warn!(container = %id, cpus = %cpus, error = %e, "cpu manager: updating a container's CPUs failed")
                }
            }
        }
    }
}
