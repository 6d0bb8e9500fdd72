//! The API server stopped for a while and started again: running pods keep running,
//! heartbeats resume, the pod watch resumes (pods created meanwhile run, deleted ones
//! stop), no panic.
//!
//! The restarted apiserver's watch cache starts at the current resourceVersion; with writes
//! in etcd during the outage (the test makes some), the kubelet's watch from before the
//! outage is answered with 410 Gone: the kubelet relists (a second `list pods` in the audit
//! log) without losing or duplicating pods. (A busy cluster cannot be used to force the 410
//! instead: v1.20's watch cache grows with the event rate.)
//!
//! Stopping the shared apiserver disturbs every other cluster test, so this test is
//! ignored by default; run it alone:
//! `cargo test -p kubelet-tests --test cluster_apiserver_outage -- --ignored`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, node_ready, phase, start};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::runtime::ContainerState;

fn list_requests(audit: &std::path::Path, user: &str) -> usize {
    let text = std::fs::read_to_string(audit).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["stage"] == "ResponseComplete"
                && v["user"]["username"] == user
                && v["verb"] == "list"
                && v["objectRef"]["resource"] == "pods"
        })
        .count()
}

/// Writes to the control plane's own etcd: the endpoint `control-plane.sh env` gives
/// (`ETCDCTL_ENDPOINTS`, from `KUBELET_RS_ETCD_PORT`), never a fixed port.
fn bump_etcd_revision(cp: &kubelet_tests::cluster::ControlPlane) {
    let endpoints = cp
        .env()
        .get("ETCDCTL_ENDPOINTS")
        .expect("control-plane.sh env gives ETCDCTL_ENDPOINTS")
        .clone();
    for i in 0..3 {
        let out = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &endpoints, "put"])
            .arg(format!("/kubelet-rs-test/outage-{i}"))
            .arg("x")
            .output()
            .expect("etcdctl");
        assert!(
            out.status.success(),
            "etcdctl put: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn control_plane(cmd: &str) {
    // Descriptors closed: the restarted apiserver must not hold the test lock.
    let out =
        kubelet_tests::cluster::blocking_script_command(&kubelet_tests::cluster::script_path())
            .arg(cmd)
            .output()
            .expect("control-plane script");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "stops the shared apiserver: run alone with --ignored"]
async fn pods_survive_an_apiserver_outage_and_the_kubelet_catches_up() {
    let Some(node) = start("cluster-outage", vec![]).await else {
        return;
    };
    let pods = node.pods();
    let name = node.node_name.clone();
    let web = node.pod(
        "web",
        "trap 'exit 0' TERM; while true; do sleep 1; done",
        "Always",
    );
    let uid = pods
        .create(&PostParams::default(), &web)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    eventually(Duration::from_secs(90), "web Running", || {
        let pods = pods.clone();
        async move { (phase(&pods.get("web").await.ok()?) == "Running").then_some(()) }
    })
    .await;
    let before: Vec<String> = node
        .et
        .containers(&uid)
        .await
        .into_iter()
        .map(|c| c.id)
        .collect();

    let user = format!("system:node:{name}");
    let lists_before = list_requests(node.cp.audit_log_path(), &user);
    control_plane("apiserver-stop");
    let stopped_at = k8s_openapi::jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    // Writes happen in the cluster while the apiserver is away (here: straight to etcd, under
    // a key outside /registry), so the restarted apiserver's watch cache starts past the
    // kubelet's resourceVersion and answers its watch with 410 Gone — deterministically.
    bump_etcd_revision(&node.cp);
    // Still desired and running: nothing was dropped while the server was away.
    assert!(
        node.handle.pod(&uid).is_some(),
        "pod kept while the apiserver is down"
    );
    let running: Vec<String> = node
        .et
        .containers(&uid)
        .await
        .into_iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id)
        .collect();
    assert_eq!(
        running, before,
        "the pod's container kept running, unrestarted"
    );
    control_plane("apiserver-start");

    // Heartbeats resume: the lease is renewed after the outage and the node is Ready.
    let leases: Api<Lease> = Api::namespaced(node.admin.clone(), "kube-node-lease");
    eventually(
        Duration::from_secs(90),
        "lease renewed after the outage",
        || {
            let leases = leases.clone();
            let name = name.clone();
            async move {
                let t = leases.get(&name).await.ok()?.spec?.renew_time?;
                (t.0 > stopped_at).then_some(())
            }
        },
    )
    .await;
    let nodes = node.nodes();
    eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            (node_ready(&nodes.get(&name).await.ok()?).as_deref() == Some("True")).then_some(())
        }
    })
    .await;
    // The watch was relisted after the 410; nothing lost or duplicated. The pod watcher backs
    // off as Go's reflector does (800 ms doubling to 30 s, jittered, reset after 2 min): after
    // a 30 s outage its reconnect can come ~40 s after the apiserver is back, and the relist
    // after the 410 one more step later (CI saw the watch at +41 s and no list 23 s on).
    let audit = node.cp.audit_log_path().to_path_buf();
    eventually(
        Duration::from_secs(150),
        "a relist after the restart",
        || {
            let audit = audit.clone();
            let user = user.clone();
            async move { (list_requests(&audit, &user) > lists_before).then_some(()) }
        },
    )
    .await;
    let desired: Vec<String> = node
        .handle
        .pods()
        .iter()
        .map(|p| kubelet_core::pod::uid(p).to_string())
        .collect();
    assert_eq!(desired, vec![uid.clone()]);
    // The watch resumed: a new pod runs, and deleting the old one stops it and removes it.
    pods.create(
        &PostParams::default(),
        &node.pod("after", "while true; do sleep 1; done", "Always"),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(120), "new pod Running", || {
        let pods = pods.clone();
        async move { (phase(&pods.get("after").await.ok()?) == "Running").then_some(()) }
    })
    .await;
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "web deleted", || {
        let pods = pods.clone();
        async move { pods.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    node.finish().await;
}
