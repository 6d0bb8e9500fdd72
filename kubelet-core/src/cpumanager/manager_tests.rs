#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::cpumanager::topology::fixtures::single_socket_ht;
use crate::runtime::PodRef;
use crate::testing::{ContainerBuilder, PodBuilder};

fn static_config() -> CpuManagerConfig {
    CpuManagerConfig {
        policy: CpuManagerPolicy::Static,
        ..Default::default()
    }
}

/// A pod with one container asking for `cpu` (requests = limits, so Guaranteed).
fn pod(uid: &str, cpu: &str) -> Arc<Pod> {
    let c = ContainerBuilder::new("app", "busybox")
        .requests(&[("cpu", cpu), ("memory", "64Mi")])
        .limits(&[("cpu", cpu), ("memory", "64Mi")])
        .build();
    Arc::new(PodBuilder::new(uid, uid).container(c).build())
}

fn running(id: &str, uid: &str) -> ContainerSummary {
    ContainerSummary {
        id: id.into(),
        sandbox_id: format!("sb-{uid}"),
        pod: PodRef {
            uid: uid.into(),
            name: uid.into(),
            namespace: "default".into(),
        },
        name: "app".into(),
        attempt: 0,
        hash: 0,
        image: String::new(),
        image_ref: String::new(),
        state: ContainerState::Running,
        created_at: 0,
    }
}

async fn started(dir: &Path, config: CpuManagerConfig) -> Arc<CpuManager> {
    let m = CpuManager::new(config, single_socket_ht(), 1000, dir).unwrap();
    m.start().await.unwrap();
    Arc::new(m)
}

/// Admission as the sync loop does it with the topology manager's `none` policy: stale
/// assignments released, then every container allocated; `Err` is the rejection message.
fn admit(m: &Arc<CpuManager>, pod: &Pod, active: Option<&[Arc<Pod>]>) -> Result<(), String> {
    m.release_stale(pod, active);
    let mut topology = crate::topologymanager::TopologyManager::none();
    topology.add_provider(m.clone());
    topology.admit(pod).map_err(|(_, message)| message)
}

#[tokio::test]
async fn a_fresh_node_writes_gos_empty_state() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    let file = std::fs::read(dir.path().join(STATE_FILE)).unwrap();
    let state = CpuManagerCheckpoint::from_json(&file, "static").unwrap();
    assert_eq!(state.default_cpu_set.to_string(), "0-7");
    assert_eq!(m.container_cpus("any", "app").unwrap().to_string(), "0-7");

    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), CpuManagerConfig::default()).await;
    let file = std::fs::read(dir.path().join(STATE_FILE)).unwrap();
    let state = CpuManagerCheckpoint::from_json(&file, "none").unwrap();
    assert!(state.default_cpu_set.is_empty());
    assert_eq!(
        m.container_cpus("any", "app"),
        None,
        "none: the runtime's default"
    );
    assert_eq!(admit(&m, &pod("g", "2"), Some(&[])), Ok(()));
    assert!(m
        .reconcile_plan(&[], true, &[running("c1", "g")])
        .is_empty());
}

#[tokio::test]
async fn guaranteed_pods_get_exclusive_cpus_that_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    let g = pod("g", "2");
    admit(&m, &g, Some(&[])).unwrap();
    m.persist().await.unwrap();
    assert_eq!(m.container_cpus("g", "app").unwrap().to_string(), "1,5");
    assert_eq!(
        m.container_cpus("other", "app").unwrap().to_string(),
        "0,2-4,6-7"
    );

    // A second kubelet on the same root dir finds the assignment.
    let again = started(dir.path(), static_config()).await;
    assert_eq!(entries(&again)["g"]["app"], "1,5");
    assert_eq!(
        again.container_cpus("other", "app").unwrap().to_string(),
        "0,2-4,6-7"
    );
}

#[tokio::test]
async fn a_state_file_of_the_other_policy_stops_the_start_with_gos_message() {
    let dir = tempfile::tempdir().unwrap();
    started(dir.path(), CpuManagerConfig::default()).await;
    let m = CpuManager::new(static_config(), single_socket_ht(), 1000, dir.path()).unwrap();
    let err = m.start().await.unwrap_err().to_string();
    let file = dir.path().join(STATE_FILE);
    assert_eq!(
        err,
        format!("could not restore state from checkpoint: configured policy \"static\" differs from state checkpoint policy \"none\", please drain this node and delete the CPU manager checkpoint file {file:?} before restarting Kubelet")
    );
    std::fs::write(
        &file,
        b"{\"policyName\":\"static\",\"defaultCpuSet\":\"0-9\",\"checksum\":0}",
    )
    .unwrap();
    let err = m.start().await.unwrap_err().to_string();
    assert!(
        err.contains("doesn't match with CPUs in state \"0-9\""),
        "{err}"
    );
}

#[tokio::test]
async fn a_pod_that_cannot_get_its_cpus_is_rejected_and_inactive_pods_give_theirs_back() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    let big = pod("big", "6");
    admit(&m, &big, Some(&[])).unwrap();
    let err = admit(&m, &pod("more", "2"), Some(std::slice::from_ref(&big))).unwrap_err();
    assert_eq!(
        err,
        "Allocate failed due to not enough cpus available to satisfy request, which is unexpected"
    );
    // Before the sources are all seen, `big` may still be coming back: nothing is released.
    assert!(admit(&m, &pod("more", "2"), None).is_err());
    // `big` is gone (no longer active): its CPUs come back for the next pod.
    admit(&m, &pod("more", "2"), Some(&[])).unwrap();
    let e = entries(&m);
    assert!(!e.contains_key("big"), "{e:?}");
    assert_eq!(e["more"]["app"], "1,5");
}

#[tokio::test]
async fn reconcile_updates_running_containers_whose_cpus_changed() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    let shared = pod("shared", "500m");
    admit(&m, &shared, Some(&[])).unwrap();
    let listed = [running("c-shared", "shared")];
    let plan = m.reconcile_plan(std::slice::from_ref(&shared), true, &listed);
    assert_eq!(
        plan,
        [("c-shared".to_string(), CpuSet::parse("0-7").unwrap())]
    );
    for (id, cpus) in plan {
        m.applied(&id, cpus);
    }
    assert!(
        m.reconcile_plan(std::slice::from_ref(&shared), true, &listed)
            .is_empty(),
        "nothing changed"
    );

    // A Guaranteed pod takes two CPUs: the shared container moves off them.
    let g = pod("g", "2");
    admit(&m, &g, Some(std::slice::from_ref(&shared))).unwrap();
    let listed = [running("c-shared", "shared"), running("c-g", "g")];
    let mut plan = m.reconcile_plan(&[shared.clone(), g.clone()], true, &listed);
    plan.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        plan,
        [
            ("c-g".to_string(), CpuSet::parse("1,5").unwrap()),
            ("c-shared".to_string(), CpuSet::parse("0,2-4,6-7").unwrap()),
        ]
    );
    for (id, cpus) in plan {
        m.applied(&id, cpus);
    }
    // The Guaranteed pod finishes: its CPUs go back to the shared container (once the
    // sources are all seen).
    assert!(m
        .reconcile_plan(
            std::slice::from_ref(&shared),
            false,
            &[running("c-shared", "shared")]
        )
        .is_empty());
    let plan = m.reconcile_plan(
        std::slice::from_ref(&shared),
        true,
        &[running("c-shared", "shared")],
    );
    assert_eq!(
        plan,
        [("c-shared".to_string(), CpuSet::parse("0-7").unwrap())]
    );
    assert!(entries(&m).is_empty());
    // Exited containers and containers of inactive pods are left alone.
    let mut exited = running("c-x", "shared");
    exited.state = ContainerState::Exited;
    assert!(m
        .reconcile_plan(&[], true, &[exited, running("c-y", "gone")])
        .is_empty());
}

#[tokio::test]
async fn persist_writes_only_changes() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    let file = dir.path().join(STATE_FILE);
    std::fs::remove_file(&file).unwrap();
    m.persist().await.unwrap();
    assert!(!file.exists(), "unchanged state is not written again");
    admit(&m, &pod("g", "1"), Some(&[])).unwrap();
    m.persist().await.unwrap();
    let state = CpuManagerCheckpoint::from_json(&std::fs::read(&file).unwrap(), "static").unwrap();
    assert_eq!(state, m.state());
}

#[test]
fn policy_names() {
    assert_eq!(
        CpuManagerPolicy::parse("static").unwrap(),
        CpuManagerPolicy::Static
    );
    assert_eq!(
        CpuManagerPolicy::parse("none").unwrap(),
        CpuManagerPolicy::None
    );
    assert_eq!(
        CpuManagerPolicy::parse("Static").unwrap_err().to_string(),
        "unknown policy: \"Static\""
    );
    let err = CpuManager::new(static_config(), single_socket_ht(), 0, Path::new("/x")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "static policy: the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    );
}

#[tokio::test]
async fn kubelets_writing_one_state_file_at_once_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let managers: Vec<CpuManager> = (0..8).map(|_| CpuManager::none(dir.path())).collect();
    let starts = managers.iter().map(|m| m.start());
    for r in futures::future::join_all(starts).await {
        r.unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [STATE_FILE], "no temporary file left");
}

#[tokio::test]
async fn allocatable_cpus_are_the_machine_but_the_reserved_ones() {
    let dir = tempfile::tempdir().unwrap();
    // none: nothing is handed out.
    let m = started(dir.path(), CpuManagerConfig::default()).await;
    assert!(m.allocatable_cpus().is_empty());

    // static, one CPU reserved by topology (the lowest core's first thread).
    let dir = tempfile::tempdir().unwrap();
    let m = started(dir.path(), static_config()).await;
    assert_eq!(m.allocatable_cpus().to_string(), "1-7");
    // Exclusive assignments do not change it: it is what may be handed out at all.
    assert_eq!(admit(&m, &pod("g", "2"), Some(&[])), Ok(()));
    assert_eq!(m.allocatable_cpus().to_string(), "1-7");

    // static with reservedSystemCPUs.
    let dir = tempfile::tempdir().unwrap();
    let config = CpuManagerConfig {
        reserved_system_cpus: Some(CpuSet::parse("2,6").unwrap()),
        ..static_config()
    };
    let m = CpuManager::new(config, single_socket_ht(), 2000, dir.path()).unwrap();
    m.start().await.unwrap();
    assert_eq!(m.allocatable_cpus().to_string(), "0-1,3-5,7");
}
