//! The memory manager (Go v1.25's `pkg/kubelet/cm/memorymanager`; the v1.20.2 kubelet has
//! none): with `memoryManagerPolicy: Static`, the memory and huge pages of Guaranteed pods'
//! containers are pinned to NUMA nodes (the container's `cpuset.mems`), aligned with the
//! CPUs and devices by the topology manager, and accounted per node against what the
//! `reservedMemory` leaves.
//!
//! - [`MemoryManager`] (`manager`): the lifecycle — start from the state file, allocation at
//!   admission, the nodes a container is created with, stale and init-container release.
//! - [`StaticPolicy`] (`policy`) and the hints (`hints`): which nodes, pure and tested on
//!   simulated multi-NUMA machines.
//! - [`MemoryManagerState`] (`state`) and its state file `<root-dir>/memory_manager_state`
//!   (`checkpoint`) in Go's format and checksum, so a node switches between the Go kubelet
//!   and kubelet-rs with its assignments intact.
//!
//! ```
//! use std::collections::BTreeMap;
//! use kubelet_core::memorymanager::{MemoryManagerState, StaticPolicy};
//! use kubelet_core::stats::NumaMemory;
//!
//! // Two nodes of 4 GiB, 1 GiB reserved for the system on node 0.
//! let machine: Vec<NumaMemory> = (0..2)
//!     .map(|node| NumaMemory { node, memory_bytes: 4 << 30, hugepages: Vec::new() })
//!     .collect();
//! let reserved = BTreeMap::from([(0, BTreeMap::from([("memory".to_string(), 1u64 << 30)]))]);
//! let policy = StaticPolicy::new(machine, reserved).unwrap();
//! let mut state = MemoryManagerState { policy_name: "Static".into(), ..Default::default() };
//! policy.start(&mut state).unwrap();
//! assert_eq!(state.machine_state[&0].memory_map["memory"].allocatable, 3 << 30);
//! let file = state.to_json().unwrap();
//! assert_eq!(MemoryManagerState::from_json(&file, "Static").unwrap(), state);
//! ```

pub mod checkpoint;
pub mod hints;
pub mod manager;
pub mod policy;
pub mod state;

pub use checkpoint::{CheckpointError, STATE_FILE};
pub use manager::{
    node_allocatable_reservation, MemoryManager, MemoryManagerConfig, MemoryManagerError,
    MemoryManagerPolicy,
};
pub use policy::{PolicyError, ReservedMemory, StaticPolicy};
pub use state::{Block, MachineState, MemoryManagerState, MemoryTable, NumaNodeState};
