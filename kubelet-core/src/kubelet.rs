//! The kubelet engine: its construction path ([`Kubelet::builder`]), the sync loop
//! ([`Kubelet::run`]) and a handle for reading its state ([`KubeletHandle`]).
//!
//! # Tasks
//! `run` starts, under one cancellation token: every pod source, the status publisher, the
//! runtime-state poller (every 5s), the container garbage collector (every
//! `container_gc_period`, see the `gc` module), the PLEG, and the sync loop itself. The sync loop is one
//! task that selects over merged source updates, PLEG events and the housekeeping tick; it
//! never waits on the runtime, it hands work to pod workers ([`crate::pod_workers`]). While
//! the runtime reports not ready, the loop pauses with a backoff from 100ms to 5s.
//!
//! # Handlers (Go's `HandlePod*`)
//! - **Add**: pods are admitted in creation-time order ([`crate::admission`]); a rejected pod
//!   gets a `Failed` status and never starts; an admitted one gets a worker.
//! - **Update**: the pod's worker syncs the new spec.
//! - **Delete** (deletion timestamp set): the worker terminates it with its grace period.
//! - **Remove**: the pod left its source: the worker terminates it and cleans up.
//! - **PLEG event**: the pod's worker re-syncs.
//! - **Housekeeping** (every 2s, only once all sources were seen): forgets finished workers,
//!   kills and removes pods found in the runtime that no source wants (orphans), removes
//!   leftover pod-level resources, frees the admission resources of terminal pods, and
//!   garbage-collects backoff entries.
//!
//! On shutdown the kubelet stops its tasks and returns; pods keep running.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admission::{
    AdmitAttributes, AdmitHandler, AdmitResult, NodeInfo, PredicateAdmitHandler, RequestedResources,
};
use crate::clock::{now_time, now_unix_nanos};
use crate::cm::ContainerManager;
use crate::config::Config;
use crate::dns::parse_resolv_conf;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::objects::{ObjectStore, StandaloneObjectStore};
use crate::pleg::{self, Pleg};
use crate::pod;
use crate::pod_workers::{PodWorkers, WorkKind, WorkerState};
use crate::podconfig::PodConfigMerger;
use crate::runtime::{ContainerRuntime, PodRef};
use crate::sink::{Event, EventType, NoopStatusSink, StatusSink};
use crate::source::{PodOperation, PodSource, PodUpdate};

/// Go's grace period for pods found in the runtime that no source wants.
const ORPHAN_GRACE_SECONDS: i64 = 2;
/// Capacity of the PLEG → sync loop channel.
const PLEG_CHANNEL_CAPACITY: usize = 1000;

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
        let cm = self
            .container_manager
            .ok_or(Error::MissingComponent("container manager"))?;
        let sink = self.status_sink.unwrap_or_else(|| Arc::new(NoopStatusSink));
        let mut handlers: Vec<Arc<dyn AdmitHandler>> = vec![Arc::new(PredicateAdmitHandler)];
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

/// The kubelet engine. Build it with [`Kubelet::builder`], then [`Kubelet::run`] it.
pub struct Kubelet {
    handle: KubeletHandle,
    sources: Vec<Arc<dyn PodSource>>,
    workers_shutdown: CancellationToken,
}

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
struct SyncLoop {
    engine: Arc<Engine>,
    workers: Arc<PodWorkers>,
    merger: PodConfigMerger,
    admitted: Admitted,
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
        engine.runtime_state.init(engine.runtime.as_ref()).await;
        if !engine.config.resolv_conf.as_os_str().is_empty() {
            engine
                .runtime_state
                .set_host_dns(read_resolv_conf(&engine.config.resolv_conf).await);
        }
        let tasks = TaskTracker::new();
        let child = shutdown.child_token();

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
        let (pleg_tx, pleg_rx) = mpsc::channel(PLEG_CHANNEL_CAPACITY);
        tasks.spawn(Pleg::new(engine.clone()).run(pleg_tx, child.clone()));

        let mut sync_loop = SyncLoop {
            engine: engine.clone(),
            workers: self.handle.workers.clone(),
            merger: PodConfigMerger::new(names),
            admitted: Admitted::default(),
        };
        tracing::info!(node = %engine.config.node_name, "kubelet sync loop starting");
        let probe_rx = engine
            .probe_updates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        sync_loop.run(rx, pleg_rx, probe_rx, &child).await;

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
async fn recv_opt<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
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

impl SyncLoop {
    async fn run(
        &mut self,
        mut updates: mpsc::Receiver<PodUpdate>,
        mut pleg: mpsc::Receiver<pleg::Event>,
        mut probes: Option<mpsc::Receiver<String>>,
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
                    Some(u) => self.handle_source_update(u),
                    None => sources_open = false,
                },
                Some(e) = pleg.recv() => self.handle_pleg_event(e),
                Some(uid) = recv_opt(&mut probes) => self.handle_probe_update(&uid),
                _ = housekeeping.tick() => self.housekeeping().await,
            }
        }
    }

    fn handle_source_update(&mut self, update: PodUpdate) {
        for inc in self.merger.merge(update) {
            tracing::debug!(op = ?inc.op, source = %inc.source, pods = inc.pods.len(), "pod config update");
            let pods = inc.pods;
            match inc.op {
                PodOperation::Add => self.handle_additions(pods),
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
                        self.engine.pods_mut().upsert(p);
                    }
                }
            }
        }
        self.engine
            .sources_ready
            .store(self.merger.seen_all_sources(), Ordering::Relaxed);
    }

    fn dispatch(&self, p: Arc<Pod>, kind: WorkKind) {
        self.workers.update_pod(&self.engine, p, kind);
    }

    fn node_info(&self) -> NodeInfo {
        NodeInfo {
            name: self.engine.config.node_name.clone(),
            labels: self.engine.config.node_labels.clone(),
            allocatable: self.engine.cm.allocatable(),
        }
    }

    fn handle_additions(&mut self, mut pods: Vec<Arc<Pod>>) {
        pods.sort_by(|a, b| {
            let key = |p: &Pod| (p.metadata.creation_timestamp.clone(), pod::full_name(p));
            key(a).cmp(&key(b))
        });
        let node = self.node_info();
        for p in pods {
            self.engine.pods_mut().upsert(p.clone());
            if pod::is_mirror(&p) {
                continue;
            }
            let uid = pod::uid(&p).to_string();
            if !self.admitted.contains(&uid) {
                if let Some((reason, message)) = self.admit(&p, &node) {
                    self.reject(&p, &reason, &message);
                    continue;
                }
                self.admitted.insert(p.clone());
            }
            self.dispatch(p, WorkKind::Sync);
        }
    }

    fn admit(&self, p: &Pod, node: &NodeInfo) -> Option<(String, String)> {
        let attrs = AdmitAttributes {
            pod: p,
            other_pods: &self.admitted.list,
            requested: &self.admitted.requested,
            node,
        };
        self.engine
            .admit_handlers
            .iter()
            .find_map(|h| match h.admit(&attrs) {
                AdmitResult::Admit => None,
                AdmitResult::Reject { reason, message } => Some((reason, message)),
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
        for r in &orphans {
            tracing::info!(pod = %r.full_name(), uid = %r.uid, "killing orphaned pod found in the runtime");
            self.dispatch(
                Arc::new(orphan_pod(r)),
                WorkKind::Kill {
                    grace_override: Some(ORPHAN_GRACE_SECONDS),
                    removed: true,
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
        // Leftover pod-level resources.
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

/// Read access to a running kubelet: desired pods, their statuses, health.
#[derive(Clone)]
pub struct KubeletHandle {
    engine: Arc<Engine>,
    workers: Arc<PodWorkers>,
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

    /// The desired pods (from all sources), excluding mirror pods.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.engine.pods().pods()
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
