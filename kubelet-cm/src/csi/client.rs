//! The kubelet's client of a CSI driver's socket (Go's `csiDriverClient`): each call under
//! its deadline, failures as Go prints them.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tonic::transport::Channel;

use kubelet_core::csi::{CsiAccessMode, CsiExpandRequest, CsiMountRequest, CsiVolumeUsage};

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
    /// The driver answered an error or nothing in time (printed as Go prints the gRPC
    /// status; the method is for logs).
    #[error("{message}")]
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

impl CsiNodeClient {
    /// `NodeGetCapabilities`: whether the driver stages volumes (`STAGE_UNSTAGE_VOLUME`).
    pub async fn supports_stage(&mut self, timeout: Duration) -> Result<bool, CsiError> {
        use api::node_service_capability::rpc::Type;
        self.has_capability(Type::StageUnstageVolume, timeout).await
    }

    /// `NodeGetCapabilities`: whether the driver has the RPC capability `wanted`.
    async fn has_capability(
        &mut self,
        wanted: api::node_service_capability::rpc::Type,
        timeout: Duration,
    ) -> Result<bool, CsiError> {
        use api::node_service_capability::Type as Cap;
        let request = with_deadline(api::NodeGetCapabilitiesRequest {}, timeout);
        let caps = call(
            "NodeGetCapabilities",
            timeout,
            self.node.node_get_capabilities(request),
        )
        .await?;
        Ok(caps
            .capabilities
            .iter()
            .any(|c| matches!(&c.r#type, Some(Cap::Rpc(r)) if r.r#type == wanted as i32)))
    }

    /// `NodeGetVolumeStats` of the volume published at `volume_path`, when the driver has
    /// `GET_VOLUME_STATS` (Go's `metricsCsi`): the `BYTES` and `INODES` usages, 0 for what
    /// the driver leaves out (negative numbers too).
    pub async fn volume_stats(
        &mut self,
        volume_id: &str,
        volume_path: &str,
        timeout: Duration,
    ) -> Result<Option<CsiVolumeUsage>, CsiError> {
        use api::node_service_capability::rpc::Type;
        use api::volume_usage::Unit;
        if !self.has_capability(Type::GetVolumeStats, timeout).await? {
            return Ok(None);
        }
        let message = api::NodeGetVolumeStatsRequest {
            volume_id: volume_id.to_string(),
            volume_path: volume_path.to_string(),
            ..Default::default()
        };
        let request = with_deadline(message, timeout);
        let response = call(
            "NodeGetVolumeStats",
            timeout,
            self.node.node_get_volume_stats(request),
        )
        .await?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let mut usage = CsiVolumeUsage::default();
        for u in &response.usage {
            if u.unit == Unit::Bytes as i32 {
                usage.available_bytes = n(u.available);
                usage.capacity_bytes = n(u.total);
                usage.used_bytes = n(u.used);
            } else if u.unit == Unit::Inodes as i32 {
                usage.inodes_free = n(u.available);
                usage.inodes = n(u.total);
                usage.inodes_used = n(u.used);
            }
        }
        Ok(Some(usage))
    }

    /// `NodeStageVolume`.
    pub async fn stage(&mut self, r: &CsiMountRequest, timeout: Duration) -> Result<(), CsiError> {
        let message = api::NodeStageVolumeRequest {
            volume_id: r.volume_id.clone(),
            publish_context: r.publish_context.clone(),
            staging_target_path: r.staging_path.clone(),
            volume_capability: Some(capability(r)),
            secrets: r.secrets.clone(),
            volume_context: r.volume_context.clone(),
        };
        let request = with_deadline(message, timeout);
        call(
            "NodeStageVolume",
            timeout,
            self.node.node_stage_volume(request),
        )
        .await
        .map(|_| ())
    }

    /// `NodePublishVolume`.
    pub async fn publish(
        &mut self,
        r: &CsiMountRequest,
        timeout: Duration,
    ) -> Result<(), CsiError> {
        let message = api::NodePublishVolumeRequest {
            volume_id: r.volume_id.clone(),
            publish_context: r.publish_context.clone(),
            staging_target_path: r.staging_path.clone(),
            target_path: r.target_path.clone(),
            volume_capability: Some(capability(r)),
            readonly: r.read_only,
            secrets: r.secrets.clone(),
            volume_context: r.volume_context.clone(),
        };
        let request = with_deadline(message, timeout);
        call(
            "NodePublishVolume",
            timeout,
            self.node.node_publish_volume(request),
        )
        .await
        .map(|_| ())
    }

    /// `NodeExpandVolume` when the driver has `EXPAND_VOLUME` (Go's `NodeSupportsNodeExpand`
    /// then `NodeExpandVolume`): `Ok(false)` when it has not, nothing called then.
    pub async fn expand(
        &mut self,
        r: &CsiExpandRequest,
        timeout: Duration,
    ) -> Result<bool, CsiError> {
        use api::node_service_capability::rpc::Type;
        if !self.has_capability(Type::ExpandVolume, timeout).await? {
            return Ok(false);
        }
        let mode = mode_of(r.access_mode);
        let message = api::NodeExpandVolumeRequest {
            volume_id: r.volume_id.clone(),
            volume_path: r.volume_path.clone(),
            capacity_range: Some(api::CapacityRange {
                required_bytes: r.required_bytes,
                limit_bytes: 0,
            }),
            staging_target_path: r.staging_path.clone(),
            volume_capability: Some(api::VolumeCapability {
                access_mode: Some(api::volume_capability::AccessMode { mode: mode as i32 }),
                access_type: Some(api::volume_capability::AccessType::Mount(
                    api::volume_capability::MountVolume {
                        fs_type: r.fs_type.clone(),
                        mount_flags: r.mount_flags.clone(),
                    },
                )),
            }),
        };
        let request = with_deadline(message, timeout);
        call(
            "NodeExpandVolume",
            timeout,
            self.node.node_expand_volume(request),
        )
        .await
        .map(|_| true)
    }

    /// `NodeUnpublishVolume`.
    pub async fn unpublish(
        &mut self,
        volume_id: &str,
        target_path: &str,
        timeout: Duration,
    ) -> Result<(), CsiError> {
        let message = api::NodeUnpublishVolumeRequest {
            volume_id: volume_id.to_string(),
            target_path: target_path.to_string(),
        };
        let request = with_deadline(message, timeout);
        call(
            "NodeUnpublishVolume",
            timeout,
            self.node.node_unpublish_volume(request),
        )
        .await
        .map(|_| ())
    }

    /// `NodeUnstageVolume`.
    pub async fn unstage(
        &mut self,
        volume_id: &str,
        staging_path: &str,
        timeout: Duration,
    ) -> Result<(), CsiError> {
        let message = api::NodeUnstageVolumeRequest {
            volume_id: volume_id.to_string(),
            staging_target_path: staging_path.to_string(),
        };
        let request = with_deadline(message, timeout);
        call(
            "NodeUnstageVolume",
            timeout,
            self.node.node_unstage_volume(request),
        )
        .await
        .map(|_| ())
    }
}

/// A volume's capability (Go's `NodeStageVolume`/`NodePublishVolume` requests): a mount with
/// its fs type and flags, or a raw block device.
fn capability(r: &CsiMountRequest) -> api::VolumeCapability {
    let mode = mode_of(r.access_mode);
    let access_type = if r.block {
        api::volume_capability::AccessType::Block(api::volume_capability::BlockVolume {})
    } else {
        api::volume_capability::AccessType::Mount(api::volume_capability::MountVolume {
            fs_type: r.fs_type.clone(),
            mount_flags: r.mount_flags.clone(),
        })
    };
    api::VolumeCapability {
        access_mode: Some(api::volume_capability::AccessMode { mode: mode as i32 }),
        access_type: Some(access_type),
    }
}

/// The CSI access mode (Go's `asCSIAccessModeV1`).
fn mode_of(m: CsiAccessMode) -> api::volume_capability::access_mode::Mode {
    use api::volume_capability::access_mode::Mode;
    match m {
        CsiAccessMode::SingleNodeWriter => Mode::SingleNodeWriter,
        CsiAccessMode::MultiNodeReaderOnly => Mode::MultiNodeReaderOnly,
        CsiAccessMode::MultiNodeMultiWriter => Mode::MultiNodeMultiWriter,
        CsiAccessMode::Unknown => Mode::Unknown,
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
