//! `examples/embed_node.rs` — the stock node composed from the library crates — run for real
//! on the shared containerd: its `build` and `Node::run`, with the CRI runtime seen through
//! [`ScopedRuntime`], so the node manages (and orphan-cleans) only this test's namespace.
//! A static pod in a manifest directory reaches Running, healthz and the read-only API
//! answer, and once the manifest is gone the node removes the pod; nothing of the namespace
//! is left in containerd.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

#[path = "../../examples/embed_node.rs"]
#[allow(dead_code, unreachable_pub)]
mod embed_node;

use std::net::SocketAddr;
use std::time::Duration;

use kubelet_core::runtime::{ContainerRuntime, ListFilter};
use kubelet_core::testing::poll_until;
use kubelet_server::Endpoints;
use kubelet_tests::cri::{endpoint, BUSYBOX_IMAGE};
use kubelet_tests::engine::EngineTest;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let resp = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Sandboxes and containers of `namespace` in the whole (unscoped) runtime.
async fn objects_in(t: &EngineTest) -> (usize, usize) {
    let all = ListFilter::all();
    let sandboxes = t.cri.list_pod_sandboxes(&all).await.unwrap();
    let containers = t.cri.list_containers(&all).await.unwrap();
    (
        sandboxes
            .iter()
            .filter(|s| s.pod.namespace == t.namespace)
            .count(),
        containers
            .iter()
            .filter(|c| c.pod.namespace == t.namespace)
            .count(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_node_runs_a_static_pod_and_removes_it() {
    let Some(t) = EngineTest::new("embed_node").await else {
        return;
    };
    let manifests = t.dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let manifest = manifests.join("sleeper.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: sleeper\n  namespace: {}\nspec:\n  \
             terminationGracePeriodSeconds: 1\n  containers:\n  - name: sleep\n    image: {BUSYBOX_IMAGE}\n    \
             imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'exec sleep 3600']\n",
            t.namespace
        ),
    )
    .unwrap();
    let args = [
        format!("--endpoint={}", endpoint()),
        format!("--root-dir={}", t.dir.path().join("embed-root").display()),
        format!("--manifests={}", manifests.display()),
        "--node-name=embed-itest".into(),
        format!("--cgroup-root={}", t.cgroup_root),
        format!("--log-dir={}", t.dir.path().display()),
        "--fail-swap-on=false".into(),
        "--healthz-port=0".into(),
    ];
    let mut options = embed_node::Options::parse(args).unwrap().unwrap();
    // Ephemeral ports, so the test never collides with a kubelet on this machine.
    options.healthz = Some("127.0.0.1:0".parse().unwrap());
    options.read_only = Some("127.0.0.1:0".parse().unwrap());

    let node = embed_node::build(&options, t.runtime.clone())
        .await
        .unwrap();
    let handle = node.handle();
    let healthz = node.local_addr(Endpoints::Healthz).unwrap();
    let read_only = node.local_addr(Endpoints::ReadOnly).unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(node.run(shutdown.clone()));

    let uid = poll_until(WAIT, || async {
        handle.pods().into_iter().find_map(|p| {
            let uid = kubelet_core::pod::uid(&p).to_string();
            let phase = handle.pod_status(&uid)?.phase?;
            (phase == "Running").then_some(uid)
        })
    })
    .await;
    let healthy = get(healthz, "/healthz").await;
    let pods = get(read_only, "/pods").await;

    // The manifest goes: the node stops and removes its pod.
    std::fs::remove_file(&manifest).unwrap();
    let gone = poll_until(WAIT, || async {
        (handle.pods().is_empty() && objects_in(&t).await == (0, 0)).then_some(())
    })
    .await;
    shutdown.cancel();
    tokio::time::timeout(WAIT, running)
        .await
        .expect("the node stops")
        .expect("node task")
        .expect("node run");

    assert!(uid.is_some(), "the static pod never ran");
    assert_eq!(healthy, (200, "ok".to_string()));
    assert_eq!(pods.0, 200);
    assert!(pods.1.contains("sleeper-embed-itest"), "{}", pods.1);
    assert!(
        gone.is_some(),
        "the pod was not removed: {:?}",
        objects_in(&t).await
    );
    assert_eq!(objects_in(&t).await, (0, 0));
}
