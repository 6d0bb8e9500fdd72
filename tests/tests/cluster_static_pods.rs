//! Mirror pods of static pods on a cluster member (real control plane and containerd):
//! created with the config.mirror annotation and the static pod's status, re-created when
//! the manifest changes or someone deletes the mirror pod (without touching the static pod),
//! deleted when the manifest goes, once the static pod has stopped.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, phase};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DeleteParams;
use kubelet_core::pod::{annotation, CONFIG_MIRROR_ANNOTATION};
use kubelet_core::PodSource;
use kubelet_sources::file::{Config as FileConfig, FileSource};

fn manifest(namespace: &str, label: &str) -> String {
    manifest_with(
        namespace,
        label,
        2,
        "trap 'exit 0' TERM; while true; do sleep 1; done",
    )
}

/// The static pod with this grace period and container script.
fn manifest_with(namespace: &str, label: &str, grace_seconds: i64, script: &str) -> String {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("static-web".into()),
            namespace: Some(namespace.into()),
            labels: Some(
                [("version".to_string(), label.to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            termination_grace_period_seconds: Some(grace_seconds),
            containers: vec![Container {
                name: "web".into(),
                image: Some(kubelet_tests::cri::BUSYBOX_IMAGE.into()),
                command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    serde_json::to_string(&pod).unwrap()
}

fn mirror_uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_pod_gets_a_mirror_pod_that_follows_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.json");
    let Some(node) = start_with_file_source("cluster-static", dir.path()).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    std::fs::write(&path, manifest(&ns, "v1")).unwrap();
    let mirror_name = format!("static-web-{}", node.node_name);
    let pods = node.pods();

    // A mirror pod appears, annotated, Running with the static pod's status.
    let first = eventually(Duration::from_secs(90), "mirror pod Running", || {
        let pods = pods.clone();
        let name = mirror_name.clone();
        async move {
            let p = pods.get_opt(&name).await.ok()??;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await;
    let hash = annotation(&first, CONFIG_MIRROR_ANNOTATION)
        .unwrap()
        .to_string();
    assert!(!hash.is_empty());
    let owner = &first.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.node_name.as_str())
    );
    let static_uid = node
        .handle
        .pod_by_full_name(&format!("{ns}/{mirror_name}"))
        .map(|p| kubelet_core::pod::uid(&p).to_string())
        .unwrap();
    assert_eq!(hash, static_uid);
    let containers_before = node.et.containers(&static_uid).await;
    assert_eq!(containers_before.len(), 1);

    // Deleting the mirror pod does not stop the static pod; the mirror pod comes back.
    pods.delete(&mirror_name, &DeleteParams::default())
        .await
        .unwrap();
    let again = eventually(Duration::from_secs(60), "mirror pod re-created", || {
        let pods = pods.clone();
        let name = mirror_name.clone();
        let old = mirror_uid(&first);
        async move {
            let p = pods.get_opt(&name).await.ok()??;
            (mirror_uid(&p) != old && p.metadata.deletion_timestamp.is_none()).then_some(p)
        }
    })
    .await;
    assert_eq!(
        annotation(&again, CONFIG_MIRROR_ANNOTATION),
        Some(hash.as_str())
    );
    let containers_after = node.et.containers(&static_uid).await;
    assert_eq!(
        containers_after
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>(),
        containers_before
            .iter()
            .map(|c| c.id.clone())
            .collect::<Vec<_>>(),
        "the static pod's container was not restarted"
    );

    // Editing the manifest: a new static pod (new hash) and a new mirror pod for it.
    std::fs::write(&path, manifest(&ns, "v2")).unwrap();
    let edited = eventually(
        Duration::from_secs(90),
        "mirror pod of the edited manifest",
        || {
            let pods = pods.clone();
            let name = mirror_name.clone();
            let hash = hash.clone();
            async move {
                let p = pods.get_opt(&name).await.ok()??;
                let labels = p.metadata.labels.clone()?;
                (annotation(&p, CONFIG_MIRROR_ANNOTATION)? != hash
                    && labels.get("version").map(String::as_str) == Some("v2")
                    && phase(&p) == "Running")
                    .then_some(p)
            }
        },
    )
    .await;
    assert_ne!(mirror_uid(&edited), mirror_uid(&again));

    // Removing the manifest removes the mirror pod.
    std::fs::remove_file(&path).unwrap();
    eventually(Duration::from_secs(90), "mirror pod deleted", || {
        let pods = pods.clone();
        let name = mirror_name.clone();
        async move { pods.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
    node.finish().await;
}

/// The node e2e suite's MirrorPodWithGracePeriod: when the manifest goes, the static pod is
/// stopped within its grace period, and its mirror pod stays (Running) until it has stopped
/// (Go's `IsPodForMirrorPodTerminatingByFullName`), then goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mirror_pod_stays_while_the_static_pod_terminates_within_its_grace_period() {
    const GRACE: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.json");
    let Some(node) = start_with_file_source("cluster-static-grace", dir.path()).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    // The container ignores SIGTERM: it is killed when the grace period ends.
    let script = "trap '' TERM; while true; do sleep 1; done";
    std::fs::write(&path, manifest_with(&ns, "v1", GRACE as i64, script)).unwrap();
    let mirror_name = format!("static-web-{}", node.node_name);
    let pods = node.pods();
    let running = |pods: kube::Api<Pod>, name: String| async move {
        let p = pods.get_opt(&name).await.ok()??;
        (phase(&p) == "Running" && p.metadata.deletion_timestamp.is_none()).then_some(p)
    };
    eventually(Duration::from_secs(90), "mirror pod Running", || {
        running(pods.clone(), mirror_name.clone())
    })
    .await;

    std::fs::remove_file(&path).unwrap();
    let removed = tokio::time::Instant::now();
    // Within the grace period (less the file source's 1 s check and a margin), the mirror
    // pod is there and Running the whole time.
    let hold = Duration::from_secs(GRACE - 3);
    while removed.elapsed() < hold {
        assert!(
            running(pods.clone(), mirror_name.clone()).await.is_some(),
            "the mirror pod left {:?} after the manifest, within the {GRACE} s grace period",
            removed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Once the static pod has stopped, the mirror pod goes.
    eventually(Duration::from_secs(60), "mirror pod deleted", || {
        let pods = pods.clone();
        let name = mirror_name.clone();
        async move { pods.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(
        removed.elapsed() >= Duration::from_secs(GRACE - 1),
        "deleted after {:?}, before the grace period ended",
        removed.elapsed()
    );
    node.finish().await;
}

/// [`start`] with a file source on `dir` for the test's node.
async fn start_with_file_source(
    test: &str,
    dir: &std::path::Path,
) -> Option<cluster_common::ClusterNode> {
    let dir = dir.to_path_buf();
    cluster_common::start_with(test, move |node_name| {
        let mut cfg = FileConfig::new(dir, node_name);
        cfg.check_frequency = Duration::from_secs(1);
        vec![Arc::new(FileSource::new(cfg)) as Arc<dyn PodSource>]
    })
    .await
}
