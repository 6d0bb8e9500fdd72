//! The kubelet's client of a CSI driver's socket (Go's `csiDriverClient`): each call under
//! its deadline, failures as Go prints them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tonic::transport::Channel;

use super::api;
use super::api::node_client::NodeClient;

/// Why a call to a CSI driver failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CsiError {
    /// The driver's socket could not be reached.
    #[error("connecting to CSI driver at {endpoint}: {message}")]
    Dial {
        /// The socket.
        endpoint: String,
        /// Why.
        message: String,
    },
    /// The driver answered an error or nothing in time.
    #[error("{method}: {message}")]
    Call {
        /// The CSI method.
        method: &'static str,
        /// The gRPC status as Go prints it.
        message: String,
    },
}

/// What `NodeGetInfo` says about this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's ID in the driver's terms (required).
    pub node_id: String,
    /// How many of the driver's volumes the node takes; 0: no limit.
    pub max_volumes: i64,
    /// The node's topology segments.
    pub topology: BTreeMap<String, String>,
}

/// The socket path of a CSI endpoint (`unix:///path` or a plain path).
pub fn socket_path(endpoint: &str) -> &Path {
    Path::new(endpoint.strip_prefix("unix://").unwrap_or(endpoint))
}

/// A connection to one CSI driver's `Node` service.
pub struct CsiNodeClient {
    node: NodeClient<Channel>,
}

impl CsiNodeClient {
    /// Connects to the driver at `endpoint`, trying until `timeout`.
    pub async fn dial(endpoint: &str, timeout: Duration) -> Result<CsiNodeClient, CsiError> {
        let channel = crate::uds::dial(socket_path(endpoint), timeout)
            .await
            .map_err(|message| CsiError::Dial {
                endpoint: endpoint.to_string(),
                message,
            })?;
        Ok(CsiNodeClient {
            node: NodeClient::new(channel),
        })
    }

    /// `NodeGetInfo`: the node's ID, volume limit and topology. An empty node ID is an error
    /// (Go's "node ID is empty").
    pub async fn node_get_info(&mut self, timeout: Duration) -> Result<NodeInfo, CsiError> {
        const METHOD: &str = "NodeGetInfo";
        let request = with_deadline(api::NodeGetInfoRequest {}, timeout);
        let info = call(METHOD, timeout, self.node.node_get_info(request)).await?;
        if info.node_id.is_empty() {
            return Err(CsiError::Call {
                method: METHOD,
                message: "node ID is empty".into(),
            });
        }
        Ok(NodeInfo {
            node_id: info.node_id,
            max_volumes: info.max_volumes_per_node,
            topology: info
                .accessible_topology
                .map(|t| t.segments)
                .unwrap_or_default(),
        })
    }
}

/// `message` carrying the call's deadline, for the driver to see.
fn with_deadline<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

/// Awaits a call for at most `timeout`.
async fn call<T>(
    method: &'static str,
    timeout: Duration,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, CsiError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(CsiError::Call {
            method,
            message: crate::uds::status_message(&status),
        }),
        Err(_) => Err(CsiError::Call {
            method,
            message: format!(
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded (no answer within {}s)",
                timeout.as_secs_f64()
            ),
        }),
    }
}
