//! A restarted kubelet adopts the pods it finds running and removes the ones no source wants.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_tests::engine::{
    busybox, container_status, eventually, running_and_ready, wait_running, wait_until, EngineTest,
};

#[tokio::test(flavor = "multi_thread")]
async fn restarted_kubelet_adopts_running_pods_and_removes_orphans() {
    let Some(mut t) = EngineTest::new("kubeletrestart").await else {
        return;
    };
    let (keep, gone, died) = (t.uid("keep"), t.uid("gone"), t.uid("died"));
    let keep_pod = t.pod("keep", &keep, vec![busybox("c", "exec sleep 3600")]);
    let gone_pod = t.pod("gone", &gone, vec![busybox("c", "exec sleep 3600")]);
    let died_pod = t.pod("died", &died, vec![busybox("c", "exec sleep 3600")]);
    let source = Arc::new(StaticSource::new(
        "file",
        vec![keep_pod.clone(), gone_pod.clone(), died_pod.clone()],
    ));
    let k = t.start(vec![source as Arc<dyn PodSource>]);
    let s = wait_running(&k.handle, &keep, Duration::from_secs(60)).await;
    let keep_id = container_status(&s, "c").unwrap().container_id.clone();
    wait_running(&k.handle, &gone, Duration::from_secs(60)).await;
    let s = wait_running(&k.handle, &died, Duration::from_secs(60)).await;
    let died_id = container_status(&s, "c")
        .unwrap()
        .container_id
        .clone()
        .unwrap();
    k.stop().await;

    // While no kubelet runs, one container dies.
    t.cri
        .stop_container(died_id.split("://").last().unwrap(), Duration::ZERO)
        .await
        .unwrap();

    // The pods keep running without a kubelet.
    assert_eq!(t.sandboxes(&keep).await.len(), 1);
    assert_eq!(t.sandboxes(&gone).await.len(), 1);
    assert!(!t.pod_cgroup_dirs(&gone).is_empty());

    // A new kubelet process: new container manager, new engine, a source without "gone".
    t.new_container_manager().await;
    let source = Arc::new(StaticSource::new("file", vec![keep_pod, died_pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = wait_running(&k.handle, &keep, Duration::from_secs(60)).await;
    let c = container_status(&s, "c").unwrap();
    assert_eq!(c.container_id, keep_id, "the running container was adopted");
    assert_eq!(c.restart_count, 0);
    assert_eq!(t.sandboxes(&keep).await.len(), 1);
    assert_eq!(t.containers(&keep).await.len(), 1);

    // The container that died while the kubelet was down is restarted as its first restart.
    let s = wait_until(Duration::from_secs(60), "died restarted", || {
        k.handle.pod_status(&died).filter(|s| {
            running_and_ready(s) && container_status(s, "c").is_some_and(|c| c.restart_count == 1)
        })
    })
    .await;
    let c = container_status(&s, "c").unwrap();
    assert_ne!(c.container_id.as_deref(), Some(died_id.as_str()));
    let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(last.exit_code, 137, "{c:?}");

    // The orphan is killed and removed once the sources were seen.
    eventually(Duration::from_secs(30), "orphan removed", || async {
        (t.sandboxes(&gone).await.is_empty() && t.containers(&gone).await.is_empty()).then_some(())
    })
    .await;
    eventually(
        Duration::from_secs(15),
        "orphan's cgroups removed",
        || async { t.pod_cgroup_dirs(&gone).is_empty().then_some(()) },
    )
    .await;
    // Still the same container after a few housekeeping rounds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = wait_running(&k.handle, &keep, Duration::from_secs(5)).await;
    let c = container_status(&s, "c").unwrap();
    assert_eq!(c.container_id, keep_id);
    assert_eq!(c.restart_count, 0);

    source.set(vec![]);
    eventually(Duration::from_secs(30), "pods removed", || async {
        (t.sandboxes(&keep).await.is_empty() && t.sandboxes(&died).await.is_empty()).then_some(())
    })
    .await;
    k.stop().await;
}
