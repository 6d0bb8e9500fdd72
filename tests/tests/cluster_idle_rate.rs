//! Measurement: the requests a cluster member makes at idle with 110 pods, from the
//! apiserver's audit log (requests per minute by verb and resource).
//!
//! The pods run in the in-memory `SimRuntime` (the API traffic does not depend on what runs
//! them, and 110 real sandboxes would load the shared machine); everything else is the real
//! kubelet against the real control plane. Takes about 7 minutes, so it is ignored by
//! default: `cargo test -p kubelet-tests --test cluster_idle_rate -- --ignored --nocapture`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, phase};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use kubelet_core::testing::{FakeContainerManager, SimRuntime};
use kubelet_core::{Config, ContainerManager, Kubelet};
use kubelet_sources::apiserver::{ApiClients, ClientConfig, ClusterMember, ClusterMemberConfig};
use kubelet_tests::cluster::ControlPlane;
use tokio_util::sync::CancellationToken;

const PODS: usize = 110;
const WINDOW: Duration = Duration::from_secs(330);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a 7-minute measurement; run with --ignored --nocapture"]
async fn idle_request_rate_with_110_pods() {
    let cp = ControlPlane::ensure().await.expect("control plane");
    let admin = cp.admin_client().await.unwrap();
    let tag = format!(
        "{}-{}",
        std::process::id(),
        kubelet_core::clock::now_unix_nanos() & 0xffff
    );
    let ns = format!("it-idlerate-{tag}");
    let node_name = format!("n-idlerate-{tag}");
    let nsobj = Namespace {
        metadata: ObjectMeta {
            name: Some(ns.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &nsobj)
        .await
        .unwrap();

    let kubeconfig = cp.node_kubeconfig(&node_name).await.unwrap();
    let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
        .await
        .unwrap();
    let mut cfg = ClusterMemberConfig::new(node_name.clone());
    cfg.node.node_ips = vec!["127.0.0.1".into()];
    let member = ClusterMember::new(clients, cfg.clone());
    let runtime = Arc::new(SimRuntime::new());
    let mut node_labels = kubelet_sources::apiserver::node::default_labels(&cfg.node);
    node_labels.extend(cfg.node.labels.clone());
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: node_name.clone(),
            node_labels,
            node_ips: vec!["127.0.0.1".into()],
            resolv_conf: Default::default(),
            // The simulated pods have no files; the node's own log directories stay
            // untouched (log rotation and pod log cleanup are off without a root dir).
            root_dir: Default::default(),
            ..Config::default()
        })
        .runtime(runtime.clone())
        .container_manager(Arc::new(FakeContainerManager::default()) as Arc<dyn ContainerManager>)
        .source(member.source())
        .status_sink(member.status_sink())
        .build()
        .unwrap();
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let tasks = member.start(handle.clone(), shutdown.clone()).await;
    let join = tokio::spawn(kubelet.run(shutdown.clone()));

    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    for i in 0..PODS {
        let image = "kubelet-rs.local/busybox:1.0";
        runtime.add_image(image);
        let p = Pod {
            metadata: ObjectMeta {
                name: Some(format!("idle-{i}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node_name.clone()),
                automount_service_account_token: Some(false),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    eventually(Duration::from_secs(300), "110 pods Running", || {
        let pods = pods.clone();
        async move {
            let list = pods.list(&ListParams::default()).await.ok()?;
            (list.items.len() == PODS && list.items.iter().all(|p| phase(p) == "Running"))
                .then_some(())
        }
    })
    .await;
    // Settle, then measure.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let start = jiff_now();
    tokio::time::sleep(WINDOW).await;
    let end = jiff_now();
    let user = format!("system:node:{node_name}");
    let text = std::fs::read_to_string(cp.audit_log_path()).unwrap();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["stage"] != "ResponseComplete" || v["user"]["username"] != user.as_str() {
            continue;
        }
        let Some(ts) = v["stageTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        else {
            continue;
        };
        if ts < start || ts > end {
            continue;
        }
        let mut res = v["objectRef"]["resource"]
            .as_str()
            .unwrap_or("?")
            .to_string();
        if let Some(sub) = v["objectRef"]["subresource"].as_str() {
            res = format!("{res}/{sub}");
        }
        let verb = v["verb"].as_str().unwrap_or("?");
        *counts.entry(format!("{verb} {res}")).or_default() += 1;
    }
    let minutes = WINDOW.as_secs_f64() / 60.0;
    let total: u64 = counts.values().sum();
    println!(
        "idle request rate of {node_name} with {PODS} pods over {minutes:.1} min: {:.1}/min",
        total as f64 / minutes
    );
    for (k, n) in &counts {
        println!("{:8.2}/min  {k}", *n as f64 / minutes);
    }
    // A watch is one long request; everything else is heartbeats. At idle no pod status is
    // written.
    assert!(
        !counts.keys().any(|k| k.starts_with("patch pods/status")),
        "{counts:?}"
    );

    shutdown.cancel();
    join.await.unwrap().unwrap();
    tasks.wait().await;
    let dp = DeleteParams::default();
    let _ = Api::<k8s_openapi::api::core::v1::Node>::all(admin.clone())
        .delete(&node_name, &dp)
        .await;
    let _ = Api::<Namespace>::all(admin).delete(&ns, &dp).await;
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}
