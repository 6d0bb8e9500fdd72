//! The kubelet's configuration: the `KubeletConfiguration` file (`--config`), its drop-in
//! directory (`--config-dir`, [`drop_in`]), the command-line flags, and how they combine (Go's
//! precedence: flags explicitly given on the command line override the drop-ins, which
//! override the file, which overrides the defaults; without a file the Go kubelet's legacy
//! flag defaults apply). Feature gates are then checked ([`crate::feature_gates`]) and the
//! whole validated ([`validate`]).

pub mod cpu_manager_options;
pub mod drop_in;
pub mod duration;
pub mod logging;
pub mod parsed_only;
pub mod reserved_memory;
pub mod support;
pub mod topology_manager_options;
pub mod types;
pub mod validate;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde_json::Value;

use crate::flags::{self, FlagValueError, Flags};
pub use duration::{format_go_duration, parse_go_duration, DurationError, GoDuration};
pub use types::{KubeletConfiguration, Taint};
pub use validate::FieldError;

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The command line is invalid: the caller should `err.exit()` on this variant (clap
    /// prints the text and picks the exit code).
    #[error(transparent)]
    Flags(#[from] clap::Error),
    /// `--help` (or `-h`, `--help=true`) was given: print this to standard output and exit 0.
    #[error("{0}")]
    Help(String),
    /// `--version` (`=true` or `=raw`) was given: print this to standard output and exit 0.
    #[error("{0}")]
    Version(String),
    /// A flag's value is malformed.
    #[error(transparent)]
    FlagValue(#[from] FlagValueError),
    /// The config file cannot be read.
    #[error("reading config file {path}: {error}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The config file is not valid YAML/JSON.
    #[error("config file {path}: cannot parse: {reason}")]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// A field of the config file has a value of the wrong type or format (or `kind` /
    /// `apiVersion` are wrong).
    #[error("config file {path}: {field}: {reason}")]
    FileField {
        /// The file.
        path: PathBuf,
        /// The field's path, e.g. `syncFrequency`.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The effective configuration is invalid.
    #[error("invalid kubelet configuration: {}", join(errors))]
    Invalid {
        /// Every problem found.
        errors: Vec<FieldError>,
    },
    /// A feature gate is unknown, or set against its lock (each in Go's words).
    #[error("failed to set feature gates from initial flags-based config: {}", errors.join("; "))]
    FeatureGates {
        /// Every refusal.
        errors: Vec<String>,
    },
    /// The drop-in configuration directory (`--config-dir`) cannot be read.
    #[error(transparent)]
    DropIn(#[from] drop_in::DropInError),
    /// The node name cannot be determined.
    #[error("cannot determine the node name: {reason}")]
    NodeName {
        /// Why.
        reason: String,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The loaded configuration file with the warnings it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct FileConfig {
    /// The file's configuration with defaults for what it leaves out (not yet validated).
    pub config: KubeletConfiguration,
    /// Unknown or unsupported fields, named (not fatal).
    pub warnings: Vec<String>,
}

/// Everything the kubelet binary needs: the effective configuration and the flag-only settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The effective, validated configuration (defaults ← file ← command line).
    pub config: KubeletConfiguration,
    /// `--config`.
    pub config_file: Option<PathBuf>,
    /// `--kubeconfig` (standalone mode when `None`).
    pub kubeconfig: Option<PathBuf>,
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--cert-dir` (default `<root-dir>/pki`).
    pub cert_dir: PathBuf,
    /// `--image-credential-provider-config`.
    pub image_credential_provider_config: Option<PathBuf>,
    /// `--image-credential-provider-bin-dir`.
    pub image_credential_provider_bin_dir: Option<PathBuf>,
    /// The node name: `--hostname-override` or the host name, trimmed and lower-cased.
    pub node_name: String,
    /// `--node-ip` addresses (empty: detect).
    pub node_ips: Vec<IpAddr>,
    /// `--node-labels`.
    pub node_labels: BTreeMap<String, String>,
    /// `--root-dir`.
    pub root_dir: PathBuf,
    /// `--runonce`.
    pub runonce: bool,
    /// `-v`/`--v` (0–10).
    pub verbosity: u8,
    /// Non-fatal findings (unknown fields in the config file, settings kubelet-rs does not
    /// support), for logging.
    pub warnings: Vec<String>,
    /// `--minimum-container-ttl-duration` (0).
    pub minimum_container_ttl: std::time::Duration,
    /// `--maximum-dead-containers-per-container` (1; negative: no limit).
    pub maximum_dead_containers_per_container: i32,
    /// `--maximum-dead-containers` (-1: no limit).
    pub maximum_dead_containers: i32,
    /// `--pod-infra-container-image`: never garbage collected.
    pub pod_infra_container_image: String,
    /// `--lock-file` (see [`crate::lock_file`]).
    pub lock_file: Option<PathBuf>,
    /// `--exit-on-lock-contention`.
    pub exit_on_lock_contention: bool,
    /// The log output: format, verbosity, destinations (`logging` and klog's flags).
    pub log: crate::logging::LogSettings,
    /// `--runtime-cgroups`: the runtime's cgroup (the summary's `runtime` system container).
    pub runtime_cgroups: String,
    /// `--cloud-provider=external`: a cloud controller manager initializes the node (see
    /// `kubelet_sources::apiserver::node::NodeConfig::external_cloud_provider`).
    pub external_cloud_provider: bool,
}

/// Graceful node shutdown's settings (`shutdownGracePeriod*`) for the engine.
pub fn node_shutdown_config(
    c: &KubeletConfiguration,
) -> kubelet_core::nodeshutdown::ShutdownConfig {
    kubelet_core::nodeshutdown::ShutdownConfig {
        grace_period: c.shutdown_grace_period.0,
        grace_period_critical_pods: c.shutdown_grace_period_critical_pods.0,
        by_pod_priority: c
            .shutdown_grace_period_by_pod_priority
            .iter()
            .map(|p| kubelet_core::nodeshutdown::PriorityGracePeriod {
                priority: p.priority,
                grace_seconds: p.shutdown_grace_period_seconds,
            })
            .collect(),
    }
}

impl LoadedConfig {
    /// The engine configuration (`kubelet_core::Config`) for this kubelet.
    pub fn engine_config(&self) -> kubelet_core::Config {
        let c = &self.config;
        let max_parallel = c
            .max_parallel_image_pulls
            .and_then(|n| usize::try_from(n).ok());
        kubelet_core::Config {
            node_name: self.node_name.clone(),
            node_labels: self.node_labels.clone(),
            root_dir: self.root_dir.clone(),
            sync_frequency: c.sync_frequency.0,
            volume_stats_agg_period: c.volume_stats_agg_period.0,
            max_pods: u32::try_from(c.max_pods).unwrap_or(0),
            serialize_image_pulls: c.serialize_image_pulls,
            max_parallel_image_pulls: max_parallel,
            cluster_dns: c.cluster_dns.clone(),
            cluster_domain: c.cluster_domain.clone(),
            resolv_conf: PathBuf::from(&c.resolv_conf),
            pod_logs_dir: PathBuf::from(&c.pod_logs_dir),
            evented_pleg: crate::feature_gates::FeatureGates::new(&c.feature_gates)
                .enabled("EventedPLEG"),
            allowed_unsafe_sysctls: c.allowed_unsafe_sysctls.clone(),
            minimum_container_ttl: self.minimum_container_ttl,
            max_dead_containers_per_container: usize::try_from(
                self.maximum_dead_containers_per_container,
            )
            .unwrap_or(usize::MAX),
            maximum_dead_containers: i64::from(self.maximum_dead_containers),
            eviction: self.eviction_config(),
            node_shutdown: node_shutdown_config(c),
            cpu_manager: kubelet_core::cpumanager::CpuManagerConfig {
                policy: kubelet_core::cpumanager::CpuManagerPolicy::parse(&c.cpu_manager_policy)
                    .unwrap_or_default(),
                reconcile_period: c.cpu_manager_reconcile_period.0,
                reserved_system_cpus: kubelet_core::cpumanager::CpuSet::parse(
                    &c.reserved_system_cpus,
                )
                .ok()
                .filter(|s| !s.is_empty()),
                policy_options: cpu_manager_options::policy_options(
                    &c.cpu_manager_policy_options,
                    &crate::feature_gates::FeatureGates::new(&c.feature_gates),
                )
                .map(|(options, _)| options)
                .unwrap_or_default(),
            },
            // As Go: with the MemoryManager gate off there is no memory manager at all.
            memory_manager: kubelet_core::memorymanager::MemoryManagerConfig {
                policy: crate::feature_gates::FeatureGates::new(&c.feature_gates)
                    .enabled("MemoryManager")
                    .then(|| {
                        kubelet_core::memorymanager::MemoryManagerPolicy::parse(
                            &c.memory_manager_policy,
                        )
                        .ok()
                    })
                    .flatten()
                    .unwrap_or_default(),
                reserved_memory: reserved_memory::reserved_memory(&c.reserved_memory)
                    .unwrap_or_default(),
            },
            topology_manager_policy: kubelet_core::topologymanager::TopologyPolicy::parse(
                &c.topology_manager_policy,
            )
            .unwrap_or_default(),
            topology_manager_max_numa_nodes: topology_manager_options::policy_options(
                &c.topology_manager_policy_options,
            )
            .map(|(max, _)| max)
            .unwrap_or(kubelet_core::topologymanager::MAX_NUMA_NODES),
            topology_manager_scope: kubelet_core::topologymanager::TopologyScope::parse(
                &c.topology_manager_scope,
            )
            .unwrap_or_default(),
            image_gc: kubelet_core::images::gc::ImageGcPolicy {
                high_threshold_percent: c.image_gc_high_threshold_percent,
                low_threshold_percent: c.image_gc_low_threshold_percent,
                min_age: c.image_minimum_gc_age.0,
                max_age: c.image_maximum_gc_age.0,
                pinned_images: std::iter::once(self.pod_infra_container_image.clone())
                    .filter(|i| !i.is_empty())
                    .collect(),
                ..Default::default()
            },
            container_logs: kubelet_core::logs::ContainerLogConfig {
                max_size: validate::log_max_size(&c.container_log_max_size).unwrap_or(10 << 20),
                max_files: usize::try_from(c.container_log_max_files).unwrap_or(0),
                max_workers: usize::try_from(c.container_log_max_workers).unwrap_or(1),
                monitor_interval: c.container_log_monitor_interval.0,
            },
            ..kubelet_core::Config::default()
        }
    }

    /// The eviction manager's configuration (`eviction*`; the allocatable copy of
    /// `memory.available` when `enforceNodeAllocatable` has `pods`).
    pub fn eviction_config(&self) -> kubelet_core::eviction::EvictionConfig {
        let c = &self.config;
        kubelet_core::eviction::EvictionConfig {
            hard: c.eviction_hard.clone(),
            soft: c.eviction_soft.clone(),
            soft_grace_period: c
                .eviction_soft_grace_period
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), parse_go_duration(v.trim()).ok()?)))
                .collect(),
            minimum_reclaim: c.eviction_minimum_reclaim.clone(),
            pressure_transition_period: c.eviction_pressure_transition_period.0,
            max_pod_grace_period_seconds: i64::from(c.eviction_max_pod_grace_period),
            enforce_pods_allocatable: c.enforce_node_allocatable.iter().any(|v| v == "pods"),
            ..kubelet_core::eviction::EvictionConfig::default()
        }
    }

    /// The file source configuration, when `staticPodPath` is set.
    pub fn file_source_config(&self) -> Option<kubelet_sources::file::Config> {
        (!self.config.static_pod_path.is_empty()).then(|| kubelet_sources::file::Config {
            path: PathBuf::from(&self.config.static_pod_path),
            node_name: self.node_name.clone(),
            check_frequency: self.config.file_check_frequency.0,
        })
    }

    /// The URL source configuration, when `staticPodURL` is set.
    pub fn http_source_config(&self) -> Option<kubelet_sources::http::Config> {
        (!self.config.static_pod_url.is_empty()).then(|| kubelet_sources::http::Config {
            url: self.config.static_pod_url.clone(),
            headers: self.config.static_pod_url_headers(),
            node_name: self.node_name.clone(),
            check_frequency: self.config.http_check_frequency.0,
        })
    }

    /// The CRI runtime endpoint.
    pub fn runtime_endpoint(&self) -> &str {
        &self.config.container_runtime_endpoint
    }

    /// The CRI image endpoint (the runtime endpoint unless set separately).
    pub fn image_endpoint(&self) -> &str {
        if self.config.image_service_endpoint.is_empty() {
            &self.config.container_runtime_endpoint
        } else {
            &self.config.image_service_endpoint
        }
    }
}

/// Parses a configuration file's contents (YAML or JSON). `path` is used in errors and to
/// resolve relative paths in the file (as Go does, relative to the file's directory).
pub fn parse_config(bytes: &[u8], path: &Path) -> Result<FileConfig, ConfigError> {
    let value = decode_config_value(bytes, path)?;
    let mut file = typed_config(&value, path)?;
    resolve_relative_paths(&mut file.config, path);
    Ok(file)
}

/// Decodes a configuration document (bounded like a manifest: size, depth and YAML alias
/// expansion) and checks its `kind` and `apiVersion`.
pub(crate) fn decode_config_value(bytes: &[u8], path: &Path) -> Result<Value, ConfigError> {
    let value: Value =
        kubelet_sources::decode::decode_one(bytes, &kubelet_sources::decode::MANIFEST_LIMITS)
            .map_err(|e| ConfigError::ParseFile {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
    let Value::Object(map) = &value else {
        return Err(ConfigError::ParseFile {
            path: path.to_path_buf(),
            reason: "the file is not a YAML/JSON object".into(),
        });
    };
    for (field, want) in [("kind", types::KIND), ("apiVersion", types::API_VERSION)] {
        let reason = match map.get(field).and_then(Value::as_str) {
            Some(got) if got == want => continue,
            Some(other) => format!("must be {want:?}, got {other:?}"),
            None => "required value".into(),
        };
        return Err(ConfigError::FileField {
            path: path.to_path_buf(),
            field: field.to_string(),
            reason,
        });
    }
    Ok(value)
}

/// The configuration a decoded document holds, with a warning for each field of `value`
/// that kubelet-rs does not know (`path` names the file in both).
pub(crate) fn typed_config(value: &Value, path: &Path) -> Result<FileConfig, ConfigError> {
    let config = deserialize_config(value, path)?;
    let reencoded = encode_config(&config, path)?;
    Ok(FileConfig {
        warnings: unknown_field_warnings(value, &reencoded, path),
        config,
    })
}

/// The configuration a decoded document holds; a field of the wrong type is an error naming
/// it and the file.
pub(crate) fn deserialize_config(
    value: &Value,
    path: &Path,
) -> Result<KubeletConfiguration, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| ConfigError::FileField {
        path: path.to_path_buf(),
        field: e.path().to_string(),
        reason: e.inner().to_string(),
    })
}

/// The configuration as JSON (what unknown fields are found against, and drop-ins merge
/// onto).
pub(crate) fn encode_config(c: &KubeletConfiguration, path: &Path) -> Result<Value, ConfigError> {
    serde_json::to_value(c).map_err(|e| ConfigError::ParseFile {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// A warning for each field of `given` that is not in `understood` (the configuration it
/// decoded to, encoded again).
pub(crate) fn unknown_field_warnings(
    given: &Value,
    understood: &Value,
    path: &Path,
) -> Vec<String> {
    let mut unknown = Vec::new();
    kubelet_sources::static_pod::unknown_fields(given, understood, "", &mut unknown);
    unknown
        .into_iter()
        .map(|f| {
            format!(
                "config file {}: unknown or unsupported field {f:?} (ignored)",
                path.display()
            )
        })
        .collect()
}

/// Resolves relative paths of the file against its directory (Go's `resolveRelativePaths`).
fn resolve_relative_paths(c: &mut KubeletConfiguration, file: &Path) {
    let Some(dir) = file.parent() else {
        return;
    };
    let fix = |p: &mut String| {
        if !p.is_empty() && Path::new(p.as_str()).is_relative() {
            *p = dir.join(p.as_str()).display().to_string();
        }
    };
    fix(&mut c.static_pod_path);
    fix(&mut c.tls_cert_file);
    fix(&mut c.tls_private_key_file);
    fix(&mut c.authentication.x509.client_ca_file);
    fix(&mut c.resolv_conf);
}

/// Reads and parses a configuration file (synchronous: call it before starting the runtime,
/// or from `spawn_blocking`).
pub fn load_file(path: &Path) -> Result<FileConfig, ConfigError> {
    parse_config(&read_bounded(path)?, path)
}

/// Reads a regular file of at most one byte over the manifest limit (the decoder refuses
/// that byte as too large).
pub(crate) fn read_bounded(path: &Path) -> Result<Vec<u8>, ConfigError> {
    use std::io::Read as _;
    let read_err = |source| ConfigError::ReadFile {
        path: path.to_path_buf(),
        error: source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    if !file.metadata().map_err(read_err)?.is_file() {
        return Err(read_err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let limit = kubelet_sources::decode::MANIFEST_LIMITS.max_bytes as u64 + 1;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).map_err(read_err)?;
    Ok(bytes)
}

/// Overlays the flags that were given on the command line onto `c`.
fn apply_flags(c: &mut KubeletConfiguration, f: &Flags, m: &ArgMatches) -> Result<(), ConfigError> {
    let set = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    macro_rules! overlay {
        ($($id:ident => $field:expr),* $(,)?) => {
            $( if set(stringify!($id)) { $field = f.$id.clone(); } )*
        };
    }
    overlay! {
        register_node => c.register_node,
        container_runtime_endpoint => c.container_runtime_endpoint,
        image_service_endpoint => c.image_service_endpoint,
        pod_manifest_path => c.static_pod_path,
        manifest_url => c.static_pod_url,
        sync_frequency => c.sync_frequency,
        file_check_frequency => c.file_check_frequency,
        http_check_frequency => c.http_check_frequency,
        max_pods => c.max_pods,
        pod_max_pids => c.pod_pids_limit,
        cluster_domain => c.cluster_domain,
        resolv_conf => c.resolv_conf,
        cgroup_driver => c.cgroup_driver,
        cgroup_root => c.cgroup_root,
        cgroups_per_qos => c.cgroups_per_qos,
        cpu_cfs_quota => c.cpu_cfs_quota,
        cpu_cfs_quota_period => c.cpu_cfs_quota_period,
        seccomp_default => c.seccomp_default,
        fail_swap_on => c.fail_swap_on,
        healthz_port => c.healthz_port,
        healthz_bind_address => c.healthz_bind_address,
        port => c.port,
        address => c.address,
        read_only_port => c.read_only_port,
        tls_cert_file => c.tls_cert_file,
        tls_private_key_file => c.tls_private_key_file,
        client_ca_file => c.authentication.x509.client_ca_file,
        anonymous_auth => c.authentication.anonymous.enabled,
        authentication_token_webhook => c.authentication.webhook.enabled,
        authorization_mode => c.authorization.mode,
        runtime_request_timeout => c.runtime_request_timeout,
        node_status_update_frequency => c.node_status_update_frequency,
        reserved_cpus => c.reserved_system_cpus,
        serialize_image_pulls => c.serialize_image_pulls,
        image_gc_high_threshold => c.image_gc_high_threshold_percent,
        image_gc_low_threshold => c.image_gc_low_threshold_percent,
        minimum_image_ttl_duration => c.image_minimum_gc_age,
        eviction_max_pod_grace_period => c.eviction_max_pod_grace_period,
        eviction_pressure_transition_period => c.eviction_pressure_transition_period,
        container_log_max_size => c.container_log_max_size,
        container_log_max_files => c.container_log_max_files,
        kube_api_qps => c.kube_api_qps,
        kube_api_burst => c.kube_api_burst,
        rotate_certificates => c.rotate_certificates,
    }
    if set("manifest_url_header") {
        c.static_pod_url_header = flags::parse_headers(&f.manifest_url_header)?;
    }
    if set("register_with_taints") {
        c.register_with_taints = flags::parse_taints(&f.register_with_taints)?;
    }
    if set("cluster_dns") {
        c.cluster_dns = flags::parse_list(&f.cluster_dns);
    }
    if set("allowed_unsafe_sysctls") {
        // pflag's string slice: an empty value is an empty list.
        c.allowed_unsafe_sysctls = flags::parse_list(&f.allowed_unsafe_sysctls);
    }
    if set("enforce_node_allocatable") {
        c.enforce_node_allocatable = flags::parse_list(&f.enforce_node_allocatable);
    }
    if set("kube_reserved") {
        c.kube_reserved = flags::parse_map("kube-reserved", &f.kube_reserved, '=')?;
    }
    if set("system_reserved") {
        c.system_reserved = flags::parse_map("system-reserved", &f.system_reserved, '=')?;
    }
    if set("eviction_hard") {
        c.eviction_hard = flags::parse_map("eviction-hard", &f.eviction_hard, '<')?;
    }
    if set("eviction_soft") {
        c.eviction_soft = flags::parse_map("eviction-soft", &f.eviction_soft, '<')?;
    }
    if set("eviction_soft_grace_period") {
        c.eviction_soft_grace_period = flags::parse_map(
            "eviction-soft-grace-period",
            &f.eviction_soft_grace_period,
            '=',
        )?;
    }
    if set("eviction_minimum_reclaim") {
        c.eviction_minimum_reclaim =
            flags::parse_map("eviction-minimum-reclaim", &f.eviction_minimum_reclaim, '=')?;
    }
    Ok(())
}

/// The machine's host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
fn system_hostname() -> Result<String, String> {
    match std::fs::read_to_string("/proc/sys/kernel/hostname") {
        Ok(h) => Ok(h),
        Err(e) => std::env::var("HOSTNAME").map_err(|_| format!("reading the host name: {e}")),
    }
}

/// Go's `GetHostname`: the override or the host name, trimmed and lower-cased, non-empty.
fn node_name(
    override_name: Option<&str>,
    hostname: impl FnOnce() -> Result<String, String>,
) -> Result<String, ConfigError> {
    let raw = match override_name.map(str::trim).filter(|s| !s.is_empty()) {
        Some(o) => o.to_string(),
        None => hostname().map_err(|reason| ConfigError::NodeName { reason })?,
    };
    let name = raw.trim().to_lowercase();
    if name.is_empty() {
        return Err(ConfigError::NodeName {
            reason: "empty hostname is invalid".into(),
        });
    }
    Ok(name)
}

/// Parses the command line (`args` includes the program name, like `std::env::args_os()`),
/// loads `--config` if given, overlays the explicitly given flags, validates, and resolves the
/// node name. Synchronous (reads the config file): call it before starting the runtime.
pub fn load(args: impl IntoIterator<Item = OsString>) -> Result<LoadedConfig, ConfigError> {
    load_with_hostname(args, system_hostname)
}

/// [`load`] with an injectable host name lookup (for tests and embedding).
pub fn load_with_hostname(
    args: impl IntoIterator<Item = OsString>,
    hostname: impl FnOnce() -> Result<String, String>,
) -> Result<LoadedConfig, ConfigError> {
    let matches = crate::go_flags::register(Flags::command()).try_get_matches_from(args)?;
    let mut flags = Flags::from_arg_matches(&matches)?;
    // Go takes an empty path as unset (`--config=` in a unit file).
    for path in [
        &mut flags.config,
        &mut flags.config_dir,
        &mut flags.kubeconfig,
        &mut flags.bootstrap_kubeconfig,
        &mut flags.image_credential_provider_config,
        &mut flags.image_credential_provider_bin_dir,
        &mut flags.lock_file,
    ] {
        if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            *path = None;
        }
    }
    if flags.help {
        let help = crate::go_flags::register(Flags::command()).render_help();
        return Err(ConfigError::Help(help.to_string()));
    }
    if flags.version != "false" {
        return Err(ConfigError::Version(Flags::command().render_version()));
    }
    let (mut config, mut warnings) = match flags.config.as_deref() {
        Some(path) => {
            let file = load_file(path)?;
            (file.config, file.warnings)
        }
        None => {
            let mut c = KubeletConfiguration::default();
            c.apply_legacy_defaults();
            (c, Vec::new())
        }
    };
    if let Some(dir) = flags.config_dir.as_deref() {
        let merged = drop_in::merge_drop_ins(&config, dir)?;
        config = merged.config;
        warnings.extend(merged.warnings);
    }
    apply_flags(&mut config, &flags, &matches)?;
    let flag_warnings = crate::go_flags::apply(&mut config, &matches)?;
    // `-v` is `logging.verbosity`'s flag: given, it wins over the file.
    if matches.value_source("verbosity") == Some(ValueSource::CommandLine) {
        config.logging.verbosity = u32::from(flags.verbosity);
    }
    // Go sets the gates before it validates the rest.
    let gates = crate::feature_gates::check(&config.feature_gates);
    if !gates.errors.is_empty() {
        return Err(ConfigError::FeatureGates {
            errors: gates.errors,
        });
    }
    let errors = validate::validate(&config);
    if !errors.is_empty() {
        return Err(ConfigError::Invalid { errors });
    }
    warnings.extend(flag_warnings);
    warnings.extend(gates.warnings);
    match flags.cloud_provider.as_str() {
        "" | "external" => {}
        other => warnings.push(format!(
            "--cloud-provider={other:?}: in-tree cloud providers are not supported by kubelet-rs \
             (current Go kubelets accept only \"external\"); the node registers without a cloud provider"
        )),
    }
    let klog = crate::logging::KlogFlags::from_matches(&matches)?;
    let (log, log_warnings) = crate::logging::LogSettings::new(&config.logging, &klog);
    warnings.extend(log_warnings);
    warnings.extend(support::unsupported_settings(&config));
    let node_ips = match flags.node_ip.as_deref() {
        Some(v) => flags::parse_node_ips(v)?,
        None => Vec::new(),
    };
    let node_labels = flags::parse_map("node-labels", &flags.node_labels, '=')?;
    let node_name = node_name(flags.hostname_override.as_deref(), hostname)?;
    Ok(LoadedConfig {
        config,
        config_file: flags.config.clone(),
        kubeconfig: flags.kubeconfig.clone(),
        bootstrap_kubeconfig: flags.bootstrap_kubeconfig.clone(),
        cert_dir: if flags.cert_dir.is_empty() {
            flags.root_dir.join("pki")
        } else {
            PathBuf::from(&flags.cert_dir)
        },
        image_credential_provider_config: flags.image_credential_provider_config.clone(),
        image_credential_provider_bin_dir: flags.image_credential_provider_bin_dir.clone(),
        node_name,
        node_ips,
        node_labels,
        root_dir: flags.root_dir.clone(),
        runonce: flags.runonce,
        verbosity: u8::try_from(log.verbosity).unwrap_or(u8::MAX),
        log,
        warnings,
        minimum_container_ttl: flags.minimum_container_ttl_duration.0,
        maximum_dead_containers_per_container: flags.maximum_dead_containers_per_container,
        maximum_dead_containers: flags.maximum_dead_containers,
        pod_infra_container_image: flags.pod_infra_container_image.clone(),
        external_cloud_provider: flags.cloud_provider == "external",
        runtime_cgroups: flags.runtime_cgroups.clone(),
        lock_file: flags.lock_file.clone(),
        exit_on_lock_contention: flags.exit_on_lock_contention,
    })
}

#[cfg(test)]
mod tests;

/// Test helper: loads `kubelet <args>` with a fixed hostname; panics on an error.
#[cfg(test)]
pub(crate) fn load_for_test(args: &[&str], hostname: &str) -> LoadedConfig {
    let argv = std::iter::once("kubelet")
        .chain(args.iter().copied())
        .map(OsString::from);
    let hostname = hostname.to_string();
    load_with_hostname(argv, move || Ok(hostname.clone())).expect("load")
}
