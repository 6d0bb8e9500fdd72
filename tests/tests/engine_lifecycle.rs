//! The container lifecycle on the real runtime: HTTP readiness and liveness probes against
//! busybox httpd, a preStop hook observed before the container stops, graceful termination
//! (a container that traps SIGTERM vs one that ignores it), and termination messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, HTTPGetAction, Lifecycle, LifecycleHandler, Pod, Probe,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{
    busybox, condition, container_status, eventually, phase, wait_until, EngineTest, RunningKubelet,
};

fn http_probe(path: &str, period: i32, failure: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("http".into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failure),
        ..Default::default()
    }
}

fn with_grace(mut p: Pod, secs: i64) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.termination_grace_period_seconds = Some(secs);
    }
    p
}

async fn remove_and_wait(t: &EngineTest, source: &StaticSource, uid: &str) -> Duration {
    let t0 = kubelet_core::clock::monotonic_now();
    source.set(vec![]);
    eventually(Duration::from_secs(60), "pod removed", || async {
        t.sandboxes(uid).await.is_empty().then_some(())
    })
    .await;
    kubelet_core::clock::elapsed(t0)
}

fn running(k: &RunningKubelet, uid: &str, c: &str) -> bool {
    k.handle.pod_status(uid).is_some_and(|s| {
        container_status(&s, c)
            .and_then(|c| c.state.as_ref())
            .is_some_and(|st| st.running.is_some())
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn httpd_readiness_passes_and_liveness_restarts_after_the_file_is_deleted() {
    let Some(t) = EngineTest::new("httpprobe").await else {
        return;
    };
    let uid = t.uid("web");
    let mut c = busybox(
        "web",
        "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www",
    );
    c.ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
        name: Some("http".into()),
        container_port: 8080,
        ..Default::default()
    }]);
    c.readiness_probe = Some(http_probe("/index.html", 1, 1));
    c.liveness_probe = Some(http_probe("/index.html", 1, 2));
    let source = Arc::new(StaticSource::new("file", vec![t.pod("web", &uid, vec![c])]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = wait_until(Duration::from_secs(60), "Ready", || {
        k.handle
            .pod_status(&uid)
            .filter(|s| condition(s, "Ready").as_deref() == Some("True"))
    })
    .await;
    assert_eq!(phase(&s), "Running");
    assert!(container_status(&s, "web").unwrap().ready);
    // Delete the served file inside the container: the liveness probe now gets 404.
    let id = container_status(&s, "web")
        .and_then(|c| c.container_id.clone())
        .and_then(|id| id.split_once("://").map(|(_, id)| id.to_string()))
        .unwrap();
    let out = k
        .handle
        .runtime()
        .exec_sync(
            &id,
            &["rm".into(), "/www/index.html".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    let s = wait_until(Duration::from_secs(60), "restarted and ready again", || {
        k.handle
            .pod_status(&uid)
            .filter(|s| container_status(s, "web").is_some_and(|c| c.restart_count >= 1 && c.ready))
    })
    .await;
    let last = container_status(&s, "web")
        .and_then(|c| c.last_state.as_ref())
        .and_then(|l| l.terminated.as_ref())
        .map(|t| t.exit_code);
    let counts = k.handle.probe_counts();
    remove_and_wait(&t, &source, &uid).await;
    k.stop().await;
    assert!(last.is_some(), "the killed container is the last state");
    assert!(counts
        .iter()
        .any(|(k, n)| k.probe_type == "Liveness" && k.result == "failed" && *n >= 2));
}

#[tokio::test(flavor = "multi_thread")]
async fn pre_stop_hook_runs_before_the_container_stops() {
    let Some(t) = EngineTest::new("prestop").await else {
        return;
    };
    let uid = t.uid("hooked");
    let mut c = busybox("c", "trap 'exit 0' TERM; while true; do sleep 1; done");
    // The hook writes the termination message file from inside the running container.
    c.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    "echo prestop-ran > /dev/termination-log".into(),
                ]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let pod = with_grace(t.pod("hooked", &uid, vec![c]), 20);
    let source = Arc::new(StaticSource::new("file", vec![pod.clone()]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_until(Duration::from_secs(60), "running", || {
        running(&k, &uid, "c").then_some(())
    })
    .await;
    // Delete the pod (graceful deletion keeps it in the source with a deletion timestamp).
    let mut deleted = pod.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
        ));
    deleted.metadata.deletion_grace_period_seconds = Some(20);
    source.set(vec![deleted]);
    let s = wait_until(Duration::from_secs(60), "terminated", || {
        k.handle.pod_status(&uid).filter(|s| {
            container_status(s, "c")
                .and_then(|c| c.state.as_ref())
                .is_some_and(|st| st.terminated.is_some())
        })
    })
    .await;
    let term = container_status(&s, "c")
        .and_then(|c| c.state.as_ref())
        .and_then(|st| st.terminated.clone())
        .unwrap();
    remove_and_wait(&t, &source, &uid).await;
    k.stop().await;
    assert_eq!(term.message.as_deref(), Some("prestop-ran\n"));
    assert_eq!(
        term.exit_code, 0,
        "the container exited on SIGTERM after the hook"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn trapping_term_exits_early_ignoring_it_is_killed_at_the_deadline() {
    let Some(t) = EngineTest::new("grace").await else {
        return;
    };
    let polite = t.uid("polite");
    let stubborn = t.uid("stubborn");
    let pods = [
        with_grace(
            t.pod(
                "polite",
                &polite,
                vec![busybox(
                    "c",
                    "trap 'exit 0' TERM; while true; do sleep 1; done",
                )],
            ),
            20,
        ),
        with_grace(
            t.pod(
                "stubborn",
                &stubborn,
                vec![busybox("c", "trap '' TERM; while true; do sleep 1; done")],
            ),
            4,
        ),
    ];
    let polite_src = Arc::new(StaticSource::new("file", vec![pods[0].clone()]));
    let stubborn_src = Arc::new(StaticSource::new("http", vec![pods[1].clone()]));
    let k = t.start(vec![
        polite_src.clone() as Arc<dyn PodSource>,
        stubborn_src.clone() as Arc<dyn PodSource>,
    ]);
    wait_until(Duration::from_secs(60), "running", || {
        (running(&k, &polite, "c") && running(&k, &stubborn, "c")).then_some(())
    })
    .await;
    let polite_took = remove_and_wait(&t, &polite_src, &polite).await;
    let stubborn_took = remove_and_wait(&t, &stubborn_src, &stubborn).await;
    k.stop().await;
    assert!(
        polite_took < Duration::from_secs(10),
        "TERM-trapping pod took {polite_took:?} of its 20s grace"
    );
    assert!(
        stubborn_took >= Duration::from_secs(4) && stubborn_took < Duration::from_secs(15),
        "TERM-ignoring pod took {stubborn_took:?} with a 4s grace"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn termination_message_from_file_and_from_logs_on_error() {
    let Some(t) = EngineTest::new("termmsg").await else {
        return;
    };
    let uid = t.uid("msgs");
    let file = busybox("file", "printf 'all done' > /dev/termination-log; exit 0");
    let mut logs: Container = busybox("logs", "echo something broke; exit 3");
    logs.termination_message_policy = Some("FallbackToLogsOnError".into());
    let mut custom = busybox("custom", "echo custom > /tmp/msg; exit 1");
    custom.termination_message_path = Some("/tmp/msg".into());
    let mut pod = t.pod("msgs", &uid, vec![file, logs, custom]);
    if let Some(s) = pod.spec.as_mut() {
        s.restart_policy = Some("Never".into());
    }
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let s = wait_until(Duration::from_secs(60), "Failed", || {
        k.handle.pod_status(&uid).filter(|s| phase(s) == "Failed")
    })
    .await;
    let msg = |c: &str| {
        container_status(&s, c)
            .and_then(|c| c.state.as_ref())
            .and_then(|st| st.terminated.as_ref())
            .and_then(|t| t.message.clone())
    };
    let got = (msg("file"), msg("logs"), msg("custom"));
    remove_and_wait(&t, &source, &uid).await;
    k.stop().await;
    assert_eq!(got.0.as_deref(), Some("all done"));
    assert_eq!(got.1.as_deref(), Some("something broke\n"));
    assert_eq!(got.2.as_deref(), Some("custom\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_probe_that_outlives_its_timeout_fails() {
    let Some(t) = EngineTest::new("probetimeout").await else {
        return;
    };
    let uid = t.uid("slow");
    let mut c = busybox("c", "exec sleep 3600");
    c.liveness_probe = Some(Probe {
        exec: Some(ExecAction {
            command: Some(vec!["sleep".into(), "10".into()]),
        }),
        timeout_seconds: Some(1),
        period_seconds: Some(2),
        failure_threshold: Some(1),
        ..Default::default()
    });
    let source = Arc::new(StaticSource::new(
        "file",
        vec![t.pod("slow", &uid, vec![c])],
    ));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_until(
        Duration::from_secs(60),
        "restarted by the timed-out probe",
        || {
            k.handle
                .pod_status(&uid)
                .filter(|s| container_status(s, "c").is_some_and(|c| c.restart_count >= 1))
        },
    )
    .await;
    let counts = k.handle.probe_counts();
    remove_and_wait(&t, &source, &uid).await;
    k.stop().await;
    assert!(counts
        .iter()
        .any(|(k, n)| k.probe_type == "Liveness" && k.result == "failed" && *n >= 1));
}
