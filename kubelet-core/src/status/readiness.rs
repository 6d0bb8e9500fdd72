//! Readiness gates (`spec.readinessGates`, Go's `GeneratePodReadyCondition`) and the pod
//! conditions the kubelet does not own.
//!
//! A pod with readiness gates is `Ready` only when its containers are ready *and* every gate's
//! condition, which some other controller writes into `status.conditions`, is `True`. While
//! a gate holds the pod back, `Ready` is `False` with reason `ReadinessGatesNotReady` and
//! Go's message per gate (joined with ", "): "corresponding condition of pod readiness gate
//! "X" does not exist." or "the status of pod readiness gate "X" is not "True", but S".
//! `ContainersReady` follows the containers alone.
//!
//! Conditions of types the kubelet does not own (Go's `PodConditionByKubelet`: the gates'
//! conditions, `DisruptionTarget`, …) are carried over from the pod's status unchanged.

use k8s_openapi::api::core::v1::{Pod, PodCondition};

/// Go's reason for a Ready condition held back by a readiness gate.
pub const READINESS_GATES_NOT_READY: &str = "ReadinessGatesNotReady";

/// The condition types the kubelet generates itself.
pub const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

fn conditions(p: &Pod) -> &[PodCondition] {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
}

/// Whether the pod has readiness gates.
pub fn has_readiness_gates(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

/// The message why the pod's readiness gates hold it back, `None` when every gate's
/// condition is `True` (or it has no gates).
pub fn unready_gates(p: &Pod) -> Option<String> {
    let gates = p.spec.as_ref()?.readiness_gates.as_ref()?;
    let conds = conditions(p);
    let messages: Vec<String> = gates
        .iter()
        .filter_map(
            |g| match conds.iter().find(|c| c.type_ == g.condition_type) {
                None => Some(format!(
                    "corresponding condition of pod readiness gate {:?} does not exist.",
                    g.condition_type
                )),
                Some(c) if c.status != "True" => Some(format!(
                    "the status of pod readiness gate {:?} is not \"True\", but {}",
                    g.condition_type, c.status
                )),
                Some(_) => None,
            },
        )
        .collect();
    (!messages.is_empty()).then(|| messages.join(", "))
}

/// The pod's conditions of types the kubelet does not own, as they are.
pub fn foreign_conditions(p: &Pod) -> Vec<PodCondition> {
    conditions(p)
        .iter()
        .filter(|c| !KUBELET_CONDITIONS.contains(&c.type_.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodReadinessGate, PodSpec, PodStatus};

    fn pod(gates: &[&str], conds: &[(&str, &str)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                readiness_gates: Some(
                    gates
                        .iter()
                        .map(|g| PodReadinessGate {
                            condition_type: g.to_string(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(PodStatus {
                conditions: Some(
                    conds
                        .iter()
                        .map(|(t, s)| PodCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn gates_table() {
        let cases: Vec<(Pod, Option<&str>)> = vec![
            (pod(&[], &[]), None),
            (pod(&["a"], &[("a", "True")]), None),
            (
                pod(&["a"], &[]),
                Some("corresponding condition of pod readiness gate \"a\" does not exist."),
            ),
            (
                pod(&["a", "b"], &[("a", "False"), ("b", "True")]),
                Some("the status of pod readiness gate \"a\" is not \"True\", but False"),
            ),
            (
                pod(&["a", "b"], &[("a", "Unknown")]),
                Some("the status of pod readiness gate \"a\" is not \"True\", but Unknown, corresponding condition of pod readiness gate \"b\" does not exist."),
            ),
        ];
        for (i, (p, want)) in cases.into_iter().enumerate() {
            assert_eq!(unready_gates(&p).as_deref(), want, "case {i}");
        }
    }

    #[test]
    fn foreign_conditions_are_kept_kubelet_ones_are_not() {
        let p = pod(
            &["a"],
            &[
                ("a", "True"),
                ("Ready", "False"),
                ("DisruptionTarget", "True"),
            ],
        );
        let kept: Vec<String> = foreign_conditions(&p)
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert_eq!(kept, vec!["a", "DisruptionTarget"]);
        assert!(has_readiness_gates(&p));
        assert!(!has_readiness_gates(&Pod::default()));
    }
}
