//! `cargo xtask pleg-latency`: how long a container's exit takes to reach its pod status,
//! with the relisting PLEG and with the evented PLEG, on a real CRI runtime.
//!
//! For each mode it runs the kubelet engine in process (the CRI backend on `--endpoint`, a
//! container manager that leaves cgroups to the runtime) with `--pods` busybox pods
//! (`restartPolicy: Never`), waits until all run, then stops their containers one by one
//! through CRI, a random 0-1.2 s apart (so the exits fall anywhere in the relist period), and
//! times each from the stop's return until the engine's pod status shows the container
//! terminated (polled every 1 ms). With `--background N`, N more pods run all along (a loaded
//! node; they are not measured). It prints p50, p99 and max per mode. The evented mode
//! needs `GetContainerEvents` (containerd 1.7); on a runtime without it the line says so.
//! Everything it made is removed on every path, Ctrl-C among them (its pods live in their own
//! namespace); a run killed harder leaves them to the next, which removes them first.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_core::runtime::{ContainerRuntime, ListFilter};
use kubelet_core::testing::{FakeContainerManager, StaticSource};
use kubelet_core::{CmError, Config, ContainerManager, Kubelet, PodResources, ResourceList};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use tokio_util::sync::CancellationToken;

/// Arguments of `cargo xtask pleg-latency`.
#[derive(clap::Args)]
pub(crate) struct PlegLatencyArgs {
    /// CRI endpoint.
    #[arg(
        long,
        env = "KUBELET_RS_CRI_ENDPOINT",
        default_value = crate::DEFAULT_ENDPOINT
    )]
    endpoint: String,
    /// Pods (one exit sample each) per mode.
    #[arg(long, default_value_t = 30)]
    pods: usize,
    /// The image of the containers (present in the runtime: it is not pulled).
    #[arg(long, default_value = "kubelet-rs.local/busybox:1.0")]
    image: String,
    /// The relist period (the relisting PLEG's, and the evented one's when the stream breaks).
    #[arg(long, default_value_t = 1000)]
    relist_ms: u64,
    /// Pods that run beside the measured ones all along (the node's load: `--background 500`
    /// measures the exit -> status latency of a node with 500 more pods).
    #[arg(long, default_value_t = 0)]
    background: usize,
}

const NAMESPACE: &str = "kubelet-rs-pleg-latency";
const DIR: &str = "/tmp/kubelet-rs-pleg-latency";

/// A container manager that leaves the pod cgroup to the runtime (`cgroup_parent: None`).
struct RuntimeCgroups(FakeContainerManager);

#[async_trait]
impl ContainerManager for RuntimeCgroups {
    fn capacity(&self) -> ResourceList {
        self.0.capacity()
    }
    fn allocatable(&self) -> ResourceList {
        self.0.allocatable()
    }
    async fn ensure_pod_resources(&self, pod: &Pod) -> Result<PodResources, CmError> {
        self.0.ensure_pod_resources(pod).await?;
        Ok(PodResources {
            cgroup_parent: None,
        })
    }
    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError> {
        self.0.remove_pod_resources(pod_uid).await
    }
    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError> {
        self.0.pods_with_resources().await
    }
}

/// Runs the measurement.
pub(crate) async fn run(args: PlegLatencyArgs) -> Result<()> {
    // The engine runs in this process: measured in a release build, as the kubelet ships.
    if crate::nested_cargo::rerun_in_release("pleg-latency").await? {
        return Ok(());
    }
    let rt = Arc::new(
        CriRuntime::connect(CriConfig {
            runtime_endpoint: args.endpoint.clone(),
            request_timeout: Duration::from_secs(60),
            pod_logs_dir: PathBuf::from(DIR).join("pods"),
            containers_log_dir: PathBuf::from(DIR).join("containers"),
            ..CriConfig::default()
        })
        .await
        .with_context(|| format!("connecting to {}", args.endpoint))?,
    );
    let version = rt.version().await?;
    let events = rt.container_events().await;
    println!(
        "pleg-latency: {} {} at {}, {} pods per mode ({} more running beside them), relist period {} ms",
        version.runtime_name,
        version.runtime_version,
        args.endpoint,
        args.pods,
        args.background,
        args.relist_ms
    );
    let mut modes = vec![("relist", false)];
    match &events {
        Ok(_) => modes.push(("events", true)),
        Err(e) => println!("  events: not measured, the runtime has no container events ({e})"),
    }
    drop(events);
    // Ctrl-C stops the engine and removes the pods, as the end of a mode does.
    let interrupted = CancellationToken::new();
    let on_signal = interrupted.clone();
    let signal = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    // Whatever a run killed harder left.
    cleanup(&rt).await;
    for (name, evented) in modes {
        let result = measure(&rt, &args, evented, &interrupted).await;
        cleanup(&rt).await;
        let mut samples = match result {
            Ok(samples) => samples,
            Err(e) => {
                signal.abort();
                return Err(e);
            }
        };
        samples.sort();
        println!(
            "  {name:>6}: exit -> pod status p50 {} ms, p99 {} ms, max {} ms ({} samples)",
            ms(percentile(&samples, 50.0)),
            ms(percentile(&samples, 99.0)),
            ms(samples.last().copied().unwrap_or_default()),
            samples.len()
        );
    }
    signal.abort();
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

/// The nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    crate::percentile::nearest_rank(sorted, p).unwrap_or_default()
}

/// A measured pod (`exit-i`) or, with `background`, one of the pods running beside them
/// (`load-i`).
fn bench_pod(i: usize, image: &str, background: bool) -> Pod {
    let name = if background { "load" } else { "exit" };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{i}")),
            namespace: Some(NAMESPACE.into()),
            uid: Some(format!("pleg-latency-{}-{name}-{i}", std::process::id())),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(if background { "Always" } else { "Never" }.into()),
            termination_grace_period_seconds: Some(0),
            containers: vec![Container {
                name: "c".into(),
                image: Some(image.into()),
                image_pull_policy: Some("Never".into()),
                command: Some(vec!["sh".into(), "-c".into(), "exec sleep 3600".into()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pseudo-random delay in 0..1.2 s (xorshift; the spread matters, not the quality).
fn jitter(state: &mut u64) -> Duration {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    Duration::from_millis(*state % 1200)
}

async fn measure(
    rt: &Arc<CriRuntime>,
    args: &PlegLatencyArgs,
    evented: bool,
    interrupted: &CancellationToken,
) -> Result<Vec<Duration>> {
    let root = PathBuf::from(DIR).join("root");
    for d in ["pods", "containers", "root"] {
        tokio::fs::create_dir_all(PathBuf::from(DIR).join(d)).await?;
    }
    let mut pods: Vec<Pod> = (0..args.pods)
        .map(|i| bench_pod(i, &args.image, false))
        .collect();
    pods.extend((0..args.background).map(|i| bench_pod(i, &args.image, true)));
    let all_uids: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.uid.clone().unwrap_or_default())
        .collect();
    // The measured pods come first.
    let uids = &all_uids[..args.pods];
    let source = Arc::new(StaticSource::new("file", pods));
    let max_pods = u32::try_from(args.pods + args.background + 10).unwrap_or(u32::MAX);
    let config = Config {
        node_name: "pleg-latency".into(),
        root_dir: root,
        pod_logs_dir: PathBuf::from(DIR).join("pods"),
        resolv_conf: PathBuf::new(),
        evented_pleg: evented,
        pleg_relist_period: Duration::from_millis(args.relist_ms),
        max_pods,
        ..Config::default()
    };
    // Admission counts pods against the container manager's allocatable `pods` too (the fake's
    // default is 110, which held a run with `--background 500` at 110 pods).
    let cm = FakeContainerManager::with_pods(max_pods);
    let kubelet = Kubelet::builder()
        .config(config)
        .runtime(rt.clone() as Arc<dyn ContainerRuntime>)
        .container_manager(Arc::new(RuntimeCgroups(cm)))
        .source(source.clone())
        .build()?;
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    let result = async {
        let state = |uid: &str| {
            handle
                .pod_status(uid)
                .and_then(|s| s.container_statuses)
                .and_then(|cs| cs.into_iter().next())
        };
        let t = Instant::now();
        // A second per pod on top of the 120 s (the shipped kubelet started 500 pods in 200 s
        // on the 2-core machine).
        let limit = Duration::from_secs(120 + all_uids.len() as u64);
        // Each poll reads (copies) only the statuses of the pods not yet seen running: reading
        // all 530 every 50 ms would take CPU from the start being waited for.
        // Their containers sleep for an hour, so a pod seen running stays so; one last pass
        // checks all of them at once.
        let running = |u: &String| state(u).and_then(|c| c.state?.running).is_some();
        let mut waiting: Vec<&String> = all_uids.iter().collect();
        loop {
            waiting.retain(|u| !running(u));
            if waiting.is_empty() {
                waiting = all_uids.iter().filter(|u| !running(u)).collect();
                if waiting.is_empty() {
                    break;
                }
            }
            if interrupted.is_cancelled() {
                bail!("interrupted");
            }
            if t.elapsed() > limit {
                bail!(
                    "the pods did not all run within {limit:?} ({} not yet)",
                    waiting.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
        let mut samples = Vec::with_capacity(uids.len());
        for uid in uids {
            if interrupted.is_cancelled() {
                bail!("interrupted");
            }
            tokio::time::sleep(jitter(&mut seed)).await;
            let Some(id) = state(uid).and_then(|c| c.container_id) else {
                bail!("pod {uid} has no container id");
            };
            let id = id.rsplit("://").next().unwrap_or_default().to_string();
            rt.stop_container(&id, Duration::ZERO).await?;
            let t0 = Instant::now();
            while state(uid).and_then(|c| c.state?.terminated).is_none() {
                if t0.elapsed() > Duration::from_secs(30) {
                    bail!("pod {uid}: the exit was not in the status after 30s");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            samples.push(t0.elapsed());
        }
        Ok(samples)
    }
    .await;
    shutdown.cancel();
    let _ = task.await;
    result
}

/// Removes every sandbox of the benchmark's namespace.
async fn cleanup(rt: &CriRuntime) {
    let Ok(sandboxes) = rt.list_pod_sandboxes(&ListFilter::all()).await else {
        return;
    };
    for s in sandboxes.iter().filter(|s| s.pod.namespace == NAMESPACE) {
        let _ = rt.stop_pod_sandbox(&s.id).await;
        let _ = rt.remove_pod_sandbox(&s.id).await;
    }
}
