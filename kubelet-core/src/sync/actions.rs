//! What a sync must do to a pod (Go's `computePodActions`), as a pure function of the pod
//! spec and its runtime state, so it can be table-tested.
//!
//! Rules, in order:
//! 1. **Sandbox**: create one when there is none, when the newest is not ready, when more than
//!    one is ready, when the network mode changed, or when a pod-network sandbox has no IP.
//!    Re-creating kills the whole pod first. A pod with `restartPolicy: Never` whose sandbox
//!    died after its containers ran is done and gets no new sandbox; neither does a pod whose
//!    containers all completed (`OnFailure`) and whose init containers are done.
//! 2. **Init containers** run one at a time in order; while one is running or the next is due,
//!    app containers are not looked at. A failed init container is restarted unless
//!    `restartPolicy` is `Never`, in which case the pod is killed (and fails). A **sidecar**
//!    (init container with `restartPolicy: Always`) lets the next init container start once it
//!    runs and passed its startup probe, and keeps running: whenever it is not running it is
//!    restarted, whatever the pod's restart policy. Once any app container was created, regular
//!    init containers are never run again; only sidecars are kept running.
//! 3. **App containers**: a running container whose spec hash changed is killed and restarted
//!    (whatever the restart policy); one that failed its liveness or startup probe is killed
//!    (with the probe's `terminationGracePeriodSeconds` if set) and restarted unless the policy
//!    is `Never`; a missing or exited one is started if the restart policy allows (`Always`;
//!    `OnFailure` on a non-zero exit; never for `Never` once it ran; always when it never ran or
//!    is stuck in created/unknown state). A deleted pod (deletion timestamp set) restarts
//!    nothing.
//! 4. If no app container keeps running and none is to start, the pod is killed (it is
//!    finished) — sidecars do not keep a pod alive, nor do ephemeral containers.
//! 5. **Ephemeral containers** (`kubectl debug`) that the runtime has never seen are started,
//!    even while initialization is not complete (Go starts them before init containers); one
//!    that ran is never started again, whatever happened to it, and a new sandbox does not
//!    bring them back. A deleted pod starts none.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::hash::container_hash;
use crate::pod;
use crate::pod_status::{should_start, PodRuntimeStatus};
use crate::probe_results::{container_started, ProbeLookup, ProbeResult, ProbeType};
use crate::runtime::{ContainerState, ContainerStatus, SandboxState};

/// A running container to stop, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerToKill {
    /// Runtime id.
    pub id: String,
    /// Name in the pod spec.
    pub name: String,
    /// Why it is killed (goes into the Killing event).
    pub message: String,
    /// Grace period to use instead of the pod's (a probe's `terminationGracePeriodSeconds`).
    pub grace_seconds: Option<i64>,
}

/// The result of [`compute_pod_actions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodActions {
    /// Stop every container and the sandbox.
    pub kill_pod: bool,
    /// Create a new sandbox (after killing the pod).
    pub create_sandbox: bool,
    /// The sandbox to use (the existing one), or the one being replaced.
    pub sandbox_id: Option<String>,
    /// Attempt number of the sandbox to create.
    pub attempt: u32,
    /// Index in `spec.initContainers` of the init container to start next.
    pub next_init_container: Option<usize>,
    /// Indexes in `spec.initContainers` of sidecars (restartable init containers) to
    /// (re)start after initialization.
    pub sidecars_to_start: Vec<usize>,
    /// Indexes in `spec.containers` to start.
    pub containers_to_start: Vec<usize>,
    /// Running containers to stop.
    pub containers_to_kill: Vec<ContainerToKill>,
    /// Indexes in `spec.ephemeralContainers` to start.
    pub ephemeral_to_start: Vec<usize>,
}

/// Whether the restart policy restarts failed containers (Go's `shouldRestartOnFailure`).
fn restart_on_failure(p: &Pod) -> bool {
    pod::restart_policy(p) != "Never"
}

fn sandbox_changed(p: &Pod, status: &PodRuntimeStatus) -> (bool, u32, Option<String>) {
    let Some(newest) = status.sandboxes.first() else {
        return (true, 0, None);
    };
    let ready = status
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
        .count();
    let next = newest.attempt.saturating_add(1);
    let id = Some(newest.id.clone());
    if ready > 1 || newest.state != SandboxState::Ready {
        return (true, next, id);
    }
    if newest.host_network != pod::host_network(p) {
        return (true, next, None);
    }
    if !pod::host_network(p) && newest.ip.as_deref().unwrap_or("").is_empty() {
        return (true, next, id);
    }
    (false, newest.attempt, id)
}

fn succeeded(c: &Container, status: &PodRuntimeStatus) -> bool {
    status
        .latest(&c.name)
        .is_some_and(|s| s.summary.state == ContainerState::Exited && s.exit_code == 0)
}

/// Go's `isInitContainerFailed`.
pub fn init_container_failed(s: &ContainerStatus) -> bool {
    s.reason == "OOMKilled"
        || (s.summary.state == ContainerState::Exited && s.exit_code != 0)
        || s.summary.state == ContainerState::Unknown
}

/// Whether any app container was ever created (then init containers have run, even if the
/// runtime no longer has them; only sidecars are kept running from then on).
pub fn app_containers_created(p: &Pod, status: &PodRuntimeStatus) -> bool {
    p.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .any(|c| status.latest(&c.name).is_some())
    })
}

/// Progress of regular init containers (Go's `findNextInitContainerToRun`, for status): the
/// last failed one's status (if any), the index of the next one to run, and whether all are
/// done. Sidecars count as done once running.
pub fn next_init_container<'a>(
    p: &Pod,
    status: &'a PodRuntimeStatus,
) -> (Option<&'a ContainerStatus>, Option<usize>, bool) {
    let Some(spec) = p.spec.as_ref() else {
        return (None, None, true);
    };
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    if inits.is_empty() || app_containers_created(p, status) {
        return (None, None, true);
    }
    for (i, c) in inits.iter().enumerate() {
        let Some(s) = status.latest(&c.name) else {
            return (None, Some(i), false);
        };
        if pod::is_restartable_init(c) {
            if s.summary.state == ContainerState::Running {
                continue;
            }
            return (None, Some(i), false);
        }
        match s.summary.state {
            ContainerState::Running => return (None, None, false),
            ContainerState::Exited if s.exit_code == 0 && s.reason != "OOMKilled" => continue,
            _ if init_container_failed(s) => return (Some(s), Some(i), false),
            _ => return (None, Some(i), false),
        }
    }
    (None, None, true)
}

/// Why a running container must be killed because of a probe, with the probe's own
/// `terminationGracePeriodSeconds`.
fn probe_failure(
    c: &Container,
    s: &ContainerStatus,
    probes: &dyn ProbeLookup,
) -> Option<(String, Option<i64>)> {
    for kind in [ProbeType::Liveness, ProbeType::Startup] {
        if probes.result(&s.summary.id, kind) == Some(ProbeResult::Failure) {
            let grace = kind.of(c).and_then(|p| p.termination_grace_period_seconds);
            let what = match kind {
                ProbeType::Startup => "startup",
                _ => "liveness",
            };
            return Some((format!("Container {} failed {what} probe", c.name), grace));
        }
    }
    None
}

fn kill(s: &ContainerStatus, message: String, grace_seconds: Option<i64>) -> ContainerToKill {
    ContainerToKill {
        id: s.summary.id.clone(),
        name: s.summary.name.clone(),
        message,
        grace_seconds,
    }
}

/// Init containers: the next one to run during initialization, sidecar restarts, kills.
/// Returns whether initialization is complete.
fn init_actions(
    p: &Pod,
    status: &PodRuntimeStatus,
    probes: &dyn ProbeLookup,
    actions: &mut PodActions,
) -> bool {
    let Some(spec) = p.spec.as_ref() else {
        return true;
    };
    let inits = spec.init_containers.as_deref().unwrap_or(&[]);
    if inits.is_empty() {
        return true;
    }
    let initialized = app_containers_created(p, status);
    for (i, c) in inits.iter().enumerate() {
        let sidecar = pod::is_restartable_init(c);
        if initialized && !sidecar {
            continue;
        }
        let Some(s) = status.latest(&c.name) else {
            if initialized {
                actions.sidecars_to_start.push(i);
                continue;
            }
            actions.next_init_container = Some(i);
            return false;
        };
        if sidecar {
            if s.summary.state == ContainerState::Running {
                if let Some((message, grace)) = probe_failure(c, s, probes) {
                    actions.containers_to_kill.push(kill(
                        s,
                        format!("{message}, will be restarted"),
                        grace,
                    ));
                    actions.sidecars_to_start.push(i);
                    if !initialized {
                        return false;
                    }
                    continue;
                }
                if initialized || container_started(c, &s.summary.id, probes) {
                    continue;
                }
                // Started, not yet through its startup probe: the next init container waits.
                return false;
            }
            if s.summary.state == ContainerState::Unknown {
                actions.containers_to_kill.push(kill(
                    s,
                    "Init container is in unknown state, try killing it before restart".into(),
                    None,
                ));
            }
            if initialized {
                actions.sidecars_to_start.push(i);
                continue;
            }
            actions.next_init_container = Some(i);
            return false;
        }
        match s.summary.state {
            ContainerState::Running => return false,
            ContainerState::Exited if !init_container_failed(s) => continue,
            _ if init_container_failed(s) => {
                if !restart_on_failure(p) {
                    actions.kill_pod = true;
                    return false;
                }
                if s.summary.state == ContainerState::Unknown {
                    actions.containers_to_kill.push(kill(
                        s,
                        "Init container is in unknown state, try killing it before restart".into(),
                        None,
                    ));
                }
                actions.next_init_container = Some(i);
                return false;
            }
            _ => {
                actions.next_init_container = Some(i);
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
/// Computes the actions for one sync without probe results. See the module docs.
pub fn compute_pod_actions(p: &Pod, status: &PodRuntimeStatus) -> PodActions {
    compute_pod_actions_with_probes(p, status, &crate::probe_results::NoProbes)
}

/// Computes the actions for one sync. See the module docs.
pub fn compute_pod_actions_with_probes(
    p: &Pod,
    status: &PodRuntimeStatus,
    probes: &dyn ProbeLookup,
) -> PodActions {
    let (create_sandbox, attempt, sandbox_id) = sandbox_changed(p, status);
    let mut actions = PodActions {
        kill_pod: create_sandbox,
        create_sandbox,
        sandbox_id,
        attempt,
        ..Default::default()
    };
    let Some(spec) = p.spec.as_ref() else {
        actions.create_sandbox = false;
        return actions;
    };
    let has_inits = spec.init_containers.as_ref().is_some_and(|v| !v.is_empty());
    if create_sandbox {
        if (!restart_on_failure(p) && attempt != 0 && !status.containers.is_empty())
            || pod::is_deleted(p)
        {
            actions.create_sandbox = false;
            return actions;
        }
        let to_start: Vec<usize> = spec
            .containers
            .iter()
            .enumerate()
            .filter(|(_, c)| !(pod::restart_policy(p) == "OnFailure" && succeeded(c, status)))
            .map(|(i, _)| i)
            .collect();
        if to_start.is_empty() && next_init_container(p, status).2 {
            actions.create_sandbox = false;
            return actions;
        }
        if has_inits {
            actions.next_init_container = Some(0);
        } else {
            actions.containers_to_start = to_start;
        }
        return actions;
    }

    if !pod::is_deleted(p) {
        actions.ephemeral_to_start = spec
            .ephemeral_containers
            .iter()
            .flatten()
            .enumerate()
            .filter(|(_, c)| status.latest(&c.name).is_none())
            .map(|(i, _)| i)
            .collect();
    }

    if !init_actions(p, status, probes, &mut actions) {
        return actions;
    }

    let mut keep = 0usize;
    for (i, c) in spec.containers.iter().enumerate() {
        let s = status.latest(&c.name);
        match s {
            Some(s) if s.summary.state == ContainerState::Running => {
                let changed = s.summary.hash != container_hash(c);
                let (message, grace) = if changed {
                    (format!("Container {} definition changed", c.name), None)
                } else if let Some(failure) = probe_failure(c, s, probes) {
                    failure
                } else {
                    keep += 1;
                    continue;
                };
                // A changed spec restarts regardless of the restart policy; a probe failure
                // only when the policy restarts failed containers.
                let restart = (changed || restart_on_failure(p)) && !pod::is_deleted(p);
                if restart {
                    actions.containers_to_start.push(i);
                }
                let message = if restart {
                    format!("{message}, will be restarted")
                } else {
                    message
                };
                actions.containers_to_kill.push(kill(s, message, grace));
            }
            _ => {
                if should_start(c, p, status) {
                    if let Some(s) = s.filter(|s| s.summary.state == ContainerState::Unknown) {
                        actions.containers_to_kill.push(kill(
                            s,
                            "Container is in unknown state, try killing it before restart".into(),
                            None,
                        ));
                    }
                    actions.containers_to_start.push(i);
                }
            }
        }
    }
    if keep == 0 && actions.containers_to_start.is_empty() {
        // Nothing of the app runs or will run: the pod is done, sidecars included.
        actions.kill_pod = true;
        actions.sidecars_to_start.clear();
        actions.ephemeral_to_start.clear();
    }
    actions
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
