//! The topology manager's admission (Go's `manager` and its `containerScope`/`podScope`).
//!
//! Called by the sync loop for each pod, once every admission handler admitted it:
//! - `none` policy: every init and app container is allocated by every provider, with no
//!   NUMA preference.
//! - `container` scope: for each init and app container in order, the providers' hints for it
//!   are merged; a result the policy does not admit rejects the pod
//!   (`TopologyAffinityError`); otherwise the affinity is remembered for the container and
//!   every provider allocates it.
//! - `pod` scope: the providers' hints for the whole pod are merged once, and that affinity
//!   is every container's.
//!
//! A provider's allocation error rejects the pod as `UnexpectedAdmissionError` with Go's
//! message, or with the error's own reason where it has one (`SMTAlignmentError`). The affinities are kept per pod until [`retain_pods`](TopologyManager::retain_pods)
//! drops those of pods no longer active.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::policy::{merge, ProviderHints, TopologyPolicy};
use super::TopologyHint;
use crate::pod;

/// The most NUMA nodes a policy other than `none` works on (Go's `maxAllowableNUMANodes`).
pub const MAX_NUMA_NODES: usize = 8;

/// `topologyManagerScope`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TopologyScope {
    /// One alignment per container (the default).
    #[default]
    Container,
    /// One alignment for the whole pod.
    Pod,
}

impl TopologyScope {
    /// Parses Go's names (`container`, `pod`).
    pub fn parse(name: &str) -> Result<TopologyScope, String> {
        match name {
            "container" | "" => Ok(TopologyScope::Container),
            "pod" => Ok(TopologyScope::Pod),
            other => Err(format!("unknown scope: \"{other}\"")),
        }
    }
}

/// Why a provider could not allocate a container's resources: an admission error of its
/// own kind (Go's errors with a `Type()`: the pod is rejected with that reason and the
/// message), or anything else (`UnexpectedAdmissionError`, "Allocate failed due to …, which
/// is unexpected").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocateError {
    /// Rejected with `reason` and `message` as they are.
    Admission {
        /// The pod's rejection reason (`SMTAlignmentError`).
        reason: String,
        /// The message.
        message: String,
    },
    /// Any other failure.
    Unexpected(String),
}

impl From<String> for AllocateError {
    fn from(message: String) -> Self {
        AllocateError::Unexpected(message)
    }
}

/// A resource manager whose placement the topology manager aligns (Go's `HintProvider`).
pub trait HintProvider: Send + Sync {
    /// Where the container's resources could go.
    fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints;
    /// Where the whole pod's resources could go.
    fn pod_hints(&self, pod: &Pod) -> ProviderHints;
    /// Allocates the container's resources within `affinity`; `Err` is why it could not
    /// (it rejects the pod).
    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError>;
}

/// The topology manager. See the module docs.
pub struct TopologyManager {
    policy: TopologyPolicy,
    scope: TopologyScope,
    numa_nodes: Vec<u32>,
    providers: Vec<Arc<dyn HintProvider>>,
    /// Pod uid → container → its affinity.
    affinity: Mutex<BTreeMap<String, BTreeMap<String, TopologyHint>>>,
}

impl std::fmt::Debug for TopologyManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyManager")
            .field("policy", &self.policy)
            .field("scope", &self.scope)
            .field("numa_nodes", &self.numa_nodes)
            .field("providers", &self.providers.len())
            .finish()
    }
}

impl TopologyManager {
    /// A manager for a machine with `numa_nodes` (Go's `NewManager`: more than
    /// [`MAX_NUMA_NODES`] is refused unless the policy is `none`).
    pub fn new(
        policy: TopologyPolicy,
        scope: TopologyScope,
        numa_nodes: Vec<u32>,
    ) -> Result<TopologyManager, String> {
        TopologyManager::with_max_numa_nodes(policy, scope, numa_nodes, MAX_NUMA_NODES)
    }

    /// [`TopologyManager::new`] with another limit than [`MAX_NUMA_NODES`] (the
    /// `max-allowable-numa-nodes` policy option).
    pub fn with_max_numa_nodes(
        policy: TopologyPolicy,
        scope: TopologyScope,
        numa_nodes: Vec<u32>,
        max_numa_nodes: usize,
    ) -> Result<TopologyManager, String> {
        if policy != TopologyPolicy::None && numa_nodes.len() > max_numa_nodes {
            return Err(format!(
                "unsupported on machines with more than {max_numa_nodes} NUMA Nodes"
            ));
        }
        Ok(TopologyManager {
            policy,
            scope,
            numa_nodes,
            ..TopologyManager::none()
        })
    }

    /// A manager of the `none` policy (every container allocated without a preference).
    pub fn none() -> TopologyManager {
        TopologyManager {
            policy: TopologyPolicy::None,
            scope: TopologyScope::Container,
            numa_nodes: Vec::new(),
            providers: Vec::new(),
            affinity: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds a hint provider (consulted in the order added).
    pub fn add_provider(&mut self, provider: Arc<dyn HintProvider>) {
        self.providers.push(provider);
    }

    /// The policy.
    pub fn policy(&self) -> TopologyPolicy {
        self.policy
    }

    /// Admits `pod` and allocates its resources, or says why not: `(reason, message)`.
    pub fn admit(&self, pod: &Pod) -> Result<(), (String, String)> {
        let containers: Vec<&Container> = pod::all_containers(pod).collect();
        let pod_hint = match (self.policy, self.scope) {
            (TopologyPolicy::None, _) | (_, TopologyScope::Container) => None,
            (_, TopologyScope::Pod) => {
                let hints: Vec<ProviderHints> =
                    self.providers.iter().map(|p| p.pod_hints(pod)).collect();
                Some(self.decide(pod, None, &hints)?)
            }
        };
        for c in containers {
            let hint = match (self.policy, pod_hint) {
                (TopologyPolicy::None, _) => TopologyHint::default(),
                (_, Some(h)) => h,
                (_, None) => {
                    let hints: Vec<ProviderHints> = self
                        .providers
                        .iter()
                        .map(|p| p.container_hints(pod, c))
                        .collect();
                    self.decide(pod, Some(c), &hints)?
                }
            };
            if self.policy != TopologyPolicy::None {
                self.lock()
                    .entry(pod::uid(pod).to_string())
                    .or_default()
                    .insert(c.name.clone(), hint);
            }
            for p in &self.providers {
                p.allocate(pod, c, &hint).map_err(|e| match e {
                    AllocateError::Admission { reason, message } => (reason, message),
                    AllocateError::Unexpected(e) => (
                        "UnexpectedAdmissionError".to_string(),
                        format!("Allocate failed due to {e}, which is unexpected"),
                    ),
                })?;
            }
        }
        Ok(())
    }

    fn decide(
        &self,
        pod: &Pod,
        container: Option<&Container>,
        hints: &[ProviderHints],
    ) -> Result<TopologyHint, (String, String)> {
        let (hint, admit) = merge(self.policy, &self.numa_nodes, hints);
        tracing::info!(pod = %pod::full_name(pod), uid = pod::uid(pod), container = container.map(|c| c.name.as_str()), affinity = ?hint.affinity.map(|m| m.to_string()), preferred = hint.preferred, admit, "topology manager: best hint");
        if admit {
            Ok(hint)
        } else {
            Err((
                "TopologyAffinityError".to_string(),
                "Resources cannot be allocated with Topology locality".to_string(),
            ))
        }
    }

    /// The affinity admission chose for a container (Go's `GetAffinity`).
    pub fn affinity(&self, uid: &str, container: &str) -> Option<TopologyHint> {
        self.lock().get(uid).and_then(|c| c.get(container)).copied()
    }

    /// Forgets the affinities of pods not in `active`.
    pub fn retain_pods(&self, active: &HashSet<&str>) {
        self.lock().retain(|uid, _| active.contains(uid.as_str()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<String, TopologyHint>>> {
        self.affinity.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
