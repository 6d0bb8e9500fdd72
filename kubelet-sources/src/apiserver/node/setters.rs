//! The node status setters (Go's `nodestatus/setters.go`): each updates part of the Node
//! from the [`Observed`] snapshot, in Go's order ([`SETTERS`]).

use k8s_openapi::api::core::v1::{
    ContainerImage, DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints,
    NodeFeatures, NodeRuntimeHandler, NodeRuntimeHandlerFeatures, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubelet_core::admission::is_extended_resource_name;
use kubelet_core::runtime::ImageInfo;

use super::{go_arch, NodeConfig, Observed, OWNED_CONDITIONS};

/// Go's `maxNamesPerImageInNodeStatus`.
const MAX_NAMES_PER_IMAGE: usize = 5;
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
pub const SETTERS: [Setter; 12] = [
    set_addresses,
    set_resources,
    set_node_info,
    set_daemon_endpoints,
    set_images,
    set_runtime_handlers,
    set_features,
    set_memory_pressure,
    set_disk_pressure,
    set_pid_pressure,
    set_ready,
    set_volumes_in_use,
];

/// Applies every setter.
pub fn set_node_status(node: &mut Node, ctx: &SetterContext<'_>) {
    for s in SETTERS {
        s(node, ctx);
    }
}

/// `volumesInUse` (Go's `VolumesInUse` setter): the attachable volumes the kubelet uses, once
/// it has counted those on disk; until then the field stays as it is.
pub fn set_volumes_in_use(node: &mut Node, ctx: &SetterContext<'_>) {
    if let Some(in_use) = ctx.observed.volumes_in_use.as_ref() {
        status(node).volumes_in_use = Some(in_use.clone());
    }
}

pub(crate) fn status(node: &mut Node) -> &mut NodeStatus {
    node.status.get_or_insert_with(Default::default)
}

/// InternalIP per node IP, then Hostname; under an external cloud provider, only while the
/// node has no addresses (the cloud controller manager's win, as in Go).
pub fn set_addresses(node: &mut Node, ctx: &SetterContext<'_>) {
    if ctx.config.external_cloud_provider
        && node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| !a.is_empty())
    {
        return;
    }
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

/// Capacity and allocatable (Go's `MachineInfo` setter): the container manager's resources
/// are set; entries the kubelet does not manage (extended resources patched into the status
/// by others, device plugins) stay in capacity, and allocatable follows capacity for them as
/// Go's does (no reservation applies to them; an extended resource gone from capacity goes
/// from allocatable too).
pub fn set_resources(node: &mut Node, ctx: &SetterContext<'_>) {
    let st = status(node);
    let cap = st.capacity.get_or_insert_with(Default::default);
    for (k, v) in &ctx.observed.capacity {
        cap.insert(k.clone(), v.clone());
    }
    let foreign: Vec<(String, Quantity)> = cap
        .iter()
        .filter(|(k, _)| !ctx.observed.allocatable.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let cap_keys: std::collections::BTreeSet<String> = cap.keys().cloned().collect();
    let alloc = st.allocatable.get_or_insert_with(Default::default);
    alloc.retain(|k, _| cap_keys.contains(k) || !is_extended_resource_name(k));
    for (k, v) in &ctx.observed.allocatable {
        alloc.insert(k.clone(), v.clone());
    }
    for (k, v) in foreign {
        alloc.insert(k, v);
    }
}

/// Takes the capacity entries the kubelet does not manage (those not in `observed`) from
/// `server`, the API server's copy of the Node, into `last`, the status the kubelet last
/// sent: Go's kubelet computes each status from the server's copy, so an extended resource
/// someone patched into (or out of) the status is kept (or dropped) on the next update.
pub fn adopt_foreign_capacity(last: &mut Node, server: &Node, observed: &Observed) {
    let theirs = server.status.as_ref().and_then(|s| s.capacity.as_ref());
    let cap = status(last).capacity.get_or_insert_with(Default::default);
    cap.retain(|k, _| {
        observed.capacity.contains_key(k) || theirs.is_some_and(|t| t.contains_key(k))
    });
    for (k, v) in theirs.into_iter().flatten() {
        if !observed.capacity.contains_key(k) {
            cap.insert(k.clone(), v.clone());
        }
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

/// runtimeHandlers: each handler the runtime reports with its features (Go's
/// `RuntimeHandlers`); none when the runtime reports none.
pub fn set_runtime_handlers(node: &mut Node, ctx: &SetterContext<'_>) {
    let handlers: Vec<NodeRuntimeHandler> = ctx
        .observed
        .runtime_handlers
        .iter()
        .map(|h| NodeRuntimeHandler {
            name: Some(h.name.clone()),
            features: Some(NodeRuntimeHandlerFeatures {
                recursive_read_only_mounts: Some(h.recursive_read_only_mounts),
                user_namespaces: Some(h.user_namespaces),
            }),
        })
        .collect();
    status(node).runtime_handlers = (!handlers.is_empty()).then_some(handlers);
}

/// features: `supplementalGroupsPolicy` when the runtime reports its features (Go's
/// `NodeFeatures`); left as it is otherwise.
pub fn set_features(node: &mut Node, ctx: &SetterContext<'_>) {
    if let Some(supported) = ctx.observed.supplemental_groups_policy {
        status(node)
            .features
            .get_or_insert_with(NodeFeatures::default)
            .supplemental_groups_policy = Some(supported);
    }
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
    if let Some(why) = &o.storage_error {
        errs.push(why.clone());
    }
    if let Some(why) = &o.shutting_down {
        errs.push(why.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::node::fixtures::{cond, observed, t};
    use k8s_openapi::api::core::v1::NodeStatus;

    type ReadyCase = (
        &'static str,
        Box<dyn Fn(&mut Observed)>,
        &'static str,
        &'static str,
    );

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
                "CSINode not made yet",
                Box::new(|o| o.storage_error = Some("CSINode is not yet initialized".into())),
                "False",
                "CSINode is not yet initialized",
            ),
            (
                "shutting down",
                Box::new(|o| o.shutting_down = Some("node is shutting down".into())),
                "False",
                "node is shutting down",
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
    fn foreign_extended_resources_are_kept_and_follow_capacity() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let q = |v: &str| Quantity(v.into());
        let now = t(0);
        let ctx = SetterContext {
            config: &cfg,
            observed: &o,
            now: &now,
        };
        // What the kubelet last sent, and the server's copy after a test patched an extended
        // resource into capacity (and the kubelet's cpu there is stale).
        let mut last = Node::default();
        set_node_status(&mut last, &ctx);
        let mut server = last.clone();
        let cap = status(&mut server).capacity.as_mut().unwrap();
        cap.insert("example.com/fakecpu".into(), q("1k"));
        cap.insert("cpu".into(), q("64"));
        adopt_foreign_capacity(&mut last, &server, &o);
        set_resources(&mut last, &ctx);
        let st = last.status.clone().unwrap();
        let (cap, alloc) = (st.capacity.unwrap(), st.allocatable.unwrap());
        assert_eq!(cap["example.com/fakecpu"], q("1k"));
        assert_eq!(
            alloc["example.com/fakecpu"],
            q("1k"),
            "allocatable follows capacity"
        );
        assert_eq!(cap["cpu"], q("2"), "managed entries are the kubelet's");
        assert_eq!(alloc["cpu"], q("1900m"));
        // The test removes it again: gone from both.
        let cap = status(&mut server).capacity.as_mut().unwrap();
        cap.remove("example.com/fakecpu");
        status(&mut server)
            .allocatable
            .as_mut()
            .unwrap()
            .insert("other.io/left".into(), q("1"));
        adopt_foreign_capacity(&mut last, &server, &o);
        set_resources(&mut last, &ctx);
        let st = last.status.clone().unwrap();
        assert!(!st.capacity.unwrap().contains_key("example.com/fakecpu"));
        assert!(!st.allocatable.unwrap().contains_key("example.com/fakecpu"));
        // Without a server copy the managed entries are still set.
        let mut fresh = Node::default();
        set_resources(&mut fresh, &ctx);
        assert_eq!(fresh.status.unwrap().allocatable.unwrap().len(), 3);
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
                pinned: false,
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

    #[test]
    fn runtime_handlers_features_and_version() {
        let config = NodeConfig::new("n1");
        let now = t(0);
        let mut o = observed();
        let mut node = Node::default();
        set_node_status(
            &mut node,
            &SetterContext {
                config: &config,
                observed: &o,
                now: &now,
            },
        );
        let st = node.status.as_ref().unwrap();
        // A runtime that reports neither (containerd 1.6/1.7): nothing.
        assert!(st.runtime_handlers.is_none() && st.features.is_none());
        let v = &st.node_info.as_ref().unwrap().kubelet_version;
        assert!(v.starts_with("v1.") && v.contains("+kubelet-rs."), "{v}");
        assert!(!v.starts_with("v1.20"), "{v}");
        o.runtime_handlers = vec![
            kubelet_core::runtime::RuntimeHandler {
                name: String::new(),
                recursive_read_only_mounts: true,
                user_namespaces: false,
            },
            kubelet_core::runtime::RuntimeHandler {
                name: "crun".into(),
                recursive_read_only_mounts: false,
                user_namespaces: true,
            },
        ];
        o.supplemental_groups_policy = Some(true);
        set_node_status(
            &mut node,
            &SetterContext {
                config: &config,
                observed: &o,
                now: &now,
            },
        );
        let st = node.status.as_ref().unwrap();
        let hs = st.runtime_handlers.as_ref().unwrap();
        assert_eq!(hs.len(), 2);
        assert_eq!(hs[1].name.as_deref(), Some("crun"));
        let f = hs[1].features.as_ref().unwrap();
        assert_eq!(
            (f.user_namespaces, f.recursive_read_only_mounts),
            (Some(true), Some(false))
        );
        assert_eq!(
            st.features.as_ref().unwrap().supplemental_groups_policy,
            Some(true)
        );
    }
}
