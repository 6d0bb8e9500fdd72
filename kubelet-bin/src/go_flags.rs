//! The rest of the Go kubelet's command line: every flag of the Go kubelet from 1.25 to the
//! current release (and the dockershim and Dynamic Kubelet Config flags of earlier ones) that [`crate::flags::Flags`] does not declare, so that a node's unit
//! file, its `kubeadm-flags.env` and its installer's flags start kubelet-rs unchanged. No
//! flag the Go kubelet accepts is refused.
//!
//! Each flag of [`TABLE`] is parsed as Go's pflag parses its type ([`Kind`]: booleans as
//! `strconv.ParseBool`, `key=value` maps, comma lists, durations, NUMA memory
//! reservations); a malformed value is an error naming the flag. What it then does
//! ([`Effect`]):
//! - [`Effect::Config`]: it mirrors a `KubeletConfiguration` field and, given on the command
//!   line, overrides the `--config` file (Go's `kubeletConfigFlagPrecedence`; feature gates
//!   are merged, the flag's winning). The field is honoured or reported as the file's would
//!   be ([`crate::config::support`]).
//! - [`Effect::Klog`]: one of klog's output flags kubelet-rs acts on
//!   ([`crate::logging::KlogFlags`]).
//! - [`Effect::Unsupported`]: the Go kubelet acts on it and kubelet-rs does not: a warning
//!   when it is set to other than Go's default.
//!
//! A flag Go marks deprecated prints Go's own deprecation line (`Flag --x has been
//! deprecated, …`) whenever it is given, as pflag does; one removed from Go after 1.25 says
//! so.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde_json::{Map as JsonMap, Value};

use crate::config::duration::parse_go_duration;
use crate::config::KubeletConfiguration;
use crate::flags::{parse_map, FlagValueError};

/// How Go parses a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `strconv.ParseBool`; `--flag` alone is true.
    Bool,
    /// A 32-bit integer.
    Int32,
    /// A 64-bit integer.
    Int64,
    /// An unsigned 64-bit integer.
    Uint64,
    /// A string.
    Str,
    /// A Go duration (`1m30s`).
    Duration,
    /// A comma-separated list; repeated flags append.
    List,
    /// `key=value,…`; repeated flags add.
    Map,
    /// `name=bool,…` (feature gates).
    MapBool,
    /// `--reserved-memory`: `numa:type=quantity[,type=quantity…][;numa:…]`.
    ReservedMemory,
    /// klog's `--vmodule`: `pattern=N[,pattern=N…]`.
    VModule,
}

/// What a flag does in kubelet-rs. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Overlays the `KubeletConfiguration` field at this dotted JSON path.
    Config(&'static str),
    /// Go acts on it, kubelet-rs does not.
    Unsupported,
    /// One of klog's flags kubelet-rs acts on ([`crate::logging::KlogFlags`]).
    Klog,
}

/// One flag of the Go kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoFlag {
    /// The name, without dashes.
    pub name: &'static str,
    /// How its value is parsed.
    pub kind: Kind,
    /// Go's default, as Go prints it at start-up (values equal to it warn of nothing).
    pub default: &'static str,
    /// What it does here.
    pub effect: Effect,
    /// Go's deprecation message, if Go deprecates it.
    pub deprecated: Option<&'static str>,
    /// The Go release that removed it, if it is gone from current Go kubelets.
    pub removed_in: Option<&'static str>,
    /// Help text.
    pub help: &'static str,
}

/// What Go prints for every `KubeletConfiguration` flag given on the command line.
pub const CONFIG_FILE: &str = "This parameter should be set via the config file specified by the Kubelet's --config flag. See https://kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/ for more information.";
const CADVISOR: &str = "This is a cadvisor flag that was mistakenly registered with the Kubelet. Due to legacy concerns, it will follow the standard CLI deprecation timeline before being removed.";
const KLOG: &str = "will be removed in a future release, see https://github.com/kubernetes/enhancements/tree/master/keps/sig-instrumentation/2845-deprecate-klog-specific-flags-in-k8s-components";

/// A `KubeletConfiguration` flag: Go deprecates them all in favour of the file.
const fn config(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    path: &'static str,
    help: &'static str,
) -> GoFlag {
    GoFlag {
        name,
        kind,
        default,
        effect: Effect::Config(path),
        deprecated: Some(CONFIG_FILE),
        removed_in: None,
        help,
    }
}

/// A `KubeletConfiguration` flag Go does not deprecate.
const fn config_flag(flag: GoFlag) -> GoFlag {
    GoFlag {
        deprecated: None,
        ..flag
    }
}

/// Gone from the Go kubelet since `version`.
const fn removed(flag: GoFlag, version: &'static str) -> GoFlag {
    GoFlag {
        removed_in: Some(version),
        ..flag
    }
}

const fn unsupported(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    help: &'static str,
) -> GoFlag {
    GoFlag {
        name,
        kind,
        default,
        effect: Effect::Unsupported,
        deprecated: None,
        removed_in: None,
        help,
    }
}

const fn deprecated(flag: GoFlag, message: &'static str) -> GoFlag {
    GoFlag {
        deprecated: Some(message),
        ..flag
    }
}

/// A dockershim flag, gone with it in 1.24.
const fn dockershim(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    help: &'static str,
) -> GoFlag {
    removed(
        deprecated(
            unsupported(name, kind, default, help),
            "will be removed along with dockershim.",
        ),
        "1.24",
    )
}

const fn cadvisor(name: &'static str, kind: Kind, default: &'static str) -> GoFlag {
    deprecated(
        unsupported(
            name,
            kind,
            default,
            "cAdvisor setting (kubelet-rs has no cAdvisor)",
        ),
        CADVISOR,
    )
}

const fn klog(name: &'static str, kind: Kind, default: &'static str, help: &'static str) -> GoFlag {
    removed(
        deprecated(unsupported(name, kind, default, help), KLOG),
        "1.26",
    )
}

/// A klog flag kubelet-rs acts on.
const fn klog_honoured(flag: GoFlag) -> GoFlag {
    GoFlag {
        effect: Effect::Klog,
        ..flag
    }
}

use Kind::*;

/// Every flag of the Go kubelet that [`crate::flags::Flags`] does not declare.
pub const TABLE: &[GoFlag] = &[
    // KubeletConfiguration fields kubelet-rs honours.
    config("enable-server", Bool, "true", "enableServer", "Enable the kubelet's server"),
    config("enable-debugging-handlers", Bool, "true", "enableDebuggingHandlers", "Enable server endpoints for log collection and running containers and commands"),
    config("authentication-token-webhook-cache-ttl", Duration, "2m0s", "authentication.webhook.cacheTTL", "How long to cache webhook token authentication answers"),
    config("authorization-webhook-cache-authorized-ttl", Duration, "5m0s", "authorization.webhook.cacheAuthorizedTTL", "How long to cache 'authorized' webhook answers"),
    config("authorization-webhook-cache-unauthorized-ttl", Duration, "30s", "authorization.webhook.cacheUnauthorizedTTL", "How long to cache 'unauthorized' webhook answers"),
    config("oom-score-adj", Int32, "-999", "oomScoreAdj", "The oom-score-adj value for the kubelet process [-1000, 1000]"),
    config("streaming-connection-idle-timeout", Duration, "4h0m0s", "streamingConnectionIdleTimeout", "Maximum time a streaming connection can be idle"),
    config("tls-cipher-suites", List, "[]", "tlsCipherSuites", "Cipher suites for the server (IANA names)"),
    config("tls-min-version", Str, "", "tlsMinVersion", "Minimum TLS version (VersionTLS12, VersionTLS13)"),
    config("rotate-server-certificates", Bool, "false", "serverTLSBootstrap", "Request the serving certificate from the cluster"),
    config("feature-gates", MapBool, "", "featureGates", "Feature gates (key=true|false,...)"),
    config("event-qps", Int32, "5", "eventRecordQPS", "Event creations per second"),
    config("event-burst", Int32, "10", "eventBurst", "Burst of event creations"),
    config("registry-qps", Int32, "5", "registryPullQPS", "Image pulls per second"),
    config("registry-burst", Int32, "10", "registryBurst", "Burst of image pulls"),
    config("max-open-files", Int64, "1000000", "maxOpenFiles", "Open file limit of the kubelet process"),
    config("volume-stats-agg-period", Duration, "1m0s", "volumeStatsAggPeriod", "Period of volume disk usage calculation"),
    config("kube-reserved-cgroup", Str, "", "kubeReservedCgroup", "Cgroup of Kubernetes daemons (kube-reserved enforcement)"),
    config("system-reserved-cgroup", Str, "", "systemReservedCgroup", "Cgroup of system daemons (system-reserved enforcement)"),
    config("cpu-manager-policy", Str, "none", "cpuManagerPolicy", "CPU manager policy (none, static)"),
    config("cpu-manager-reconcile-period", Duration, "10s", "cpuManagerReconcilePeriod", "CPU manager reconciliation period"),
    config("topology-manager-policy", Str, "none", "topologyManagerPolicy", "Topology manager policy"),
    config("topology-manager-scope", Str, "container", "topologyManagerScope", "Topology manager scope (container, pod)"),
    // KubeletConfiguration fields kubelet-rs parses but does not act on (config::parsed_only).
    config("contention-profiling", Bool, "false", "enableContentionProfiling", "Enable block profiling"),
    config("cpu-manager-policy-options", Map, "", "cpuManagerPolicyOptions", "CPU manager policy options (key=value,...)"),
    config("memory-manager-policy", Str, "None", "memoryManagerPolicy", "Memory manager policy (None, Static)"),
    config("topology-manager-policy-options", Map, "", "topologyManagerPolicyOptions", "Topology manager policy options (key=value,...)"),
    config("qos-reserved", Map, "", "qosReserved", "Memory reserved per QoS class (memory=50%)"),
    config("reserved-memory", ReservedMemory, "", "reservedMemory", "Memory reserved per NUMA node (0:memory=1Gi;1:memory=2Gi)"),
    config("hairpin-mode", Str, "promiscuous-bridge", "hairpinMode", "Hairpin NAT mode"),
    config("make-iptables-util-chains", Bool, "true", "makeIPTablesUtilChains", "Keep the kubelet's iptables chains"),
    removed(config("iptables-masquerade-bit", Int32, "14", "iptablesMasqueradeBit", "The fwmark bit of SNAT packets"), "1.31"),
    removed(config("iptables-drop-bit", Int32, "15", "iptablesDropBit", "The fwmark bit of dropped packets"), "1.31"),
    config("protect-kernel-defaults", Bool, "false", "protectKernelDefaults", "Fail when kernel tunables differ from the kubelet's defaults"),
    config("kernel-memcg-notification", Bool, "false", "kernelMemcgNotification", "Memory eviction thresholds from kernel memcg notifications"),
    config("volume-plugin-dir", Str, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/", "volumePluginDir", "FlexVolume plugin directory"),
    config("node-status-max-images", Int32, "50", "nodeStatusMaxImages", "Images reported in node status (-1: all)"),
    config("pod-cidr", Str, "", "podCIDR", "Pod CIDR in standalone mode"),
    config("pods-per-core", Int32, "0", "podsPerCore", "Pods per core (0: no limit)"),
    config("local-storage-capacity-isolation", Bool, "true", "localStorageCapacityIsolation", "Local ephemeral storage isolation"),
    config_flag(config("provider-id", Str, "", "providerID", "The node's spec.providerID")),
    config("kube-api-content-type", Str, "application/vnd.kubernetes.protobuf", "contentType", "Content type of requests to the API server"),
    config("enable-controller-attach-detach", Bool, "true", "enableControllerAttachDetach", "Let the attach/detach controller manage this node's volumes"),
    config("kubelet-cgroups", Str, "", "kubeletCgroups", "The kubelet's own cgroup"),
    config("system-cgroups", Str, "", "systemCgroups", "Cgroup of non-kernel processes outside containers"),
    config("logging-format", Str, "text", "logging.format", "Log format (text, json)"),
    config_flag(config("log-flush-frequency", Duration, "5s", "logging.flushFrequency", "Maximum seconds between log flushes")),
    config("log-json-info-buffer-size", Str, "0", "logging.options.json.infoBufferSize", "JSON format: info stream buffer size"),
    config("log-json-split-stream", Bool, "false", "logging.options.json.splitStream", "JSON format: errors to stderr, info to stdout"),
    config("log-text-info-buffer-size", Str, "0", "logging.options.text.infoBufferSize", "Text format: info stream buffer size"),
    config("log-text-split-stream", Bool, "false", "logging.options.text.splitStream", "Text format: errors to stderr, info to stdout"),
    // Flags of the Go kubelet (not configuration fields) kubelet-rs does not act on.
    removed(
        deprecated(
            unsupported("cloud-config", Str, "", "The cloud provider's configuration file"),
            "will be removed in 1.25 or later, in favor of removing cloud provider code from Kubelet.",
        ),
        "1.34",
    ),
    config_flag(config("vmodule", VModule, "", "logging.vmodule", "Per-module log verbosity (pattern=N,...)")),
    removed(
        deprecated(
            unsupported("container-runtime", Str, "remote", "The container runtime ('remote')"),
            "will be removed in 1.27 as the only valid value is 'remote'",
        ),
        "1.27",
    ),
    deprecated(
        unsupported("experimental-mounter-path", Str, "", "Mounter binary"),
        "will be removed in 1.25 or later. in favor of using CSI.",
    ),
    deprecated(
        unsupported("experimental-allocatable-ignore-eviction", Bool, "false", "Ignore hard eviction thresholds in allocatable"),
        "will be removed in 1.25 or later.",
    ),
    removed(
        deprecated(
            unsupported("keep-terminated-pod-volumes", Bool, "false", "Keep terminated pods' volumes mounted"),
            "will be removed in a future version",
        ),
        "1.31",
    ),
    removed(
        deprecated(
            unsupported("master-service-namespace", Str, "default", "Namespace of the kubernetes master service"),
            "This flag will be removed in a future version.",
        ),
        "1.27",
    ),
    removed(
        deprecated(
            unsupported("register-schedulable", Bool, "true", "Register the node as schedulable"),
            "will be removed in a future version",
        ),
        "1.34",
    ),
    removed(
        deprecated(
            unsupported("azure-container-registry-config", Str, "", "Azure container registry configuration"),
            "Use --image-credential-provider-config and --image-credential-provider-bin-dir to setup acr credential provider instead. Will be removed in a future release.",
        ),
        "1.30",
    ),
    // klog's flags (deprecated by KEP 2845, gone from the kubelet since 1.26).
    klog("add-dir-header", Bool, "false", "Add the file directory to log headers"),
    klog_honoured(klog("alsologtostderr", Bool, "false", "Log to standard error as well as files")),
    klog("log-backtrace-at", Str, ":0", "Emit a stack trace at file:N"),
    klog("log-dir", Str, "", "Log file directory"),
    klog_honoured(klog("log-file", Str, "", "Log file")),
    klog_honoured(klog("log-file-max-size", Uint64, "1800", "Maximum log file size in MB")),
    klog_honoured(klog("logtostderr", Bool, "true", "Log to standard error instead of files")),
    klog("one-output", Bool, "false", "Write logs of a severity only to their own file"),
    klog_honoured(klog("skip-headers", Bool, "false", "No header prefixes in log messages")),
    klog_honoured(klog("skip-log-headers", Bool, "false", "No headers in log files")),
    klog_honoured(klog("stderrthreshold", Str, "2", "Logs at or above this severity go to stderr")),
    // cAdvisor's flags the Go kubelet registers.
    cadvisor("application-metrics-count-limit", Int32, "100"),
    cadvisor("boot-id-file", Str, "/proc/sys/kernel/random/boot_id"),
    cadvisor("container-hints", Str, "/etc/cadvisor/container_hints.json"),
    cadvisor("containerd", Str, "/run/containerd/containerd.sock"),
    cadvisor("containerd-namespace", Str, "k8s.io"),
    cadvisor("enable-load-reader", Bool, "false"),
    cadvisor("event-storage-age-limit", Str, "default=0"),
    cadvisor("event-storage-event-limit", Str, "default=0"),
    cadvisor("global-housekeeping-interval", Duration, "1m0s"),
    unsupported("housekeeping-interval", Duration, "10s", "cAdvisor setting (kubelet-rs has no cAdvisor)"),
    cadvisor("log-cadvisor-usage", Bool, "false"),
    cadvisor("machine-id-file", Str, "/etc/machine-id,/var/lib/dbus/machine-id"),
    cadvisor("storage-driver-buffer-duration", Duration, "1m0s"),
    cadvisor("storage-driver-db", Str, "cadvisor"),
    cadvisor("storage-driver-host", Str, "localhost:8086"),
    cadvisor("storage-driver-password", Str, "root"),
    cadvisor("storage-driver-secure", Bool, "false"),
    cadvisor("storage-driver-table", Str, "stats"),
    cadvisor("storage-driver-user", Str, "root"),
    // Flags of Go kubelets before 1.24, which removed them with dockershim and Dynamic Kubelet
    // Config. Unit files of nodes upgraded since still pass them (and the v1.20 node e2e suite
    // does): accepted with the deprecation Go 1.23 printed, and ignored. With a CRI runtime the
    // network ones had no effect in Go either; pod networking is the runtime's CNI.
    dockershim("network-plugin", Str, "", "The network plugin (dockershim only)"),
    dockershim("cni-bin-dir", Str, "/opt/cni/bin", "CNI plugin binaries (dockershim only)"),
    dockershim("cni-conf-dir", Str, "/etc/cni/net.d", "CNI configuration files (dockershim only)"),
    dockershim("cni-cache-dir", Str, "/var/lib/cni/cache", "CNI cache files (dockershim only)"),
    dockershim("network-plugin-mtu", Int32, "0", "MTU for the network plugin (dockershim only)"),
    dockershim("docker-endpoint", Str, "unix:///var/run/docker.sock", "The docker endpoint (dockershim only)"),
    dockershim("image-pull-progress-deadline", Duration, "1m0s", "Cancel a pull without progress after this (dockershim only)"),
    dockershim("experimental-dockershim-root-directory", Str, "/var/lib/dockershim", "The dockershim root directory"),
    removed(
        deprecated(
            unsupported("dynamic-config-dir", Str, "", "Dynamic Kubelet Config checkpoint directory"),
            "Feature DynamicKubeletConfig is deprecated in 1.22 and will not move to GA. It is planned to be removed from Kubernetes in the version 1.23. Please use alternative ways to update kubelet configuration.",
        ),
        "1.24",
    ),
];

/// Go's deprecation of the container GC flags.
const CONTAINER_GC: &str =
    "Use --eviction-hard or --eviction-soft instead. Will be removed in a future version.";

/// Flags [`crate::flags::Flags`] declares that Go deprecates, with Go's message; their clap
/// id is the name with `_` for `-`.
pub const DECLARED_DEPRECATED: &[(&str, &str)] = &[
    ("address", CONFIG_FILE),
    ("allowed-unsafe-sysctls", CONFIG_FILE),
    ("anonymous-auth", CONFIG_FILE),
    ("authentication-token-webhook", CONFIG_FILE),
    ("authorization-mode", CONFIG_FILE),
    ("cgroup-driver", CONFIG_FILE),
    ("cgroup-root", CONFIG_FILE),
    ("cgroups-per-qos", CONFIG_FILE),
    ("client-ca-file", CONFIG_FILE),
    ("cluster-dns", CONFIG_FILE),
    ("cluster-domain", CONFIG_FILE),
    ("container-log-max-files", CONFIG_FILE),
    ("container-log-max-size", CONFIG_FILE),
    ("container-runtime-endpoint", CONFIG_FILE),
    ("cpu-cfs-quota", CONFIG_FILE),
    ("cpu-cfs-quota-period", CONFIG_FILE),
    ("enforce-node-allocatable", CONFIG_FILE),
    ("eviction-hard", CONFIG_FILE),
    ("eviction-max-pod-grace-period", CONFIG_FILE),
    ("eviction-minimum-reclaim", CONFIG_FILE),
    ("eviction-pressure-transition-period", CONFIG_FILE),
    ("eviction-soft", CONFIG_FILE),
    ("eviction-soft-grace-period", CONFIG_FILE),
    ("fail-swap-on", CONFIG_FILE),
    ("file-check-frequency", CONFIG_FILE),
    ("healthz-bind-address", CONFIG_FILE),
    ("healthz-port", CONFIG_FILE),
    ("http-check-frequency", CONFIG_FILE),
    ("image-gc-high-threshold", CONFIG_FILE),
    ("image-gc-low-threshold", CONFIG_FILE),
    ("image-service-endpoint", CONFIG_FILE),
    ("kube-api-burst", CONFIG_FILE),
    ("kube-api-qps", CONFIG_FILE),
    ("kube-reserved", CONFIG_FILE),
    ("manifest-url", CONFIG_FILE),
    ("manifest-url-header", CONFIG_FILE),
    ("max-pods", CONFIG_FILE),
    ("minimum-image-ttl-duration", CONFIG_FILE),
    ("node-status-update-frequency", CONFIG_FILE),
    ("pod-manifest-path", CONFIG_FILE),
    ("pod-max-pids", CONFIG_FILE),
    ("port", CONFIG_FILE),
    ("read-only-port", CONFIG_FILE),
    ("register-node", CONFIG_FILE),
    ("register-with-taints", CONFIG_FILE),
    ("reserved-cpus", CONFIG_FILE),
    ("resolv-conf", CONFIG_FILE),
    ("rotate-certificates", CONFIG_FILE),
    ("runtime-request-timeout", CONFIG_FILE),
    ("serialize-image-pulls", CONFIG_FILE),
    ("sync-frequency", CONFIG_FILE),
    ("system-reserved", CONFIG_FILE),
    ("tls-cert-file", CONFIG_FILE),
    ("tls-private-key-file", CONFIG_FILE),
    (
        "pod-infra-container-image",
        "will be removed in 1.27. Image garbage collector will get sandbox image information from CRI.",
    ),
    ("minimum-container-ttl-duration", CONTAINER_GC),
    ("maximum-dead-containers", CONTAINER_GC),
    ("maximum-dead-containers-per-container", CONTAINER_GC),
];

/// Go's line for a deprecated flag given on the command line.
fn deprecation(name: &str, message: &str) -> String {
    format!("Flag --{name} has been deprecated, {message}")
}

/// Adds [`TABLE`]'s flags to the command.
pub fn register(mut cmd: Command) -> Command {
    for f in TABLE {
        // pflag lists deprecated flags with the message.
        let help = match f.deprecated {
            Some(message) => format!("{} (DEPRECATED: {message})", f.help),
            None => f.help.to_string(),
        };
        let arg = Arg::new(f.name)
            .long(f.name)
            .help(help)
            .action(ArgAction::Append);
        let arg = match f.kind {
            Bool => arg
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("true"),
            _ => arg.num_args(1).allow_hyphen_values(true),
        };
        cmd = cmd.arg(arg);
    }
    cmd
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(flag: &'static str, s: &str) -> Result<bool, FlagValueError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(invalid(flag, s, "not a boolean")),
    }
}

fn invalid(flag: &'static str, value: &str, reason: impl Into<String>) -> FlagValueError {
    FlagValueError {
        flag,
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// `--reserved-memory` values (Go's `ReservedMemoryVar`), as `reservedMemory` entries.
pub fn parse_reserved_memory(
    flag: &'static str,
    values: &[String],
) -> Result<Value, FlagValueError> {
    let mut out = Vec::new();
    for reservation in values.iter().flat_map(|v| v.split(';')) {
        if reservation.is_empty() {
            continue;
        }
        let Some((numa, limits)) = reservation.split_once(':') else {
            return Err(invalid(
                flag,
                reservation,
                "expected numaNodeID:type=quantity[,type=quantity...]",
            ));
        };
        let numa: i32 = numa
            .trim()
            .parse()
            .map_err(|_| invalid(flag, reservation, "the NUMA node is not a number"))?;
        let mut map = JsonMap::new();
        for limit in limits.split(',') {
            let Some((name, quantity)) = limit.split_once('=') else {
                return Err(invalid(flag, limit, "expected type=quantity"));
            };
            if name != "memory" && !name.starts_with("hugepages-") {
                return Err(invalid(
                    flag,
                    limit,
                    format!("unknown memory type {name:?}"),
                ));
            }
            if !looks_like_quantity(quantity) {
                return Err(invalid(flag, limit, "not a quantity"));
            }
            map.insert(name.to_string(), Value::String(quantity.to_string()));
        }
        out.push(serde_json::json!({"numaNode": numa, "limits": map}));
    }
    Ok(Value::Array(out))
}

/// A resource quantity's shape: a decimal number with an optional suffix (`Ki`…`Ei`,
/// `n`…`E`, or an exponent).
fn looks_like_quantity(q: &str) -> bool {
    let digits = q.trim_start_matches(['+', '-']);
    let end = digits
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(digits.len());
    let (number, suffix) = digits.split_at(end);
    let number_ok = !number.is_empty() && number != "." && number.matches('.').count() <= 1;
    let suffix_ok = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || (suffix.starts_with(['e', 'E'])
        && suffix[1..]
            .trim_start_matches(['+', '-'])
            .parse::<u32>()
            .is_ok());
    number_ok && suffix_ok
}

/// One flag's values (`values` as given, in order) as the JSON its field takes.
pub fn to_json(f: &GoFlag, values: &[String]) -> Result<Value, FlagValueError> {
    let last = values.last().map(String::as_str).unwrap_or_default();
    let number = |v: Result<i64, std::num::ParseIntError>| {
        v.map(Value::from)
            .map_err(|e| invalid(f.name, last, e.to_string()))
    };
    Ok(match f.kind {
        Bool => Value::Bool(parse_go_bool(f.name, last)?),
        Int32 => number(last.parse::<i32>().map(i64::from))?,
        Int64 => number(last.parse::<i64>())?,
        Uint64 => last
            .parse::<u64>()
            .map(Value::from)
            .map_err(|e| invalid(f.name, last, e.to_string()))?,
        Str => Value::String(last.to_string()),
        Duration => {
            parse_go_duration(last).map_err(|e| invalid(f.name, last, e.to_string()))?;
            Value::String(last.to_string())
        }
        List => Value::Array(
            values
                .iter()
                .flat_map(|v| v.split(','))
                .filter(|e| !e.is_empty())
                .map(|e| Value::String(e.to_string()))
                .collect(),
        ),
        Map => Value::Object(
            parse_map(f.name, values, '=')?
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        ),
        MapBool => {
            let mut out = JsonMap::new();
            for (k, v) in parse_map(f.name, values, '=')? {
                out.insert(k, Value::Bool(parse_go_bool(f.name, &v)?));
            }
            Value::Object(out)
        }
        ReservedMemory => parse_reserved_memory(f.name, values)?,
        VModule => {
            let mut items = Vec::new();
            for v in values {
                items.extend(
                    crate::logging::vmodule::parse(v)
                        .map_err(|reason| invalid(f.name, v, reason))?,
                );
            }
            serde_json::to_value(items).map_err(|e| invalid(f.name, last, e.to_string()))?
        }
    })
}

/// Sets the field at a dotted path of a JSON object (creating objects on the way); with
/// `merge`, maps are merged (Go keeps the file's feature gates the flag does not name) and
/// lists appended to.
fn set_path(root: &mut Value, path: &str, value: Value, merge: bool) {
    let mut at = root;
    for part in path.split('.') {
        if !at.is_object() {
            *at = Value::Object(JsonMap::new());
        }
        let Value::Object(map) = at else { return };
        at = map.entry(part.to_string()).or_insert(Value::Null);
    }
    match (at, value) {
        (Value::Object(existing), Value::Object(new)) if merge => existing.extend(new),
        (Value::Array(existing), Value::Array(new)) if merge => existing.extend(new),
        (slot, value) => *slot = value,
    }
}

/// The table's flags given on the command line: overlays the [`Effect::Config`] ones onto
/// `config` and returns the warnings to print (deprecations, unsupported settings).
pub fn apply(
    config: &mut KubeletConfiguration,
    m: &ArgMatches,
) -> Result<Vec<String>, FlagValueError> {
    let mut warnings: Vec<String> = DECLARED_DEPRECATED
        .iter()
        .filter(|(name, _)| {
            m.value_source(&name.replace('-', "_")) == Some(ValueSource::CommandLine)
        })
        .map(|(name, message)| deprecation(name, message))
        .collect();
    let mut json: Option<Value> = None;
    for f in TABLE {
        if m.value_source(f.name) != Some(ValueSource::CommandLine) {
            continue;
        }
        let values: Vec<String> = m
            .get_many::<String>(f.name)
            .map(|v| v.cloned().collect())
            .unwrap_or_default();
        let value = to_json(f, &values)?;
        if let Some(message) = f.deprecated {
            let removed = f
                .removed_in
                .map(|v| format!(" (the Go kubelet no longer has it since {v})"))
                .unwrap_or_default();
            warnings.push(deprecation(f.name, message) + &removed);
        }
        match f.effect {
            Effect::Config(path) => {
                let root = match &mut json {
                    Some(j) => j,
                    None => json.insert(
                        serde_json::to_value(&*config)
                            .map_err(|e| invalid(f.name, &values.join(","), e.to_string()))?,
                    ),
                };
                // Feature gates merge with the file's; `--vmodule` entries follow the file's
                // (component-base's flag appends to the list it was bound to).
                set_path(root, path, value, matches!(f.kind, MapBool | VModule));
            }
            Effect::Klog => {}
            Effect::Unsupported => {
                let given = values.last().map(String::as_str).unwrap_or_default();
                if given != f.default {
                    warnings.push(format!(
                        "flag --{}={given:?} is not supported by kubelet-rs; it is ignored",
                        f.name
                    ));
                }
            }
        }
    }
    if let Some(json) = json {
        *config = serde_json::from_value(json).map_err(|e| FlagValueError {
            flag: "config",
            value: String::new(),
            reason: format!("applying the command line's configuration flags: {e}"),
        })?;
    }
    Ok(warnings)
}

/// The flags the Go kubelet prints at start-up (`--v` 1 and above: log lines ending in
/// `FLAG: --name="value"`; bare `--name="value"` lines too), as (name, value) pairs to pass on a
/// command line: Go prints lists as `[a b]`, which its own parser would take as one entry,
/// so they are given back as `a,b`. Lines that are not flags are skipped.
pub fn flags_from_go_log(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            // klog's header (`I1205 10:00:00.000000 1234 flags.go:64] `) comes first.
            let line = line
                .find("FLAG: ")
                .map_or(line, |i| &line[i + "FLAG: ".len()..]);
            let (name, value) = line.strip_prefix("--")?.split_once('=')?;
            let value = value.strip_prefix('"')?.strip_suffix('"')?;
            let value = match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                Some(inner) => inner.split_whitespace().collect::<Vec<_>>().join(","),
                None => value.to_string(),
            };
            Some((name.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
#[path = "go_flags_tests.rs"]
mod tests;
