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
    let octets: Vec<u8> = ip.split('.').filter_map(|o| o.parse().ok()).collect();
    assert!(
        octets.len() == 4 && octets[0] == 10 && octets[1] == 88,
        "pod IP {ip} not in 10.88.0.0/16"
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
        let text = kubelet_tests::cri::eventually(Duration::from_secs(10), || {
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
    kubelet_tests::engine::wait_until_async(Duration::from_secs(30), "pod removed", || async {
        t.sandboxes(&uid).await.is_empty().then_some(())
    })
    .await;
    k.stop().await;
}
