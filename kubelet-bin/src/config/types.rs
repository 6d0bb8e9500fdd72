//! `KubeletConfiguration` (`kubelet.config.k8s.io/v1beta1`): the fields kubelet-rs supports,
//! with the Go kubelet's defaults (`pkg/kubelet/apis/config/v1beta1/defaults.go`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

/// The configuration file's `apiVersion`.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The configuration file's `kind`.
pub const KIND: &str = "KubeletConfiguration";

/// A taint the node registers with (`registerWithTaints`, `--register-with-taints`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// `authentication.x509`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct X509Authentication {
    /// CA bundle verifying client certificates (`--client-ca-file`); empty: disabled.
    #[serde(rename = "clientCAFile")]
    pub client_ca_file: String,
}

/// `authentication.webhook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebhookAuthentication {
    /// Use TokenReview against the API server for bearer tokens (default true).
    pub enabled: bool,
    /// How long authentication answers are cached (default 2m).
    #[serde(rename = "cacheTTL")]
    pub cache_ttl: GoDuration,
}

impl Default for WebhookAuthentication {
    fn default() -> Self {
        WebhookAuthentication {
            enabled: true,
            cache_ttl: GoDuration::from_secs(120),
        }
    }
}

/// `authentication.anonymous`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct AnonymousAuthentication {
    /// Allow anonymous requests (default false).
    pub enabled: bool,
}

/// `authentication`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Authentication {
    /// Client certificate authentication.
    pub x509: X509Authentication,
    /// Bearer token authentication through the API server.
    pub webhook: WebhookAuthentication,
    /// Anonymous requests.
    pub anonymous: AnonymousAuthentication,
}

/// `authorization.webhook`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebhookAuthorization {
    /// Cache time of "authorized" answers (default 5m).
    #[serde(rename = "cacheAuthorizedTTL")]
    pub cache_authorized_ttl: GoDuration,
    /// Cache time of "unauthorized" answers (default 30s).
    #[serde(rename = "cacheUnauthorizedTTL")]
    pub cache_unauthorized_ttl: GoDuration,
}

impl Default for WebhookAuthorization {
    fn default() -> Self {
        WebhookAuthorization {
            cache_authorized_ttl: GoDuration::from_secs(300),
            cache_unauthorized_ttl: GoDuration::from_secs(30),
        }
    }
}

/// `authorization`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Authorization {
    /// `AlwaysAllow` or `Webhook` (default `Webhook`).
    pub mode: String,
    /// SubjectAccessReview settings.
    pub webhook: WebhookAuthorization,
}

impl Default for Authorization {
    fn default() -> Self {
        Authorization {
            mode: "Webhook".into(),
            webhook: WebhookAuthorization::default(),
        }
    }
}

/// The kubelet configuration file (`--config`), the fields kubelet-rs supports. Field names
/// and defaults are the Go kubelet's (`KubeletConfiguration` v1beta1);
/// `KubeletConfiguration::default()` is the defaulted configuration of an empty file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KubeletConfiguration {
    /// Always `kubelet.config.k8s.io/v1beta1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Always `KubeletConfiguration`.
    pub kind: String,
    /// Enable the kubelet's secured server (default true).
    #[serde(rename = "enableServer")]
    pub enable_server: bool,
    /// Static pod manifest file or directory (`--pod-manifest-path`).
    #[serde(rename = "staticPodPath")]
    pub static_pod_path: String,
    /// Where pods' container logs go (`<podLogsDir>/<ns>_<name>_<uid>/<container>/<n>.log`;
    /// default `/var/log/pods`). Two kubelets on one machine need two: each removes the log
    /// directories of pods it does not know.
    #[serde(rename = "podLogsDir")]
    pub pod_logs_dir: String,
    /// Static pod manifest URL (`--manifest-url`).
    #[serde(rename = "staticPodURL")]
    pub static_pod_url: String,
    /// Headers for the manifest URL (`--manifest-url-header`).
    #[serde(rename = "staticPodURLHeader")]
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    /// How often running pods are re-synced (default 1m).
    #[serde(rename = "syncFrequency")]
    pub sync_frequency: GoDuration,
    /// How often the static pod path is rescanned (default 20s).
    #[serde(rename = "fileCheckFrequency")]
    pub file_check_frequency: GoDuration,
    /// How often the manifest URL is polled (default 20s).
    #[serde(rename = "httpCheckFrequency")]
    pub http_check_frequency: GoDuration,
    /// Address the kubelet server binds (default 0.0.0.0).
    pub address: String,
    /// Port of the kubelet server (default 10250).
    pub port: i32,
    /// Unauthenticated read-only port (default 0: disabled).
    #[serde(rename = "readOnlyPort")]
    pub read_only_port: i32,
    /// Serving certificate file.
    #[serde(rename = "tlsCertFile")]
    pub tls_cert_file: String,
    /// Serving key file.
    #[serde(rename = "tlsPrivateKeyFile")]
    pub tls_private_key_file: String,
    /// Minimum TLS version of the server (Go names, e.g. `VersionTLS12`; "": TLS 1.2).
    #[serde(rename = "tlsMinVersion")]
    pub tls_min_version: String,
    /// Allowed TLS 1.2 cipher suites (IANA names; empty: the defaults).
    #[serde(rename = "tlsCipherSuites")]
    pub tls_cipher_suites: Vec<String>,
    /// Server authentication.
    pub authentication: Authentication,
    /// Server authorization.
    pub authorization: Authorization,
    /// Image pull QPS limit (default 5; 0: unlimited).
    #[serde(rename = "registryPullQPS")]
    pub registry_pull_qps: i32,
    /// Image pull burst (default 10).
    #[serde(rename = "registryBurst")]
    pub registry_burst: i32,
    /// Event creation QPS (default 50).
    #[serde(rename = "eventRecordQPS")]
    pub event_record_qps: i32,
    /// Event burst (default 100).
    #[serde(rename = "eventBurst")]
    pub event_burst: i32,
    /// Serve exec/attach/logs/portforward (default true).
    #[serde(rename = "enableDebuggingHandlers")]
    pub enable_debugging_handlers: bool,
    /// Serve the node's logs at `/logs/` (default true; needs the debugging handlers).
    #[serde(rename = "enableSystemLogHandler")]
    pub enable_system_log_handler: bool,
    /// Serve `/debug/pprof/` (default true; needs the debugging handlers).
    #[serde(rename = "enableProfilingHandler")]
    pub enable_profiling_handler: bool,
    /// Serve `/debug/flags/v` (default true; needs the debugging handlers).
    #[serde(rename = "enableDebugFlagsHandler")]
    pub enable_debug_flags_handler: bool,
    /// Port of the local healthz endpoint (default 10248; 0: disabled).
    #[serde(rename = "healthzPort")]
    pub healthz_port: i32,
    /// Address of the healthz endpoint (default 127.0.0.1).
    #[serde(rename = "healthzBindAddress")]
    pub healthz_bind_address: String,
    /// oom_score_adj of the kubelet process (default -999).
    #[serde(rename = "oomScoreAdj")]
    pub oom_score_adj: i32,
    /// Cluster DNS domain appended to search paths (e.g. cluster.local).
    #[serde(rename = "clusterDomain")]
    pub cluster_domain: String,
    /// Cluster DNS server IPs.
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Vec<String>,
    /// Idle timeout of streaming connections (default 4h).
    #[serde(rename = "streamingConnectionIdleTimeout")]
    pub streaming_connection_idle_timeout: GoDuration,
    /// How often node status is computed and posted if changed (default 10s).
    #[serde(rename = "nodeStatusUpdateFrequency")]
    pub node_status_update_frequency: GoDuration,
    /// How often node status is posted when unchanged (default 5m).
    #[serde(rename = "nodeStatusReportFrequency")]
    pub node_status_report_frequency: GoDuration,
    /// Node lease duration (default 40).
    #[serde(rename = "nodeLeaseDurationSeconds")]
    pub node_lease_duration_seconds: i32,
    /// Minimum age of an unused image before GC (default 2m).
    #[serde(rename = "imageMinimumGCAge")]
    pub image_minimum_gc_age: GoDuration,
    /// Disk usage percent that triggers image GC (default 85).
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: i32,
    /// Disk usage percent image GC frees down to (default 80).
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: i32,
    /// Unused images older than this are removed (default 0: never).
    #[serde(rename = "imageMaximumGCAge")]
    pub image_maximum_gc_age: GoDuration,
    /// Volume stats caching period (default 1m).
    #[serde(rename = "volumeStatsAggPeriod")]
    pub volume_stats_agg_period: GoDuration,
    /// How changes of the config maps and secrets pods use are noticed: `Watch` (default: a
    /// watch per object), `Cache` (read again after a TTL of 1m) or `Get` (read at every use).
    #[serde(rename = "configMapAndSecretChangeDetectionStrategy")]
    pub config_map_and_secret_change_detection_strategy: String,
    /// Create the QoS cgroup hierarchy (default true).
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: bool,
    /// `cgroupfs` (default) or `systemd`.
    #[serde(rename = "cgroupDriver")]
    pub cgroup_driver: String,
    /// Root cgroup for pods (default "": the root).
    #[serde(rename = "cgroupRoot")]
    pub cgroup_root: String,
    /// Timeout of runtime requests except long-running ones (default 2m).
    #[serde(rename = "runtimeRequestTimeout")]
    pub runtime_request_timeout: GoDuration,
    /// Maximum pods on the node (default 110).
    #[serde(rename = "maxPods")]
    pub max_pods: i32,
    /// Maximum pids per pod (default -1: unlimited).
    #[serde(rename = "podPidsLimit")]
    pub pod_pids_limit: i64,
    /// Resolver file for pods with dnsPolicy Default (default /etc/resolv.conf).
    #[serde(rename = "resolvConf")]
    pub resolv_conf: String,
    /// Enforce CPU limits with CFS quota (default true).
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: bool,
    /// CFS quota period (default 100ms).
    #[serde(rename = "cpuCFSQuotaPeriod")]
    pub cpu_cfs_quota_period: GoDuration,
    /// Open file limit of the kubelet (default 1000000).
    #[serde(rename = "maxOpenFiles")]
    pub max_open_files: i64,
    /// API server QPS (default 50).
    #[serde(rename = "kubeAPIQPS")]
    pub kube_api_qps: i32,
    /// API server burst (default 100).
    #[serde(rename = "kubeAPIBurst")]
    pub kube_api_burst: i32,
    /// Pull one image at a time (default true).
    #[serde(rename = "serializeImagePulls")]
    pub serialize_image_pulls: bool,
    /// Parallel pulls when not serialized (default unset: unlimited).
    #[serde(rename = "maxParallelImagePulls")]
    pub max_parallel_image_pulls: Option<i32>,
    /// Hard eviction thresholds, signal → quantity or percentage.
    #[serde(rename = "evictionHard")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds.
    #[serde(rename = "evictionSoft")]
    pub eviction_soft: BTreeMap<String, String>,
    /// Grace periods of the soft thresholds.
    #[serde(rename = "evictionSoftGracePeriod")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// How long a pressure condition is held after it cleared (default 5m).
    #[serde(rename = "evictionPressureTransitionPeriod")]
    pub eviction_pressure_transition_period: GoDuration,
    /// The most grace a soft eviction gives a pod, in seconds (default 0).
    #[serde(rename = "evictionMaxPodGracePeriod")]
    pub eviction_max_pod_grace_period: i32,
    /// How much more than a threshold must be available before it is no longer met.
    #[serde(rename = "evictionMinimumReclaim")]
    pub eviction_minimum_reclaim: BTreeMap<String, String>,
    /// Refuse to start with swap on (default true).
    #[serde(rename = "failSwapOn")]
    pub fail_swap_on: bool,
    /// Container log rotation size (default 10Mi).
    #[serde(rename = "containerLogMaxSize")]
    pub container_log_max_size: String,
    /// Container log files kept (default 5).
    #[serde(rename = "containerLogMaxFiles")]
    pub container_log_max_files: i32,
    /// Containers whose logs are rotated at once (default 1).
    #[serde(rename = "containerLogMaxWorkers")]
    pub container_log_max_workers: i32,
    /// How often container logs are checked for rotation (default 10s).
    #[serde(rename = "containerLogMonitorInterval")]
    pub container_log_monitor_interval: GoDuration,
    /// Resources reserved for the system (cpu, memory, ephemeral-storage, pid).
    #[serde(rename = "systemReserved")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes components.
    #[serde(rename = "kubeReserved")]
    pub kube_reserved: BTreeMap<String, String>,
    /// Cgroup of system daemons (for enforcing systemReserved).
    #[serde(rename = "systemReservedCgroup")]
    pub system_reserved_cgroup: String,
    /// Cgroup of Kubernetes daemons (for enforcing kubeReserved).
    #[serde(rename = "kubeReservedCgroup")]
    pub kube_reserved_cgroup: String,
    /// CPUs reserved for the system, as a cpuset ("0-1,3").
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: String,
    /// What node allocatable is enforced on (default ["pods"]).
    #[serde(rename = "enforceNodeAllocatable")]
    pub enforce_node_allocatable: Vec<String>,
    /// Register the node with the API server (default true).
    #[serde(rename = "registerNode")]
    pub register_node: bool,
    /// Taints the node registers with.
    #[serde(rename = "registerWithTaints")]
    pub register_with_taints: Vec<Taint>,
    /// CRI runtime endpoint (default unix:///run/containerd/containerd.sock).
    #[serde(rename = "containerRuntimeEndpoint")]
    pub container_runtime_endpoint: String,
    /// CRI image endpoint (default "": the runtime endpoint).
    #[serde(rename = "imageServiceEndpoint")]
    pub image_service_endpoint: String,
    /// Total graceful node shutdown delay (default 0: disabled).
    #[serde(rename = "shutdownGracePeriod")]
    pub shutdown_grace_period: GoDuration,
    /// The part of `shutdownGracePeriod` kept for critical pods (default 0).
    #[serde(rename = "shutdownGracePeriodCriticalPods")]
    pub shutdown_grace_period_critical_pods: GoDuration,
    /// Shutdown grace periods by pod priority (default none).
    #[serde(rename = "shutdownGracePeriodByPodPriority")]
    pub shutdown_grace_period_by_pod_priority: Vec<ShutdownGracePeriodByPriority>,
    /// Feature gates (name → enabled).
    #[serde(rename = "featureGates")]
    pub feature_gates: BTreeMap<String, bool>,
    /// `RuntimeDefault` seccomp for containers that set no profile (default false).
    #[serde(rename = "seccompDefault")]
    pub seccomp_default: bool,
    /// Unsafe sysctls (or `prefix*` patterns) pods may set (default none).
    #[serde(rename = "allowedUnsafeSysctls")]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// OpenTelemetry tracing (Go's `KubeletTracing`): off when unset.
    #[serde(rename = "tracing", skip_serializing_if = "Option::is_none")]
    pub tracing: Option<TracingConfiguration>,
    /// Renew the client certificate before it expires (default false).
    #[serde(rename = "rotateCertificates")]
    pub rotate_certificates: bool,
    /// Request the serving certificate from the cluster (`kubernetes.io/kubelet-serving`)
    /// instead of using `tlsCertFile` or a self-signed one (default false).
    #[serde(rename = "serverTLSBootstrap")]
    pub server_tls_bootstrap: bool,
    /// The node's `spec.providerID` at registration (`--provider-id`).
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// Images reported in the node status, largest first (default 50; -1: all).
    #[serde(rename = "nodeStatusMaxImages")]
    pub node_status_max_images: i32,
    /// `--kubelet-cgroups`: the kubelet's cgroup, reported as the `kubelet` system container
    /// of the summary (empty: the cgroup the kubelet runs in).
    #[serde(rename = "kubeletCgroups")]
    pub kubelet_cgroups: String,
    /// `--system-cgroups`: the cgroup of the node's non-kernel processes outside containers,
    /// reported as the `misc` system container (requires `cgroupRoot`).
    #[serde(rename = "systemCgroups")]
    pub system_cgroups: String,
    /// `logging`: format, verbosity, per-file verbosity, stream options.
    pub logging: super::logging::Logging,
    /// `--cpu-manager-policy`: `none` (default) or `static`.
    #[serde(rename = "cpuManagerPolicy")]
    pub cpu_manager_policy: String,
    /// `--cpu-manager-policy-options`: the static policy's options (`full-pcpus-only`).
    #[serde(rename = "cpuManagerPolicyOptions")]
    pub cpu_manager_policy_options: BTreeMap<String, String>,
    /// `--cpu-manager-reconcile-period` (default 10s).
    #[serde(rename = "cpuManagerReconcilePeriod")]
    pub cpu_manager_reconcile_period: GoDuration,
    /// `--memory-manager-policy`: `None` (default) or `Static`.
    #[serde(rename = "memoryManagerPolicy")]
    pub memory_manager_policy: String,
    /// `--reserved-memory`: memory reserved for the system per NUMA node (the `Static`
    /// memory manager policy's; it must add up to node allocatable's reservation).
    #[serde(rename = "reservedMemory")]
    pub reserved_memory: Vec<MemoryReservation>,
    /// `--topology-manager-policy`: `none` (default), `best-effort`, `restricted`,
    /// `single-numa-node`.
    #[serde(rename = "topologyManagerPolicy")]
    pub topology_manager_policy: String,
    /// `--topology-manager-policy-options` (`max-allowable-numa-nodes`).
    #[serde(rename = "topologyManagerPolicyOptions")]
    pub topology_manager_policy_options: BTreeMap<String, String>,
    /// `--topology-manager-scope`: `container` (default) or `pod`.
    #[serde(rename = "topologyManagerScope")]
    pub topology_manager_scope: String,
    /// The Go fields kubelet-rs parses but does not act on (see [`super::parsed_only`]).
    #[serde(flatten)]
    pub parsed_only: super::parsed_only::ParsedOnly,
}

/// `tracing` of the kubelet configuration (component-base's `TracingConfiguration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TracingConfiguration {
    /// OTLP/gRPC collector endpoint, `host:port` (default `localhost:4317`).
    pub endpoint: Option<String>,
    /// Spans sampled per million (default 0: none unless the parent is sampled).
    #[serde(rename = "samplingRatePerMillion")]
    pub sampling_rate_per_million: Option<i32>,
}

/// The Go kubelet's default hard eviction thresholds (the eviction manager's own defaults).
pub use kubelet_core::eviction::default_eviction_hard;

impl Default for KubeletConfiguration {
    fn default() -> Self {
        KubeletConfiguration {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            enable_server: true,
            static_pod_path: String::new(),
            pod_logs_dir: "/var/log/pods".into(),
            static_pod_url: String::new(),
            static_pod_url_header: BTreeMap::new(),
            sync_frequency: GoDuration::from_secs(60),
            file_check_frequency: GoDuration::from_secs(20),
            http_check_frequency: GoDuration::from_secs(20),
            address: "0.0.0.0".into(),
            port: 10250,
            read_only_port: 0,
            tls_cert_file: String::new(),
            tls_private_key_file: String::new(),
            tls_min_version: String::new(),
            tls_cipher_suites: Vec::new(),
            authentication: Authentication::default(),
            authorization: Authorization::default(),
            registry_pull_qps: 5,
            registry_burst: 10,
            event_record_qps: 50,
            event_burst: 100,
            enable_debugging_handlers: true,
            enable_system_log_handler: true,
            enable_profiling_handler: true,
            enable_debug_flags_handler: true,
            healthz_port: 10248,
            healthz_bind_address: "127.0.0.1".into(),
            oom_score_adj: -999,
            cluster_domain: String::new(),
            cluster_dns: Vec::new(),
            streaming_connection_idle_timeout: GoDuration::from_secs(4 * 3600),
            node_status_update_frequency: GoDuration::from_secs(10),
            node_status_report_frequency: GoDuration::from_secs(300),
            node_lease_duration_seconds: 40,
            image_minimum_gc_age: GoDuration::from_secs(120),
            image_gc_high_threshold_percent: 85,
            image_gc_low_threshold_percent: 80,
            image_maximum_gc_age: GoDuration::default(),
            volume_stats_agg_period: GoDuration::from_secs(60),
            config_map_and_secret_change_detection_strategy: "Watch".into(),
            cgroups_per_qos: true,
            cgroup_driver: "cgroupfs".into(),
            cgroup_root: String::new(),
            runtime_request_timeout: GoDuration::from_secs(120),
            max_pods: 110,
            pod_pids_limit: -1,
            resolv_conf: "/etc/resolv.conf".into(),
            cpu_cfs_quota: true,
            cpu_cfs_quota_period: GoDuration::from_millis(100),
            max_open_files: 1_000_000,
            kube_api_qps: 50,
            kube_api_burst: 100,
            serialize_image_pulls: true,
            max_parallel_image_pulls: None,
            eviction_hard: default_eviction_hard(),
            eviction_soft: BTreeMap::new(),
            eviction_soft_grace_period: BTreeMap::new(),
            eviction_pressure_transition_period: GoDuration::from_secs(300),
            eviction_max_pod_grace_period: 0,
            eviction_minimum_reclaim: BTreeMap::new(),
            fail_swap_on: true,
            container_log_max_size: "10Mi".into(),
            container_log_max_files: 5,
            container_log_max_workers: 1,
            container_log_monitor_interval: GoDuration::from_secs(10),
            system_reserved: BTreeMap::new(),
            kube_reserved: BTreeMap::new(),
            system_reserved_cgroup: String::new(),
            kube_reserved_cgroup: String::new(),
            reserved_system_cpus: String::new(),
            enforce_node_allocatable: vec!["pods".into()],
            register_node: true,
            register_with_taints: Vec::new(),
            container_runtime_endpoint: "unix:///run/containerd/containerd.sock".into(),
            image_service_endpoint: String::new(),
            shutdown_grace_period: GoDuration::default(),
            shutdown_grace_period_critical_pods: GoDuration::default(),
            shutdown_grace_period_by_pod_priority: Vec::new(),
            feature_gates: BTreeMap::new(),
            seccomp_default: false,
            allowed_unsafe_sysctls: Vec::new(),
            tracing: None,
            rotate_certificates: false,
            server_tls_bootstrap: false,
            provider_id: String::new(),
            node_status_max_images: 50,
            kubelet_cgroups: String::new(),
            system_cgroups: String::new(),
            logging: Default::default(),
            cpu_manager_policy: "none".into(),
            cpu_manager_policy_options: BTreeMap::new(),
            cpu_manager_reconcile_period: GoDuration::from_secs(10),
            memory_manager_policy: "None".into(),
            reserved_memory: Vec::new(),
            topology_manager_policy: "none".into(),
            topology_manager_policy_options: BTreeMap::new(),
            topology_manager_scope: "container".into(),
            parsed_only: Default::default(),
        }
    }
}

impl KubeletConfiguration {
    /// The Go kubelet's "legacy" flag defaults, applied when no `--config` file is given
    /// (`applyLegacyDefaults`): anonymous auth on, webhook authentication off, authorization
    /// `AlwaysAllow`, read-only port 10255.
    pub fn apply_legacy_defaults(&mut self) {
        self.authentication.anonymous.enabled = true;
        self.authentication.webhook.enabled = false;
        self.authorization.mode = "AlwaysAllow".into();
        self.read_only_port = 10255;
    }

    /// `staticPodURLHeader` flattened to (name, value) pairs, in name order.
    pub fn static_pod_url_headers(&self) -> Vec<(String, String)> {
        self.static_pod_url_header
            .iter()
            .flat_map(|(k, vs)| vs.iter().map(move |v| (k.clone(), v.clone())))
            .collect()
    }
}

/// One `shutdownGracePeriodByPodPriority` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ShutdownGracePeriodByPriority {
    /// Pods of at least this priority…
    #[serde(rename = "priority")]
    pub priority: i32,
    /// …get this many seconds.
    #[serde(rename = "shutdownGracePeriodSeconds")]
    pub shutdown_grace_period_seconds: i64,
}

/// One NUMA node's reserved memory (`reservedMemory`, `--reserved-memory`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MemoryReservation {
    /// The NUMA node.
    #[serde(rename = "numaNode")]
    pub numa_node: i32,
    /// Resource name → quantity (`memory`, `hugepages-1Gi`, …).
    #[serde(default)]
    pub limits: BTreeMap<String, String>,
}
