//! `cargo xtask startup-latency`: pod start-up latency through the API server, the kubelet's
//! SLI (issue #38), for one kubelet at a time on a cluster of its own
//! (`scripts/startup-latency.sh` runs the Go kubelet v1.20.2 and kubelet-rs in turn and prints
//! them side by side).
//!
//! Three parts, each writing its figures as JSON:
//!
//! 1. `raw` (before the kubelet starts: a kubelet removes pods it does not know): the floor.
//!    The benchmark's pod (a busybox container, as `bench-cri`'s, with the DNS settings,
//!    variables and mounts the kubelet gives an API pod: `floor_pod`) started with plain CRI
//!    calls on the node's containerd, `RunPodSandbox` + `CreateContainer` + `StartContainer`
//!    with the very messages the backend sends: one at a time, then a burst all at once.
//! 2. `api` (with the kubelet as the node): the same pod created through the API server with
//!    its `nodeName` set (the scheduler is not the kubelet), timed from just before the create
//!    request until a watch of the benchmark's pods shows it `Ready`; also when the watch first
//!    showed a status from the kubelet, how long the create call took, a GET's round trip, and
//!    the kubelet's own `kubelet_pod_start_duration_seconds` (first seen → running; both
//!    kubelets export it) over each scenario, read through the API server's node proxy.
//!    Scenarios: (a) pods created one at a time, each once the one before is Ready;
//!    (b) bursts of pods created at once; (c) pods with a configMap, a secret and a projected
//!    volume (a service account token, the configMap, the pod's labels), one at a time.
//!    Between scenarios every pod is deleted and gone. With `--otlp` it also serves a trace
//!    collector for a kubelet-rs exporting its spans and splits each pod's time into intake,
//!    the sync (CRI calls, own time, waits between steps) and after (`steps`).
//! 3. `report`: both kubelets' figures side by side (p50/p90/p99), the ratios, where the time
//!    went, and the targets (p99 ≤ 1.1 × the raw CRI time of the same pod + one API
//!    round trip; kubelet-rs's p99 below Go's p50).

mod api;
mod floor_pod;
mod raw;
mod report;
mod steps;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::Value;

/// Flags of `cargo xtask startup-latency`.
#[derive(clap::Args)]
pub(crate) struct StartupArgs {
    #[command(subcommand)]
    cmd: StartupCmd,
}

#[derive(clap::Subcommand)]
enum StartupCmd {
    /// The raw CRI floor of the benchmark's pod (no kubelet may run on the runtime).
    Raw {
        /// CRI endpoint of the node's containerd.
        #[arg(long, env = "KUBELET_RS_CRI_ENDPOINT", default_value = crate::DEFAULT_ENDPOINT)]
        endpoint: String,
        /// Pods started one at a time.
        #[arg(long, default_value_t = 30)]
        samples: usize,
        /// Pods of the burst started at once.
        #[arg(long, default_value_t = 30)]
        burst: usize,
        /// Where the figures go (JSON).
        #[arg(long)]
        out: PathBuf,
        /// The kubelet's cluster DNS, for the pod's DNS settings.
        #[command(flatten)]
        dns: floor_pod::ClusterDns,
    },
    /// The scenarios through the API server, with the kubelet as the node `--node`.
    Api(api::ApiArgs),
    /// Side by side: `DIR/KIND.raw.json` and `DIR/KIND.api.json` of each kubelet.
    Report {
        /// The directory of the figures.
        #[arg(long)]
        dir: PathBuf,
        /// The kubelets, in the table's order.
        kinds: Vec<String>,
    },
}

/// Runs one part.
pub(crate) async fn run(args: StartupArgs) -> Result<()> {
    match args.cmd {
        StartupCmd::Raw {
            endpoint,
            samples,
            burst,
            out,
            dns,
        } => {
            let figures = raw::run(&endpoint, samples, burst, &dns).await?;
            write(&out, &figures).await
        }
        StartupCmd::Api(a) => {
            let out = a.out.clone();
            let figures = api::run(&a).await?;
            write(&out, &figures).await
        }
        StartupCmd::Report { dir, kinds } => report::print(&dir, &kinds).await,
    }
}

async fn write(path: &PathBuf, figures: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(figures)?;
    tokio::fs::write(path, text)
        .await
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("[startup-latency] figures in {}", path.display());
    Ok(())
}

/// Milliseconds, as the JSON files keep durations.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `p`-th percentile (nearest rank) of samples in milliseconds; zero when there are none.
fn percentile_ms(samples: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    crate::percentile::nearest_rank(&v, p).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let cases = [(50.0, 50.0), (90.0, 90.0), (99.0, 99.0), (100.0, 100.0)];
        for (p, want) in cases {
            assert_eq!(percentile_ms(&v, p), want, "p{p}");
        }
        assert_eq!(percentile_ms(&[], 50.0), 0.0);
        assert_eq!(percentile_ms(&[f64::NAN, 3.0], 50.0), 3.0);
        assert_eq!(percentile_ms(&[7.0, 1.0, 4.0], 99.0), 7.0);
    }
}
