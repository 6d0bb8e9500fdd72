//! CSI driver registration against the real control plane (v1.20.2): a driver of the test's
//! own (the `csi.v1` Node service and, as `node-driver-registrar` serves it beside a driver,
//! the `pluginregistration` service, each on a real unix socket) appears in the kubelet's
//! `plugins_registry`; the plugin manager and the CSI handler register it with the node's
//! own identity: the `CSINode` object has the driver with its node ID, topology key and
//! volume limit, the Node has the `csi.volume.kubernetes.io/nodeid` annotation and the
//! topology label, and the registrar is told it registered. The socket removed: the driver
//! leaves `CSINode` and the annotation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, start};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kubelet_cm::csi::api as csi;
use kubelet_cm::csi::api::node_server::{Node, NodeServer};
use kubelet_cm::csi::registration::CsiRegistrationHandler;
use kubelet_cm::csi::CsiDrivers;
use kubelet_cm::plugin_manager::api as reg;
use kubelet_cm::plugin_manager::api::registration_server::{Registration, RegistrationServer};
use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, CSI_PLUGIN};
use kubelet_sources::apiserver::{ApiClients, ApiCsiNodeObjects, ClientConfig};
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

const DRIVER: &str = "csi.kubelet-rs.test";
const ZONE_KEY: &str = "topology.kubelet-rs.test/zone";

struct TestNode;

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl Node for TestNode {
    async fn node_stage_volume(
        &self,
        _: Request<csi::NodeStageVolumeRequest>,
    ) -> Result<Response<csi::NodeStageVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_unstage_volume(
        &self,
        _: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Result<Response<csi::NodeUnstageVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_publish_volume(
        &self,
        _: Request<csi::NodePublishVolumeRequest>,
    ) -> Result<Response<csi::NodePublishVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_unpublish_volume(
        &self,
        _: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<csi::NodeUnpublishVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_get_volume_stats(
        &self,
        _: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<csi::NodeGetVolumeStatsResponse>, Status> {
        unimplemented()
    }
    async fn node_expand_volume(
        &self,
        _: Request<csi::NodeExpandVolumeRequest>,
    ) -> Result<Response<csi::NodeExpandVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<csi::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(csi::NodeGetCapabilitiesResponse {
            capabilities: vec![],
        }))
    }
    async fn node_get_info(
        &self,
        _: Request<csi::NodeGetInfoRequest>,
    ) -> Result<Response<csi::NodeGetInfoResponse>, Status> {
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: "test-node-id".into(),
            max_volumes_per_node: 7,
            accessible_topology: Some(csi::Topology {
                segments: BTreeMap::from([(ZONE_KEY.to_string(), "z1".to_string())]),
            }),
        }))
    }
}

/// The registrar's side: `GetInfo` names the driver; statuses go to the test.
struct Registrar {
    endpoint: String,
    statuses: mpsc::Sender<reg::RegistrationStatus>,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(reg::PluginInfo {
            r#type: CSI_PLUGIN.into(),
            name: DRIVER.into(),
            endpoint: self.endpoint.clone(),
            supported_versions: vec!["1.0.0".into()],
        }))
    }
    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let _ = self.statuses.try_send(request.into_inner());
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

fn serve<S>(socket: &Path, service: S, stop: &CancellationToken)
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let listener = UnixListener::bind(socket).unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            stop.clone().cancelled_owned(),
        );
    tokio::spawn(server);
}

fn driver_of(c: &CSINode) -> Option<&k8s_openapi::api::storage::v1::CSINodeDriver> {
    c.spec.drivers.iter().find(|d| d.name == DRIVER)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csi_driver_registers_on_csinode_and_the_node() {
    let Some(node) = start("cluster-csi-reg", vec![]).await else {
        return;
    };
    let kubeconfig = node.cp.node_kubeconfig(&node.node_name).await.unwrap();
    let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
        .await
        .unwrap();
    let objects = Arc::new(ApiCsiNodeObjects::new(clients.api, node.node_name.clone()));
    let drivers = Arc::new(CsiDrivers::default());
    let handler = Arc::new(CsiRegistrationHandler::new(drivers.clone(), objects));
    let dir = node.et.dir.path().join("plugins");
    let registry = dir.join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let stop = CancellationToken::new();
    let manager = PluginManager::new(
        registry.clone(),
        BTreeMap::from([(CSI_PLUGIN.to_string(), handler as Arc<dyn PluginHandler>)]),
    );
    manager.start(stop.clone()).await.unwrap();

    // The driver's socket, then the registrar's in plugins_registry.
    let driver_stop = CancellationToken::new();
    let csi_socket = dir.join("csi.sock");
    serve(&csi_socket, NodeServer::new(TestNode), &driver_stop);
    let (tx, mut statuses) = mpsc::channel(8);
    let reg_socket = registry.join(format!("{DRIVER}-reg.sock"));
    let registrar = Registrar {
        endpoint: csi_socket.to_string_lossy().into_owned(),
        statuses: tx,
    };
    serve(
        &reg_socket,
        RegistrationServer::new(registrar),
        &driver_stop,
    );

    let status = tokio::time::timeout(Duration::from_secs(30), statuses.recv())
        .await
        .expect("registration status in time")
        .unwrap();
    assert!(status.plugin_registered, "error: {}", status.error);
    let csinodes: Api<CSINode> = Api::all(node.admin.clone());
    let csinode = csinodes.get(&node.node_name).await.unwrap();
    let d = driver_of(&csinode).expect("the driver on CSINode").clone();
    assert_eq!(d.node_id, "test-node-id");
    assert_eq!(d.topology_keys, Some(vec![ZONE_KEY.to_string()]));
    assert_eq!(d.allocatable.and_then(|a| a.count), Some(7));
    let owner = &csinode.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.node_name.as_str())
    );
    let n = node.nodes().get(&node.node_name).await.unwrap();
    let annotation = n.metadata.annotations.unwrap()["csi.volume.kubernetes.io/nodeid"].clone();
    assert_eq!(annotation, format!("{{\"{DRIVER}\":\"test-node-id\"}}"));
    assert_eq!(
        n.metadata.labels.unwrap().get(ZONE_KEY).map(String::as_str),
        Some("z1")
    );
    assert_eq!(
        drivers.get(DRIVER).unwrap().node.unwrap().node_id,
        "test-node-id"
    );

    // The registrar's socket removed: the driver is uninstalled.
    std::fs::remove_file(&reg_socket).unwrap();
    driver_stop.cancel();
    eventually(
        Duration::from_secs(30),
        "driver gone from CSINode and the node",
        || {
            let (csinodes, nodes, name) = (csinodes.clone(), node.nodes(), node.node_name.clone());
            async move {
                let c = csinodes.get(&name).await.ok()?;
                let n = nodes.get(&name).await.ok()?;
                let annotated = n
                    .metadata
                    .annotations
                    .unwrap_or_default()
                    .contains_key("csi.volume.kubernetes.io/nodeid");
                (driver_of(&c).is_none() && !annotated).then_some(())
            }
        },
    )
    .await;
    assert!(drivers.get(DRIVER).is_none());
    stop.cancel();
    manager.stopped().await;
    let _ = csinodes.delete(&node.node_name, &Default::default()).await;
    node.finish().await;
}
