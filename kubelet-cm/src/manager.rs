//! [`LinuxContainerManager`]: the `ContainerManager` for Linux with the cgroupfs driver.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::cpu::{milli_cpu_to_shares, MIN_SHARES};
use kubelet_core::qos::{pod_qos, QosClass};
use kubelet_core::resources::pod_request;
use kubelet_core::stats::NodeStatsProvider;
use kubelet_core::{CmError, ContainerManager, PodResources, ResourceList};

use crate::allocatable::{
    allocatable_amounts, apply_reserved_cpus, capacity_amounts, node_allocatable_absolute,
    node_allocatable_reservation, parse_eviction_hard, parse_reserved, to_resource_list,
    validate_reservation, Amounts, RESOURCE_PID,
};
use crate::cgroups::systemd::bus::SystemdBus;
use crate::cgroups::systemd::dbus_client::DbusSystemd;
use crate::cgroups::{
    detect, manager_for, CgroupManager, CgroupMounts, CgroupName, ResourceConfig,
    SystemdCgroupManager,
};
use crate::error::Error;
use crate::helpers::{hugepage_size_bytes, resource_config_for_pod};
use crate::machine::{check_swap, read_machine_info, MachineInfo};
use crate::stats::CgroupStats;
use crate::system_containers::SystemCgroups;

/// The node-allocatable cgroup Go creates under `cgroupRoot` when `cgroupsPerQOS` is on.
pub const NODE_ALLOCATABLE_CGROUP: &str = "kubepods";
/// The `enforceNodeAllocatable` key for enforcing allocatable on the pods cgroup.
pub const ENFORCE_PODS: &str = "pods";

/// Configuration of the container manager; [`Default`] gives Go's kubelet defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmConfig {
    /// Root the `/proc`, `/sys` and `/etc` files are read under (`/`; a fixture in tests).
    pub root: PathBuf,
    /// Kubelet root dir; its filesystem is the ephemeral-storage capacity.
    pub root_dir: PathBuf,
    /// `cgroupRoot` (default `/`); must already exist when `cgroups_per_qos` is on.
    pub cgroup_root: String,
    /// `cgroupsPerQOS` (default true).
    pub cgroups_per_qos: bool,
    /// `cgroupDriver`: `cgroupfs` (default) or `systemd` (slices over D-Bus; see
    /// [`crate::cgroups::systemd`]).
    pub cgroup_driver: String,
    /// `cpuCFSQuota` (default true): enforce cpu limits with CFS quota.
    pub cpu_cfs_quota: bool,
    /// `cpuCFSQuotaPeriod` (default 100ms).
    pub cpu_cfs_quota_period: Duration,
    /// `podPidsLimit` (default -1 = unlimited; only values > 0 are applied).
    pub pod_pids_limit: i64,
    /// `maxPods` (default 110).
    pub max_pods: u32,
    /// `failSwapOn` (default true).
    pub fail_swap_on: bool,
    /// `kubeReserved` (cpu, memory, ephemeral-storage, pid).
    pub kube_reserved: BTreeMap<String, String>,
    /// `systemReserved` (cpu, memory, ephemeral-storage, pid).
    pub system_reserved: BTreeMap<String, String>,
    /// `evictionHard` (default memory.available<100Mi, nodefs.available<10%,
    /// imagefs.available<15%, nodefs.inodesFree<5%).
    pub eviction_hard: BTreeMap<String, String>,
    /// `reservedSystemCPUs` cpuset list ("0-1,3"); overrides the cpu reservations.
    pub reserved_system_cpus: String,
    /// `enforceNodeAllocatable` (default `["pods"]`; the reserved keys:
    /// [`crate::reserved_cgroups`]).
    pub enforce_node_allocatable: Vec<String>,
    /// `systemReservedCgroup`: the operator's cgroup of the system daemons, limited to
    /// `systemReserved` with `system-reserved` enforcement (empty: none).
    pub system_reserved_cgroup: String,
    /// `kubeReservedCgroup`: the operator's cgroup of the Kubernetes daemons, limited to
    /// `kubeReserved` with `kube-reserved` enforcement (empty: none).
    pub kube_reserved_cgroup: String,
    /// The system containers reported in the summary (kubelet, runtime, misc).
    pub system_cgroups: SystemCgroups,
}

impl Default for CmConfig {
    fn default() -> CmConfig {
        CmConfig {
            root: PathBuf::from("/"),
            root_dir: PathBuf::from("/var/lib/kubelet"),
            cgroup_root: "/".to_string(),
            cgroups_per_qos: true,
            cgroup_driver: "cgroupfs".to_string(),
            cpu_cfs_quota: true,
            cpu_cfs_quota_period: Duration::from_millis(100),
            pod_pids_limit: -1,
            max_pods: 110,
            fail_swap_on: true,
            kube_reserved: BTreeMap::new(),
            system_reserved: BTreeMap::new(),
            eviction_hard: [
                ("memory.available", "100Mi"),
                ("nodefs.available", "10%"),
                ("imagefs.available", "15%"),
                ("nodefs.inodesFree", "5%"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            reserved_system_cpus: String::new(),
            enforce_node_allocatable: vec![ENFORCE_PODS.to_string()],
            system_reserved_cgroup: String::new(),
            kube_reserved_cgroup: String::new(),
            system_cgroups: SystemCgroups::default(),
        }
    }
}

/// Node capacity, allocatable and the `kubepods` limits for a machine and configuration,
/// computed without touching cgroups.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeResources {
    /// cpu, memory, pods, ephemeral-storage, hugepages-*.
    pub capacity: ResourceList,
    /// capacity − systemReserved − kubeReserved − hard eviction (memory also − hugepages).
    pub allocatable: ResourceList,
    /// What `kubepods` is limited to (capacity incl. `pid`; minus reservations when
    /// `enforceNodeAllocatable` has `pods`), cpu in millicores.
    pub kubepods_limits: Amounts,
    /// `systemReserved` parsed (cpu in millicores, after `reservedSystemCPUs`).
    pub system_reserved: Amounts,
    /// `kubeReserved` parsed, the same.
    pub kube_reserved: Amounts,
}

impl NodeResources {
    /// Parses the reservations (with `reservedSystemCPUs` overriding the cpu ones) and hard
    /// eviction thresholds, validates that reservations fit capacity (Go's
    /// `validateNodeAllocatable`) and computes capacity, allocatable and the kubepods limits.
    pub fn compute(config: &CmConfig, machine: &MachineInfo) -> Result<NodeResources, Error> {
        let mut kube = parse_reserved("kubeReserved", &config.kube_reserved)?;
        let mut system = parse_reserved("systemReserved", &config.system_reserved)?;
        apply_reserved_cpus(
            &config.reserved_system_cpus,
            machine,
            &mut kube,
            &mut system,
        )?;
        let thresholds = parse_eviction_hard(&config.eviction_hard)?;
        let capacity = capacity_amounts(machine, config.max_pods);
        let reservation = node_allocatable_reservation(&capacity, &system, &kube, &thresholds);
        validate_reservation(&capacity, &reservation)?;
        let allocatable = allocatable_amounts(&capacity, &reservation);
        // Go: capacity (incl. the internal pid resource), or capacity − reserved when
        // allocatable is enforced on pods.
        let mut internal = capacity.clone();
        internal.insert(
            RESOURCE_PID.to_string(),
            i64::try_from(machine.max_pids).unwrap_or(i64::MAX),
        );
        let kubepods_limits = if config
            .enforce_node_allocatable
            .iter()
            .any(|k| k == ENFORCE_PODS)
        {
            node_allocatable_absolute(&internal, &system, &kube)
        } else {
            internal
        };
        Ok(NodeResources {
            capacity: to_resource_list(&capacity),
            allocatable: to_resource_list(&allocatable),
            kubepods_limits,
            system_reserved: system,
            kube_reserved: kube,
        })
    }
}

/// What the manager remembers about a pod it set up (for the Burstable tier's shares).
#[derive(Debug, Clone, Copy)]
struct TrackedPod {
    qos: QosClass,
    cpu_request_milli: i64,
}

/// The manager's state, shared with its stats provider.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: CmConfig,
    pub(crate) cgroups: Box<dyn CgroupManager>,
    /// `cgroupRoot/kubepods` (or `cgroupRoot` when cgroups per QoS are off).
    node_cgroup: CgroupName,
    pods: Mutex<HashMap<String, TrackedPod>>,
    period_us: u64,
}

/// The Linux container manager: machine info, capacity/allocatable, the QoS cgroup
/// hierarchy and per-pod cgroups (cgroupfs or systemd driver, cgroup v1, v2 or hybrid).
///
/// Construction does blocking file IO; call it from a blocking context
/// (`tokio::task::spawn_blocking`) when on a runtime thread. The async trait methods move
/// their cgroup IO to the blocking pool.
#[derive(Debug, Clone)]
pub struct LinuxContainerManager {
    inner: Arc<Inner>,
    machine: Arc<MachineInfo>,
    stats: Arc<CgroupStats>,
    mounts: CgroupMounts,
    capacity: ResourceList,
    allocatable: ResourceList,
    kubepods_config: Option<ResourceConfig>,
}

impl LinuxContainerManager {
    /// Reads machine info, checks swap, computes capacity and allocatable, detects cgroups
    /// and (with `cgroups_per_qos`) creates `kubepods`, `kubepods/burstable` and
    /// `kubepods/besteffort` under the cgroup root, enforcing node allocatable on `kubepods`.
    pub fn new(config: CmConfig) -> Result<LinuxContainerManager, Error> {
        match config.cgroup_driver.as_str() {
            "cgroupfs" => Self::build(config, None),
            "systemd" => {
                let bus = connect_systemd(&config.root)?;
                Self::build(config, Some(Box::new(bus)))
            }
            other => Err(Error::InvalidConfig(format!(
                "unknown cgroupDriver {other:?} (expected \"cgroupfs\" or \"systemd\")"
            ))),
        }
    }

    /// As [`new`](Self::new) with the systemd driver over `bus` instead of the system bus
    /// (`cgroup_driver` is taken to be `systemd`): for embedders with their own connection,
    /// and for tests.
    pub fn with_systemd_bus(
        mut config: CmConfig,
        bus: Box<dyn SystemdBus>,
    ) -> Result<LinuxContainerManager, Error> {
        config.cgroup_driver = "systemd".into();
        Self::build(config, Some(bus))
    }

    fn build(
        config: CmConfig,
        systemd: Option<Box<dyn SystemdBus>>,
    ) -> Result<LinuxContainerManager, Error> {
        validate_enforce_keys(&config.enforce_node_allocatable)?;
        if config.cpu_cfs_quota_period < Duration::from_millis(1)
            || config.cpu_cfs_quota_period > Duration::from_secs(1)
        {
            return Err(Error::InvalidConfig(format!(
                "cpuCFSQuotaPeriod {:?} must be between 1ms and 1s",
                config.cpu_cfs_quota_period
            )));
        }

        let machine = read_machine_info(&config.root, &config.root_dir)?;
        if config.fail_swap_on {
            check_swap(&config.root)?;
        }

        let resources = NodeResources::compute(&config, &machine)?;
        let reserved = crate::reserved_cgroups::plan(
            &config.enforce_node_allocatable,
            &config.system_reserved_cgroup,
            &config.kube_reserved_cgroup,
            &resources.system_reserved,
            &resources.kube_reserved,
        )?;
        if !config.cgroups_per_qos && !reserved.is_empty() {
            // Go's configuration validation: the reserved cgroups are enforced beside the
            // node allocatable cgroup, which only exists with cgroups per QoS.
            return Err(Error::InvalidConfig(
                "enforceNodeAllocatable (--enforce-node-allocatable) is not supported unless cgroupsPerQOS (--cgroups-per-qos) feature is turned on".into(),
            ));
        }

        let mounts = detect(&config.root)?;
        let cgroups = match systemd {
            None => manager_for(&config.root, &mounts),
            Some(bus) => Box::new(SystemdCgroupManager::new(
                manager_for(&config.root, &mounts),
                bus,
            )),
        };
        tracing::info!(mode = ?mounts.mode, driver = %config.cgroup_driver, cgroup_root = %config.cgroup_root, "detected cgroups");

        let root_name = CgroupName::from_cgroupfs(&config.cgroup_root);
        let mut kubepods_config = None;
        let node_cgroup = if config.cgroups_per_qos {
            if config.cgroup_root.trim().is_empty() {
                return Err(Error::InvalidConfig(
                    "cgroups-per-qos was specified and cgroup-root was not specified".into(),
                ));
            }
            cgroups.validate(&root_name).map_err(|e| {
                Error::InvalidConfig(format!("cgroup root {}: {e}", config.cgroup_root))
            })?;
            let node = root_name.child(NODE_ALLOCATABLE_CGROUP);
            let limits = &resources.kubepods_limits;
            let rc = cgroup_config_from_amounts(limits);
            if cgroups.exists(&node) {
                // Go retries this in the background (usage may exceed a lowered limit until
                // evictions bring it down); a failed update does not stop the kubelet.
                if let Err(e) = cgroups.update(&node, &rc) {
                    tracing::warn!(cgroup = %node, error = %e, "failed to update node allocatable limits");
                }
            } else {
                cgroups.create(&node, &rc)?;
            }
            tracing::info!(cgroup = %node, config = ?rc, "node allocatable cgroup ready");
            kubepods_config = Some(rc);
            crate::reserved_cgroups::enforce(cgroups.as_ref(), &reserved)?;
            node
        } else {
            root_name
        };

        let period_us = u64::try_from(config.cpu_cfs_quota_period.as_micros()).unwrap_or(100_000);
        let inner = Arc::new(Inner {
            config,
            cgroups,
            node_cgroup,
            pods: Mutex::new(HashMap::new()),
            period_us,
        });
        if inner.config.cgroups_per_qos {
            inner.setup_qos(&machine)?;
        }
        let machine = Arc::new(machine);
        Ok(LinuxContainerManager {
            stats: Arc::new(CgroupStats::new(inner.clone(), machine.clone())),
            inner,
            machine,
            mounts,
            capacity: resources.capacity,
            allocatable: resources.allocatable,
            kubepods_config,
        })
    }

    /// The machine info read at start.
    pub fn machine_info(&self) -> &MachineInfo {
        &self.machine
    }

    /// The cgroup mounts detected at start.
    pub fn cgroup_mounts(&self) -> &CgroupMounts {
        &self.mounts
    }

    /// The cgroup manager in use (for inspection and tests).
    pub fn cgroup_manager(&self) -> &dyn CgroupManager {
        self.inner.cgroups.as_ref()
    }

    /// The settings applied to `kubepods` (None when cgroups per QoS are off).
    pub fn node_allocatable_config(&self) -> Option<&ResourceConfig> {
        self.kubepods_config.as_ref()
    }

    /// The cgroup a pod of this QoS class gets as parent: `kubepods` (Guaranteed),
    /// `kubepods/burstable`, `kubepods/besteffort`.
    pub fn qos_cgroup(&self, qos: QosClass) -> CgroupName {
        self.inner.qos_cgroup(qos)
    }

    /// The pod's cgroup (`…/pod<uid>`) as cgroupfs path, or None when cgroups per QoS are off.
    pub fn pod_cgroup_name(&self, pod: &Pod) -> Option<CgroupName> {
        self.inner.pod_cgroup(pod)
    }

    /// Puts the kubelet in `kubeletCgroups` and the root cgroup's processes in
    /// `systemCgroups` ([`crate::process_placement`]); what failed, one message each. Blocking
    /// file I/O: call it off the async runtime, at start and every
    /// [`crate::process_placement::PLACEMENT_PERIOD`]. Both are literal cgroupfs paths
    /// whatever the driver, as Go's `createManager` makes them (`Systemd: false`): with the
    /// systemd driver `kubeletCgroups: /system.slice/kubelet.service` is that directory.
    pub fn place_system_processes(&self) -> Vec<String> {
        crate::process_placement::place_processes(
            self.inner.cgroups.cgroupfs(),
            &self.inner.config.system_cgroups,
            &self.inner.config.root,
            std::process::id(),
        )
    }

    /// The stats provider over this manager's cgroups (also [`ContainerManager::node_stats`]).
    pub fn stats(&self) -> Arc<CgroupStats> {
        self.stats.clone()
    }
}

/// How long a call to systemd (and the job it starts) may take.
const SYSTEMD_TIMEOUT: Duration = Duration::from_secs(10);

/// Go's `IsRunningSystemd` (`/run/systemd/system` exists), then a connection to the system bus.
fn connect_systemd(root: &std::path::Path) -> Result<DbusSystemd, Error> {
    let marker = crate::host_root::under(root, "/run/systemd/system");
    if !marker.is_dir() {
        return Err(Error::SystemdUnavailable {
            reason: format!("{} does not exist", marker.display()),
        });
    }
    DbusSystemd::connect(&DbusSystemd::system_bus_address(), SYSTEMD_TIMEOUT).map_err(|e| {
        Error::SystemdUnavailable {
            reason: e.to_string(),
        }
    })
}

fn validate_enforce_keys(keys: &[String]) -> Result<(), Error> {
    for k in keys {
        match k.as_str() {
            "pods" => {}
            "none" if keys.len() == 1 => {}
            "none" => {
                return Err(Error::InvalidConfig(
                    "enforceNodeAllocatable: \"none\" cannot be combined with other options".into(),
                ))
            }
            // Checked with their cgroups by `reserved_cgroups::plan`.
            "system-reserved"
            | "kube-reserved"
            | "system-reserved-compressible"
            | "kube-reserved-compressible" => {}
            other => {
                return Err(Error::InvalidConfig(format!(
                    "enforceNodeAllocatable: unknown option {other:?}"
                )))
            }
        }
    }
    Ok(())
}

/// `kubelet_cgroup_manager_duration_seconds{operation_type}` of one cgroup operation.
fn observe_cgroup_op(operation: &str, started: std::time::Instant) {
    kubelet_core::metrics::global()
        .cgroup_manager_duration
        .with(operation)
        .observe(kubelet_core::clock::elapsed(started));
}

/// Go's `getCgroupConfig` for node allocatable: cpu → shares, memory → limit, pid → pids
/// limit, hugepages-* → hugetlb limits.
pub(crate) fn cgroup_config_from_amounts(limits: &Amounts) -> ResourceConfig {
    let mut rc = ResourceConfig::default();
    if let Some(cpu) = limits.get("cpu") {
        rc.cpu_shares = Some(milli_cpu_to_shares(*cpu));
    }
    if let Some(mem) = limits.get("memory") {
        rc.memory = Some(*mem);
    }
    if let Some(pid) = limits.get(RESOURCE_PID) {
        rc.pids_limit = Some(*pid);
    }
    for (k, v) in limits {
        if let Some(size) = hugepage_size_bytes(k) {
            rc.hugepage_limits.insert(size, *v);
        }
    }
    rc
}

impl Inner {
    /// The cgroup every pod runs under (`cgroupRoot/kubepods`, or `cgroupRoot`).
    pub(crate) fn node_cgroup(&self) -> &CgroupName {
        &self.node_cgroup
    }

    fn qos_cgroup(&self, qos: QosClass) -> CgroupName {
        match qos {
            QosClass::Guaranteed => self.node_cgroup.clone(),
            QosClass::Burstable => self.node_cgroup.child("burstable"),
            QosClass::BestEffort => self.node_cgroup.child("besteffort"),
        }
    }

    /// Creates (or updates) the Burstable and BestEffort tiers; hugepages unbounded.
    fn setup_qos(&self, machine: &MachineInfo) -> Result<(), Error> {
        let unbounded: BTreeMap<u64, i64> = machine
            .hugepages
            .iter()
            .map(|h| (h.page_size_kb * 1024, i64::MAX))
            .collect();
        for qos in [QosClass::Burstable, QosClass::BestEffort] {
            let name = self.qos_cgroup(qos);
            let rc = ResourceConfig {
                cpu_shares: (qos == QosClass::BestEffort).then_some(MIN_SHARES),
                hugepage_limits: unbounded.clone(),
                ..Default::default()
            };
            if self.cgroups.exists(&name) {
                self.cgroups.update(&name, &rc)?;
            } else {
                self.cgroups.create(&name, &rc)?;
            }
        }
        self.update_qos_cpu()?;
        Ok(())
    }

    /// Go's `setCPUCgroupConfig`: BestEffort 2 shares; Burstable = shares of the summed cpu
    /// requests of the Burstable pods set up here.
    fn update_qos_cpu(&self) -> Result<(), Error> {
        let burstable_milli: i64 = self
            .pods
            .lock()
            .map(|p| {
                p.values()
                    .filter(|t| t.qos == QosClass::Burstable)
                    .map(|t| t.cpu_request_milli)
                    .fold(0, i64::saturating_add)
            })
            .unwrap_or(0);
        let shares = milli_cpu_to_shares(burstable_milli);
        self.cgroups.update(
            &self.qos_cgroup(QosClass::BestEffort),
            &ResourceConfig {
                cpu_shares: Some(MIN_SHARES),
                ..Default::default()
            },
        )?;
        self.cgroups.update(
            &self.qos_cgroup(QosClass::Burstable),
            &ResourceConfig {
                cpu_shares: Some(shares),
                ..Default::default()
            },
        )?;
        tracing::debug!(burstable_milli, shares, "updated QoS cpu shares");
        Ok(())
    }

    /// The pod's cgroup (`…/pod<uid>` under its QoS parent), or None when cgroups per QoS
    /// are off.
    pub(crate) fn pod_cgroup(&self, pod: &Pod) -> Option<CgroupName> {
        if !self.config.cgroups_per_qos {
            return None;
        }
        let uid = pod.metadata.uid.as_deref()?;
        Some(self.qos_cgroup(pod_qos(pod)).child(&format!("pod{uid}")))
    }

    fn ensure_pod(&self, pod: &Pod, pod_ref: &str) -> Result<PodResources, PodCgroupError> {
        if !self.config.cgroups_per_qos {
            return Ok(PodResources {
                cgroup_parent: None,
            });
        }
        let uid = pod
            .metadata
            .uid
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or(PodCgroupError::NoUid)?;
        if uid.contains('/') || uid.contains("..") {
            return Err(PodCgroupError::UnusableUid(uid.to_string()));
        }
        let qos = pod_qos(pod);
        let cpu_request_milli = pod_request(pod, "cpu")?;
        let name = self.qos_cgroup(qos).child(&format!("pod{uid}"));
        let changed = {
            let mut pods = self.pods.lock().map_err(|_| PodCgroupError::Poisoned)?;
            let prev = pods.insert(
                uid.to_string(),
                TrackedPod {
                    qos,
                    cpu_request_milli,
                },
            );
            qos == QosClass::Burstable
                && prev.is_none_or(|p| p.qos != qos || p.cpu_request_milli != cpu_request_milli)
        };
        if !self.cgroups.exists(&name) {
            if changed {
                // As Go: the QoS tiers are updated before the pod cgroup is created.
                let started = kubelet_core::clock::monotonic_now();
                let updated = self.update_qos_cpu();
                observe_cgroup_op("update", started);
                updated?;
            }
            let mut rc = resource_config_for_pod(pod, self.config.cpu_cfs_quota, self.period_us)?;
            if self.config.pod_pids_limit > 0 {
                rc.pids_limit = Some(self.config.pod_pids_limit);
            }
            let started = kubelet_core::clock::monotonic_now();
            let created = self.cgroups.create(&name, &rc);
            observe_cgroup_op("create", started);
            created?;
            tracing::info!(pod = pod_ref, uid, cgroup = %name, qos = qos.as_str(), "created pod cgroup");
        } else if changed {
            let started = kubelet_core::clock::monotonic_now();
            let updated = self.update_qos_cpu();
            observe_cgroup_op("update", started);
            updated?;
        }
        Ok(PodResources {
            cgroup_parent: Some(self.cgroups.runtime_name(&name)),
        })
    }

    fn remove_pod(&self, uid: &str) -> Result<(), PodCgroupError> {
        if !self.config.cgroups_per_qos {
            return Ok(());
        }
        let started = kubelet_core::clock::monotonic_now();
        let removed = self.remove_pod_cgroups(uid);
        observe_cgroup_op("destroy", started);
        removed
    }

    fn remove_pod_cgroups(&self, uid: &str) -> Result<(), PodCgroupError> {
        let mut first_err = None;
        let leaf = format!("pod{uid}");
        for q in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            let name = self.qos_cgroup(q).child(&leaf);
            if let Err(e) = self.cgroups.destroy(&name) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e.into());
        }
        let was_burstable = self
            .pods
            .lock()
            .map_err(|_| PodCgroupError::Poisoned)?
            .remove(uid)
            .is_some_and(|t| t.qos == QosClass::Burstable);
        if was_burstable {
            self.update_qos_cpu()?;
        }
        tracing::info!(uid, "removed pod cgroup");
        Ok(())
    }

    fn pods_with_resources(&self) -> Result<Vec<String>, PodCgroupError> {
        if !self.config.cgroups_per_qos {
            return Ok(Vec::new());
        }
        let mut uids = std::collections::BTreeSet::new();
        for q in [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ] {
            let parent = self.qos_cgroup(q);
            for child in self.cgroups.children(&parent)? {
                if let Some(uid) = child.strip_prefix("pod").filter(|u| !u.is_empty()) {
                    uids.insert(uid.to_string());
                }
            }
        }
        Ok(uids.into_iter().collect())
    }
}

/// Why a pod cgroup could not be set up, removed or listed (reported through [`CmError`]).
#[derive(Debug, thiserror::Error)]
enum PodCgroupError {
    /// The pod has no uid to name its cgroup after.
    #[error("pod has no uid")]
    NoUid,
    /// The uid would escape the QoS cgroup.
    #[error("pod uid {0:?} is not usable as a cgroup name")]
    UnusableUid(String),
    /// A resource quantity of the pod is malformed.
    #[error(transparent)]
    Quantity(#[from] kubelet_core::resources::QuantityError),
    /// Reading or writing the cgroups failed.
    #[error(transparent)]
    Cgroup(#[from] Error),
    /// A thread panicked while holding the pod table.
    #[error("pod table lock poisoned")]
    Poisoned,
}

impl From<crate::cgroups::CgroupError> for PodCgroupError {
    fn from(e: crate::cgroups::CgroupError) -> Self {
        PodCgroupError::Cgroup(Error::Cgroup(e))
    }
}

fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

#[async_trait]
impl ContainerManager for LinuxContainerManager {
    fn capacity(&self) -> ResourceList {
        self.capacity.clone()
    }

    fn allocatable(&self) -> ResourceList {
        self.allocatable.clone()
    }

    async fn ensure_pod_resources(&self, pod: &Pod) -> Result<PodResources, CmError> {
        let inner = self.inner.clone();
        let pod = pod.clone();
        let who = pod_ref(&pod);
        let who2 = who.clone();
        tokio::task::spawn_blocking(move || inner.ensure_pod(&pod, &who2))
            .await
            .map_err(|e| CmError::PodSetup {
                pod: who.clone(),
                message: format!("cgroup task failed: {e}"),
            })?
            .map_err(|e| CmError::PodSetup {
                pod: who,
                message: e.to_string(),
            })
    }

    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError> {
        let inner = self.inner.clone();
        let uid = pod_uid.to_string();
        tokio::task::spawn_blocking(move || inner.remove_pod(&uid))
            .await
            .map_err(|e| CmError::PodTeardown {
                uid: pod_uid.to_string(),
                message: format!("cgroup task failed: {e}"),
            })?
            .map_err(|e| CmError::PodTeardown {
                uid: pod_uid.to_string(),
                message: e.to_string(),
            })
    }

    fn node_stats(&self) -> Option<Arc<dyn NodeStatsProvider>> {
        Some(self.stats.clone())
    }

    fn pod_cgroup_parent(&self, pod: &Pod) -> Option<String> {
        self.pod_cgroup_name(pod)
            .map(|n| self.inner.cgroups.runtime_name(&n))
    }

    fn container_cgroup(&self, pod: &Pod, container_id: &str) -> Option<String> {
        if !crate::cgroups::is_plain_container_id(container_id) {
            return None;
        }
        let cgroups = self.inner.cgroups.as_ref();
        let candidates = cgroups.container_cgroups(&self.pod_cgroup_name(pod)?, container_id);
        let literal = cgroups.cgroupfs();
        candidates
            .iter()
            .find(|c| literal.exists(c))
            .or(candidates.first())
            .map(CgroupName::to_cgroupfs)
    }

    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.pods_with_resources())
            .await
            .map_err(|e| CmError::Read {
                what: "pod cgroups".into(),
                message: format!("cgroup task failed: {e}"),
            })?
            .map_err(|e| CmError::Read {
                what: "pod cgroups".into(),
                message: e.to_string(),
            })
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
