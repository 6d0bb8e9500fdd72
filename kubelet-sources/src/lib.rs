//! # kubelet-sources
//!
//! Static pod sources for kubelet-rs, implementing [`kubelet_core::source::PodSource`] as the
//! Go kubelet's `pkg/kubelet/config` does: [`file::FileSource`] reads a manifest file or a
//! directory of manifests (`--pod-manifest-path`), watching it with inotify plus a periodic
//! rescan; [`http::HttpSource`] polls a manifest URL (`--manifest-url`). Both decode, validate
//! and default the pods through [`static_pod`] and send complete [`PodOperation::Set`]
//! snapshots. [`apiserver`] makes the kubelet a cluster member: the API server pod source,
//! node registration and status, the node lease, pod status, events and mirror pods.
//! [`objects::ApiObjectStore`] is the API-server implementation of
//! [`kubelet_core::objects::ObjectStore`] (config maps, secrets, tokens, services).
//! [`credential_plugin`] runs credential provider plugins for image pulls
//! ([`kubelet_core::credentials::CredentialProvider`]).
//!
//! [`PodOperation::Set`]: kubelet_core::source::PodOperation::Set
//!
//! ```no_run
//! # async fn example() -> Result<(), kubelet_core::SourceError> {
//! use kubelet_core::PodSource;
//! use kubelet_sources::file::{Config, FileSource};
//! use tokio_util::sync::CancellationToken;
//!
//! let source = FileSource::new(Config::new("/etc/kubernetes/manifests", "node-1"));
//! let (tx, mut rx) = tokio::sync::mpsc::channel(16);
//! let shutdown = CancellationToken::new();
//! let task = tokio::spawn({
//!     let shutdown = shutdown.clone();
//!     async move { source.run(tx, shutdown).await }
//! });
//! if let Some(update) = rx.recv().await {
//!     println!("{} pods from {}", update.pods.len(), update.source);
//! }
//! shutdown.cancel();
//! # let _ = task.await;
//! # Ok(())
//! # }
//! ```

pub mod apiserver;
pub mod credential_plugin;
pub mod decode;
pub mod file;
pub mod http;
pub mod objects;
mod reflector_backoff;
pub mod static_pod;
pub mod validation;

pub use file::FileSource;
pub use http::HttpSource;
