//! Generating a pod's API status from its spec and runtime state (Go's
//! `generateAPIPodStatus`, `convertToAPIContainerStatuses`, `getPhase` and the condition
//! generators).
//!
//! - **Container statuses**: the newest container of each name gives `state` (running,
//!   terminated with exit code and reason, or waiting) and `restartCount`; the attempt before
//!   it gives `lastState`. A container that the next sync will (re)start and whose last start
//!   failed shows `waiting` with the failure's reason (`CrashLoopBackOff`, `ErrImagePull`,
//!   `ImagePullBackOff`, `ErrImageNeverPull`, `CreateContainerError`, …); its previous
//!   terminated state moves to `lastState`. A container never created waits with
//!   `ContainerCreating` (`PodInitializing` in pods with init containers).
//! - **Phase**: `Failed` when an init container failed under `restartPolicy: Never`;
//!   `Pending` while initializing or while a container waits without having run; `Running`
//!   while containers run (or all stopped and will restart); `Succeeded` when all app
//!   containers exited 0; `Failed` when they stopped, some failed, and none will restart.
//!   A pod that finished terminating (deleted) ends `Succeeded` or `Failed`.
//! - **Conditions** (in this order): `PodReadyToStartContainers`, `Initialized`, `Ready`,
//!   `ContainersReady`, `PodScheduled`; transition times carry over while a condition's
//!   status does not change.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus as ApiContainerStatus, HostIP, Pod, PodCondition, PodIP,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::readiness;
use crate::clock::to_time;
use crate::pod;
use crate::pod_status::{should_start, PodRuntimeStatus};
use crate::probe_results::{container_ready, container_started, ProbeLookup};
use crate::qos::pod_qos;
use crate::runtime::{ContainerState, ContainerStatus, SandboxState};

/// Why a container is waiting, from the last sync that tried to start it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingReason {
    /// e.g. "CrashLoopBackOff".
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
}

/// Everything status generation reads.
pub struct StatusInputs<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// Its runtime state.
    pub runtime: &'a PodRuntimeStatus,
    /// Waiting reasons by container name.
    pub reasons: &'a HashMap<String, WaitingReason>,
    /// The previous status, for start time and transition times.
    pub old: Option<&'a PodStatus>,
    /// Runtime name for container ids (`containerd://<id>`).
    pub runtime_name: &'a str,
    /// The node's IPs.
    pub host_ips: &'a [String],
    /// The pod finished terminating (deleted and stopped).
    pub terminated: bool,
    /// Now.
    pub now: Option<Time>,
    /// Probe results (readiness and startup drive `ready` and `started`).
    pub probes: &'a dyn ProbeLookup,
    /// The kubelet failed the pod (e.g. `DeadlineExceeded`): phase `Failed` with this reason.
    pub failure: Option<&'a WaitingReason>,
}

const CONTAINER_CREATING: &str = "ContainerCreating";
const POD_INITIALIZING: &str = "PodInitializing";

fn terminated_state(s: &ContainerStatus, runtime_name: &str) -> ApiState {
    let reason = if !s.reason.is_empty() {
        s.reason.clone()
    } else if s.exit_code == 0 {
        "Completed".to_string()
    } else {
        "Error".to_string()
    };
    ApiState {
        terminated: Some(ContainerStateTerminated {
            exit_code: s.exit_code,
            reason: Some(reason),
            message: (!s.message.is_empty()).then(|| s.message.clone()),
            started_at: (s.started_at > 0).then(|| to_time(s.started_at)).flatten(),
            finished_at: (s.finished_at > 0)
                .then(|| to_time(s.finished_at))
                .flatten(),
            container_id: Some(format!("{runtime_name}://{}", s.summary.id)),
            signal: None,
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ApiState {
    ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message,
        }),
        ..Default::default()
    }
}

/// Which list of the spec containers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Init,
    App,
    /// `spec.ephemeralContainers`: never ready (no probes), never restarted.
    Ephemeral,
}

/// Whether the next sync will (re)start `c` of `part`.
fn will_start(c: &Container, part: Part, inp: &StatusInputs<'_>) -> bool {
    match part {
        Part::Ephemeral => !pod::is_deleted(inp.pod) && inp.runtime.latest(&c.name).is_none(),
        _ => should_start(c, inp.pod, inp.runtime),
    }
}

fn container_statuses(
    inp: &StatusInputs<'_>,
    containers: &[Container],
    part: Part,
    has_inits: bool,
) -> Vec<ApiContainerStatus> {
    let is_init = part == Part::Init;
    let default_reason = if has_inits {
        POD_INITIALIZING
    } else {
        CONTAINER_CREATING
    };
    containers
        .iter()
        .map(|c| {
            let latest = inp.runtime.latest(&c.name);
            let mut st = ApiContainerStatus {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
                image_id: String::new(),
                ready: false,
                restart_count: 0,
                state: Some(waiting(default_reason, None)),
                ..Default::default()
            };
            if let Some(s) = latest {
                st.restart_count = i32::try_from(s.summary.attempt).unwrap_or(i32::MAX);
                st.image_id = s.summary.image_ref.clone();
                st.container_id = Some(format!("{}://{}", inp.runtime_name, s.summary.id));
                match s.summary.state {
                    ContainerState::Running => {
                        st.state = Some(ApiState {
                            running: Some(ContainerStateRunning {
                                started_at: to_time(s.started_at),
                            }),
                            ..Default::default()
                        });
                        let id = &s.summary.id;
                        // A regular init container is ready only once it completed.
                        let regular_init = is_init && !pod::is_restartable_init(c);
                        st.ready = !inp.terminated
                            && !regular_init
                            && part != Part::Ephemeral
                            && container_ready(c, id, inp.probes);
                        st.started = Some(container_started(c, id, inp.probes));
                    }
                    ContainerState::Exited => {
                        st.state = Some(terminated_state(s, inp.runtime_name));
                        st.started = Some(false);
                        st.ready = is_init
                            && !pod::is_restartable_init(c)
                            && s.exit_code == 0
                            && s.reason != "OOMKilled";
                    }
                    ContainerState::Created | ContainerState::Unknown => {
                        st.state = Some(ApiState {
                            waiting: Some(ContainerStateWaiting::default()),
                            ..Default::default()
                        });
                        st.started = Some(false);
                    }
                }
                if let Some(prev) = inp.runtime.previous(&c.name) {
                    if prev.summary.state == ContainerState::Exited {
                        st.last_state = Some(terminated_state(prev, inp.runtime_name));
                    }
                }
            }
            // A container the next sync will (re)start, whose last start failed, is waiting.
            let init_succeeded = is_init
                && latest
                    .is_some_and(|s| s.summary.state == ContainerState::Exited && s.exit_code == 0);
            if !init_succeeded && !inp.terminated && will_start(c, part, inp) {
                if let Some(r) = inp.reasons.get(&c.name) {
                    if st.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                        st.last_state = st.state.take();
                    }
                    st.state = Some(waiting(&r.reason, Some(r.message.clone())));
                }
            }
            st
        })
        .collect()
}

/// Whether an app container ever ran (running, terminated, or waiting after a run).
fn apps_started(apps: &[ApiContainerStatus]) -> bool {
    apps.iter().any(|s| {
        s.last_state.is_some()
            || s.state
                .as_ref()
                .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    })
}

fn phase(
    p: &Pod,
    inits: &[ApiContainerStatus],
    apps: &[ApiContainerStatus],
    terminated: bool,
) -> &'static str {
    let policy = pod::restart_policy(p);
    let mut pending_init = 0;
    let mut failed_init = 0;
    let init_specs = p
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let started = apps_started(apps);
    for (s, spec) in inits.iter().zip(init_specs) {
        if pod::is_restartable_init(spec) {
            // A sidecar holds the pod in Pending only until it started; its later exits
            // and restarts do not change the phase.
            if !started && s.started != Some(true) {
                pending_init += 1;
            }
            continue;
        }
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = state.terminated.as_ref() {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if state.waiting.is_some() {
            match s.last_state.as_ref().and_then(|l| l.terminated.as_ref()) {
                Some(t) if t.exit_code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting_n, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for s in apps {
        let state = s.state.clone().unwrap_or_default();
        if state.running.is_some() {
            running += 1;
        } else if let Some(t) = state.terminated.as_ref() {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if state.waiting.is_some() {
            if s.last_state
                .as_ref()
                .and_then(|l| l.terminated.as_ref())
                .is_some()
            {
                stopped += 1;
            } else {
                waiting_n += 1;
            }
        } else {
            unknown += 1;
        }
    }
    if failed_init > 0 && policy == "Never" {
        return "Failed";
    }
    if terminated && running == 0 {
        return if stopped > 0 && stopped == succeeded && failed_init == 0 {
            "Succeeded"
        } else {
            "Failed"
        };
    }
    if pending_init > 0 || waiting_n > 0 {
        return "Pending";
    }
    if running > 0 && unknown == 0 {
        return "Running";
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if policy == "Always" {
            return "Running";
        }
        if stopped == succeeded {
            return "Succeeded";
        }
        if policy == "Never" {
            return "Failed";
        }
        return "Running";
    }
    "Pending"
}

fn condition(
    old: Option<&PodStatus>,
    now: &Option<Time>,
    type_: &str,
    ok: bool,
    reason: Option<String>,
    message: Option<String>,
) -> PodCondition {
    let status = if ok { "True" } else { "False" }.to_string();
    let last_transition_time = old
        .and_then(|o| o.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .or_else(|| now.clone());
    PodCondition {
        type_: type_.to_string(),
        status,
        reason,
        message,
        last_transition_time,
        ..Default::default()
    }
}

fn names_where(
    statuses: &[ApiContainerStatus],
    pred: impl Fn(&ApiContainerStatus) -> bool,
) -> Vec<String> {
    statuses
        .iter()
        .filter(|s| pred(s))
        .map(|s| s.name.clone())
        .collect()
}

/// Generates the pod's API status. See the module docs.
pub fn generate(inp: &StatusInputs<'_>) -> PodStatus {
    let p = inp.pod;
    let empty = Vec::new();
    let (inits_spec, apps_spec) = match p.spec.as_ref() {
        Some(s) => (s.init_containers.as_ref().unwrap_or(&empty), &s.containers),
        None => (&empty, &empty),
    };
    let has_inits = !inits_spec.is_empty();
    let inits = container_statuses(inp, inits_spec, Part::Init, has_inits);
    let apps = container_statuses(inp, apps_spec, Part::App, has_inits);
    let ephemeral_spec = pod::ephemeral_containers(p);
    let ephemeral = container_statuses(inp, &ephemeral_spec, Part::Ephemeral, has_inits);
    let phase = if inp.failure.is_some() {
        "Failed"
    } else {
        phase(p, &inits, &apps, inp.terminated)
    };
    let started = apps_started(&apps);

    let sandbox_ready = inp
        .runtime
        .sandboxes
        .first()
        .is_some_and(|s| s.state == SandboxState::Ready && (s.host_network || s.ip.is_some()));
    let is_sidecar = |s: &ApiContainerStatus| {
        inits_spec
            .iter()
            .any(|c| c.name == s.name && pod::is_restartable_init(c))
    };
    let not_initialized = if started {
        Vec::new()
    } else {
        names_where(&inits, |s| {
            if is_sidecar(s) {
                return s.started != Some(true);
            }
            s.state
                .as_ref()
                .and_then(|st| st.terminated.as_ref())
                .is_none_or(|t| t.exit_code != 0)
        })
    };
    let initialized = not_initialized.is_empty();
    let mut unready = names_where(&inits, |s| is_sidecar(s) && !s.ready);
    unready.extend(names_where(&apps, |s| !s.ready));
    let (containers_ready, ready_reason, ready_message) = if phase == "Succeeded" {
        (false, Some("PodCompleted".to_string()), None)
    } else if unready.is_empty() {
        (true, None, None)
    } else {
        (
            false,
            Some("ContainersNotReady".to_string()),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    // Ready as ContainersReady, unless a readiness gate holds it back.
    let (ready, pod_ready_reason, pod_ready_message) = match readiness::unready_gates(p) {
        Some(message) if containers_ready => (
            false,
            Some(readiness::READINESS_GATES_NOT_READY.to_string()),
            Some(message),
        ),
        _ => (
            containers_ready,
            ready_reason.clone(),
            ready_message.clone(),
        ),
    };
    let (init_reason, init_message) = if initialized {
        (
            if phase == "Succeeded" && has_inits {
                Some("PodCompleted".to_string())
            } else {
                None
            },
            None,
        )
    } else {
        (
            Some("ContainersNotInitialized".to_string()),
            Some(format!(
                "containers with incomplete status: [{}]",
                not_initialized.join(" ")
            )),
        )
    };
    let mut conditions = vec![
        condition(
            inp.old,
            &inp.now,
            "PodReadyToStartContainers",
            sandbox_ready && !inp.terminated,
            None,
            None,
        ),
        condition(
            inp.old,
            &inp.now,
            "Initialized",
            initialized,
            init_reason,
            init_message,
        ),
        condition(
            inp.old,
            &inp.now,
            "Ready",
            ready,
            pod_ready_reason,
            pod_ready_message,
        ),
        condition(
            inp.old,
            &inp.now,
            "ContainersReady",
            containers_ready,
            ready_reason,
            ready_message,
        ),
        condition(inp.old, &inp.now, "PodScheduled", true, None, None),
    ];
    // Conditions others own (readiness gates, DisruptionTarget, …) are kept as they are.
    conditions.extend(readiness::foreign_conditions(p));

    let mut pod_ips = inp.runtime.pod_ips();
    if pod::host_network(p) {
        pod_ips = inp.host_ips.to_vec();
    }
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        container_statuses: Some(apps),
        init_container_statuses: has_inits.then_some(inits),
        ephemeral_container_statuses: (!ephemeral.is_empty()).then_some(ephemeral),
        host_ip: inp.host_ips.first().cloned(),
        host_ips: (!inp.host_ips.is_empty()).then(|| {
            inp.host_ips
                .iter()
                .map(|ip| HostIP { ip: ip.clone() })
                .collect()
        }),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect()),
        qos_class: Some(pod_qos(p).as_str().to_string()),
        reason: inp.failure.map(|f| f.reason.clone()),
        message: inp.failure.map(|f| f.message.clone()),
        start_time: inp
            .old
            .and_then(|o| o.start_time.clone())
            .or_else(|| inp.now.clone()),
        ..Default::default()
    }
}

/// Whether a phase is terminal (`Succeeded` or `Failed`).
pub fn is_terminal(status: &PodStatus) -> bool {
    matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed"))
}
