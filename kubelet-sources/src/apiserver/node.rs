//! Node registration and node status (Go's `kubelet_node_status.go` and `nodestatus/setters.go`).
//!
//! - [`initial_node`] builds the Node the kubelet registers: default labels
//!   (`kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and their `beta.`
//!   forms) plus `--node-labels`, `--register-with-taints`, the controller-managed
//!   attach/detach annotation, and a status from every setter.
//! - [`register`] creates it, retrying with backoff (100ms doubling to 7s) until it succeeds;
//!   an existing Node is adopted: the labels and annotations the kubelet owns are reconciled
//!   with a merge patch instead of failing.
//! - The status is computed by composable setters ([`SETTERS`]) from an [`Observed`]
//!   snapshot: addresses, capacity/allocatable, nodeInfo, daemonEndpoints, images (at most
//!   `nodeStatusMaxImages`) and the conditions Ready / MemoryPressure / DiskPressure /
//!   PIDPressure. A condition's `lastTransitionTime` moves only when its status changes.
//! - [`NodeStatusLoop`] runs every `nodeStatusUpdateFrequency` (10s) and patches `nodes/status`
//!   only when the status changed (heartbeat times aside) or `nodeStatusReportFrequency` (5m)
//!   passed. The patch is a strategic merge patch that names only the conditions the kubelet
//!   owns, so conditions written by others (e.g. NetworkUnavailable, node-problem-detector)
//!   are never overwritten.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeSpec, NodeStatus, NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use kubelet_core::cm::ResourceList;
use kubelet_core::runtime::ImageInfo;
use kubelet_core::sink::{Event, EventObject, EventType, StatusSink};
use kubelet_core::KubeletHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{req_err, ApiError};

/// The kubelet version reported in nodeInfo: the API level it follows, marked as kubelet-rs.
pub const KUBELET_VERSION: &str = concat!("v1.20.2-kubelet-rs.", env!("CARGO_PKG_VERSION"));
/// Annotation telling the attach/detach controller it manages this node's volumes.
pub const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";
/// Go's `maxNamesPerImageInNodeStatus`.
const MAX_NAMES_PER_IMAGE: usize = 5;
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
}

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
            kubelet_version: KUBELET_VERSION.to_string(),
        }
    }
}

/// Facts about the machine, read once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    /// /etc/machine-id.
    pub machine_id: String,
    /// /sys/class/dmi/id/product_uuid.
    pub system_uuid: String,
    /// /proc/sys/kernel/random/boot_id.
    pub boot_id: String,
    /// /proc/sys/kernel/osrelease.
    pub kernel_version: String,
    /// PRETTY_NAME of /etc/os-release.
    pub os_image: String,
}

impl MachineInfo {
    /// Reads the machine's identity files (missing ones are left empty).
    pub async fn read() -> Self {
        async fn first_line(path: &str) -> String {
            tokio::fs::read_to_string(Path::new(path))
                .await
                .map(|s| s.lines().next().unwrap_or("").trim().to_string())
                .unwrap_or_default()
        }
        let mut machine_id = first_line("/etc/machine-id").await;
        if machine_id.is_empty() {
            machine_id = first_line("/var/lib/dbus/machine-id").await;
        }
        let os_release = tokio::fs::read_to_string("/etc/os-release")
            .await
            .unwrap_or_default();
        MachineInfo {
            machine_id,
            system_uuid: first_line("/sys/class/dmi/id/product_uuid").await,
            boot_id: first_line("/proc/sys/kernel/random/boot_id").await,
            kernel_version: first_line("/proc/sys/kernel/osrelease").await,
            os_image: parse_pretty_name(&os_release),
        }
    }
}

/// PRETTY_NAME from os-release text ("Linux" when absent, as Go).
pub fn parse_pretty_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_string())
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
    /// Machine identity.
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
    /// Memory pressure (no eviction manager yet: false).
    pub memory_pressure: bool,
    /// Disk pressure.
    pub disk_pressure: bool,
    /// PID pressure.
    pub pid_pressure: bool,
    /// Images on the node.
    pub images: Vec<ImageInfo>,
}

/// Everything a setter needs besides the node.
#[derive(Debug, Clone, Copy)]
pub struct SetterContext<'a> {
    /// Static configuration.
    pub config: &'a NodeConfig,
    /// The snapshot.
    pub observed: &'a Observed,
    /// Now (heartbeat and transition times).
    pub now: &'a Time,
}

/// A status setter: updates part of the node from the snapshot.
pub type Setter = fn(&mut Node, &SetterContext<'_>);

/// The setters, in Go's order.
pub const SETTERS: [Setter; 9] = [
    set_addresses,
    set_resources,
    set_node_info,
    set_daemon_endpoints,
    set_images,
    set_memory_pressure,
    set_disk_pressure,
    set_pid_pressure,
    set_ready,
];

/// Applies every setter.
pub fn set_node_status(node: &mut Node, ctx: &SetterContext<'_>) {
    for s in SETTERS {
        s(node, ctx);
    }
}

fn status(node: &mut Node) -> &mut NodeStatus {
    node.status.get_or_insert_with(Default::default)
}

/// InternalIP per node IP, then Hostname.
pub fn set_addresses(node: &mut Node, ctx: &SetterContext<'_>) {
    let mut addrs: Vec<NodeAddress> = ctx
        .config
        .node_ips
        .iter()
        .map(|ip| NodeAddress {
            type_: "InternalIP".into(),
            address: ip.clone(),
        })
        .collect();
    addrs.push(NodeAddress {
        type_: "Hostname".into(),
        address: ctx.config.hostname.clone(),
    });
    status(node).addresses = Some(addrs);
}

/// Capacity and allocatable from the container manager (unknown resources others added,
/// such as extended resources from device plugins, are kept).
pub fn set_resources(node: &mut Node, ctx: &SetterContext<'_>) {
    let st = status(node);
    let cap = st.capacity.get_or_insert_with(Default::default);
    for (k, v) in &ctx.observed.capacity {
        cap.insert(k.clone(), v.clone());
    }
    let alloc = st.allocatable.get_or_insert_with(Default::default);
    for (k, v) in &ctx.observed.allocatable {
        alloc.insert(k.clone(), v.clone());
    }
}

/// nodeInfo: machine identity, OS, architecture, runtime and kubelet versions.
pub fn set_node_info(node: &mut Node, ctx: &SetterContext<'_>) {
    let m = &ctx.observed.machine;
    status(node).node_info = Some(NodeSystemInfo {
        machine_id: m.machine_id.clone(),
        system_uuid: m.system_uuid.clone(),
        boot_id: m.boot_id.clone(),
        kernel_version: m.kernel_version.clone(),
        os_image: m.os_image.clone(),
        operating_system: "linux".into(),
        architecture: go_arch().into(),
        container_runtime_version: ctx.observed.runtime_version.clone(),
        kubelet_version: ctx.config.kubelet_version.clone(),
        kube_proxy_version: ctx.config.kubelet_version.clone(),
        ..Default::default()
    });
}

/// daemonEndpoints: the kubelet port.
pub fn set_daemon_endpoints(node: &mut Node, ctx: &SetterContext<'_>) {
    status(node).daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: ctx.config.kubelet_port,
        }),
    });
}

/// images: largest first, at most `max_images`, names = digests then tags (at most 5).
pub fn set_images(node: &mut Node, ctx: &SetterContext<'_>) {
    let mut images: Vec<&ImageInfo> = ctx.observed.images.iter().collect();
    images.sort_by(|a, b| b.size_bytes.cmp(&a.size_bytes).then(a.id.cmp(&b.id)));
    if ctx.config.max_images >= 0 {
        images.truncate(usize::try_from(ctx.config.max_images).unwrap_or(0));
    }
    let list: Vec<ContainerImage> = images
        .into_iter()
        .map(|i| {
            let mut names: Vec<String> = i
                .repo_digests
                .iter()
                .chain(i.repo_tags.iter())
                .cloned()
                .collect();
            if names.is_empty() {
                names.push(i.id.clone());
            }
            names.truncate(MAX_NAMES_PER_IMAGE);
            ContainerImage {
                names: Some(names),
                size_bytes: i64::try_from(i.size_bytes).ok(),
            }
        })
        .collect();
    status(node).images = Some(list);
}

/// Sets (or adds) a condition: heartbeat is always `now`; transition only when the status
/// changed (or the condition is new).
pub fn set_condition(
    node: &mut Node,
    now: &Time,
    type_: &str,
    status_: bool,
    reason: &str,
    message: &str,
) {
    let want = if status_ { "True" } else { "False" };
    let conds = status(node).conditions.get_or_insert_with(Vec::new);
    let existing = conds.iter_mut().find(|c| c.type_ == type_);
    match existing {
        Some(c) => {
            if c.status != want {
                c.last_transition_time = Some(now.clone());
            }
            c.status = want.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_heartbeat_time = Some(now.clone());
        }
        None => conds.push(NodeCondition {
            type_: type_.into(),
            status: want.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        }),
    }
}

/// MemoryPressure.
pub fn set_memory_pressure(node: &mut Node, ctx: &SetterContext<'_>) {
    if ctx.observed.memory_pressure {
        set_condition(
            node,
            ctx.now,
            "MemoryPressure",
            true,
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        );
    } else {
        set_condition(
            node,
            ctx.now,
            "MemoryPressure",
            false,
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        );
    }
}

/// DiskPressure.
pub fn set_disk_pressure(node: &mut Node, ctx: &SetterContext<'_>) {
    if ctx.observed.disk_pressure {
        set_condition(
            node,
            ctx.now,
            "DiskPressure",
            true,
            "KubeletHasDiskPressure",
            "kubelet has disk pressure",
        );
    } else {
        set_condition(
            node,
            ctx.now,
            "DiskPressure",
            false,
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        );
    }
}

/// PIDPressure.
pub fn set_pid_pressure(node: &mut Node, ctx: &SetterContext<'_>) {
    if ctx.observed.pid_pressure {
        set_condition(
            node,
            ctx.now,
            "PIDPressure",
            true,
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        );
    } else {
        set_condition(
            node,
            ctx.now,
            "PIDPressure",
            false,
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        );
    }
}

/// The reasons the node is not ready (empty: ready), as Go's `ReadyCondition` setter.
pub fn not_ready_reasons(o: &Observed) -> Vec<String> {
    let mut errs = Vec::new();
    if !o.runtime_ready {
        errs.push(
            format!("container runtime is down: {}", o.runtime_message)
                .trim_end_matches(": ")
                .to_string(),
        );
    }
    if !o.network_ready {
        errs.push(
            format!("container runtime network not ready: {}", o.runtime_message)
                .trim_end_matches(": ")
                .to_string(),
        );
    }
    if let Err(e) = &o.health {
        errs.push(e.clone());
    }
    let missing: Vec<&str> = ["cpu", "memory", "pods"]
        .into_iter()
        .filter(|r| !o.capacity.contains_key(*r))
        .collect();
    if !missing.is_empty() {
        errs.push(format!(
            "missing node capacity for resources: {}",
            missing.join(", ")
        ));
    }
    errs
}

/// Ready: runtime and network ready, sync loop and PLEG healthy, capacity known.
pub fn set_ready(node: &mut Node, ctx: &SetterContext<'_>) {
    let errs = not_ready_reasons(ctx.observed);
    if errs.is_empty() {
        set_condition(
            node,
            ctx.now,
            "Ready",
            true,
            "KubeletReady",
            "kubelet is posting ready status",
        );
    } else {
        set_condition(
            node,
            ctx.now,
            "Ready",
            false,
            "KubeletNotReady",
            &errs.join(","),
        );
    }
}

/// The node's Ready condition status ("True"/"False"/"Unknown"), if set.
pub fn ready_status(node: &Node) -> Option<&str> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str())
}

/// Whether the server's copy of the node disagrees with what the kubelet last sent about a
/// condition it owns (status or reason) — e.g. the node lifecycle controller marked the node
/// `Unknown` while the kubelet could not reach the API server.
pub fn owned_conditions_drifted(server: &Node, sent: &Node) -> bool {
    let pick = |n: &Node, t: &str| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    OWNED_CONDITIONS
        .iter()
        .any(|t| pick(server, t) != pick(sent, t))
}

/// Whether two statuses differ in anything but condition heartbeat times (Go's
/// `nodeStatusHasChanged`).
pub fn status_changed(old: &NodeStatus, new: &NodeStatus) -> bool {
    fn strip(s: &NodeStatus) -> NodeStatus {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    }
    // Compare as the API would store them (times at second precision, empty = absent).
    let a = serde_json::to_value(strip(old)).unwrap_or_default();
    let b = serde_json::to_value(strip(new)).unwrap_or_default();
    a != b
}

/// The Node the kubelet registers (Go's `initialNode`), status filled by the setters.
pub fn initial_node(ctx: &SetterContext<'_>) -> Node {
    let cfg = ctx.config;
    let mut labels = default_labels(cfg);
    for (k, v) in &cfg.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut node = Node {
        metadata: ObjectMeta {
            name: Some(cfg.node_name.clone()),
            labels: Some(labels),
            annotations: Some(
                [(
                    CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
                    "true".to_string(),
                )]
                .into_iter()
                .collect(),
            ),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!cfg.taints.is_empty()).then(|| cfg.taints.clone()),
            ..Default::default()
        }),
        status: None,
    };
    set_node_status(&mut node, ctx);
    node
}

/// The labels the kubelet sets on its node.
pub fn default_labels(cfg: &NodeConfig) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", cfg.hostname.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", go_arch()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Labels in the `kubernetes.io`/`k8s.io` namespaces a kubelet may set on its node (what
/// the NodeRestriction admission plugin lets a node set on itself).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
/// Label namespaces a kubelet may use freely.
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Whether the kubelet may set this label on its own node (Go's `IsKubeletLabel`): labels
/// outside the `kubernetes.io` and `k8s.io` namespaces, the well-known ones, and those under
/// `kubelet.kubernetes.io/` and `node.kubernetes.io/`.
pub fn is_kubelet_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return true;
    };
    let k8s_namespace = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if !k8s_namespace("kubernetes.io") && !k8s_namespace("k8s.io") {
        return true;
    }
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")))
}

/// The `--node-labels` a node may not set on itself (Go refuses to start with them).
pub fn disallowed_node_labels(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .keys()
        .filter(|k| !is_kubelet_label(k))
        .cloned()
        .collect()
}

/// The metadata patch that makes an existing node carry the labels and annotations the
/// kubelet owns; `None` when it already does (Go's `reconcileExistingNode`).
pub fn adoption_patch(existing: &Node, wanted: &Node) -> Option<Node> {
    let have_l = existing.metadata.labels.clone().unwrap_or_default();
    let have_a = existing.metadata.annotations.clone().unwrap_or_default();
    let want_l = wanted.metadata.labels.clone().unwrap_or_default();
    let want_a = wanted.metadata.annotations.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = want_l
        .into_iter()
        .filter(|(k, v)| have_l.get(k) != Some(v))
        .collect();
    let annotations: BTreeMap<String, String> = want_a
        .into_iter()
        .filter(|(k, v)| have_a.get(k) != Some(v))
        .collect();
    if labels.is_empty() && annotations.is_empty() {
        return None;
    }
    Some(Node {
        metadata: ObjectMeta {
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The status patch: the whole status, with only the owned conditions (a strategic merge
/// patch merges conditions by type, so the others stay as they are).
pub fn status_patch(node: &Node) -> Node {
    let mut status = node.status.clone().unwrap_or_default();
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()));
    }
    Node {
        metadata: ObjectMeta::default(),
        spec: None,
        status: Some(status),
    }
}

/// Reads the [`Observed`] snapshot from a running kubelet.
pub async fn observe(handle: &KubeletHandle, machine: &MachineInfo) -> Observed {
    let runtime = handle.runtime();
    let cm = handle.container_manager();
    let (runtime_ready, network_ready, runtime_message) = match runtime.status().await {
        Ok(s) => (s.runtime_ready, s.network_ready, s.message),
        Err(e) => (false, false, e.to_string()),
    };
    let runtime_version = match runtime.version().await {
        Ok(v) => format!("{}://{}", v.runtime_name, v.runtime_version),
        Err(_) => String::new(),
    };
    let images = runtime.list_images().await.unwrap_or_else(|e| {
        tracing::debug!(error = %e, "listing images for the node status failed");
        Vec::new()
    });
    Observed {
        capacity: cm.capacity(),
        allocatable: cm.allocatable(),
        machine: machine.clone(),
        runtime_version,
        runtime_ready,
        network_ready,
        runtime_message,
        health: handle.check_health(),
        memory_pressure: false,
        disk_pressure: false,
        pid_pressure: false,
        images,
    }
}

/// Registers the node (create, or adopt an existing one), retrying with backoff until it
/// succeeds or `shutdown` fires. Returns the node as the API server has it.
pub async fn register(api: &Api<Node>, node: &Node, shutdown: &CancellationToken) -> Option<Node> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut delay = Duration::from_millis(100);
    loop {
        match try_register(api, node).await {
            Ok(n) => return Some(n),
            Err(e) => {
                tracing::warn!(node = %name, error = %e, retry_in = ?delay, "registering the node failed")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(7));
    }
}

async fn try_register(api: &Api<Node>, node: &Node) -> Result<Node, ApiError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), node).await {
        Ok(n) => {
            tracing::info!(node = %name, "node registered");
            return Ok(n);
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(req_err(format!("create node {name}"))(e)),
    }
    let existing = api
        .get(&name)
        .await
        .map_err(req_err(format!("get node {name}")))?;
    tracing::info!(node = %name, "node already exists; adopting it");
    match adoption_patch(&existing, node) {
        None => Ok(existing),
        Some(patch) => api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(req_err(format!("patch node {name}"))),
    }
}

/// The node status loop. See the module docs.
pub struct NodeStatusLoop {
    /// Node API over the heartbeat client.
    pub api: Api<Node>,
    /// Static configuration.
    pub config: NodeConfig,
    /// The kubelet.
    pub handle: KubeletHandle,
    /// Machine identity.
    pub machine: MachineInfo,
    /// Where node events go.
    pub events: Arc<dyn StatusSink>,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl std::fmt::Debug for NodeStatusLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStatusLoop")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The decision of one status tick, pure for testing.
#[derive(Debug, Clone, PartialEq)]
pub enum Tick {
    /// Nothing changed and the report interval has not passed.
    Skip,
    /// Patch with this node.
    Patch(Box<Node>),
}

/// Computes the next status from the last known node; patches when it changed or when
/// `report_due`.
pub fn next_status(last: &Node, ctx: &SetterContext<'_>, report_due: bool) -> Tick {
    let mut node = last.clone();
    set_node_status(&mut node, ctx);
    let old = last.status.clone().unwrap_or_default();
    let new = node.status.clone().unwrap_or_default();
    if report_due || status_changed(&old, &new) {
        Tick::Patch(Box::new(node))
    } else {
        Tick::Skip
    }
}

impl NodeStatusLoop {
    fn node_event(&self, event_type: EventType, reason: &str, message: String) {
        self.events.record_event(Event {
            object: EventObject::Node {
                name: self.config.node_name.clone(),
            },
            event_type,
            reason: reason.into(),
            message,
        });
    }

    /// Registers the node (when `registerNode`), then keeps its status up to date until
    /// `shutdown`. `registered` is called once the node exists.
    pub async fn run(
        self,
        registered: tokio::sync::watch::Sender<Option<Node>>,
        shutdown: CancellationToken,
    ) {
        let name = self.config.node_name.clone();
        self.node_event(EventType::Normal, "Starting", "Starting kubelet.".into());
        let mut last: Option<Node> = None;
        while last.is_none() {
            let observed = observe(&self.handle, &self.machine).await;
            let now = now();
            let ctx = SetterContext {
                config: &self.config,
                observed: &observed,
                now: &now,
            };
            if self.config.register_node {
                let node = initial_node(&ctx);
                match register(&self.api, &node, &shutdown).await {
                    Some(n) => {
                        self.node_event(
                            EventType::Normal,
                            "RegisteredNode",
                            format!("Node {name} registered"),
                        );
                        last = Some(n);
                    }
                    None => return,
                }
            } else {
                match self.api.get(&name).await {
                    Ok(n) => last = Some(n),
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "registerNode=false and the node cannot be read; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(self.config.status_update_frequency) => {}
                        }
                    }
                }
            }
        }
        let _ = registered.send(last.clone());
        let mut last = last.unwrap_or_default();
        // Force the first status patch right away.
        let mut last_report: Option<Instant> = None;
        let mut reported_ready: Option<String> = None;
        let mut tick = tokio::time::interval(self.config.status_update_frequency);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let observed = observe(&self.handle, &self.machine).await;
            let now = now();
            let ctx = SetterContext {
                config: &self.config,
                observed: &observed,
                now: &now,
            };
            let mut due =
                last_report.is_none_or(|t| t.elapsed() >= self.config.status_report_frequency);
            if !due {
                // As Go's kubelet, start from the server's copy (a cache read): someone else
                // may have changed a condition the kubelet owns.
                if let Some(server) = self.refresh_cached(&name).await {
                    if owned_conditions_drifted(&server, &last) {
                        tracing::info!(node = %name, "node conditions on the server differ from the kubelet's; patching");
                        due = true;
                    }
                }
            }
            let Tick::Patch(node) = next_status(&last, &ctx, due) else {
                continue;
            };
            let patch = status_patch(&node);
            let params = PatchParams::default();
            let body = Patch::Strategic(&patch);
            let req = self.api.patch_status(&name, &params, &body);
            match tokio::time::timeout(self.timeout, req).await {
                Ok(Ok(_)) => {
                    // The next tick compares with what was sent, not with the server's copy
                    // (the server canonicalises quantities, which is no change).
                    let n = *node;
                    let is = ready_status(&n).map(str::to_string);
                    if reported_ready != is {
                        reported_ready.clone_from(&is);
                        match is.as_deref() {
                            Some("True") => self.node_event(
                                EventType::Normal,
                                "NodeReady",
                                format!("Node {name} status is now: NodeReady"),
                            ),
                            _ => self.node_event(
                                EventType::Normal,
                                "NodeNotReady",
                                format!("Node {name} status is now: NodeNotReady"),
                            ),
                        }
                    }
                    tracing::debug!(node = %name, "node status patched");
                    last = n;
                    last_report = Some(Instant::now());
                }
                Ok(Err(kube::Error::Api(s))) if s.code == 404 && self.config.register_node => {
                    tracing::warn!(node = %name, "the node object is gone; registering it again");
                    match register(&self.api, &initial_node(&ctx), &shutdown).await {
                        Some(n) => {
                            self.node_event(
                                EventType::Normal,
                                "RegisteredNode",
                                format!("Node {name} registered"),
                            );
                            last = n;
                            last_report = None;
                        }
                        None => return,
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = %name, error = %e, "updating the node status failed; will retry");
                    last = self.refresh(&name).await.unwrap_or(last);
                }
                Err(_) => {
                    tracing::warn!(node = %name, timeout = ?self.timeout, "updating the node status timed out; will retry");
                }
            }
        }
    }

    /// The node from the API server's cache (`resourceVersion=0`), as Go's kubelet reads it
    /// before each status update.
    async fn refresh_cached(&self, name: &str) -> Option<Node> {
        let params = kube::api::GetParams::any();
        match tokio::time::timeout(self.timeout, self.api.get_with(name, &params)).await {
            Ok(Ok(n)) => Some(n),
            _ => None,
        }
    }

    async fn refresh(&self, name: &str) -> Option<Node> {
        match tokio::time::timeout(self.timeout, self.api.get(name)).await {
            Ok(Ok(n)) => Some(n),
            _ => None,
        }
    }
}

fn now() -> Time {
    kubelet_core::clock::now_time().unwrap_or(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    type ReadyCase = (
        &'static str,
        Box<dyn Fn(&mut Observed)>,
        &'static str,
        &'static str,
    );

    fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap())
    }

    fn observed() -> Observed {
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
            },
            runtime_version: "containerd://1.6.20".into(),
            runtime_ready: true,
            network_ready: true,
            runtime_message: String::new(),
            health: Ok(()),
            memory_pressure: false,
            disk_pressure: false,
            pid_pressure: false,
            images: vec![],
        }
    }

    fn cond<'a>(n: &'a Node, ty: &str) -> &'a NodeCondition {
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

    #[test]
    fn initial_node_has_labels_taints_status() {
        let mut cfg = NodeConfig::new("n1");
        cfg.labels.insert("tier".into(), "edge".into());
        cfg.taints.push(Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        });
        cfg.node_ips = vec!["10.0.0.5".into()];
        let o = observed();
        let now = t(0);
        let node = initial_node(&SetterContext {
            config: &cfg,
            observed: &o,
            now: &now,
        });
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], go_arch());
        assert_eq!(labels["tier"], "edge");
        assert_eq!(
            node.spec.as_ref().unwrap().taints.as_ref().unwrap().len(),
            1
        );
        let st = node.status.as_ref().unwrap();
        assert_eq!(st.capacity.as_ref().unwrap()["pods"].0, "110");
        assert_eq!(st.allocatable.as_ref().unwrap()["cpu"].0, "1900m");
        let addrs = st.addresses.as_ref().unwrap();
        assert_eq!(
            (addrs[0].type_.as_str(), addrs[0].address.as_str()),
            ("InternalIP", "10.0.0.5")
        );
        assert_eq!(addrs[1].type_, "Hostname");
        let info = st.node_info.as_ref().unwrap();
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(
            st.daemon_endpoints
                .as_ref()
                .unwrap()
                .kubelet_endpoint
                .as_ref()
                .unwrap()
                .port,
            10250
        );
        assert_eq!(cond(&node, "Ready").status, "True");
        assert_eq!(cond(&node, "MemoryPressure").status, "False");
        assert_eq!(
            cond(&node, "DiskPressure").reason.as_deref(),
            Some("KubeletHasNoDiskPressure")
        );
        assert_eq!(cond(&node, "PIDPressure").status, "False");
    }

    #[test]
    fn ready_condition_cases() {
        let cases: Vec<ReadyCase> = vec![
            (
                "healthy",
                Box::new(|_| {}),
                "True",
                "kubelet is posting ready status",
            ),
            (
                "runtime down",
                Box::new(|o| {
                    o.runtime_ready = false;
                    o.runtime_message = "x".into();
                }),
                "False",
                "container runtime is down: x",
            ),
            (
                "network",
                Box::new(|o| o.network_ready = false),
                "False",
                "container runtime network not ready",
            ),
            (
                "pleg",
                Box::new(|o| o.health = Err("PLEG is not healthy".into())),
                "False",
                "PLEG is not healthy",
            ),
            (
                "capacity",
                Box::new(|o| {
                    o.capacity.remove("pods");
                }),
                "False",
                "missing node capacity for resources: pods",
            ),
        ];
        for (name, edit, status, message) in cases {
            let mut o = observed();
            edit(&mut o);
            let cfg = NodeConfig::new("n1");
            let now = t(0);
            let mut node = Node::default();
            set_ready(
                &mut node,
                &SetterContext {
                    config: &cfg,
                    observed: &o,
                    now: &now,
                },
            );
            let c = cond(&node, "Ready");
            assert_eq!(c.status, status, "{name}");
            assert_eq!(c.message.as_deref(), Some(message), "{name}");
        }
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let cfg = NodeConfig::new("n1");
        let mut o = observed();
        let mut node = Node::default();
        let (t0, t1, t2) = (t(0), t(10), t(20));
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &t0,
            },
        );
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &t1,
            },
        );
        let c = cond(&node, "Ready");
        assert_eq!(c.last_transition_time, Some(t0.clone()));
        assert_eq!(c.last_heartbeat_time, Some(t1.clone()));
        o.network_ready = false;
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &t2,
            },
        );
        let c = cond(&node, "Ready");
        assert_eq!(c.status, "False");
        assert_eq!(c.last_transition_time, Some(t2.clone()));
        assert_eq!(cond(&node, "MemoryPressure").last_transition_time, Some(t0));
    }

    #[test]
    fn patches_only_on_change_or_when_report_is_due() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let mut node = Node::default();
        let t0 = t(0);
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &t0,
            },
        );
        let t1 = t(10);
        let ctx = SetterContext {
            config: &cfg,
            observed: &o,
            now: &t1,
        };
        assert_eq!(next_status(&node, &ctx, false), Tick::Skip);
        assert!(matches!(next_status(&node, &ctx, true), Tick::Patch(_)));
        let mut o2 = o.clone();
        o2.images.push(ImageInfo {
            id: "sha256:1".into(),
            repo_tags: vec!["busybox:1".into()],
            repo_digests: vec![],
            size_bytes: 10,
        });
        let ctx = SetterContext {
            config: &cfg,
            observed: &o2,
            now: &t1,
        };
        assert!(matches!(next_status(&node, &ctx, false), Tick::Patch(_)));
    }

    #[test]
    fn status_patch_keeps_foreign_conditions_out() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let mut node = Node::default();
        status(&mut node).conditions = Some(vec![NodeCondition {
            type_: "NetworkUnavailable".into(),
            status: "False".into(),
            ..Default::default()
        }]);
        let now = t(0);
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &now,
            },
        );
        let p = status_patch(&node);
        let types: Vec<&str> = p
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            types,
            vec!["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        // The patch is a typed Node, serialised without metadata fields.
        let v = serde_json::to_value(&p).unwrap();
        assert!(v.get("spec").is_none());
    }

    #[test]
    fn images_are_largest_first_and_capped() {
        let mut cfg = NodeConfig::new("n1");
        cfg.max_images = 2;
        let mut o = observed();
        for (i, size) in [(1, 5u64), (2, 50), (3, 20)] {
            o.images.push(ImageInfo {
                id: format!("sha256:{i}"),
                repo_tags: (0..7).map(|k| format!("img{i}:{k}")).collect(),
                repo_digests: vec![format!("img{i}@sha256:{i}")],
                size_bytes: size,
            });
        }
        let now = t(0);
        let mut node = Node::default();
        set_images(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &now,
            },
        );
        let imgs = node.status.unwrap().images.unwrap();
        assert_eq!(imgs.len(), 2);
        assert_eq!(imgs[0].size_bytes, Some(50));
        assert_eq!(imgs[1].size_bytes, Some(20));
        let names = imgs[0].names.as_ref().unwrap();
        assert_eq!(names.len(), MAX_NAMES_PER_IMAGE);
        assert_eq!(names[0], "img2@sha256:2");
    }

    #[test]
    fn adoption_patches_only_missing_owned_metadata() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let now = t(0);
        let wanted = initial_node(&SetterContext {
            config: &cfg,
            observed: &o,
            now: &now,
        });
        let mut existing = Node::default();
        existing.metadata.labels = Some(
            [
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("other".to_string(), "x".to_string()),
            ]
            .into_iter()
            .collect(),
        );
        let p = adoption_patch(&existing, &wanted).unwrap();
        let l = p.metadata.labels.unwrap();
        assert!(!l.contains_key("kubernetes.io/os") && !l.contains_key("other"));
        assert_eq!(l["kubernetes.io/hostname"], "n1");
        assert!(adoption_patch(&wanted, &wanted).is_none());
    }

    #[test]
    fn kubelet_labels() {
        let cases = [
            ("tier", true),
            ("example.com/team", true),
            ("kubernetes.io/hostname", true),
            ("topology.kubernetes.io/zone", true),
            (
                "node.kubernetes.io/exclude-from-external-load-balancers",
                true,
            ),
            ("kubelet.kubernetes.io/x", true),
            ("node-role.kubernetes.io/master", false),
            ("kubernetes.io/role", false),
            ("example.k8s.io/x", false),
        ];
        for (key, want) in cases {
            assert_eq!(is_kubelet_label(key), want, "{key}");
        }
    }

    #[test]
    fn pretty_name() {
        assert_eq!(
            parse_pretty_name("ID=debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
        assert_eq!(parse_pretty_name(""), "Linux");
    }

    #[test]
    fn drift_in_owned_conditions_only() {
        let cond = |t: &str, st: &str| NodeCondition {
            type_: t.into(),
            status: st.into(),
            ..Default::default()
        };
        let node = |cs: Vec<NodeCondition>| Node {
            status: Some(NodeStatus {
                conditions: Some(cs),
                ..Default::default()
            }),
            ..Default::default()
        };
        let sent = node(vec![cond("Ready", "True"), cond("MemoryPressure", "False")]);
        let same = node(vec![
            cond("MemoryPressure", "False"),
            cond("Ready", "True"),
            cond("NetworkUnavailable", "True"),
        ]);
        assert!(!owned_conditions_drifted(&same, &sent));
        let unknown = node(vec![
            cond("Ready", "Unknown"),
            cond("MemoryPressure", "False"),
        ]);
        assert!(owned_conditions_drifted(&unknown, &sent));
        assert!(owned_conditions_drifted(&node(vec![]), &sent));
    }
}
