//! Ephemeral containers (`kubectl debug`) through the real API server's
//! `pods/ephemeralcontainers` subresource. v1.20's apiserver serves it only with the alpha
//! `EphemeralContainers` gate, which the shared control plane does not enable: this test runs
//! on an instance of its own ([`EPHEMERAL_INSTANCE_ENV`], started here and stopped at the end).
//! A debugger container targeting the pod's app is added through the subresource; the kubelet
//! starts it in the running pod, in the app's process namespace (it sees `sleep 3600`), reports
//! it in `ephemeralContainerStatuses`, keeps its log, and never restarts it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, phase, start_on};
use kube::api::PostParams;
use kubelet_tests::cluster::{ControlPlane, EPHEMERAL_INSTANCE_ENV};
use kubelet_tests::engine::EngineTest;

/// Stops the test's own control plane however the test ends.
struct StopInstance(Option<ControlPlane>);

impl Drop for StopInstance {
    fn drop(&mut self) {
        if let Some(cp) = self.0.take() {
            // Drop may run on the test's runtime: stop from a thread of its own.
            let _ = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(cp.stop_instance()))
            })
            .join();
        }
    }
}

async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> serde_json::Value {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(
            body.map(|b| serde_json::to_vec(b).unwrap())
                .unwrap_or_default(),
        )
        .unwrap();
    client
        .request::<serde_json::Value>(request)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ephemeral_container_through_the_api_server_subresource() {
    let Some(et) = EngineTest::new("cluster-ephemeral").await else {
        return;
    };
    let cp = match ControlPlane::start_instance(EPHEMERAL_INSTANCE_ENV).await {
        Ok(cp) => cp,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED cluster-ephemeral: own control plane did not start: {e}");
            return;
        }
        Err(e) => panic!("the ephemeral test's control plane under CI: {e}"),
    };
    let _stop = StopInstance(Some(cp.clone()));
    let node = start_on(et, cp, |_| vec![], |_| {}, |_| {}, |b| b).await;
    let pods = node.pods();
    let ns = node.et.namespace.clone();
    pods.create(
        &PostParams::default(),
        &node.pod("dbg", "exec sleep 3600", "Always"),
    )
    .await
    .unwrap();
    let running = eventually(Duration::from_secs(90), "dbg Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("dbg").await.ok()?;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await;
    let uid = running.metadata.uid.clone().unwrap();

    // kubectl debug --target=app, as v1.20's kubectl does it: read the EphemeralContainers
    // object of the subresource, append the debugger, write it back.
    let path = format!("/api/v1/namespaces/{ns}/pods/dbg/ephemeralcontainers");
    let mut object = raw(&node.admin, "GET", &path, None).await;
    assert_eq!(object["kind"], "EphemeralContainers", "{object}");
    object["ephemeralContainers"] = serde_json::json!([{
        "name": "debugger",
        "image": kubelet_tests::cri::BUSYBOX_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", "ps; echo debug-done"],
        "targetContainerName": "main",
        "terminationMessagePolicy": "File",
    }]);
    let written = raw(&node.admin, "PUT", &path, Some(&object)).await;
    assert_eq!(
        written["ephemeralContainers"][0]["name"], "debugger",
        "{written}"
    );

    // The kubelet runs it once to completion and reports it.
    let status = eventually(Duration::from_secs(90), "debugger terminated", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("dbg").await.ok()?;
            let st = p.status?.ephemeral_container_statuses?.into_iter().next()?;
            st.state.as_ref()?.terminated.as_ref()?;
            Some(st)
        }
    })
    .await;
    assert_eq!(status.name, "debugger");
    let term = status.state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!(term.exit_code, 0, "{status:?}");
    assert_eq!(term.reason.as_deref(), Some("Completed"));
    // Its log: the target's processes (shared process namespace) and its own output.
    let log = node
        .et
        .pod_logs_dir()
        .join(format!("{ns}_dbg_{uid}"))
        .join("debugger")
        .join("0.log");
    let text = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(text.contains("debug-done"), "{text}");
    assert!(
        text.contains("sleep 3600"),
        "the target's processes: {text}"
    );

    // Never restarted, and the app keeps running.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let p = pods.get("dbg").await.unwrap();
    let st = p.status.clone().unwrap();
    let eph = &st.ephemeral_container_statuses.unwrap()[0];
    assert_eq!(eph.restart_count, 0);
    assert!(eph.state.as_ref().unwrap().terminated.is_some(), "{eph:?}");
    assert_eq!(phase(&p), "Running");
    let app = &st.container_statuses.unwrap()[0];
    assert_eq!(app.restart_count, 0);
    assert!(
        node.et
            .containers(&uid)
            .await
            .iter()
            .filter(|c| c.name == "debugger")
            .count()
            == 1
    );
    node.finish().await;
}
