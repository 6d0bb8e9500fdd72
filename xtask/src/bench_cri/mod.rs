//! `cargo xtask bench-cri`: the backend's overhead over raw CRI, and kubelet-rs next to the Go
//! kubelet on the same containerd.
//!
//! Parts, in one run:
//!
//! 1. **Raw CRI floor**: N pods at once, each `RunPodSandbox` + `CreateContainer` +
//!    `StartContainer` as plain gRPC calls with messages prepared beforehand (the very messages
//!    the backend sends: [`kubelet_runtime_cri::mapping`]); then `StopContainer` +
//!    `RemoveContainer` + `StopPodSandbox` + `RemovePodSandbox` for all at once.
//! 2. **Backend**: the same through `CriRuntime` and the `ContainerRuntime` trait (image user
//!    lookup, log directories, log symlinks, error mapping included).
//! 3. **Kubelets end to end** (Go kubelet v1.20.2 from `scripts/go-kubelet.sh`, then the shipped
//!    `kubelet`): M static busybox pods written at once -> seconds until `/pods` shows all
//!    Running; CPU over an idle window; RSS; a restart of the kubelet (seconds from the new
//!    process until all are Running again, containers kept, restart counts: [`restart`]);
//!    manifests removed -> seconds until CRI lists no container of those pods.
//!
//! A kubelet removes every pod sandbox it does not know about, so running one against a
//! containerd shared with other users would destroy their pods. By default the benchmark
//! therefore starts its own containerd (socket `/run/kubelet-rs-bench/containerd.sock`, bridge
//! `kubeletrsb0`, pods in 10.89.0.0/16) with the node environment's images copied in, and stops it
//! at the end; `--endpoint` runs everything against an existing runtime instead.

pub(crate) mod backend;
pub(crate) mod cgroups;
mod containerd;
mod density;
mod exposition;
mod histogram;
mod kubelets;
pub(crate) mod raw;
mod report;
mod restart;
mod runtime_calls;
pub(crate) mod spans;
pub(crate) mod workload;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use kubelet_core::runtime::ContainerRuntime;

use backend::{backend_run, cleanup_prefix, connect_backend};
use cgroups::remove_cgroup_root;
use containerd::PrivateContainerd;
use kubelets::{go_kubelet_binary, kubelet_run, rs_kubelet_binary, Kind, KubeletRun};
use raw::{raw_client, raw_run, TeardownOrder};
use report::print_report;
use workload::{workload, WorkloadRun};

/// The node environment's CRI endpoint (source of the images).
const NODE_ENDPOINT: &str = "unix:///run/kubelet-rs/containerd/containerd.sock";
pub(crate) const BUSYBOX_IMAGE: &str = "kubelet-rs.local/busybox:1.0";
const PAUSE_IMAGE: &str = "kubelet-rs.local/pause:1.0";
/// The workload: exits promptly on SIGTERM.
const SCRIPT: &str = "trap 'exit 0' TERM; while true; do sleep 1; done";
const NAMESPACE: &str = "kubelet-rs-bench";
/// Everything the benchmark writes lives under here.
const BENCH_DIR: &str = "/var/lib/kubelet-rs/bench";
const BENCH_RUN_DIR: &str = "/run/kubelet-rs-bench";
const BENCH_BRIDGE: &str = "kubeletrsb0";
const BENCH_SUBNET: &str = "10.89.0.0/16";
/// Cgroup parent of the raw/backend pods (as the engine would place a BestEffort pod).
pub(crate) const RAW_CGROUP_ROOT: &str = "/kubelet-rs-bench";
const RS_CGROUP_ROOT: &str = "/kubelet-rs-bench-rs";
const GO_CGROUP_ROOT: &str = "/kubelet-rs-go";
/// Grace period for stopping containers (the workload exits within a second of SIGTERM).
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between start and teardown in the raw/backend runs (not timed).
const SETTLE: Duration = Duration::from_secs(3);

/// Flags of `cargo xtask bench-cri`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// CRI endpoint to benchmark against. Default: a private containerd started for the run
    /// (kubelets kill foreign pods, so a shared runtime would lose its other users' pods).
    #[arg(long)]
    endpoint: Option<String>,
    /// The node environment's endpoint, whose images are copied into the private containerd.
    #[arg(long, env = "KUBELET_RS_CRI_ENDPOINT", default_value = NODE_ENDPOINT)]
    node_endpoint: String,
    /// Pod counts for the raw-CRI and backend rows.
    #[arg(long, value_delimiter = ',', default_values_t = [20usize, 110])]
    counts: Vec<usize>,
    /// Static pods for the kubelet end-to-end rows; several counts (`110,250,500`) run each
    /// kubelet once per count and end with the density table (per-pod slopes). Both kubelets
    /// get `--max-pods` of at least the count.
    #[arg(long, value_delimiter = ',', default_values_t = [110usize])]
    pods: Vec<usize>,
    /// Leave out the restart of each kubelet with its pods running.
    #[arg(long)]
    skip_restart: bool,
    /// Seconds of the idle window over which kubelet CPU is measured.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// The kubelet-rs binary (default: $CARGO_TARGET_DIR/<--profile>/kubelet, built if
    /// missing or stale).
    #[arg(long)]
    kubelet: Option<PathBuf>,
    /// The kubelet-rs build: a cargo profile, `ship` (fat LTO, one codegen unit; the
    /// quickstart's) or `release` (what the tests build), or `pgo`, the `ship` build optimised
    /// with a training run's profile (`scripts/pgo-build.sh`; the binary to deploy).
    #[arg(long, default_value = "ship")]
    profile: String,
    /// The Go kubelet binary (default: `scripts/go-kubelet.sh build`, cached per machine).
    #[arg(long)]
    go_kubelet: Option<PathBuf>,
    /// The order of the raw floor's teardown calls, and the backend row's (the kubelets stop
    /// the sandbox before they remove its container).
    #[arg(long, value_enum, default_value_t = TeardownOrder::RemoveFirst)]
    raw_teardown: TeardownOrder,
    /// Skip the Go kubelet row.
    #[arg(long)]
    skip_go: bool,
    /// Skip the kubelet-rs end-to-end row.
    #[arg(long)]
    skip_rs: bool,
    /// Skip the raw/backend rows (the end-to-end ratios then have no floor).
    #[arg(long)]
    skip_backend: bool,
    /// kubelet-rs with the evented PLEG (`featureGates: {EventedPLEG: true}`; the runtime must
    /// have `GetContainerEvents`: containerd 1.7, e.g. `--endpoint` of a node-env instance
    /// started with `--containerd 1.7`).
    #[arg(long)]
    evented_pleg: bool,
    /// Where kubelet-rs's start-up and teardown time goes: every span it makes exported to a
    /// collector of the benchmark (OTLP) and summed per pod worker step and CRI call (the
    /// export costs the kubelet some CPU: compare figures of runs without it).
    #[arg(long)]
    breakdown: bool,
    /// Seconds to wait for all pods to run / all containers to go.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

/// Runs the benchmark on a multi-threaded runtime of its own (as the kubelet runs).
///
/// `cargo xtask` builds xtask in debug mode; the backend would then be measured unoptimised,
/// so a debug build re-runs itself as `cargo run --release -p xtask`.
pub async fn run(args: BenchArgs) -> Result<()> {
    if crate::nested_cargo::rerun_in_release("bench").await? {
        return Ok(());
    }
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("building the benchmark runtime")?;
        rt.block_on(bench(args))
    })
    .await
    .context("benchmark thread")?
}

async fn bench(args: BenchArgs) -> Result<()> {
    let run_id = run_id();
    println!("bench-cri run {run_id}");
    // Before the private containerd starts: `--profile pgo` may run `scripts/pgo-build.sh`,
    // whose training starts a private containerd of its own in the same place.
    let rs_bin = if args.skip_rs {
        None
    } else {
        Some(rs_kubelet_binary(&args)?)
    };
    let (endpoint, private) = match &args.endpoint {
        Some(e) => (e.clone(), None),
        None => {
            let p = PrivateContainerd::start(&args.node_endpoint).await?;
            (p.endpoint(), Some(p))
        }
    };
    println!("CRI endpoint: {endpoint}");
    let result = bench_on(&args, rs_bin.as_deref(), &endpoint, &run_id).await;
    if let Some(p) = private {
        p.stop().await;
    }
    remove_cgroup_root(RAW_CGROUP_ROOT);
    result
}

async fn bench_on(
    args: &BenchArgs,
    rs_bin: Option<&Path>,
    endpoint: &str,
    run_id: &str,
) -> Result<()> {
    let backend = Arc::new(connect_backend(endpoint).await?);
    let raw = raw_client(endpoint).await?;
    let image_ref = backend
        .image_status(BUSYBOX_IMAGE)
        .await?
        .map(|i| i.id)
        .ok_or_else(|| anyhow!("{BUSYBOX_IMAGE} is not present at {endpoint}"))?;

    let mut rows: Vec<(usize, WorkloadRun, WorkloadRun)> = Vec::new();
    if !args.skip_backend {
        for (k, &n) in args.counts.iter().enumerate() {
            let prefix = format!("bench-raw-{run_id}-{k}");
            let pods = workload(&prefix, n);
            eprintln!("[bench] raw CRI, {n} pods");
            let r = raw_run(&raw, &pods, &image_ref, args.raw_teardown).await?;
            cleanup_prefix(&backend, &prefix).await;
            let prefix = format!("bench-be-{run_id}-{k}");
            let pods = workload(&prefix, n);
            eprintln!("[bench] backend, {n} pods");
            let b = backend_run(&backend, &pods, &image_ref, args.raw_teardown).await;
            cleanup_prefix(&backend, &prefix).await;
            rows.push((n, r, b));
        }
    }

    let mut runs = Vec::new();
    for &pods in &args.pods {
        let go = if args.skip_go {
            None
        } else {
            match go_kubelet_binary(args).await {
                Ok(bin) => {
                    eprintln!("[bench] Go kubelet {}, {pods} pods", bin.display());
                    Some(kubelet_run(Kind::Go, &bin, args, pods, endpoint, &backend, run_id).await)
                }
                Err(e) => Some(KubeletRun {
                    notes: vec![format!("Go kubelet unavailable: {e:#}")],
                    pods,
                    ..KubeletRun::default()
                }),
            }
        };
        let rs = match rs_bin {
            None => None,
            Some(bin) => {
                eprintln!("[bench] kubelet-rs {}, {pods} pods", bin.display());
                Some(kubelet_run(Kind::Rs, bin, args, pods, endpoint, &backend, run_id).await)
            }
        };
        print_report(args, pods, &rows, go.as_ref(), rs.as_ref());
        runs.push((go, rs));
    }
    if runs.len() > 1 {
        for line in density::table(&runs) {
            println!("{line}");
        }
    }
    Ok(())
}

fn run_id() -> String {
    let nanos = kubelet_core::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}", (nanos / 1_000_000) & 0xff_ffff)
}
