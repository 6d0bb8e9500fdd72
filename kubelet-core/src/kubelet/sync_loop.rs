//! The sync loop (Go's `syncLoop`/`syncLoopIteration` and the `HandlePod*` handlers): one
//! task that selects over merged source updates, PLEG events, probe results and the
//! housekeeping tick, and hands work to the pod workers. See the parent module's docs for the
//! handlers.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::managers::EvictionRequest;
use super::recv_opt;
use crate::admission::{AdmitAttributes, AdmitResult, NodeInfo, RequestedResources};
use crate::clock::{now_time, now_unix_nanos};
use crate::cpumanager::CpuManagerPolicy;
use crate::engine::Engine;
use crate::memorymanager::MemoryManagerPolicy;
use crate::pleg;
use crate::pod;
use crate::pod_workers::{PodWorkers, WorkKind, WorkerState};
use crate::podconfig::PodConfigMerger;
use crate::runtime::PodRef;
use crate::sink::{Event, EventType};
use crate::source::{PodOperation, PodUpdate};
use crate::topologymanager::TopologyPolicy;

/// Go's grace period for pods found in the runtime that no source wants.
const ORPHAN_GRACE_SECONDS: i64 = 2;

/// Pods admitted and not yet terminal, with their summed requests.
#[derive(Default)]
struct Admitted {
    list: Vec<Arc<Pod>>,
    index: HashMap<String, usize>,
    requested: RequestedResources,
}

impl Admitted {
    fn contains(&self, uid: &str) -> bool {
        self.index.contains_key(uid)
    }
    fn insert(&mut self, p: Arc<Pod>) {
        let uid = pod::uid(&p).to_string();
        if self.index.contains_key(&uid) {
            return;
        }
        self.requested.add(&RequestedResources::of(&p));
        self.index.insert(uid, self.list.len());
        self.list.push(p);
    }
    fn remove(&mut self, uid: &str) {
        let Some(i) = self.index.remove(uid) else {
            return;
        };
        let p = self.list.swap_remove(i);
        self.requested.sub(&RequestedResources::of(&p));
        if let Some(moved) = self.list.get(i) {
            self.index.insert(pod::uid(moved).to_string(), i);
        }
    }
}

/// The sync loop's own state.
pub(super) struct SyncLoop {
    engine: Arc<Engine>,
    workers: Arc<PodWorkers>,
    merger: PodConfigMerger,
    admitted: Admitted,
    /// When housekeeping last looked for leftover pod-level resources.
    resources_scanned: Option<tokio::time::Instant>,
}

/// How often housekeeping looks for leftover pod-level resources (see the parent module).
const LEFTOVER_RESOURCES_PERIOD: Duration = Duration::from_secs(30);

impl SyncLoop {
    /// The loop's state for an engine, its workers and the merge of its sources.
    pub(super) fn new(
        engine: Arc<Engine>,
        workers: Arc<PodWorkers>,
        merger: PodConfigMerger,
    ) -> Self {
        // A kubelet without pod sources has seen all of them (Go's `SeenAllSources` of an
        // empty set); otherwise readiness follows the first snapshots.
        engine
            .sources_ready
            .store(merger.seen_all_sources(), Ordering::Relaxed);
        SyncLoop {
            engine,
            workers,
            merger,
            admitted: Admitted::default(),
            resources_scanned: None,
        }
    }

    /// Runs until `shutdown`. See the parent module's docs.
    pub(super) async fn run(
        &mut self,
        mut updates: mpsc::Receiver<PodUpdate>,
        mut pleg: mpsc::Receiver<pleg::Event>,
        mut probes: Option<mpsc::Receiver<String>>,
        mut evictions: mpsc::Receiver<EvictionRequest>,
        shutdown: &CancellationToken,
    ) {
        let mut housekeeping = tokio::time::interval(self.engine.config.housekeeping_interval);
        housekeeping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut not_ready_backoff = Duration::from_millis(100);
        let mut sources_open = true;
        loop {
            self.engine
                .health
                .sync_loop_entered
                .store(now_unix_nanos(), Ordering::Relaxed);
            if !self.engine.runtime_state.ready() {
                tracing::debug!(delay = ?not_ready_backoff, "skipping pod synchronization: container runtime not ready");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(not_ready_backoff) => {}
                }
                not_ready_backoff = (not_ready_backoff * 2).min(Duration::from_secs(5));
                continue;
            }
            not_ready_backoff = Duration::from_millis(100);
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                u = updates.recv(), if sources_open => match u {
                    Some(u) => self.handle_source_update(u).await,
                    None => sources_open = false,
                },
                Some(e) = pleg.recv() => self.handle_pleg_event(e),
                Some(uid) = recv_opt(&mut probes) => self.handle_probe_update(&uid),
                Some(r) = evictions.recv() => self.handle_eviction(r),
                _ = housekeeping.tick() => self.housekeeping().await,
            }
        }
    }

    async fn handle_source_update(&mut self, update: PodUpdate) {
        for inc in self.merger.merge(update) {
            tracing::debug!(op = ?inc.op, source = %inc.source, pods = inc.pods.len(), "pod config update");
            let pods = inc.pods;
            match inc.op {
                PodOperation::Add => self.handle_additions(pods).await,
                PodOperation::Update => {
                    for p in pods {
                        self.engine.pods_mut().upsert(p.clone());
                        if !pod::is_mirror(&p) && self.admitted.contains(pod::uid(&p)) {
                            self.dispatch(p, WorkKind::Sync);
                        }
                    }
                }
                PodOperation::Delete => {
                    for p in pods {
                        self.engine.pods_mut().upsert(p.clone());
                        if !pod::is_mirror(&p) && self.admitted.contains(pod::uid(&p)) {
                            self.dispatch(
                                p,
                                WorkKind::Kill {
                                    grace_override: None,
                                    removed: false,
                                    failure: None,
                                },
                            );
                        }
                    }
                }
                PodOperation::Remove => {
                    for p in pods {
                        self.engine.pods_mut().remove(&p);
                        if pod::is_mirror(&p) {
                            continue;
                        }
                        let uid = pod::uid(&p).to_string();
                        if self.admitted.contains(&uid) || self.workers.state(&uid).is_some() {
                            self.admitted.remove(&uid);
                            self.dispatch(
                                p,
                                WorkKind::Kill {
                                    grace_override: None,
                                    removed: true,
                                    failure: None,
                                },
                            );
                        } else {
                            self.engine.status.remove(&uid);
                        }
                    }
                }
                PodOperation::Reconcile | PodOperation::Set => {
                    for p in pods {
                        // The source's copy of the status differs from what the kubelet
                        // published (e.g. the node controller marked the pod not Ready while
                        // the node was away): publish again (Go's needsReconcile).
                        self.engine.status.resync_if_drifted(&p);
                        self.engine.pods_mut().upsert(p.clone());
                        // A readiness gate's condition may have changed: Ready is
                        // re-evaluated by a sync (Go's NeedToReconcilePodReadiness).
                        if crate::status::readiness::has_readiness_gates(&p)
                            && self.admitted.contains(pod::uid(&p))
                        {
                            self.dispatch(p, WorkKind::Sync);
                        }
                    }
                }
            }
        }
        self.engine
            .sources_ready
            .store(self.merger.seen_all_sources(), Ordering::Relaxed);
    }

    /// `kubelet_desired_pods`, `kubelet_active_pods`, `kubelet_mirror_pods`,
    /// `kubelet_working_pods` and `kubelet_managed_ephemeral_containers`, as Go's
    /// housekeeping sets them (every label combination of `working_pods`, zeros included).
    fn record_pod_counts(&self, runtime_only: &[crate::runtime::PodRef]) {
        let m = crate::metrics::global();
        let label = |b: bool| if b { "true" } else { "false" };
        let (desired, ephemeral) = {
            let pods = self.engine.pods();
            let list = pods.pods();
            let ephemeral: usize = list
                .iter()
                .filter_map(|p| p.spec.as_ref())
                .map(|s| s.ephemeral_containers.as_ref().map_or(0, Vec::len))
                .sum();
            let desired: Vec<(String, bool)> = list
                .iter()
                .map(|p| (pod::uid(p).to_string(), pod::is_static(p)))
                .collect();
            (desired, ephemeral)
        };
        for st in [true, false] {
            let n = desired.iter().filter(|(_, s)| *s == st).count();
            m.desired_pods.set(&[label(st)], n as f64);
            let active = self
                .admitted
                .list
                .iter()
                .filter(|p| pod::is_static(p) == st)
                .count();
            m.active_pods.set(&[label(st)], active as f64);
        }
        let mirrors = self
            .admitted
            .list
            .iter()
            .filter(|p| pod::is_static(p))
            .count();
        m.mirror_pods.set(&[], mirrors as f64);
        m.managed_ephemeral_containers.set(&[], ephemeral as f64);
        let mut counts: std::collections::BTreeMap<(&str, &str, &str), f64> = Default::default();
        for lifecycle in ["sync", "terminating", "terminated"] {
            for config in ["desired", "orphan", "runtime_only"] {
                for st in ["true", "false"] {
                    counts.insert((lifecycle, config, st), 0.0);
                }
            }
        }
        for (uid, state, is_static) in self.workers.states() {
            let lifecycle = match state {
                WorkerState::Syncing => "sync",
                WorkerState::Terminating => "terminating",
                WorkerState::Terminated | WorkerState::Finished => "terminated",
            };
            let config = if desired.iter().any(|(u, _)| *u == uid) {
                "desired"
            } else {
                "orphan"
            };
            *counts
                .entry((lifecycle, config, label(is_static)))
                .or_default() += 1.0;
        }
        *counts.entry(("sync", "runtime_only", "false")).or_default() += runtime_only.len() as f64;
        m.working_pods.replace(
            counts
                .into_iter()
                .map(|((l, c, s), v)| (vec![l.to_string(), c.to_string(), s.to_string()], v))
                .collect(),
        );
    }

    fn dispatch(&self, p: Arc<Pod>, kind: WorkKind) {
        self.workers.update_pod(&self.engine, p, kind);
    }

    fn node_info(&self) -> NodeInfo {
        let node = self.engine.node_lister.as_ref().and_then(|l| l.node());
        NodeInfo::new(
            &self.engine.config.node_name,
            node.as_deref(),
            &self.engine.config.node_labels,
            self.engine.cm.allocatable(),
        )
    }

    async fn handle_additions(&mut self, mut pods: Vec<Arc<Pod>>) {
        pods.sort_by(|a, b| {
            let key = |p: &Pod| (p.metadata.creation_timestamp.clone(), pod::full_name(p));
            key(a).cmp(&key(b))
        });
        let node = self.node_info();
        // Every pod of the batch is known before the first is admitted: the CPU manager's
        // stale-state sweep must not take the CPUs of a pod admitted later in the batch.
        for p in &pods {
            self.engine.pods_mut().upsert(p.clone());
        }
        for p in pods {
            if pod::is_mirror(&p) {
                continue;
            }
            let uid = pod::uid(&p).to_string();
            if !self.admitted.contains(&uid) {
                if let Some((reason, message)) = self.admit(&p, &node).await {
                    self.reject(&p, &reason, &message);
                    continue;
                }
                self.admitted.insert(p.clone());
            }
            self.dispatch(p, WorkKind::Sync);
        }
    }

    async fn admit(&self, p: &Pod, node: &NodeInfo) -> Option<(String, String)> {
        // The device plugins' resources as the device manager has them (a pod already
        // holding devices sees at least what it holds: Go's `sanitizeNodeAllocatable`).
        let devices = self
            .engine
            .device_manager
            .admission_allocatable(pod::uid(p));
        let with_devices;
        let node = if devices.is_empty() {
            node
        } else {
            let mut n = node.clone();
            n.allocatable.extend(devices);
            with_devices = n;
            &with_devices
        };
        let attrs = AdmitAttributes {
            pod: p,
            other_pods: &self.admitted.list,
            requested: &self.admitted.requested,
            node,
        };
        let rejected = self
            .engine
            .admit_handlers
            .iter()
            .find_map(|h| match h.admit(&attrs) {
                AdmitResult::Admit => None,
                AdmitResult::Reject { reason, message } => Some((reason, message)),
            });
        if rejected.is_some() {
            return rejected;
        }
        // Go's topology manager admission: the pod's resources aligned and allocated, once
        // everything else admits it (the device, CPU and memory managers first free what
        // finished pods held). The merger's view, not the engine's flag: the update being handled may
        // be the one that makes every source seen (Go's `AllReady` is true by the time it
        // admits). Only the static CPU policy, the aligning topology policies and held
        // devices keep per-pod state; with none of them, the active pods (a pass over every
        // pod) are not read at all.
        let config = &self.engine.config;
        let keeps_state = config.cpu_manager.policy != CpuManagerPolicy::None
            || config.memory_manager.policy != MemoryManagerPolicy::None
            || config.topology_manager_policy != TopologyPolicy::None
            || self.engine.device_manager.holds_devices();
        let active =
            (keeps_state && self.merger.seen_all_sources()).then(|| self.engine.active_pods());
        self.engine.cpu_manager.release_stale(p, active.as_deref());
        self.engine
            .memory_manager
            .release_stale(p, active.as_deref());
        self.engine.device_manager.release_stale(active.as_deref());
        if let Some(active) = &active {
            let keep = active.iter().map(|a| pod::uid(a)).collect();
            self.engine.topology.retain_pods(&keep);
        }
        let admitted = self.engine.topology.admit(p);
        // What the release and the allocation changed is on disk now, as Go writes on every
        // change (a restart then never finds memory or CPUs of pods already gone); a write
        // that fails is retried before the next container starts.
        if let Err(e) = self.engine.memory_manager.persist().await {
            tracing::warn!(error = %e, "memory manager: writing the state file failed");
        }
        if let Err(e) = self.engine.cpu_manager.persist().await {
            tracing::warn!(error = %e, "cpu manager: writing the state file failed");
        }
        if let Err(rejected) = admitted {
            return Some(rejected);
        }
        // The device plugins' `Allocate` calls for the devices just chosen (Go makes them
        // inside its admission, as here: the loop waits for them).
        self.engine
            .device_manager
            .allocate_pending(p)
            .await
            .err()
            .map(|e| {
                (
                    "UnexpectedAdmissionError".to_string(),
                    format!("Allocate failed due to {e}, which is unexpected"),
                )
            })
    }

    fn reject(&self, p: &Arc<Pod>, reason: &str, message: &str) {
        tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), reason, message, "pod rejected at admission");
        self.engine.sink.record_event(Event::for_pod(
            p,
            None,
            EventType::Warning,
            reason,
            message.to_string(),
        ));
        let status = PodStatus {
            phase: Some("Failed".into()),
            reason: Some(reason.to_string()),
            message: Some(format!("Pod was rejected: {message}")),
            qos_class: Some(crate::qos::pod_qos(p).as_str().to_string()),
            start_time: now_time(),
            ..Default::default()
        };
        self.engine.status.set(p, status);
    }

    /// A probe result changed: sync the pod so its status and actions follow (Go's
    /// `handleProbeSync`).
    fn handle_probe_update(&self, uid: &str) {
        let Some(p) = self.engine.pods().get(uid) else {
            return;
        };
        if self.workers.state(uid).is_some() {
            self.dispatch(p, WorkKind::Sync);
        }
    }

    /// The eviction manager evicts a pod (or the node shutdown manager stops it): its worker
    /// kills it with the grace period given and fails it with the request's reason (`Evicted`,
    /// `Terminated`) and message (Go's `killPodNow` with the manager's status).
    fn handle_eviction(&self, r: EvictionRequest) {
        let Some(p) = self.engine.pods().get(&r.uid) else {
            return;
        };
        if !self.admitted.contains(&r.uid) && self.workers.state(&r.uid).is_none() {
            return;
        }
        self.dispatch(
            p,
            WorkKind::Kill {
                grace_override: Some(r.grace_seconds),
                removed: false,
                failure: Some(crate::status::WaitingReason {
                    reason: r.reason.to_string(),
                    message: r.message,
                }),
            },
        );
    }

    fn handle_pleg_event(&self, e: pleg::Event) {
        let Some(p) = self.engine.pods().get(&e.pod_uid) else {
            return;
        };
        if self.admitted.contains(&e.pod_uid) || self.workers.state(&e.pod_uid).is_some() {
            self.dispatch(p, WorkKind::Sync);
        }
    }

    async fn housekeeping(&mut self) {
        if !self.engine.sources_ready.load(Ordering::Relaxed) {
            return;
        }
        let engine = self.engine.clone();
        // Terminal pods no longer count against admission.
        let terminal: Vec<String> = self
            .admitted
            .list
            .iter()
            .map(|p| pod::uid(p).to_string())
            .filter(|uid| {
                engine.status.is_terminal(uid)
                    && matches!(
                        self.workers.state(uid),
                        Some(WorkerState::Terminated) | Some(WorkerState::Finished)
                    )
            })
            .collect();
        for uid in terminal {
            self.admitted.remove(&uid);
        }
        // Orphans: pods in the runtime that no source wants and no worker handles.
        let orphans = engine
            .runtime_state
            .pods_except(|uid| engine.pods().contains(uid) || self.workers.state(uid).is_some());
        self.record_pod_counts(&orphans);
        for r in &orphans {
            crate::metrics::global()
                .orphaned_runtime_pods
                .inc_labels(&[]);
            tracing::info!(pod = %r.full_name(), uid = %r.uid, "killing orphaned pod found in the runtime");
            self.dispatch(
                Arc::new(orphan_pod(r)),
                WorkKind::Kill {
                    grace_override: Some(ORPHAN_GRACE_SECONDS),
                    removed: true,
                    failure: None,
                },
            );
        }
        // Forget finished workers of pods that are gone (after the orphan check, so a pod
        // cleaned up just now is not taken for an orphan by a relist from before).
        let gone = {
            let pods = engine.pods();
            self.workers.prune_finished(&|uid| pods.contains(uid))
        };
        for uid in gone {
            engine.status.remove(&uid);
            self.admitted.remove(&uid);
        }
        let now = tokio::time::Instant::now();
        if self
            .resources_scanned
            .is_none_or(|t| now.duration_since(t) >= LEFTOVER_RESOURCES_PERIOD)
        {
            self.resources_scanned = Some(now);
            self.remove_leftover_resources().await;
        }
        // Pod directories of pods nobody knows (never one with a mount left below it).
        engine
            .volumes
            .cleanup_orphans(|uid| {
                engine.pods().contains(uid)
                    || self.workers.state(uid).is_some()
                    || engine.runtime_state.has_pod(uid)
            })
            .await;
        // Statuses of pods that are gone and have no worker.
        for uid in engine.status.uids() {
            if !engine.pods().contains(&uid) && self.workers.state(&uid).is_none() {
                engine.status.remove(&uid);
            }
        }
        engine.crash_backoff().gc(now_unix_nanos());
        engine.images.gc();
    }

    /// Removes pod-level resources (pod cgroups) of pods no source, worker or runtime pod owns.
    async fn remove_leftover_resources(&self) {
        let engine = &self.engine;
        match engine.cm.pods_with_resources().await {
            Ok(uids) => {
                for uid in uids {
                    if engine.pods().contains(&uid)
                        || self.workers.state(&uid).is_some()
                        || engine.runtime_state.has_pod(&uid)
                    {
                        continue;
                    }
                    if let Err(e) = engine.cm.remove_pod_resources(&uid).await {
                        tracing::warn!(uid, error = %e, "removing orphaned pod resources failed");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing pod resources failed"),
        }
    }
}

fn orphan_pod(r: &PodRef) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(r.name.clone()),
            namespace: Some(r.namespace.clone()),
            uid: Some(r.uid.clone()),
            ..Default::default()
        },
        ..Default::default()
    }
}
