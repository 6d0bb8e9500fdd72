//! Container log rotation on the real containerd: a container writes ~20 MB under
//! `containerLogMaxSize: 1Mi`, `containerLogMaxFiles: 3`. Its log directory stays within
//! bounds, rotated files are named and compressed as Go names and compresses them,
//! `/containerLogs` returns the newest lines, and a `follow` started before the first
//! rotation sees every line exactly once across all of them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::logs::ContainerLogConfig;
use kubelet_core::testing::StaticSource;
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_server::{Endpoints, KubeletHost, ServerConfig};
use kubelet_tests::engine::{busybox, wait_running, EngineTest};

const LINES: usize = 20_000;

async fn serve(
    handle: &kubelet_core::KubeletHandle,
    shutdown: &tokio_util::sync::CancellationToken,
) -> SocketAddr {
    let host = KubeletHost::new(handle.clone());
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

/// (file names, total bytes) of a directory.
fn dir_state(dir: &Path) -> (Vec<String>, u64) {
    let mut names = Vec::new();
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        names.push(e.file_name().to_string_lossy().into_owned());
        total += e.metadata().map(|m| m.len()).unwrap_or(0);
    }
    names.sort();
    (names, total)
}

/// The line numbers of `line N …` in a log.
fn numbers(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| l.strip_prefix("line "))
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_megabytes_under_one_mebibyte_and_three_files() {
    let Some(t) = EngineTest::new("logrotation").await else {
        return;
    };
    let uid = t.uid("writer");
    // 20 batches of 1,000 lines of ~1 KiB (about 21 MB with the CRI prefix), one batch
    // every 2 s, then it idles. It waits for /tmp/go before writing, so the follow below
    // starts before the first line.
    let script = format!(
        "while [ ! -f /tmp/go ]; do sleep 0.2; done; b=0; while [ $b -lt {} ]; do \
         awk -v b=$b 'BEGIN{{s=\"\"; for(k=0;k<100;k++) s=s \"xxxxxxxxxx\"; for(j=0;j<1000;j++) printf \"line %d %s\\n\", b*1000+j, s}}'; \
         b=$((b+1)); sleep 2; done; echo done; sleep 3600",
        LINES / 1000
    );
    let pod = t.pod("writer", &uid, vec![busybox("app", &script)]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let config = kubelet_core::Config {
        container_logs: ContainerLogConfig {
            max_size: 1 << 20,
            max_files: 3,
            max_workers: 1,
            monitor_interval: Duration::from_secs(3),
        },
        ..t.config()
    };
    let k = t.start_with(config, vec![source as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let addr = serve(&k.handle, &k.shutdown).await;
    let base = format!("/containerLogs/{}/writer/app", t.namespace);
    let log_dir = t
        .pod_logs_dir()
        .join(format!("{}_writer_{uid}", t.namespace))
        .join("app");

    // Follow from the start, collecting everything.
    let mut resp = reqwest::get(format!("http://{addr}{base}?follow=true"))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let follower = tokio::spawn(async move {
        let mut text = String::new();
        while !text.contains("\ndone\n") {
            match tokio::time::timeout(Duration::from_secs(60), resp.chunk()).await {
                Ok(Ok(Some(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
                _ => break,
            }
        }
        text
    });
    let id = t.containers(&uid).await[0].id.clone();
    t.cri
        .exec_sync(
            &id,
            &["touch".into(), "/tmp/go".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();

    // While it writes: the directory stays within bounds.
    let mut max_bytes = 0u64;
    let mut max_files = 0usize;
    let mut seen_names = std::collections::BTreeSet::new();
    let start = kubelet_core::clock::monotonic_now();
    loop {
        let (names, bytes) = dir_state(&log_dir);
        max_bytes = max_bytes.max(bytes);
        max_files = max_files.max(names.iter().filter(|n| !n.ends_with(".tmp")).count());
        seen_names.extend(names);
        let (_, tail) = kubelet_tests_get(addr, &format!("{base}?tailLines=1")).await;
        if tail.trim() == "done" {
            break;
        }
        assert!(
            kubelet_core::clock::elapsed(start) < Duration::from_secs(240),
            "the writer did not finish"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "log directory: at most {:.1} MiB and {max_files} files while ~21 MB were written; names seen: {seen_names:?}",
        max_bytes as f64 / f64::from(1 << 20)
    );
    // Written: ~21 MB. Kept: the current log, one rotated file uncompressed, one compressed;
    // each of the first two at most the limit plus what one monitoring interval adds
    // (about 1.5 MB here).
    assert!(
        max_bytes < 8 << 20,
        "{max_bytes} bytes in the log directory"
    );
    assert!(max_files <= 3, "{max_files} files: {seen_names:?}");
    // Go's names: 0.log, 0.log.YYYYMMDD-hhmmss, 0.log.YYYYMMDD-hhmmss.gz.
    let rotated: Vec<&String> = seen_names
        .iter()
        .filter(|n| n.starts_with("0.log."))
        .collect();
    assert!(rotated.len() >= 3, "{seen_names:?}");
    for n in &rotated {
        let stamp = n
            .trim_start_matches("0.log.")
            .trim_end_matches(".tmp")
            .trim_end_matches(".gz");
        let (date, time) = stamp.split_once('-').unwrap_or_else(|| panic!("{n}"));
        assert!(
            date.len() == 8
                && time.len() == 6
                && date.chars().chain(time.chars()).all(|c| c.is_ascii_digit()),
            "{n}"
        );
    }
    let gz = std::fs::read_dir(&log_dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".gz"))
        .expect("a compressed rotated log")
        .path();
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
        &mut text,
    )
    .unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.contains(" stdout F line "), "CRI log format: {first}");

    // /containerLogs: the newest lines.
    let (code, tail) = kubelet_tests_get(addr, &format!("{base}?tailLines=3")).await;
    assert_eq!(code, 200);
    assert_eq!(numbers(&tail), [LINES - 2, LINES - 1], "{tail}");
    assert!(tail.ends_with("done\n"));

    // The follow saw every line once, in order, across every rotation.
    let followed = tokio::time::timeout(Duration::from_secs(60), follower)
        .await
        .expect("the follow ends")
        .unwrap();
    let got = numbers(&followed);
    let set: std::collections::HashSet<usize> = got.iter().copied().collect();
    let missing: Vec<usize> = (0..LINES).filter(|n| !set.contains(n)).take(10).collect();
    assert!(
        missing.is_empty(),
        "lines lost across rotations, e.g. {missing:?}"
    );
    assert_eq!(
        got,
        (0..LINES).collect::<Vec<_>>(),
        "every line once, in order"
    );
    k.stop().await;
}

async fn kubelet_tests_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    let code = r.status().as_u16();
    (code, r.text().await.unwrap())
}
