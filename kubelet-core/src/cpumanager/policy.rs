//! The `static` policy (Go's `staticPolicy`): exclusive CPUs for the containers of
//! Guaranteed pods that request a whole number of CPUs; everything else shares the rest.
//!
//! The sets it keeps (in the [`CpuManagerCheckpoint`] it is handed):
//! - **shared** (`default_cpu_set`): where Burstable, BestEffort and non-integral Guaranteed
//!   containers run. At first every CPU; it shrinks and grows as exclusive assignments come
//!   and go.
//! - **reserved**: part of the shared pool never handed out exclusively, fixed for the
//!   kubelet's lifetime: `reservedSystemCPUs`, or else ceil(kube- + system-reserved cpu)
//!   CPUs taken by topology from the lowest core.
//! - **assignable**: shared − reserved; exclusive CPUs come from here.
//! - **exclusive** (`entries`): pod uid → container → its CPUs.
//!
//! An exclusive assignment is kept until the pod is no longer active (the manager's stale
//! state sweep), so a restarted container keeps its CPUs. CPUs an init container had are
//! reused by the pod's next containers (Go's `cpusToReuse`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::assignment::{take_by_topology, TakeError};
use super::checkpoint::CpuManagerCheckpoint;
use super::cpuset::CpuSet;
use super::topology::CpuTopology;
use crate::pod;
use crate::qos::{pod_qos, QosClass};
use crate::topologymanager::{NumaMask, TopologyHint, MAX_NUMA_NODES};

/// Why the static policy cannot start or allocate (Go's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No CPU is reserved: the shared pool could be emptied.
    #[error(
        "the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    )]
    NoReservation,
    /// The reserved set could not be taken or does not have the reserved count.
    #[error(
        "unable to reserve the required amount of CPUs (size of {reserved} did not equal {wanted})"
    )]
    Reserve {
        /// What was taken.
        reserved: CpuSet,
        /// ceil(kube- + system-reserved cpu).
        wanted: usize,
    },
    /// `reservedSystemCPUs` names CPUs the machine does not have.
    #[error("reservedSystemCPUs {reserved} are not all CPUs of this machine ({machine})")]
    ReservedNotOnMachine {
        /// `reservedSystemCPUs`.
        reserved: CpuSet,
        /// The machine's CPUs.
        machine: CpuSet,
    },
    /// The state file does not fit this machine or this reservation (Go's `validateState`).
    #[error("{0}")]
    InvalidState(String),
    /// Not enough assignable CPUs.
    #[error(transparent)]
    Take(#[from] TakeError),
    /// `full-pcpus-only`: a request that is not whole physical cores (Go's
    /// `SMTAlignmentError`, the pod's rejection reason).
    #[error(
        "SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {per_core}"
    )]
    SmtAlignment {
        /// The CPUs requested.
        requested: usize,
        /// The machine's threads per core.
        per_core: usize,
    },
}

/// `cpuManagerPolicyOptions` the static policy honours (Go's `StaticPolicyOptions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// `full-pcpus-only`: exclusive CPUs only in whole physical cores; a request that is
    /// not a multiple of the threads per core is rejected (`SMTAlignmentError`).
    pub full_pcpus_only: bool,
}

/// The static policy. See the module docs.
#[derive(Debug, Clone)]
pub struct StaticPolicy {
    topology: CpuTopology,
    reserved: CpuSet,
    options: StaticPolicyOptions,
    /// CPUs of the current pod's init containers, free for its next containers.
    cpus_to_reuse: BTreeMap<String, CpuSet>,
}

impl StaticPolicy {
    /// The policy on `topology`, reserving `reserved_cpus` when given, else `num_reserved`
    /// CPUs by topology (Go's `NewStaticPolicy`).
    pub fn new(
        topology: CpuTopology,
        num_reserved: usize,
        reserved_cpus: Option<CpuSet>,
    ) -> Result<StaticPolicy, PolicyError> {
        let all = topology.cpus();
        let reserved = match reserved_cpus.filter(|s| !s.is_empty()) {
            Some(set) => {
                if !set.is_subset(&all) {
                    return Err(PolicyError::ReservedNotOnMachine {
                        reserved: set,
                        machine: all,
                    });
                }
                set
            }
            None => {
                if num_reserved == 0 {
                    return Err(PolicyError::NoReservation);
                }
                take_by_topology(&topology, &all, num_reserved).unwrap_or_default()
            }
        };
        if reserved.len() != num_reserved {
            return Err(PolicyError::Reserve {
                reserved,
                wanted: num_reserved,
            });
        }
        tracing::info!(count = reserved.len(), cpus = %reserved, "cpu manager: CPUs reserved, not available for exclusive assignment");
        Ok(StaticPolicy {
            topology,
            reserved,
            options: StaticPolicyOptions::default(),
            cpus_to_reuse: BTreeMap::new(),
        })
    }

    /// The policy with `options`.
    pub fn with_options(self, options: StaticPolicyOptions) -> StaticPolicy {
        StaticPolicy { options, ..self }
    }

    /// The reserved CPUs.
    pub fn reserved(&self) -> &CpuSet {
        &self.reserved
    }

    /// The machine's topology.
    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// Checks a restored state against this machine and reservation, or fills an empty one
    /// with every CPU (Go's `validateState`).
    pub fn start(&self, state: &mut CpuManagerCheckpoint) -> Result<(), PolicyError> {
        let default = &state.default_cpu_set;
        if default.is_empty() {
            if !state.entries.is_empty() {
                return Err(PolicyError::InvalidState(
                    "default cpuset cannot be empty".into(),
                ));
            }
            state.default_cpu_set = self.topology.cpus();
            return Ok(());
        }
        if !self.reserved.is_subset(default) {
            return Err(PolicyError::InvalidState(format!(
                "not all reserved cpus: \"{}\" are present in defaultCpuSet: \"{default}\"",
                self.reserved
            )));
        }
        let mut known = default.clone();
        for (pod, containers) in &state.entries {
            for (container, cpus) in containers {
                if !default.intersection(cpus).is_empty() {
                    return Err(PolicyError::InvalidState(format!(
                        "pod: {pod}, container: {container} cpuset: \"{cpus}\" overlaps with default cpuset \"{default}\""
                    )));
                }
                known = known.union(cpus);
            }
        }
        if known != self.topology.cpus() {
            return Err(PolicyError::InvalidState(format!(
                "current set of available CPUs \"{}\" doesn't match with CPUs in state \"{known}\"",
                self.topology.cpus()
            )));
        }
        Ok(())
    }

    /// Gives `container` of `pod` its exclusive CPUs if it is to have any, preferring the
    /// NUMA nodes of `numa_affinity` (the topology manager's choice; `None`: no preference).
    /// A container that already has CPUs keeps them.
    pub fn allocate(
        &mut self,
        state: &mut CpuManagerCheckpoint,
        pod: &Pod,
        container: &Container,
        numa_affinity: Option<&[u32]>,
    ) -> Result<(), PolicyError> {
        let n = guaranteed_cpus(pod, container);
        if n == 0 {
            return Ok(());
        }
        // Go checks this first, even for a container that already has its CPUs.
        let per_core = self.topology.cpus_per_core().max(1);
        if self.options.full_pcpus_only && n % per_core != 0 {
            return Err(PolicyError::SmtAlignment {
                requested: n,
                per_core,
            });
        }
        let uid = pod::uid(pod);
        if let Some(cpus) = state.assigned(uid, &container.name).cloned() {
            self.update_cpus_to_reuse(pod, container, &cpus);
            return Ok(());
        }
        let reusable = self.cpus_to_reuse.get(uid).cloned().unwrap_or_default();
        let cpus = self.allocate_cpus(state, n, numa_affinity, &reusable)?;
        tracing::info!(pod = %pod::full_name(pod), uid, container = %container.name, cpus = %cpus, "cpu manager: exclusive CPUs assigned");
        state
            .entries
            .entry(uid.to_string())
            .or_default()
            .insert(container.name.clone(), cpus.clone());
        self.update_cpus_to_reuse(pod, container, &cpus);
        Ok(())
    }

    /// Returns a container's exclusive CPUs to the shared pool.
    pub fn remove_container(&self, state: &mut CpuManagerCheckpoint, uid: &str, container: &str) {
        let Some(containers) = state.entries.get_mut(uid) else {
            return;
        };
        if let Some(cpus) = containers.remove(container) {
            tracing::info!(uid, container, cpus = %cpus, "cpu manager: exclusive CPUs released");
            state.default_cpu_set = state.default_cpu_set.union(&cpus);
        }
        if containers.is_empty() {
            state.entries.remove(uid);
        }
    }

    /// The NUMA placements of `container`'s exclusive CPUs (Go's `GetTopologyHints`):
    /// `None` when it gets none (no preference), an empty list when its existing
    /// assignment has another size (no placement fits).
    pub fn container_hints(
        &self,
        state: &CpuManagerCheckpoint,
        pod: &Pod,
        container: &Container,
    ) -> Option<Vec<TopologyHint>> {
        let requested = guaranteed_cpus(pod, container);
        if requested == 0 {
            return None;
        }
        let uid = pod::uid(pod);
        if let Some(allocated) = state.assigned(uid, &container.name) {
            if allocated.len() != requested {
                return Some(Vec::new());
            }
            return self.generate_hints(allocated, &CpuSet::new(), requested);
        }
        let available = state.default_cpu_set.difference(&self.reserved);
        let reusable = self.cpus_to_reuse.get(uid).cloned().unwrap_or_default();
        self.generate_hints(&available, &reusable, requested)
    }

    /// The NUMA placements of the whole pod's exclusive CPUs (Go's `GetPodTopologyHints`).
    pub fn pod_hints(&self, state: &CpuManagerCheckpoint, pod: &Pod) -> Option<Vec<TopologyHint>> {
        let requested = pod_guaranteed_cpus(pod);
        if requested == 0 {
            return None;
        }
        let uid = pod::uid(pod);
        let mut assigned = CpuSet::new();
        for c in pod::all_containers(pod) {
            if let Some(allocated) = state.assigned(uid, &c.name) {
                if allocated.len() != guaranteed_cpus(pod, c) {
                    return Some(Vec::new());
                }
                assigned = assigned.union(allocated);
            }
        }
        if assigned.len() == requested {
            return self.generate_hints(&assigned, &CpuSet::new(), requested);
        }
        let available = state.default_cpu_set.difference(&self.reserved);
        let reusable = self
            .cpus_to_reuse
            .get(uid)
            .cloned()
            .unwrap_or_default()
            .union(&assigned);
        self.generate_hints(&available, &reusable, requested)
    }

    /// Go's `generateCPUTopologyHints`: every set of NUMA nodes holding the reusable CPUs
    /// and enough available ones; the smallest sets that could hold the request are
    /// preferred. `None` (no preference) on machines with more NUMA nodes than the
    /// topology manager works on.
    fn generate_hints(
        &self,
        available: &CpuSet,
        reusable: &CpuSet,
        request: usize,
    ) -> Option<Vec<TopologyHint>> {
        let nodes: Vec<u32> = self.topology.numa_nodes().into_iter().collect();
        if nodes.len() > MAX_NUMA_NODES {
            return None;
        }
        let node_of = |cpu: u32| self.topology.info(cpu).map(|i| i.numa_node);
        let mut min_size = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
        let mut hints = Vec::new();
        for mask in NumaMask::subsets(&nodes) {
            if self.topology.cpus_in_numa_nodes(&mask.nodes()).len() >= request {
                min_size = min_size.min(mask.count());
            }
            if reusable
                .iter()
                .any(|c| !node_of(c).is_some_and(|n| mask.contains(n)))
            {
                continue;
            }
            let matching = reusable.len()
                + available
                    .iter()
                    .filter(|c| node_of(*c).is_some_and(|n| mask.contains(n)))
                    .count();
            if matching >= request {
                hints.push(TopologyHint {
                    affinity: Some(mask),
                    preferred: false,
                });
            }
        }
        for h in &mut hints {
            h.preferred = h.affinity.is_some_and(|m| m.count() == min_size);
        }
        Some(hints)
    }

    fn allocate_cpus(
        &self,
        state: &mut CpuManagerCheckpoint,
        n: usize,
        numa_affinity: Option<&[u32]>,
        reusable: &CpuSet,
    ) -> Result<CpuSet, PolicyError> {
        let assignable = state
            .default_cpu_set
            .difference(&self.reserved)
            .union(reusable);
        let mut result = CpuSet::new();
        if let Some(nodes) = numa_affinity {
            let aligned = assignable.intersection(&self.topology.cpus_in_numa_nodes(nodes));
            let take = n.min(aligned.len());
            result = take_by_topology(&self.topology, &aligned, take)?;
        }
        let rest = take_by_topology(
            &self.topology,
            &assignable.difference(&result),
            n - result.len(),
        )?;
        result = result.union(&rest);
        state.default_cpu_set = state.default_cpu_set.difference(&result);
        Ok(result)
    }

    fn update_cpus_to_reuse(&mut self, pod: &Pod, container: &Container, cpus: &CpuSet) {
        let uid = pod::uid(pod);
        self.cpus_to_reuse.retain(|k, _| k == uid);
        let reuse = self.cpus_to_reuse.entry(uid.to_string()).or_default();
        let is_init = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|inits| inits.iter().any(|c| c.name == container.name));
        *reuse = if is_init {
            reuse.union(cpus)
        } else {
            reuse.difference(cpus)
        };
    }
}

/// How many exclusive CPUs a container gets: its cpu request when the pod is Guaranteed and
/// the request is a whole number of CPUs, else 0 (Go's `guaranteedCPUs`).
pub fn guaranteed_cpus(pod: &Pod, container: &Container) -> usize {
    if pod_qos(pod) != QosClass::Guaranteed {
        return 0;
    }
    let milli = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .and_then(|q| crate::resources::milli_value(q).ok())
        .unwrap_or(0);
    if milli <= 0 || milli % 1000 != 0 {
        return 0;
    }
    usize::try_from(milli / 1000).unwrap_or(0)
}

/// The pod's exclusive CPUs: the largest init container's or the app containers' sum,
/// whichever is more (Go's `podGuaranteedCPUs`).
pub fn pod_guaranteed_cpus(pod: &Pod) -> usize {
    let spec = pod.spec.as_ref();
    let init = spec
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, |cs| {
            cs.iter()
                .map(|c| guaranteed_cpus(pod, c))
                .max()
                .unwrap_or(0)
        });
    let app: usize = spec.map_or(0, |s| {
        s.containers.iter().map(|c| guaranteed_cpus(pod, c)).sum()
    });
    init.max(app)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
