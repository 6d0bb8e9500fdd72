//! The device manager (Go v1.20.2's `pkg/kubelet/cm/devicemanager`): device plugins'
//! resources on the node, which container gets which devices, and what those devices add to
//! the container.
//!
//! The I/O is the [`DevicePluginRegistry`](crate::devices::DevicePluginRegistry) contract's
//! (kubelet-cm serves `deviceplugin/v1beta1` on `<root-dir>/device-plugins/kubelet.sock`);
//! this module decides, from the events it reports.
//!
//! # A resource's states
//!
//! | state | capacity / allocatable | left when |
//! |---|---|---|
//! | **unknown** | absent | a plugin registers → **registered** |
//! | **registered** (endpoint *e*) | all listed devices / the healthy ones | *e* lists devices → **registered** (its list replaces the old one); another plugin registers → **registered** (endpoint *e'*: what *e* still reports is ignored); *e*'s stream ends → **stopped** |
//! | **stopped** (since *t*) | all devices / 0 (every device unhealthy) | a plugin registers → **registered**; *t* + [`ENDPOINT_STOP_GRACE`] (5 min) passes → **removed** |
//! | **removed** | 0 / 0 (Go sets a gone resource to 0 rather than dropping it) | a plugin registers → **registered** |
//!
//! A restart restores each resource the checkpoint lists as **stopped** with no devices
//! (capacity 0 until its plugin registers again, removed after the grace period if it never
//! does), and every container's devices.
//!
//! # A container's devices
//! 1. **Admission** (the sync loop, through the topology manager, so the devices follow the
//!    NUMA affinity chosen with the CPU manager's hints): Go's `devicesToAllocate` picks the
//!    devices — those an init container of the pod held first, then free healthy ones on
//!    the affinity's nodes, on other nodes, without topology — and records them *pending*.
//!    Too few free devices rejects the pod (`UnexpectedAdmissionError`, Go's message).
//! 2. **Right after admission** the sync loop makes the pending `Allocate` calls
//!    ([`DeviceManager::allocate_pending`]); the answers are recorded and checkpointed. A
//!    failed call frees its devices and rejects the pod as Go does.
//! 3. **Container start** ([`DeviceManager::run_options`]): `PreStartContainer` where the
//!    plugin asks for it, then the answers' envs, mounts, device nodes, annotations and CDI
//!    devices go into the container's CRI config.
//! 4. The devices of pods no longer active are freed at the next admission once every pod
//!    source has been seen ([`DeviceManager::release_stale`]), as Go's
//!    `UpdateAllocatedDevices`.
//!
//! A plugin offering `GetPreferredAllocation` is asked where Go asks it (among the affinity's
//! devices when there are more than needed, else among every free device once the
//! affinity's are taken), right before its `Allocate` call; its answer revises the choice
//! within the same pool, the rest filled in Go's order.
//!
//! One `std` mutex guards the state, never held across an `.await`; plugin calls and file
//! writes happen outside it.

pub mod checkpoint;
mod hints;
mod manager;
pub mod pick;
pub mod state;

pub use checkpoint::{DeviceCheckpoint, CHECKPOINT_FILE};
pub use hints::pod_device_requests;
pub use manager::{DeviceManager, DeviceManagerError};
pub use pick::PreferenceQuery;
pub use state::{DeviceRunOptions, DeviceState, ENDPOINT_STOP_GRACE};

/// The device plugin directory under the kubelet's root directory (Go's
/// `DevicePluginPath`, `/var/lib/kubelet/device-plugins/`, for the default root).
pub const DEVICE_PLUGIN_DIR: &str = "device-plugins";
