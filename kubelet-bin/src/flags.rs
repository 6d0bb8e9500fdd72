//! The kubelet's command line, with the Go kubelet's flag names and defaults for what
//! kubelet-rs implements. Long flags take `--flag=value` or `--flag value`; boolean flags are
//! `--flag` (true) or `--flag=false`. Verbosity is `-v N` / `--v=N`.
//!
//! Flags that mirror a `KubeletConfiguration` field override the `--config` file only when they
//! are given on the command line (see [`crate::config::load`]). The rest of the Go kubelet's
//! flags are accepted by [`crate::go_flags`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use clap::{ArgAction, Parser};

use crate::config::duration::GoDuration;
use crate::config::types::Taint;

/// The kubelet's command line.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "kubelet",
    version,
    // Go's `--help` and `--version` are flags with values (`--help=false` does nothing).
    disable_help_flag = true,
    disable_version_flag = true,
    // pflag: a flag given again replaces its earlier value (list flags append).
    args_override_self = true,
    about = "kubelet-rs: the Kubernetes node agent",
    long_about = "The kubelet runs the pods of its node: static pods from a manifest path or URL, \
                  through a CRI container runtime."
)]
pub struct Flags {
    /// Print this help and exit (`--help=false`: no effect, as in Go).
    #[arg(short = 'h', long = "help", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = go_bool)]
    pub help: bool,
    /// Print the version and exit (`true` or `raw`; `false`: no effect, as in Go).
    #[arg(long = "version", default_value = "false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_name = "true|false|raw")]
    pub version: String,
    /// Path to a KubeletConfiguration file; command-line flags override its values.
    #[arg(long = "config", value_name = "FILE", value_parser = any_path())]
    pub config: Option<PathBuf>,
    /// Drop-in configuration directory: its `*.conf` KubeletConfiguration files are merged
    /// over `--config` in lexical order; command-line flags still win.
    #[arg(long = "config-dir", value_name = "DIR", value_parser = any_path())]
    pub config_dir: Option<PathBuf>,
    /// kubeconfig file for talking to the API server (standalone mode when unset).
    #[arg(long = "kubeconfig", value_name = "FILE", value_parser = any_path())]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig used to obtain a client certificate for --kubeconfig.
    #[arg(long = "bootstrap-kubeconfig", value_name = "FILE", value_parser = any_path())]
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// Use this name as the node name instead of the host name.
    #[arg(long = "hostname-override", value_name = "NAME")]
    pub hostname_override: Option<String>,
    /// IP address(es) of the node (comma-separated, at most one per family).
    #[arg(long = "node-ip", value_name = "IP[,IP]")]
    pub node_ip: Option<String>,
    /// Labels to add when registering the node (key=value,...); repeatable.
    #[arg(long = "node-labels", value_name = "K=V,...", action = ArgAction::Append)]
    pub node_labels: Vec<String>,
    /// Register the node with the API server.
    #[arg(long = "register-node", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub register_node: bool,
    /// Taints to register the node with (key=value:Effect,...); repeatable.
    #[arg(long = "register-with-taints", value_name = "TAINTS", action = ArgAction::Append)]
    pub register_with_taints: Vec<String>,
    /// Directory for kubelet files (volume mounts, pod directories).
    #[arg(
        long = "root-dir",
        default_value = "/var/lib/kubelet",
        value_name = "DIR"
    )]
    pub root_dir: PathBuf,
    /// The CRI runtime endpoint.
    #[arg(
        long = "container-runtime-endpoint",
        default_value = "unix:///run/containerd/containerd.sock",
        value_name = "ENDPOINT"
    )]
    pub container_runtime_endpoint: String,
    /// The CRI image endpoint (default: the runtime endpoint).
    #[arg(
        long = "image-service-endpoint",
        default_value = "",
        value_name = "ENDPOINT"
    )]
    pub image_service_endpoint: String,
    /// Static pod manifest file or directory.
    #[arg(long = "pod-manifest-path", default_value = "", value_name = "PATH")]
    pub pod_manifest_path: String,
    /// URL to fetch static pod manifests from.
    #[arg(long = "manifest-url", default_value = "", value_name = "URL")]
    pub manifest_url: String,
    /// HTTP headers for --manifest-url ('Key:Value,...'); repeatable.
    #[arg(long = "manifest-url-header", value_name = "K:V,...", action = ArgAction::Append)]
    pub manifest_url_header: Vec<String>,
    /// Run the static pods once and exit.
    #[arg(long = "runonce", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub runonce: bool,
    /// Log verbosity (0-10).
    #[arg(short = 'v', long = "v", default_value_t = 0, value_name = "LEVEL",
          value_parser = clap::value_parser!(u8).range(0..=10))]
    pub verbosity: u8,
    /// Max period between pod syncs.
    #[arg(
        long = "sync-frequency",
        default_value = "1m0s",
        value_name = "DURATION"
    )]
    pub sync_frequency: GoDuration,
    /// Period of static pod path rescans.
    #[arg(
        long = "file-check-frequency",
        default_value = "20s",
        value_name = "DURATION"
    )]
    pub file_check_frequency: GoDuration,
    /// Period of manifest URL polls.
    #[arg(
        long = "http-check-frequency",
        default_value = "20s",
        value_name = "DURATION"
    )]
    pub http_check_frequency: GoDuration,
    /// Maximum pods on this node.
    #[arg(
        long = "max-pods",
        default_value_t = 110,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub max_pods: i32,
    /// Max pids per pod (-1: unlimited).
    #[arg(long = "pod-max-pids", default_value_t = -1, value_name = "N", allow_negative_numbers = true)]
    pub pod_max_pids: i64,
    /// DNS server IPs for pods (comma-separated); repeatable.
    #[arg(long = "cluster-dns", value_name = "IP,...", action = ArgAction::Append)]
    pub cluster_dns: Vec<String>,
    /// Cluster domain appended to pod DNS search paths.
    #[arg(long = "cluster-domain", default_value = "", value_name = "DOMAIN")]
    pub cluster_domain: String,
    /// Resolver configuration file for pods.
    #[arg(
        long = "resolv-conf",
        default_value = "/etc/resolv.conf",
        value_name = "FILE"
    )]
    pub resolv_conf: String,
    /// Cgroup driver (cgroupfs).
    #[arg(
        long = "cgroup-driver",
        default_value = "cgroupfs",
        value_name = "DRIVER"
    )]
    pub cgroup_driver: String,
    /// Root cgroup for pods.
    #[arg(long = "cgroup-root", default_value = "", value_name = "CGROUP")]
    pub cgroup_root: String,
    /// The container runtime's cgroup, reported as the `runtime` system container of
    /// `/stats/summary`.
    #[arg(long = "runtime-cgroups", default_value = "", value_name = "CGROUP")]
    pub runtime_cgroups: String,
    /// Create the QoS cgroup hierarchy.
    #[arg(long = "cgroups-per-qos", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub cgroups_per_qos: bool,
    /// Enforce container CPU limits with CFS quota.
    #[arg(long = "cpu-cfs-quota", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub cpu_cfs_quota: bool,
    /// CFS quota period.
    #[arg(
        long = "cpu-cfs-quota-period",
        default_value = "100ms",
        value_name = "DURATION"
    )]
    pub cpu_cfs_quota_period: GoDuration,
    /// RuntimeDefault seccomp for containers that set no profile.
    #[arg(long = "seccomp-default", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub seccomp_default: bool,
    /// Comma-separated unsafe sysctls or patterns (`net.core.*`) pods may set.
    #[arg(
        long = "allowed-unsafe-sysctls",
        value_delimiter = ',',
        value_name = "LIST"
    )]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Refuse to start when swap is enabled.
    #[arg(long = "fail-swap-on", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub fail_swap_on: bool,
    /// Port of the local healthz endpoint (0: disabled).
    #[arg(
        long = "healthz-port",
        default_value_t = 10248,
        value_name = "PORT",
        allow_negative_numbers = true
    )]
    pub healthz_port: i32,
    /// Address of the healthz endpoint.
    #[arg(
        long = "healthz-bind-address",
        default_value = "127.0.0.1",
        value_name = "IP"
    )]
    pub healthz_bind_address: String,
    /// Port of the kubelet server.
    #[arg(
        long = "port",
        default_value_t = 10250,
        value_name = "PORT",
        allow_negative_numbers = true
    )]
    pub port: i32,
    /// Address of the kubelet server.
    #[arg(long = "address", default_value = "0.0.0.0", value_name = "IP")]
    pub address: String,
    /// Read-only port without authentication (0: disabled).
    #[arg(
        long = "read-only-port",
        default_value_t = 10255,
        value_name = "PORT",
        allow_negative_numbers = true
    )]
    pub read_only_port: i32,
    /// Serving certificate.
    #[arg(long = "tls-cert-file", default_value = "", value_name = "FILE")]
    pub tls_cert_file: String,
    /// Serving key.
    #[arg(long = "tls-private-key-file", default_value = "", value_name = "FILE")]
    pub tls_private_key_file: String,
    /// CA bundle for client certificate authentication.
    #[arg(long = "client-ca-file", default_value = "", value_name = "FILE")]
    pub client_ca_file: String,
    /// Allow anonymous requests to the kubelet server.
    #[arg(long = "anonymous-auth", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub anonymous_auth: bool,
    /// Authenticate bearer tokens with TokenReview.
    #[arg(long = "authentication-token-webhook", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub authentication_token_webhook: bool,
    /// Authorization mode (AlwaysAllow or Webhook).
    #[arg(
        long = "authorization-mode",
        default_value = "AlwaysAllow",
        value_name = "MODE"
    )]
    pub authorization_mode: String,
    /// Timeout of runtime requests.
    #[arg(
        long = "runtime-request-timeout",
        default_value = "2m0s",
        value_name = "DURATION"
    )]
    pub runtime_request_timeout: GoDuration,
    /// Node status computation period.
    #[arg(
        long = "node-status-update-frequency",
        default_value = "10s",
        value_name = "DURATION"
    )]
    pub node_status_update_frequency: GoDuration,
    /// Resources reserved for Kubernetes components (cpu=200m,memory=500Mi,...).
    #[arg(long = "kube-reserved", value_name = "K=V,...", action = ArgAction::Append)]
    pub kube_reserved: Vec<String>,
    /// Resources reserved for the system (cpu=200m,memory=500Mi,...).
    #[arg(long = "system-reserved", value_name = "K=V,...", action = ArgAction::Append)]
    pub system_reserved: Vec<String>,
    /// CPUs reserved for the system (cpuset list, e.g. 0-1).
    #[arg(long = "reserved-cpus", default_value = "", value_name = "CPUS")]
    pub reserved_cpus: String,
    /// What node allocatable is enforced on (pods,system-reserved,kube-reserved or none).
    #[arg(long = "enforce-node-allocatable", value_name = "LIST", action = ArgAction::Append)]
    pub enforce_node_allocatable: Vec<String>,
    /// Hard eviction thresholds (memory.available<100Mi,nodefs.available<10%,...).
    #[arg(long = "eviction-hard", value_name = "SIGNAL<VALUE,...", action = ArgAction::Append)]
    pub eviction_hard: Vec<String>,
    /// Soft eviction thresholds (memory.available<1.5Gi,...).
    #[arg(long = "eviction-soft", value_name = "SIGNAL<VALUE,...", action = ArgAction::Append)]
    pub eviction_soft: Vec<String>,
    /// Grace periods of the soft eviction thresholds (memory.available=1m30s,...).
    #[arg(long = "eviction-soft-grace-period", value_name = "SIGNAL=DURATION,...", action = ArgAction::Append)]
    pub eviction_soft_grace_period: Vec<String>,
    /// Minimum reclaim per signal once a threshold is met (imagefs.available=2Gi,...).
    #[arg(long = "eviction-minimum-reclaim", value_name = "SIGNAL=VALUE,...", action = ArgAction::Append)]
    pub eviction_minimum_reclaim: Vec<String>,
    /// The most grace (seconds) a soft eviction gives a pod.
    #[arg(
        long = "eviction-max-pod-grace-period",
        default_value_t = 0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    pub eviction_max_pod_grace_period: i32,
    /// How long a pressure condition is held after it cleared.
    #[arg(
        long = "eviction-pressure-transition-period",
        default_value = "5m0s",
        value_name = "DURATION"
    )]
    pub eviction_pressure_transition_period: GoDuration,
    /// Minimum age of an unused image before it is garbage collected.
    #[arg(
        long = "minimum-image-ttl-duration",
        default_value = "2m0s",
        value_name = "DURATION"
    )]
    pub minimum_image_ttl_duration: GoDuration,
    /// Image never removed by image garbage collection (the sandbox image).
    #[arg(
        long = "pod-infra-container-image",
        default_value = "k8s.gcr.io/pause:3.2",
        value_name = "IMAGE"
    )]
    pub pod_infra_container_image: String,
    /// Container log size at which it is rotated (e.g. 10Mi).
    #[arg(
        long = "container-log-max-size",
        default_value = "10Mi",
        value_name = "QUANTITY"
    )]
    pub container_log_max_size: String,
    /// Container log files kept, the current one included.
    #[arg(
        long = "container-log-max-files",
        default_value_t = 5,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub container_log_max_files: i32,
    /// Dead containers younger than this are not garbage collected.
    #[arg(
        long = "minimum-container-ttl-duration",
        default_value = "0s",
        value_name = "DURATION"
    )]
    pub minimum_container_ttl_duration: GoDuration,
    /// Dead instances kept per container (negative: no limit).
    #[arg(
        long = "maximum-dead-containers-per-container",
        default_value_t = 1,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub maximum_dead_containers_per_container: i32,
    /// Dead containers kept on the node (negative: no limit).
    #[arg(
        long = "maximum-dead-containers",
        default_value_t = -1,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub maximum_dead_containers: i32,
    /// Pull images one at a time.
    #[arg(long = "serialize-image-pulls", default_value = "true", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub serialize_image_pulls: bool,
    /// Image GC high threshold (percent of disk usage).
    #[arg(
        long = "image-gc-high-threshold",
        default_value_t = 85,
        value_name = "PERCENT",
        allow_negative_numbers = true
    )]
    pub image_gc_high_threshold: i32,
    /// Image GC low threshold (percent of disk usage).
    #[arg(
        long = "image-gc-low-threshold",
        default_value_t = 80,
        value_name = "PERCENT",
        allow_negative_numbers = true
    )]
    pub image_gc_low_threshold: i32,
    /// API server QPS.
    #[arg(
        long = "kube-api-qps",
        default_value_t = 50,
        value_name = "QPS",
        allow_negative_numbers = true
    )]
    pub kube_api_qps: i32,
    /// API server burst.
    #[arg(
        long = "kube-api-burst",
        default_value_t = 100,
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub kube_api_burst: i32,
    /// Directory of the TLS certificates (default: `<root-dir>/pki`).
    #[arg(long = "cert-dir", default_value = "", value_name = "DIR")]
    pub cert_dir: String,
    /// Renew the client certificate from the cluster before it expires.
    #[arg(long = "rotate-certificates", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set)]
    pub rotate_certificates: bool,
    /// Credential provider plugin configuration file (CredentialProviderConfig).
    #[arg(long = "image-credential-provider-config", value_name = "FILE", value_parser = any_path())]
    pub image_credential_provider_config: Option<PathBuf>,
    /// Directory of the credential provider plugin executables.
    #[arg(long = "image-credential-provider-bin-dir", value_name = "DIR", value_parser = any_path())]
    pub image_credential_provider_bin_dir: Option<PathBuf>,
    /// The lock file the kubelet holds an exclusive `flock` on while it runs (empty: none).
    #[arg(long = "lock-file", value_name = "FILE", value_parser = any_path())]
    pub lock_file: Option<PathBuf>,
    /// Exit when another process opens the lock file (needs `--lock-file`).
    #[arg(long = "exit-on-lock-contention", default_value = "false", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", action = ArgAction::Set,
          value_parser = go_bool)]
    pub exit_on_lock_contention: bool,
    /// The cloud provider: `external` (a cloud controller manager initializes the node) or
    /// empty.
    #[arg(long = "cloud-provider", default_value = "", value_name = "PROVIDER")]
    pub cloud_provider: String,
}

/// A path value that may be empty (Go takes `--flag=` as unset; clap's path parser refuses it).
fn any_path() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().map(PathBuf::from)
}

/// Go's `strconv.ParseBool` as a clap value parser (clap names the flag in its error).
fn go_bool(s: &str) -> Result<bool, String> {
    crate::go_flags::parse_go_bool("", s).map_err(|_| "not a boolean (strconv.ParseBool)".into())
}

/// A flag value that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: invalid value {value:?}: {reason}")]
pub struct FlagValueError {
    /// The flag's name, without dashes.
    pub flag: &'static str,
    /// The offending value (or entry).
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

fn entries(values: &[String]) -> impl Iterator<Item = &str> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
}

/// Parses repeated `k<sep>v,k<sep>v` values (pflag's mapStringString, or the `<`-separated
/// map of `--eviction-hard`) into one map; later keys win.
pub fn parse_map(
    flag: &'static str,
    values: &[String],
    sep: char,
) -> Result<BTreeMap<String, String>, FlagValueError> {
    let mut out = BTreeMap::new();
    for entry in entries(values) {
        let Some((k, v)) = entry.split_once(sep) else {
            return Err(FlagValueError {
                flag,
                value: entry.to_string(),
                reason: format!("expected key{sep}value"),
            });
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(FlagValueError {
                flag,
                value: entry.to_string(),
                reason: "empty key".into(),
            });
        }
        out.insert(k.to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Parses repeated `--manifest-url-header 'Key:Value,Key2:Value2'` values into a multimap.
pub fn parse_headers(values: &[String]) -> Result<BTreeMap<String, Vec<String>>, FlagValueError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in entries(values) {
        let Some((k, v)) = entry.split_once(':') else {
            return Err(FlagValueError {
                flag: "manifest-url-header",
                value: entry.to_string(),
                reason: "expected Key:Value".into(),
            });
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(FlagValueError {
                flag: "manifest-url-header",
                value: entry.to_string(),
                reason: "empty header name".into(),
            });
        }
        out.entry(k.to_string())
            .or_default()
            .push(v.trim().to_string());
    }
    Ok(out)
}

/// Parses `--register-with-taints` (`key=value:Effect` or `key:Effect`, comma-separated).
pub fn parse_taints(values: &[String]) -> Result<Vec<Taint>, FlagValueError> {
    let err = |value: &str, reason: &str| FlagValueError {
        flag: "register-with-taints",
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let mut out = Vec::new();
    for entry in entries(values) {
        let Some((kv, effect)) = entry.rsplit_once(':') else {
            return Err(err(entry, "expected key=value:Effect or key:Effect"));
        };
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(err(
                entry,
                "effect must be NoSchedule, PreferNoSchedule or NoExecute",
            ));
        }
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.is_empty() {
            return Err(err(entry, "empty key"));
        }
        out.push(Taint {
            key: key.to_string(),
            value: value.to_string(),
            effect: effect.to_string(),
        });
    }
    Ok(out)
}

/// Parses `--node-ip` (comma-separated, at most two: one IPv4 and one IPv6).
pub fn parse_node_ips(value: &str) -> Result<Vec<IpAddr>, FlagValueError> {
    let err = |v: &str, reason: &str| FlagValueError {
        flag: "node-ip",
        value: v.to_string(),
        reason: reason.to_string(),
    };
    let ips = entries(std::slice::from_ref(&value.to_string()))
        .map(|e| e.parse::<IpAddr>().map_err(|_| err(e, "not an IP address")))
        .collect::<Result<Vec<_>, _>>()?;
    match ips.as_slice() {
        [] | [_] => Ok(ips),
        [a, b] if a.is_ipv4() != b.is_ipv4() => Ok(ips),
        _ => Err(err(value, "at most one IPv4 and one IPv6 address")),
    }
}

/// Splits repeated comma-separated list values (pflag's StringSlice).
pub fn parse_list(values: &[String]) -> Vec<String> {
    entries(values).map(str::to_string).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn map_parsing_table() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let ok = parse_map(
            "kube-reserved",
            &v(&["cpu=200m, memory=1Gi", "cpu=300m"]),
            '=',
        )
        .unwrap();
        assert_eq!(ok.get("cpu").map(String::as_str), Some("300m"));
        assert_eq!(ok.get("memory").map(String::as_str), Some("1Gi"));
        let ev = parse_map(
            "eviction-hard",
            &v(&["memory.available<100Mi,nodefs.available<10%"]),
            '<',
        )
        .unwrap();
        assert_eq!(ev.len(), 2);
        let bad = [
            ("kube-reserved", "cpu", '='),
            ("kube-reserved", "=1", '='),
            ("eviction-hard", "memory.available=1", '<'),
        ];
        for (flag, value, sep) in bad {
            let e = parse_map(flag, &v(&[value]), sep).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("--{flag}: invalid value")),
                "{e}"
            );
        }
    }

    #[test]
    fn headers_taints_ips() {
        let h = parse_headers(&["a:hello,b:again".into(), "b:beautiful".into()]).unwrap();
        assert_eq!(h["a"], ["hello"]);
        assert_eq!(h["b"], ["again", "beautiful"]);
        assert!(parse_headers(&["nocolon".into()]).is_err());

        let t = parse_taints(&["k=v:NoSchedule,dedicated:NoExecute".into()]).unwrap();
        assert_eq!(
            t[0],
            Taint {
                key: "k".into(),
                value: "v".into(),
                effect: "NoSchedule".into()
            }
        );
        assert_eq!(
            t[1],
            Taint {
                key: "dedicated".into(),
                value: "".into(),
                effect: "NoExecute".into()
            }
        );
        assert!(parse_taints(&["k=v:Sometimes".into()]).is_err());
        assert!(parse_taints(&["k=v".into()]).is_err());

        assert_eq!(parse_node_ips("10.0.0.1").unwrap().len(), 1);
        assert_eq!(parse_node_ips("10.0.0.1,fd00::1").unwrap().len(), 2);
        assert!(parse_node_ips("10.0.0.1,10.0.0.2").is_err());
        assert!(parse_node_ips("nope").is_err());
    }
}
