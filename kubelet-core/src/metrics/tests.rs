//! Unit tests of the metrics registry, and the snapshot of its families against Go's names.

use std::time::Duration;

use k8s_openapi::api::core::v1::PodStatus;

use super::*;

#[test]
fn pod_start_observed_once_when_running() {
    let m = Metrics::default();
    let mut p = crate::testing::pod("p", "uid-start", vec![]);
    let seen =
        k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(crate::clock::now_unix_nanos()))
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
    m.pod_synced(&p, Some(&pending), Duration::ZERO);
    assert_eq!(m.pod_start_duration.count(), 0);
    m.pod_synced(&p, Some(&running), Duration::ZERO);
    m.pod_synced(&p, Some(&running), Duration::ZERO);
    assert_eq!(m.pod_start_duration.count(), 1);
}

/// Every family `/metrics` renders with its type and label names, as the Go kubelet names
/// them (pkg/kubelet/metrics, component-base's rest client metrics, client_golang's process
/// collector). A renamed family or label fails here.
const GO_FAMILIES: &[(&str, &str, &[&str])] = &[
    ("kubelet_node_name", "gauge", &["node"]),
    ("kubelet_pod_start_duration_seconds", "histogram", &[]),
    (
        "kubelet_pod_start_sli_duration_seconds",
        "histogram",
        &["first_with_network"],
    ),
    (
        "kubelet_pod_start_total_duration_seconds",
        "histogram",
        &["first_with_network"],
    ),
    (
        "kubelet_cgroup_manager_duration_seconds",
        "histogram",
        &["operation_type"],
    ),
    (
        "kubelet_pod_worker_start_duration_seconds",
        "histogram",
        &[],
    ),
    ("kubelet_pod_status_sync_duration_seconds", "histogram", &[]),
    ("kubelet_pleg_relist_duration_seconds", "histogram", &[]),
    ("kubelet_pleg_discard_events", "counter", &[]),
    ("kubelet_pleg_relist_interval_seconds", "histogram", &[]),
    ("kubelet_pleg_last_seen_seconds", "gauge", &[]),
    (
        "kubelet_pod_worker_duration_seconds",
        "histogram",
        &["operation_type"],
    ),
    (
        "kubelet_runtime_operations_total",
        "counter",
        &["operation_type"],
    ),
    (
        "kubelet_runtime_operations_errors_total",
        "counter",
        &["operation_type"],
    ),
    (
        "kubelet_runtime_operations_duration_seconds",
        "histogram",
        &["operation_type"],
    ),
    (
        "kubelet_run_podsandbox_duration_seconds",
        "histogram",
        &["runtime_handler"],
    ),
    (
        "kubelet_run_podsandbox_errors_total",
        "counter",
        &["runtime_handler"],
    ),
    ("kubelet_running_pods", "gauge", &[]),
    ("kubelet_running_containers", "gauge", &["container_state"]),
    ("kubelet_desired_pods", "gauge", &["static"]),
    (
        "kubelet_device_plugin_registration_total",
        "counter",
        &["resource_name"],
    ),
    (
        "kubelet_device_plugin_alloc_duration_seconds",
        "histogram",
        &["resource_name"],
    ),
    (
        "kubelet_pod_resources_endpoint_requests_total",
        "counter",
        &["server_api_version"],
    ),
    ("kubelet_active_pods", "gauge", &["static"]),
    ("kubelet_mirror_pods", "gauge", &[]),
    (
        "kubelet_working_pods",
        "gauge",
        &["lifecycle", "config", "static"],
    ),
    ("kubelet_orphaned_runtime_pods_total", "counter", &[]),
    ("kubelet_restarted_pods_total", "counter", &["static"]),
    ("kubelet_started_pods_total", "counter", &[]),
    ("kubelet_started_pods_errors_total", "counter", &[]),
    (
        "kubelet_started_containers_total",
        "counter",
        &["container_type"],
    ),
    (
        "kubelet_started_containers_errors_total",
        "counter",
        &["container_type", "code"],
    ),
    ("kubelet_managed_ephemeral_containers", "gauge", &[]),
    (
        "kubelet_node_startup_pre_kubelet_duration_seconds",
        "gauge",
        &[],
    ),
    (
        "kubelet_node_startup_pre_registration_duration_seconds",
        "gauge",
        &[],
    ),
    (
        "kubelet_node_startup_registration_duration_seconds",
        "gauge",
        &[],
    ),
    (
        "kubelet_node_startup_post_registration_duration_seconds",
        "gauge",
        &[],
    ),
    ("kubelet_node_startup_duration_seconds", "gauge", &[]),
    (
        "rest_client_requests_total",
        "counter",
        &["code", "host", "method"],
    ),
    (
        "rest_client_request_duration_seconds",
        "histogram",
        &["host", "verb"],
    ),
    (
        "rest_client_rate_limiter_duration_seconds",
        "histogram",
        &["host", "verb"],
    ),
    ("kubelet_evictions", "counter", &["eviction_signal"]),
    (
        "kubelet_eviction_stats_age_seconds",
        "histogram",
        &["eviction_signal"],
    ),
    (
        "kubelet_image_garbage_collected_total",
        "counter",
        &["reason"],
    ),
    ("process_cpu_seconds_total", "counter", &[]),
    ("process_max_fds", "gauge", &[]),
    ("process_open_fds", "gauge", &[]),
    ("process_resident_memory_bytes", "gauge", &[]),
    ("process_start_time_seconds", "gauge", &[]),
    ("process_virtual_memory_bytes", "gauge", &[]),
];

/// (family, type, label names of its samples) from a text exposition.
pub(crate) fn families_of(text: &str) -> Vec<(String, String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                continue;
            };
            out.push((name.to_string(), kind.to_string(), Vec::new()));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some(last) = out.last_mut() else { continue };
        if let Some((_, labels)) = line.split_once('{') {
            let labels = labels.split('}').next().unwrap_or("");
            for pair in labels.split("\",") {
                if let Some((name, _)) = pair.split_once('=') {
                    let name = name.trim_start_matches(',').to_string();
                    if name != "le" && !last.2.contains(&name) {
                        last.2.push(name);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn families_and_labels_match_go() {
    let m = Metrics::default();
    m.set_node_name("node-1");
    m.pod_start_sli_duration
        .with("true")
        .observe(Duration::from_secs(1));
    m.pod_start_total_duration
        .with("true")
        .observe(Duration::from_secs(2));
    m.cgroup_manager_duration
        .with("create")
        .observe(Duration::from_millis(3));
    m.pod_worker_duration
        .with("sync")
        .observe(Duration::from_millis(3));
    m.pleg_last_seen.set(&[], 1.7e9);
    m.runtime_operations.inc("version");
    m.runtime_operation_errors.inc("version");
    m.runtime_operation_duration
        .with("version")
        .observe(Duration::from_millis(1));
    m.run_podsandbox_duration
        .with("")
        .observe(Duration::from_millis(1));
    m.run_podsandbox_errors.inc("runc");
    m.desired_pods.set(&["false"], 1.0);
    m.active_pods.set(&["false"], 1.0);
    m.mirror_pods.set(&[], 0.0);
    m.working_pods.set(&["sync", "desired", "false"], 1.0);
    m.restarted_pods.inc("true");
    m.started_containers.inc("container");
    m.started_containers_errors
        .inc_labels(&["container", "Unknown"]);
    m.managed_ephemeral_containers.set(&[], 0.0);
    m.rest_client_requests
        .inc_labels(&["200", "127.0.0.1:6443", "GET"]);
    m.rest_client_request_duration
        .with_labels(&["127.0.0.1:6443", "GET"])
        .observe(Duration::from_millis(5));
    m.rest_client_rate_limiter_duration
        .with_labels(&["127.0.0.1:6443", "GET"])
        .observe(Duration::ZERO);
    m.evictions.inc("memory.available");
    m.eviction_stats_age
        .with("memory.available")
        .observe(Duration::from_secs(1));
    m.image_garbage_collected.inc("space");
    m.device_plugin_registrations.inc("example.com/resource");
    m.device_plugin_alloc_duration
        .with("example.com/resource")
        .observe(Duration::from_millis(2));
    m.pod_resources_endpoint_requests.inc("v1");
    let got = families_of(&m.render());
    let want: Vec<(String, String, Vec<String>)> = GO_FAMILIES
        .iter()
        .map(|(n, k, l)| {
            (
                n.to_string(),
                k.to_string(),
                l.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want_sorted = want;
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted);
    // Go's buckets: pod start-up up to an hour, status sync from 10ms.
    let text = m.render();
    assert!(text.contains("kubelet_pod_start_sli_duration_seconds_bucket{first_with_network=\"true\",le=\"3600\"} 1"), "{text}");
    assert!(text.contains("rest_client_request_duration_seconds_bucket{host=\"127.0.0.1:6443\",verb=\"GET\",le=\"0.005\"} 1"), "{text}");
    assert!(
        text.contains("kubelet_pod_status_sync_duration_seconds_bucket{le=\"0.01\"} 0"),
        "{text}"
    );
}
