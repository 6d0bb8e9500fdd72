//! Validation of the effective configuration (Go's `ValidateKubeletConfiguration`, restricted
//! to what kubelet-rs supports), collecting every problem with the field it concerns.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubelet_core::resources;

use super::types::KubeletConfiguration;

/// One invalid field of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path in the file, e.g. `kubeReserved.memory`.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// Resource names accepted in `kubeReserved`/`systemReserved`.
const RESERVABLE: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
/// Eviction signals the Go kubelet knows.
const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "allocatableMemory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
];

struct Errors(Vec<FieldError>);

impl Errors {
    fn add(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            reason: reason.into(),
        });
    }

    fn positive(&mut self, field: &str, d: Duration) {
        if d.is_zero() {
            self.add(field, "must be greater than 0");
        }
    }

    fn port(&mut self, field: &str, port: i32, zero_ok: bool) {
        if (zero_ok && port == 0) || (1..=65535).contains(&port) {
            return;
        }
        let range = if zero_ok {
            "0 (disabled) or between 1 and 65535"
        } else {
            "between 1 and 65535"
        };
        self.add(field, format!("{port} must be {range}"));
    }

    fn ip(&mut self, field: &str, value: &str) {
        if value.parse::<IpAddr>().is_err() {
            self.add(field, format!("{value:?} is not a valid IP address"));
        }
    }

    fn percent(&mut self, field: &str, v: i32) {
        if !(0..=100).contains(&v) {
            self.add(field, format!("{v} must be between 0 and 100"));
        }
    }

    fn non_negative(&mut self, field: &str, v: i64) {
        if v < 0 {
            self.add(field, format!("must not be negative, got {v}"));
        }
    }
}

/// Checks a `kubeReserved`/`systemReserved` map.
fn reserved(errs: &mut Errors, name: &str, map: &std::collections::BTreeMap<String, String>) {
    for (resource, value) in map {
        let field = format!("{name}.{resource}");
        if !RESERVABLE.contains(&resource.as_str()) {
            errs.add(
                field,
                format!(
                    "unsupported resource (supported: {})",
                    RESERVABLE.join(", ")
                ),
            );
            continue;
        }
        let q = Quantity(value.clone());
        let parsed = if resource == "cpu" {
            resources::milli_value(&q)
        } else {
            resources::value(&q)
        };
        match parsed {
            Ok(v) if v < 0 => errs.add(field, format!("{value:?} must not be negative")),
            Ok(_) => {}
            Err(e) => errs.add(field, e.to_string()),
        }
    }
}

/// Checks an eviction threshold map (signal → quantity or percentage).
pub(crate) fn eviction_thresholds(
    name: &str,
    map: &std::collections::BTreeMap<String, String>,
) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    for (signal, value) in map {
        let field = format!("{name}.{signal}");
        if !EVICTION_SIGNALS.contains(&signal.as_str()) {
            errs.add(field, "unknown eviction signal");
            continue;
        }
        if let Some(p) = value.strip_suffix('%') {
            match p.parse::<f64>() {
                Ok(v) if (0.0..=100.0).contains(&v) => {}
                _ => errs.add(
                    field,
                    format!("{value:?} is not a percentage between 0% and 100%"),
                ),
            }
            continue;
        }
        match resources::value(&Quantity(value.clone())) {
            Ok(v) if v < 0 => errs.add(field, format!("{value:?} must not be negative")),
            Ok(_) => {}
            Err(e) => errs.add(field, e.to_string()),
        }
    }
    errs.0
}

/// `containerLogMaxSize` in bytes (Go's `parseMaxSize`: a quantity; negative turns rotation
/// off).
pub fn log_max_size(text: &str) -> Result<i64, String> {
    resources::value(&Quantity(text.to_string())).map_err(|e| format!("{text:?}: {e}"))
}

/// Go's `KubeletTracing` gate (beta and on by default since 1.27, GA and locked on since).
pub fn kubelet_tracing_enabled(c: &KubeletConfiguration) -> bool {
    crate::feature_gates::FeatureGates::new(&c.feature_gates).enabled("KubeletTracing")
}

/// component-base's `ValidateTracingConfiguration` under `tracing`, and the kubelet's check
/// that the gate allows it.
fn tracing_configuration(errs: &mut Errors, c: &KubeletConfiguration) {
    let Some(t) = &c.tracing else {
        return;
    };
    if !kubelet_tracing_enabled(c) {
        errs.add(
            "tracing",
            "tracing should not be configured if KubeletTracing feature flag is disabled",
        );
    }
    if let Some(rate) = t.sampling_rate_per_million {
        if rate < 0 {
            errs.add(
                "tracing.samplingRatePerMillion",
                format!("{rate}: sampling rate must be positive"),
            );
        }
        if rate > 1_000_000 {
            errs.add(
                "tracing.samplingRatePerMillion",
                format!(
                    "{rate}: sampling rate per million must be less than or equal to one million"
                ),
            );
        }
    }
    if let Err(e) = crate::telemetry::parse_endpoint(t.endpoint.as_deref()) {
        errs.add("tracing.endpoint", e);
    }
}

/// Go's checks of `systemCgroups`: it needs `cgroupRoot` (validation) and cannot be the root
/// cgroup (the container manager's).
fn system_cgroups(errs: &mut Errors, c: &KubeletConfiguration) {
    if c.system_cgroups.is_empty() {
        return;
    }
    if c.cgroup_root.is_empty() {
        errs.add(
            "systemCgroups",
            "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified",
        );
    }
    if c.system_cgroups == "/" {
        errs.add("systemCgroups", "system container cannot be root (\"/\")");
    }
}

/// Validates the configuration, returning every problem found (empty: valid).
pub fn validate(c: &KubeletConfiguration) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    errs.positive("syncFrequency", c.sync_frequency.0);
    errs.positive("fileCheckFrequency", c.file_check_frequency.0);
    errs.positive("httpCheckFrequency", c.http_check_frequency.0);
    errs.positive("runtimeRequestTimeout", c.runtime_request_timeout.0);
    errs.positive(
        "nodeStatusUpdateFrequency",
        c.node_status_update_frequency.0,
    );
    errs.positive(
        "nodeStatusReportFrequency",
        c.node_status_report_frequency.0,
    );
    if let Err((field, message)) = super::node_shutdown_config(c).validate() {
        errs.add(field, message);
    }
    let period = c.cpu_cfs_quota_period.0;
    if period < Duration::from_millis(1) || period > Duration::from_secs(1) {
        errs.add(
            "cpuCFSQuotaPeriod",
            format!("{} must be between 1ms and 1s", c.cpu_cfs_quota_period),
        );
    }
    system_cgroups(&mut errs, c);
    // Go's validation (1.29+): absolute and normalized.
    let logs = Path::new(&c.pod_logs_dir);
    if !logs.is_absolute() {
        errs.add(
            "podLogsDir",
            format!("{:?} must be an absolute path", c.pod_logs_dir),
        );
    } else if logs.components().any(|p| {
        matches!(
            p,
            std::path::Component::CurDir | std::path::Component::ParentDir
        )
    }) || (c.pod_logs_dir.len() > 1 && c.pod_logs_dir.ends_with('/'))
        || c.pod_logs_dir.contains("//")
    {
        errs.add(
            "podLogsDir",
            format!("{:?} must be a normalized path", c.pod_logs_dir),
        );
    }
    if c.max_pods < 0 {
        errs.add(
            "maxPods",
            format!("must not be negative, got {}", c.max_pods),
        );
    }
    if c.pod_pids_limit < -1 {
        errs.add(
            "podPidsLimit",
            format!(
                "must be -1 (unlimited) or greater, got {}",
                c.pod_pids_limit
            ),
        );
    }
    if c.node_lease_duration_seconds <= 0 {
        errs.add("nodeLeaseDurationSeconds", "must be greater than 0");
    }
    errs.port("port", c.port, false);
    errs.port("readOnlyPort", c.read_only_port, true);
    errs.port("healthzPort", c.healthz_port, true);
    errs.ip("address", &c.address);
    errs.ip("healthzBindAddress", &c.healthz_bind_address);
    for (i, dns) in c.cluster_dns.iter().enumerate() {
        errs.ip(&format!("clusterDNS[{i}]"), dns);
    }
    errs.percent(
        "imageGCHighThresholdPercent",
        c.image_gc_high_threshold_percent,
    );
    errs.percent(
        "imageGCLowThresholdPercent",
        c.image_gc_low_threshold_percent,
    );
    if c.image_gc_low_threshold_percent >= c.image_gc_high_threshold_percent {
        errs.add(
            "imageGCLowThresholdPercent",
            format!(
                "{} must be less than imageGCHighThresholdPercent {}",
                c.image_gc_low_threshold_percent, c.image_gc_high_threshold_percent
            ),
        );
    }
    errs.non_negative("registryPullQPS", c.registry_pull_qps.into());
    errs.non_negative("registryBurst", c.registry_burst.into());
    errs.non_negative("eventRecordQPS", c.event_record_qps.into());
    errs.non_negative("eventBurst", c.event_burst.into());
    errs.non_negative("kubeAPIQPS", c.kube_api_qps.into());
    errs.non_negative("kubeAPIBurst", c.kube_api_burst.into());
    errs.non_negative("maxOpenFiles", c.max_open_files);
    errs.non_negative("containerLogMaxFiles", c.container_log_max_files.into());
    if let Err(reason) = log_max_size(&c.container_log_max_size) {
        errs.add("containerLogMaxSize", reason);
    }
    if c.container_log_max_files >= 0 && c.container_log_max_files <= 1 {
        errs.add(
            "containerLogMaxFiles",
            format!("{} must be greater than 1", c.container_log_max_files),
        );
    }
    if c.container_log_max_workers < 1 {
        errs.add(
            "containerLogMaxWorkers",
            format!(
                "{} must be greater than or equal to 1",
                c.container_log_max_workers
            ),
        );
    }
    if c.container_log_monitor_interval.0 < Duration::from_secs(3) {
        errs.add(
            "containerLogMonitorInterval",
            format!(
                "{} must be a positive time duration greater than or equal to 3s",
                c.container_log_monitor_interval
            ),
        );
    }
    errs.non_negative(
        "evictionMaxPodGracePeriod",
        c.eviction_max_pod_grace_period.into(),
    );
    if let Some(n) = c.max_parallel_image_pulls {
        if n < 1 {
            errs.add(
                "maxParallelImagePulls",
                format!("must be at least 1, got {n}"),
            );
        } else if c.serialize_image_pulls && n != 1 {
            errs.add(
                "maxParallelImagePulls",
                format!("must be 1 (or unset) when serializeImagePulls is true, got {n}"),
            );
        }
    }
    if !matches!(
        c.config_map_and_secret_change_detection_strategy.as_str(),
        "Watch" | "Cache" | "Get"
    ) {
        errs.add(
            "configMapAndSecretChangeDetectionStrategy",
            format!(
                "unsupported value {:?} (supported: Watch, Cache, Get)",
                c.config_map_and_secret_change_detection_strategy
            ),
        );
    }
    match c.cgroup_driver.as_str() {
        "cgroupfs" | "systemd" => {}
        other => errs.add(
            "cgroupDriver",
            format!("unsupported value {other:?} (supported: cgroupfs, systemd)"),
        ),
    }
    let alpha_options =
        crate::feature_gates::FeatureGates::new(&c.feature_gates).enabled("LoggingAlphaOptions");
    for (field, reason) in c.logging.validate(alpha_options) {
        errs.add(field, reason);
    }
    match c.authorization.mode.as_str() {
        "AlwaysAllow" | "Webhook" => {}
        other => errs.add(
            "authorization.mode",
            format!("unsupported value {other:?} (supported: AlwaysAllow, Webhook)"),
        ),
    }
    reserved(&mut errs, "kubeReserved", &c.kube_reserved);
    reserved(&mut errs, "systemReserved", &c.system_reserved);
    errs.0
        .extend(eviction_thresholds("evictionHard", &c.eviction_hard));
    errs.0
        .extend(eviction_thresholds("evictionSoft", &c.eviction_soft));
    let before = errs.0.len();
    for (signal, value) in &c.eviction_soft_grace_period {
        if let Err(e) = super::duration::parse_go_duration(value.trim()) {
            errs.add(format!("evictionSoftGracePeriod.{signal}"), e.to_string());
        }
    }
    for (signal, value) in &c.eviction_minimum_reclaim {
        let field = format!("evictionMinimumReclaim.{signal}");
        if value.trim().ends_with('%') {
            continue;
        }
        if let Err(e) = resources::value(&Quantity(value.clone())) {
            errs.add(field, e.to_string());
        }
    }
    if errs.0.len() == before {
        // Everything else the eviction manager checks (signals, soft thresholds without a
        // grace period, percentages), as the engine will when it is built.
        let grace = c
            .eviction_soft_grace_period
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.clone(),
                    super::duration::parse_go_duration(v.trim()).ok()?,
                ))
            })
            .collect();
        let parsed =
            kubelet_core::eviction::parse_thresholds(kubelet_core::eviction::ThresholdSettings {
                hard: &c.eviction_hard,
                soft: &c.eviction_soft,
                soft_grace_period: &grace,
                minimum_reclaim: &c.eviction_minimum_reclaim,
                enforce_pods_allocatable: false,
            });
        if let Err(e) = parsed {
            errs.add(format!("{}.{}", e.field, e.signal), e.message);
        }
    }
    if !c.reserved_system_cpus.is_empty() {
        // The container manager's parser: bounded, so a huge range fails at once.
        if let Err(e) = kubelet_core::cpu::parse_cpuset(&c.reserved_system_cpus) {
            errs.add("reservedSystemCPUs", e.to_string());
        }
    }
    if let Err(e) = kubelet_core::cpumanager::CpuManagerPolicy::parse(&c.cpu_manager_policy) {
        errs.add("cpuManagerPolicy", e.to_string());
    }
    if let Err(e) =
        kubelet_core::memorymanager::MemoryManagerPolicy::parse(&c.memory_manager_policy)
    {
        errs.add("memoryManagerPolicy", e.to_string());
    }
    if let Err(problems) = super::reserved_memory::reserved_memory(&c.reserved_memory) {
        for (field, reason) in problems {
            errs.add(field, reason);
        }
    }
    // As Go: the options are the static policy's, read only under it.
    if c.cpu_manager_policy == "static" {
        if let Err(e) = super::cpu_manager_options::policy_options(
            &c.cpu_manager_policy_options,
            &crate::feature_gates::FeatureGates::new(&c.feature_gates),
        ) {
            errs.add("cpuManagerPolicyOptions", e);
        }
    }
    if c.cpu_manager_reconcile_period.0.is_zero() {
        errs.add("cpuManagerReconcilePeriod", "must be greater than 0");
    }
    if let Err(e) = kubelet_core::topologymanager::TopologyPolicy::parse(&c.topology_manager_policy)
    {
        errs.add("topologyManagerPolicy", e);
    }
    if let Err(e) =
        super::topology_manager_options::policy_options(&c.topology_manager_policy_options)
    {
        errs.add("topologyManagerPolicyOptions", e);
    }
    if let Err(e) = kubelet_core::topologymanager::TopologyScope::parse(&c.topology_manager_scope) {
        errs.add("topologyManagerScope", e);
    }
    for (i, v) in c.enforce_node_allocatable.iter().enumerate() {
        let field = format!("enforceNodeAllocatable[{i}]");
        match v.as_str() {
            "pods" => {}
            "system-reserved" | "system-reserved-compressible"
                if c.system_reserved_cgroup.is_empty() =>
            {
                errs.add(field, format!("{v:?} requires systemReservedCgroup to be set"))
            }
            "kube-reserved" | "kube-reserved-compressible" if c.kube_reserved_cgroup.is_empty() => {
                errs.add(field, format!("{v:?} requires kubeReservedCgroup to be set"))
            }
            "system-reserved-compressible"
                if c.enforce_node_allocatable.iter().any(|x| x == "system-reserved") =>
            {
                errs.add(field, "cannot be combined with \"system-reserved\"")
            }
            "kube-reserved-compressible"
                if c.enforce_node_allocatable.iter().any(|x| x == "kube-reserved") =>
            {
                errs.add(field, "cannot be combined with \"kube-reserved\"")
            }
            "system-reserved"
            | "kube-reserved"
            | "system-reserved-compressible"
            | "kube-reserved-compressible" => {}
            "none" if c.enforce_node_allocatable.len() > 1 => {
                errs.add(field, "\"none\" cannot be combined with other values")
            }
            "none" => {}
            other => errs.add(
                field,
                format!("unsupported value {other:?} (supported: pods, system-reserved, kube-reserved, system-reserved-compressible, kube-reserved-compressible, none)"),
            ),
        }
    }
    let enforces = c.enforce_node_allocatable.iter().any(|v| v != "none");
    if !c.cgroups_per_qos && enforces {
        errs.add(
            "enforceNodeAllocatable",
            "is not supported unless cgroupsPerQOS is true",
        );
    }
    for (i, t) in c.register_with_taints.iter().enumerate() {
        if t.key.is_empty() {
            errs.add(format!("registerWithTaints[{i}].key"), "required value");
        }
        if !matches!(
            t.effect.as_str(),
            "NoSchedule" | "PreferNoSchedule" | "NoExecute"
        ) {
            errs.add(
                format!("registerWithTaints[{i}].effect"),
                format!(
                    "unsupported value {:?} (supported: NoSchedule, PreferNoSchedule, NoExecute)",
                    t.effect
                ),
            );
        }
    }
    tracing_configuration(&mut errs, c);
    if c.container_runtime_endpoint.is_empty() {
        errs.add("containerRuntimeEndpoint", "required value");
    }
    if c.tls_cert_file.is_empty() != c.tls_private_key_file.is_empty() {
        errs.add(
            "tlsPrivateKeyFile",
            "tlsCertFile and tlsPrivateKeyFile must be set together",
        );
    }
    errs.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_system_cpus_use_the_bounded_cpuset_parser() {
        let with = |cpus: &str| {
            let c = KubeletConfiguration {
                reserved_system_cpus: cpus.into(),
                ..KubeletConfiguration::default()
            };
            validate(&c)
                .into_iter()
                .filter(|e| e.field == "reservedSystemCPUs")
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
        };
        assert!(with("0-1,3").is_empty());
        let start = kubelet_core::clock::monotonic_now();
        let errs = with("0-4000000000");
        assert!(kubelet_core::clock::elapsed(start) < std::time::Duration::from_secs(1));
        assert_eq!(
            errs,
            ["reservedSystemCPUs: bad CPU 4000000000 in \"0-4000000000\": CPU ids go up to 8191 (Linux supports at most 8192 CPUs)"]
        );
        assert_eq!(
            with("0-x"),
            ["reservedSystemCPUs: bad CPU \"x\" in \"0-x\": not a CPU number"]
        );
    }
}
