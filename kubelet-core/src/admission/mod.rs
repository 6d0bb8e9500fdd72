//! Pod admission: deciding, before a pod's first sync, whether this node can run it.
//!
//! New pods are admitted in creation-time order (the sync loop sorts them). Each
//! [`AdmitHandler`] in turn may reject a pod; the first rejection wins, the pod is marked
//! `Failed` with the handler's reason and message ("Pod was rejected: …"), and it never
//! starts. Embedders add handlers through [`crate::KubeletBuilder::admit_handler`].
//!
//! The built-in [`PredicateAdmitHandler`] checks what Go's `predicateAdmitHandler` checks:
//! the pod's OS, `spec.nodeName`, node selector and required node affinity against the node's
//! labels, and that the pod's requests fit the node's allocatable resources beside the pods
//! already admitted (reasons `OutOfcpu`, `OutOfmemory`, `OutOfephemeral-storage`, `OutOfpods`).
//! After it come Go's other built-in handlers: [`sysctl::SysctlAdmitHandler`]
//! (`SysctlForbidden`) and [`apparmor::AppArmorAdmitHandler`] (`AppArmor`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};

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

fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
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
        if let Some(node_name) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            if !node_name.is_empty() && node_name != node.name {
                return predicate_failed("NodeName");
            }
        }
        if !node_affinity_matches(p, node) {
            return predicate_failed("NodeAffinity");
        }
        // Pod count.
        let allowed_pods = amount(&node.allocatable, "pods").unwrap_or(0);
        let used_pods = attrs.other_pods.len() as i64;
        if node.allocatable.contains_key("pods") && used_pods + 1 > allowed_pods {
            return reject(
                "OutOfpods",
                format!(
                    "Node didn't have enough resource: pods, requested: 1, used: {used_pods}, capacity: {allowed_pods}"
                ),
            );
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
                return reject(
                    format!("OutOf{resource}"),
                    format!(
                        "Node didn't have enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}"
                    ),
                );
            }
        }
        AdmitResult::Admit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, NodeAffinity, NodeSelector, PodOS, PodSpec, ResourceRequirements,
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
}
