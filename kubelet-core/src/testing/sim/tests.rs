//! The simulator's optional capabilities, on tokio's paused clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::SimRuntime;
use crate::runtime::{
    ContainerConfig, ContainerEvent, ContainerEventKind, ContainerKind, ContainerRuntime, EnvVar,
    ListFilter, RuntimeError, SandboxConfig,
};
use crate::testing::{container, pod};

fn sandbox(uid: &str) -> SandboxConfig {
    SandboxConfig {
        pod: Arc::new(pod("p", uid, vec![container("app", "busybox")])),
        attempt: 0,
        hostname: "p".into(),
        log_directory: PathBuf::from("/var/log/pods/x"),
        cgroup_parent: None,
        dns: None,
        runtime_handler: String::new(),
    }
}

fn config(sandbox: &SandboxConfig, env: &[(&str, &str)]) -> ContainerConfig {
    ContainerConfig {
        pod: sandbox.pod.clone(),
        container: container("app", "busybox"),
        kind: ContainerKind::Regular,
        restart_count: 0,
        hash: 1,
        image_ref: "sha256:busybox".into(),
        command: vec![],
        args: vec![],
        env: env
            .iter()
            .map(|(n, v)| EnvVar {
                name: n.to_string(),
                value: v.to_string(),
            })
            .collect(),
        mounts: vec![],
        log_path: PathBuf::from("app/0.log"),
        cpuset_cpus: None,
        cpuset_mems: None,
        devices: Default::default(),
        extra_supplemental_groups: Vec::new(),
    }
}

/// A started container of a new pod: (sandbox id, container id).
async fn running(rt: &SimRuntime, uid: &str, env: &[(&str, &str)]) -> (String, String) {
    let sb = sandbox(uid);
    let sid = rt.run_pod_sandbox(&sb).await.unwrap();
    let cid = rt
        .create_container(&sid, &config(&sb, env), &sb)
        .await
        .unwrap();
    rt.start_container(&cid).await.unwrap();
    (sid, cid)
}

#[tokio::test(start_paused = true)]
async fn events_follow_every_state_change_in_order() {
    let rt = SimRuntime::new();
    let mut events = rt.container_events().await.unwrap();
    let (sid, a) = running(&rt, "uid-1", &[("SIM_RUN_FOR_MS", "1000")]).await;
    let t0 = crate::clock::now_unix_nanos();
    tokio::time::advance(Duration::from_secs(2)).await;
    // The exit is observed lazily, and stamped with when it happened.
    rt.container_status(&a).await.unwrap();
    let b = rt
        .create_container(&sid, &config(&sandbox("uid-1"), &[]), &sandbox("uid-1"))
        .await
        .unwrap();
    rt.start_container(&b).await.unwrap();
    rt.stop_container(&b, Duration::from_secs(1)).await.unwrap();
    rt.remove_container(&a).await.unwrap();
    rt.remove_pod_sandbox(&sid).await.unwrap();

    let mut got: Vec<ContainerEvent> = Vec::new();
    while got.len() < 8 {
        got.push(events.next().await.unwrap().unwrap());
    }
    let kinds: Vec<(&str, ContainerEventKind)> = got
        .iter()
        .map(|e| {
            let which = if e.container_id == a { "a" } else { "b" };
            (which, e.kind)
        })
        .collect();
    use ContainerEventKind::*;
    assert_eq!(
        kinds,
        [
            ("a", Created),
            ("a", Started),
            ("a", Stopped),
            ("b", Created),
            ("b", Started),
            ("b", Stopped),
            ("a", Deleted),
            ("b", Deleted),
        ]
    );
    assert!(got
        .iter()
        .all(|e| e.sandbox_id == sid && e.pod.uid == "uid-1"));
    assert_eq!(got[2].created_at, t0 + 1_000_000_000);
    assert_eq!(rt.calls("GetContainerEvents"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_subscriber_is_told_to_relist() {
    let rt = SimRuntime::new();
    let mut events = rt.container_events().await.unwrap();
    let sb = sandbox("uid-1");
    let sid = rt.run_pod_sandbox(&sb).await.unwrap();
    for _ in 0..super::events::EVENT_BUFFER + 1 {
        rt.create_container(&sid, &config(&sb, &[]), &sb)
            .await
            .unwrap();
    }
    match events.next().await {
        Some(Err(RuntimeError::OperationFailed { message, .. })) => {
            assert_eq!(message, "1 events were dropped; relist")
        }
        other => panic!("expected a lag error, got {other:?}"),
    }
    assert!(matches!(events.next().await, Some(Ok(_))));
}

#[tokio::test(start_paused = true)]
async fn container_stats_come_from_the_simulated_rates() {
    let rt = SimRuntime::new();
    let (_, busy) = running(&rt, "uid-1", &[("SIM_CPU_MILLICORES", "500")]).await;
    let (_, idle) = running(&rt, "uid-2", &[("SIM_RUN_FOR_MS", "1000")]).await;
    tokio::time::advance(Duration::from_secs(2)).await;

    let s = rt.container_stats(&busy).await.unwrap();
    assert_eq!((s.name.as_str(), s.pod.uid.as_str()), ("app", "uid-1"));
    let cpu = s.cpu.unwrap();
    assert_eq!(cpu.usage_core_nano_seconds, Some(1_000_000_000));
    assert_eq!(cpu.usage_nano_cores, Some(500_000_000));
    assert_eq!(s.memory.unwrap().working_set_bytes, Some(8 << 20));
    let layer = s.writable_layer.unwrap();
    assert_eq!((layer.used_bytes, layer.inodes_used), (Some(4096), Some(1)));

    // An exited container: nothing left to measure but its writable layer.
    let s = rt.container_stats(&idle).await.unwrap();
    assert!(s.cpu.is_none() && s.memory.is_none());
    assert!(s.writable_layer.is_some());

    let all = rt.list_container_stats(&ListFilter::all()).await.unwrap();
    assert_eq!(all.len(), 2);
    let one = rt
        .list_container_stats(&ListFilter::pod("uid-2"))
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].container_id, idle);
    assert!(matches!(
        rt.container_stats("nope").await,
        Err(RuntimeError::NotFound {
            kind: "container",
            ..
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn image_fs_counts_the_images() {
    let rt = SimRuntime::new();
    rt.add_image("a");
    rt.add_image("b");
    let fs = rt.image_fs_info().await.unwrap();
    assert_eq!(fs.image_filesystems.len(), 1);
    let f = &fs.image_filesystems[0];
    assert_eq!(f.mountpoint, super::usage::IMAGE_FS);
    assert_eq!((f.used_bytes, f.inodes_used), (Some(2 << 20), Some(2)));
    assert!(f.timestamp > 0);
    assert!(fs.container_filesystems.is_empty());
}

#[tokio::test(start_paused = true)]
async fn reopen_log_needs_a_running_container() {
    let rt = SimRuntime::new();
    let (_, c) = running(&rt, "uid-1", &[]).await;
    rt.reopen_container_log(&c).await.unwrap();
    rt.stop_container(&c, Duration::from_secs(1)).await.unwrap();
    assert!(matches!(
        rt.reopen_container_log(&c).await,
        Err(RuntimeError::OperationFailed {
            operation: "ReopenContainerLog",
            ..
        })
    ));
    assert!(matches!(
        rt.reopen_container_log("nope").await,
        Err(RuntimeError::NotFound { .. })
    ));
    // No streaming server: those stay unimplemented.
    assert!(rt
        .port_forward_url("s", &[80])
        .await
        .unwrap_err()
        .is_unimplemented());
}
