//! The prober manager (Go's `pkg/kubelet/prober`): liveness, readiness and startup probes.
//!
//! # Workers
//! One task per (pod, container, probe type), started by the pod's worker when it syncs a pod
//! whose containers declare probes ([`ProberManager::ensure_pod`]), and stopped when the pod
//! starts terminating (liveness and startup; [`ProberManager::stop_liveness_and_startup`])
//! or has terminated (all; [`ProberManager::remove_pod`]). Workers never outlive their pod
//! and all end on shutdown.
//!
//! Each period (`periodSeconds`, default 10s) a worker reads the pod's latest status:
//! ```text
//!   no status / container not created ───────────────► wait for the next period
//!   container id changed ──► reset: result = initial, counters 0, hold released
//!   on hold (liveness/startup failed) ─────────────────► wait for a new container
//!   container not running ──► result = Failure; stop when it will not restart
//!   not started yet (startup probe pending), type ≠ startup ─► wait
//!   type = startup and already started ────────────────► wait (startup probes stop)
//!   within initialDelaySeconds of the container start ─► wait
//!   probe ──► same result `successThreshold` (success) or `failureThreshold` (failure)
//!            times in a row ──► publish; a liveness/startup failure puts the worker on hold
//! ```
//! Initial results: readiness Failure, liveness Success, startup Unknown. Results are kept by
//! container id ([`ProbeLookup`]); status generation reads readiness/startup
//! (`ready`, `started`), the sync's action computation reads liveness/startup failures
//! (kill and restart with reason). A changed result asks the sync loop to sync the pod.
//!
//! # Metrics
//! `prober_probe_total{probe_type, result, container, pod, namespace, pod_uid}` as in Go,
//! readable with [`ProberManager::probe_counts`] and rendered by [`render_probe_metrics`].

pub mod probe;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::pod;
use crate::runtime::ContainerRuntime;
use crate::sink::StatusSink;
use crate::status::StatusManager;

pub use crate::probe_results::{ProbeLookup, ProbeResult, ProbeType};

/// Labels of one `prober_probe_total` series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeCountKey {
    /// "Liveness", "Readiness" or "Startup".
    pub probe_type: &'static str,
    /// "successful", "failed" or "unknown".
    pub result: &'static str,
    /// Container name.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod uid.
    pub pod_uid: String,
}

type WorkerKey = (String, String, ProbeType);

/// Runs and tracks probe workers. See the module docs.
pub struct ProberManager {
    runtime: Arc<dyn ContainerRuntime>,
    status: Arc<StatusManager>,
    sink: Arc<dyn StatusSink>,
    http: Option<reqwest::Client>,
    results: Mutex<HashMap<(String, ProbeType), ProbeResult>>,
    workers: Mutex<HashMap<WorkerKey, CancellationToken>>,
    counts: Mutex<BTreeMap<ProbeCountKey, u64>>,
    updates: mpsc::Sender<String>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl std::fmt::Debug for ProberManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProberManager").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Containers that are probed: app containers and restartable init containers (sidecars).
pub(crate) fn probed_containers(p: &Pod) -> impl Iterator<Item = &Container> {
    let spec = p.spec.as_ref();
    let apps = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]);
    let inits = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    inits
        .iter()
        .filter(|c| crate::pod::is_restartable_init(c))
        .chain(apps.iter())
}

impl ProberManager {
    /// A manager whose workers read statuses from `status`, exec through `runtime`, record
    /// events in `sink` and send the uid of a pod whose results changed to `updates`.
    pub(crate) fn new(
        runtime: Arc<dyn ContainerRuntime>,
        status: Arc<StatusManager>,
        sink: Arc<dyn StatusSink>,
        updates: mpsc::Sender<String>,
    ) -> Self {
        let http = match probe::http_client() {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!(error = %e, "HTTP probes are unavailable");
                None
            }
        };
        ProberManager {
            runtime,
            status,
            sink,
            http,
            results: Mutex::new(HashMap::new()),
            workers: Mutex::new(HashMap::new()),
            counts: Mutex::new(BTreeMap::new()),
            updates,
            shutdown: CancellationToken::new(),
            tracker: TaskTracker::new(),
        }
    }

    /// Starts the workers the pod's probes need and that are not running yet.
    pub fn ensure_pod(self: &Arc<Self>, p: &Arc<Pod>) {
        if self.shutdown.is_cancelled() {
            return;
        }
        let uid = pod::uid(p);
        for c in probed_containers(p) {
            for kind in ProbeType::ALL {
                let Some(probe) = kind.of(c) else { continue };
                let key = (uid.to_string(), c.name.clone(), kind);
                let mut workers = lock(&self.workers);
                if workers.contains_key(&key) {
                    continue;
                }
                let token = self.shutdown.child_token();
                workers.insert(key, token.clone());
                drop(workers);
                let w =
                    worker::Worker::new(self.clone(), p.clone(), c.clone(), kind, probe.clone());
                self.tracker.spawn(w.run(token));
            }
        }
    }

    fn stop_where(&self, pred: impl Fn(&WorkerKey) -> bool) {
        lock(&self.workers).retain(|k, token| {
            if pred(k) {
                token.cancel();
                false
            } else {
                true
            }
        });
    }

    /// Stops the pod's liveness and startup workers (it is terminating; readiness goes on).
    pub fn stop_liveness_and_startup(&self, uid: &str) {
        self.stop_where(|(u, _, kind)| u == uid && *kind != ProbeType::Readiness);
    }

    /// Stops every worker of the pod and forgets its metrics.
    pub fn remove_pod(&self, uid: &str) {
        self.stop_where(|(u, _, _)| u == uid);
        lock(&self.counts).retain(|k, _| k.pod_uid != uid);
    }

    /// Number of running workers (for tests and debugging).
    pub fn worker_count(&self) -> usize {
        lock(&self.workers).len()
    }

    /// Stops all workers and waits for them.
    pub(crate) async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// A snapshot of `prober_probe_total`.
    pub fn probe_counts(&self) -> Vec<(ProbeCountKey, u64)> {
        lock(&self.counts)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    fn count(&self, key: ProbeCountKey) {
        *lock(&self.counts).entry(key).or_insert(0) += 1;
    }

    /// Publishes a result; when it changed, asks the sync loop to sync the pod.
    fn set_result(&self, uid: &str, container_id: &str, kind: ProbeType, r: ProbeResult) {
        let old = lock(&self.results).insert((container_id.to_string(), kind), r);
        if old != Some(r) {
            // Bounded and never blocking: a full queue means syncs are pending anyway.
            let _ = self.updates.try_send(uid.to_string());
        }
    }

    fn forget_result(&self, container_id: &str, kind: ProbeType) {
        lock(&self.results).remove(&(container_id.to_string(), kind));
    }
}

impl ProbeLookup for ProberManager {
    fn result(&self, container_id: &str, kind: ProbeType) -> Option<ProbeResult> {
        lock(&self.results)
            .get(&(container_id.to_string(), kind))
            .copied()
    }
}

/// Renders counts in the Prometheus text format (`/metrics/probes`).
pub fn render_probe_metrics(counts: &[(ProbeCountKey, u64)]) -> String {
    let mut out = String::from(
        "# HELP prober_probe_total [ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.\n# TYPE prober_probe_total counter\n",
    );
    let esc = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    for (k, v) in counts {
        let _ = writeln!(
            out,
            "prober_probe_total{{container=\"{}\",namespace=\"{}\",pod=\"{}\",pod_uid=\"{}\",probe_type=\"{}\",result=\"{}\"}} {v}",
            esc(&k.container),
            esc(&k.namespace),
            esc(&k.pod),
            esc(&k.pod_uid),
            k.probe_type,
            k.result
        );
    }
    out
}

impl ProberManager {
    /// The HTTP client shared with lifecycle hooks.
    pub(crate) fn http(&self) -> Option<&reqwest::Client> {
        self.http.as_ref()
    }
}
