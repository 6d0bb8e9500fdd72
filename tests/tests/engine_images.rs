//! Image pull failures on the real runtime: ErrImagePull → ImagePullBackOff, ErrImageNeverPull,
//! and a healthy pod beside them. ImagePullBackOff is 1s doubling up to 4s in the harness.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{busybox, phase, wait_running, waiting_reason, EngineTest};

const MISSING: &str = "kubelet-rs.local/missing:1.0";

#[tokio::test(flavor = "multi_thread")]
async fn missing_images_back_off_and_never_pull_while_a_healthy_pod_runs() {
    let Some(t) = EngineTest::new("images").await else {
        return;
    };
    let (pull_uid, never_uid, ok_uid) = (t.uid("pull"), t.uid("never"), t.uid("ok"));
    let mut pull = busybox("c", "sleep 3600");
    pull.image = Some(MISSING.into());
    pull.image_pull_policy = Some("IfNotPresent".into());
    let mut never = busybox("c", "sleep 3600");
    never.image = Some(MISSING.into());
    never.image_pull_policy = Some("Never".into());
    let pods = vec![
        t.pod("pull", &pull_uid, vec![pull]),
        t.pod("never", &never_uid, vec![never]),
        t.pod("ok", &ok_uid, vec![busybox("c", "exec sleep 3600")]),
    ];
    let source = Arc::new(StaticSource::new("file", pods));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);

    wait_running(&k.handle, &ok_uid, Duration::from_secs(60)).await;

    let mut seen = BTreeSet::new();
    let mut never_reason = None;
    let start = kubelet_core::clock::monotonic_now();
    while !(seen.contains("ErrImagePull") && seen.contains("ImagePullBackOff"))
        || never_reason.is_none()
    {
        assert!(
            kubelet_core::clock::elapsed(start) < Duration::from_secs(60),
            "reasons seen for the missing image: {seen:?}, with pull policy Never: {never_reason:?}"
        );
        if let Some(s) = k.handle.pod_status(&pull_uid) {
            assert_eq!(phase(&s), "Pending", "{s:#?}");
            if let Some(r) = waiting_reason(&s, "c") {
                seen.insert(r);
            }
        }
        if let Some(s) = k.handle.pod_status(&never_uid) {
            assert_eq!(phase(&s), "Pending", "{s:#?}");
            never_reason = waiting_reason(&s, "c").filter(|r| r != "ContainerCreating");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("missing image waiting reasons seen: {seen:?}");
    assert!(
        seen.iter().all(
            |r| ["ContainerCreating", "ErrImagePull", "ImagePullBackOff"].contains(&r.as_str())
        ),
        "{seen:?}"
    );
    assert_eq!(never_reason.as_deref(), Some("ErrImageNeverPull"));
    // No container was created for either; the healthy pod is still running untouched.
    assert!(t.containers(&pull_uid).await.is_empty());
    assert!(t.containers(&never_uid).await.is_empty());
    let ok = wait_running(&k.handle, &ok_uid, Duration::from_secs(5)).await;
    assert_eq!(ok.container_statuses.as_ref().unwrap()[0].restart_count, 0);

    source.set(vec![]);
    kubelet_tests::engine::eventually(Duration::from_secs(30), "pods removed", || async {
        for uid in [&pull_uid, &never_uid, &ok_uid] {
            if !t.sandboxes(uid).await.is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;
    k.stop().await;
}
