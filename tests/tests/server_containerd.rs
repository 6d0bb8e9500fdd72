//! The kubelet server over the real engine on containerd: container logs (options, follow,
//! previous), exec and attach through the proxied streaming URL (a small WebSocket client
//! doing the upgrade as `kubectl` does through the API server), `/run`, `/stats/summary`
//! and `/metrics/resource` with real pods.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::poll_until;
use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_server::stats::SummaryCollector;
use kubelet_server::{Endpoints, KubeletHost, ServerConfig};
use kubelet_tests::engine::{busybox, container_status, wait_running, EngineTest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn serve(
    handle: &kubelet_core::KubeletHandle,
    shutdown: &tokio_util::sync::CancellationToken,
) -> SocketAddr {
    // The one collector, over the kubelet's container manager (cgroups) and runtime.
    let stats = Arc::new(SummaryCollector::for_kubelet(handle).expect("kubelet-cm measures"));
    let host = KubeletHost::new(handle.clone())
        .with_machine_info(&stats.machine_info())
        .with_stats(stats);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(kubelet_server::serve_with(
        l,
        Arc::new(host),
        ServerConfig::plain(Endpoints::Full),
        shutdown.clone(),
    ));
    addr
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let code = r.status().as_u16();
    (code, r.text().await.unwrap())
}

/// The frames of a WebSocket stream until the server closes it: (channel, payload).
async fn ws_frames(stream: &mut tokio::net::TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    loop {
        let mut head = [0u8; 2];
        if stream.read_exact(&mut head).await.is_err() {
            return frames;
        }
        let opcode = head[0] & 0x0f;
        let mut len = u64::from(head[1] & 0x7f);
        if len == 126 {
            let mut b = [0u8; 2];
            stream.read_exact(&mut b).await.unwrap();
            len = u64::from(u16::from_be_bytes(b));
        } else if len == 127 {
            let mut b = [0u8; 8];
            stream.read_exact(&mut b).await.unwrap();
            len = u64::from_be_bytes(b);
        }
        let mut payload = vec![0u8; usize::try_from(len).unwrap()];
        stream.read_exact(&mut payload).await.unwrap();
        match opcode {
            0x8 => return frames,
            0x1 | 0x2 if !payload.is_empty() => frames.push((payload[0], payload[1..].to_vec())),
            _ => {}
        }
    }
}

/// Opens a `v4.channel.k8s.io` WebSocket exec/attach stream through the kubelet server;
/// returns the HTTP status line and the stream.
async fn ws_upgrade(addr: SocketAddr, path_and_query: &str) -> (String, tokio::net::TcpStream) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    // Read the response head byte by byte (the stream follows it directly).
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

fn channel(frames: &[(u8, Vec<u8>)], ch: u8) -> String {
    frames
        .iter()
        .filter(|(c, _)| *c == ch)
        .map(|(_, p)| String::from_utf8_lossy(p).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_exec_run_and_stats_on_containerd() {
    let Some(t) = EngineTest::new("server").await else {
        return;
    };
    let uid = t.uid("srv");
    let pod = t.pod(
        "srv",
        &uid,
        vec![
            {
                let mut app = busybox("app", "echo hello; echo oops >&2; i=0; while true; i=$((i+1)); do echo tick $i; sleep 0.3; done");
                app.readiness_probe = Some(k8s_openapi::api::core::v1::Probe {
                    exec: Some(k8s_openapi::api::core::v1::ExecAction {
                        command: Some(vec!["true".into()]),
                    }),
                    period_seconds: Some(1),
                    ..Default::default()
                });
                app
            },
            busybox("crash", "echo run $$ $(cat /proc/uptime); sleep 1; exit 3"),
        ],
    );
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let addr = serve(&k.handle, &k.shutdown).await;
    let ns = t.namespace.clone();

    // Logs: the first lines, then options.
    let base = format!("/containerLogs/{ns}/srv/app");
    let all = poll_until(Duration::from_secs(10), || async {
        let (code, text) = get(addr, &base).await;
        (code == 200 && text.contains("tick 3")).then_some(text)
    })
    .await
    .expect("app logs");
    let first: Vec<&str> = all.lines().take(4).collect();
    for want in ["hello", "oops", "tick 1"] {
        assert!(first.contains(&want), "{all}");
    }
    let (_, tail) = get(addr, &format!("{base}?tailLines=1")).await;
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(tail.starts_with("tick "), "{tail}");
    let (_, limited) = get(addr, &format!("{base}?limitBytes=3")).await;
    assert_eq!(limited.len(), 3);
    let (_, stamped) = get(addr, &format!("{base}?timestamps=true&tailLines=2")).await;
    for l in stamped.lines() {
        let (ts, rest) = l.split_once(' ').unwrap();
        assert!(ts.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{l}");
        assert!(rest.starts_with("tick "), "{l}");
    }
    // Lines older than a second are left out once the first lines are that old.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, recent) = get(addr, &format!("{base}?sinceSeconds=1")).await;
    assert!(!recent.contains("hello"), "{recent}");

    // Follow: new ticks keep arriving on one response.
    let mut resp = reqwest::get(format!("http://{addr}{base}?follow=true&tailLines=0"))
        .await
        .unwrap();
    let mut followed = String::new();
    while followed.matches("tick").count() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk())
            .await
            .expect("followed lines arrive")
            .unwrap()
            .expect("stream open");
        followed.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!followed.contains("hello"), "{followed}");
    drop(resp);

    // Previous: once the crashing container restarted, its first run's output.
    let first_run = poll_until(Duration::from_secs(60), || async {
        let s = k.handle.pod_status(&uid)?;
        let c = container_status(&s, "crash")?;
        if c.restart_count < 1 {
            return None;
        }
        let (code, text) = get(
            addr,
            &format!("/containerLogs/{ns}/srv/crash?previous=true"),
        )
        .await;
        (code == 200 && text.starts_with("run ")).then_some(text)
    })
    .await
    .expect("previous logs of the crashing container");
    let (_, current) = get(addr, &format!("/containerLogs/{ns}/srv/crash")).await;
    assert_ne!(first_run, current, "previous and current instance differ");
    let (code, _) = get(addr, &format!("/containerLogs/{ns}/srv/nope")).await;
    assert_eq!(code, 404);

    // Exec through the streaming proxy (WebSocket, v4 channel protocol).
    let (status, mut ws) = ws_upgrade(
        addr,
        &format!("/exec/{ns}/srv/app?command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+7&stdout=1&stderr=1"),
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let frames = tokio::time::timeout(Duration::from_secs(30), ws_frames(&mut ws))
        .await
        .expect("exec finishes");
    assert_eq!(channel(&frames, 1), "out\n", "{frames:?}");
    assert_eq!(channel(&frames, 2), "err\n", "{frames:?}");
    let status_json: serde_json::Value = serde_json::from_str(&channel(&frames, 3)).unwrap();
    assert_eq!(status_json["reason"], "NonZeroExitCode", "{status_json}");
    assert_eq!(
        status_json["details"]["causes"][0]["message"], "7",
        "{status_json}"
    );

    let (status, mut ws) =
        ws_upgrade(addr, &format!("/exec/{ns}/srv/app?command=true&stdout=1")).await;
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let frames = tokio::time::timeout(Duration::from_secs(30), ws_frames(&mut ws))
        .await
        .unwrap();
    let ok: serde_json::Value = serde_json::from_str(&channel(&frames, 3)).unwrap();
    assert_eq!(ok["status"], "Success", "{ok}");

    // Attach: the running container's output stream.
    let (status, mut ws) = ws_upgrade(addr, &format!("/attach/{ns}/srv/app?stdout=1")).await;
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("tick") {
        let n = tokio::time::timeout(Duration::from_secs(10), ws.read(&mut buf))
            .await
            .expect("attached output arrives")
            .unwrap();
        assert!(
            n > 0,
            "attach stream closed: {:?}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    drop(ws);

    // Exec of an unknown container: 404 before any upgrade.
    let (status, _) = ws_upgrade(addr, &format!("/exec/{ns}/srv/nope?command=true&stdout=1")).await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");

    // /run returns the command's output.
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/run/{ns}/srv/app?cmd=echo+ran"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().await.unwrap(), "ran\n");

    // Stats: node and pod CPU/memory/network from cgroups and the pod's netns.
    let summary = poll_until(Duration::from_secs(20), || async {
        let (code, text) = get(addr, "/stats/summary").await;
        assert_eq!(code, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rated = v["pods"][0]["cpu"]["usageNanoCores"].is_u64();
        if !rated {
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        rated.then_some(v)
    })
    .await
    .expect("a summary with CPU rates");
    println!("{}", serde_json::to_string_pretty(&summary).unwrap());
    let node = &summary["node"];
    assert_eq!(node["nodeName"], "kubelet-rs-itest");
    assert!(node["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0);
    assert!(node["memory"]["workingSetBytes"].as_u64().unwrap() > 0);
    assert!(node["memory"]["availableBytes"].as_u64().unwrap() > 0);
    assert!(node["fs"]["capacityBytes"].as_u64().unwrap() > 0);
    let pods = summary["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1, "only this test's pod (scoped runtime)");
    let p = &pods[0];
    assert_eq!(p["podRef"]["uid"], uid.as_str());
    assert!(p["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0);
    assert!(p["memory"]["workingSetBytes"].as_u64().unwrap() > 0);
    assert_eq!(p["network"]["name"], "eth0", "{p}");
    let app = p["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "app")
        .expect("app container stats");
    assert!(
        app["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap() > 0,
        "{app}"
    );
    assert!(
        app["memory"]["workingSetBytes"].as_u64().unwrap() > 0,
        "{app}"
    );
    assert!(app["logs"]["usedBytes"].as_u64().unwrap() > 0, "{app}");

    // /spec/: the machine from the same provider.
    let (code, spec) = get(addr, "/spec/").await;
    assert_eq!(code, 200, "{spec}");
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert!(spec["num_cores"].as_u64().unwrap() > 0, "{spec}");
    assert!(!spec["boot_id"].as_str().unwrap().is_empty(), "{spec}");

    let (code, metrics) = get(addr, "/metrics/resource").await;
    assert_eq!(code, 200);
    assert!(metrics.contains(&format!("container_memory_working_set_bytes{{container=\"app\",namespace=\"{ns}\",pod=\"srv\"}}")), "{metrics}");
    assert!(
        metrics.contains("node_cpu_usage_seconds_total "),
        "{metrics}"
    );
    let (code, probes) = get(addr, "/metrics/probes").await;
    assert_eq!(code, 200);
    assert!(
        probes.contains(&format!("prober_probe_total{{container=\"app\",namespace=\"{ns}\",pod=\"srv\",pod_uid=\"{uid}\",probe_type=\"Readiness\",result=\"successful\"}}")),
        "{probes}"
    );

    k.stop().await;
}

/// The conformance specs' `cat file && cat file` output has no final newline. While the
/// container runs, the runtime holds such a line back (the log has only the ended lines, for
/// Go's kubelet too); once the container exited it is in the log, and the logs carry it
/// as Go's reader returns it.
#[tokio::test(flavor = "multi_thread")]
async fn logs_keep_a_last_line_without_newline() {
    let Some(t) = EngineTest::new("server-nonl").await else {
        return;
    };
    let uid = t.uid("nonl");
    let mut pod = t.pod(
        "nonl",
        &uid,
        vec![
            busybox("waits", "printf 'first\\nno newline'; sleep 600"),
            busybox("exits", "printf 'abc'; printf 'def'"),
        ],
    );
    pod.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let addr = serve(&k.handle, &k.shutdown).await;
    let ns = t.namespace.clone();
    for (container, want) in [("waits", "first\n"), ("exits", "abcdef")] {
        let path = format!("/containerLogs/{ns}/nonl/{container}");
        let got = poll_until(Duration::from_secs(60), || async {
            let (code, text) = get(addr, &path).await;
            (code == 200 && text == want).then_some(text)
        })
        .await;
        // What the runtime wrote (shown with --nocapture, and in a failure).
        let raw: Vec<String> = std::fs::read_dir(t.pod_logs_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join(container).join("0.log"))
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        eprintln!("{container}: log file {raw:?}");
        if got.is_none() {
            let (_, text) = get(addr, &path).await;
            panic!("{container}: logs {text:?}, want {want:?}; log file: {raw:?}");
        }
    }
    k.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_of_a_succeeded_pod_stay_readable() {
    // The conformance volume specs read the output of a pod that ran to completion: its
    // containers (and their logs) stay until the pod is deleted, as Go keeps them.
    let Some(t) = EngineTest::new("server-done").await else {
        return;
    };
    let uid = t.uid("done");
    let mut pod = t.pod(
        "done",
        &uid,
        vec![busybox("once", "echo 'content of file: value-1'")],
    );
    pod.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    let addr = serve(&k.handle, &k.shutdown).await;
    let succeeded = poll_until(Duration::from_secs(60), || async {
        k.handle
            .pod_status(&uid)
            .filter(|s| s.phase.as_deref() == Some("Succeeded"))
    })
    .await;
    assert!(succeeded.is_some(), "{:?}", k.handle.pod_status(&uid));
    let path = format!("/containerLogs/{}/done/once", t.namespace);
    for _ in 0..5 {
        let (code, text) = get(addr, &path).await;
        assert_eq!(
            (code, text.as_str()),
            (200, "content of file: value-1\n"),
            "right after Succeeded and on"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    k.stop().await;
}
