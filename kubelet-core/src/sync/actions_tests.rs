//! The action table: what compute_pod_actions decides for each pod and runtime state.

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
