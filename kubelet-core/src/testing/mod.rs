//! Test doubles for the core contracts, for this crate's tests and for downstream users
//! (feature `testing`): a deterministic in-memory runtime ([`SimRuntime`]), a container
//! manager with fixed capacity ([`FakeContainerManager`]) measuring the node through a
//! [`FakeNodeStats`], a pod source a test can drive
//! ([`StaticSource`]) and a status sink that records what it was given
//! ([`RecordingSink`]). All of them are complete implementations: nothing panics or answers
//! "unimplemented" except the streaming URLs of the simulator, which it does not have.
//!
//! Also the tests' shared vocabulary, used by every crate's tests: [`PodBuilder`],
//! [`ContainerBuilder`] and [`eventually`] (or [`poll_until`] to get `None` instead of a panic).

mod cm;
mod devices;
mod pods;
mod shutdown;
mod sim;
mod sink;
mod source;

pub use cm::{CgroupUsage, FakeContainerManager, FakeNodeStats};
pub use devices::NoopDevicePlugin;
pub use pods::{container, eventually, pod, poll_until, ContainerBuilder, PodBuilder};
pub use shutdown::ScriptedShutdownInhibitor;
pub use sim::{ContainerBehavior, SimRuntime, SANDBOX_DIES};
pub use sink::RecordingSink;
pub use source::StaticSource;
