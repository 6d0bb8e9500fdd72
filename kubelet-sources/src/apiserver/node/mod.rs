//! Node registration and node status (Go's `kubelet_node_status.go` and `nodestatus/setters.go`),
//! one file per job: [`setters`] (the status setters over an [`Observed`] snapshot),
//! [`registration`] (the initial Node, labels, create-or-adopt), [`status_loop`] and
//! [`lister`] (the watched Node object admission reads).
//!
//! - [`initial_node`] builds the Node the kubelet registers: default labels
//!   (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and their `beta.`
//!   forms) plus `--node-labels`, `--register-with-taints`, the controller-managed
//!   attach/detach annotation, and a status from every setter.
//! - [`register`] creates it, retrying with backoff (100ms doubling to 7s) until it succeeds;
//!   an existing Node is adopted: the labels and annotations the kubelet owns are reconciled
//!   with a merge patch instead of failing.
//! - The status is computed by composable setters ([`SETTERS`]) from an [`Observed`]
//!   snapshot ([`observe`]: the container manager's capacity, allocatable and — through the
//!   core stats contract — machine info, plus the runtime's status, version and images):
//!   addresses, capacity/allocatable, nodeInfo, daemonEndpoints, images (at most
//!   `nodeStatusMaxImages`) and the conditions Ready / MemoryPressure / DiskPressure /
//!   PIDPressure (the pressure conditions as the kubelet's eviction manager reports them,
//!   with Go's reasons and messages; the node lifecycle controller turns them into the
//!   `node.kubernetes.io/*-pressure` taints). A condition's `lastTransitionTime` moves only
//!   when its status changes; each change of a pressure condition is a node event
//!   (`NodeHasInsufficientMemory`, `NodeHasSufficientMemory`, `NodeHasDiskPressure`, …).
//! - [`NodeStatusLoop`] runs every `nodeStatusUpdateFrequency` (10s) and patches `nodes/status`
//!   only when the status changed (heartbeat times aside) or `nodeStatusReportFrequency` (5m)
//!   passed. The patch is a strategic merge patch that names only the conditions the kubelet
//!   owns, so conditions written by others (e.g. NetworkUnavailable, node-problem-detector)
//!   are never overwritten.

pub mod lister;
pub mod registration;
pub mod setters;
pub mod status_loop;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use kubelet_core::cm::ResourceList;
use kubelet_core::runtime::{ImageInfo, RuntimeHandler};
use kubelet_core::{KubeletHandle, MachineInfo};

pub use lister::NodeCache;
pub use registration::{
    adoption_patch, default_labels, disallowed_node_labels, initial_node, is_kubelet_label,
    register,
};
pub use setters::{
    adopt_foreign_capacity, not_ready_reasons, owned_conditions_drifted, ready_status,
    set_addresses, set_condition, set_daemon_endpoints, set_disk_pressure, set_features,
    set_images, set_memory_pressure, set_node_info, set_node_status, set_pid_pressure, set_ready,
    set_resources, set_runtime_handlers, status_changed, Setter, SetterContext, SETTERS,
};
pub use status_loop::{next_status, status_patch, status_patch_body, NodeStatusLoop, Tick};

/// The Kubernetes API level kubelet-rs implements: the k8s-openapi version feature it is
/// built with (`latest` in the workspace's Cargo.toml).
pub const API_LEVEL: &str = api_level();

#[allow(unreachable_code)]
const fn api_level() -> &'static str {
    k8s_openapi::k8s_if_1_33! { return "v1.33.0"; }
    k8s_openapi::k8s_if_1_34! { return "v1.34.0"; }
    k8s_openapi::k8s_if_1_35! { return "v1.35.0"; }
    k8s_openapi::k8s_if_1_36! { return "v1.36.0"; }
    k8s_openapi::k8s_if_1_37! { return "v1.37.0"; }
    "v0.0.0"
}

/// The kubelet version reported in nodeInfo: the API level it implements ([`API_LEVEL`])
/// with kubelet-rs's own version as semver build metadata, e.g. `v1.37.0+kubelet-rs.0.1.0`.
pub fn kubelet_version() -> String {
    format!("{API_LEVEL}+kubelet-rs.{}", env!("CARGO_PKG_VERSION"))
}
/// Annotation telling the attach/detach controller it manages this node's volumes.
pub const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
/// The condition types this kubelet owns.
pub const OWNED_CONDITIONS: [&str; 4] = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// What registration and the status loop need to know.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeConfig {
    /// The node name.
    pub node_name: String,
    /// The host name (the `Hostname` address and `kubernetes.io/hostname` label).
    pub hostname: String,
    /// `--node-labels`.
    pub labels: BTreeMap<String, String>,
    /// `--register-with-taints`.
    pub taints: Vec<Taint>,
    /// `--node-ip` (or detected): InternalIP addresses.
    pub node_ips: Vec<String>,
    /// `registerNode` (true): create the Node.
    pub register_node: bool,
    /// `nodeStatusUpdateFrequency` (10s).
    pub status_update_frequency: Duration,
    /// `nodeStatusReportFrequency` (5m).
    pub status_report_frequency: Duration,
    /// `nodeStatusMaxImages` (50); negative: no limit.
    pub max_images: i32,
    /// The kubelet's port in daemonEndpoints (10250).
    pub kubelet_port: i32,
    /// Reported kubelet (and kube-proxy) version.
    pub kubelet_version: String,
    /// `providerID` (`--provider-id`): the node's `spec.providerID` at registration.
    pub provider_id: String,
    /// `--cloud-provider=external`: the node registers with the
    /// [`EXTERNAL_CLOUD_PROVIDER_TAINT`] for the cloud controller manager to remove, an
    /// `--node-ip` given is annotated ([`PROVIDED_NODE_IP`]), and addresses the node already
    /// has (the cloud controller manager's) are left as they are.
    pub external_cloud_provider: bool,
    /// `--node-ip` was given (not detected).
    pub node_ip_specified: bool,
}

/// The taint a node registers with under an external cloud provider (Go's
/// `cloudproviderapi.TaintExternalCloudProvider`), value `true`, effect `NoSchedule`.
pub const EXTERNAL_CLOUD_PROVIDER_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The annotation carrying `--node-ip` under an external cloud provider (Go's
/// `cloudproviderapi.AnnotationAlphaProvidedIPAddr`).
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

impl NodeConfig {
    /// Go's defaults for a node name.
    pub fn new(node_name: impl Into<String>) -> Self {
        let node_name = node_name.into();
        NodeConfig {
            hostname: node_name.clone(),
            node_name,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            node_ips: Vec::new(),
            register_node: true,
            status_update_frequency: Duration::from_secs(10),
            status_report_frequency: Duration::from_secs(300),
            max_images: 50,
            kubelet_port: 10250,
            kubelet_version: kubelet_version(),
            provider_id: String::new(),
            external_cloud_provider: false,
            node_ip_specified: false,
        }
    }
}

/// Go's GOARCH name of the architecture this binary runs on.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "arm" => "arm",
        other => other,
    }
}

/// One snapshot of everything the status setters read.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Node capacity from the container manager.
    pub capacity: ResourceList,
    /// Node allocatable from the container manager.
    pub allocatable: ResourceList,
    /// The machine (nodeInfo reads its ids, kernel and OS image), from the container
    /// manager's stats provider; empty when it has none.
    pub machine: MachineInfo,
    /// `<runtime>://<version>`, e.g. `containerd://1.6.20`.
    pub runtime_version: String,
    /// The container runtime reports ready.
    pub runtime_ready: bool,
    /// The runtime's network (CNI) reports ready.
    pub network_ready: bool,
    /// Why the runtime is not ready (when it is not).
    pub runtime_message: String,
    /// The kubelet's own health (sync loop and PLEG); the error says what is wrong.
    pub health: Result<(), String>,
    /// Why the node is going away (graceful node shutdown in progress), if it is.
    pub shutting_down: Option<String>,
    /// Memory pressure, as the kubelet's eviction manager reports it.
    pub memory_pressure: bool,
    /// Disk pressure, as the eviction manager reports it.
    pub disk_pressure: bool,
    /// PID pressure, as the eviction manager reports it.
    pub pid_pressure: bool,
    /// Images on the node.
    pub images: Vec<ImageInfo>,
    /// The runtime handlers the runtime reports (CRI `runtime_handlers`).
    pub runtime_handlers: Vec<RuntimeHandler>,
    /// CRI `RuntimeFeatures.supplemental_groups_policy`, when the runtime reports features.
    pub supplemental_groups_policy: Option<bool>,
    /// The attachable volumes in use; `None` while the kubelet has not counted them.
    pub volumes_in_use: Option<Vec<String>>,
    /// Why storage keeps the node from being Ready, if it does.
    pub storage_error: Option<String>,
}

/// Reads the [`Observed`] snapshot from a running kubelet.
pub async fn observe(handle: &KubeletHandle) -> Observed {
    let runtime = handle.runtime();
    let cm = handle.container_manager();
    let (runtime_ready, network_ready, runtime_message, runtime_handlers, supplemental_groups) =
        match runtime.status().await {
            Ok(s) => (
                s.runtime_ready,
                s.network_ready,
                s.message,
                s.handlers,
                s.supplemental_groups_policy,
            ),
            Err(e) => (false, false, e.to_string(), Vec::new(), None),
        };
    let runtime_version = match runtime.version().await {
        Ok(v) => format!("{}://{}", v.runtime_name, v.runtime_version),
        Err(_) => String::new(),
    };
    let pressure = handle.node_pressure();
    let images = runtime.list_images().await.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "listing images for the node status failed");
        Vec::new()
    });
    // The device plugins' resources join the container manager's (Go's MachineInfo setter
    // takes both; a resource whose plugin is gone for good is at 0).
    let (mut capacity, mut allocatable) = (cm.capacity(), cm.allocatable());
    let (device_capacity, device_allocatable) = handle.device_capacity();
    capacity.extend(device_capacity);
    allocatable.extend(device_allocatable);
    Observed {
        capacity,
        allocatable,
        machine: cm
            .node_stats()
            .map(|s| s.machine_info().as_ref().clone())
            .unwrap_or_default(),
        runtime_version,
        runtime_ready,
        network_ready,
        runtime_message,
        health: handle.check_health(),
        shutting_down: handle.shutdown_status().map(str::to_string),
        memory_pressure: pressure.memory,
        disk_pressure: pressure.disk,
        pid_pressure: pressure.pid,
        images,
        runtime_handlers,
        supplemental_groups_policy: supplemental_groups,
        volumes_in_use: handle.volumes_in_use(),
        storage_error: handle.storage_error(),
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! The snapshot and helpers the node tests share.

    use super::*;
    use k8s_openapi::api::core::v1::{Node, NodeCondition};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub(crate) fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap())
    }

    pub(crate) fn observed() -> Observed {
        let q = |s: &str| Quantity(s.into());
        Observed {
            capacity: [("cpu", q("2")), ("memory", q("4Gi")), ("pods", q("110"))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            allocatable: [
                ("cpu", q("1900m")),
                ("memory", q("3Gi")),
                ("pods", q("110")),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            machine: MachineInfo {
                machine_id: "m".into(),
                system_uuid: "u".into(),
                boot_id: "b".into(),
                kernel_version: "6.1".into(),
                os_image: "Debian".into(),
                ..MachineInfo::default()
            },
            runtime_version: "containerd://1.6.20".into(),
            runtime_ready: true,
            network_ready: true,
            runtime_message: String::new(),
            health: Ok(()),
            shutting_down: None,
            memory_pressure: false,
            disk_pressure: false,
            pid_pressure: false,
            images: vec![],
            runtime_handlers: vec![],
            supplemental_groups_policy: None,
            volumes_in_use: None,
            storage_error: None,
        }
    }

    pub(crate) fn cond<'a>(n: &'a Node, ty: &str) -> &'a NodeCondition {
        n.status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == ty)
            .unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_core::testing::{FakeContainerManager, SimRuntime};
    use std::sync::Arc;

    #[tokio::test]
    async fn observe_reads_the_machine_from_the_container_managers_stats() {
        let kubelet = kubelet_core::Kubelet::builder()
            .config(kubelet_core::Config {
                node_name: "n1".into(),
                ..Default::default()
            })
            .runtime(Arc::new(SimRuntime::new()))
            .container_manager(Arc::new(FakeContainerManager::default()))
            .build()
            .unwrap();
        let o = observe(&kubelet.handle()).await;
        assert_eq!(o.machine.boot_id, "fake-boot-id");
        assert_eq!(o.machine.machine_id, "fake-machine-id");
        assert_eq!(o.machine.kernel_version, "6.1.0-fake");
        assert_eq!(o.capacity["pods"].0, "110");
        assert_eq!(o.runtime_version, "sim://0.1.0");
        assert!(o.runtime_ready && o.network_ready);
    }
}
