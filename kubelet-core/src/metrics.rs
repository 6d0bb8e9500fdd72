//! The kubelet's Prometheus metrics, with the Go kubelet's names, and an
//! [`InstrumentedRuntime`] that counts and times every runtime operation.
//!
//! One process-wide registry ([`global`]); the engine observes into it (PLEG relist
//! duration, pod worker duration, pod start duration, running pods and containers) and the
//! HTTP server renders it ([`Metrics::render`]) on `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::runtime::{
    AttachRequest, ContainerConfig, ContainerEventStream, ContainerRuntime, ContainerStats,
    ContainerStatus, ContainerSummary, ExecOutput, ExecRequest, ImageFsInfo, ImageInfo, ListFilter,
    PullImageRequest, RuntimeResult, RuntimeStatus, RuntimeVersion, SandboxConfig, SandboxStatus,
    SandboxSummary,
};

/// Prometheus' default buckets.
const DEF_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Go's `kubelet_pod_start_duration_seconds` buckets.
const POD_START_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];
/// Go's runtime operation buckets: exponential from 5ms, factor 2.5, 14 buckets.
const RUNTIME_OP_BUCKETS: &[f64] = &[
    0.005,
    0.0125,
    0.03125,
    0.078125,
    0.1953125,
    0.48828125,
    1.220703125,
    3.0517578125,
    7.62939453125,
    19.073486328125,
    47.6837158203125,
    119.20928955078125,
    298.0232238769531,
    745.0580596923828,
];

/// A histogram without labels.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        for (bound, c) in self.bounds.iter().zip(&self.counts) {
            if secs <= *bound {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let braces = |l: &str| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            }
        };
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{} {sum}", braces(labels));
        let _ = writeln!(out, "{name}_count{} {count}", braces(labels));
    }
}

/// Histograms keyed by one label value.
#[derive(Debug)]
pub struct HistogramVec {
    label: &'static str,
    bounds: &'static [f64],
    series: Mutex<BTreeMap<String, Arc<Histogram>>>,
}

impl HistogramVec {
    fn new(label: &'static str, bounds: &'static [f64]) -> HistogramVec {
        HistogramVec {
            label,
            bounds,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// The histogram for one label value.
    pub fn with(&self, value: &str) -> Arc<Histogram> {
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(value.to_string())
            .or_insert_with(|| Arc::new(Histogram::new(self.bounds)))
            .clone()
    }

    fn render(&self, out: &mut String, name: &str) {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (v, h) in map.iter() {
            h.render(out, name, &format!("{}=\"{}\"", self.label, escape(v)));
        }
    }
}

/// Counters keyed by one label value.
#[derive(Debug)]
pub struct CounterVec {
    label: &'static str,
    series: Mutex<BTreeMap<String, u64>>,
}

impl CounterVec {
    fn new(label: &'static str) -> CounterVec {
        CounterVec {
            label,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds one to the counter of `value`.
    pub fn inc(&self, value: &str) {
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry(value.to_string()).or_default() += 1;
    }

    /// The counter of `value`.
    pub fn get(&self, value: &str) -> u64 {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        map.get(value).copied().unwrap_or_default()
    }

    fn render(&self, out: &mut String, name: &str) {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (v, n) in map.iter() {
            let _ = writeln!(out, "{name}{{{}=\"{}\"}} {n}", self.label, escape(v));
        }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The kubelet's metrics. See the module docs.
#[derive(Debug)]
pub struct Metrics {
    /// `kubelet_pod_start_duration_seconds`: first seen → running.
    pub pod_start_duration: Histogram,
    /// `kubelet_pleg_relist_duration_seconds`.
    pub pleg_relist_duration: Histogram,
    /// `kubelet_pod_worker_duration_seconds{operation_type}`.
    pub pod_worker_duration: HistogramVec,
    /// `kubelet_runtime_operations_total{operation_type}`.
    pub runtime_operations: CounterVec,
    /// `kubelet_runtime_operations_errors_total{operation_type}`.
    pub runtime_operation_errors: CounterVec,
    /// `kubelet_runtime_operations_duration_seconds{operation_type}`.
    pub runtime_operation_duration: HistogramVec,
    /// `kubelet_running_pods`.
    pub running_pods: AtomicI64,
    /// `kubelet_running_containers{container_state="running"}`.
    pub running_containers: AtomicI64,
    /// `kubelet_running_containers{container_state="exited"}`.
    pub exited_containers: AtomicI64,
    started: Mutex<std::collections::HashSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            pod_start_duration: Histogram::new(POD_START_BUCKETS),
            pleg_relist_duration: Histogram::new(DEF_BUCKETS),
            pod_worker_duration: HistogramVec::new("operation_type", DEF_BUCKETS),
            runtime_operations: CounterVec::new("operation_type"),
            runtime_operation_errors: CounterVec::new("operation_type"),
            runtime_operation_duration: HistogramVec::new("operation_type", RUNTIME_OP_BUCKETS),
            running_pods: AtomicI64::new(0),
            running_containers: AtomicI64::new(0),
            exited_containers: AtomicI64::new(0),
            started: Mutex::new(Default::default()),
        }
    }
}

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

impl Metrics {
    /// Sets the running pods (ready sandboxes) and running/exited containers of a relist.
    pub fn set_running(&self, pods: usize, running: usize, exited: usize) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.running_pods.store(n(pods), Ordering::Relaxed);
        self.running_containers.store(n(running), Ordering::Relaxed);
        self.exited_containers.store(n(exited), Ordering::Relaxed);
    }

    /// After a pod sync: the first time the pod's status is `Running`, observes the time
    /// since the kubelet first saw it (the `kubernetes.io/config.seen` annotation).
    pub fn pod_synced(&self, pod: &Pod, status: Option<&PodStatus>) {
        if status.and_then(|s| s.phase.as_deref()) != Some("Running") {
            return;
        }
        let uid = crate::pod::uid(pod);
        {
            let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
            if !started.insert(uid.to_string()) {
                return;
            }
            if started.len() > 100_000 {
                started.clear();
            }
        }
        let seen = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::pod::CONFIG_SEEN_ANNOTATION))
            .and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok());
        if let Some(seen) = seen {
            let nanos = i128::from(crate::clock::now_unix_nanos()) - seen.as_nanosecond();
            if let Ok(n) = u64::try_from(nanos) {
                self.pod_start_duration.observe(Duration::from_nanos(n));
            }
        }
    }

    /// The metrics in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} [ALPHA] {help}\n# TYPE {name} {kind}");
        };
        let name = "kubelet_pod_start_duration_seconds";
        head(&mut out, name, "histogram", "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run");
        self.pod_start_duration.render(&mut out, name, "");
        let name = "kubelet_pleg_relist_duration_seconds";
        head(
            &mut out,
            name,
            "histogram",
            "Duration in seconds for relisting pods in PLEG.",
        );
        self.pleg_relist_duration.render(&mut out, name, "");
        let name = "kubelet_pod_worker_duration_seconds";
        head(&mut out, name, "histogram", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync");
        self.pod_worker_duration.render(&mut out, name);
        let name = "kubelet_runtime_operations_total";
        head(
            &mut out,
            name,
            "counter",
            "Cumulative number of runtime operations by operation type.",
        );
        self.runtime_operations.render(&mut out, name);
        let name = "kubelet_runtime_operations_errors_total";
        head(
            &mut out,
            name,
            "counter",
            "Cumulative number of runtime operation errors by operation type.",
        );
        self.runtime_operation_errors.render(&mut out, name);
        let name = "kubelet_runtime_operations_duration_seconds";
        head(
            &mut out,
            name,
            "histogram",
            "Duration in seconds of runtime operations. Broken down by operation type.",
        );
        self.runtime_operation_duration.render(&mut out, name);
        let name = "kubelet_running_pods";
        head(
            &mut out,
            name,
            "gauge",
            "Number of pods that have a running pod sandbox",
        );
        let _ = writeln!(out, "{name} {}", self.running_pods.load(Ordering::Relaxed));
        let name = "kubelet_running_containers";
        head(
            &mut out,
            name,
            "gauge",
            "Number of containers currently running",
        );
        let _ = writeln!(
            out,
            "{name}{{container_state=\"exited\"}} {}\n{name}{{container_state=\"running\"}} {}",
            self.exited_containers.load(Ordering::Relaxed),
            self.running_containers.load(Ordering::Relaxed)
        );
        out
    }
}

/// A [`ContainerRuntime`] that records `kubelet_runtime_operations_*` for every call and
/// forwards it to the wrapped runtime unchanged — every method, the defaulted ones included,
/// so the wrapped backend's own answers (and its `Unimplemented`s) come through. The
/// `operation_type` labels are Go's (`instrumented_services.go`); `get_container_events`
/// times establishing the stream, not its lifetime.
pub struct InstrumentedRuntime {
    inner: Arc<dyn ContainerRuntime>,
    metrics: &'static Metrics,
}

impl InstrumentedRuntime {
    /// Wraps `inner`, recording into [`global`].
    pub fn new(inner: Arc<dyn ContainerRuntime>) -> InstrumentedRuntime {
        InstrumentedRuntime {
            inner,
            metrics: global(),
        }
    }

    async fn record<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = RuntimeResult<T>>,
    ) -> RuntimeResult<T> {
        let started = crate::clock::monotonic_now();
        let result = call.await;
        let m = self.metrics;
        m.runtime_operations.inc(operation);
        m.runtime_operation_duration
            .with(operation)
            .observe(crate::clock::elapsed(started));
        if result.is_err() {
            m.runtime_operation_errors.inc(operation);
        }
        result
    }
}

#[async_trait]
impl ContainerRuntime for InstrumentedRuntime {
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        self.record("version", self.inner.version()).await
    }
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        self.record("status", self.inner.status()).await
    }
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        self.record("list_podsandbox", self.inner.list_pod_sandboxes(filter))
            .await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        self.record(
            "podsandbox_status",
            self.inner.pod_sandbox_status(sandbox_id),
        )
        .await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        self.record("run_podsandbox", self.inner.run_pod_sandbox(config))
            .await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.record("stop_podsandbox", self.inner.stop_pod_sandbox(sandbox_id))
            .await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.record(
            "remove_podsandbox",
            self.inner.remove_pod_sandbox(sandbox_id),
        )
        .await
    }
    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        self.record("list_containers", self.inner.list_containers(filter))
            .await
    }
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.record(
            "container_status",
            self.inner.container_status(container_id),
        )
        .await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        self.record(
            "create_container",
            self.inner.create_container(sandbox_id, config, sandbox),
        )
        .await
    }
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.record("start_container", self.inner.start_container(container_id))
            .await
    }
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.record(
            "stop_container",
            self.inner.stop_container(container_id, timeout),
        )
        .await
    }
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.record(
            "remove_container",
            self.inner.remove_container(container_id),
        )
        .await
    }
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        self.record("image_status", self.inner.image_status(image))
            .await
    }
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        self.record("pull_image", self.inner.pull_image(request))
            .await
    }
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        self.record("list_images", self.inner.list_images()).await
    }
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.record("remove_image", self.inner.remove_image(image))
            .await
    }
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        self.record(
            "exec_sync",
            self.inner.exec_sync(container_id, cmd, timeout),
        )
        .await
    }
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.record("exec", self.inner.exec_url(request)).await
    }
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.record("attach", self.inner.attach_url(request)).await
    }
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.record(
            "port_forward",
            self.inner.port_forward_url(sandbox_id, ports),
        )
        .await
    }
    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        self.record("image_fs_info", self.inner.image_fs_info())
            .await
    }
    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        self.record("container_stats", self.inner.container_stats(container_id))
            .await
    }
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        self.record(
            "list_container_stats",
            self.inner.list_container_stats(filter),
        )
        .await
    }
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        self.record(
            "reopen_container_log",
            self.inner.reopen_container_log(container_id),
        )
        .await
    }
    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        self.record("get_container_events", self.inner.container_events())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RuntimeError;

    #[test]
    fn histogram_buckets_and_render() {
        let h = Histogram::new(DEF_BUCKETS);
        h.observe(Duration::from_millis(20));
        h.observe(Duration::from_secs(3));
        let mut out = String::new();
        h.render(&mut out, "x", "");
        assert!(out.contains("x_bucket{le=\"0.01\"} 0\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.025\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"5\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 2\n"), "{out}");
        assert!(out.contains("x_sum 3.02\n"), "{out}");
        assert!(out.contains("x_count 2\n"), "{out}");
    }

    #[test]
    fn pod_start_observed_once_when_running() {
        let m = Metrics::default();
        let mut p = crate::testing::pod("p", "uid-start", vec![]);
        let seen = k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(
            crate::clock::now_unix_nanos(),
        ))
        .unwrap()
        .to_string();
        p.metadata.annotations = Some(
            [(crate::pod::CONFIG_SEEN_ANNOTATION.to_string(), seen)]
                .into_iter()
                .collect(),
        );
        let pending = PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        };
        let running = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        m.pod_synced(&p, Some(&pending));
        assert_eq!(m.pod_start_duration.count(), 0);
        m.pod_synced(&p, Some(&running));
        m.pod_synced(&p, Some(&running));
        assert_eq!(m.pod_start_duration.count(), 1);
    }

    /// Only the required core plus `version` and `status`; the rest are the trait's defaults.
    struct Failing;

    #[async_trait]
    impl crate::runtime::ContainerRuntime for Failing {
        async fn version(&self) -> RuntimeResult<RuntimeVersion> {
            Ok(RuntimeVersion::default())
        }
        async fn status(&self) -> RuntimeResult<RuntimeStatus> {
            Err(RuntimeError::Unavailable("down".into()))
        }
        async fn list_pod_sandboxes(&self, _: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
            Ok(vec![])
        }
        async fn run_pod_sandbox(&self, _: &SandboxConfig) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn list_containers(&self, _: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
            Ok(vec![])
        }
        async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
            Err(RuntimeError::NotFound {
                kind: "container",
                id: id.into(),
            })
        }
        async fn create_container(
            &self,
            _: &str,
            _: &ContainerConfig,
            _: &SandboxConfig,
        ) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_container(&self, _: &str, _: Duration) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_container(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn instrumented_runtime_counts_calls_and_errors() {
        let m: &'static Metrics = Box::leak(Box::default());
        let rt = InstrumentedRuntime {
            inner: Arc::new(Failing),
            metrics: m,
        };
        rt.version().await.unwrap();
        rt.version().await.unwrap();
        assert!(rt.status().await.is_err());
        assert_eq!(m.runtime_operations.get("version"), 2);
        assert_eq!(m.runtime_operation_errors.get("version"), 0);
        assert_eq!(m.runtime_operations.get("status"), 1);
        assert_eq!(m.runtime_operation_errors.get("status"), 1);
        let text = m.render();
        assert!(
            text.contains("kubelet_runtime_operations_total{operation_type=\"version\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_runtime_operations_errors_total{operation_type=\"status\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "kubelet_runtime_operations_duration_seconds_count{operation_type=\"version\"} 2"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn instrumented_runtime_forwards_the_capabilities_with_go_labels() {
        let m: &'static Metrics = Box::leak(Box::default());
        let sim = Arc::new(crate::testing::SimRuntime::new());
        sim.add_image("busybox");
        let rt = InstrumentedRuntime {
            inner: sim.clone(),
            metrics: m,
        };
        // The simulator's own answers come through, not the trait's defaults.
        let fs = rt.image_fs_info().await.unwrap();
        assert_eq!(fs.image_filesystems.len(), 1);
        assert!(rt
            .list_container_stats(&ListFilter::all())
            .await
            .unwrap()
            .is_empty());
        assert!(rt.container_stats("nope").await.is_err());
        assert!(rt.reopen_container_log("nope").await.is_err());
        assert!(rt.container_events().await.is_ok());
        assert_eq!(sim.calls("ImageFsInfo"), 1);
        assert_eq!(sim.calls("GetContainerEvents"), 1);
        for (op, errors) in [
            ("image_fs_info", 0),
            ("list_container_stats", 0),
            ("container_stats", 1),
            ("reopen_container_log", 1),
            ("get_container_events", 0),
        ] {
            assert_eq!(m.runtime_operations.get(op), 1, "{op}");
            assert_eq!(m.runtime_operation_errors.get(op), errors, "{op}");
        }
        // A backend without a capability: its Unimplemented is counted as an error.
        let bare = InstrumentedRuntime {
            inner: Arc::new(Failing),
            metrics: m,
        };
        assert!(bare
            .exec_sync("c", &[], Duration::ZERO)
            .await
            .unwrap_err()
            .is_unimplemented());
        assert_eq!(m.runtime_operation_errors.get("exec_sync"), 1);
    }
}
