//! Kubelets end to end: the Go kubelet and the release kubelet-rs each run M static busybox
//! pods on the benchmark's containerd; seconds until `/pods` shows all Running, CPU over an
//! idle window, RSS, a restart with the pods running ([`super::restart`]), and seconds until
//! CRI lists no container of those pods once the manifests are removed.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_runtime_cri::CriRuntime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::backend::{cleanup_prefix, count_containers};
use super::cgroups::{create_cgroup_root, remove_cgroup_root};
use super::restart::{restart, Restart, Spawn};
use super::spans::{self, breakdown, unix_ns, Collector, StepStats};
use super::workload::busybox_container;
use super::{histogram, runtime_calls};
use super::{BenchArgs, BENCH_DIR, GO_CGROUP_ROOT, NAMESPACE, RS_CGROUP_ROOT};
use crate::proc_stats::{clock_ticks, cpu_ticks, status_figures, MachineTicks};
use crate::repo_root;

/// The relist duration histogram (Go's name; kubelet-rs exports it with Go's buckets).
const RELIST: &str = "kubelet_pleg_relist_duration_seconds";

/// One kubelet's end-to-end figures.
#[derive(Debug, Default)]
pub(super) struct KubeletRun {
    pub(super) start: Option<Duration>,
    pub(super) idle_cores: Option<f64>,
    pub(super) rss_kib: Option<u64>,
    pub(super) hwm_kib: Option<u64>,
    /// The RSS split: (anonymous, file-backed) KiB.
    pub(super) rss_parts_kib: Option<(u64, u64)>,
    /// The process's threads at the end of the idle window.
    pub(super) threads: Option<u64>,
    /// Manifests removed -> no running container of the pods.
    pub(super) stopped: Option<Duration>,
    /// Manifests removed -> CRI lists no container of the pods.
    pub(super) teardown: Option<Duration>,
    /// The restart with every pod running (before the teardown).
    pub(super) restart: Option<Restart>,
    /// Runtime calls per minute over the idle window, by operation type (its `/metrics`).
    pub(super) idle_runtime_calls: Option<super::runtime_calls::Counts>,
    /// The relists of the idle window: p99 seconds (`kubelet_pleg_relist_duration_seconds`)
    /// and how many there were.
    pub(super) idle_relist_p99: Option<(f64, f64)>,
    /// The pods of the run.
    pub(super) pods: usize,
    /// CPU seconds of the kubelet during the start and the teardown.
    pub(super) start_cpu: Option<f64>,
    pub(super) teardown_cpu: Option<f64>,
    /// Cores of the whole machine busy during the start and the teardown.
    pub(super) start_busy: Option<f64>,
    pub(super) teardown_busy: Option<f64>,
    /// Wall-clock starts of the two phases (Unix ns: the spans' time base).
    pub(super) start_at_ns: u64,
    pub(super) teardown_at_ns: u64,
    /// `--breakdown`: the pod worker steps of the start and of the teardown.
    pub(super) breakdown: Option<(Vec<StepStats>, Vec<StepStats>)>,
    pub(super) notes: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
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
    pub(super) fn read_only_port(self) -> u16 {
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
    fn args(
        self,
        endpoint: &str,
        manifests: &Path,
        root_dir: &Path,
        node: &str,
        config: Option<&Path>,
        max_pods: usize,
    ) -> Vec<String> {
        let mut a = vec![
            format!("--max-pods={}", max_pods.max(110)),
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
        if let Some(c) = config {
            a.push(format!("--config={}", c.display()));
        }
        a
    }
}

/// kubelet-rs's configuration file for `--evented-pleg` and `--breakdown` (`None` when neither
/// is asked for): the feature gates, and every span exported to the collector at `otlp`.
fn rs_config(evented_pleg: bool, otlp: Option<SocketAddr>) -> Option<String> {
    if !evented_pleg && otlp.is_none() {
        return None;
    }
    // A file's defaults are v1beta1's, not the flags' (webhook authentication and
    // authorization on): set the flags' back, which need no API server.
    let mut c = String::from(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\n\
         authorization:\n  mode: AlwaysAllow\nfeatureGates:\n",
    );
    c.push_str(&format!("  EventedPLEG: {evented_pleg}\n"));
    if let Some(addr) = otlp {
        c.push_str(&format!(
            "  KubeletTracing: true\ntracing:\n  endpoint: \"{addr}\"\n  samplingRatePerMillion: 1000000\n"
        ));
    }
    Some(c)
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

pub(super) async fn kubelet_run(
    kind: Kind,
    bin: &Path,
    args: &BenchArgs,
    pods: usize,
    endpoint: &str,
    rt: &Arc<CriRuntime>,
    run_id: &str,
) -> KubeletRun {
    let prefix = format!("bench-{}-{run_id}-{pods}", kind.tag());
    let mut out = KubeletRun {
        pods,
        ..KubeletRun::default()
    };
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
    for i in 0..out.pods {
        let name = format!("{prefix}-{i:03}");
        tokio::fs::write(staging.join(format!("{name}.json")), manifest(&name)?).await?;
        names.push(name);
    }

    let log_path = base.join("kubelet.log");
    let node = format!("bench-{}", kind.tag());
    let collector = match kind == Kind::Rs && args.breakdown {
        true => Some(Collector::start().await?),
        false => None,
    };
    let config_path = base.join("kubelet-config.yaml");
    let config = match kind {
        Kind::Rs => rs_config(args.evented_pleg, collector.as_ref().map(|c| c.addr)),
        Kind::Go => None,
    };
    if let Some(text) = &config {
        tokio::fs::write(&config_path, text).await?;
    }
    let config = config.map(|_| config_path.as_path());
    let spawn = |log_name: &str| -> Result<(tokio::process::Child, u32)> {
        let path = base.join(log_name);
        let log = std::fs::File::create(&path)?;
        let child = tokio::process::Command::new(bin)
            .args(kind.args(endpoint, &manifests, &root_dir, &node, config, names.len()))
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
            path.display()
        );
        Ok((child, pid))
    };
    let (mut child, mut pid) = spawn("kubelet.log")?;
    let result = measure(
        kind, args, rt, prefix, &mut pid, &mut child, &spawn, &manifests, &staging, &names, out,
    )
    .await;
    if result.is_err() {
        out.notes
            .push(format!("kubelet log: {}", log_path.display()));
    }
    if let (Some(c), Ok(())) = (&collector, &result) {
        // The last steps' spans leave in the kubelet's next export batch.
        c.collector
            .settle(Duration::from_secs(8), Duration::from_secs(30))
            .await;
        let spans = c.collector.spans();
        let dump = base.join("spans.tsv");
        if let Err(e) = tokio::fs::write(&dump, spans::tsv(&spans)).await {
            out.notes.push(format!("writing {}: {e}", dump.display()));
        }
        let phase = |at: u64, took: Option<Duration>| {
            let took = u64::try_from(took.unwrap_or_default().as_nanos()).unwrap_or(u64::MAX);
            let until = at.saturating_add(took);
            breakdown(&spans, prefix, at, until)
        };
        out.breakdown = Some((
            phase(out.start_at_ns, out.start),
            phase(out.teardown_at_ns, out.teardown),
        ));
    }
    if let Some(conditions) = pressure_in_log(&log_path) {
        out.notes.push(format!(
            "the kubelet reported {conditions} (its eviction manager reclaimed and ranked pods \
             every cycle: the idle figure includes that work; free disk or memory to measure \
             an idle node)"
        ));
    }
    if !terminate(&mut child, pid).await {
        out.notes.push("did not exit within 30 s of SIGTERM".into());
        let _ = child.kill().await;
    }
    // The Go kubelet bind-mounts its root dir onto itself (rshared) and may leave volume mounts.
    unmount_under(&root_dir).await;
    result
}

/// Sends the kubelet `child` (process `pid`) SIGTERM and waits up to 30 s for it to exit:
/// whether it did.
pub(super) async fn terminate(child: &mut tokio::process::Child, pid: u32) -> bool {
    let _ = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await;
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .is_ok()
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
    pid: &mut u32,
    child: &mut tokio::process::Child,
    spawn: &Spawn<'_>,
    manifests: &Path,
    staging: &Path,
    names: &[String],
    out: &mut KubeletRun,
) -> Result<()> {
    let limit = Duration::from_secs(args.timeout);
    // Up and serving /pods.
    let t = kubelet_core::clock::monotonic_now();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("kubelet exited during startup: {status}");
        }
        if matches!(http_get(kind.read_only_port(), "/pods").await, Ok((200, _))) {
            break;
        }
        if kubelet_core::clock::elapsed(t) > Duration::from_secs(60) {
            bail!("kubelet did not serve /pods within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "[bench] {kind:?} kubelet serving after {:.1}s",
        kubelet_core::clock::elapsed(t).as_secs_f64()
    );

    // All manifests at once (renames: no half-written files), then until all Running.
    let (cpu0, busy0) = (cpu_ticks(*pid).await?, MachineTicks::read().await?);
    out.start_at_ns = unix_ns(kubelet_core::clock::wall_now());
    let t0 = kubelet_core::clock::monotonic_now();
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
                out.start = Some(kubelet_core::clock::elapsed(t0));
                break;
            }
        }
        if kubelet_core::clock::elapsed(t0) > limit {
            bail!("{last}/{} pods Running after {limit:?}", names.len());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "[bench] {kind:?}: {} pods Running after {:.1}s",
        names.len(),
        kubelet_core::clock::elapsed(t0).as_secs_f64()
    );

    let tick = clock_ticks().await;
    out.start_cpu = Some(cpu_ticks(*pid).await?.saturating_sub(cpu0) as f64 / tick);
    out.start_busy = Some(MachineTicks::read().await?.busy_cores_since(&busy0));

    // Idle window.
    let m0 = runtime_calls::metrics_text(kind.read_only_port()).await;
    let (c0, w0) = (cpu_ticks(*pid).await?, kubelet_core::clock::monotonic_now());
    tokio::time::sleep(Duration::from_secs(args.idle_secs)).await;
    let (c1, w1) = (cpu_ticks(*pid).await?, kubelet_core::clock::monotonic_now());
    let m1 = runtime_calls::metrics_text(kind.read_only_port()).await;
    out.idle_cores =
        Some((c1.saturating_sub(c0)) as f64 / tick / (w1 - w0).as_secs_f64().max(0.001));
    if let (Some(a), Some(b)) = (&m0, &m1) {
        let (ops0, ops1) = (runtime_calls::parse(a), runtime_calls::parse(b));
        out.idle_runtime_calls = Some(runtime_calls::per_minute(&ops0, &ops1, w1 - w0));
        let (h0, h1) = (histogram::buckets(a, RELIST), histogram::buckets(b, RELIST));
        out.idle_relist_p99 = histogram::quantile_between(&h0, &h1, 0.99);
    }
    let figures = status_figures(*pid).await?;
    out.rss_kib = Some(figures.rss_kib);
    out.hwm_kib = Some(figures.hwm_kib);
    out.rss_parts_kib = Some((figures.anon_kib, figures.file_kib));
    out.threads = Some(figures.threads);
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

    if !args.skip_restart {
        restart(kind, rt, prefix, names.len(), child, pid, spawn, out).await?;
    }

    // Teardown: all manifests removed, until CRI lists none of the pods' containers.
    let (cpu1, busy1) = (cpu_ticks(*pid).await?, MachineTicks::read().await?);
    out.teardown_at_ns = unix_ns(kubelet_core::clock::wall_now());
    let t1 = kubelet_core::clock::monotonic_now();
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
                out.stopped = Some(kubelet_core::clock::elapsed(t1));
            }
            if c == 0 {
                out.teardown = Some(kubelet_core::clock::elapsed(t1));
                out.teardown_cpu = Some(cpu_ticks(*pid).await?.saturating_sub(cpu1) as f64 / tick);
                out.teardown_busy = Some(MachineTicks::read().await?.busy_cores_since(&busy1));
                break;
            }
        }
        if kubelet_core::clock::elapsed(t1) > limit {
            bail!("{left} containers still listed {limit:?} after the manifests went");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "[bench] {kind:?}: containers stopped after {:.1}s, gone after {:.1}s",
        out.stopped.unwrap_or_default().as_secs_f64(),
        kubelet_core::clock::elapsed(t1).as_secs_f64()
    );
    Ok(())
}

/// Pods in a PodList JSON whose name starts with `prefix` and whose phase is Running.
pub(super) fn running_pods(body: &str, prefix: &str) -> usize {
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
pub(super) async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
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

pub(super) async fn go_kubelet_binary(args: &BenchArgs) -> Result<PathBuf> {
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

pub(super) fn rs_kubelet_binary(args: &BenchArgs) -> Result<PathBuf> {
    if let Some(p) = &args.kubelet {
        return Ok(p.clone());
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let profile = args.profile.as_str();
    if profile == "pgo" {
        return pgo_binary();
    }
    let bin = target.join(profile).join("kubelet");
    let status = crate::nested_cargo::command()
        .args(["build", "--profile", profile, "-p", "kubelet-bin"])
        .current_dir(repo_root())
        .status()
        .with_context(|| format!("cargo build --profile {profile} -p kubelet-bin"))?;
    if !status.success() {
        bail!("building the kubelet ({profile} profile) failed: {status}");
    }
    Ok(bin)
}

/// The PGO-optimised `ship` binary of `scripts/pgo-build.sh` (built, or reused while the
/// sources are unchanged): the path on the last line it prints.
fn pgo_binary() -> Result<PathBuf> {
    let script = repo_root().join("scripts").join("pgo-build.sh");
    let mut bash = std::process::Command::new("bash");
    bash.arg(&script).stderr(Stdio::inherit());
    let out = crate::nested_cargo::without_our_package(bash)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed: {}", script.display(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().last() {
        Some(path) if !path.trim().is_empty() => Ok(PathBuf::from(path.trim())),
        _ => bail!("{} printed no binary path", script.display()),
    }
}

/// The pressure conditions kubelet-rs's eviction manager last reported in its log
/// (`node conditions changed conditions=[DiskPressure]`), when any.
fn pressure_in_log(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let last = text
        .lines()
        .rev()
        .find(|l| l.contains("eviction manager: node conditions changed"))?;
    let conditions = last.split("conditions=").nth(1)?.trim();
    (conditions != "[]").then(|| conditions.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::{BUSYBOX_IMAGE, SCRIPT};
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
    fn pressure_is_the_last_conditions_the_log_reports() {
        let log = std::env::temp_dir().join(format!("bench-log-{}.txt", std::process::id()));
        let line = |c: &str| {
            format!("2026-12-01T20:17:34Z  INFO kubelet_core::eviction::manager: eviction manager: node conditions changed conditions={c}\n")
        };
        let cases = [
            (String::from("no such line\n"), None),
            (line("[DiskPressure]"), Some("[DiskPressure]")),
            (line("[DiskPressure]") + &line("[]"), None),
            (
                line("[]") + &line("[MemoryPressure, DiskPressure]"),
                Some("[MemoryPressure, DiskPressure]"),
            ),
        ];
        for (text, want) in cases {
            std::fs::write(&log, &text).unwrap();
            assert_eq!(pressure_in_log(&log).as_deref(), want, "{text}");
        }
        std::fs::remove_file(&log).unwrap();
        assert_eq!(pressure_in_log(&log), None);
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
}
