//! # kubelet-server
//!
//! The kubelet's HTTP API, served over a narrow [`Host`] interface (like Go's
//! `server.HostInterface`) so that an embedder gets the same API for its own node agent.
//! [`KubeletHandle`](kubelet_core::KubeletHandle) implements [`Host`]; [`KubeletHost`] adds
//! stats, the machine spec and `/configz` for the stock kubelet. The server depends on the
//! core contracts only: stats come from the core
//! [`SummaryCollector`](kubelet_core::summary::SummaryCollector) and `/spec/` from the
//! core [`MachineInfo`](kubelet_core::MachineInfo), whatever backend measures them.
//!
//! Three listeners, as the Go kubelet: the secure port (`:10250`, HTTPS, every endpoint,
//! requests authenticated by client certificate, bearer token or — when enabled —
//! anonymously, then authorized per [`auth`]), the read-only port (plain HTTP, read-only
//! endpoints, no authentication) and the healthz port (`127.0.0.1:10248`, `/healthz*`).
//!
//! Endpoints: `/healthz`, `/healthz/ping`, `/healthz/syncloop`, `/pods`, `/runningpods/`,
//! `/spec/`, `/configz`, `/containerLogs/{ns}/{pod}/{container}` ([`logs`]), `/logs/`
//! ([`node_logs`]), `/exec`, `/attach`, `/portForward` (proxied to the runtime's streaming
//! server, [`streaming`]), `/run`, `/stats/summary` and `/metrics/resource` ([`stats`]),
//! `/metrics` (the engine's [`kubelet_core::metrics`]), `/metrics/cadvisor` ([`cadvisor`]),
//! `/metrics/probes`.
//!
//! Beside the HTTP API, [`pod_resources`] serves the pod resources gRPC API
//! (`podresources/v1`) on the unix socket `<root-dir>/pod-resources/kubelet.sock`, over the
//! [`PodResourcesHost`] interface that [`KubeletHandle`](kubelet_core::KubeletHandle) and
//! [`KubeletHost`] implement as well.
//!
//! ```no_run
//! # async fn example(handle: kubelet_core::KubeletHandle) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use kubelet_server::{auth::AuthConfig, tls::{ServerTls, TlsOptions}, Endpoints, ServerConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let tls = ServerTls::load(&TlsOptions {
//!     cert_dir: "/var/lib/kubelet/pki".into(),
//!     host_name: "node-1".into(),
//!     client_ca_file: Some("/etc/kubernetes/pki/ca.crt".into()),
//!     ..Default::default()
//! })?;
//! let config = ServerConfig {
//!     tls: Some(tls),
//!     auth: AuthConfig { anonymous: false, ..AuthConfig::allow_all() },
//!     ..ServerConfig::plain(Endpoints::Full)
//! };
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:10250").await?;
//! tokio::spawn(kubelet_server::serve_with(listener, Arc::new(handle), config, shutdown.clone()));
//! # Ok(())
//! # }
//! ```

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod auth;
pub mod cadvisor;
mod host;
pub mod logs;
pub mod node_logs;
pub mod pod_resources;
mod reply;
mod routes;
mod serve;
pub mod stats;
pub mod streaming;
pub mod tls;

pub use host::{Host, KubeletHost};
pub use pod_resources::PodResourcesHost;
pub use reply::Body;
pub use routes::{Endpoints, HandlerOptions};
pub use serve::{serve, serve_with, ServerConfig, ServerLimits};
