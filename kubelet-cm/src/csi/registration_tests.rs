//! The CSI registration handler against a fake driver's `Node` service on a real socket.

use std::sync::Mutex;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::*;
use crate::csi::api;
use crate::csi::api::node_server::{Node, NodeServer};

/// A driver whose `NodeGetInfo` answers `info` (or fails with `INTERNAL` when `None`).
struct FakeNode {
    info: Option<api::NodeGetInfoResponse>,
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in the fake"))
}

#[tonic::async_trait]
impl Node for FakeNode {
    async fn node_stage_volume(
        &self,
        _: Request<api::NodeStageVolumeRequest>,
    ) -> Result<Response<api::NodeStageVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_unstage_volume(
        &self,
        _: Request<api::NodeUnstageVolumeRequest>,
    ) -> Result<Response<api::NodeUnstageVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_publish_volume(
        &self,
        _: Request<api::NodePublishVolumeRequest>,
    ) -> Result<Response<api::NodePublishVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_unpublish_volume(
        &self,
        _: Request<api::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<api::NodeUnpublishVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_get_volume_stats(
        &self,
        _: Request<api::NodeGetVolumeStatsRequest>,
    ) -> Result<Response<api::NodeGetVolumeStatsResponse>, Status> {
        unimplemented()
    }
    async fn node_expand_volume(
        &self,
        _: Request<api::NodeExpandVolumeRequest>,
    ) -> Result<Response<api::NodeExpandVolumeResponse>, Status> {
        unimplemented()
    }
    async fn node_get_capabilities(
        &self,
        _: Request<api::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<api::NodeGetCapabilitiesResponse>, Status> {
        unimplemented()
    }
    async fn node_get_info(
        &self,
        _: Request<api::NodeGetInfoRequest>,
    ) -> Result<Response<api::NodeGetInfoResponse>, Status> {
        match &self.info {
            Some(i) => Ok(Response::new(i.clone())),
            None => Err(Status::internal("disk controller not ready")),
        }
    }
}

/// Serves the fake on a socket in `dir`; returns the socket's path.
fn serve(
    dir: &std::path::Path,
    info: Option<api::NodeGetInfoResponse>,
    stop: &CancellationToken,
) -> String {
    let socket = dir.join("csi.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(NodeServer::new(FakeNode { info }))
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            stop.clone().cancelled_owned(),
        );
    tokio::spawn(server);
    socket.to_string_lossy().into_owned()
}

/// Records what the handler asked of the node's API objects.
#[derive(Default)]
struct Recorded {
    calls: Mutex<Vec<String>>,
    refuse_install: bool,
}

#[async_trait]
impl CsiNodeObjects for Recorded {
    async fn install_driver(&self, node: &CsiDriverNode) -> Result<(), String> {
        self.calls.lock().unwrap().push(format!(
            "install {} {} {} {:?}",
            node.driver, node.node_id, node.max_volumes, node.topology
        ));
        if self.refuse_install {
            return Err("the API server refused".into());
        }
        Ok(())
    }
    async fn uninstall_driver(&self, driver: &str) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("uninstall {driver}"));
        Ok(())
    }
}

fn versions(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn node_info() -> api::NodeGetInfoResponse {
    api::NodeGetInfoResponse {
        node_id: "node-1".into(),
        max_volumes_per_node: 16,
        accessible_topology: Some(api::Topology {
            segments: [("topology.example.com/zone".to_string(), "a".to_string())].into(),
        }),
    }
}

#[test]
fn versions_are_validated_with_gos_messages() {
    let h = CsiRegistrationHandler::new(Arc::default(), Arc::new(Recorded::default()));
    let e = h.validate_plugin("d", "/s", &[]).unwrap_err();
    assert_eq!(
        e,
        "validation failed for CSI Driver d at endpoint /s: kubernetes.io/csi: ValidatePlugin for CSI driver \"d\" failed. Plugin returned an empty list for supported versions"
    );
    let e = h
        .validate_plugin("d", "/s", &versions(&["0.3.0"]))
        .unwrap_err();
    assert!(
        e.ends_with("None of the versions specified \"[0.3.0]\" are supported. err=highest supported version reported by driver is 0.3.0, must be v1.x"),
        "{e}"
    );
    assert!(h.validate_plugin("d", "/s", &versions(&["1.0.0"])).is_ok());
}

#[tokio::test]
async fn a_driver_registers_with_its_node_info_and_deregisters() {
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let endpoint = serve(dir.path(), Some(node_info()), &stop);
    let drivers = Arc::new(CsiDrivers::default());
    let objects = Arc::new(Recorded::default());
    let h = CsiRegistrationHandler::new(drivers.clone(), objects.clone());
    h.register_plugin("csi.example.com", &endpoint, &versions(&["1.0.0", "1.2.0"]))
        .await
        .unwrap();
    let d = drivers.get("csi.example.com").unwrap();
    assert_eq!(
        (d.endpoint.as_str(), d.version.to_string()),
        (endpoint.as_str(), "1.2.0".into())
    );
    let node = d.node.unwrap();
    assert_eq!((node.node_id.as_str(), node.max_volumes), ("node-1", 16));
    assert_eq!(
        objects.calls.lock().unwrap().clone(),
        vec!["install csi.example.com node-1 16 {\"topology.example.com/zone\": \"a\"}"]
    );
    // The same driver again, at a version not above the registered one: refused.
    let e = h
        .register_plugin("csi.example.com", &endpoint, &versions(&["1.2.0"]))
        .await
        .unwrap_err();
    assert!(e.contains("Another driver with the same name is already registered with a higher supported version: \"1.2.0\""), "{e}");

    h.deregister_plugin("csi.example.com");
    assert!(drivers.get("csi.example.com").is_none());
    kubelet_core::testing::eventually(std::time::Duration::from_secs(5), "uninstalled", || async {
        objects
            .calls
            .lock()
            .unwrap()
            .contains(&"uninstall csi.example.com".to_string())
            .then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test]
async fn a_failing_driver_or_api_leaves_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let endpoint = serve(dir.path(), None, &stop);
    let drivers = Arc::new(CsiDrivers::default());
    let objects = Arc::new(Recorded::default());
    let h = CsiRegistrationHandler::new(drivers.clone(), objects.clone());
    let e = h
        .register_plugin("d", &endpoint, &versions(&["1.0.0"]))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        "rpc error: code = Internal desc = disk controller not ready"
    );
    assert!(drivers.all().is_empty());
    assert_eq!(objects.calls.lock().unwrap().clone(), vec!["uninstall d"]);

    let dir2 = tempfile::tempdir().unwrap();
    let endpoint = serve(dir2.path(), Some(node_info()), &stop);
    let objects = Arc::new(Recorded {
        refuse_install: true,
        ..Default::default()
    });
    let h = CsiRegistrationHandler::new(drivers.clone(), objects.clone());
    let e = h
        .register_plugin("d", &format!("unix://{endpoint}"), &versions(&["1.0.0"]))
        .await
        .unwrap_err();
    assert_eq!(e, "the API server refused");
    assert!(drivers.all().is_empty());
    stop.cancel();
}
