//! The CPU manager's `static` policy on this machine, with real containerd and the real
//! container manager: the checks of the upstream node e2e `cpu_manager_test.go` that fit
//! 2 CPUs. CPU 0 is reserved (`reservedSystemCPUs`), so a Guaranteed 1-CPU container gets
//! CPU 1 and everything else shares what is left: `0-1` alone, `0` beside it, `0-1` again
//! once it is gone. The state file is Go's format, and a restarted kubelet keeps the
//! assignment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::cpumanager::{
    CpuManagerCheckpoint, CpuManagerConfig, CpuManagerPolicy, CpuSet, STATE_FILE,
};
use kubelet_core::runtime::{ContainerRuntime, ContainerState};
use kubelet_core::testing::StaticSource;
use kubelet_core::topologymanager::{TopologyHint, TopologyPolicy, TopologyScope};
use kubelet_core::PodSource;
use kubelet_tests::engine::{busybox, resources, wait_running, EngineTest};

/// `Cpus_allowed_list` of the pod's running container's main process, through `exec`.
async fn allowed_cpus(t: &EngineTest, uid: &str) -> Option<String> {
    let c = t
        .containers(uid)
        .await
        .into_iter()
        .find(|c| c.state == ContainerState::Running)?;
    let cmd = ["grep", "Cpus_allowed_list", "/proc/1/status"].map(String::from);
    let out = t
        .runtime
        .exec_sync(&c.id, &cmd, Duration::from_secs(10))
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.split_whitespace().nth(1)?.to_string())
}

async fn wait_cpus(t: &EngineTest, uid: &str, want: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        last = allowed_cpus(t, uid).await;
        if last.as_deref() == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{what}: Cpus_allowed_list is {last:?}, want {want:?}");
}

fn state(t: &EngineTest) -> CpuManagerCheckpoint {
    let bytes = std::fs::read(t.root_dir().join(STATE_FILE)).expect("the state file");
    CpuManagerCheckpoint::from_json(&bytes, "static").expect("Go's format and checksum")
}

#[tokio::test(flavor = "multi_thread")]
async fn guaranteed_containers_get_exclusive_cpus_and_the_rest_share_the_others() {
    let Some(mut t) = EngineTest::new("cpumanager").await else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus != 2 {
        eprintln!("SKIPPED: written for this project's 2-CPU machines, this one has {cpus}");
        return;
    }
    t.new_container_manager_with(|c| c.reserved_system_cpus = "0".into())
        .await;
    let mut config = t.config();
    config.cpu_manager = CpuManagerConfig {
        policy: CpuManagerPolicy::Static,
        reconcile_period: Duration::from_secs(1),
        reserved_system_cpus: Some(CpuSet::parse("0").unwrap()),
        ..Default::default()
    };
    let (shared, exclusive) = (t.uid("shared"), t.uid("excl"));
    let shared_pod = t.pod("shared", &shared, vec![busybox("c", "exec sleep 3600")]);
    let mut g = busybox("c", "exec sleep 3600");
    g.resources = Some(resources(
        &[("cpu", "1"), ("memory", "64Mi")],
        &[("cpu", "1"), ("memory", "64Mi")],
    ));
    let exclusive_pod = t.pod("exclusive", &exclusive, vec![g]);

    // A non-Guaranteed pod alone: every CPU.
    let source = Arc::new(StaticSource::new("file", vec![shared_pod.clone()]));
    let k = t.start_with(config.clone(), vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &shared, Duration::from_secs(60)).await;
    wait_cpus(&t, &shared, "0-1", "the shared pod alone").await;
    assert_eq!(state(&t).default_cpu_set.to_string(), "0-1");

    // A Guaranteed 1-CPU pod: CPU 1 (0 is reserved); the shared pod moves to 0.
    source.set(vec![shared_pod.clone(), exclusive_pod.clone()]);
    wait_running(&k.handle, &exclusive, Duration::from_secs(60)).await;
    wait_cpus(&t, &exclusive, "1", "the Guaranteed pod").await;
    wait_cpus(&t, &shared, "0", "the shared pod beside it").await;
    let st = state(&t);
    assert_eq!(st.default_cpu_set.to_string(), "0");
    assert_eq!(st.entries[&exclusive]["c"].to_string(), "1");

    // A restarted kubelet finds the assignment and keeps it.
    k.stop().await;
    let k = t.start_with(config.clone(), vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &exclusive, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_cpus(&t, &exclusive, "1", "the Guaranteed pod after a restart").await;
    wait_cpus(&t, &shared, "0", "the shared pod after a restart").await;
    assert_eq!(state(&t).entries[&exclusive]["c"].to_string(), "1");

    // The Guaranteed pod goes: its CPU returns to the shared pool and the shared pod.
    source.set(vec![shared_pod.clone()]);
    wait_cpus(
        &t,
        &shared,
        "0-1",
        "the shared pod once the Guaranteed pod is gone",
    )
    .await;
    let st = state(&t);
    assert_eq!(st.default_cpu_set.to_string(), "0-1");
    assert!(st.entries.is_empty(), "{:?}", st.entries);
    k.stop().await;
}

/// Every topology manager policy and scope on this one-NUMA-node machine: the pods are
/// admitted, the hint is computed (node 0, preferred; `single-numa-node` reports it as "any
/// node" since the one node is all of them, as Go), and the CPU manager allocates within it.
#[tokio::test(flavor = "multi_thread")]
async fn topology_manager_policies_admit_and_align_on_this_node() {
    let Some(mut t) = EngineTest::new("topologymanager").await else {
        return;
    };
    if std::thread::available_parallelism().map_or(1, usize::from) != 2 {
        eprintln!("SKIPPED: written for this project's 2-CPU machines");
        return;
    }
    t.new_container_manager_with(|c| c.reserved_system_cpus = "0".into())
        .await;
    let cases = [
        (
            TopologyPolicy::BestEffort,
            TopologyScope::Container,
            Some(TopologyHint::on(&[0], true)),
        ),
        (
            TopologyPolicy::Restricted,
            TopologyScope::Container,
            Some(TopologyHint::on(&[0], true)),
        ),
        (
            TopologyPolicy::SingleNumaNode,
            TopologyScope::Container,
            Some(TopologyHint::any(true)),
        ),
        (
            TopologyPolicy::BestEffort,
            TopologyScope::Pod,
            Some(TopologyHint::on(&[0], true)),
        ),
        (
            TopologyPolicy::SingleNumaNode,
            TopologyScope::Pod,
            Some(TopologyHint::any(true)),
        ),
        (TopologyPolicy::None, TopologyScope::Container, None),
    ];
    for (i, (policy, scope, want)) in cases.into_iter().enumerate() {
        let mut config = t.config();
        config.cpu_manager = CpuManagerConfig {
            policy: CpuManagerPolicy::Static,
            reconcile_period: Duration::from_secs(1),
            reserved_system_cpus: Some(CpuSet::parse("0").unwrap()),
            ..Default::default()
        };
        config.topology_manager_policy = policy;
        config.topology_manager_scope = scope;
        let uid = t.uid(&format!("g{i}"));
        let mut g = busybox("c", "exec sleep 3600");
        g.resources = Some(resources(
            &[("cpu", "1"), ("memory", "64Mi")],
            &[("cpu", "1"), ("memory", "64Mi")],
        ));
        let source = Arc::new(StaticSource::new("file", vec![t.pod("g", &uid, vec![g])]));
        let k = t.start_with(config, vec![source.clone() as Arc<dyn PodSource>]);
        let what = format!("{policy:?}/{scope:?}");
        wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
        assert_eq!(k.handle.topology_affinity(&uid, "c"), want, "{what}");
        wait_cpus(&t, &uid, "1", &what).await;
        assert_eq!(
            k.handle.cpu_manager_state().entries[&uid]["c"].to_string(),
            "1",
            "{what}"
        );
        // The pod goes before the next policy's kubelet starts on the same root dir.
        source.set(vec![]);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !t.containers(&uid).await.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        k.stop().await;
    }
}
