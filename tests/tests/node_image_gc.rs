//! Image garbage collection on the real containerd: an unused image the test imports is
//! removed under thresholds that demand it, while the image a running pod uses and the
//! runtime's pinned sandbox image stay.
//!
//! The containerd is shared, so the test's image is its own: built from the local busybox
//! OCI layout with a label of its own (a new image id — a mere second tag of busybox would
//! share busybox's id, and removing by id, as Go's image GC does, would take busybox's tag
//! with it), and the engine sees images through [`ScopedRuntime::with_images`], which never
//! removes an image the test did not create.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet_core::images::gc::ImageGcPolicy;
use kubelet_core::testing::{ContainerBuilder, RecordingSink, StaticSource};
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_tests::cri::BUSYBOX_IMAGE;
use kubelet_tests::engine::{busybox, eventually, wait_running, EngineTest, ScopedRuntime};
use kubelet_tests::images::OwnImage;

#[tokio::test(flavor = "multi_thread")]
async fn an_unused_image_goes_and_used_and_pinned_images_stay() {
    let Some(t) = EngineTest::new("imagegc").await else {
        return;
    };
    let unique = t.uid("gc");
    let repo = format!("kubelet-rs.local/gc-test-{unique}");
    let own_image = OwnImage::import(t.dir.path(), &repo, &unique);
    let reference = own_image.reference.clone();
    let own = t
        .cri
        .image_status(&reference)
        .await
        .unwrap()
        .expect("imported");
    let busybox_image = t
        .cri
        .image_status(BUSYBOX_IMAGE)
        .await
        .unwrap()
        .expect("busybox");
    assert_ne!(own.id, busybox_image.id, "an image of its own");
    // The runtime's sandbox image is pinned.
    let images = t.cri.list_images().await.unwrap();
    let pinned: Vec<&str> = images
        .iter()
        .filter(|i| i.pinned)
        .flat_map(|i| i.repo_tags.iter().map(String::as_str))
        .collect();
    assert!(
        pinned.iter().any(|t| t.contains("pause")),
        "the sandbox image is pinned: {pinned:?}"
    );

    let uid = t.uid("user");
    let pod = t.pod("user", &uid, vec![busybox("app", "sleep 3600")]);
    let sink = Arc::new(RecordingSink::default());
    let runtime = Arc::new(ScopedRuntime::new(t.cri.clone(), &t.namespace).with_images(&repo));
    let before = kubelet_core::metrics::global()
        .image_garbage_collected
        .get("space");
    let config = kubelet_core::Config {
        // Free everything: usage (any) is above 1%, and 0% is the goal.
        image_gc: ImageGcPolicy {
            high_threshold_percent: 1,
            low_threshold_percent: 0,
            min_age: Duration::ZERO,
            period: Duration::from_secs(2),
            ..ImageGcPolicy::default()
        },
        ..t.config()
    };
    let sink2 = sink.clone();
    let k = t.start_on(
        runtime,
        config,
        vec![Arc::new(StaticSource::new("file", vec![pod])) as Arc<dyn PodSource>],
        move |b| b.status_sink(sink2),
    );
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let cri = t.cri.clone();
    eventually(Duration::from_secs(60), "the unused image removed", || {
        let (cri, reference) = (cri.clone(), reference.clone());
        async move {
            cri.image_status(&reference)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        }
    })
    .await;
    // The image the pod uses and the pinned sandbox image stay.
    assert!(t.cri.image_status(BUSYBOX_IMAGE).await.unwrap().is_some());
    let after = t.cri.list_images().await.unwrap();
    assert!(after.iter().any(|i| i.pinned), "the pinned image stays");
    // The removal is counted once the runtime has answered: the test may see the image gone
    // a moment before the count. (The counter is the process's: the other test of this file
    // counts its removals in it too, so at least this one.)
    eventually(
        Duration::from_secs(5),
        "kubelet_image_garbage_collected_total{reason=\"space\"} counted the removal",
        || async {
            let counted = kubelet_core::metrics::global()
                .image_garbage_collected
                .get("space")
                - before;
            (counted >= 1).then_some(())
        },
    )
    .await;
    // 0% cannot be reached: Go's FreeDiskSpaceFailed event says how much could be freed.
    eventually(Duration::from_secs(20), "FreeDiskSpaceFailed", || {
        let sink = sink.clone();
        async move {
            sink.events()
                .into_iter()
                .find(|e| e.reason == "FreeDiskSpaceFailed")
                .map(|e| e.message)
        }
    })
    .await;
    let text = kubelet_core::metrics::global().render();
    assert!(text.contains("kubelet_image_garbage_collected_total{reason=\"space\"}"));
    assert_eq!(
        t.cri
            .image_status(BUSYBOX_IMAGE)
            .await
            .unwrap()
            .map(|i| i.id),
        Some(busybox_image.id)
    );
    k.stop().await;
}

/// An image of the test's own, `<prefix>-<name>:gc`, imported in a directory of its own.
fn own_image(t: &EngineTest, prefix: &str, name: &str) -> OwnImage {
    let dir = t.dir.path().join(format!("image-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    OwnImage::import(
        &dir,
        &format!("{prefix}-{name}"),
        &format!("{prefix}-{name}"),
    )
}

async fn present(t: &EngineTest, image: &OwnImage) -> bool {
    t.cri
        .image_status(&image.reference)
        .await
        .unwrap()
        .is_some()
}

/// A pod of local images only (`imagePullPolicy: Never`): an init container of `init` and
/// an app container of `app`.
fn local_pod(t: &EngineTest, name: &str, uid: &str, init: Option<&str>, app: &str) -> Pod {
    let container = |name: &str, image: &str, script: &str| {
        ContainerBuilder::new(name, image)
            .pull_policy("Never")
            .command(&["sh", "-c", script])
            .build()
    };
    let mut p = t.pod(name, uid, vec![container("app", app, "sleep 3600")]);
    if let (Some(init), Some(spec)) = (init, p.spec.as_mut()) {
        spec.init_containers = Some(vec![container("init", init, "true")]);
    }
    p
}

/// Issue #32: under a policy that must collect (above 1%, down to 0%, no minimum age),
/// the images static pods are about to use — local ones, `imagePullPolicy: Never` — stay
/// although no container of them exists when the kubelet starts; unused images go, but only
/// once every source was seen and every pod synced once; and the same holds when the
/// kubelet restarts with a new pod. (Before, the first collection ran the moment the
/// kubelet started and removed the pods' images: `ErrImageNeverPull` for good.)
#[tokio::test(flavor = "multi_thread")]
async fn images_of_pods_about_to_start_stay_and_unused_ones_go_across_a_restart() {
    let Some(t) = EngineTest::new("imagegc-start").await else {
        return;
    };
    let prefix = format!("kubelet-rs.local/gcs-{}", t.uid("s"));
    let (init, app, unused) = (
        own_image(&t, &prefix, "init"),
        own_image(&t, &prefix, "app"),
        own_image(&t, &prefix, "unused"),
    );
    let runtime = Arc::new(ScopedRuntime::new(t.cri.clone(), &t.namespace).with_images(&prefix));
    let config = kubelet_core::Config {
        image_gc: ImageGcPolicy {
            high_threshold_percent: 1,
            low_threshold_percent: 0,
            min_age: Duration::ZERO,
            period: Duration::from_secs(1),
            ..ImageGcPolicy::default()
        },
        ..t.config()
    };
    let uid = t.uid("first");
    let first = local_pod(&t, "first", &uid, Some(&init.reference), &app.reference);
    let file = Arc::new(StaticSource::new("file", vec![first.clone()]));
    // A second source that has said nothing yet: the node does not know all its pods.
    let api = Arc::new(StaticSource::silent("api"));
    let k = t.start_on(
        runtime.clone(),
        config.clone(),
        vec![file.clone() as Arc<dyn PodSource>, api.clone()],
        |b| b,
    );
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    // Well past the 1 s period: nothing goes while a source has not been seen.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        present(&t, &unused).await,
        "kept until every source was seen"
    );
    api.set(vec![]);
    eventually(
        Duration::from_secs(30),
        "the unused image removed",
        || async { (!present(&t, &unused).await).then_some(()) },
    )
    .await;
    assert!(present(&t, &app).await && present(&t, &init).await);
    k.stop().await;

    // A restart with a new pod whose image no container uses yet, and another unused one.
    let later = own_image(&t, &prefix, "later");
    let unused2 = own_image(&t, &prefix, "unused2");
    let uid2 = t.uid("second");
    let second = local_pod(&t, "second", &uid2, None, &later.reference);
    let file = Arc::new(StaticSource::new("file", vec![first, second]));
    let k = t.start_on(runtime, config, vec![file as Arc<dyn PodSource>], |b| b);
    wait_running(&k.handle, &uid2, Duration::from_secs(60)).await;
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    eventually(
        Duration::from_secs(30),
        "the second unused image removed",
        || async { (!present(&t, &unused2).await).then_some(()) },
    )
    .await;
    for image in [&init, &app, &later] {
        assert!(present(&t, image).await, "{} stays", image.reference);
    }
    let status = k.handle.pod_status(&uid2).expect("a status");
    assert_eq!(status.phase.as_deref(), Some("Running"), "{status:?}");
    k.stop().await;
}
