//! [`ClusterMember`]: everything that makes a kubelet a member of a cluster, composed.
//!
//! Build it before the kubelet (its pod source and status sink go into the builder), then
//! start it with the kubelet's handle: node registration and the node status loop, the node
//! lease, the event writer, the mirror pod manager and the watch of the Node object
//! ([`ClusterMember::node_lister`]) run as tasks under the shutdown token.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kubelet_core::KubeletHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::client::ApiClients;
use super::events::{EventRecorder, EventWorker};
use super::lease::{KubeLeaseClient, LeaseConfig, LeaseController};
use super::node::{NodeCache, NodeConfig, NodeStatusLoop};
use super::source::ApiSource;
use super::status_sink::{ApiStatusSink, MirrorPods};

/// Configuration of a cluster member.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterMemberConfig {
    /// Registration and node status.
    pub node: NodeConfig,
    /// The node lease.
    pub lease: LeaseConfig,
    /// How often mirror pods are reconciled (Go does it at housekeeping, every 2s).
    pub mirror_period: Duration,
    /// Length of one pod watch request in seconds (290).
    pub pod_watch_timeout_seconds: u32,
}

impl ClusterMemberConfig {
    /// Go's defaults for a node name.
    pub fn new(node_name: impl Into<String>) -> Self {
        let node_name = node_name.into();
        ClusterMemberConfig {
            node: NodeConfig::new(node_name.clone()),
            lease: LeaseConfig::new(node_name),
            mirror_period: Duration::from_secs(2),
            pod_watch_timeout_seconds: super::source::DEFAULT_WATCH_TIMEOUT_SECONDS,
        }
    }
}

/// The composed cluster member. See the module docs.
pub struct ClusterMember {
    clients: ApiClients,
    config: ClusterMemberConfig,
    source: Arc<ApiSource>,
    sink: Arc<ApiStatusSink>,
    events: EventWorker,
    registered: tokio::sync::watch::Sender<Option<Node>>,
    node: NodeCache,
}

impl std::fmt::Debug for ClusterMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterMember")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ClusterMember {
    /// A member over `clients`.
    pub fn new(clients: ApiClients, config: ClusterMemberConfig) -> Self {
        let name = config.node.node_name.clone();
        let source = Arc::new(
            ApiSource::new(clients.api.clone(), name.clone())
                .with_watch_timeout(config.pod_watch_timeout_seconds),
        );
        let (recorder, events) = EventRecorder::new(clients.events.clone(), name);
        let sink = Arc::new(ApiStatusSink::new(
            clients.api.clone(),
            source.cache(),
            recorder,
        ));
        let (registered, _) = tokio::sync::watch::channel(None);
        ClusterMember {
            clients,
            config,
            source,
            sink,
            events,
            registered,
            node: NodeCache::default(),
        }
    }

    /// The API server pod source (add it to the kubelet builder).
    pub fn source(&self) -> Arc<ApiSource> {
        self.source.clone()
    }

    /// The rate-limited API client (for other API-server backed parts, e.g.
    /// [`crate::objects::ApiObjectStore`]).
    pub fn api_client(&self) -> kube::Client {
        self.clients.api.clone()
    }

    /// The status sink (set it on the kubelet builder).
    pub fn status_sink(&self) -> Arc<ApiStatusSink> {
        self.sink.clone()
    }

    /// The Node object as the API server has it, kept by a watch once [`Self::start`]ed (set
    /// it on the kubelet builder as its node lister, for admission).
    pub fn node_lister(&self) -> Arc<NodeCache> {
        Arc::new(self.node.clone())
    }

    /// A receiver that holds the Node once it is registered (or found).
    pub fn registered(&self) -> tokio::sync::watch::Receiver<Option<Node>> {
        self.registered.subscribe()
    }

    /// Starts the node status loop (after registration), the lease, the event writer, the
    /// mirror pod manager and the Node watch. The returned tracker is closed; wait on it
    /// after `shutdown`.
    pub async fn start(self, handle: KubeletHandle, shutdown: CancellationToken) -> TaskTracker {
        let tasks = TaskTracker::new();
        if handle.container_manager().node_stats().is_none() {
            tracing::warn!(node = %self.config.node.node_name, "the container manager does not measure the node: nodeInfo machine and boot ids, kernel and OS image stay empty");
        }
        tasks.spawn(self.events.run(shutdown.clone()));
        tasks.spawn(self.node.clone().run(
            self.clients.api.clone(),
            self.config.node.node_name.clone(),
            shutdown.clone(),
        ));
        let status_loop = NodeStatusLoop {
            api: Api::all(self.clients.heartbeat.clone()),
            config: self.config.node.clone(),
            handle: handle.clone(),
            events: self.sink.clone(),
            timeout: self.clients.heartbeat_timeout,
        };
        let mut registered_rx = self.registered.subscribe();
        let mut csi_registered_rx = self.registered.subscribe();
        tasks.spawn(status_loop.run(self.registered, shutdown.clone()));
        let lease = LeaseController::new(
            KubeLeaseClient::new(self.clients.heartbeat.clone()),
            self.config.lease.clone(),
        );
        let lease_shutdown = shutdown.clone();
        tasks.spawn(async move {
            // The lease is owned by the Node: start once the Node exists.
            tokio::select! {
                _ = lease_shutdown.cancelled() => return,
                r = registered_rx.wait_for(Option::is_some) => if r.is_err() { return; },
            }
            lease.run(lease_shutdown).await;
        });
        // Go's CSI plugin: the CSINode made before the node is Ready.
        let csi_nodes = super::ApiCsiNodeObjects::new(
            self.clients.api.clone(),
            self.config.node.node_name.clone(),
        );
        let (csi_handle, csi_shutdown) = (handle.clone(), shutdown.clone());
        csi_handle.set_storage_error(Some(CSINODE_NOT_INITIALIZED.into()));
        tasks.spawn(async move {
            tokio::select! {
                _ = csi_shutdown.cancelled() => return,
                r = csi_registered_rx.wait_for(Option::is_some) => if r.is_err() { return; },
            }
            initialize_csi_node(&csi_nodes, &csi_handle, &csi_shutdown).await;
        });
        let mirrors = MirrorPods {
            client: self.clients.api.clone(),
            node_name: self.config.node.node_name.clone(),
            handle,
            sink: self.sink.clone(),
            period: self.config.mirror_period,
        };
        tasks.spawn(mirrors.run(shutdown));
        tasks.close();
        tasks
    }
}

/// The node's Ready message while its CSINode is not made yet (Go's).
pub const CSINODE_NOT_INITIALIZED: &str = "CSINode is not yet initialized";

/// Makes the node's CSINode, trying again (from 15 ms, six times longer each time, at most
/// 30 s apart) until it is made or `shutdown`; the node is not Ready meanwhile, with the
/// last failure as the reason.
async fn initialize_csi_node(
    objects: &super::ApiCsiNodeObjects,
    handle: &KubeletHandle,
    shutdown: &CancellationToken,
) {
    let mut wait = std::time::Duration::from_millis(15);
    loop {
        match objects.initialize().await {
            Ok(()) => {
                handle.set_storage_error(None);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "initializing CSINode failed; trying again");
                handle.set_storage_error(Some(format!("Failed to initialize CSINode: {e}")));
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 6).min(std::time::Duration::from_secs(30));
    }
}
