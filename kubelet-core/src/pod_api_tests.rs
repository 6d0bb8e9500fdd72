//! The rest of the pod API on the simulated runtime (paused clock): readiness gates,
//! ephemeral containers, RuntimeClass handlers, sysctl and AppArmor admission, hostUsers, and
//! the waiting reason of containers whose volumes cannot be set up.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, EphemeralContainer, Pod, PodCondition, PodReadinessGate, PodSecurityContext,
    PodStatus, SecretVolumeSource, SecurityContext, Sysctl, Volume,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio_util::sync::CancellationToken;

use crate::lifecycle_tests::{config, start, Harness};
use crate::objects::MemoryObjectStore;
use crate::testing::{
    ContainerBuilder, FakeContainerManager, PodBuilder, RecordingSink, SimRuntime, StaticSource,
};
use crate::{Config, Kubelet};

fn condition(p: &PodStatus, t: &str) -> Option<PodCondition> {
    p.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .cloned()
}

fn gated() -> Pod {
    PodBuilder::new("gated", "u-gate")
        .container(ContainerBuilder::new("app", "img:1").build())
        .spec(|s| {
            s.readiness_gates = Some(vec![PodReadinessGate {
                condition_type: "example.com/lb-ready".into(),
            }])
        })
        .build()
}

#[tokio::test(start_paused = true)]
async fn readiness_gates_hold_ready_until_their_condition_is_true() {
    let h = start(vec![gated()]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u-gate") == "Running"
    })
    .await;
    let s = h.status("u-gate").unwrap();
    let ready = condition(&s, "Ready").unwrap();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some("corresponding condition of pod readiness gate \"example.com/lb-ready\" does not exist.")
    );
    assert_eq!(condition(&s, "ContainersReady").unwrap().status, "True");

    // A controller sets the gate's condition False, then True: the source delivers the status.
    for (value, ready) in [("False", "False"), ("True", "True")] {
        let mut p = gated();
        p.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: "example.com/lb-ready".into(),
                status: value.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        h.src.set(vec![p]);
        h.until(Duration::from_secs(10), "Ready follows the gate", |h| {
            h.status("u-gate")
                .and_then(|s| condition(&s, "Ready"))
                .is_some_and(|c| c.status == ready)
        })
        .await;
    }
    let s = h.status("u-gate").unwrap();
    // The gate's own condition is kept in the status, as it is.
    assert_eq!(
        condition(&s, "example.com/lb-ready").unwrap().status,
        "True"
    );
    h.stop().await;
}

fn debug_container(name: &str, target: Option<&str>, run_ms: &str) -> EphemeralContainer {
    EphemeralContainer {
        name: name.into(),
        image: Some("img:1".into()),
        target_container_name: target.map(String::from),
        env: crate::lifecycle_tests::env(&[("SIM_RUN_FOR_MS", run_ms), ("SIM_EXIT_CODE", "3")]),
        ..Default::default()
    }
}

fn with_ephemeral(mut p: Pod, e: Vec<EphemeralContainer>) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.ephemeral_containers = Some(e);
    }
    p
}

fn web() -> Pod {
    PodBuilder::new("web", "u-eph")
        .container(ContainerBuilder::new("app", "img:1").build())
        .build()
}

fn ephemeral_state(h: &Harness, name: &str) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    h.status("u-eph")?
        .ephemeral_container_statuses?
        .into_iter()
        .find(|s| s.name == name)
}

#[tokio::test(start_paused = true)]
async fn ephemeral_containers_start_once_and_are_never_restarted() {
    let h = start(vec![web()]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u-eph") == "Running"
    })
    .await;
    // kubectl debug: the pod gains an ephemeral container that exits after 2s.
    h.src.set(vec![with_ephemeral(
        web(),
        vec![debug_container("debugger", Some("app"), "2000")],
    )]);
    h.until(Duration::from_secs(10), "debugger running", |h| {
        ephemeral_state(h, "debugger")
            .and_then(|s| s.state)
            .is_some_and(|s| s.running.is_some())
    })
    .await;
    h.until(Duration::from_secs(10), "debugger exited", |h| {
        ephemeral_state(h, "debugger")
            .and_then(|s| s.state)
            .and_then(|s| s.terminated)
            .is_some_and(|t| t.exit_code == 3)
    })
    .await;
    // Two minutes later: still exited, never restarted, and the pod is Running and Ready.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let st = ephemeral_state(&h, "debugger").unwrap();
    assert_eq!(st.restart_count, 0);
    assert!(!st.ready);
    assert_eq!(h.rt.container_ids("u-eph", "debugger").len(), 1);
    let s = h.status("u-eph").unwrap();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(condition(&s, "Ready").unwrap().status, "True");
    assert_eq!(
        s.container_statuses.unwrap().len(),
        1,
        "ephemeral containers are not app containers"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_ephemeral_container_whose_target_does_not_run_waits_with_the_reason() {
    let h = start(vec![web()]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u-eph") == "Running"
    })
    .await;
    h.src.set(vec![with_ephemeral(
        web(),
        vec![debug_container("debugger", Some("nope"), "100000")],
    )]);
    h.until(Duration::from_secs(10), "waiting with the reason", |h| {
        ephemeral_state(h, "debugger")
            .and_then(|s| s.state)
            .and_then(|s| s.waiting)
            .is_some_and(|w| {
                w.reason.as_deref() == Some("CreateContainerConfigError")
                    && w.message.as_deref() == Some("unable to find target container nope")
            })
    })
    .await;
    assert!(h.rt.container_ids("u-eph", "debugger").is_empty());
    h.stop().await;
}

struct Custom {
    handle: crate::KubeletHandle,
    rt: Arc<SimRuntime>,
    sink: Arc<RecordingSink>,
    shutdown: CancellationToken,
}

fn custom(pods: Vec<Pod>, c: Config, store: Option<Arc<MemoryObjectStore>>) -> Custom {
    let rt = Arc::new(SimRuntime::new());
    let sink = Arc::new(RecordingSink::default());
    let mut b = Kubelet::builder()
        .config(c)
        .runtime(rt.clone())
        .container_manager(Arc::new(FakeContainerManager::default()))
        .status_sink(sink.clone())
        .source(Arc::new(StaticSource::new("file", pods)));
    if let Some(store) = store {
        b = b.object_store(store);
    }
    let kubelet = b.build().expect("build");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    tokio::spawn(kubelet.run(shutdown.clone()));
    Custom {
        handle,
        rt,
        sink,
        shutdown,
    }
}

fn rejection(c: &Custom, uid: &str) -> Option<(String, String)> {
    let s = c.handle.pod_status(uid)?;
    (s.phase.as_deref() == Some("Failed"))
        .then(|| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
}

#[tokio::test(start_paused = true)]
async fn sysctls_and_apparmor_are_checked_at_admission() {
    let sysctl = |uid: &str, name: &str| {
        PodBuilder::new(uid, uid)
            .container(ContainerBuilder::new("app", "img:1").build())
            .spec(|s| {
                s.security_context = Some(PodSecurityContext {
                    sysctls: Some(vec![Sysctl {
                        name: name.into(),
                        value: "1".into(),
                    }]),
                    ..Default::default()
                })
            })
            .build()
    };
    let apparmor = PodBuilder::new("aa", "u-aa")
        .container(
            ContainerBuilder::new("app", "img:1")
                .with(|c| {
                    c.security_context = Some(SecurityContext {
                        app_armor_profile: Some(AppArmorProfile {
                            type_: "RuntimeDefault".into(),
                            localhost_profile: None,
                        }),
                        ..Default::default()
                    })
                })
                .build(),
        )
        .build();
    let c = custom(
        vec![
            sysctl("u-safe", "net.ipv4.ip_unprivileged_port_start"),
            sysctl("u-unsafe", "kernel.msgmax"),
            sysctl("u-allowed", "net.core.somaxconn"),
            apparmor,
        ],
        Config {
            allowed_unsafe_sysctls: vec!["net.core.*".into()],
            apparmor_enabled: Some(false),
            ..config()
        },
        None,
    );
    crate::testing::eventually(Duration::from_secs(10), "decisions", || async {
        let running = |uid: &str| {
            c.handle.pod_status(uid).and_then(|s| s.phase).as_deref() == Some("Running")
        };
        (running("u-safe")
            && running("u-allowed")
            && rejection(&c, "u-unsafe").is_some()
            && rejection(&c, "u-aa").is_some())
        .then_some(())
    })
    .await;
    assert_eq!(
        rejection(&c, "u-unsafe").unwrap(),
        (
            "SysctlForbidden".to_string(),
            "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted".to_string()
        )
    );
    assert_eq!(
        rejection(&c, "u-aa").unwrap(),
        (
            "AppArmor".to_string(),
            "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
                .to_string()
        )
    );
    assert!(c.rt.container_ids("u-unsafe", "app").is_empty());
    c.shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_bad_unsafe_sysctl_pattern_is_a_configuration_error() {
    let err = Kubelet::builder()
        .config(Config {
            allowed_unsafe_sysctls: vec!["vm.swappiness".into()],
            ..config()
        })
        .runtime(Arc::new(SimRuntime::new()))
        .container_manager(Arc::new(FakeContainerManager::default()))
        .build()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("allowedUnsafeSysctls"), "{err}");
    assert!(
        err.to_string().contains("not known to be namespaced"),
        "{err}"
    );
}

fn with_class(uid: &str, class: &str) -> Pod {
    PodBuilder::new(uid, uid)
        .container(ContainerBuilder::new("app", "img:1").build())
        .spec(|s| s.runtime_class_name = Some(class.into()))
        .build()
}

fn sandbox_failures(c: &Custom) -> Vec<String> {
    c.sink
        .events()
        .into_iter()
        .filter(|e| e.reason == "FailedCreatePodSandBox")
        .map(|e| e.message)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn runtime_class_handler_goes_to_the_sandbox_and_an_unknown_class_is_an_error() {
    let store = Arc::new(MemoryObjectStore::new());
    store.put_runtime_class(RuntimeClass {
        metadata: ObjectMeta {
            name: Some("fast".into()),
            ..Default::default()
        },
        handler: "runc-fast".into(),
        ..Default::default()
    });
    let c = custom(
        vec![with_class("u-fast", "fast"), with_class("u-gone", "gone")],
        config(),
        Some(store),
    );
    crate::testing::eventually(
        Duration::from_secs(10),
        "fast running, gone refused",
        || async {
            (c.handle
                .pod_status("u-fast")
                .and_then(|s| s.phase)
                .as_deref()
                == Some("Running")
                && !sandbox_failures(&c).is_empty())
            .then_some(())
        },
    )
    .await;
    assert_eq!(
        c.rt.sandbox_handlers("u-fast"),
        vec!["runc-fast".to_string()]
    );
    assert!(c.rt.sandbox_handlers("u-gone").is_empty());
    assert!(sandbox_failures(&c)
        .iter()
        .all(|m| m == "Failed to create pod sandbox: runtimeclass.node.k8s.io \"gone\" not found"));
    assert_eq!(
        c.handle
            .pod_status("u-gone")
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Pending")
    );
    c.shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn host_users_false_is_refused_on_a_runtime_without_user_namespaces() {
    let p = PodBuilder::new("userns", "u-userns")
        .container(ContainerBuilder::new("app", "img:1").build())
        .spec(|s| s.host_users = Some(false))
        .build();
    let standalone_class = with_class("u-class", "fast");
    let c = custom(vec![p, standalone_class], config(), None);
    crate::testing::eventually(Duration::from_secs(10), "refusals", || async {
        (sandbox_failures(&c).len() >= 2).then_some(())
    })
    .await;
    let failures = sandbox_failures(&c);
    assert!(failures.contains(
        &"Failed to create pod sandbox: RuntimeClass handler \"\" does not support user namespaces"
            .to_string()
    ), "{failures:?}");
    assert!(
        failures
            .iter()
            .any(|m| m.contains("RuntimeClass \"fast\" cannot be looked up")),
        "{failures:?}"
    );
    assert!(c.rt.sandbox_handlers("u-userns").is_empty());
    c.shutdown.cancel();
}

/// A pod whose secret volume cannot be set up (standalone: no API server to read it from).
fn with_unavailable_secret(b: PodBuilder) -> Pod {
    b.container(
        ContainerBuilder::new("app", "img:1")
            .mount("s", "/s")
            .build(),
    )
    .volume(Volume {
        name: "s".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some("missing".into()),
            ..Default::default()
        }),
        ..Default::default()
    })
    .build()
}

#[tokio::test(start_paused = true)]
async fn containers_whose_volumes_fail_wait_with_gos_default_reason() {
    // Go leaves them in the default waiting state: ContainerCreating, or PodInitializing in a
    // pod with init containers (the InitContainer conformance specs watch every status update
    // of such a pod for PodInitializing on its app containers).
    let plain = with_unavailable_secret(PodBuilder::new("plain", "u-vol-plain"));
    let inits = with_unavailable_secret(
        PodBuilder::new("inits", "u-vol-inits")
            .init_container(ContainerBuilder::new("init", "img:1").build()),
    );
    let h = start(vec![plain, inits]).await;
    h.until(Duration::from_secs(10), "the FailedMount event", |h| {
        h.sink
            .events()
            .iter()
            .filter(|e| e.reason == "FailedMount")
            .count()
            >= 2
    })
    .await;
    h.until(Duration::from_secs(10), "the waiting reasons", |h| {
        h.waiting_reason("u-vol-plain", "app").as_deref() == Some("ContainerCreating")
            && h.waiting_reason("u-vol-inits", "app").as_deref() == Some("PodInitializing")
    })
    .await;
    let init = h
        .status("u-vol-inits")
        .and_then(|s| s.init_container_statuses)
        .and_then(|cs| cs.into_iter().find(|c| c.name == "init"))
        .and_then(|c| c.state)
        .and_then(|s| s.waiting)
        .and_then(|w| w.reason);
    assert_eq!(init.as_deref(), Some("PodInitializing"));
    assert!(h.rt.container_ids("u-vol-inits", "init").is_empty());
    assert!(h.rt.container_ids("u-vol-plain", "app").is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_volume_set_up_is_retried_after_100_ms_doubling_to_2_s() {
    let h = start(vec![with_unavailable_secret(PodBuilder::new(
        "retried",
        "u-vol-retry",
    ))])
    .await;
    let failures = |h: &Harness| {
        h.sink
            .events()
            .iter()
            .filter(|e| e.reason == "FailedMount")
            .count()
    };
    // When each failure was seen, polled every 5 ms of virtual time.
    let mut seen_at = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen_at.len() < 8 && tokio::time::Instant::now() < deadline {
        if failures(&h) > seen_at.len() {
            seen_at.push(tokio::time::Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let gaps: Vec<u128> = seen_at
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_millis())
        .collect();
    assert_eq!(gaps.len(), 7, "{gaps:?}");
    for (gap, want) in gaps.iter().zip([100, 200, 400, 800, 1600, 2000, 2000]) {
        assert!((want..want + 10).contains(gap), "gaps {gaps:?} ms");
    }
    h.stop().await;
}
