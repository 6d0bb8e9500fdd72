//! Engine benchmark: drives the whole kubelet engine with the simulated runtime and prints
//! figures (this is a measurement, not a test: nothing here asserts a timing).
//!
//! `cargo bench -p kubelet-core --features testing --bench engine` prints, for 110, 1,000 and
//! 10,000 pods added at once: the wall time until all are Running and the process's peak RSS;
//! then the CPU used per idle minute with 110 Running pods. Each size runs in a fresh
//! process so the RSS figures do not mix. `BENCH_IDLE_SECS` (default 60) sets the idle window.
//!
//! Then the CPU of one cycle of each node-level manager with 110 Running pods: the engine
//! runs with every manager off (the baseline), then with one manager on at a short period
//! (100 ms) — the eviction manager (Go's default thresholds, local storage limits), container
//! log rotation, image garbage collection — each in a fresh process over
//! `BENCH_CYCLE_SECS` (default 20) seconds; a cycle's CPU is the process CPU above the
//! baseline divided by the cycles the period gives. The simulator answers at once and
//! measures nothing (its stats provider is the fake one), so this is the engine's own cost
//! of a cycle — summary building, signals, thresholds, ranking, the per-container work —
//! without the runtime's gRPC or the provider's cgroup and filesystem reads (`cargo xtask
//! bench-cri` measures the whole kubelet on containerd).

use std::sync::Arc;
use std::time::Duration;

use kubelet_core::eviction::EvictionConfig;
use kubelet_core::images::gc::ImageGcPolicy;
use kubelet_core::logs::ContainerLogConfig;
use kubelet_core::testing::{
    container, pod, CgroupUsage, FakeContainerManager, SimRuntime, StaticSource,
};
use kubelet_core::{Config, Kubelet};

/// The managers' period in the per-cycle runs.
const CYCLE_PERIOD: Duration = Duration::from_millis(100);

/// Which node-level managers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Managers {
    /// The defaults (all on, at their Go periods).
    Defaults,
    /// All off.
    Off,
    /// Only the eviction manager, every [`CYCLE_PERIOD`].
    Eviction,
    /// Only container log rotation, every [`CYCLE_PERIOD`].
    Rotation,
    /// Only image garbage collection, every [`CYCLE_PERIOD`].
    ImageGc,
}

impl Managers {
    fn parse(s: &str) -> Managers {
        match s {
            "off" => Managers::Off,
            "eviction" => Managers::Eviction,
            "rotation" => Managers::Rotation,
            "imagegc" => Managers::ImageGc,
            _ => Managers::Defaults,
        }
    }

    fn apply(self, config: &mut Config) {
        if self == Managers::Defaults {
            return;
        }
        config.eviction = EvictionConfig::disabled();
        config.image_gc = ImageGcPolicy {
            high_threshold_percent: 100,
            ..ImageGcPolicy::default()
        };
        config.container_logs = ContainerLogConfig {
            max_size: -1,
            ..ContainerLogConfig::default()
        };
        match self {
            Managers::Eviction => {
                config.eviction = EvictionConfig {
                    monitoring_interval: CYCLE_PERIOD,
                    ..EvictionConfig::default()
                }
            }
            Managers::Rotation => {
                config.container_logs = ContainerLogConfig {
                    monitor_interval: CYCLE_PERIOD,
                    ..ContainerLogConfig::default()
                }
            }
            Managers::ImageGc => {
                config.image_gc = ImageGcPolicy {
                    period: CYCLE_PERIOD,
                    ..ImageGcPolicy::default()
                }
            }
            Managers::Defaults | Managers::Off => {}
        }
    }
}
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

/// Runs `n` pods to Running; then, with `idle_secs`, measures an idle window and prints it
/// (with `label`); returns the CPU seconds and wall seconds of the window.
async fn run_size(n: usize, idle_secs: u64, managers: Managers) -> Option<(f64, f64)> {
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
    // Usage for the node and every pod, so the summary the eviction manager reads is full.
    let stats = cm.stats();
    stats.set_node_usage(Some(CgroupUsage::new(1 << 30, 1 << 30)));
    for i in 0..n {
        stats.set_pod_usage(&format!("uid-{i:06}"), CgroupUsage::new(1 << 20, 8 << 20));
    }
    let source = Arc::new(StaticSource::silent("file"));
    let mut config = Config {
        node_name: "bench".into(),
        max_pods: n as u32,
        resolv_conf: Default::default(),
        root_dir: Default::default(),
        ..Config::default()
    };
    managers.apply(&mut config);
    // Log rotation runs with a root dir only, on logs that exist: both in a directory of the
    // run's own (the simulator writes no logs; the files are made once the pods run).
    let scratch = (managers == Managers::Rotation).then(|| {
        let dir = std::env::temp_dir().join(format!("kubelet-core-bench-{}", std::process::id()));
        config.root_dir = dir.join("root");
        config.pod_logs_dir = dir.join("pods");
        dir
    });
    let sim = Arc::new(SimRuntime::new());
    let kubelet = match Kubelet::builder()
        .config(config)
        .runtime(sim.clone())
        .container_manager(Arc::new(cm))
        .source(source.clone())
        .build()
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("build failed: {e}");
            return None;
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
    if scratch.is_some() {
        create_logs(&sim).await;
    }
    println!(
        "{n:>6} pods: all Running in {:>8.3} s; peak RSS {:>6.1} MiB (now {:.1} MiB)",
        took.as_secs_f64(),
        proc_status_kib("VmHWM:") as f64 / 1024.0,
        proc_status_kib("VmRSS:") as f64 / 1024.0
    );
    let mut window = None;
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
        window = Some((cpu, wall));
    }
    shutdown.cancel();
    let _ = task.await;
    if let Some(dir) = scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
    window
}

/// An empty log file for every container of the simulator (where CRI would write it).
async fn create_logs(sim: &SimRuntime) {
    use kubelet_core::runtime::{ContainerRuntime, ListFilter};
    let Ok(containers) = sim.list_containers(&ListFilter::all()).await else {
        return;
    };
    for c in containers {
        if let Ok(Some(path)) = sim.container_status(&c.id).await.map(|s| s.log_path) {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&path, b"");
        }
    }
}

/// Runs one size/managers combination in a fresh process; the idle window it printed.
fn child(exe: &std::path::Path, n: usize, idle: u64, managers: &str) -> Option<(f64, f64)> {
    let out = std::process::Command::new(exe)
        .env("BENCH_SIZE", n.to_string())
        .env("BENCH_IDLE", idle.to_string())
        .env("BENCH_MANAGERS", managers)
        .stderr(std::process::Stdio::inherit())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("running size {n}: {e}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut window = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("window ") {
            let mut f = rest
                .split_whitespace()
                .filter_map(|v| v.parse::<f64>().ok());
            window = f.next().zip(f.next());
        } else {
            println!("{line}");
        }
    }
    window
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
        let managers = Managers::parse(&std::env::var("BENCH_MANAGERS").unwrap_or_default());
        if let Some((cpu, wall)) = rt.block_on(run_size(n, idle, managers)) {
            println!("window {cpu} {wall}");
        }
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
        child(&exe, n, idle, "defaults");
    }
    let cycle_secs: u64 = std::env::var("BENCH_CYCLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    println!(
        "per-cycle CPU of the node-level managers, 110 pods, one manager every {} ms against all off:",
        CYCLE_PERIOD.as_millis()
    );
    let Some((base_cpu, base_wall)) = child(&exe, 110, cycle_secs, "off") else {
        return;
    };
    let base_rate = base_cpu / base_wall;
    for (label, managers) in [
        ("eviction manager", "eviction"),
        ("log rotation", "rotation"),
        ("image GC", "imagegc"),
    ] {
        let Some((cpu, wall)) = child(&exe, 110, cycle_secs, managers) else {
            continue;
        };
        let cycles = wall / CYCLE_PERIOD.as_secs_f64();
        let per_cycle_ms = ((cpu / wall - base_rate) * wall / cycles * 1000.0).max(0.0);
        println!(
            "  {label:<17} {per_cycle_ms:>7.3} ms CPU per cycle ({cycles:.0} cycles; {:.4} cores vs {:.4} off)",
            cpu / wall,
            base_rate
        );
    }
}
