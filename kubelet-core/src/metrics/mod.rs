//! The kubelet's Prometheus metrics, with the Go kubelet's names, labels and buckets
//! (`pkg/kubelet/metrics`, component-base's `rest_client_*` and client_golang's
//! `process_*`), and an [`InstrumentedRuntime`] that counts and times every runtime call.
//!
//! One process-wide registry ([`global`]). The engine observes into it — pod workers (sync
//! and start durations, started pods and containers), the PLEG (relist duration, interval,
//! last seen, discarded events, running pods and containers), the status manager (status
//! sync duration), housekeeping (desired/active/mirror/working pods, orphans), the container
//! manager calls (cgroup manager durations); kubelet-sources observes the API client
//! (`rest_client_*`) and node start-up; [`Metrics::render`] is `/metrics`.
//!
//! | family | labels |
//! |---|---|
//! | `kubelet_node_name` | `node` |
//! | `kubelet_pod_start_duration_seconds`, `kubelet_pod_worker_start_duration_seconds`, `kubelet_pod_status_sync_duration_seconds`, `kubelet_pleg_relist_duration_seconds`, `kubelet_pleg_relist_interval_seconds` | — |
//! | `kubelet_pod_start_sli_duration_seconds`, `kubelet_pod_start_total_duration_seconds` | `first_with_network` |
//! | `kubelet_pod_worker_duration_seconds`, `kubelet_cgroup_manager_duration_seconds`, `kubelet_runtime_operations_*` | `operation_type` |
//! | `kubelet_run_podsandbox_duration_seconds`, `kubelet_run_podsandbox_errors_total` | `runtime_handler` |
//! | `kubelet_started_pods_total`, `kubelet_started_pods_errors_total`, `kubelet_orphaned_runtime_pods_total`, `kubelet_pleg_discard_events`, `kubelet_pleg_last_seen_seconds`, `kubelet_mirror_pods`, `kubelet_managed_ephemeral_containers`, `kubelet_running_pods`, `kubelet_node_startup_*` | — |
//! | `kubelet_started_containers_total` / `_errors_total` | `container_type` / `container_type`, `code` |
//! | `kubelet_restarted_pods_total`, `kubelet_desired_pods`, `kubelet_active_pods` | `static` |
//! | `kubelet_working_pods` | `lifecycle`, `config`, `static` |
//! | `kubelet_running_containers` | `container_state` |
//! | `kubelet_device_plugin_registration_total`, `kubelet_device_plugin_alloc_duration_seconds` | `resource_name` |
//! | `kubelet_pod_resources_endpoint_requests_total` | `server_api_version` |
//! | `rest_client_requests_total` | `code`, `host`, `method` |
//! | `rest_client_request_duration_seconds`, `rest_client_rate_limiter_duration_seconds` | `host`, `verb` |
//! | `kubelet_volume_stats_*` (capacity, available and used bytes; inodes, free, used) | `namespace`, `persistentvolumeclaim` |
//! | `process_*` | — |

mod certificates;
pub mod families;
pub mod process;
mod runtime;
mod startup;
mod volumes;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};

pub use certificates::CertificateMetrics;
pub use families::{CounterVec, GaugeVec, Histogram, HistogramVec, DEF_BUCKETS};
pub use runtime::InstrumentedRuntime;
pub use startup::NodeStartup;
pub use volumes::VolumeStatsMetrics;

use families::head;

/// Go's pod start-up buckets (`podStartupDurationBuckets`).
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
/// Go's `kubelet_pod_status_sync_duration_seconds` buckets.
const STATUS_SYNC_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0];
/// component-base's `rest_client_*_duration_seconds` buckets.
const REST_CLIENT_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

/// The kubelet's metrics. See the module docs.
#[derive(Debug)]
pub struct Metrics {
    /// `kubelet_volume_stats_*`.
    pub volume_stats: VolumeStatsMetrics,
    /// `kubelet_certificate_manager_client_ttl_seconds` and
    /// `kubelet_certificate_manager_client_expiration_renew_errors`.
    pub client_certificate: CertificateMetrics,
    /// `kubelet_certificate_manager_server_ttl_seconds` and
    /// `kubelet_server_expiration_renew_errors`.
    pub server_certificate: CertificateMetrics,
    /// `kubelet_node_name{node}`.
    pub node_name: GaugeVec,
    /// `kubelet_evictions{eviction_signal}`: pods evicted, by the signal (or local-storage
    /// limit) that made the eviction manager evict them.
    pub evictions: CounterVec,
    /// `kubelet_eviction_stats_age_seconds{eviction_signal}`: how old the stats an eviction
    /// acted on were.
    pub eviction_stats_age: HistogramVec,
    /// `kubelet_image_garbage_collected_total{reason}`: images removed by image garbage
    /// collection, for `space` or `age`.
    pub image_garbage_collected: CounterVec,
    /// `kubelet_pod_start_duration_seconds`: first seen → running.
    pub pod_start_duration: Histogram,
    /// `kubelet_pod_start_sli_duration_seconds{first_with_network}`: creation → running,
    /// without image pulls.
    pub pod_start_sli_duration: HistogramVec,
    /// `kubelet_pod_start_total_duration_seconds{first_with_network}`: creation → running.
    pub pod_start_total_duration: HistogramVec,
    /// `kubelet_pleg_relist_duration_seconds`.
    pub pleg_relist_duration: Histogram,
    /// `kubelet_pleg_relist_interval_seconds`.
    pub pleg_relist_interval: Histogram,
    /// `kubelet_pleg_last_seen_seconds`.
    pub pleg_last_seen: GaugeVec,
    /// `kubelet_pleg_discard_events`.
    pub pleg_discard_events: CounterVec,
    /// `kubelet_pod_worker_duration_seconds{operation_type}`.
    pub pod_worker_duration: HistogramVec,
    /// `kubelet_pod_worker_start_duration_seconds`.
    pub pod_worker_start_duration: Histogram,
    /// `kubelet_pod_status_sync_duration_seconds`.
    pub pod_status_sync_duration: Histogram,
    /// `kubelet_cgroup_manager_duration_seconds{operation_type}`.
    pub cgroup_manager_duration: HistogramVec,
    /// `kubelet_runtime_operations_total{operation_type}`.
    pub runtime_operations: CounterVec,
    /// `kubelet_runtime_operations_errors_total{operation_type}`.
    pub runtime_operation_errors: CounterVec,
    /// `kubelet_runtime_operations_duration_seconds{operation_type}`.
    pub runtime_operation_duration: HistogramVec,
    /// `kubelet_run_podsandbox_duration_seconds{runtime_handler}`.
    pub run_podsandbox_duration: HistogramVec,
    /// `kubelet_run_podsandbox_errors_total{runtime_handler}`.
    pub run_podsandbox_errors: CounterVec,
    /// `kubelet_started_pods_total`.
    pub started_pods: CounterVec,
    /// `kubelet_started_pods_errors_total`.
    pub started_pods_errors: CounterVec,
    /// `kubelet_started_containers_total{container_type}`.
    pub started_containers: CounterVec,
    /// `kubelet_started_containers_errors_total{container_type,code}`.
    pub started_containers_errors: CounterVec,
    /// `kubelet_restarted_pods_total{static}`.
    pub restarted_pods: CounterVec,
    /// `kubelet_orphaned_runtime_pods_total`.
    pub orphaned_runtime_pods: CounterVec,
    /// `kubelet_desired_pods{static}`.
    pub desired_pods: GaugeVec,
    /// `kubelet_active_pods{static}`.
    pub active_pods: GaugeVec,
    /// `kubelet_mirror_pods`.
    pub mirror_pods: GaugeVec,
    /// `kubelet_working_pods{lifecycle,config,static}`.
    pub working_pods: GaugeVec,
    /// `kubelet_managed_ephemeral_containers`.
    pub managed_ephemeral_containers: GaugeVec,
    /// `kubelet_device_plugin_registration_total{resource_name}`: every `Register` call
    /// received, accepted or not (as Go counts).
    pub device_plugin_registrations: CounterVec,
    /// `kubelet_device_plugin_alloc_duration_seconds{resource_name}`: each `Allocate` call.
    pub device_plugin_alloc_duration: HistogramVec,
    /// `kubelet_pod_resources_endpoint_requests_total{server_api_version}`: every call of
    /// the pod resources API, whatever its method.
    pub pod_resources_endpoint_requests: CounterVec,
    /// `kubelet_running_pods`.
    pub running_pods: AtomicI64,
    /// `kubelet_running_containers{container_state="running"}`.
    pub running_containers: AtomicI64,
    /// `kubelet_running_containers{container_state="exited"}`.
    pub exited_containers: AtomicI64,
    /// `kubelet_node_startup_*_duration_seconds`.
    pub node_startup: NodeStartup,
    /// `rest_client_requests_total{code,host,method}`.
    pub rest_client_requests: CounterVec,
    /// `rest_client_request_duration_seconds{host,verb}`.
    pub rest_client_request_duration: HistogramVec,
    /// `rest_client_rate_limiter_duration_seconds{host,verb}`.
    pub rest_client_rate_limiter_duration: HistogramVec,
    started: Mutex<HashSet<String>>,
    first_network_pod_seen: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            volume_stats: VolumeStatsMetrics::default(),
            client_certificate: CertificateMetrics::default(),
            server_certificate: CertificateMetrics::default(),
            node_name: GaugeVec::new(&["node"]),
            evictions: CounterVec::new(&["eviction_signal"]),
            eviction_stats_age: HistogramVec::new(&["eviction_signal"], DEF_BUCKETS),
            image_garbage_collected: CounterVec::new(&["reason"]),
            pod_start_duration: Histogram::new(POD_START_BUCKETS),
            pod_start_sli_duration: HistogramVec::new(&["first_with_network"], POD_START_BUCKETS),
            pod_start_total_duration: HistogramVec::new(&["first_with_network"], POD_START_BUCKETS),
            pleg_relist_duration: Histogram::new(DEF_BUCKETS),
            pleg_relist_interval: Histogram::new(DEF_BUCKETS),
            pleg_last_seen: GaugeVec::new(&[]),
            pleg_discard_events: CounterVec::new(&[]),
            pod_worker_duration: HistogramVec::new(&["operation_type"], DEF_BUCKETS),
            pod_worker_start_duration: Histogram::new(DEF_BUCKETS),
            pod_status_sync_duration: Histogram::new(STATUS_SYNC_BUCKETS),
            cgroup_manager_duration: HistogramVec::new(&["operation_type"], DEF_BUCKETS),
            runtime_operations: CounterVec::new(&["operation_type"]),
            runtime_operation_errors: CounterVec::new(&["operation_type"]),
            runtime_operation_duration: HistogramVec::new(&["operation_type"], RUNTIME_OP_BUCKETS),
            run_podsandbox_duration: HistogramVec::new(&["runtime_handler"], DEF_BUCKETS),
            run_podsandbox_errors: CounterVec::new(&["runtime_handler"]),
            started_pods: CounterVec::new(&[]),
            started_pods_errors: CounterVec::new(&[]),
            started_containers: CounterVec::new(&["container_type"]),
            started_containers_errors: CounterVec::new(&["container_type", "code"]),
            restarted_pods: CounterVec::new(&["static"]),
            orphaned_runtime_pods: CounterVec::new(&[]),
            desired_pods: GaugeVec::new(&["static"]),
            active_pods: GaugeVec::new(&["static"]),
            mirror_pods: GaugeVec::new(&[]),
            working_pods: GaugeVec::new(&["lifecycle", "config", "static"]),
            managed_ephemeral_containers: GaugeVec::new(&[]),
            device_plugin_registrations: CounterVec::new(&["resource_name"]),
            device_plugin_alloc_duration: HistogramVec::new(&["resource_name"], DEF_BUCKETS),
            pod_resources_endpoint_requests: CounterVec::new(&["server_api_version"]),
            running_pods: AtomicI64::new(0),
            running_containers: AtomicI64::new(0),
            exited_containers: AtomicI64::new(0),
            node_startup: NodeStartup::default(),
            rest_client_requests: CounterVec::new(&["code", "host", "method"]),
            rest_client_request_duration: HistogramVec::new(&["host", "verb"], REST_CLIENT_BUCKETS),
            rest_client_rate_limiter_duration: HistogramVec::new(
                &["host", "verb"],
                REST_CLIENT_BUCKETS,
            ),
            started: Mutex::new(Default::default()),
            first_network_pod_seen: AtomicBool::new(false),
        }
    }
}

/// The process-wide metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::default)
}

/// Go's `container_type` label value of a container kind.
pub fn container_type(kind: &crate::runtime::ContainerKind) -> &'static str {
    match kind {
        crate::runtime::ContainerKind::Init => "init_container",
        crate::runtime::ContainerKind::Regular => "container",
        crate::runtime::ContainerKind::Ephemeral { .. } => "ephemeral_container",
    }
}

/// The gRPC code name of a runtime error (Go labels `started_containers_errors_total` with it).
pub fn error_code(e: &crate::runtime::RuntimeError) -> &'static str {
    use crate::runtime::RuntimeError::*;
    match e {
        NotFound { .. } => "NotFound",
        Unavailable(_) => "Unavailable",
        InvalidInput { .. } => "InvalidArgument",
        DeadlineExceeded { .. } => "DeadlineExceeded",
        Unimplemented { .. } => "Unimplemented",
        TooLarge { .. } => "ResourceExhausted",
        ImagePull { .. } | OperationFailed { .. } => "Unknown",
    }
}

fn seconds_since(ts: &k8s_openapi::jiff::Timestamp) -> Option<Duration> {
    let nanos = i128::from(crate::clock::now_unix_nanos()) - ts.as_nanosecond();
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

impl Metrics {
    /// Sets the running pods (ready sandboxes) and running/exited containers of a relist.
    pub fn set_running(&self, pods: usize, running: usize, exited: usize) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.running_pods.store(n(pods), Ordering::Relaxed);
        self.running_containers.store(n(running), Ordering::Relaxed);
        self.exited_containers.store(n(exited), Ordering::Relaxed);
    }

    /// Records the node's name (`kubelet_node_name`).
    pub fn set_node_name(&self, name: &str) {
        self.node_name.replace(vec![(vec![name.to_string()], 1.0)]);
    }

    /// After a pod sync: the first time the pod's status is `Running`, observes the time
    /// since the kubelet first saw it (the `kubernetes.io/config.seen` annotation) and since
    /// its creation (total; and without `image_pull` for the SLI), labelled
    /// `first_with_network` for the first pod-network pod this kubelet started.
    pub fn pod_synced(&self, pod: &Pod, status: Option<&PodStatus>, image_pull: Duration) {
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
        if let Some(d) = seen.as_ref().and_then(seconds_since) {
            self.pod_start_duration.observe(d);
        }
        let first = !crate::pod::host_network(pod)
            && !self.first_network_pod_seen.swap(true, Ordering::Relaxed);
        let label = if first { "true" } else { "false" };
        if let Some(total) = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| seconds_since(&t.0))
        {
            self.pod_start_total_duration.with(label).observe(total);
            self.pod_start_sli_duration
                .with(label)
                .observe(total.saturating_sub(image_pull));
        }
    }

    /// The metrics in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let o = &mut out;
        head(
            o,
            "kubelet_node_name",
            "gauge",
            "The node's name. The count is always 1.",
        );
        self.node_name.render(o, "kubelet_node_name");
        let h = |o: &mut String, name: &str, help: &str, hist: &Histogram| {
            head(o, name, "histogram", help);
            hist.render(o, name, "");
        };
        let hv = |o: &mut String, name: &str, help: &str, hist: &HistogramVec| {
            head(o, name, "histogram", help);
            hist.render(o, name);
        };
        let c = |o: &mut String, name: &str, help: &str, counter: &CounterVec| {
            head(o, name, "counter", help);
            counter.render(o, name);
        };
        let g = |o: &mut String, name: &str, help: &str, gauge: &GaugeVec| {
            head(o, name, "gauge", help);
            gauge.render(o, name);
        };
        h(o, "kubelet_pod_start_duration_seconds", "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run", &self.pod_start_duration);
        hv(o, "kubelet_pod_start_sli_duration_seconds", "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch", &self.pod_start_sli_duration);
        hv(o, "kubelet_pod_start_total_duration_seconds", "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch", &self.pod_start_total_duration);
        hv(
            o,
            "kubelet_cgroup_manager_duration_seconds",
            "Duration in seconds for cgroup manager operations. Broken down by method.",
            &self.cgroup_manager_duration,
        );
        h(
            o,
            "kubelet_pod_worker_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod to starting a worker.",
            &self.pod_worker_start_duration,
        );
        h(o, "kubelet_pod_status_sync_duration_seconds", "Duration in seconds to sync a pod status update. Measures time from detection of a change to pod status until the API is successfully updated for that pod, even if multiple intevening changes to pod status occur.", &self.pod_status_sync_duration);
        h(
            o,
            "kubelet_pleg_relist_duration_seconds",
            "Duration in seconds for relisting pods in PLEG.",
            &self.pleg_relist_duration,
        );
        c(
            o,
            "kubelet_pleg_discard_events",
            "The number of discard events in PLEG.",
            &self.pleg_discard_events,
        );
        h(
            o,
            "kubelet_pleg_relist_interval_seconds",
            "Interval in seconds between relisting in PLEG.",
            &self.pleg_relist_interval,
        );
        g(
            o,
            "kubelet_pleg_last_seen_seconds",
            "Timestamp in seconds when PLEG was last seen active.",
            &self.pleg_last_seen,
        );
        hv(o, "kubelet_pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync", &self.pod_worker_duration);
        c(
            o,
            "kubelet_runtime_operations_total",
            "Cumulative number of runtime operations by operation type.",
            &self.runtime_operations,
        );
        c(
            o,
            "kubelet_runtime_operations_errors_total",
            "Cumulative number of runtime operation errors by operation type.",
            &self.runtime_operation_errors,
        );
        hv(
            o,
            "kubelet_runtime_operations_duration_seconds",
            "Duration in seconds of runtime operations. Broken down by operation type.",
            &self.runtime_operation_duration,
        );
        hv(o, "kubelet_run_podsandbox_duration_seconds", "Duration in seconds of the run_podsandbox operations. Broken down by RuntimeClass.Handler.", &self.run_podsandbox_duration);
        c(
            o,
            "kubelet_run_podsandbox_errors_total",
            "Cumulative number of the run_podsandbox operation errors by RuntimeClass.Handler.",
            &self.run_podsandbox_errors,
        );
        head(
            o,
            "kubelet_running_pods",
            "gauge",
            "Number of pods that have a running pod sandbox",
        );
        let _ = writeln!(
            o,
            "kubelet_running_pods {}",
            self.running_pods.load(Ordering::Relaxed)
        );
        head(
            o,
            "kubelet_running_containers",
            "gauge",
            "Number of containers currently running",
        );
        let _ = writeln!(
            o,
            "kubelet_running_containers{{container_state=\"exited\"}} {}\nkubelet_running_containers{{container_state=\"running\"}} {}",
            self.exited_containers.load(Ordering::Relaxed),
            self.running_containers.load(Ordering::Relaxed)
        );
        g(o, "kubelet_desired_pods", "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.", &self.desired_pods);
        g(o, "kubelet_active_pods", "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.", &self.active_pods);
        g(o, "kubelet_mirror_pods", "The number of mirror pods the kubelet will try to create (one per admitted static pod)", &self.mirror_pods);
        g(o, "kubelet_working_pods", "Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.", &self.working_pods);
        c(o, "kubelet_orphaned_runtime_pods_total", "Number of pods that have been detected in the container runtime without being already known to the pod worker. This typically indicates the kubelet was restarted while a pod was force deleted in the API or in the local configuration, which is unusual.", &self.orphaned_runtime_pods);
        c(o, "kubelet_restarted_pods_total", "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)", &self.restarted_pods);
        c(
            o,
            "kubelet_started_pods_total",
            "Cumulative number of pods started",
            &self.started_pods,
        );
        c(
            o,
            "kubelet_started_pods_errors_total",
            "Cumulative number of errors when starting pods",
            &self.started_pods_errors,
        );
        c(
            o,
            "kubelet_started_containers_total",
            "Cumulative number of containers started",
            &self.started_containers,
        );
        c(
            o,
            "kubelet_started_containers_errors_total",
            "Cumulative number of errors when starting containers",
            &self.started_containers_errors,
        );
        g(
            o,
            "kubelet_managed_ephemeral_containers",
            "Current number of ephemeral containers in pods managed by this kubelet.",
            &self.managed_ephemeral_containers,
        );
        c(
            o,
            "kubelet_device_plugin_registration_total",
            "Cumulative number of device plugin registrations. Broken down by resource name.",
            &self.device_plugin_registrations,
        );
        hv(
            o,
            "kubelet_device_plugin_alloc_duration_seconds",
            "Duration in seconds to serve a device plugin Allocation request. Broken down by resource name.",
            &self.device_plugin_alloc_duration,
        );
        c(
            o,
            "kubelet_pod_resources_endpoint_requests_total",
            "Number of requests to the PodResource endpoint. Broken down by server api version.",
            &self.pod_resources_endpoint_requests,
        );
        self.node_startup.render(o);
        c(
            o,
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            &self.rest_client_requests,
        );
        hv(
            o,
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            &self.rest_client_request_duration,
        );
        hv(
            o,
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            &self.rest_client_rate_limiter_duration,
        );
        c(
            o,
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            &self.evictions,
        );
        hv(o, "kubelet_eviction_stats_age_seconds", "Time between when stats are collected, and when pod is evicted based on those stats by eviction signal", &self.eviction_stats_age);
        c(o, "kubelet_image_garbage_collected_total", "Total number of images garbage collected by the kubelet, whether through disk usage or image age.", &self.image_garbage_collected);
        self.volume_stats.render(o);
        certificates::render(o, &self.client_certificate, &self.server_certificate);
        process::ProcessStats::read().render(o);
        out
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
