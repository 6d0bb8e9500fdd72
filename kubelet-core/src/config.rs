//! The engine's configuration, with the Go kubelet's defaults.
//!
//! These are the fields of `KubeletConfiguration` that the lifecycle engine itself reads; the
//! binary maps the full configuration file and flags onto this struct.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::eviction::EvictionConfig;
use crate::logs::ContainerLogConfig;
use crate::summary::SummaryConfig;

/// Engine configuration. `Config::default()` gives the Go kubelet's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The node's name (`--hostname-override` or the host name), lower case.
    pub node_name: String,
    /// Node labels used by node-affinity and node-selector admission.
    pub node_labels: BTreeMap<String, String>,
    /// The node's IPs (`--node-ip` or detected): status.hostIP(s), host-network pod IPs.
    pub node_ips: Vec<String>,
    /// `--root-dir` (default `/var/lib/kubelet`): pod directories live under `pods/`. Empty:
    /// no per-pod files at all (no termination-message files; for simulations and benchmarks).
    /// Give a canonical path (absolute, no symlinks): mounts below it are recognised by their
    /// resolved paths (kubelet-bin resolves `--root-dir` at start-up).
    pub root_dir: PathBuf,
    /// Pod log root (`/var/log/pods`).
    pub pod_logs_dir: PathBuf,
    /// `syncFrequency` (1m): how often every pod is re-synced.
    pub sync_frequency: Duration,
    /// Housekeeping period (2s): orphan cleanup.
    pub housekeeping_interval: Duration,
    /// `volumeStatsAggPeriod` (1m): how often persistent volumes' usage is measured for the
    /// summary and `kubelet_volume_stats_*`; zero: never.
    pub volume_stats_agg_period: Duration,
    /// PLEG relist period (1s).
    pub pleg_relist_period: Duration,
    /// A relist taking longer than this marks the PLEG unhealthy (3m).
    pub pleg_relist_threshold: Duration,
    /// Go's `EventedPLEG` feature gate (false): drive pod syncs from the runtime's container
    /// event stream when it has one, relisting only as a fallback (see `pleg::evented`).
    pub evented_pleg: bool,
    /// The fallback relist period while the event stream is healthy (Go's
    /// `eventedPlegRelistPeriod`, 300s).
    pub pleg_evented_relist_period: Duration,
    /// `maxPods` (110).
    pub max_pods: u32,
    /// First CrashLoopBackOff delay (10s).
    pub backoff_initial: Duration,
    /// Cap of CrashLoopBackOff (5m).
    pub backoff_max: Duration,
    /// First ImagePullBackOff delay (10s).
    pub image_backoff_initial: Duration,
    /// Cap of ImagePullBackOff (5m).
    pub image_backoff_max: Duration,
    /// `serializeImagePulls` (true): pull one image at a time.
    pub serialize_image_pulls: bool,
    /// `maxParallelImagePulls` when pulls are not serialized (`None`: unlimited).
    pub max_parallel_image_pulls: Option<usize>,
    /// Upper bound of pod workers talking to the runtime at once (`None`: unlimited).
    pub max_concurrent_pod_syncs: Option<usize>,
    /// `clusterDNS` nameservers.
    pub cluster_dns: Vec<String>,
    /// `clusterDomain`, e.g. "cluster.local".
    pub cluster_domain: String,
    /// `resolvConf` (`/etc/resolv.conf`; empty: none).
    pub resolv_conf: PathBuf,
    /// How often dead containers and sandboxes are garbage collected (Go's
    /// `ContainerGCPeriod`, 1m).
    pub container_gc_period: Duration,
    /// Dead containers kept per container name (`--maximum-dead-containers-per-container`, 1).
    pub max_dead_containers_per_container: usize,
    /// Dead containers younger than this are kept (`--minimum-container-ttl-duration`, 0).
    pub minimum_container_ttl: Duration,
    /// The most dead containers on the node (`--maximum-dead-containers`; negative, the
    /// default -1: no limit).
    pub maximum_dead_containers: i64,
    /// The legacy container log symlinks' directory (`/var/log/containers`): dangling ones
    /// are removed. Empty: left alone.
    pub container_logs_dir: PathBuf,
    /// The eviction manager (`evictionHard`, `evictionSoft`, …).
    pub eviction: EvictionConfig,
    /// Graceful node shutdown (`shutdownGracePeriod`, `shutdownGracePeriodCriticalPods`,
    /// `shutdownGracePeriodByPodPriority`); it runs with a
    /// [`ShutdownInhibitor`](crate::nodeshutdown::ShutdownInhibitor) given to the builder.
    pub node_shutdown: crate::nodeshutdown::ShutdownConfig,
    /// The CPU manager (`cpuManagerPolicy`, `cpuManagerReconcilePeriod`,
    /// `reservedSystemCPUs`); its `static` policy needs a container manager that measures
    /// the machine (its CPU topology) and a cpu reservation.
    pub cpu_manager: crate::cpumanager::CpuManagerConfig,
    /// The memory manager (`memoryManagerPolicy`, `reservedMemory`); its `Static` policy
    /// needs a container manager that measures the machine (its NUMA nodes' memory).
    pub memory_manager: crate::memorymanager::MemoryManagerConfig,
    /// `topologyManagerPolicy` (default `none`).
    pub topology_manager_policy: crate::topologymanager::TopologyPolicy,
    /// The most NUMA nodes a topology policy other than `none` works on (default
    /// [`MAX_NUMA_NODES`](crate::topologymanager::MAX_NUMA_NODES); the
    /// `max-allowable-numa-nodes` policy option).
    pub topology_manager_max_numa_nodes: usize,
    /// `topologyManagerScope` (default `container`).
    pub topology_manager_scope: crate::topologymanager::TopologyScope,
    /// Image garbage collection (`imageGC*`, `imageMinimumGCAge`, `imageMaximumGCAge`).
    pub image_gc: ImageGcPolicy,
    /// Container log rotation (`containerLogMax*`, `containerLogMonitorInterval`).
    pub container_logs: ContainerLogConfig,
    /// Capacity of the bounded channel that carries source updates.
    pub update_channel_capacity: usize,
    /// `allowedUnsafeSysctls`: sysctls or prefixes (`net.core.*`) pods may set beyond Go's
    /// safe set ([`crate::admission::sysctl`]).
    pub allowed_unsafe_sysctls: Vec<String>,
    /// Whether the host enforces AppArmor; `None`: read
    /// `/sys/module/apparmor/parameters/enabled` when the kubelet is built.
    pub apparmor_enabled: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_name: String::new(),
            node_labels: BTreeMap::new(),
            node_ips: Vec::new(),
            root_dir: PathBuf::from("/var/lib/kubelet"),
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            sync_frequency: Duration::from_secs(60),
            housekeeping_interval: Duration::from_secs(2),
            volume_stats_agg_period: Duration::from_secs(60),
            pleg_relist_period: Duration::from_secs(1),
            pleg_relist_threshold: Duration::from_secs(180),
            evented_pleg: false,
            pleg_evented_relist_period: Duration::from_secs(300),
            max_pods: 110,
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            image_backoff_initial: Duration::from_secs(10),
            image_backoff_max: Duration::from_secs(300),
            serialize_image_pulls: true,
            max_parallel_image_pulls: None,
            max_concurrent_pod_syncs: None,
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            container_gc_period: Duration::from_secs(60),
            max_dead_containers_per_container: 1,
            minimum_container_ttl: Duration::ZERO,
            maximum_dead_containers: -1,
            container_logs_dir: PathBuf::from("/var/log/containers"),
            eviction: EvictionConfig::default(),
            node_shutdown: Default::default(),
            cpu_manager: Default::default(),
            memory_manager: Default::default(),
            topology_manager_policy: Default::default(),
            topology_manager_scope: Default::default(),
            topology_manager_max_numa_nodes: crate::topologymanager::MAX_NUMA_NODES,
            image_gc: ImageGcPolicy::default(),
            container_logs: ContainerLogConfig::default(),
            update_channel_capacity: 64,
            allowed_unsafe_sysctls: Vec::new(),
            apparmor_enabled: None,
        }
    }
}

/// The image garbage collection policy, with Go's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// `imageGCHighThresholdPercent` (85): usage at which a collection frees space; 100
    /// turns image garbage collection off (as Go).
    pub high_threshold_percent: i32,
    /// `imageGCLowThresholdPercent` (80): usage a collection frees down to.
    pub low_threshold_percent: i32,
    /// `imageMinimumGCAge` (2m): images seen more recently are never removed for space.
    pub min_age: Duration,
    /// `imageMaximumGCAge` (0: off): images unused for longer are removed.
    pub max_age: Duration,
    /// How often a collection runs (Go's `ImageGCPeriod`, 5m).
    pub period: Duration,
    /// Images never removed besides the runtime's pinned ones (Go's
    /// `--pod-infra-container-image`), by id, tag or digest.
    pub pinned_images: Vec<String>,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
            max_age: Duration::ZERO,
            period: Duration::from_secs(300),
            pinned_images: Vec::new(),
        }
    }
}

impl ImageGcPolicy {
    /// Go's `NewImageGCManager` checks; the error names the setting.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (field, v) in [
            ("imageGCHighThresholdPercent", self.high_threshold_percent),
            ("imageGCLowThresholdPercent", self.low_threshold_percent),
        ] {
            if !(0..=100).contains(&v) {
                return Err((field, format!("invalid {v}, must be in range [0-100]")));
            }
        }
        if self.low_threshold_percent > self.high_threshold_percent {
            return Err((
                "imageGCLowThresholdPercent",
                format!(
                    "{} can not be higher than imageGCHighThresholdPercent {}",
                    self.low_threshold_percent, self.high_threshold_percent
                ),
            ));
        }
        Ok(())
    }

    /// Whether collections run at all (Go skips image GC at a high threshold of 100).
    pub fn enabled(&self) -> bool {
        self.high_threshold_percent < 100
    }
}

impl SummaryConfig {
    /// The node name, root dir and pod log root of an engine configuration; no image store
    /// directory, no allocatable memory.
    pub fn from_config(config: &Config) -> Self {
        SummaryConfig {
            node_name: config.node_name.clone(),
            root_dir: config.root_dir.clone(),
            pod_logs_dir: config.pod_logs_dir.clone(),
            image_fs_dir: None,
            pods_system_container: false,
        }
    }
}
