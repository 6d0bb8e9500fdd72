//! The CPU manager (Go: `pkg/kubelet/cm/cpumanager`): exclusive CPUs for the containers of
//! Guaranteed pods with whole CPU requests (`cpuManagerPolicy: static`), the shared pool for
//! every other container.
//!
//! - [`CpuManager`] (`manager`): the lifecycle — start from the state file, allocation at
//!   admission (once every admission handler admitted the pod), the CPUs a container is
//!   created with, and the periodic reconcile that moves running containers as the shared
//!   pool changes.
//! - [`StaticPolicy`] (`policy`) and [`assignment::take_by_topology`]: which CPUs, pure and
//!   tested on Go's simulated machines.
//! - [`CpuSet`], [`CpuTopology`] (the machine's CPUs by core, socket and NUMA node) and
//!   [`CpuManagerCheckpoint`] (`<root-dir>/cpu_manager_state` in Go's format and checksum,
//!   so a node switches between the Go kubelet and kubelet-rs with its assignments intact).
//!
//! ```
//! use kubelet_core::cpumanager::{CpuManagerCheckpoint, CpuSet};
//!
//! let mut state = CpuManagerCheckpoint {
//!     policy_name: "static".into(),
//!     default_cpu_set: CpuSet::parse("0,3-7").unwrap(),
//!     ..Default::default()
//! };
//! state
//!     .entries
//!     .entry("pod-uid".into())
//!     .or_default()
//!     .insert("app".into(), CpuSet::parse("1-2").unwrap());
//! let file = state.to_json().unwrap();
//! assert_eq!(CpuManagerCheckpoint::from_json(&file, "static").unwrap(), state);
//! ```

pub mod assignment;
pub mod checkpoint;
pub mod cpuset;
pub mod manager;
pub mod policy;
pub mod topology;

pub use checkpoint::{CheckpointError, CpuManagerCheckpoint, STATE_FILE};
pub use cpuset::{CpuSet, CpuSetError};
pub use manager::{CpuManager, CpuManagerConfig, CpuManagerError, CpuManagerPolicy};
pub use policy::{guaranteed_cpus, PolicyError, StaticPolicy, StaticPolicyOptions};
pub use topology::{CpuInfo, CpuTopology};
