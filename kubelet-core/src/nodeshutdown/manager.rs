//! The graceful node shutdown manager's task (see the module docs of
//! [`crate::nodeshutdown`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tokio_util::sync::CancellationToken;

use super::groups::{group_pods, pod_grace_seconds, ShutdownConfig};
use super::{ShutdownInhibitor, ShutdownState};
use crate::pod;

/// How often the manager checks whether a group's pods have stopped.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(500);

/// What the manager needs from the kubelet.
#[async_trait::async_trait]
pub(crate) trait ShutdownHost: Send + Sync {
    /// Pods that are running or may still run.
    fn active_pods(&self) -> Vec<Arc<Pod>>;
    /// Asks the pod's worker to stop it with this grace and fail it for the shutdown; false
    /// when the request could not be queued.
    async fn kill(&self, pod: &Arc<Pod>, grace_seconds: i64) -> bool;
    /// Whether the pod's containers are stopped (or its worker is gone).
    fn pod_stopped(&self, uid: &str) -> bool;
    /// The shutdown state changed: the node status should say so now.
    fn state_changed(&self);
}

/// The manager: its configuration, the host's inhibitor and the shared state.
pub(crate) struct NodeShutdownManager {
    config: ShutdownConfig,
    inhibitor: Arc<dyn ShutdownInhibitor>,
    state: Arc<ShutdownState>,
}

impl NodeShutdownManager {
    pub(crate) fn new(
        config: ShutdownConfig,
        inhibitor: Arc<dyn ShutdownInhibitor>,
        state: Arc<ShutdownState>,
    ) -> Self {
        NodeShutdownManager {
            config,
            inhibitor,
            state,
        }
    }

    /// Runs until `shutdown`; returns at once when graceful shutdown is off or cannot start.
    pub(crate) async fn run(&self, host: &dyn ShutdownHost, shutdown: CancellationToken) {
        if self.config.groups().is_empty() {
            return;
        }
        let period = self.config.period();
        let started = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = self.inhibitor.start(period) => r,
        };
        if let Err(e) = started {
            // Go: the shutdown manager is not critical; the kubelet runs without it.
            tracing::error!(error = %e, "Failed to start node shutdown manager");
            return;
        }
        tracing::info!(
            period_seconds = period.as_secs(),
            groups = ?self.config.groups(),
            "node shutdown manager started: holding shutdown back with a delay inhibitor lock"
        );
        loop {
            let event = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = self.inhibitor.next_event() => e,
            };
            match event {
                None => {
                    tracing::warn!("node shutdown manager: the shutdown signal watch ended; graceful node shutdown is off");
                    return;
                }
                Some(true) => {
                    tracing::info!("node shutdown manager: shutdown begins");
                    self.state.set(true);
                    host.state_changed();
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = self.stop_pods(host) => {}
                    }
                    match self.inhibitor.release().await {
                        Ok(()) => tracing::info!("node shutdown manager: pods stopped, inhibitor lock released; the node will shut down shortly"),
                        Err(e) => tracing::error!(error = %e, "node shutdown manager: releasing the inhibitor lock failed"),
                    }
                }
                Some(false) => {
                    tracing::info!("node shutdown manager: shutdown cancelled");
                    self.state.set(false);
                    host.state_changed();
                    if let Err(e) = self.inhibitor.acquire().await {
                        tracing::error!(error = %e, "node shutdown manager: taking the inhibitor lock again failed");
                    }
                }
            }
        }
    }

    /// Go's `processShutdownEvent`: the groups one after the other, each within its period.
    /// Then, unlike Go, pods still stopping get what is left of the whole period (logind waits
    /// that long anyway): a group's period and its pods' grace end together, and the lock
    /// released at that instant would let the host stop them before their SIGKILL lands.
    async fn stop_pods(&self, host: &dyn ShutdownHost) {
        let deadline = tokio::time::Instant::now() + self.config.period();
        let groups = group_pods(&self.config.groups(), host.active_pods());
        let mut killed: Vec<Arc<Pod>> = Vec::new();
        for (group, pods) in groups {
            if pods.is_empty() {
                continue;
            }
            for p in &pods {
                let grace = pod_grace_seconds(p, group.grace_seconds);
                tracing::info!(pod = %pod::full_name(p), uid = pod::uid(p), grace_seconds = grace, priority = group.priority, "node shutdown manager: killing pod");
                if !host.kill(p, grace).await {
                    tracing::warn!(pod = %pod::full_name(p), "node shutdown manager: could not ask for the pod to be killed");
                }
            }
            let limit = Duration::from_secs(u64::try_from(group.grace_seconds).unwrap_or(0));
            if !wait_stopped(host, &pods, tokio::time::Instant::now() + limit).await {
                tracing::info!(
                    grace_seconds = group.grace_seconds,
                    priority = group.priority,
                    "node shutdown manager: pod killing timed out"
                );
            }
            killed.extend(pods);
        }
        wait_stopped(host, &killed, deadline).await;
    }
}

/// Waits until every one of `pods` is stopped (true) or `deadline` (false), checking every
/// [`STOP_POLL`].
async fn wait_stopped(
    host: &dyn ShutdownHost,
    pods: &[Arc<Pod>],
    deadline: tokio::time::Instant,
) -> bool {
    let stopped = || pods.iter().all(|p| host.pod_stopped(pod::uid(p)));
    tokio::time::timeout_at(deadline, async {
        while !stopped() {
            tokio::time::sleep(STOP_POLL).await;
        }
    })
    .await
    .is_ok()
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
