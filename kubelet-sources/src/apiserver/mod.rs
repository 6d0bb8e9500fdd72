//! The kubelet as a member of a Kubernetes cluster, through the API server (kube-rs).
//!
//! One module per job, as in the Go kubelet:
//! - [`client`]: API clients from a kubeconfig — a rate-limited one for normal requests
//!   (`kubeAPIQPS`/`kubeAPIBurst`) and an un-throttled one with a timeout for heartbeats;
//! - [`source`]: the pod source watching `spec.nodeName=<node>` ([`source::ApiSource`]);
//! - [`node`]: node registration and the node status loop (composable status setters);
//! - [`lease`]: the node lease in `kube-node-lease`;
//! - [`status_sink`]: the [`kubelet_core::StatusSink`] publishing pod status, deleting
//!   finished pods and keeping mirror pods of static pods;
//! - [`events`]: the event recorder (bounded queue, aggregation, rate limit);
//! - [`certificate`]: TLS bootstrap, client and serving certificate rotation, and the API
//!   clients' changeable TLS identity.
//!
//! [`ClusterMember::start`] composes all of it for a running kubelet.

pub mod certificate;
pub mod client;
pub mod client_metrics;
pub mod csi_node;
pub mod events;
pub mod lease;
pub mod member;
pub mod node;
pub mod source;
pub mod status_sink;

pub use client::{ApiClients, ClientConfig};
pub use csi_node::ApiCsiNodeObjects;
pub use events::EventRecorder;
pub use member::{ClusterMember, ClusterMemberConfig};
pub use source::ApiSource;
pub use status_sink::ApiStatusSink;

/// Errors of the API server integration.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The kubeconfig file could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// Path of the kubeconfig.
        path: String,
        /// What failed.
        message: String,
    },
    /// Building the HTTP client failed.
    #[error("building the API client for {server}: {}", kubelet_core::display_chain(.error))]
    ClientBuild {
        /// The API server URL.
        server: String,
        /// The cause.
        error: kube::Error,
    },
    /// A request to the API server failed.
    #[error("{what}: {}", kubelet_core::display_chain(.error))]
    Request {
        /// What was requested (e.g. "create node node-1").
        what: String,
        /// The cause.
        error: kube::Error,
    },
    /// A request did not finish in time.
    #[error("{what}: timed out after {timeout:?}")]
    Timeout {
        /// What was requested.
        what: String,
        /// The timeout.
        timeout: std::time::Duration,
    },
    /// A value could not be encoded.
    #[error("encoding {what}: {error}")]
    Encode {
        /// What was encoded.
        what: String,
        /// The cause.
        error: serde_json::Error,
    },
}

impl ApiError {
    /// The HTTP status code of an API error answer, if this is one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ApiError::Request {
                error: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }

    /// The API server said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// The API server said the object already exists (or a conflicting write happened).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }
}

/// Wraps a kube error with what was being done.
pub(crate) fn req_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ApiError {
    let what = what.into();
    move |source| ApiError::Request {
        what,
        error: source,
    }
}
