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
//! 3. **Kubelets end to end** (Go kubelet v1.20.2 from `scripts/go-kubelet.sh`, then the release
//!    `kubelet`): M static busybox pods written at once -> seconds until `/pods` shows all
//!    Running; CPU over an idle window; RSS; manifests removed -> seconds until CRI lists no
//!    container of those pods.
//!
//! A kubelet removes every pod sandbox it does not know about, so running one against a
//! containerd shared with other users would destroy their pods. By default the benchmark
//! therefore starts its own containerd (socket `/run/kubelet-rs-bench/containerd.sock`, bridge
//! `kubeletrsb0`, pods in 10.89.0.0/16) with the node environment's images copied in, and stops it
//! at the end; `--endpoint` runs everything against an existing runtime instead.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_core::runtime::{
    ContainerConfig, ContainerKind, ContainerRuntime, ContainerState, ListFilter, SandboxConfig,
};
use kubelet_runtime_cri::{mapping, CriConfig, CriRuntime, ImageUser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint, Uri};

/// The node environment's CRI endpoint (source of the images).
const NODE_ENDPOINT: &str = "unix:///run/kubelet-rs/containerd/containerd.sock";
const BUSYBOX_IMAGE: &str = "kubelet-rs.local/busybox:1.0";
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
const RAW_CGROUP_ROOT: &str = "/kubelet-rs-bench";
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
    /// Static pods for the kubelet end-to-end rows.
    #[arg(long, default_value_t = 110)]
    pods: usize,
    /// Seconds of the idle window over which kubelet CPU is measured.
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// The kubelet-rs binary (default: $CARGO_TARGET_DIR/release/kubelet, built if missing).
    #[arg(long)]
    kubelet: Option<PathBuf>,
    /// The Go kubelet binary (default: `scripts/go-kubelet.sh build`, cached per machine).
    #[arg(long)]
    go_kubelet: Option<PathBuf>,
    /// Skip the Go kubelet row.
    #[arg(long)]
    skip_go: bool,
    /// Skip the kubelet-rs end-to-end row.
    #[arg(long)]
    skip_rs: bool,
    /// Skip the raw/backend rows (the end-to-end ratios then have no floor).
    #[arg(long)]
    skip_backend: bool,
    /// Seconds to wait for all pods to run / all containers to go.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

/// Runs the benchmark on a multi-threaded runtime of its own (as the kubelet runs).
///
/// `cargo xtask` builds xtask in debug mode; the backend would then be measured unoptimised,
/// so a debug build re-runs itself as `cargo run --release -p xtask`.
pub async fn run(args: BenchArgs) -> Result<()> {
    if cfg!(debug_assertions) && std::env::var_os("KUBELET_RS_BENCH_DEBUG").is_none() {
        eprintln!("[bench] re-running as a release build (KUBELET_RS_BENCH_DEBUG=1 to skip)");
        let status = tokio::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
            .args(["run", "-q", "--release", "-p", "xtask", "--"])
            .args(std::env::args_os().skip(1))
            .current_dir(repo_root())
            .status()
            .await
            .context("cargo run --release -p xtask")?;
        if !status.success() {
            bail!("bench-cri (release build) failed: {status}");
        }
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

/// One raw or backend run of N pods.
#[derive(Debug, Default)]
struct WorkloadRun {
    start: Duration,
    stop: Duration,
    latencies: Vec<Duration>,
    errors: Vec<String>,
}

/// What one pod's start task yields: its latency, sandbox id and container id.
type Started = Result<(Duration, String, String), String>;

impl WorkloadRun {
    /// Waits for every start task; records latencies and errors, returns the started pods'
    /// (sandbox id, container id).
    async fn collect_started(&mut self, set: &mut JoinSet<Started>) -> Vec<(String, String)> {
        let mut started = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok((lat, sid, cid))) => {
                    self.latencies.push(lat);
                    started.push((sid, cid));
                }
                Ok(Err(e)) => self.errors.push(e),
                Err(e) => self.errors.push(e.to_string()),
            }
        }
        started
    }

    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        v.sort();
        if v.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[idx.clamp(1, v.len()) - 1]
    }
}

/// One kubelet's end-to-end figures.
#[derive(Debug, Default)]
struct KubeletRun {
    start: Option<Duration>,
    idle_cores: Option<f64>,
    rss_kib: Option<u64>,
    hwm_kib: Option<u64>,
    /// Manifests removed -> no running container of the pods.
    stopped: Option<Duration>,
    /// Manifests removed -> CRI lists no container of the pods.
    teardown: Option<Duration>,
    notes: Vec<String>,
}

async fn bench(args: BenchArgs) -> Result<()> {
    let run_id = run_id();
    println!("bench-cri run {run_id}");
    let (endpoint, private) = match &args.endpoint {
        Some(e) => (e.clone(), None),
        None => {
            let p = PrivateContainerd::start(&args.node_endpoint).await?;
            (p.endpoint(), Some(p))
        }
    };
    println!("CRI endpoint: {endpoint}");
    let result = bench_on(&args, &endpoint, &run_id).await;
    if let Some(p) = private {
        p.stop().await;
    }
    remove_cgroup_root(RAW_CGROUP_ROOT);
    result
}

async fn bench_on(args: &BenchArgs, endpoint: &str, run_id: &str) -> Result<()> {
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
            let r = raw_run(&raw, &pods, &image_ref).await?;
            cleanup_prefix(&backend, &prefix).await;
            let prefix = format!("bench-be-{run_id}-{k}");
            let pods = workload(&prefix, n);
            eprintln!("[bench] backend, {n} pods");
            let b = backend_run(&backend, &pods, &image_ref).await;
            cleanup_prefix(&backend, &prefix).await;
            rows.push((n, r, b));
        }
    }

    let go = if args.skip_go {
        None
    } else {
        match go_kubelet_binary(args).await {
            Ok(bin) => {
                eprintln!("[bench] Go kubelet {}", bin.display());
                Some(kubelet_run(Kind::Go, &bin, args, endpoint, &backend, run_id).await)
            }
            Err(e) => Some(KubeletRun {
                notes: vec![format!("Go kubelet unavailable: {e:#}")],
                ..KubeletRun::default()
            }),
        }
    };
    let rs = if args.skip_rs {
        None
    } else {
        let bin = rs_kubelet_binary(args)?;
        eprintln!("[bench] kubelet-rs {}", bin.display());
        Some(kubelet_run(Kind::Rs, &bin, args, endpoint, &backend, run_id).await)
    };

    print_report(args, &rows, go.as_ref(), rs.as_ref());
    Ok(())
}

fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}", (nanos / 1_000_000) & 0xff_ffff)
}

// ---------------------------------------------------------------------------------------------
// Workload and configs

/// One benchmark pod: the pod, its sandbox config and its container config.
struct BenchPod {
    sandbox: SandboxConfig,
    container: ContainerConfig,
}

fn busybox_container() -> Container {
    Container {
        name: "busybox".to_string(),
        image: Some(BUSYBOX_IMAGE.to_string()),
        image_pull_policy: Some("Never".to_string()),
        command: Some(vec!["sh".into(), "-c".into(), SCRIPT.into()]),
        ..Default::default()
    }
}

fn workload(prefix: &str, n: usize) -> Vec<BenchPod> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i:03}");
            let uid = format!("{prefix}-{i:03}-uid");
            let container = busybox_container();
            let pod = Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(NAMESPACE.to_string()),
                    uid: Some(uid.clone()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: vec![container.clone()],
                    ..Default::default()
                }),
                ..Default::default()
            });
            let sandbox = SandboxConfig {
                pod: pod.clone(),
                attempt: 0,
                hostname: name.clone(),
                log_directory: Path::new(BENCH_DIR)
                    .join("pod-logs")
                    .join(format!("{NAMESPACE}_{name}_{uid}")),
                cgroup_parent: Some(format!("{RAW_CGROUP_ROOT}/kubepods/besteffort/pod{uid}")),
                dns: None,
                runtime_handler: String::new(),
            };
            let container = ContainerConfig {
                pod,
                kind: ContainerKind::Regular,
                restart_count: 0,
                hash: kubelet_core::hash::container_hash(&container),
                image_ref: String::new(),
                command: container.command.clone().unwrap_or_default(),
                args: Vec::new(),
                env: Vec::new(),
                mounts: Vec::new(),
                log_path: PathBuf::from(&container.name).join("0.log"),
                container,
            };
            BenchPod { sandbox, container }
        })
        .collect()
}

fn cri_config(endpoint: &str) -> CriConfig {
    CriConfig {
        runtime_endpoint: endpoint.to_string(),
        request_timeout: Duration::from_secs(120),
        pod_logs_dir: Path::new(BENCH_DIR).join("pod-logs"),
        containers_log_dir: Path::new(BENCH_DIR).join("container-logs"),
        ..CriConfig::default()
    }
}

async fn connect_backend(endpoint: &str) -> Result<CriRuntime> {
    CriRuntime::connect(cri_config(endpoint))
        .await
        .with_context(|| format!("connecting to {endpoint}"))
}

async fn raw_client(endpoint: &str) -> Result<RuntimeServiceClient<Channel>> {
    let socket = kubelet_runtime_cri::socket_path(endpoint)?;
    let channel = Endpoint::from_static("http://cri.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .with_context(|| format!("dialing {endpoint}"))?;
    Ok(RuntimeServiceClient::new(channel))
}

// ---------------------------------------------------------------------------------------------
// Raw CRI floor and backend runs

async fn raw_run(
    client: &RuntimeServiceClient<Channel>,
    pods: &[BenchPod],
    image_ref: &str,
) -> Result<WorkloadRun> {
    // Prepared outside the timing: the exact messages, and the log directories.
    let root = ImageUser {
        uid: Some(0),
        username: String::new(),
    };
    let mut prepared = Vec::with_capacity(pods.len());
    for p in pods {
        let mut cc = p.container.clone();
        cc.image_ref = image_ref.to_string();
        let opts = mapping::Options::default();
        let sandbox = mapping::sandbox_config(&p.sandbox, &opts);
        let container = mapping::container_config(&cc, &root, &opts)?;
        tokio::fs::create_dir_all(p.sandbox.log_directory.join("busybox")).await?;
        prepared.push((sandbox, container));
    }

    let mut run = WorkloadRun::default();
    let t0 = Instant::now();
    let mut set = JoinSet::new();
    for (sandbox, container) in prepared {
        let mut c = client.clone();
        set.spawn(async move {
            let t = Instant::now();
            let sid = c
                .run_pod_sandbox(cri::RunPodSandboxRequest {
                    config: Some(sandbox.clone()),
                    runtime_handler: String::new(),
                })
                .await
                .map_err(|e| format!("RunPodSandbox: {e}"))?
                .into_inner()
                .pod_sandbox_id;
            let cid = c
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: sid.clone(),
                    config: Some(container),
                    sandbox_config: Some(sandbox),
                })
                .await
                .map_err(|e| format!("CreateContainer: {e}"))?
                .into_inner()
                .container_id;
            c.start_container(cri::StartContainerRequest {
                container_id: cid.clone(),
            })
            .await
            .map_err(|e| format!("StartContainer: {e}"))?;
            Ok::<_, String>((t.elapsed(), sid, cid))
        });
    }
    let started = run.collect_started(&mut set).await;
    run.start = t0.elapsed();
    // PID 1 ignores SIGTERM until the shell has set its trap: let the last ones get there
    // (otherwise a stop right after start waits out the whole grace period).
    tokio::time::sleep(SETTLE).await;

    let t1 = Instant::now();
    let mut set = JoinSet::new();
    for (sid, cid) in started {
        let mut c = client.clone();
        set.spawn(async move {
            c.stop_container(cri::StopContainerRequest {
                container_id: cid.clone(),
                timeout: STOP_TIMEOUT.as_secs() as i64,
            })
            .await
            .map_err(|e| format!("StopContainer: {e}"))?;
            c.remove_container(cri::RemoveContainerRequest { container_id: cid })
                .await
                .map_err(|e| format!("RemoveContainer: {e}"))?;
            c.stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: sid.clone(),
            })
            .await
            .map_err(|e| format!("StopPodSandbox: {e}"))?;
            c.remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: sid,
            })
            .await
            .map_err(|e| format!("RemovePodSandbox: {e}"))?;
            Ok::<_, String>(())
        });
    }
    collect_errors(&mut set, &mut run.errors).await;
    run.stop = t1.elapsed();
    Ok(run)
}

async fn collect_errors(set: &mut JoinSet<Result<(), String>>, errors: &mut Vec<String>) {
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
}

async fn backend_run(rt: &Arc<CriRuntime>, pods: &[BenchPod], image_ref: &str) -> WorkloadRun {
    let mut run = WorkloadRun::default();
    let t0 = Instant::now();
    let mut set = JoinSet::new();
    for p in pods {
        let rt = rt.clone();
        let sandbox = p.sandbox.clone();
        let mut container = p.container.clone();
        container.image_ref = image_ref.to_string();
        set.spawn(async move {
            let t = Instant::now();
            let sid = rt
                .run_pod_sandbox(&sandbox)
                .await
                .map_err(|e| e.to_string())?;
            let cid = rt
                .create_container(&sid, &container, &sandbox)
                .await
                .map_err(|e| e.to_string())?;
            rt.start_container(&cid).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((t.elapsed(), sid, cid))
        });
    }
    let started = run.collect_started(&mut set).await;
    run.start = t0.elapsed();
    // PID 1 ignores SIGTERM until the shell has set its trap: let the last ones get there
    // (otherwise a stop right after start waits out the whole grace period).
    tokio::time::sleep(SETTLE).await;

    let t1 = Instant::now();
    let mut set = JoinSet::new();
    for (sid, cid) in started {
        let rt = rt.clone();
        set.spawn(async move {
            rt.stop_container(&cid, STOP_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            rt.remove_container(&cid).await.map_err(|e| e.to_string())?;
            rt.stop_pod_sandbox(&sid).await.map_err(|e| e.to_string())?;
            rt.remove_pod_sandbox(&sid)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(())
        });
    }
    collect_errors(&mut set, &mut run.errors).await;
    run.stop = t1.elapsed();
    run
}

/// Removes every container and sandbox whose pod name starts with `prefix`.
async fn cleanup_prefix(rt: &Arc<CriRuntime>, prefix: &str) {
    if let Ok(cs) = rt.list_containers(&ListFilter::all()).await {
        for c in cs.iter().filter(|c| c.pod.name.starts_with(prefix)) {
            let _ = rt.stop_container(&c.id, Duration::from_secs(2)).await;
            let _ = rt.remove_container(&c.id).await;
        }
    }
    if let Ok(ss) = rt.list_pod_sandboxes(&ListFilter::all()).await {
        for s in ss.iter().filter(|s| s.pod.name.starts_with(prefix)) {
            let _ = rt.stop_pod_sandbox(&s.id).await;
            let _ = rt.remove_pod_sandbox(&s.id).await;
        }
    }
}

/// (running, all) containers whose pod name starts with `prefix`.
async fn count_containers(rt: &CriRuntime, prefix: &str) -> Result<(usize, usize)> {
    let listed = rt.list_containers(&ListFilter::all()).await?;
    let ours: Vec<_> = listed
        .iter()
        .filter(|c| c.pod.name.starts_with(prefix))
        .collect();
    let running = ours
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .count();
    Ok((running, ours.len()))
}

// ---------------------------------------------------------------------------------------------
// Kubelets end to end

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Go,
    Rs,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Go => "go",
            Kind::Rs => "rs",
        }
    }
    fn read_only_port(self) -> u16 {
        match self {
            Kind::Go => 10256,
            Kind::Rs => 10255,
        }
    }
    fn healthz_port(self) -> u16 {
        match self {
            Kind::Go => 10249,
            Kind::Rs => 10248,
        }
    }
    fn cgroup_root(self) -> &'static str {
        match self {
            Kind::Go => GO_CGROUP_ROOT,
            Kind::Rs => RS_CGROUP_ROOT,
        }
    }
    fn args(self, endpoint: &str, manifests: &Path, root_dir: &Path, node: &str) -> Vec<String> {
        let mut a = vec![
            format!("--pod-manifest-path={}", manifests.display()),
            format!("--container-runtime-endpoint={endpoint}"),
            format!("--root-dir={}", root_dir.display()),
            format!("--cgroup-root={}", self.cgroup_root()),
            format!("--hostname-override={node}"),
            format!("--read-only-port={}", self.read_only_port()),
            format!("--healthz-port={}", self.healthz_port()),
        ];
        match self {
            Kind::Go => a.extend(
                [
                    "--container-runtime=remote",
                    "--image-service-endpoint=",
                    "--port=10260",
                    "--cgroup-driver=cgroupfs",
                    "--cgroups-per-qos=true",
                    "--enforce-node-allocatable=",
                    "--fail-swap-on=false",
                    "--oom-score-adj=0",
                    "--make-iptables-util-chains=false",
                    "--eviction-hard=",
                    "--image-gc-high-threshold=100",
                    "--image-gc-low-threshold=99",
                    "--pod-infra-container-image=kubelet-rs.local/pause:1.0",
                    "--v=1",
                ]
                .map(String::from),
            ),
            Kind::Rs => a.extend(["--port=10250", "--fail-swap-on=false"].map(String::from)),
        }
        a
    }
}

fn manifest(name: &str) -> Result<String> {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![busybox_container()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut v = serde_json::to_value(&pod)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), "v1".into());
        o.insert("kind".into(), "Pod".into());
    }
    Ok(serde_json::to_string_pretty(&v)?)
}

async fn kubelet_run(
    kind: Kind,
    bin: &Path,
    args: &BenchArgs,
    endpoint: &str,
    rt: &Arc<CriRuntime>,
    run_id: &str,
) -> KubeletRun {
    let prefix = format!("bench-{}-{run_id}", kind.tag());
    let mut out = KubeletRun::default();
    if let Err(e) = kubelet_run_inner(kind, bin, args, endpoint, rt, &prefix, &mut out).await {
        out.notes.push(format!("{e:#}"));
    }
    // Whatever the kubelet left behind (the Go kubelet leaves stopped sandboxes to its GC).
    cleanup_prefix(rt, &prefix).await;
    remove_cgroup_root(kind.cgroup_root());
    out
}

async fn kubelet_run_inner(
    kind: Kind,
    bin: &Path,
    args: &BenchArgs,
    endpoint: &str,
    rt: &Arc<CriRuntime>,
    prefix: &str,
    out: &mut KubeletRun,
) -> Result<()> {
    let base = Path::new(BENCH_DIR).join(format!("kubelet-{}", kind.tag()));
    let manifests = base.join("manifests");
    let staging = base.join("staging");
    let root_dir = base.join("root");
    for d in [&manifests, &staging] {
        let _ = tokio::fs::remove_dir_all(d).await;
        tokio::fs::create_dir_all(d).await?;
    }
    tokio::fs::create_dir_all(&root_dir).await?;
    create_cgroup_root(kind.cgroup_root())?;
    let mut names = Vec::new();
    for i in 0..args.pods {
        let name = format!("{prefix}-{i:03}");
        tokio::fs::write(staging.join(format!("{name}.json")), manifest(&name)?).await?;
        names.push(name);
    }

    let log_path = base.join("kubelet.log");
    let log = std::fs::File::create(&log_path)?;
    let node = format!("bench-{}", kind.tag());
    let mut child = tokio::process::Command::new(bin)
        .args(kind.args(endpoint, &manifests, &root_dir, &node))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("{} exited at once", bin.display()))?;
    eprintln!(
        "[bench] {} pid {pid}, log {}",
        bin.display(),
        log_path.display()
    );
    let result = measure(
        kind, args, rt, prefix, pid, &mut child, &manifests, &staging, &names, out,
    )
    .await;
    if result.is_err() {
        out.notes
            .push(format!("kubelet log: {}", log_path.display()));
    }
    // SIGTERM, then SIGKILL after 30 s.
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await;
    if tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .is_err()
    {
        out.notes.push("did not exit within 30 s of SIGTERM".into());
        let _ = child.kill().await;
    }
    // The Go kubelet bind-mounts its root dir onto itself (rshared) and may leave volume mounts.
    unmount_under(&root_dir).await;
    result
}

/// Lazily unmounts every mount point at or below `dir`, deepest first (best effort).
async fn unmount_under(dir: &Path) {
    let Ok(info) = tokio::fs::read_to_string("/proc/self/mountinfo").await else {
        return;
    };
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|p| Path::new(p).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = tokio::process::Command::new("umount")
            .args(["-l", p])
            .status()
            .await;
    }
}

#[allow(clippy::too_many_arguments)]
async fn measure(
    kind: Kind,
    args: &BenchArgs,
    rt: &Arc<CriRuntime>,
    prefix: &str,
    pid: u32,
    child: &mut tokio::process::Child,
    manifests: &Path,
    staging: &Path,
    names: &[String],
    out: &mut KubeletRun,
) -> Result<()> {
    let limit = Duration::from_secs(args.timeout);
    // Up and serving /pods.
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("kubelet exited during startup: {status}");
        }
        if matches!(http_get(kind.read_only_port(), "/pods").await, Ok((200, _))) {
            break;
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!("kubelet did not serve /pods within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "[bench] {kind:?} kubelet serving after {:.1}s",
        t.elapsed().as_secs_f64()
    );

    // All manifests at once (renames: no half-written files), then until all Running.
    let t0 = Instant::now();
    for n in names {
        let f = format!("{n}.json");
        tokio::fs::rename(staging.join(&f), manifests.join(&f)).await?;
    }
    let mut last = 0;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("kubelet exited: {status}");
        }
        if let Ok((200, body)) = http_get(kind.read_only_port(), "/pods").await {
            last = running_pods(&body, prefix);
            if last >= names.len() {
                out.start = Some(t0.elapsed());
                break;
            }
        }
        if t0.elapsed() > limit {
            bail!("{last}/{} pods Running after {limit:?}", names.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "[bench] {kind:?}: {} pods Running after {:.1}s",
        names.len(),
        t0.elapsed().as_secs_f64()
    );

    // Idle window.
    let tick = clock_ticks().await;
    let (c0, w0) = (cpu_ticks(pid).await?, Instant::now());
    tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
    let (c1, w1) = (cpu_ticks(pid).await?, Instant::now());
    out.idle_cores =
        Some((c1.saturating_sub(c0)) as f64 / tick / (w1 - w0).as_secs_f64().max(0.001));
    let (rss, hwm) = memory_kib(pid).await?;
    out.rss_kib = Some(rss);
    out.hwm_kib = Some(hwm);
    let running = match http_get(kind.read_only_port(), "/pods").await {
        Ok((200, body)) => running_pods(&body, prefix),
        _ => 0,
    };
    if running < names.len() {
        out.notes.push(format!(
            "after the idle window only {running}/{} pods Running",
            names.len()
        ));
    }

    // Teardown: all manifests removed, until CRI lists none of the pods' containers.
    let t1 = Instant::now();
    for n in names {
        tokio::fs::remove_file(manifests.join(format!("{n}.json"))).await?;
    }
    let mut left = usize::MAX;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("kubelet exited during teardown: {status}");
        }
        if let Ok((running, c)) = count_containers(rt, prefix).await {
            left = c;
            if running == 0 && out.stopped.is_none() {
                out.stopped = Some(t1.elapsed());
            }
            if c == 0 {
                out.teardown = Some(t1.elapsed());
                break;
            }
        }
        if t1.elapsed() > limit {
            bail!("{left} containers still listed {limit:?} after the manifests went");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "[bench] {kind:?}: containers stopped after {:.1}s, gone after {:.1}s",
        out.stopped.unwrap_or_default().as_secs_f64(),
        t1.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Pods in a PodList JSON whose name starts with `prefix` and whose phase is Running.
fn running_pods(body: &str, prefix: &str) -> usize {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return 0;
    };
    v.get("items")
        .and_then(|i| i.as_array())
        .map(|items| {
            items
                .iter()
                .filter(|p| {
                    p.pointer("/metadata/name")
                        .and_then(|n| n.as_str())
                        .is_some_and(|n| n.starts_with(prefix))
                        && p.pointer("/status/phase").and_then(|s| s.as_str()) == Some("Running")
                })
                .count()
        })
        .unwrap_or(0)
}

/// A plain HTTP/1.0 GET on 127.0.0.1: (status, body).
async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    let fut = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        Ok::<_, io::Error>(buf)
    };
    let buf = tokio::time::timeout(Duration::from_secs(10), fut).await??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("malformed HTTP response"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("no HTTP status"))?;
    Ok((status, body.to_string()))
}

async fn clock_ticks() -> f64 {
    let out = tokio::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .await;
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks.
async fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = tokio::fs::read_to_string(format!("/proc/{pid}/stat")).await?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("malformed /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/stat field {i}"))
    };
    // Fields after the command: state is #3, utime #14, stime #15.
    Ok(field(11)? + field(12)?)
}

/// (VmRSS, VmHWM) in KiB.
async fn memory_kib(pid: u32) -> Result<(u64, u64)> {
    let status = tokio::fs::read_to_string(format!("/proc/{pid}/status")).await?;
    let get = |key: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("{key} missing in /proc/{pid}/status"))
    };
    Ok((get("VmRSS:")?, get("VmHWM:")?))
}

/// The cgroup parent directory in every v1 hierarchy and in the v2 (unified) one.
fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    let rel = root.trim_start_matches('/');
    let mut dirs = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        for e in entries.flatten() {
            let p = e.path();
            // Skip the controller aliases (cpu -> cpu,cpuacct).
            if p.is_dir() && !e.file_type().map(|t| t.is_symlink()).unwrap_or(false) {
                dirs.push(p.join(rel));
            }
        }
    }
    dirs
}

fn create_cgroup_root(root: &str) -> Result<()> {
    for d in cgroup_dirs(root) {
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    Ok(())
}

/// Removes a cgroup tree, children first (best effort).
fn remove_cgroup_root(root: &str) {
    fn rm(dir: &Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    rm(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    for d in cgroup_dirs(root) {
        rm(&d);
    }
}

async fn go_kubelet_binary(args: &BenchArgs) -> Result<PathBuf> {
    if let Some(p) = &args.go_kubelet {
        return Ok(p.clone());
    }
    let script = repo_root().join("scripts").join("go-kubelet.sh");
    let out = tokio::process::Command::new("bash")
        .arg(&script)
        .arg("build")
        .stderr(Stdio::inherit())
        .output()
        .await
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} build failed: {}", script.display(), out.status);
    }
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(PathBuf::from(path))
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rs_kubelet_binary(args: &BenchArgs) -> Result<PathBuf> {
    if let Some(p) = &args.kubelet {
        return Ok(p.clone());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let bin = target.join("release").join("kubelet");
    let status = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args(["build", "--release", "-p", "kubelet-bin"])
        .current_dir(repo_root())
        .status()
        .context("cargo build --release -p kubelet-bin")?;
    if !status.success() {
        bail!("building the release kubelet failed: {status}");
    }
    Ok(bin)
}

// ---------------------------------------------------------------------------------------------
// The private containerd

struct PrivateContainerd {
    child: tokio::process::Child,
    socket: PathBuf,
}

impl PrivateContainerd {
    fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    async fn start(node_endpoint: &str) -> Result<PrivateContainerd> {
        let base = Path::new(BENCH_DIR).join("containerd");
        let cni_conf = base.join("net.d");
        let cni_data = base.join("networks");
        let socket = Path::new(BENCH_RUN_DIR).join("containerd.sock");
        for d in [
            base.join("root"),
            base.join("state"),
            cni_conf.clone(),
            cni_data.clone(),
        ] {
            tokio::fs::create_dir_all(&d).await?;
        }
        tokio::fs::create_dir_all(BENCH_RUN_DIR).await?;
        let config = format!(
            r#"# Written by cargo xtask bench-cri: a private containerd for benchmarks.
version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{sock}"
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "warn"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni_conf}"
    max_conf_num = 1
"#,
            root = base.join("root").display(),
            state = base.join("state").display(),
            sock = socket.display(),
            pause = PAUSE_IMAGE,
            cni_conf = cni_conf.display(),
        );
        tokio::fs::write(base.join("config.toml"), config).await?;
        let conflist = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "kubelet-rs-bench",
            "plugins": [
                {
                    "type": "bridge", "bridge": BENCH_BRIDGE, "isGateway": true, "ipMasq": true,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{ "subnet": BENCH_SUBNET }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                        "dataDir": cni_data.display().to_string(),
                    }
                },
                { "type": "portmap", "capabilities": { "portMappings": true } }
            ]
        });
        tokio::fs::write(
            cni_conf.join("10-kubelet-rs-bench.conflist"),
            serde_json::to_string_pretty(&conflist)?,
        )
        .await?;

        let _ = tokio::fs::remove_file(&socket).await;
        let log = std::fs::File::create(base.join("containerd.log"))?;
        let child = tokio::process::Command::new("containerd")
            .arg("--config")
            .arg(base.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .context("starting containerd")?;
        let me = PrivateContainerd { child, socket };
        eprintln!("[bench] private containerd at {}", me.endpoint());
        me.wait_ready().await?;
        me.copy_images(node_endpoint).await?;
        Ok(me)
    }

    async fn wait_ready(&self) -> Result<()> {
        let t = Instant::now();
        let mut last = String::new();
        while t.elapsed() < Duration::from_secs(60) {
            match CriRuntime::connect(cri_config(&self.endpoint())).await {
                Ok(rt) => match rt.status().await {
                    Ok(s) if s.runtime_ready && s.network_ready => return Ok(()),
                    Ok(s) => last = s.message,
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!("private containerd not ready: {last}")
    }

    async fn copy_images(&self, node_endpoint: &str) -> Result<()> {
        let rt = connect_backend(&self.endpoint()).await?;
        let mut missing = Vec::new();
        for image in [BUSYBOX_IMAGE, PAUSE_IMAGE] {
            if rt.image_status(image).await?.is_none() {
                missing.push(image);
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let node_sock = kubelet_runtime_cri::socket_path(node_endpoint)?;
        let tar = Path::new(BENCH_DIR).join("images.tar");
        let ctr = |sock: &Path, args: &[&str]| {
            let mut c = std::process::Command::new("ctr");
            c.arg("-a").arg(sock).args(["-n", "k8s.io"]).args(args);
            c
        };
        let tar_s = tar.display().to_string();
        let mut export = vec!["images", "export", tar_s.as_str()];
        export.extend(missing.iter().copied());
        let st = ctr(&node_sock, &export)
            .status()
            .context("ctr images export")?;
        if !st.success() {
            bail!("exporting {missing:?} from {node_endpoint} failed (is `cargo xtask node-up` done?)");
        }
        let st = ctr(&self.socket, &["images", "import", tar_s.as_str()])
            .status()
            .context("ctr images import")?;
        if !st.success() {
            bail!("importing images into the private containerd failed");
        }
        let _ = std::fs::remove_file(&tar);
        Ok(())
    }

    async fn stop(mut self) {
        if let Ok(rt) = connect_backend(&self.endpoint()).await {
            cleanup_prefix(&Arc::new(rt), "bench-").await;
        }
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        let _ = tokio::process::Command::new("ip")
            .args(["link", "del", BENCH_BRIDGE])
            .stderr(Stdio::null())
            .status()
            .await;
    }
}

// ---------------------------------------------------------------------------------------------
// Report

fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Option<Duration>, floor: Option<Duration>) -> String {
    match (a, floor) {
        (Some(a), Some(f)) if !f.is_zero() => format!("{:.2}x", a.as_secs_f64() / f.as_secs_f64()),
        _ => "-".into(),
    }
}

fn print_report(
    args: &BenchArgs,
    rows: &[(usize, WorkloadRun, WorkloadRun)],
    go: Option<&KubeletRun>,
    rs: Option<&KubeletRun>,
) {
    println!();
    if !rows.is_empty() {
        println!("== CRI backend vs raw CRI (N pods at once; start = RunPodSandbox+CreateContainer+StartContainer,");
        println!("   stop = StopContainer+RemoveContainer+StopPodSandbox+RemovePodSandbox; latency per pod)");
        println!(
            "{:>4}  {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  errors",
            "N", "path", "start s", "p50 ms", "p99 ms", "stop s", "start×", "stop×"
        );
        for (n, r, b) in rows {
            for (label, w) in [("raw CRI", r), ("backend", b)] {
                println!(
                    "{:>4}  {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
                    n,
                    label,
                    secs(w.start),
                    ms(w.percentile(50.0)),
                    ms(w.percentile(99.0)),
                    secs(w.stop),
                    ratio(Some(w.start), Some(r.start)),
                    ratio(Some(w.stop), Some(r.stop)),
                    w.errors.len()
                );
            }
            for e in r.errors.iter().chain(b.errors.iter()).take(5) {
                println!("        error: {e}");
            }
        }
        println!();
    }

    let floor = rows
        .iter()
        .find(|(n, _, _)| *n == args.pods)
        .map(|(_, r, _)| r);
    println!(
        "== {} static busybox pods written at once; idle window {} s",
        args.pods, args.idle_secs
    );
    println!("   start = manifests written -> all Running in /pods; stopped/removed = manifests removed ->");
    println!(
        "   no running container / no container at all listed by CRI; ratios to the raw CRI floor"
    );
    println!(
        "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
        "row",
        "start s",
        "idle cores",
        "RSS MiB",
        "HWM MiB",
        "stopped s",
        "removed s",
        "start×",
        "stopped×",
        "removed×"
    );
    match floor {
        Some(f) => println!(
            "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
            "raw CRI",
            secs(f.start),
            "-",
            "-",
            "-",
            "-",
            secs(f.stop),
            "1.00x",
            "-",
            "1.00x"
        ),
        None => println!(
            "raw CRI     (not measured for {} pods: add it to --counts)",
            args.pods
        ),
    }
    let mib = |k: Option<u64>| {
        k.map(|k| format!("{:.1}", k as f64 / 1024.0))
            .unwrap_or("-".into())
    };
    for (label, k) in [("Go kubelet", go), ("kubelet-rs", rs)] {
        let Some(k) = k else { continue };
        println!(
            "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
            label,
            k.start.map(secs).unwrap_or("-".into()),
            k.idle_cores
                .map(|c| format!("{c:.4}"))
                .unwrap_or("-".into()),
            mib(k.rss_kib),
            mib(k.hwm_kib),
            k.stopped.map(secs).unwrap_or("-".into()),
            k.teardown.map(secs).unwrap_or("-".into()),
            ratio(k.start, floor.map(|f| f.start)),
            ratio(k.stopped, floor.map(|f| f.stop)),
            ratio(k.teardown, floor.map(|f| f.stop)),
        );
        for n in &k.notes {
            println!("            note: {n}");
        }
    }
    println!();
    println!("targets: backend and kubelet-rs start/teardown ≤ 1.10x raw CRI; kubelet-rs idle ≤ 0.01 cores, RSS ≤ 25 MiB");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_pods_counts_only_prefixed_running_pods() {
        let body = serde_json::json!({
            "kind": "PodList",
            "items": [
                { "metadata": { "name": "bench-rs-1-000-node" }, "status": { "phase": "Running" } },
                { "metadata": { "name": "bench-rs-1-001-node" }, "status": { "phase": "Pending" } },
                { "metadata": { "name": "bench-rs-1-002-node" }, "status": {} },
                { "metadata": { "name": "other-000" }, "status": { "phase": "Running" } },
                { "metadata": { "name": "bench-rs-1-003-node" }, "status": { "phase": "Running" } }
            ]
        })
        .to_string();
        let cases = [
            (body.as_str(), "bench-rs-1", 2),
            (body.as_str(), "bench-go-1", 0),
            ("not json", "bench-rs-1", 0),
            (r#"{"items": null}"#, "bench-rs-1", 0),
        ];
        for (body, prefix, want) in cases {
            assert_eq!(running_pods(body, prefix), want, "{prefix} in {body}");
        }
    }

    #[test]
    fn percentiles_pick_nearest_rank() {
        let run = WorkloadRun {
            latencies: (1..=100).rev().map(Duration::from_millis).collect(),
            ..WorkloadRun::default()
        };
        let cases = [(50.0, 50), (99.0, 99), (100.0, 100), (0.0, 1)];
        for (p, want) in cases {
            assert_eq!(run.percentile(p), Duration::from_millis(want), "p{p}");
        }
        assert_eq!(WorkloadRun::default().percentile(50.0), Duration::ZERO);
    }

    #[test]
    fn manifest_is_a_static_busybox_pod() {
        let text = manifest("bench-rs-1-000").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "Pod");
        let pod: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("bench-rs-1-000"));
        let c = &pod.spec.unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some(BUSYBOX_IMAGE));
        assert_eq!(c.command.as_ref().unwrap()[2], SCRIPT);
        assert!(c.resources.is_none());
    }

    #[test]
    fn workload_pods_are_unique_and_consistent() {
        let pods = workload("bench-raw-x-0", 3);
        let names: Vec<_> = pods
            .iter()
            .map(|p| kubelet_core::pod::name(&p.sandbox.pod).to_string())
            .collect();
        assert_eq!(
            names,
            [
                "bench-raw-x-0-000",
                "bench-raw-x-0-001",
                "bench-raw-x-0-002"
            ]
        );
        for p in &pods {
            let uid = kubelet_core::pod::uid(&p.sandbox.pod);
            assert_eq!(
                p.sandbox.cgroup_parent.as_deref(),
                Some(format!("/kubelet-rs-bench/kubepods/besteffort/pod{uid}").as_str())
            );
            assert_eq!(
                p.container.hash,
                kubelet_core::hash::container_hash(&p.container.container)
            );
            assert_eq!(p.container.log_path, PathBuf::from("busybox/0.log"));
        }
    }

    #[tokio::test]
    async fn own_process_figures_are_readable() {
        let pid = std::process::id();
        cpu_ticks(pid).await.unwrap();
        let (rss, hwm) = memory_kib(pid).await.unwrap();
        assert!(rss > 0 && hwm >= rss);
    }
}
