//! [`EvictionAdmitHandler`] (Go's eviction `Admit`): pods the node cannot take while under
//! pressure are refused with reason `Evicted`.
//!
//! - No pressure: every pod is admitted.
//! - Critical pods (static, mirror, system-critical priority) are always admitted.
//! - Memory pressure alone: pods that are not BestEffort are admitted, and BestEffort pods
//!   that tolerate the `node.kubernetes.io/memory-pressure:NoSchedule` taint.
//! - Anything else (disk or PID pressure): refused, `"The node had condition: [DiskPressure]. "`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Toleration};

use super::messages::{admission_message, REASON};
use super::{PressureCondition, PressureState};
use crate::admission::{AdmitAttributes, AdmitHandler, AdmitResult};
use crate::qos::{pod_qos, QosClass};

/// The taint the node lifecycle controller puts on a node with memory pressure.
pub const TAINT_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";

/// Refuses pods under pressure. See the module docs.
#[derive(Debug, Clone)]
pub struct EvictionAdmitHandler {
    pressure: Arc<PressureState>,
}

impl EvictionAdmitHandler {
    /// A handler reading the conditions of `pressure`.
    pub fn new(pressure: Arc<PressureState>) -> Self {
        EvictionAdmitHandler { pressure }
    }
}

/// Go's `ToleratesTaint` for a taint without a value.
fn tolerates(t: &Toleration, key: &str, effect: &str) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == effect);
    let key_ok = match t.key.as_deref() {
        None | Some("") => t.operator.as_deref() == Some("Exists"),
        Some(k) => k == key,
    };
    let value_ok = match t.operator.as_deref() {
        Some("Exists") => true,
        None | Some("") | Some("Equal") => t.value.as_deref().unwrap_or("").is_empty(),
        _ => false,
    };
    effect_ok && key_ok && value_ok
}

fn tolerates_memory_pressure(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| tolerates(t, TAINT_MEMORY_PRESSURE, "NoSchedule"))
        })
}

impl AdmitHandler for EvictionAdmitHandler {
    fn admit(&self, attrs: &AdmitAttributes<'_>) -> AdmitResult {
        let conditions = self.pressure.conditions();
        if conditions.is_empty() || crate::pod::is_critical(attrs.pod) {
            return AdmitResult::Admit;
        }
        if conditions == [PressureCondition::MemoryPressure]
            && (pod_qos(attrs.pod) != QosClass::BestEffort || tolerates_memory_pressure(attrs.pod))
        {
            return AdmitResult::Admit;
        }
        tracing::info!(pod = %crate::pod::full_name(attrs.pod), ?conditions, "failed to admit pod to node");
        AdmitResult::Reject {
            reason: REASON.to_string(),
            message: admission_message(&conditions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{NodeInfo, RequestedResources};
    use crate::testing::{ContainerBuilder, PodBuilder};

    fn decide(h: &EvictionAdmitHandler, p: &Pod) -> AdmitResult {
        h.admit(&AdmitAttributes {
            pod: p,
            other_pods: &[],
            requested: &RequestedResources::default(),
            node: &NodeInfo::default(),
        })
    }

    #[test]
    fn admission_under_pressure_table() {
        let best_effort = PodBuilder::new("be", "u1")
            .container(ContainerBuilder::new("c", "busybox").build())
            .build();
        let burstable = PodBuilder::new("bu", "u2")
            .container(
                ContainerBuilder::new("c", "busybox")
                    .requests(&[("memory", "10Mi")])
                    .build(),
            )
            .build();
        let tolerant = PodBuilder::new("tol", "u3")
            .container(ContainerBuilder::new("c", "busybox").build())
            .spec(|s| {
                s.tolerations = Some(vec![Toleration {
                    key: Some(TAINT_MEMORY_PRESSURE.into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoSchedule".into()),
                    ..Default::default()
                }])
            })
            .build();
        let critical = PodBuilder::new("crit", "u4")
            .container(ContainerBuilder::new("c", "busybox").build())
            .spec(|s| s.priority = Some(2_000_001_000))
            .build();
        use PressureCondition::*;
        let cases: &[(&[PressureCondition], &Pod, bool)] = &[
            (&[], &best_effort, true),
            (&[MemoryPressure], &best_effort, false),
            (&[MemoryPressure], &burstable, true),
            (&[MemoryPressure], &tolerant, true),
            (&[MemoryPressure], &critical, true),
            (&[DiskPressure], &burstable, false),
            (&[DiskPressure], &tolerant, false),
            (&[MemoryPressure, DiskPressure], &burstable, false),
            (&[PidPressure], &critical, true),
        ];
        for (conds, pod, admit) in cases {
            let state = Arc::new(PressureState::default());
            state.set(conds.to_vec());
            let h = EvictionAdmitHandler::new(state);
            let r = decide(&h, pod);
            assert_eq!(
                r == AdmitResult::Admit,
                *admit,
                "{conds:?} {}: {r:?}",
                crate::pod::name(pod)
            );
        }
        let state = Arc::new(PressureState::default());
        state.set(vec![MemoryPressure]);
        assert_eq!(
            decide(&EvictionAdmitHandler::new(state), &best_effort),
            AdmitResult::Reject {
                reason: "Evicted".into(),
                message: "The node had condition: [MemoryPressure]. ".into()
            }
        );
    }
}
