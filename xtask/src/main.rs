//! Project tasks for kubelet-rs.
//!
//! - `cargo xtask node-up`: the node environment (private containerd with CNI and local
//!   images, see `scripts/node-env.sh`), then waits until CRI reports RuntimeReady and
//!   NetworkReady.
//! - `cargo xtask node-down`: removes every kubelet-created sandbox through CRI (so CNI tears
//!   the pod networks down), then `scripts/node-env.sh down`.
//! - `cargo xtask cri-ready`: waits for CRI readiness only.
//! - `cargo xtask pods`: the pods a standalone kubelet runs (phases, container states, IPs,
//!   last log lines), from its read-only port.
//! - `cargo xtask control-plane {build,up,down,status,env,node-kubeconfig,audit-rate}`: the
//!   real v1.20.2 control plane on 127.0.0.1 (see `scripts/control-plane.sh`).
//! - `cargo xtask bench-cri`: backend vs raw CRI, kubelet-rs vs the Go kubelet (see `bench_cri`).
//! - `cargo xtask startup-latency {raw,api,report}`: pod start-up latency through the API
//!   server, one kubelet at a time (see `startup_latency`; `scripts/startup-latency.sh` runs both
//!   kubelets side by side).
//! - `cargo xtask hollow-nodes`: N kubelet engines on the simulated runtime as members of the
//!   real control plane, in one process (see `hollow`).

mod bench_cri;
mod control_plane;
mod cri_events;
mod hollow;
mod nested_cargo;
mod percentile;
mod pleg_latency;
mod pods;
mod proc_stats;
mod startup_latency;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kubelet_core::runtime::{ContainerRuntime, ListFilter};
use kubelet_runtime_cri::{CriConfig, CriRuntime};

/// The endpoint the node environment serves.
const DEFAULT_ENDPOINT: &str = "unix:///run/kubelet-rs/containerd/containerd.sock";

#[derive(Parser)]
#[command(name = "xtask", about = "kubelet-rs project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Bring the node environment up and wait for CRI readiness.
    NodeUp {
        /// Seconds to wait for RuntimeReady and NetworkReady.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
    /// Remove all kubelet sandboxes through CRI, then tear the node environment down.
    NodeDown,
    /// Print the node environment's status.
    NodeStatus,
    /// Show the pods of a running kubelet (its read-only port) with their last log lines.
    Pods {
        /// The kubelet's read-only endpoint.
        #[arg(long, default_value = "127.0.0.1:10255")]
        addr: String,
        /// The pod log root.
        #[arg(long, default_value = "/var/log/pods")]
        logs_dir: String,
        /// Wait up to this many seconds until every pod is Running (or finished).
        #[arg(long)]
        wait: Option<u64>,
    },
    /// Wait until the CRI runtime reports RuntimeReady and NetworkReady.
    CriReady {
        /// CRI endpoint.
        #[arg(long, env = "KUBELET_RS_CRI_ENDPOINT", default_value = DEFAULT_ENDPOINT)]
        endpoint: String,
        /// Seconds to wait.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
    },
    /// The real control plane (etcd, kube-apiserver, controller-manager, scheduler v1.20.2).
    ControlPlane {
        #[command(subcommand)]
        cmd: control_plane::ControlPlaneCmd,
    },
    /// Benchmark: CRI backend vs raw CRI, and kubelet-rs vs the Go kubelet end to end.
    BenchCri(bench_cri::BenchArgs),
    /// Hollow nodes: N simulated kubelets as members of the real control plane, in one process.
    HollowNodes(hollow::HollowArgs),
    /// Check that the runtime streams container events (GetContainerEvents, containerd 1.7).
    CriEvents(cri_events::CriEventsArgs),
    /// Benchmark: container exit -> pod status latency (p50/p99), relisting vs evented PLEG.
    PlegLatency(pleg_latency::PlegLatencyArgs),
    /// Benchmark: pod start-up latency through the API server (raw floor, scenarios, report).
    StartupLatency(startup_latency::StartupArgs),
}

fn script() -> PathBuf {
    repo_root().join("scripts").join("node-env.sh")
}

/// The checkout xtask runs for: the parent of cargo's run-time `CARGO_MANIFEST_DIR` (`cargo
/// xtask` and `cargo run -p xtask` set it), else of the compile-time one. A build cache
/// shared by several checkouts may run an xtask that another checkout compiled.
pub(crate) fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("..")
}

fn run_script(arg: &str) -> Result<()> {
    let path = script();
    let status = Command::new("bash")
        .arg(&path)
        .arg(arg)
        .status()
        .with_context(|| format!("running {}", path.display()))?;
    if !status.success() {
        bail!("{} {arg} failed: {status}", path.display());
    }
    Ok(())
}

fn config(endpoint: &str) -> CriConfig {
    CriConfig {
        runtime_endpoint: endpoint.to_string(),
        request_timeout: Duration::from_secs(30),
        ..CriConfig::default()
    }
}

async fn cri_ready(endpoint: &str, timeout: Duration) -> Result<()> {
    let start = kubelet_core::clock::monotonic_now();
    let mut last = String::from("not asked yet");
    while kubelet_core::clock::elapsed(start) < timeout {
        match CriRuntime::connect(config(endpoint)).await {
            Ok(rt) => match rt.status().await {
                Ok(s) if s.runtime_ready && s.network_ready => {
                    println!("CRI ready at {endpoint}");
                    return Ok(());
                }
                Ok(s) => last = s.message,
                Err(e) => last = e.to_string(),
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!("CRI at {endpoint} not ready after {timeout:?}: {last}")
}

async fn remove_sandboxes(endpoint: &str) -> Result<()> {
    let rt = match CriRuntime::connect(config(endpoint)).await {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("[xtask] CRI not reachable ({e}); leaving cleanup to node-env.sh");
            return Ok(());
        }
    };
    for sandbox in rt.list_pod_sandboxes(&ListFilter::all()).await? {
        let pod = sandbox.pod.full_name();
        if let Err(e) = rt.stop_pod_sandbox(&sandbox.id).await {
            eprintln!("[xtask] stopping sandbox {} of {pod}: {e}", sandbox.id);
        }
        if let Err(e) = rt.remove_pod_sandbox(&sandbox.id).await {
            eprintln!("[xtask] removing sandbox {} of {pod}: {e}", sandbox.id);
        } else {
            eprintln!("[xtask] removed sandbox {} of {pod}", sandbox.id);
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::NodeUp { timeout } => {
            run_script("up")?;
            cri_ready(DEFAULT_ENDPOINT, Duration::from_secs(timeout)).await
        }
        Cmd::NodeDown => {
            remove_sandboxes(DEFAULT_ENDPOINT).await?;
            run_script("down")
        }
        Cmd::NodeStatus => run_script("status"),
        Cmd::Pods {
            addr,
            logs_dir,
            wait,
        } => pods::run(&addr, &logs_dir, wait.map(Duration::from_secs)).await,
        Cmd::CriReady { endpoint, timeout } => {
            cri_ready(&endpoint, Duration::from_secs(timeout)).await
        }
        Cmd::ControlPlane { cmd } => control_plane::run(cmd),
        Cmd::BenchCri(args) => bench_cri::run(args).await,
        Cmd::HollowNodes(args) => hollow::run(args).await,
        Cmd::CriEvents(args) => cri_events::run(args).await,
        Cmd::PlegLatency(args) => pleg_latency::run(args).await,
        Cmd::StartupLatency(args) => startup_latency::run(args).await,
    }
}
