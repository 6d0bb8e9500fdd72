//! The rest of the pod API on the real containerd, through the real engine: sysctls,
//! seccomp (Localhost profiles under the root dir, seccompDefault), AppArmor refusal,
//! RuntimeClass handlers and overhead, hostUsers refusal, ephemeral containers in the
//! target's process namespace, readiness gates, cpuCFSQuotaPeriod and podPidsLimit — and the
//! error a user sees where a field cannot be honoured.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    AppArmorProfile, EphemeralContainer, Pod, PodCondition, PodReadinessGate, PodSecurityContext,
    PodStatus, SeccompProfile, SecurityContext, Sysctl,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_cm::{CmConfig, LinuxContainerManager};
use kubelet_core::metrics::InstrumentedRuntime;
use kubelet_core::objects::MemoryObjectStore;
use kubelet_core::testing::{RecordingSink, StaticSource};
use kubelet_core::{ContainerRuntime, KubeletHandle, PodSource};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use kubelet_tests::engine::{
    busybox, condition, container_status, resources, wait_running, wait_until, EngineTest,
    ScopedRuntime,
};

fn endpoint() -> String {
    std::env::var("KUBELET_RS_CRI_ENDPOINT")
        .unwrap_or_else(|_| "unix:///run/kubelet-rs/containerd/containerd.sock".into())
}

/// Re-connects the test's runtime with CRI options (seccomp root, CFS period, …).
async fn with_cri(t: &mut EngineTest, f: impl FnOnce(&mut CriConfig)) {
    let mut cfg = CriConfig {
        runtime_endpoint: endpoint(),
        request_timeout: Duration::from_secs(60),
        pod_logs_dir: t.dir.path().join("pods"),
        containers_log_dir: t.dir.path().join("containers"),
        ..CriConfig::default()
    };
    f(&mut cfg);
    let cri = Arc::new(CriRuntime::connect(cfg).await.unwrap());
    t.runtime = Arc::new(ScopedRuntime::new(cri, &t.namespace));
}

async fn exec(t: &EngineTest, status: &PodStatus, container: &str, cmd: &[&str]) -> (i32, String) {
    let id = container_status(status, container)
        .and_then(|c| c.container_id.clone())
        .expect("container id");
    let id = id.trim_start_matches("containerd://");
    let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    let out = t
        .cri
        .exec_sync(id, &cmd, Duration::from_secs(10))
        .await
        .unwrap();
    (
        out.exit_code,
        String::from_utf8_lossy(&out.stdout).trim().to_string()
            + String::from_utf8_lossy(&out.stderr).trim(),
    )
}

async fn rejected(handle: &KubeletHandle, uid: &str) -> (String, String) {
    wait_until(Duration::from_secs(30), "pod rejected", || {
        let s = handle.pod_status(uid)?;
        (s.phase.as_deref() == Some("Failed")).then(|| {
            (
                s.reason.clone().unwrap_or_default(),
                s.message.clone().unwrap_or_default(),
            )
        })
    })
    .await
}

fn events(sink: &RecordingSink, reason: &str) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message)
        .collect()
}

fn sysctl_pod(t: &EngineTest, name: &str, uid: &str, sysctls: &[(&str, &str)]) -> Pod {
    let mut p = t.pod(name, uid, vec![busybox("app", "exec sleep 3600")]);
    p.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
        sysctls: Some(
            sysctls
                .iter()
                .map(|(n, v)| Sysctl {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
        ),
        ..Default::default()
    });
    p
}

#[tokio::test(flavor = "multi_thread")]
async fn sysctls_safe_allowed_and_forbidden() {
    let Some(t) = EngineTest::new("sysctls").await else {
        return;
    };
    let (safe, unsafe_, allowed) = (t.uid("safe"), t.uid("unsafe"), t.uid("allowed"));
    let pods = vec![
        sysctl_pod(
            &t,
            "safe",
            &safe,
            &[("net.ipv4.ip_unprivileged_port_start", "80")],
        ),
        sysctl_pod(&t, "unsafe", &unsafe_, &[("kernel.msgmax", "4096")]),
        sysctl_pod(&t, "allowed", &allowed, &[("net.core.somaxconn", "1234")]),
    ];
    let config = kubelet_core::Config {
        allowed_unsafe_sysctls: vec!["net.core.*".into()],
        ..t.config()
    };
    let k = t.start_with(
        config,
        vec![Arc::new(StaticSource::new("file", pods)) as Arc<dyn PodSource>],
    );
    let s = wait_running(&k.handle, &safe, Duration::from_secs(60)).await;
    let (code, out) = exec(
        &t,
        &s,
        "app",
        &["cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"],
    )
    .await;
    assert_eq!((code, out.as_str()), (0, "80"));
    let s = wait_running(&k.handle, &allowed, Duration::from_secs(60)).await;
    let (_, out) = exec(&t, &s, "app", &["cat", "/proc/sys/net/core/somaxconn"]).await;
    assert_eq!(out, "1234");
    let (reason, message) = rejected(&k.handle, &unsafe_).await;
    assert_eq!(reason, "SysctlForbidden");
    assert_eq!(
        message,
        "Pod was rejected: forbidden sysctl: \"kernel.msgmax\" not allowlisted"
    );
    assert!(t.sandboxes(&unsafe_).await.is_empty());
    k.stop().await;
}

fn seccomp_pod(t: &EngineTest, name: &str, uid: &str, profile: Option<SeccompProfile>) -> Pod {
    let mut c = busybox("app", "exec sleep 3600");
    c.security_context = profile.map(|p| SecurityContext {
        seccomp_profile: Some(p),
        ..Default::default()
    });
    t.pod(name, uid, vec![c])
}

#[tokio::test(flavor = "multi_thread")]
async fn seccomp_localhost_profiles_and_seccomp_default() {
    let Some(mut t) = EngineTest::new("seccomp").await else {
        return;
    };
    let root = t.dir.path().join("root").join("seccomp");
    std::fs::create_dir_all(root.join("profiles")).unwrap();
    // Everything allowed but mkdir/mkdirat, which fail with EPERM.
    std::fs::write(
        root.join("profiles/no-mkdir.json"),
        r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}"#,
    )
    .unwrap();
    with_cri(&mut t, |c| {
        c.seccomp_profile_root = root.clone();
        c.seccomp_default = true;
    })
    .await;
    let local = |name: &str| SeccompProfile {
        type_: "Localhost".into(),
        localhost_profile: Some(name.into()),
    };
    let (l, missing, d, u) = (
        t.uid("local"),
        t.uid("missing"),
        t.uid("default"),
        t.uid("unconf"),
    );
    let pods = vec![
        seccomp_pod(&t, "local", &l, Some(local("profiles/no-mkdir.json"))),
        seccomp_pod(&t, "missing", &missing, Some(local("profiles/nope.json"))),
        seccomp_pod(&t, "default", &d, None),
        seccomp_pod(
            &t,
            "unconf",
            &u,
            Some(SeccompProfile {
                type_: "Unconfined".into(),
                localhost_profile: None,
            }),
        ),
    ];
    let k = t.start(vec![
        Arc::new(StaticSource::new("file", pods)) as Arc<dyn PodSource>
    ]);
    let s = wait_running(&k.handle, &l, Duration::from_secs(60)).await;
    let (code, out) = exec(&t, &s, "app", &["mkdir", "/tmp/x"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    let (_, status) = exec(&t, &s, "app", &["grep", "Seccomp:", "/proc/self/status"]).await;
    assert!(status.ends_with('2'), "{status}");
    // seccompDefault: RuntimeDefault (filter mode 2); Unconfined: none (0).
    let s = wait_running(&k.handle, &d, Duration::from_secs(60)).await;
    let (_, status) = exec(&t, &s, "app", &["grep", "Seccomp:", "/proc/self/status"]).await;
    assert!(status.ends_with('2'), "{status}");
    let s = wait_running(&k.handle, &u, Duration::from_secs(60)).await;
    let (_, status) = exec(&t, &s, "app", &["grep", "Seccomp:", "/proc/self/status"]).await;
    assert!(status.ends_with('0'), "{status}");
    // A missing profile: the container does not start; the reason says which file.
    let message = wait_until(Duration::from_secs(30), "CreateContainerError", || {
        let s = k.handle.pod_status(&missing)?;
        let w = container_status(&s, "app")?.state.clone()?.waiting?;
        (w.reason.as_deref() == Some("CreateContainerError"))
            .then_some(w.message.unwrap_or_default())
    })
    .await;
    assert!(message.contains("profiles/nope.json"), "{message}");
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn apparmor_is_refused_on_a_host_without_it() {
    let Some(t) = EngineTest::new("apparmor").await else {
        return;
    };
    if kubelet_core::admission::apparmor::host_enabled() {
        eprintln!("this host enforces AppArmor: the refusal is not what happens here");
        return;
    }
    let uid = t.uid("aa");
    let mut c = busybox("app", "exec sleep 3600");
    c.security_context = Some(SecurityContext {
        app_armor_profile: Some(AppArmorProfile {
            type_: "Localhost".into(),
            localhost_profile: Some("k8s-deny-write".into()),
        }),
        ..Default::default()
    });
    let pod = t.pod("aa", &uid, vec![c]);
    let k = t.start(vec![
        Arc::new(StaticSource::new("file", vec![pod])) as Arc<dyn PodSource>
    ]);
    let (reason, message) = rejected(&k.handle, &uid).await;
    assert_eq!(reason, "AppArmor");
    assert_eq!(
        message,
        "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
    );
    assert!(t.sandboxes(&uid).await.is_empty());
    k.stop().await;
}

fn class(name: &str, handler: &str) -> RuntimeClass {
    RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        handler: handler.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_class_handlers_overhead_and_host_users() {
    let Some(t) = EngineTest::new("runtimeclass").await else {
        return;
    };
    let store = Arc::new(MemoryObjectStore::new());
    store.put_runtime_class(class("runc-class", "runc"));
    store.put_runtime_class(class("no-such-handler", "kata-nope"));
    let (ok, bad_handler, unknown, userns) = (
        t.uid("ok"),
        t.uid("badh"),
        t.uid("unknown"),
        t.uid("userns"),
    );
    let with_class = |name: &str, uid: &str, class: &str| {
        let mut p = t.pod(
            name,
            uid,
            vec![{
                let mut c = busybox("app", "exec sleep 3600");
                c.resources = Some(resources(
                    &[("cpu", "100m"), ("memory", "64Mi")],
                    &[("cpu", "100m"), ("memory", "64Mi")],
                ));
                c
            }],
        );
        let s = p.spec.as_mut().unwrap();
        s.runtime_class_name = Some(class.into());
        // What the API server's RuntimeClass admission sets from the class's overhead.
        s.overhead = Some(
            [("memory".to_string(), Quantity("32Mi".into()))]
                .into_iter()
                .collect(),
        );
        p
    };
    let mut host_users = t.pod("userns", &userns, vec![busybox("app", "exec sleep 3600")]);
    host_users.spec.as_mut().unwrap().host_users = Some(false);
    let pods = vec![
        with_class("ok", &ok, "runc-class"),
        with_class("badh", &bad_handler, "no-such-handler"),
        with_class("unknown", &unknown, "gone"),
        host_users,
    ];
    let sink = Arc::new(RecordingSink::default());
    let (store2, sink2) = (store.clone(), sink.clone());
    let runtime: Arc<dyn ContainerRuntime> = t.runtime.clone();
    let k = t.start_customized(
        t.config(),
        vec![Arc::new(StaticSource::new("file", pods)) as Arc<dyn PodSource>],
        // Instrumented as kubelet-bin wires it, so kubelet_run_podsandbox_errors_total counts.
        move |b| {
            b.object_store(store2)
                .status_sink(sink2)
                .runtime(Arc::new(InstrumentedRuntime::new(runtime)))
        },
    );
    wait_running(&k.handle, &ok, Duration::from_secs(60)).await;
    // Overhead: the pod cgroup's memory limit is the containers' limits plus the overhead.
    let mem = t
        .pod_cgroup_dirs(&ok)
        .into_iter()
        .find(|d| d.join("memory.limit_in_bytes").exists())
        .expect("pod memory cgroup");
    let limit = std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap();
    assert_eq!(limit.trim(), (96u64 << 20).to_string());
    let failures = wait_until(Duration::from_secs(60), "sandbox refusals", || {
        let f = events(&sink, "FailedCreatePodSandBox");
        let has = |s: &str| f.iter().any(|m| m.contains(s));
        (has("kata-nope") && has("not found") && has("user namespaces")).then_some(f)
    })
    .await;
    assert!(
        failures.contains(
            &"Failed to create pod sandbox: runtimeclass.node.k8s.io \"gone\" not found"
                .to_string()
        ),
        "{failures:?}"
    );
    assert!(failures.contains(&"Failed to create pod sandbox: RuntimeClass handler \"\" does not support user namespaces".to_string()), "{failures:?}");
    // containerd's own refusal of an unknown handler reaches the user.
    assert!(
        failures
            .iter()
            .any(|m| m.starts_with("Failed to create pod sandbox: ") && m.contains("kata-nope")),
        "{failures:?}"
    );
    for uid in [&unknown, &userns] {
        assert!(t.sandboxes(uid).await.is_empty(), "{uid}");
        let s = k.handle.pod_status(uid).unwrap();
        assert_eq!(s.phase.as_deref(), Some("Pending"));
    }
    let m = kubelet_core::metrics::global();
    assert!(m.run_podsandbox_errors.get("kata-nope") >= 1);
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ephemeral_containers_join_the_target_and_are_never_restarted() {
    let Some(t) = EngineTest::new("ephemeral").await else {
        return;
    };
    let uid = t.uid("dbg");
    let base = t.pod("dbg", &uid, vec![busybox("app", "exec sleep 3600")]);
    let source = Arc::new(StaticSource::new("file", vec![base.clone()]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    // kubectl debug --target=app: the debugger sees the app's processes, prints them, exits.
    let mut debugged = base.clone();
    debugged.spec.as_mut().unwrap().ephemeral_containers = Some(vec![EphemeralContainer {
        name: "debugger".into(),
        image: Some("kubelet-rs.local/busybox:1.0".into()),
        image_pull_policy: Some("IfNotPresent".into()),
        command: Some(vec!["sh".into(), "-c".into(), "ps; sleep 2; exit 3".into()]),
        target_container_name: Some("app".into()),
        ..Default::default()
    }]);
    source.set(vec![debugged]);
    let st = wait_until(Duration::from_secs(60), "debugger exited", || {
        let s = k.handle.pod_status(&uid)?;
        let e = s
            .ephemeral_container_statuses
            .clone()?
            .into_iter()
            .find(|c| c.name == "debugger")?;
        e.state.clone()?.terminated.is_some().then_some(e)
    })
    .await;
    assert_eq!(st.state.unwrap().terminated.unwrap().exit_code, 3);
    let log = t
        .pod_logs_dir()
        .join(format!("{}_dbg_{uid}", t.namespace))
        .join("debugger/0.log");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("sleep 3600"),
        "the target's process is visible: {text}"
    );
    tokio::time::sleep(Duration::from_secs(8)).await;
    let s = k.handle.pod_status(&uid).unwrap();
    let e = s
        .ephemeral_container_statuses
        .clone()
        .unwrap()
        .into_iter()
        .find(|c| c.name == "debugger")
        .unwrap();
    assert_eq!(e.restart_count, 0);
    assert_eq!(
        t.containers(&uid)
            .await
            .iter()
            .filter(|c| c.name == "debugger")
            .count(),
        1
    );
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(condition(&s, "Ready").as_deref(), Some("True"));
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_gates_on_containerd() {
    let Some(t) = EngineTest::new("gates").await else {
        return;
    };
    let uid = t.uid("gate");
    let mut p = t.pod("gate", &uid, vec![busybox("app", "exec sleep 3600")]);
    p.spec.as_mut().unwrap().readiness_gates = Some(vec![PodReadinessGate {
        condition_type: "example.com/ready".into(),
    }]);
    let source = Arc::new(StaticSource::new("file", vec![p.clone()]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_until(Duration::from_secs(60), "Running, not Ready", || {
        let s = k.handle.pod_status(&uid)?;
        (s.phase.as_deref() == Some("Running")
            && condition(&s, "ContainersReady").as_deref() == Some("True")
            && condition(&s, "Ready").as_deref() == Some("False"))
        .then_some(())
    })
    .await;
    p.status = Some(PodStatus {
        conditions: Some(vec![PodCondition {
            type_: "example.com/ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    source.set(vec![p]);
    wait_until(Duration::from_secs(30), "Ready", || {
        let s = k.handle.pod_status(&uid)?;
        (condition(&s, "Ready").as_deref() == Some("True")).then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cfs_quota_period_and_pod_pids_limit() {
    let Some(mut t) = EngineTest::new("cfs").await else {
        return;
    };
    with_cri(&mut t, |c| {
        c.cpu_cfs_quota_period = Duration::from_millis(50)
    })
    .await;
    let cm_config = CmConfig {
        root_dir: t.dir.path().join("root"),
        cgroup_root: t.cgroup_root.clone(),
        fail_swap_on: false,
        pod_pids_limit: 321,
        cpu_cfs_quota_period: Duration::from_millis(50),
        ..CmConfig::default()
    };
    t.cm = Arc::new(
        tokio::task::spawn_blocking(move || LinuxContainerManager::new(cm_config))
            .await
            .unwrap()
            .unwrap(),
    );
    let uid = t.uid("cfs");
    let mut c = busybox("app", "exec sleep 3600");
    c.resources = Some(resources(
        &[("cpu", "500m")],
        &[("cpu", "500m"), ("memory", "32Mi")],
    ));
    let pod = t.pod("cfs", &uid, vec![c]);
    let k = t.start(vec![
        Arc::new(StaticSource::new("file", vec![pod])) as Arc<dyn PodSource>
    ]);
    let s = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let dirs = t.pod_cgroup_dirs(&uid);
    let read = |file: &str| {
        dirs.iter()
            .find(|d| d.join(file).exists())
            .map(|d| {
                std::fs::read_to_string(d.join(file))
                    .unwrap()
                    .trim()
                    .to_string()
            })
            .unwrap_or_else(|| panic!("{file} in {dirs:?}"))
    };
    assert_eq!(read("pids.max"), "321");
    assert_eq!(read("cpu.cfs_period_us"), "50000");
    assert_eq!(read("cpu.cfs_quota_us"), "25000");
    // The container's own cgroup, set by the runtime from the CRI resources.
    let id = container_status(&s, "app")
        .unwrap()
        .container_id
        .clone()
        .unwrap();
    let id = id.trim_start_matches("containerd://").to_string();
    let cpu_dir = dirs
        .iter()
        .find(|d| d.join("cpu.cfs_period_us").exists())
        .unwrap()
        .join(&id);
    let period = std::fs::read_to_string(cpu_dir.join("cpu.cfs_period_us")).unwrap();
    let quota = std::fs::read_to_string(cpu_dir.join("cpu.cfs_quota_us")).unwrap();
    assert_eq!((period.trim(), quota.trim()), ("50000", "25000"));
    k.stop().await;
}
