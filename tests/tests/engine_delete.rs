//! Removing a pod from its source stops and removes everything it had, honouring the grace
//! period.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::runtime::ListFilter;
use kubelet_core::testing::StaticSource;
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_tests::engine::{
    busybox, container_status, eventually, netns_names, pinned_netns_with_inode, wait_running,
    EngineTest,
};

fn container_id(s: &k8s_openapi::api::core::v1::PodStatus, name: &str) -> String {
    let id = container_status(s, name)
        .and_then(|c| c.container_id.clone())
        .expect("container id");
    id.split("://").last().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn removed_pod_leaves_nothing_behind_and_term_handler_exits_quickly() {
    let Some(t) = EngineTest::new("delete").await else {
        return;
    };
    let uid = t.uid("del");
    let mut pod = t.pod(
        "del",
        &uid,
        vec![busybox(
            "c",
            "trap 'exit 0' TERM; while true; do sleep 1; done",
        )],
    );
    // A long grace period: the container exits on TERM, so removal must not wait for it.
    pod.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let status = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;

    // The sandbox's pinned network namespace, found through the container's /proc/1/ns/net.
    let id = container_id(&status, "c");
    let out = k
        .handle
        .runtime()
        .exec_sync(
            &id,
            &["readlink".into(), "/proc/1/ns/net".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let link = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ino: u64 = link
        .trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap_or_else(|_| panic!("unexpected {link:?}"));
    let netns = pinned_netns_with_inode(ino).expect("the pod's netns is pinned in /var/run/netns");
    assert!(!t.pod_cgroup_dirs(&uid).is_empty(), "pod cgroup exists");
    assert_eq!(t.sandboxes(&uid).await.len(), 1);

    let removed_at = kubelet_core::clock::monotonic_now();
    source.set(vec![]);
    eventually(Duration::from_secs(30), "sandbox removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    let took = kubelet_core::clock::elapsed(removed_at);
    println!("removal with a TERM handler took {took:?}");
    assert!(
        took < Duration::from_secs(15),
        "a container that exits on TERM held the removal for {took:?} (grace period 30s)"
    );
    assert!(t.containers(&uid).await.is_empty());
    let all = t.cri.list_containers(&ListFilter::all()).await.unwrap();
    assert!(all.iter().all(|c| c.pod.uid != uid));
    assert!(
        !netns_names().contains(&netns),
        "netns {netns} still pinned after removal"
    );
    eventually(Duration::from_secs(10), "pod cgroups removed", || async {
        t.pod_cgroup_dirs(&uid).is_empty().then_some(())
    })
    .await;
    // The worker finished and the pod's status is gone.
    eventually(Duration::from_secs(10), "status forgotten", || async {
        k.handle.pod_status(&uid).is_none().then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn term_ignoring_container_is_killed_at_the_grace_deadline() {
    let Some(t) = EngineTest::new("graceful").await else {
        return;
    };
    let uid = t.uid("stubborn");
    let mut pod = t.pod(
        "stubborn",
        &uid,
        vec![busybox("c", "trap '' TERM; while true; do sleep 1; done")],
    );
    pod.spec.as_mut().unwrap().termination_grace_period_seconds = Some(3);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let status = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let id = container_id(&status, "c");

    let removed_at = kubelet_core::clock::monotonic_now();
    source.set(vec![]);
    eventually(Duration::from_secs(30), "container stopped", || async {
        match t.cri.container_status(&id).await {
            Ok(s) if s.finished_at > 0 => Some(()),
            Err(_) => Some(()),
            _ => None,
        }
    })
    .await;
    let stopped = kubelet_core::clock::elapsed(removed_at);
    eventually(Duration::from_secs(30), "sandbox removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    let took = kubelet_core::clock::elapsed(removed_at);
    println!("TERM-ignoring container stopped after {stopped:?}, pod removed after {took:?}");
    assert!(
        stopped >= Duration::from_secs(3),
        "killed before the 3s grace period: {stopped:?}"
    );
    assert!(took < Duration::from_secs(10), "removal took {took:?}");
    eventually(Duration::from_secs(10), "pod cgroups removed", || async {
        t.pod_cgroup_dirs(&uid).is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
