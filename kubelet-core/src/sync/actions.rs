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
//!    finished) — sidecars do not keep a pod alive.

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::hash::container_hash;
use crate::pod;
use crate::pod_status::{should_start, PodRuntimeStatus};
use crate::probe_results::{container_started, NoProbes, ProbeLookup, ProbeResult, ProbeType};
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

/// Computes the actions for one sync without probe results. See the module docs.
pub fn compute_pod_actions(p: &Pod, status: &PodRuntimeStatus) -> PodActions {
    compute_pod_actions_with_probes(p, status, &NoProbes)
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
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerSummary, PodRef, SandboxStatus};
    use crate::testing::{container, pod};

    fn sandbox(attempt: u32, ready: bool, ip: Option<&str>, t: i64) -> SandboxStatus {
        SandboxStatus {
            id: format!("sb{attempt}"),
            pod: PodRef::default(),
            attempt,
            state: if ready {
                SandboxState::Ready
            } else {
                SandboxState::NotReady
            },
            created_at: t,
            ip: ip.map(str::to_string),
            additional_ips: vec![],
            host_network: false,
        }
    }

    fn cstatus(
        c: &Container,
        state: ContainerState,
        exit: i32,
        attempt: u32,
        t: i64,
    ) -> ContainerStatus {
        ContainerStatus {
            summary: ContainerSummary {
                id: format!("{}-{attempt}", c.name),
                sandbox_id: "sb0".into(),
                pod: PodRef::default(),
                name: c.name.clone(),
                attempt,
                hash: container_hash(c),
                image: String::new(),
                image_ref: String::new(),
                state,
                created_at: t,
            },
            started_at: t,
            finished_at: t,
            exit_code: exit,
            reason: String::new(),
            message: String::new(),
            log_path: None,
        }
    }

    struct Case {
        name: &'static str,
        policy: &'static str,
        inits: usize,
        sandboxes: Vec<SandboxStatus>,
        /// (container name, state, exit code)
        containers: Vec<(&'static str, ContainerState, i32)>,
        changed_spec: bool,
        want: PodActions,
    }

    fn actions(kill: bool, create: bool, sb: Option<&str>, attempt: u32) -> PodActions {
        PodActions {
            kill_pod: kill,
            create_sandbox: create,
            sandbox_id: sb.map(str::to_string),
            attempt,
            ..Default::default()
        }
    }

    #[test]
    fn compute_pod_actions_table() {
        use ContainerState::*;
        let ready = || vec![sandbox(0, true, Some("10.88.0.2"), 1)];
        let cases = vec![
            Case {
                name: "new pod: sandbox and all containers",
                policy: "Always",
                inits: 0,
                sandboxes: vec![],
                containers: vec![],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![0, 1],
                    ..actions(true, true, None, 0)
                },
            },
            Case {
                name: "new pod with init containers: first init only",
                policy: "Always",
                inits: 2,
                sandboxes: vec![],
                containers: vec![],
                changed_spec: false,
                want: PodActions {
                    next_init_container: Some(0),
                    ..actions(true, true, None, 0)
                },
            },
            Case {
                name: "steady state: nothing",
                policy: "Always",
                inits: 0,
                sandboxes: ready(),
                containers: vec![("a", Running, 0), ("b", Running, 0)],
                changed_spec: false,
                want: actions(false, false, Some("sb0"), 0),
            },
            Case {
                name: "dead sandbox is re-created",
                policy: "Always",
                inits: 0,
                sandboxes: vec![sandbox(0, false, Some("10.88.0.2"), 1)],
                containers: vec![("a", Exited, 0), ("b", Exited, 0)],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![0, 1],
                    ..actions(true, true, Some("sb0"), 1)
                },
            },
            Case {
                name: "sandbox without IP is re-created",
                policy: "Always",
                inits: 0,
                sandboxes: vec![sandbox(0, true, None, 1)],
                containers: vec![],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![0, 1],
                    ..actions(true, true, Some("sb0"), 1)
                },
            },
            Case {
                name: "Never: dead sandbox after containers ran is not re-created",
                policy: "Never",
                inits: 0,
                sandboxes: vec![sandbox(0, false, Some("10.88.0.2"), 1)],
                containers: vec![("a", Exited, 0), ("b", Exited, 1)],
                changed_spec: false,
                want: actions(true, false, Some("sb0"), 1),
            },
            Case {
                name: "Always restarts an exited container",
                policy: "Always",
                inits: 0,
                sandboxes: ready(),
                containers: vec![("a", Running, 0), ("b", Exited, 0)],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![1],
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
            Case {
                name: "OnFailure restarts only failures",
                policy: "OnFailure",
                inits: 0,
                sandboxes: ready(),
                containers: vec![("a", Exited, 0), ("b", Exited, 2)],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![1],
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
            Case {
                name: "Never: all exited kills the pod",
                policy: "Never",
                inits: 0,
                sandboxes: ready(),
                containers: vec![("a", Exited, 0), ("b", Exited, 2)],
                changed_spec: false,
                want: actions(true, false, Some("sb0"), 0),
            },
            Case {
                name: "changed spec hash kills and restarts",
                policy: "Never",
                inits: 0,
                sandboxes: ready(),
                containers: vec![("a", Running, 0), ("b", Running, 0)],
                changed_spec: true,
                want: PodActions {
                    containers_to_start: vec![0],
                    containers_to_kill: vec![ContainerToKill {
                        id: "a-0".into(),
                        name: "a".into(),
                        message: "Container a definition changed, will be restarted".into(),
                        grace_seconds: None,
                    }],
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
            Case {
                name: "second init container is next",
                policy: "Always",
                inits: 2,
                sandboxes: ready(),
                containers: vec![("init0", Exited, 0)],
                changed_spec: false,
                want: PodActions {
                    next_init_container: Some(1),
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
            Case {
                name: "failed init container is retried under OnFailure",
                policy: "OnFailure",
                inits: 2,
                sandboxes: ready(),
                containers: vec![("init0", Exited, 1)],
                changed_spec: false,
                want: PodActions {
                    next_init_container: Some(0),
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
            Case {
                name: "failed init container under Never kills the pod",
                policy: "Never",
                inits: 2,
                sandboxes: ready(),
                containers: vec![("init0", Exited, 1)],
                changed_spec: false,
                want: actions(true, false, Some("sb0"), 0),
            },
            Case {
                name: "inits done: app containers start",
                policy: "Always",
                inits: 2,
                sandboxes: ready(),
                containers: vec![("init0", Exited, 0), ("init1", Exited, 0)],
                changed_spec: false,
                want: PodActions {
                    containers_to_start: vec![0, 1],
                    ..actions(false, false, Some("sb0"), 0)
                },
            },
        ];
        for case in cases {
            let mut p = pod(
                "p",
                "u",
                vec![container("a", "img:1"), container("b", "img:1")],
            );
            if let Some(s) = p.spec.as_mut() {
                s.restart_policy = Some(case.policy.into());
                if case.inits > 0 {
                    s.init_containers = Some(
                        (0..case.inits)
                            .map(|i| container(&format!("init{i}"), "img:1"))
                            .collect(),
                    );
                }
            }
            let spec = p.spec.clone().unwrap_or_default();
            let all: Vec<Container> = spec
                .init_containers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .chain(spec.containers.clone())
                .collect();
            let mut containers: Vec<ContainerStatus> = case
                .containers
                .iter()
                .map(|(name, state, code)| {
                    let c = all
                        .iter()
                        .find(|c| c.name == *name)
                        .cloned()
                        .unwrap_or_default();
                    cstatus(&c, *state, *code, 0, 1)
                })
                .collect();
            if case.changed_spec {
                containers[0].summary.hash ^= 1;
            }
            let status = PodRuntimeStatus {
                uid: "u".into(),
                sandboxes: case.sandboxes.clone(),
                containers,
            };
            assert_eq!(
                compute_pod_actions(&p, &status),
                case.want,
                "case: {}",
                case.name
            );
        }
    }

    /// Probe results for the table below: (container id, probe type, result).
    struct Results(Vec<(&'static str, ProbeType, ProbeResult)>);

    impl ProbeLookup for Results {
        fn result(&self, id: &str, kind: ProbeType) -> Option<ProbeResult> {
            self.0
                .iter()
                .find(|(i, k, _)| *i == id && *k == kind)
                .map(|(_, _, r)| *r)
        }
    }

    #[test]
    fn probe_and_sidecar_actions_table() {
        use ContainerState::*;
        let probe = |grace: Option<i64>| {
            Some(k8s_openapi::api::core::v1::Probe {
                termination_grace_period_seconds: grace,
                ..Default::default()
            })
        };
        let mut app = container("app", "img");
        app.liveness_probe = probe(Some(7));
        app.startup_probe = probe(None);
        let mut side = container("side", "img");
        side.restart_policy = Some("Always".into());
        side.startup_probe = probe(None);
        let init = container("init", "img");
        struct Case {
            name: &'static str,
            policy: &'static str,
            inits: Vec<Container>,
            containers: Vec<(&'static Container, ContainerState, i32)>,
            results: Vec<(&'static str, ProbeType, ProbeResult)>,
            want: fn(&PodActions) -> bool,
        }
        let app: &'static Container = Box::leak(Box::new(app));
        let side_c: &'static Container = Box::leak(Box::new(side.clone()));
        let init_c: &'static Container = Box::leak(Box::new(init.clone()));
        let cases = vec![
            Case {
                name: "liveness failure kills with the probe grace and restarts",
                policy: "Always",
                inits: vec![],
                containers: vec![(app, Running, 0)],
                results: vec![("app-0", ProbeType::Liveness, ProbeResult::Failure)],
                want: |a| {
                    a.containers_to_start == vec![0]
                        && a.containers_to_kill.len() == 1
                        && a.containers_to_kill[0].grace_seconds == Some(7)
                        && a.containers_to_kill[0].message
                            == "Container app failed liveness probe, will be restarted"
                        && !a.kill_pod
                },
            },
            Case {
                name: "startup failure under Never kills the pod",
                policy: "Never",
                inits: vec![],
                containers: vec![(app, Running, 0)],
                results: vec![("app-0", ProbeType::Startup, ProbeResult::Failure)],
                want: |a| {
                    a.containers_to_start.is_empty()
                        && a.containers_to_kill[0].message == "Container app failed startup probe"
                        && a.kill_pod
                },
            },
            Case {
                name: "passing probes keep the container",
                policy: "Always",
                inits: vec![],
                containers: vec![(app, Running, 0)],
                results: vec![("app-0", ProbeType::Liveness, ProbeResult::Success)],
                want: |a| nothing(a),
            },
            Case {
                name: "sidecar not yet started holds the next init container",
                policy: "Always",
                inits: vec![side.clone(), init.clone()],
                containers: vec![(side_c, Running, 0)],
                results: vec![("side-0", ProbeType::Startup, ProbeResult::Unknown)],
                want: |a| nothing(a),
            },
            Case {
                name: "started sidecar lets the next init container run",
                policy: "Always",
                inits: vec![side.clone(), init.clone()],
                containers: vec![(side_c, Running, 0)],
                results: vec![("side-0", ProbeType::Startup, ProbeResult::Success)],
                want: |a| a.next_init_container == Some(1),
            },
            Case {
                name: "inits done: app starts, sidecar keeps running",
                policy: "Never",
                inits: vec![side.clone(), init.clone()],
                containers: vec![(side_c, Running, 0), (init_c, Exited, 0)],
                results: vec![("side-0", ProbeType::Startup, ProbeResult::Success)],
                want: |a| a.containers_to_start == vec![0] && a.sidecars_to_start.is_empty(),
            },
            Case {
                name: "exited sidecar restarts even under Never",
                policy: "Never",
                inits: vec![side.clone(), init.clone()],
                containers: vec![(side_c, Exited, 1), (init_c, Exited, 0), (app, Running, 0)],
                results: vec![],
                want: |a| a.sidecars_to_start == vec![0] && !a.kill_pod,
            },
            Case {
                name: "app done: pod killed though the sidecar runs",
                policy: "Never",
                inits: vec![side.clone(), init.clone()],
                containers: vec![(side_c, Running, 0), (init_c, Exited, 0), (app, Exited, 0)],
                results: vec![],
                want: |a| a.kill_pod && a.sidecars_to_start.is_empty(),
            },
        ];
        fn nothing(a: &PodActions) -> bool {
            !a.kill_pod
                && a.next_init_container.is_none()
                && a.containers_to_start.is_empty()
                && a.containers_to_kill.is_empty()
                && a.sidecars_to_start.is_empty()
        }
        for case in cases {
            let mut p = pod("p", "u", vec![app.clone()]);
            if let Some(spec) = p.spec.as_mut() {
                spec.restart_policy = Some(case.policy.into());
                spec.init_containers = (!case.inits.is_empty()).then(|| case.inits.clone());
            }
            let status = PodRuntimeStatus {
                uid: "u".into(),
                sandboxes: vec![sandbox(0, true, Some("10.0.0.1"), 1)],
                containers: case
                    .containers
                    .iter()
                    .map(|(c, st, exit)| cstatus(c, *st, *exit, 0, 1))
                    .collect(),
            };
            let got = compute_pod_actions_with_probes(&p, &status, &Results(case.results));
            assert!((case.want)(&got), "{}: {got:?}", case.name);
        }
    }
}
