//! Engine benchmark: drives the whole kubelet engine with the simulated runtime and prints
//! figures (this is a measurement, not a test: nothing here asserts a timing).
//!
//! `cargo bench -p kubelet-core --features testing --bench engine` prints, for 110, 1,000 and
//! 10,000 pods added at once: the wall time until all are Running and the process's peak RSS;
//! then the CPU used per idle minute with 110 Running pods. Each size runs in a fresh
//! process so the RSS figures do not mix. `BENCH_IDLE_SECS` (default 60) sets the idle window.

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::{container, pod, FakeContainerManager, SimRuntime, StaticSource};
use kubelet_core::{Config, Kubelet};
use tokio_util::sync::CancellationToken;

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of this process, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

async fn run_size(n: usize, idle_secs: u64) {
    let cm = FakeContainerManager::with_capacity(&[
        ("cpu", "100000"),
        ("memory", "1Ti"),
        ("pods", &n.to_string()),
    ]);
    let pods: Vec<_> = (0..n)
        .map(|i| {
            pod(
                &format!("pod-{i}"),
                &format!("uid-{i:06}"),
                vec![container("c", "busybox:1.0")],
            )
        })
        .collect();
    let source = Arc::new(StaticSource::silent("file"));
    let kubelet = match Kubelet::builder()
        .config(Config {
            node_name: "bench".into(),
            max_pods: n as u32,
            resolv_conf: Default::default(),
            root_dir: Default::default(),
            ..Config::default()
        })
        .runtime(Arc::new(SimRuntime::new()))
        .container_manager(Arc::new(cm))
        .source(source.clone())
        .build()
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("build failed: {e}");
            return;
        }
    };
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    let uids: Vec<String> = (0..n).map(|i| format!("uid-{i:06}")).collect();
    let start = kubelet_core::clock::monotonic_now();
    source.set(pods);
    let mut pending = uids.clone();
    while !pending.is_empty() {
        pending.retain(|u| {
            handle
                .pod_status(u)
                .and_then(|s| s.phase)
                .is_none_or(|p| p != "Running")
        });
        if kubelet_core::clock::elapsed(start) > Duration::from_secs(120) {
            println!(
                "{n:>6} pods: {} still not Running after 120s",
                pending.len()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = kubelet_core::clock::elapsed(start);
    println!(
        "{n:>6} pods: all Running in {:>8.3} s; peak RSS {:>6.1} MiB (now {:.1} MiB)",
        took.as_secs_f64(),
        proc_status_kib("VmHWM:") as f64 / 1024.0,
        proc_status_kib("VmRSS:") as f64 / 1024.0
    );
    if idle_secs > 0 {
        // Let the post-start PLEG/sync churn settle, then measure an idle window.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (cpu0, t0) = (cpu_seconds(), kubelet_core::clock::monotonic_now());
        tokio::time::sleep(Duration::from_secs(idle_secs)).await;
        let (cpu, wall) = (
            cpu_seconds() - cpu0,
            kubelet_core::clock::elapsed(t0).as_secs_f64(),
        );
        println!(
            "{n:>6} pods idle: {:.3} s CPU over {:.0} s = {:.3}% of one core ({:.3} CPU-s per idle minute)",
            cpu,
            wall,
            100.0 * cpu / wall,
            cpu * 60.0 / wall
        );
    }
    shutdown.cancel();
    let _ = task.await;
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    if let Ok(size) = std::env::var("BENCH_SIZE") {
        let n: usize = size.parse().unwrap_or(110);
        let idle: u64 = std::env::var("BENCH_IDLE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("tokio runtime: {e}");
                return;
            }
        };
        rt.block_on(run_size(n, idle));
        return;
    }
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("current_exe: {e}");
            return;
        }
    };
    println!(
        "kubelet-core engine benchmark (simulated runtime, {} cores)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    for (n, idle) in [(110usize, idle_secs), (1_000, 0), (10_000, 0)] {
        let status = std::process::Command::new(&exe)
            .env("BENCH_SIZE", n.to_string())
            .env("BENCH_IDLE", idle.to_string())
            .status();
        if let Err(e) = status {
            eprintln!("running size {n}: {e}");
        }
    }
}
