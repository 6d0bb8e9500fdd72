//! The real engine runs a two-container pod on containerd: status, logs, exec.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{busybox, condition, container_status, wait_running, EngineTest};

#[tokio::test(flavor = "multi_thread")]
async fn two_container_pod_runs_logs_and_execs() {
    let Some(t) = EngineTest::new("pods").await else {
        return;
    };
    let uid = t.uid("two");
    let pod = t.pod(
        "two",
        &uid,
        vec![
            busybox("one", "echo hello-one; echo line2-one; exec sleep 3600"),
            busybox("two", "echo hello-two; exec sleep 3600"),
        ],
    );
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);

    let status = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    assert_eq!(status.phase.as_deref(), Some("Running"));
    for name in ["one", "two"] {
        let c = container_status(&status, name).expect("container status");
        assert!(c.ready, "{c:?}");
        assert!(c.state.as_ref().unwrap().running.is_some(), "{c:?}");
        assert_eq!(c.restart_count, 0);
    }
    let ip = status.pod_ip.clone().expect("pod IP");
    assert!(
        kubelet_tests::cri::in_pod_subnet(&ip),
        "pod IP {ip} not in {}",
        kubelet_tests::cri::pod_subnet()
    );
    assert_eq!(condition(&status, "Ready").as_deref(), Some("True"));
    assert_eq!(
        condition(&status, "ContainersReady").as_deref(),
        Some("True")
    );
    assert_eq!(condition(&status, "Initialized").as_deref(), Some("True"));

    // Each container's stdout lands in its CRI log file.
    let pod_dir = t.pod_logs_dir().join(format!("{}_two_{uid}", t.namespace));
    for (name, lines) in [
        ("one", vec!["hello-one", "line2-one"]),
        ("two", vec!["hello-two"]),
    ] {
        let path = pod_dir.join(name).join("0.log");
        let text = kubelet_core::testing::poll_until(Duration::from_secs(10), || {
            let path = path.clone();
            let lines = lines.clone();
            async move {
                let text = tokio::fs::read_to_string(&path).await.ok()?;
                lines.iter().all(|l| text.contains(l)).then_some(text)
            }
        })
        .await
        .unwrap_or_else(|| panic!("log {} lacks {lines:?}", path.display()));
        // CRI log format: "<time> stdout F <line>".
        assert!(
            text.lines()
                .any(|l| l.contains(" stdout F ") && l.ends_with(lines[0])),
            "{text}"
        );
    }

    // exec_sync through the engine's runtime.
    let id = container_status(&status, "one")
        .unwrap()
        .container_id
        .clone()
        .unwrap();
    let id = id.split("://").last().unwrap().to_string();
    let out = k
        .handle
        .runtime()
        .exec_sync(
            &id,
            &["sh".into(), "-c".into(), "echo exec-out; exit 7".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "exec-out");
    assert_eq!(out.exit_code, 7);
    assert!(k.handle.check_health().is_ok());

    // Removing the pod cleans it up before the test ends.
    source.set(vec![]);
    kubelet_tests::engine::eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn init_containers_run_to_completion_in_order_before_the_app() {
    let Some(t) = EngineTest::new("initc").await else {
        return;
    };
    let uid = t.uid("init");
    let mut pod = t.pod("init", &uid, vec![busybox("app", "exec sleep 3600")]);
    pod.spec.as_mut().unwrap().init_containers = Some(vec![
        busybox("first", "echo first-ran; sleep 1"),
        busybox("second", "echo second-ran"),
    ]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let status = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    assert_eq!(condition(&status, "Initialized").as_deref(), Some("True"));
    let inits = status
        .init_container_statuses
        .clone()
        .expect("init statuses");
    assert_eq!(
        inits.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["first", "second"]
    );
    let finished: Vec<_> = inits
        .iter()
        .map(|c| {
            let term = c
                .state
                .as_ref()
                .unwrap()
                .terminated
                .clone()
                .expect("terminated");
            assert_eq!(term.exit_code, 0, "{c:?}");
            assert_eq!(term.reason.as_deref(), Some("Completed"), "{c:?}");
            (term.started_at.unwrap(), term.finished_at.unwrap())
        })
        .collect();
    // In order: the second started after the first finished; the app after both.
    assert!(finished[1].0 >= finished[0].1, "{finished:?}");
    let app = container_status(&status, "app").unwrap();
    let app_started = app
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .clone()
        .unwrap();
    assert!(app_started >= finished[1].1, "{app_started:?} {finished:?}");
    let log = t
        .pod_logs_dir()
        .join(format!("{}_init_{uid}", t.namespace))
        .join("first/0.log");
    assert!(std::fs::read_to_string(&log).unwrap().contains("first-ran"));
    // Init containers are not run again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = k.handle.pod_status(&uid).unwrap();
    for c in again.init_container_statuses.unwrap() {
        assert_eq!(c.restart_count, 0, "{c:?}");
    }

    source.set(vec![]);
    kubelet_tests::engine::eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_network_pod_reports_the_node_ip() {
    let Some(t) = EngineTest::new("hostnet").await else {
        return;
    };
    let uid = t.uid("hostnet");
    let mut pod = t.pod("hostnet", &uid, vec![busybox("c", "exec sleep 3600")]);
    pod.spec.as_mut().unwrap().host_network = Some(true);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let status = wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let node_ip = k.handle.config().node_ips[0].clone();
    assert_eq!(status.pod_ip.as_deref(), Some(node_ip.as_str()));
    assert_eq!(status.host_ip.as_deref(), Some(node_ip.as_str()));
    // The container really is in the host's network namespace.
    let id = container_status(&status, "c")
        .unwrap()
        .container_id
        .clone()
        .unwrap();
    let out = k
        .handle
        .runtime()
        .exec_sync(
            id.split("://").last().unwrap(),
            &["readlink".into(), "/proc/1/ns/net".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let host = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        host.to_string_lossy()
    );

    source.set(vec![]);
    kubelet_tests::engine::eventually(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
