//! CSI driver registration against the real control plane (v1.20.2): the project's CSI test
//! driver (`kubelet-rs-csi-test-driver`, a separate process serving the `csi.v1` services and,
//! as `node-driver-registrar` serves it beside a driver, the `pluginregistration` service on
//! real unix sockets) appears in the kubelet's `plugins_registry`; the plugin manager and the
//! CSI handler register it with the node's own identity: the `CSINode` object has the driver
//! with its node ID, topology key and volume limit, the Node has the
//! `csi.volume.kubernetes.io/nodeid` annotation and the topology label. The registration
//! socket removed: the driver leaves `CSINode` and the annotation. Before any driver, the
//! kubelet made the node's `CSINode` at start-up (owned by the Node, no drivers), as Go's does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, start};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kubelet_cm::csi::registration::CsiRegistrationHandler;
use kubelet_cm::csi::CsiDrivers;
use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, CSI_PLUGIN};
use kubelet_sources::apiserver::{ApiClients, ApiCsiNodeObjects, ClientConfig};
use tokio_util::sync::CancellationToken;

const DRIVER: &str = "csi.kubelet-rs.test";
/// The test driver's topology key (its value is the node ID).
const TOPOLOGY_KEY: &str = "topology.kubelet-rs.test/node";
const NODE_ID: &str = "test-node-id";

fn driver_of(c: &CSINode) -> Option<&k8s_openapi::api::storage::v1::CSINodeDriver> {
    c.spec.drivers.iter().find(|d| d.name == DRIVER)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csi_driver_registers_on_csinode_and_the_node() {
    let Some(node) = start("cluster-csi-reg", vec![]).await else {
        return;
    };
    let early: Api<CSINode> = Api::all(node.admin.clone());
    let made = eventually(
        Duration::from_secs(30),
        "the CSINode made at start-up",
        || {
            let (early, name) = (early.clone(), node.node_name.clone());
            async move { early.get(&name).await.ok() }
        },
    )
    .await;
    assert!(made.spec.drivers.is_empty());
    let owner = &made.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.node_name.as_str())
    );
    // The node may be Ready once the CSINode exists.
    eventually(Duration::from_secs(10), "no storage error", || {
        let handle = node.handle.clone();
        async move { handle.storage_error().is_none().then_some(()) }
    })
    .await;
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

    // The driver, its registrar's socket in plugins_registry.
    let reg_socket = registry.join(format!("{DRIVER}-reg.sock"));
    let mut driver = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubelet-rs-csi-test-driver"))
        .arg("--name")
        .arg(DRIVER)
        .arg("--endpoint")
        .arg(dir.join("csi.sock"))
        .arg("--registration-dir")
        .arg(&registry)
        .arg("--node-id")
        .arg(NODE_ID)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let csinodes: Api<CSINode> = Api::all(node.admin.clone());
    eventually(Duration::from_secs(30), "the driver registered", || {
        let drivers = drivers.clone();
        async move { drivers.get(DRIVER)?.node.map(|_| ()) }
    })
    .await;
    let csinode = csinodes.get(&node.node_name).await.unwrap();
    let d = driver_of(&csinode).expect("the driver on CSINode").clone();
    assert_eq!(d.node_id, NODE_ID);
    assert_eq!(d.topology_keys, Some(vec![TOPOLOGY_KEY.to_string()]));
    assert_eq!(d.allocatable.and_then(|a| a.count), Some(8));
    let owner = &csinode.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", node.node_name.as_str())
    );
    let n = node.nodes().get(&node.node_name).await.unwrap();
    let annotation = n.metadata.annotations.unwrap()["csi.volume.kubernetes.io/nodeid"].clone();
    assert_eq!(annotation, format!("{{\"{DRIVER}\":\"{NODE_ID}\"}}"));
    assert_eq!(
        n.metadata
            .labels
            .unwrap()
            .get(TOPOLOGY_KEY)
            .map(String::as_str),
        Some(NODE_ID)
    );
    assert_eq!(drivers.get(DRIVER).unwrap().node.unwrap().node_id, NODE_ID);

    // The registrar's socket removed: the driver is uninstalled.
    std::fs::remove_file(&reg_socket).unwrap();
    let _ = driver.kill().await;
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
