//! Pod admission: deciding, before a pod's first sync, whether this node can run it.
//!
//! New pods are admitted in creation-time order (the sync loop sorts them). Each
//! [`AdmitHandler`] in turn may reject a pod; the first rejection wins, the pod is marked
//! `Failed` with the handler's reason and message ("Pod was rejected: …"), and it never
//! starts. Embedders add handlers through [`crate::KubeletBuilder::admit_handler`].
//!
//! The built-in [`PredicateAdmitHandler`] checks what Go's `predicateAdmitHandler` checks
//! (its `GeneralPredicates`), in Go's order, the first failure being the reason: the pod's OS;
//! that the pod's requests fit the node's allocatable resources beside the pods already
//! admitted (reasons `OutOfpods`, `OutOfcpu`, `OutOfmemory`, `OutOfephemeral-storage`, and
//! `OutOf<name>` for an extended resource the node advertises; requests of extended resources
//! the node does not advertise are ignored, as Go ignores cluster-level resources); node
//! selector and required node affinity against the node's labels (`NodeAffinity`);
//! `spec.nodeName` (`NodeName`); and that the pod's host ports are free among the admitted
//! pods' (`NodePorts`: same protocol and port, on the same host IP or where either side binds
//! all addresses, `0.0.0.0` or unset). Predicate failures read "Predicate NAME failed".
//!
//! The node's labels and extended resources are those of the Node object when a
//! [`NodeLister`] knows it (in cluster mode: the API server's copy, kept by a watch as Go's
//! node informer keeps it, so labels others add count), otherwise the kubelet's own idea of
//! its node (standalone, or before the Node is first seen; Go's `getNodeAnyWay`).
//!
//! After it come Go's other built-in handlers: [`sysctl::SysctlAdmitHandler`]
//! (`SysctlForbidden`) and [`apparmor::AppArmorAdmitHandler`] (`AppArmor`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Pod};

pub mod apparmor;
pub mod sysctl;

pub use apparmor::AppArmorAdmitHandler;
pub use sysctl::SysctlAdmitHandler;

use crate::cm::ResourceList;
use crate::pod;
use crate::resources::{amount, pod_request};

/// What the node looks like to admission.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Allocatable resources.
    pub allocatable: ResourceList,
}

impl NodeInfo {
    /// The node as admission sees it: `node`'s labels and the extended resources it
    /// advertises (device plugins, or patched into its status by others) when the Node object
    /// is known, `own_labels` otherwise; cpu, memory, ephemeral storage and pods always from
    /// the container manager's `allocatable`.
    pub fn new(
        name: &str,
        node: Option<&Node>,
        own_labels: &BTreeMap<String, String>,
        mut allocatable: ResourceList,
    ) -> Self {
        let labels = match node {
            Some(n) => n.metadata.labels.clone().unwrap_or_default(),
            None => own_labels.clone(),
        };
        let extended = node
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .filter(|(k, _)| is_extended_resource_name(k));
        for (k, v) in extended {
            allocatable.entry(k.clone()).or_insert_with(|| v.clone());
        }
        NodeInfo {
            name: name.to_string(),
            labels,
            allocatable,
        }
    }
}

/// The current Node object, as the API server has it (Go's node lister). See the module
/// docs.
pub trait NodeLister: Send + Sync {
    /// The latest copy of the Node, `None` while it is not known (yet).
    fn node(&self) -> Option<Arc<Node>>;
}

/// Summed requests of the pods already admitted (kept incrementally by the engine).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestedResources {
    /// CPU in millicores.
    pub cpu_millis: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: i64,
}

impl RequestedResources {
    /// The requests of one pod (unparseable quantities count as 0; admission rejects them).
    pub fn of(p: &Pod) -> Self {
        RequestedResources {
            cpu_millis: pod_request(p, "cpu").unwrap_or(0),
            memory_bytes: pod_request(p, "memory").unwrap_or(0),
            ephemeral_storage_bytes: pod_request(p, "ephemeral-storage").unwrap_or(0),
        }
    }

    /// Adds another pod's requests.
    pub fn add(&mut self, o: &RequestedResources) {
        self.cpu_millis = self.cpu_millis.saturating_add(o.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_add(o.memory_bytes);
        self.ephemeral_storage_bytes = self
            .ephemeral_storage_bytes
            .saturating_add(o.ephemeral_storage_bytes);
    }

    /// Subtracts another pod's requests.
    pub fn sub(&mut self, o: &RequestedResources) {
        self.cpu_millis = self.cpu_millis.saturating_sub(o.cpu_millis);
        self.memory_bytes = self.memory_bytes.saturating_sub(o.memory_bytes);
        self.ephemeral_storage_bytes = self
            .ephemeral_storage_bytes
            .saturating_sub(o.ephemeral_storage_bytes);
    }

    fn get(&self, resource: &str) -> i64 {
        match resource {
            "cpu" => self.cpu_millis,
            "memory" => self.memory_bytes,
            _ => self.ephemeral_storage_bytes,
        }
    }
}

/// The inputs of one admission decision.
#[derive(Debug)]
pub struct AdmitAttributes<'a> {
    /// The pod asking to be admitted.
    pub pod: &'a Pod,
    /// Pods already admitted and not terminated.
    pub other_pods: &'a [Arc<Pod>],
    /// The summed requests of `other_pods`.
    pub requested: &'a RequestedResources,
    /// The node.
    pub node: &'a NodeInfo,
}

/// An admission decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdmitResult {
    /// The pod may run.
    Admit,
    /// The pod is rejected.
    Reject {
        /// CamelCase reason, e.g. "OutOfmemory".
        reason: String,
        /// Human-readable message.
        message: String,
    },
}

/// One admission check. See the module docs.
pub trait AdmitHandler: Send + Sync {
    /// Decides on one pod.
    fn admit(&self, attrs: &AdmitAttributes<'_>) -> AdmitResult;
}

/// The built-in checks of Go's predicate admit handler. See the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct PredicateAdmitHandler;

const FIT_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

fn reject(reason: impl Into<String>, message: impl Into<String>) -> AdmitResult {
    AdmitResult::Reject {
        reason: reason.into(),
        message: message.into(),
    }
}

fn predicate_failed(name: &str) -> AdmitResult {
    reject(name, format!("Predicate {name} failed"))
}

fn requirement_matches(req: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&req.key);
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Whether the node matches one node selector term (its expressions against the labels, its
/// fields against `metadata.name`; an empty term matches nothing).
pub(crate) fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name_labels: BTreeMap<String, String> = [("metadata.name".to_string(), node.name.clone())]
        .into_iter()
        .collect();
    exprs.iter().all(|r| requirement_matches(r, &node.labels))
        && fields.iter().all(|r| requirement_matches(r, &name_labels))
}

fn node_affinity_matches(p: &Pod, node: &NodeInfo) -> bool {
    let Some(spec) = p.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = spec.node_selector.as_ref() {
        if sel.iter().any(|(k, v)| node.labels.get(k) != Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, node)),
    }
}

/// Go's `IsExtendedResourceName`: a resource outside the `kubernetes.io/` domains with a
/// domain prefix, not a quota `requests.` name.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.")
}

/// The (host IP, protocol, host port) triples a pod asks for, sanitised as Go's
/// `HostPortInfo` does (unset IP is `0.0.0.0`, unset protocol TCP; port 0 asks for none).
fn host_ports(p: &Pod) -> impl Iterator<Item = (&str, &str, i32)> {
    p.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|cp| cp.host_port.is_some_and(|hp| hp > 0))
        .map(|cp| {
            let ip = cp.host_ip.as_deref().filter(|ip| !ip.is_empty());
            let proto = cp.protocol.as_deref().filter(|pr| !pr.is_empty());
            (
                ip.unwrap_or(BIND_ALL),
                proto.unwrap_or("TCP"),
                cp.host_port.unwrap_or(0),
            )
        })
}

const BIND_ALL: &str = "0.0.0.0";

/// Go's `HostPortInfo.CheckConflict` of every port the pod wants against the others'.
fn host_ports_conflict(p: &Pod, others: &[Arc<Pod>]) -> bool {
    host_ports(p).any(|(ip, proto, port)| {
        others
            .iter()
            .flat_map(|o| host_ports(o))
            .any(|(oip, oproto, oport)| {
                oport == port && oproto == proto && (ip == BIND_ALL || oip == BIND_ALL || oip == ip)
            })
    })
}

fn insufficient(resource: &str, requested: i64, used: i64, capacity: i64) -> AdmitResult {
    reject(
        format!("OutOf{resource}"),
        format!(
            "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
        ),
    )
}

/// The extended resources the pod requests that the node advertises (the others are
/// cluster-level resources Go's admission leaves out), in name order.
fn extended_requests(p: &Pod, node: &NodeInfo) -> Result<Vec<(String, i64)>, AdmitResult> {
    let mut names: Vec<&String> = p
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| {
            r.requests
                .iter()
                .chain(r.limits.iter())
                .flat_map(|l| l.keys())
        })
        .filter(|n| is_extended_resource_name(n) && node.allocatable.contains_key(*n))
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        match pod_request(p, name) {
            Ok(0) => {}
            Ok(v) => out.push((name.clone(), v)),
            Err(e) => {
                return Err(reject(
                    "InvalidResources",
                    format!("pod {}: {name}: {e}", pod::full_name(p)),
                ))
            }
        }
    }
    Ok(out)
}

/// Go's `noderesources.Fits`: pods, cpu, memory, ephemeral storage, then extended resources.
fn fit_resources(attrs: &AdmitAttributes<'_>) -> AdmitResult {
    let (p, node) = (attrs.pod, attrs.node);
    let allowed_pods = amount(&node.allocatable, "pods").unwrap_or(0);
    let used_pods = attrs.other_pods.len() as i64;
    if node.allocatable.contains_key("pods") && used_pods + 1 > allowed_pods {
        return insufficient("pods", 1, used_pods, allowed_pods);
    }
    for resource in FIT_RESOURCES {
        let requested = match pod_request(p, resource) {
            Ok(v) => v,
            Err(e) => {
                return reject(
                    "InvalidResources",
                    format!("pod {}: {resource}: {e}", pod::full_name(p)),
                )
            }
        };
        if requested == 0 || !node.allocatable.contains_key(resource) {
            continue;
        }
        let capacity = amount(&node.allocatable, resource).unwrap_or(0);
        let used = attrs.requested.get(resource);
        if requested > capacity - used {
            return insufficient(resource, requested, used, capacity);
        }
    }
    let extended = match extended_requests(p, node) {
        Ok(e) => e,
        Err(r) => return r,
    };
    for (resource, requested) in extended {
        let capacity = amount(&node.allocatable, &resource).unwrap_or(0);
        let used = attrs
            .other_pods
            .iter()
            .map(|o| pod_request(o, &resource).unwrap_or(0))
            .fold(0i64, i64::saturating_add);
        if requested > capacity.saturating_sub(used) {
            return insufficient(&resource, requested, used, capacity);
        }
    }
    AdmitResult::Admit
}

impl AdmitHandler for PredicateAdmitHandler {
    fn admit(&self, attrs: &AdmitAttributes<'_>) -> AdmitResult {
        let p = attrs.pod;
        let node = attrs.node;
        if let Some(os) = p.spec.as_ref().and_then(|s| s.os.as_ref()) {
            if os.name != "linux" {
                return reject(
                    "PodOSNotSupported",
                    "Failed to admit pod as the OS field doesn't match node OS",
                );
            }
        }
        let fit = fit_resources(attrs);
        if fit != AdmitResult::Admit {
            return fit;
        }
        if !node_affinity_matches(p, node) {
            return predicate_failed("NodeAffinity");
        }
        if let Some(node_name) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if !node_name.is_empty() && node_name != node.name {
                return predicate_failed("NodeName");
            }
        }
        if host_ports_conflict(p, attrs.other_pods) {
            return predicate_failed("NodePorts");
        }
        AdmitResult::Admit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, PodOS, PodSpec,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn node() -> NodeInfo {
        NodeInfo {
            name: "n1".into(),
            labels: [("disk".to_string(), "ssd".to_string())]
                .into_iter()
                .collect(),
            allocatable: [
                ("cpu".to_string(), Quantity("2".into())),
                ("memory".to_string(), Quantity("1Gi".into())),
                ("pods".to_string(), Quantity("3".into())),
                ("example.com/fakecpu".to_string(), Quantity("1k".into())),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn pod_with(f: impl FnOnce(&mut PodSpec)) -> Arc<Pod> {
        let mut spec = PodSpec {
            containers: vec![Container {
                name: "c".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        f(&mut spec);
        Arc::new(Pod {
            spec: Some(spec),
            ..Default::default()
        })
    }

    fn requests(cpu: &str, mem: &str) -> Arc<Pod> {
        let (cpu, mem) = (cpu.to_string(), mem.to_string());
        pod_with(move |s| {
            s.containers[0].resources = Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_string(), Quantity(cpu)),
                        ("memory".to_string(), Quantity(mem)),
                    ]
                    .into_iter()
                    .collect(),
                ),
                ..Default::default()
            })
        })
    }

    /// A pod asking for host ports: (host IP, protocol, host port), "" for unset.
    fn ports(want: &[(&str, &str, i32)]) -> Arc<Pod> {
        let ports: Vec<ContainerPort> = want
            .iter()
            .map(|(ip, proto, port)| ContainerPort {
                container_port: 8080,
                host_ip: (!ip.is_empty()).then(|| ip.to_string()),
                protocol: (!proto.is_empty()).then(|| proto.to_string()),
                host_port: Some(*port),
                ..Default::default()
            })
            .collect();
        pod_with(move |s| s.containers[0].ports = Some(ports))
    }

    fn extended(name: &str, count: &str) -> Arc<Pod> {
        let (name, count) = (name.to_string(), count.to_string());
        pod_with(move |s| {
            s.containers[0].resources = Some(ResourceRequirements {
                limits: Some([(name, Quantity(count))].into_iter().collect()),
                ..Default::default()
            })
        })
    }

    fn reason(r: AdmitResult) -> String {
        match r {
            AdmitResult::Admit => "Admit".into(),
            AdmitResult::Reject { reason, .. } => reason,
        }
    }

    #[test]
    fn admission_table() {
        let n = node();
        let existing = vec![requests("1", "512Mi")];
        let two = vec![
            requests("100m", "1Mi"),
            requests("100m", "1Mi"),
            requests("100m", "1Mi"),
        ];
        let affinity = |op: &str, vals: &[&str]| {
            let (op, vals): (String, Vec<String>) =
                (op.into(), vals.iter().map(|v| v.to_string()).collect());
            pod_with(move |s| {
                s.affinity = Some(Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![NodeSelectorRequirement {
                                    key: "disk".into(),
                                    operator: op,
                                    values: Some(vals),
                                }]),
                                ..Default::default()
                            }],
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            })
        };
        let holds_80 = vec![ports(&[("", "TCP", 80)])];
        let holds_81_on_ip = vec![ports(&[("10.0.0.1", "", 81)])];
        let uses_fakecpu = vec![extended("example.com/fakecpu", "400")];
        type Case<'a> = (&'a str, Arc<Pod>, &'a [Arc<Pod>], &'a str);
        let cases: Vec<Case> = vec![
            ("fits", requests("500m", "256Mi"), &existing, "Admit"),
            ("cpu", requests("1500m", "1Mi"), &existing, "OutOfcpu"),
            (
                "memory",
                requests("100m", "600Mi"),
                &existing,
                "OutOfmemory",
            ),
            ("pods", requests("1m", "1"), &two, "OutOfpods"),
            (
                "node name",
                pod_with(|s| s.node_name = Some("n2".into())),
                &[],
                "NodeName",
            ),
            (
                "own node name",
                pod_with(|s| s.node_name = Some("n1".into())),
                &[],
                "Admit",
            ),
            (
                "selector",
                pod_with(|s| {
                    s.node_selector = Some(
                        [("disk".to_string(), "hdd".to_string())]
                            .into_iter()
                            .collect(),
                    )
                }),
                &[],
                "NodeAffinity",
            ),
            ("affinity in", affinity("In", &["ssd"]), &[], "Admit"),
            (
                "affinity notin",
                affinity("NotIn", &["ssd"]),
                &[],
                "NodeAffinity",
            ),
            ("affinity exists", affinity("Exists", &[]), &[], "Admit"),
            (
                "windows",
                pod_with(|s| {
                    s.os = Some(PodOS {
                        name: "windows".into(),
                    })
                }),
                &[],
                "PodOSNotSupported",
            ),
            (
                "host port taken",
                ports(&[("", "", 80)]),
                &holds_80,
                "NodePorts",
            ),
            (
                "host port taken, all addresses vs one",
                ports(&[("10.0.0.1", "TCP", 80)]),
                &holds_80,
                "NodePorts",
            ),
            (
                "host port taken, one address vs all",
                ports(&[("", "TCP", 81)]),
                &holds_81_on_ip,
                "NodePorts",
            ),
            (
                "host port, other protocol",
                ports(&[("", "UDP", 80)]),
                &holds_80,
                "Admit",
            ),
            (
                "host port, other host IP",
                ports(&[("10.0.0.2", "TCP", 81)]),
                &holds_81_on_ip,
                "Admit",
            ),
            ("host port free", ports(&[("", "", 82)]), &holds_80, "Admit"),
            ("no host port", ports(&[("", "", 0)]), &holds_80, "Admit"),
            (
                "extended fits",
                extended("example.com/fakecpu", "600"),
                &uses_fakecpu,
                "Admit",
            ),
            (
                "extended exhausted",
                extended("example.com/fakecpu", "700"),
                &uses_fakecpu,
                "OutOfexample.com/fakecpu",
            ),
            (
                "extended unknown to the node",
                extended("example.com/other", "5"),
                &[],
                "Admit",
            ),
            (
                "resources before affinity",
                {
                    let mut p = (*requests("1500m", "1Mi")).clone();
                    if let Some(s) = p.spec.as_mut() {
                        s.node_name = Some("n2".into());
                    }
                    Arc::new(p)
                },
                &existing,
                "OutOfcpu",
            ),
        ];
        for (name, p, others, want) in cases {
            let mut requested = RequestedResources::default();
            for o in others {
                requested.add(&RequestedResources::of(o));
            }
            let attrs = AdmitAttributes {
                pod: &p,
                other_pods: others,
                requested: &requested,
                node: &n,
            };
            assert_eq!(
                reason(PredicateAdmitHandler.admit(&attrs)),
                want,
                "case {name}"
            );
        }
    }

    #[test]
    fn messages_are_gos() {
        let n = node();
        let others = vec![
            ports(&[("", "", 80)]),
            extended("example.com/fakecpu", "400"),
        ];
        let mut requested = RequestedResources::default();
        for o in &others {
            requested.add(&RequestedResources::of(o));
        }
        let admit = |p: &Arc<Pod>| {
            PredicateAdmitHandler.admit(&AdmitAttributes {
                pod: p,
                other_pods: &others,
                requested: &requested,
                node: &n,
            })
        };
        assert_eq!(
            admit(&ports(&[("", "", 80)])),
            reject("NodePorts", "Predicate NodePorts failed")
        );
        assert_eq!(
            admit(&extended("example.com/fakecpu", "700")),
            reject(
                "OutOfexample.com/fakecpu",
                "Node didn't have enough resource: example.com/fakecpu, requested: 700, used: 400, capacity: 1000"
            )
        );
    }

    #[test]
    fn extended_resource_names() {
        for (name, want) in [
            ("example.com/fakecpu", true),
            ("nvidia.com/gpu", true),
            ("cpu", false),
            ("hugepages-2Mi", false),
            ("kubernetes.io/foo", false),
            ("node.kubernetes.io/foo", false),
            ("requests.example.com/foo", false),
        ] {
            assert_eq!(is_extended_resource_name(name), want, "{name}");
        }
    }

    #[test]
    fn node_info_prefers_the_node_object() {
        use k8s_openapi::api::core::v1::{Node, NodeStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let own: BTreeMap<String, String> =
            [("own".to_string(), "1".to_string())].into_iter().collect();
        let cm: ResourceList = [("cpu".to_string(), Quantity("2".into()))]
            .into_iter()
            .collect();
        let node = Node {
            metadata: ObjectMeta {
                labels: Some(
                    [("added".to_string(), "1".to_string())]
                        .into_iter()
                        .collect(),
                ),
                ..Default::default()
            },
            status: Some(NodeStatus {
                allocatable: Some(
                    [
                        ("cpu".to_string(), Quantity("1".into())),
                        ("example.com/fakecpu".to_string(), Quantity("5".into())),
                    ]
                    .into_iter()
                    .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let with = NodeInfo::new("n1", Some(&node), &own, cm.clone());
        assert_eq!(with.labels.keys().collect::<Vec<_>>(), vec!["added"]);
        assert_eq!(
            with.allocatable["cpu"].0, "2",
            "native resources: the kubelet's"
        );
        assert_eq!(with.allocatable["example.com/fakecpu"].0, "5");
        let without = NodeInfo::new("n1", None, &own, cm);
        assert_eq!(without.labels, own);
        assert_eq!(without.allocatable.len(), 1);
    }
}
