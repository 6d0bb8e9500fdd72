//! # kubelet-core
//!
//! The pod lifecycle engine of kubelet-rs and the contracts its backends implement.
//!
//! A kubelet is assembled from four parts, each behind a trait defined here:
//! [`PodSource`] (where desired pods come from), [`ContainerRuntime`] (what runs them),
//! [`ContainerManager`] (node resources and pod cgroups) and [`StatusSink`] (where status and
//! events go). The engine owns everything in between — merging sources, the pod manager, one
//! worker per pod (sync → terminating → terminated), the sync loop, the PLEG, status
//! generation, restart backoff and admission — so a backend never re-implements the lifecycle.
//!
//! ```no_run
//! # #[cfg(feature = "testing")]
//! # async fn example() -> Result<(), kubelet_core::Error> {
//! use std::sync::Arc;
//! use kubelet_core::{Config, Kubelet};
//! use kubelet_core::testing::{SimRuntime, FakeContainerManager, StaticSource};
//! use tokio_util::sync::CancellationToken;
//!
//! let kubelet = Kubelet::builder()
//!     .config(Config { node_name: "node-1".into(), ..Config::default() })
//!     .runtime(Arc::new(SimRuntime::new()))
//!     .container_manager(Arc::new(FakeContainerManager::default()))
//!     .source(Arc::new(StaticSource::new("file", vec![])))
//!     .build()?;
//! let handle = kubelet.handle();
//! let shutdown = CancellationToken::new();
//! tokio::spawn(kubelet.run(shutdown.clone()));
//! // ... handle.pods(), handle.pod_status(uid), handle.check_health() ...
//! shutdown.cancel();
//! # let _ = handle;
//! # Ok(())
//! # }
//! ```

// The contracts a backend implements or an embedder supplies (see `contracts`), each also
// at the crate root under its own name.
pub mod admission;
pub mod contracts;
pub use contracts::{cm, credentials, csi, devices, objects, runtime, sink, source, stats};

// Helpers for backends, sources and servers that speak the kubelet's language.
pub mod clock;
pub mod cpu;
pub mod cpumanager;
pub mod cri_log;
pub mod devicemanager;
pub mod dns;
pub mod duration;
pub mod eviction;
pub mod grpc_uds;
pub mod hash;
pub mod images;
pub mod keyring;
pub mod logs;
pub mod memorymanager;
pub mod metrics;
pub mod nodeshutdown;
pub mod pod;
pub mod qos;
pub mod resources;
pub mod summary;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topologymanager;

// The engine: the sync loop, pod workers and their components (internal).
mod backoff;
mod checkpoint_file;
mod config;
mod engine;
mod env;
mod error;
mod gc;
mod hooks;
mod kubelet;
mod pleg;
mod pod_cache;
mod pod_manager;
mod pod_status;
mod pod_workers;
mod podconfig;
mod probe_results;
mod prober;
mod runtime_state;
mod status;
mod sync;
mod termination_message;
mod volume;

#[cfg(test)]
mod admission_lifecycle_tests;
#[cfg(test)]
mod eviction_tests;
#[cfg(test)]
mod housekeeping_lifecycle_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod nodeshutdown_tests;
#[cfg(test)]
mod pod_api_tests;
#[cfg(test)]
mod probe_lifecycle_tests;
#[cfg(test)]
mod runtime_bounds_tests;

pub use admission::{AdmitAttributes, AdmitHandler, AdmitResult, NodeLister};
pub use cm::{CmError, ContainerManager, PodResources, ResourceList};
pub use config::Config;
pub use env::service_env;
pub use error::{display_chain, Error, Result};
pub use kubelet::{Kubelet, KubeletBuilder, KubeletHandle};
pub use pod_workers::WorkerState;
pub use prober::ProbeCountKey;
pub use runtime::{ContainerRuntime, RuntimeError, RuntimeResult};
pub use sink::{Event, EventObject, EventType, NoopStatusSink, SinkError, StatusSink};
pub use source::{PodOperation, PodSource, PodUpdate, SourceError};
pub use stats::{MachineInfo, NodeStatsProvider, StatsError};
pub use volume::attach::unique_volume_name;
pub use volume::csi::attachment_name;
pub use volume::mount;
