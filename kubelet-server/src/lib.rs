//! # kubelet-server
//!
//! The kubelet's HTTP endpoints, served over a narrow [`Host`] interface (like Go's
//! `server.HostInterface`) so that an embedder gets the same API for its own node agent.
//! [`KubeletHandle`](kubelet_core::KubeletHandle) implements [`Host`].
//!
//! What exists so far: the healthz listener (`/healthz`, `/healthz/ping`,
//! `/healthz/syncloop`) and the read-only listener (`readOnlyPort`, plain HTTP: `/pods`,
//! `/healthz*`). The authenticated HTTPS listener on `:10250` with logs, exec, stats and
//! metrics is not implemented yet.
//!
//! ```no_run
//! # async fn example(handle: kubelet_core::KubeletHandle) -> std::io::Result<()> {
//! use std::sync::Arc;
//! use tokio_util::sync::CancellationToken;
//!
//! let shutdown = CancellationToken::new();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:10255").await?;
//! tokio::spawn(kubelet_server::serve(
//!     listener,
//!     Arc::new(handle),
//!     kubelet_server::Endpoints::ReadOnly,
//!     shutdown.clone(),
//! ));
//! # Ok(())
//! # }
//! ```

mod host;
mod routes;
mod serve;

pub use host::Host;
pub use routes::{respond, Endpoints, Reply};
pub use serve::serve;
