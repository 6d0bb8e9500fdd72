//! The `Static` policy (Go v1.25's `memorymanager/policy_static.go`): which NUMA nodes'
//! memory a Guaranteed container gets, and the accounting of it in the machine state.
//!
//! - **Machine state**: per NUMA node and resource (`memory`, each huge page size), the
//!   total, the system's reservation (`reservedMemory`), what is allocatable (`memory`
//!   also loses the node's huge pages), reserved and free.
//! - **Allocate** (at admission, after the topology manager chose an affinity): a container
//!   that has blocks keeps them; otherwise the affinity (or, with none, the best hint) is
//!   widened to a superset that has the free memory when it lacks it, and every requested
//!   resource is taken first-fit from the affinity's nodes. A container on several nodes
//!   makes them a group (`cells`); a group's nodes take no single-node assignments and a
//!   single-node assignment's node joins no group, as long as they are in use.
//! - **Init containers**: app containers placed on the same nodes reuse what the pod's init
//!   containers hold (they never run together); the init containers' blocks shrink by what
//!   was reused. Sidecars (restartable init containers) run beside the app containers: their
//!   memory is never reused, and they reuse as app containers do (Go since 1.28).
//! - **Remove**: a container's blocks go back to free, node by node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::hints::{
    best_hint, calculate_hints, container_request, pod_request, regenerate_hints, MemoryHints,
    Request, RequestError, Reusable,
};
use super::state::{Block, MachineState, MemoryManagerState, MemoryTable, NumaNodeState, MEMORY};
use crate::pod;
use crate::stats::NumaMemory;
use crate::topologymanager::{NumaMask, TopologyHint};

/// NUMA node → resource → bytes reserved for the system (`reservedMemory`).
pub type ReservedMemory = BTreeMap<u32, BTreeMap<String, u64>>;

/// Why the policy cannot start or allocate (Go's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// `Static` without reserved memory.
    #[error("[memorymanager] you should specify the system reserved memory")]
    NoReservedMemory,
    /// The state has assignments but no machine.
    #[error("[memorymanager] machine state can not be empty when it has memory assignments")]
    EmptyMachineState,
    /// An assignment on a node the machine lacks.
    #[error("[memorymanager] (pod: {uid}, container: {container}) the memory assignment uses the NUMA that does not exist")]
    UnknownNode {
        /// The pod.
        uid: String,
        /// The container.
        container: String,
    },
    /// An assignment of a resource the machine lacks.
    #[error("[memorymanager] (pod: {uid}, container: {container}) the memory assignment uses memory resource that does not exist")]
    UnknownResource {
        /// The pod.
        uid: String,
        /// The container.
        container: String,
    },
    /// The state does not add up to this machine and reservation.
    #[error("[memorymanager] the expected machine state is different from the real one")]
    MachineStateDiffers,
    /// A request that is not a whole number of bytes.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// No node set has the memory.
    #[error("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")]
    NoDefaultAffinity,
    /// The best default hint is not preferred though the topology hint was.
    #[error("[memorymanager] failed to find the default preferred hint")]
    NoDefaultPreferred,
    /// No superset of the affinity has the memory.
    #[error("[memorymanager] failed to find NUMA nodes to extend the current topology hint")]
    NoExtension,
    /// The best superset is not preferred though the topology hint was.
    #[error("[memorymanager] failed to find the extended preferred hint")]
    NoExtendedPreferred,
}

/// The static policy. See the module docs.
#[derive(Debug, Clone)]
pub struct StaticPolicy {
    machine: Vec<NumaMemory>,
    reserved: ReservedMemory,
    /// Pod uid → what its init containers hold for its app containers (one pod at a
    /// time, as Go).
    reusable: BTreeMap<String, Reusable>,
}

impl StaticPolicy {
    /// The policy for a machine whose NUMA nodes are `machine`, with `reserved` for the
    /// system (Go's `NewPolicyStatic`: some `memory` must be reserved).
    pub fn new(
        machine: Vec<NumaMemory>,
        reserved: ReservedMemory,
    ) -> Result<StaticPolicy, PolicyError> {
        let total: u64 = reserved
            .values()
            .filter_map(|r| r.get(MEMORY))
            .fold(0, |a, v| a.saturating_add(*v));
        if total == 0 {
            return Err(PolicyError::NoReservedMemory);
        }
        Ok(StaticPolicy {
            machine,
            reserved,
            reusable: BTreeMap::new(),
        })
    }

    /// The machine state of a machine nothing was assigned on (Go's
    /// `getDefaultMachineState`; Go's unsigned arithmetic wraps where a reservation exceeds
    /// a node, and so does this, so the states compare equal).
    pub fn default_machine_state(&self) -> MachineState {
        let mut out = MachineState::new();
        for node in &self.machine {
            let reserved = |r: &str| {
                self.reserved
                    .get(&node.node)
                    .and_then(|m| m.get(r))
                    .copied()
                    .unwrap_or(0)
            };
            let mut memory_map = BTreeMap::new();
            let mut hugepages_total = 0u64;
            for h in &node.hugepages {
                let name = h.resource_name();
                let total = h.total_bytes();
                hugepages_total = hugepages_total.wrapping_add(total);
                let allocatable = total.wrapping_sub(reserved(&name));
                memory_map.insert(
                    name.clone(),
                    MemoryTable {
                        total,
                        system_reserved: reserved(&name),
                        allocatable,
                        reserved: 0,
                        free: allocatable,
                    },
                );
            }
            let allocatable = node
                .memory_bytes
                .wrapping_sub(reserved(MEMORY))
                .wrapping_sub(hugepages_total);
            memory_map.insert(
                MEMORY.to_string(),
                MemoryTable {
                    total: node.memory_bytes,
                    system_reserved: reserved(MEMORY),
                    allocatable,
                    reserved: 0,
                    free: allocatable,
                },
            );
            out.insert(
                node.node,
                NumaNodeState {
                    number_of_assignments: 0,
                    memory_map,
                    cells: vec![node.node],
                },
            );
        }
        out
    }

    /// Checks a restored state against this machine (Go's `validateState`): an empty
    /// machine state is filled in; otherwise replaying every assignment on a fresh
    /// machine must give exactly the stored one.
    pub fn start(&self, state: &mut MemoryManagerState) -> Result<(), PolicyError> {
        if state.machine_state.is_empty() {
            if !state.entries.is_empty() {
                return Err(PolicyError::EmptyMachineState);
            }
            state.machine_state = self.default_machine_state();
            return Ok(());
        }
        let mut expected = self.default_machine_state();
        for (uid, containers) in &state.entries {
            for (container, blocks) in containers {
                for b in blocks {
                    for n in &b.numa_affinity {
                        let node = expected
                            .get_mut(n)
                            .ok_or_else(|| PolicyError::UnknownNode {
                                uid: uid.clone(),
                                container: container.clone(),
                            })?;
                        node.number_of_assignments += 1;
                        node.cells.clone_from(&b.numa_affinity);
                        if !node.memory_map.contains_key(&b.resource) {
                            return Err(PolicyError::UnknownResource {
                                uid: uid.clone(),
                                container: container.clone(),
                            });
                        }
                    }
                    // The same first-fit deduction as an allocation (node counts above).
                    take(&mut expected, &b.numa_affinity, &b.resource, b.size, false);
                }
            }
        }
        if !same_machine(&state.machine_state, &expected) {
            return Err(PolicyError::MachineStateDiffers);
        }
        Ok(())
    }

    /// The hints of `container` (Go's `GetTopologyHints`): `None` for pods that are not
    /// Guaranteed.
    pub fn container_hints(
        &self,
        state: &MemoryManagerState,
        pod: &Pod,
        container: &Container,
    ) -> Result<Option<MemoryHints>, PolicyError> {
        let Some(request) = container_request(pod, container)? else {
            return Ok(None);
        };
        if let Some(blocks) = state.blocks(pod::uid(pod), &container.name) {
            return Ok(regenerate_hints(blocks, &request));
        }
        Ok(Some(calculate_hints(
            &state.machine_state,
            &request,
            self.reusable.get(pod::uid(pod)),
        )))
    }

    /// The hints of the whole pod (Go's `GetPodTopologyHints`).
    pub fn pod_hints(
        &self,
        state: &MemoryManagerState,
        pod: &Pod,
    ) -> Result<Option<MemoryHints>, PolicyError> {
        let Some(request) = pod_request(pod)? else {
            return Ok(None);
        };
        for c in pod::all_containers(pod) {
            if let Some(blocks) = state.blocks(pod::uid(pod), &c.name) {
                return Ok(regenerate_hints(blocks, &request));
            }
        }
        Ok(Some(calculate_hints(
            &state.machine_state,
            &request,
            self.reusable.get(pod::uid(pod)),
        )))
    }

    /// Pins `container`'s memory within `hint` (Go's `Allocate`). See the module docs.
    pub fn allocate(
        &mut self,
        state: &mut MemoryManagerState,
        pod: &Pod,
        container: &Container,
        hint: &TopologyHint,
    ) -> Result<(), PolicyError> {
        let Some(request) = container_request(pod, container)? else {
            return Ok(());
        };
        let uid = pod::uid(pod).to_string();
        if let Some(blocks) = state.blocks(&uid, &container.name).cloned() {
            self.update_reusable(pod, container, &blocks);
            return Ok(());
        }
        let reusable = self.reusable.get(&uid);
        let mut best = *hint;
        let default_mask = match best.affinity {
            Some(mask) => mask,
            None => {
                let hints = calculate_hints(&state.machine_state, &request, reusable);
                let d = hints
                    .get(MEMORY)
                    .and_then(|h| best_hint(h))
                    .or_else(|| hints.values().next().and_then(|h| best_hint(h)))
                    .ok_or(PolicyError::NoDefaultAffinity)?;
                if !d.preferred && best.preferred {
                    return Err(PolicyError::NoDefaultPreferred);
                }
                best = d;
                d.affinity.ok_or(PolicyError::NoDefaultAffinity)?
            }
        };
        let mut mask = default_mask;
        if !satisfies(&state.machine_state, mask, &request) {
            let hints = calculate_hints(&state.machine_state, &request, reusable);
            let supersets: Vec<TopologyHint> = hints
                .get(MEMORY)
                .or_else(|| hints.values().next())
                .into_iter()
                .flatten()
                .filter(|h| h.affinity.is_some_and(|m| m.and(mask) == mask))
                .copied()
                .collect();
            let e = best_hint(&supersets).ok_or(PolicyError::NoExtension)?;
            if !e.preferred && best.preferred {
                return Err(PolicyError::NoExtendedPreferred);
            }
            mask = e.affinity.ok_or(PolicyError::NoExtension)?;
        }
        let bits = mask.nodes();
        let mut blocks = Vec::with_capacity(request.len());
        for (resource, size) in &request {
            blocks.push(Block {
                numa_affinity: bits.clone(),
                resource: resource.clone(),
                size: *size,
            });
            let reuse = self
                .reusable
                .get(&uid)
                .and_then(|m| m.get(&mask))
                .and_then(|m| m.get(resource))
                .copied()
                .unwrap_or(0);
            take(
                &mut state.machine_state,
                &bits,
                resource,
                size.saturating_sub(reuse),
                true,
            );
        }
        self.update_reusable(pod, container, &blocks);
        state
            .entries
            .entry(uid.clone())
            .or_default()
            .insert(container.name.clone(), blocks.clone());
        shrink_init_blocks(state, pod, container, &blocks);
        Ok(())
    }

    /// Gives a container's blocks back (Go's `RemoveContainer`); nothing if it has none.
    pub fn remove_container(&self, state: &mut MemoryManagerState, uid: &str, container: &str) {
        let Some(blocks) = state.delete(uid, container) else {
            return;
        };
        for b in blocks {
            let mut released = b.size;
            for n in &b.numa_affinity {
                let Some(node) = state.machine_state.get_mut(n) else {
                    continue;
                };
                node.number_of_assignments -= 1;
                if node.number_of_assignments == 0 {
                    node.cells = vec![*n];
                }
                if released == 0 {
                    continue;
                }
                let Some(t) = node.memory_map.get_mut(&b.resource) else {
                    continue;
                };
                if t.reserved == 0 {
                    continue;
                }
                if t.reserved < released {
                    released -= t.reserved;
                    t.free = t.free.saturating_add(t.reserved);
                    t.reserved = 0;
                } else {
                    t.free = t.free.saturating_add(released);
                    t.reserved -= released;
                    released = 0;
                }
            }
        }
    }

    /// What containers may get, per node and resource (Go's `GetAllocatableMemory`):
    /// every table with allocatable memory, in node then resource order.
    pub fn allocatable_memory(state: &MemoryManagerState) -> Vec<Block> {
        state
            .machine_state
            .iter()
            .flat_map(|(n, node)| {
                node.memory_map
                    .iter()
                    .filter(|(_, t)| t.allocatable != 0)
                    .map(move |(r, t)| Block {
                        numa_affinity: vec![*n],
                        resource: r.clone(),
                        size: t.allocatable,
                    })
            })
            .collect()
    }

    /// Go's `updatePodReusableMemory`: only this pod's entry is kept; an init container's
    /// blocks become reusable on their nodes, an app container's use them up.
    fn update_reusable(&mut self, pod: &Pod, container: &Container, blocks: &[Block]) {
        let uid = pod::uid(pod).to_string();
        self.reusable.retain(|u, _| *u == uid);
        // A sidecar runs beside the app containers: it uses reusable memory as they do.
        let is_init = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.name == container.name && !pod::is_restartable_init(c))
            });
        let entry = self.reusable.entry(uid).or_default();
        for b in blocks {
            let mask = NumaMask::of(&b.numa_affinity);
            let v = entry
                .entry(mask)
                .or_default()
                .entry(b.resource.clone())
                .or_insert(0);
            if is_init {
                *v = (*v).max(b.size);
            } else {
                *v -= (*v).min(b.size);
            }
        }
    }
}

/// Whether the free memory of `mask`'s nodes covers `request` (Go's
/// `isAffinitySatisfyRequest`; what init containers hold is not counted).
fn satisfies(machine: &MachineState, mask: NumaMask, request: &Request) -> bool {
    request.iter().all(|(r, want)| {
        let free = mask
            .nodes()
            .iter()
            .filter_map(|n| machine.get(n).and_then(|s| s.memory_map.get(r)))
            .fold(0u64, |a, t| a.saturating_add(t.free));
        free >= *want
    })
}

/// Takes `size` bytes of `resource` first-fit from `nodes` (Go's `updateMachineState`);
/// with `count`, each node also counts the assignment and joins the group `nodes`.
fn take(machine: &mut MachineState, nodes: &[u32], resource: &str, mut size: u64, count: bool) {
    for n in nodes {
        let Some(node) = machine.get_mut(n) else {
            continue;
        };
        if count {
            node.number_of_assignments += 1;
            node.cells = nodes.to_vec();
        }
        if size == 0 {
            continue;
        }
        let Some(t) = node.memory_map.get_mut(resource) else {
            continue;
        };
        if t.free == 0 {
            continue;
        }
        if t.free >= size {
            t.reserved = t.reserved.saturating_add(size);
            t.free -= size;
            size = 0;
        } else {
            size -= t.free;
            t.reserved = t.reserved.saturating_add(t.free);
            t.free = 0;
        }
    }
}

/// Go's `updateInitContainersMemoryBlocks`: what `container` got on the same nodes is
/// taken off the blocks of the init containers before it, in order.
fn shrink_init_blocks(
    state: &mut MemoryManagerState,
    pod: &Pod,
    container: &Container,
    blocks: &[Block],
) {
    let uid = pod::uid(pod).to_string();
    // (name, whether it is a sidecar): a sidecar's memory is never reused.
    let inits: Vec<(String, bool)> = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| (c.name.clone(), pod::is_restartable_init(c)))
                .collect()
        })
        .unwrap_or_default();
    for b in blocks {
        let mut left = b.size;
        for (init, sidecar) in &inits {
            if *init == container.name || left == 0 {
                break;
            }
            if *sidecar {
                continue;
            }
            let Some(init_blocks) = state.entries.get_mut(&uid).and_then(|c| c.get_mut(init))
            else {
                continue;
            };
            for ib in init_blocks.iter_mut() {
                if ib.size == 0 || ib.resource != b.resource || ib.numa_affinity != b.numa_affinity
                {
                    continue;
                }
                let taken = ib.size.min(left);
                ib.size -= taken;
                left -= taken;
            }
        }
    }
}

/// Go's `areMachineStatesEqual`.
fn same_machine(a: &MachineState, b: &MachineState) -> bool {
    a.len() == b.len()
        && a.iter().all(|(n, x)| {
            b.get(n).is_some_and(|y| {
                let (mut cx, mut cy) = (x.cells.clone(), y.cells.clone());
                cx.sort_unstable();
                cy.sort_unstable();
                x.number_of_assignments == y.number_of_assignments
                    && cx == cy
                    && x.memory_map == y.memory_map
            })
        })
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
