//! The contracts: every trait a backend implements or an embedder supplies, together.
//!
//! | contract | what it is | implemented by |
//! |---|---|---|
//! | [`PodSource`](source::PodSource) | where desired pods come from | `kubelet-sources` (files, URL, API server) |
//! | [`ContainerRuntime`](runtime::ContainerRuntime) | what runs them: a required core of nine calls, optional capabilities with "not supported" defaults | `kubelet-runtime-cri`, the simulator |
//! | [`ContainerManager`](cm::ContainerManager) | node resources, pod cgroups, and (optionally) a [`NodeStatsProvider`](stats::NodeStatsProvider) | `kubelet-cm` |
//! | [`StatusSink`](sink::StatusSink) | where pod status, events and mirror pods go | `kubelet-sources` (API server), [`sink::NoopStatusSink`] |
//! | [`CredentialProvider`](credentials::CredentialProvider) | registry credentials from outside the pod (plugins) | `kubelet-sources` (exec plugins) |
//! | [`ObjectStore`](objects::ObjectStore) | config maps, secrets, service-account tokens and services for volumes and env | `kubelet-sources` (API server), [`objects::StandaloneObjectStore`] |
//! | [`NodeStatsProvider`](stats::NodeStatsProvider) | machine info and node, pod, container and filesystem measurements (what [`crate::summary`] reads) | `kubelet-cm` |
//! | [`DevicePluginRegistry`](devices::DevicePluginRegistry) | where device plugins register, and the calls on a registered plugin ([`DevicePlugin`](devices::DevicePlugin)) | `kubelet-cm` (`deviceplugin/v1beta1` over gRPC) |
//! | [`CsiNodeObjects`](csi::CsiNodeObjects) | where CSI drivers' registrations are recorded (`CSINode`, the node ID annotation, topology labels) | `kubelet-sources` (API server), [`csi::NoCsiNodeObjects`] |
//! | [`ShutdownInhibitor`](shutdown::ShutdownInhibitor) | the host's shutdown signal and delay lock (graceful node shutdown) | `kubelet-cm` (logind over D-Bus) |
//! | [`AdmitHandler`](crate::AdmitHandler) | extra admission checks | embedders |
//!
//! The engine depends on these traits only; none of them depends on the engine. Each module
//! is re-exported at the crate root under its own name (`kubelet_core::runtime`, …).

pub mod cm;
pub mod credentials;
pub mod csi;
pub mod devices;
pub mod objects;
pub mod runtime;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod stats;
