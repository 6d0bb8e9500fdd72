//! A pod's state in the runtime: its sandboxes and containers, gathered with the runtime's
//! list and status calls (Go's `kubecontainer.PodStatus` / `GetPodStatus`).

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::pod;
use crate::runtime::{
    ContainerRuntime, ContainerState, ContainerStatus, ContainerSummary, ListFilter, RuntimeError,
    RuntimeResult, SandboxStatus, SandboxSummary,
};

/// Sandboxes and containers of one pod, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRuntimeStatus {
    /// Pod uid.
    pub uid: String,
    /// Sandboxes, newest first.
    pub sandboxes: Vec<SandboxStatus>,
    /// Containers (all attempts), newest first.
    pub containers: Vec<ContainerStatus>,
}

impl PodRuntimeStatus {
    /// The newest container with this name.
    pub fn latest(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers.iter().find(|c| c.summary.name == name)
    }

    /// The second newest container with this name (the previous attempt).
    pub fn previous(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers
            .iter()
            .filter(|c| c.summary.name == name)
            .nth(1)
    }

    /// Containers that are running (or in an unknown state, which may still run).
    pub fn running_containers(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.containers.iter().filter(|c| {
            matches!(
                c.summary.state,
                ContainerState::Running | ContainerState::Unknown
            )
        })
    }

    /// The pod's IPs from its newest sandbox.
    pub fn pod_ips(&self) -> Vec<String> {
        self.sandboxes
            .first()
            .map(|s| {
                s.ip.iter()
                    .chain(s.additional_ips.iter())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// What [`list_all`] found.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub sandboxes: Vec<SandboxSummary>,
    pub containers: Vec<ContainerSummary>,
    /// Pods left out: their own listing was too large as well.
    pub skipped: Vec<String>,
}

/// Every sandbox and container the kubelet created. When the runtime's answer to the whole
/// listing exceeds the message size limit ([`RuntimeError::TooLarge`]: one pod with huge
/// records must not stop the node from being managed), lists pod by pod for the uids `known`
/// returns (the pods the engine wants plus those it saw before; asked for only then: the
/// relist runs every second) instead, skipping a pod whose own listing is still too large.
pub(crate) async fn list_all<K: IntoIterator<Item = String>>(
    runtime: &dyn ContainerRuntime,
    known: impl FnOnce() -> K,
) -> RuntimeResult<Listing> {
    let all = ListFilter::all();
    match tokio::try_join!(
        runtime.list_pod_sandboxes(&all),
        runtime.list_containers(&all)
    ) {
        Err(RuntimeError::TooLarge { operation, message }) => {
            tracing::warn!(operation, error = %message, "the runtime's listing of everything is too large; listing pod by pod");
        }
        other => {
            let (sandboxes, containers) = other?;
            return Ok(Listing {
                sandboxes,
                containers,
                skipped: Vec::new(),
            });
        }
    }
    let mut listing = Listing::default();
    for uid in known() {
        let filter = ListFilter::pod(uid.clone());
        match tokio::try_join!(
            runtime.list_pod_sandboxes(&filter),
            runtime.list_containers(&filter)
        ) {
            Ok((s, c)) => {
                listing.sandboxes.extend(s);
                listing.containers.extend(c);
            }
            Err(RuntimeError::TooLarge { message, .. }) => {
                tracing::warn!(uid, error = %message, "the runtime's listing of this pod is too large; skipped");
                listing.skipped.push(uid);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(listing)
}

/// Reads the pod's state from the runtime: its sandboxes and containers listed (together),
/// then the status of each (all at once: a pod's sync waits for the slowest one, not for
/// their sum). Objects that vanish between the listing and the status call are skipped.
pub async fn fetch(runtime: &dyn ContainerRuntime, uid: &str) -> RuntimeResult<PodRuntimeStatus> {
    let filter = ListFilter::pod(uid);
    let (sandboxes, containers) = tokio::try_join!(
        runtime.list_pod_sandboxes(&filter),
        runtime.list_containers(&filter)
    )?;
    let (sandboxes, containers) = futures::join!(
        futures::future::join_all(sandboxes.iter().map(|s| runtime.pod_sandbox_status(&s.id))),
        futures::future::join_all(
            containers
                .iter()
                .map(|c| runtime.container_status_listed(c))
        )
    );
    let mut status = PodRuntimeStatus {
        uid: uid.to_string(),
        sandboxes: Vec::with_capacity(sandboxes.len()),
        containers: Vec::with_capacity(containers.len()),
    };
    for s in sandboxes {
        match s {
            Ok(st) => status.sandboxes.push(st),
            Err(RuntimeError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    for c in containers {
        match c {
            Ok(st) => status.containers.push(st),
            Err(RuntimeError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    status
        .sandboxes
        .sort_by_key(|s| std::cmp::Reverse((s.created_at, s.attempt)));
    status
        .containers
        .sort_by_key(|c| std::cmp::Reverse((c.summary.created_at, c.summary.attempt)));
    Ok(status)
}

/// Go's `ShouldContainerBeRestarted`.
pub fn should_start(c: &Container, p: &Pod, status: &PodRuntimeStatus) -> bool {
    if pod::is_deleted(p) {
        return false;
    }
    let Some(s) = status.latest(&c.name) else {
        return true;
    };
    match s.summary.state {
        ContainerState::Running => false,
        ContainerState::Unknown | ContainerState::Created => true,
        ContainerState::Exited => match pod::restart_policy(p) {
            _ if pod::is_restartable_init(c) => true,
            "Never" => false,
            "OnFailure" => s.exit_code != 0,
            _ => true,
        },
    }
}
