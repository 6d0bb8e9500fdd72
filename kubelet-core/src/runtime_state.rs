//! What the engine last learnt from the runtime: its name, whether it and its network are
//! ready (polled every 5s by [`run`]), the host's DNS settings for pods, and which pods the
//! last PLEG relist saw (for orphan cleanup) and which of them still had containers (the
//! eviction manager's cleanup wait). Written by the runtime-state poller and the PLEG, read
//! by the sync loop, the sync step, the eviction manager and the handle; every lock is held
//! only for a read or a write, never across an `.await`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::runtime::{ContainerRuntime, DnsConfig, PodRef, RuntimeHandler};

/// How often the runtime's readiness is polled.
const POLL_PERIOD: Duration = Duration::from_secs(5);

/// See the module docs.
#[derive(Debug)]
pub(crate) struct RuntimeState {
    name: RwLock<String>,
    ready: AtomicBool,
    network_ready: AtomicBool,
    host_dns: RwLock<DnsConfig>,
    /// The runtime handlers of the last successful status poll.
    handlers: RwLock<Vec<RuntimeHandler>>,
    /// Pods seen in the runtime at the last relist.
    pods: Mutex<SeenPods>,
}

/// The pods a relist saw: every pod with a sandbox or a container, and which had containers.
#[derive(Debug, Default)]
pub(crate) struct SeenPods {
    /// Every pod seen, by uid.
    pub pods: HashMap<String, PodRef>,
    /// Uids of the pods that had at least one container (in any state).
    pub with_containers: HashSet<String>,
}

impl Default for RuntimeState {
    fn default() -> Self {
        RuntimeState {
            name: RwLock::new("runtime".to_string()),
            ready: AtomicBool::new(false),
            network_ready: AtomicBool::new(false),
            host_dns: RwLock::new(DnsConfig::default()),
            handlers: RwLock::new(Vec::new()),
            pods: Mutex::new(SeenPods::default()),
        }
    }
}

impl RuntimeState {
    /// The runtime's name ("containerd"), for container ids in statuses.
    pub fn name(&self) -> String {
        self.name.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the runtime reported itself ready at the last poll.
    pub fn ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Whether the pod network was ready at the last poll.
    pub fn network_ready(&self) -> bool {
        self.network_ready.load(Ordering::Relaxed)
    }

    /// The host's resolv.conf settings (read once at start).
    pub fn host_dns(&self) -> DnsConfig {
        self.host_dns
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The runtime handlers the runtime reported at the last poll (empty: it did not say).
    pub fn handlers(&self) -> Vec<RuntimeHandler> {
        self.handlers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the host's resolv.conf settings.
    pub fn set_host_dns(&self, dns: DnsConfig) {
        *self.host_dns.write().unwrap_or_else(|e| e.into_inner()) = dns;
    }

    /// Records the pods the last relist saw.
    pub fn set_pods(&self, pods: SeenPods) {
        *self.pods.lock().unwrap_or_else(|e| e.into_inner()) = pods;
    }

    /// Pods seen at the last relist for which `wanted` is false.
    pub fn pods_except(&self, wanted: impl Fn(&str) -> bool) -> Vec<PodRef> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pods
            .values()
            .filter(|r| !wanted(&r.uid))
            .cloned()
            .collect()
    }

    /// Whether the last relist saw the pod.
    pub fn has_pod(&self, uid: &str) -> bool {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pods
            .contains_key(uid)
    }

    /// Whether the last relist saw a container (in any state) of the pod: Go's
    /// `PodResourcesAreReclaimed` waits for none to be left.
    pub fn has_containers(&self, uid: &str) -> bool {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .with_containers
            .contains(uid)
    }

    /// Asks the runtime for its version (logged, name kept) and readiness.
    pub async fn init(&self, runtime: &dyn ContainerRuntime) {
        match runtime.version().await {
            Ok(v) => {
                tracing::info!(runtime = %v.runtime_name, version = %v.runtime_version, api = %v.runtime_api_version, "container runtime");
                *self.name.write().unwrap_or_else(|e| e.into_inner()) = v.runtime_name;
            }
            Err(e) => tracing::warn!(error = %e, "container runtime version unavailable"),
        }
        self.refresh(runtime).await;
    }

    /// Polls the runtime's readiness once.
    pub async fn refresh(&self, runtime: &dyn ContainerRuntime) {
        match runtime.status().await {
            Ok(s) => {
                if !s.runtime_ready || !s.network_ready {
                    tracing::warn!(runtime_ready = s.runtime_ready, network_ready = s.network_ready, message = %s.message, "container runtime not ready");
                }
                self.ready.store(s.runtime_ready, Ordering::Relaxed);
                self.network_ready.store(s.network_ready, Ordering::Relaxed);
                *self.handlers.write().unwrap_or_else(|e| e.into_inner()) = s.handlers;
            }
            Err(e) => {
                tracing::warn!(error = %e, "container runtime status check failed");
                self.ready.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// Polls the runtime's readiness every 5s until shutdown.
pub(crate) async fn run(
    state: &RuntimeState,
    runtime: &dyn ContainerRuntime,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(POLL_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => state.refresh(runtime).await,
        }
    }
}
