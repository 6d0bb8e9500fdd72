//! # kubelet-cm
//!
//! The Linux container manager of kubelet-rs, implementing
//! [`kubelet_core::ContainerManager`] the way Go's `pkg/kubelet/cm` does, with the cgroupfs
//! driver or the systemd one ([`cgroups::systemd`]: slices over D-Bus): it reads the
//! machine (CPUs, memory, hugepages, ids, ephemeral storage), refuses to run with swap on
//! (`failSwapOn`), computes capacity and allocatable (reservations and hard eviction
//! thresholds), detects cgroup v1 / v2 / hybrid from the mount table, creates
//! the QoS hierarchy (`kubepods`, `kubepods/burstable`, `kubepods/besteffort`) with node
//! allocatable enforced on `kubepods`, and creates/removes the per-pod `pod<uid>` cgroups
//! that the runtime uses as cgroup parent. It measures the node for the core stats contract
//! ([`CgroupStats`], a [`kubelet_core::NodeStatsProvider`] returned by
//! [`ContainerManager::node_stats`](kubelet_core::ContainerManager::node_stats)): cgroup CPU
//! and memory usage, network interfaces from `/proc`, filesystems from `statvfs`. It serves
//! the device plugin registration socket and calls registered plugins ([`device_plugins`]:
//! `deviceplugin/v1beta1` over gRPC, a [`kubelet_core::devices::DevicePluginRegistry`]), and
//! runs the plugin manager ([`plugin_manager`]: plugins registering by a socket in
//! `<root-dir>/plugins_registry`, handed to a [`PluginHandler`] per plugin type, such as the
//! registry's [`DevicePluginHandler`]).
//!
//! ```no_run
//! use kubelet_cm::{CmConfig, LinuxContainerManager};
//! use kubelet_core::ContainerManager;
//!
//! # fn main() -> Result<(), kubelet_cm::Error> {
//! let cm = LinuxContainerManager::new(CmConfig::default())?;
//! println!("capacity: {:?}", cm.capacity());
//! println!("allocatable: {:?}", cm.allocatable());
//! println!("kernel: {}", cm.machine_info().kernel_version);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod allocatable;
pub mod cgroups;
pub mod csi;
pub mod device_plugins;
mod error;
pub mod helpers;
mod host_root;
pub mod logind;
pub mod machine;
mod manager;
pub mod oom;
pub mod plugin_manager;
pub mod process_placement;
pub mod quantity;
pub mod reserved_cgroups;
mod stats;
pub mod system_containers;
mod uds;

pub use cgroups::{CgroupManager, CgroupMode, CgroupName, ResourceConfig, Usage};
pub use device_plugins::{DevicePluginHandler, GrpcDevicePlugin, GrpcDevicePluginRegistry};
pub use error::Error;
pub use machine::MachineInfo;
pub use manager::{
    CmConfig, LinuxContainerManager, NodeResources, ENFORCE_PODS, NODE_ALLOCATABLE_CGROUP,
};
pub use oom::{apply_oom_score_adj, OomError};
pub use plugin_manager::{PluginHandler, PluginManager, PluginManagerError};
pub use stats::{parse_net_dev, CgroupStats};
