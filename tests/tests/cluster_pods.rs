//! API pods on a cluster member against the real control plane and containerd: status
//! through the phases, deletion, events, scheduling by the real scheduler, and what kubectl
//! shows.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, node_ready, phase, start};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_pod_runs_succeeds_and_deleted_pod_goes_away() {
    let Some(node) = start("cluster-pods", vec![]).await else {
        return;
    };
    let pods = node.pods();
    // A pod that runs a few seconds and exits 0: Pending → Running → Succeeded.
    let job = node.pod("job", "sleep 4; exit 0", "Never");
    pods.create(&PostParams::default(), &job)
        .await
        .expect("create job");
    let running = eventually(Duration::from_secs(90), "job Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("job").await.ok()?;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await;
    let st = running.status.clone().unwrap();
    assert_eq!(st.host_ip.as_deref(), Some("127.0.0.1"));
    assert!(st.pod_ip.is_some(), "pod IP: {st:?}");
    assert!(st.start_time.is_some());
    let cs = &st.container_statuses.unwrap()[0];
    assert!(cs.state.as_ref().unwrap().running.is_some());
    assert!(cs
        .container_id
        .as_deref()
        .unwrap_or("")
        .starts_with("containerd://"));
    // The scheduler's condition is kept beside the kubelet's.
    let done = eventually(Duration::from_secs(60), "job Succeeded", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("job").await.ok()?;
            (phase(&p) == "Succeeded").then_some(p)
        }
    })
    .await;
    let cs = &done.status.unwrap().container_statuses.unwrap()[0];
    let term = cs.state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!(term.exit_code, 0);
    assert_eq!(term.reason.as_deref(), Some("Completed"));

    // A failing pod: Failed with the exit code.
    let fail = node.pod("fail", "exit 3", "Never");
    pods.create(&PostParams::default(), &fail).await.unwrap();
    let failed = eventually(Duration::from_secs(90), "fail Failed", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("fail").await.ok()?;
            (phase(&p) == "Failed").then_some(p)
        }
    })
    .await;
    let cs = &failed.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(
        cs.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        3
    );

    // A long-running pod, deleted gracefully: it stops and the object goes away.
    let web = node.pod(
        "web",
        "trap 'exit 0' TERM; while true; do sleep 1; done",
        "Always",
    );
    let created = pods.create(&PostParams::default(), &web).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    eventually(Duration::from_secs(90), "web Running", || {
        let pods = pods.clone();
        async move { (phase(&pods.get("web").await.ok()?) == "Running").then_some(()) }
    })
    .await;
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "web object deleted", || {
        let pods = pods.clone();
        async move { pods.get_opt("web").await.ok()?.is_none().then_some(()) }
    })
    .await;
    let running: Vec<_> = node
        .et
        .containers(&uid)
        .await
        .into_iter()
        .filter(|c| c.state == kubelet_core::runtime::ContainerState::Running)
        .collect();
    assert!(running.is_empty(), "containers still running: {running:?}");

    // Events the kubelet recorded for the job pod reached the API server.
    let events: Api<Event> = Api::namespaced(node.admin.clone(), &node.et.namespace);
    let reasons = eventually(Duration::from_secs(30), "pod events", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            let reasons: Vec<String> = list
                .items
                .iter()
                .filter(|e| e.involved_object.name.as_deref() == Some("job"))
                .filter_map(|e| e.reason.clone())
                .collect();
            reasons.iter().any(|r| r == "Started").then_some(reasons)
        }
    })
    .await;
    assert!(reasons.iter().any(|r| r == "Created"), "{reasons:?}");
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_binds_a_pod_to_the_node_and_kubectl_shows_it() {
    let Some(node) = start("cluster-sched", vec![]).await else {
        return;
    };
    let name = node.node_name.clone();
    let nodes = node.nodes();
    eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            (node_ready(&nodes.get_opt(&name).await.ok()??).as_deref() == Some("True"))
                .then_some(())
        }
    })
    .await;
    // No nodeName: the real scheduler binds it (pinned to this node by its hostname label).
    let mut p: Pod = node.pod("sched", "while true; do sleep 1; done", "Always");
    let spec = p.spec.as_mut().unwrap();
    spec.node_name = None;
    spec.node_selector = Some(
        [("kubernetes.io/hostname".to_string(), name.clone())]
            .into_iter()
            .collect(),
    );
    let pods = node.pods();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let running = eventually(Duration::from_secs(120), "scheduled pod Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("sched").await.ok()?;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await;
    assert_eq!(
        running.spec.unwrap().node_name.as_deref(),
        Some(name.as_str())
    );
    let conds = running.status.unwrap().conditions.unwrap();
    let scheduled = conds.iter().find(|c| c.type_ == "PodScheduled").unwrap();
    assert_eq!(scheduled.status, "True");

    let ns = node.et.namespace.clone();
    let out = node
        .cp
        .kubectl(&["get", "pods", "-n", &ns, "-o", "wide", "--no-headers"])
        .await
        .expect("kubectl get pods");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.starts_with("sched "))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    // NAME READY STATUS RESTARTS AGE IP NODE ...
    assert_eq!(cols[1], "1/1", "{line}");
    assert_eq!(cols[2], "Running", "{line}");
    assert_eq!(cols[3], "0", "{line}");
    assert!(cols[5].parse::<std::net::IpAddr>().is_ok(), "{line}");
    assert_eq!(cols[6], name, "{line}");

    let out = node
        .cp
        .kubectl(&["get", "node", &name, "--no-headers"])
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let cols: Vec<&str> = text.split_whitespace().collect();
    // NAME STATUS ROLES AGE VERSION
    assert_eq!(cols[0], name, "{text}");
    assert_eq!(cols[1], "Ready", "{text}");
    // The API level kubelet-rs implements with its own version as build metadata (#19).
    assert_eq!(
        cols[4],
        kubelet_sources::apiserver::node::kubelet_version(),
        "{text}"
    );
    node.finish().await;
}

/// A pod as `kubectl run` makes it — with the default service-account token volume — runs
/// on the node through the API-server source, reading the token secret as the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_run_pod_with_its_token_volume_runs() {
    let Some(node) = start("cluster-run", vec![]).await else {
        return;
    };
    let name = node.node_name.clone();
    let ns = node.et.namespace.clone();
    let overrides = format!(
        r#"{{"apiVersion":"v1","spec":{{"nodeName":"{name}","terminationGracePeriodSeconds":2}}}}"#
    );
    let out = node
        .cp
        .kubectl(&[
            "run",
            "web",
            "-n",
            &ns,
            "--image",
            kubelet_tests::cri::BUSYBOX_IMAGE,
            "--image-pull-policy=IfNotPresent",
            "--restart=Always",
            "--overrides",
            &overrides,
            "--command",
            "--",
            "sh",
            "-c",
            "cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; exec sleep 3600",
        ])
        .await
        .expect("kubectl run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pods = node.pods();
    let running = eventually(Duration::from_secs(120), "kubectl-run pod Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("web").await.ok()?;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await;
    let spec = running.spec.clone().unwrap();
    assert!(
        spec.volumes
            .unwrap_or_default()
            .iter()
            .any(|v| v.secret.is_some() || v.projected.is_some()),
        "kubectl run gave the pod no token volume"
    );
    // This harness starts no HTTP API (that is tests/tests/server_cluster.rs): read the CRI
    // log file.
    let log = eventually(Duration::from_secs(30), "container log", || {
        let dir = node.et.pod_logs_dir();
        async move {
            let mut found = None;
            for e in std::fs::read_dir(&dir).ok()?.flatten() {
                let f = e.path().join("web").join("0.log");
                if let Ok(text) = std::fs::read_to_string(&f) {
                    found = Some(text);
                }
            }
            found.filter(|t| !t.is_empty())
        }
    })
    .await;
    assert!(
        log.contains(&format!(" {ns}")),
        "the token volume's namespace file: {log}"
    );
    pods.delete("web", &Default::default()).await.unwrap();
    node.finish().await;
}
