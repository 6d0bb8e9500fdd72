//! The memory manager's state (Go's `memorymanager/state`): what every NUMA node has, has
//! reserved for the system and has handed out ([`MachineState`]), and which blocks of which
//! nodes each container of a Guaranteed pod holds ([`Assignments`]).

use std::collections::BTreeMap;

/// The resource name of ordinary memory.
pub const MEMORY: &str = "memory";

/// One resource's accounting on one NUMA node (Go's `MemoryTable`), in bytes:
/// `allocatable = total - system_reserved` (for `memory` also minus the node's huge pages),
/// `allocatable = reserved + free`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryTable {
    /// What the node has.
    pub total: u64,
    /// Reserved for the system (`reservedMemory`).
    pub system_reserved: u64,
    /// What containers may get.
    pub allocatable: u64,
    /// Handed out to containers.
    pub reserved: u64,
    /// Still free.
    pub free: u64,
}

/// One NUMA node (Go's `NUMANodeState`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NumaNodeState {
    /// How many blocks use the node (a block of `n` nodes counts on each).
    pub number_of_assignments: i64,
    /// Resource name (`memory`, `hugepages-2Mi`, …) → its table.
    pub memory_map: BTreeMap<String, MemoryTable>,
    /// The group of nodes this node's assignments span (itself alone when it has none or
    /// only single-node ones).
    pub cells: Vec<u32>,
}

/// NUMA node id → its state (Go's `NUMANodeMap`).
pub type MachineState = BTreeMap<u32, NumaNodeState>;

/// A container's share of one resource (Go's `Block`): `size` bytes of `resource` on the
/// nodes of `numa_affinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Block {
    /// The NUMA nodes, ascending.
    pub numa_affinity: Vec<u32>,
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
}

/// Pod uid → container name → its blocks (Go's `ContainerMemoryAssignments`).
pub type Assignments = BTreeMap<String, BTreeMap<String, Vec<Block>>>;

/// The whole state, as the state file holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryManagerState {
    /// `None` or `Static`.
    pub policy_name: String,
    /// The machine (empty until the static policy starts; always empty under `None`).
    pub machine_state: MachineState,
    /// The containers' blocks.
    pub entries: Assignments,
}

impl MemoryManagerState {
    /// The blocks of `container` of pod `uid` (Go's `GetMemoryBlocks`).
    pub fn blocks(&self, uid: &str, container: &str) -> Option<&Vec<Block>> {
        self.entries.get(uid).and_then(|c| c.get(container))
    }

    /// Forgets a container's blocks, and its pod once it has none (Go's `Delete`).
    pub fn delete(&mut self, uid: &str, container: &str) -> Option<Vec<Block>> {
        let containers = self.entries.get_mut(uid)?;
        let blocks = containers.remove(container);
        if containers.is_empty() {
            self.entries.remove(uid);
        }
        blocks
    }
}
