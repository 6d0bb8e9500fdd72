//! What the cluster CSI tests share: the project's CSI test driver
//! (`kubelet-rs-csi-test-driver`, a separate process) registered through a plugin manager
//! with the CSI handler on a cluster member, and the PersistentVolume, claim and pod shapes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Pod, Volume, VolumeMount,
    VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::CSINode;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DeleteParams;
use kube::Api;
use kubelet_cm::csi::registration::CsiRegistrationHandler;
use kubelet_cm::csi::CsiDrivers;
use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, CSI_PLUGIN};
use kubelet_sources::apiserver::{ApiClients, ApiCsiNodeObjects, ClientConfig};
use tokio_util::sync::CancellationToken;

use crate::cluster_common::{eventually, ClusterNode};

pub fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    }
}

/// A 1Gi ReadWriteOnce PV of `driver` with the handle `handle-<name>`.
pub fn csi_pv(name: &str, driver: &str, class: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: meta(name, None),
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(class.into()),
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: format!("handle-{name}"),
                volume_attributes: Some(BTreeMap::from([("color".into(), "blue".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A claim of the volume `pv` (named: two volumes alike match either claim otherwise).
pub fn claim(name: &str, ns: &str, class: &str, pv: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(name, Some(ns)),
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: Some(pv.into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates the CSIDriver object `name` with `spec`; its API for cleaning up.
pub async fn create_csi_driver(
    node: &ClusterNode,
    name: &str,
    spec: k8s_openapi::api::storage::v1::CSIDriverSpec,
) -> Api<k8s_openapi::api::storage::v1::CSIDriver> {
    let api: Api<k8s_openapi::api::storage::v1::CSIDriver> = Api::all(node.admin.clone());
    let object = k8s_openapi::api::storage::v1::CSIDriver {
        metadata: meta(name, None),
        spec,
    };
    api.create(&kube::api::PostParams::default(), &object)
        .await
        .unwrap();
    api
}

/// A cluster member with the CSI node service, the test driver registered with it, and the
/// driver's CSIDriver object made with `spec`; `None` when the cluster tests are off.
pub async fn start_with_driver(
    test: &str,
    spec: k8s_openapi::api::storage::v1::CSIDriverSpec,
) -> Option<(
    ClusterNode,
    TestDriver,
    Api<k8s_openapi::api::storage::v1::CSIDriver>,
)> {
    let drivers = Arc::new(CsiDrivers::default());
    let service = Arc::new(kubelet_cm::csi::node_service::GrpcCsiNodeService::new(
        drivers.clone(),
    ));
    let node =
        crate::cluster_common::start_built(test, move |b| b.csi_node_service(service)).await?;
    let test_driver = TestDriver::start(&node, drivers).await;
    let api = create_csi_driver(&node, &test_driver.name.clone(), spec).await;
    Some((node, test_driver, api))
}

/// The pod with the claim mounted at `/data`.
pub fn with_claim(mut pod: Pod, claim: &str) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.volumes = Some(vec![Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.into(),
                read_only: None,
            }),
            ..Default::default()
        }]);
        spec.containers[0].volume_mounts = Some(vec![VolumeMount {
            name: "data".into(),
            mount_path: "/data".into(),
            ..Default::default()
        }]);
    }
    pod
}

/// The driver's calls so far (`--calls`), one JSON object each.
pub fn calls(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits (up to `limit`) for a `FailedMount` event of the pod whose message has `needle`.
pub async fn failed_mount(
    node: &ClusterNode,
    pod: &str,
    needle: &str,
    limit: Duration,
) -> k8s_openapi::api::core::v1::Event {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(node.admin.clone(), &node.et.namespace);
    eventually(limit, &format!("FailedMount of {pod}: {needle}"), || {
        let events = events.clone();
        async move {
            let list = events.list(&kube::api::ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("FailedMount")
                    && e.involved_object.name.as_deref() == Some(pod)
                    && e.message.as_deref().is_some_and(|m| m.contains(needle))
            })
        }
    })
    .await
}

pub fn has_call(calls: &[serde_json::Value], method: &str, volume: &str) -> bool {
    calls
        .iter()
        .any(|c| c["method"] == method && c["volume"] == volume)
}

/// The test driver `<namespace>.csi.test`, registered on the node (its CSINode lists it).
pub struct TestDriver {
    pub name: String,
    /// `--calls`.
    pub calls_file: PathBuf,
    /// `--fail-publish-file`.
    pub fail_file: PathBuf,
    /// `--data-dir`: the volumes' contents.
    pub data_dir: PathBuf,
    process: tokio::process::Child,
    stop: CancellationToken,
    manager: PluginManager,
}

impl TestDriver {
    /// Starts a plugin manager with the CSI handler on the node's `plugins_registry`
    /// (recording on the node's objects with the node's credentials, adding to `drivers`),
    /// then the driver process; waits until the node's CSINode lists it.
    pub async fn start(node: &ClusterNode, drivers: Arc<CsiDrivers>) -> TestDriver {
        let name = format!("{}.csi.test", node.et.namespace);
        let root = node.et.root_dir();
        let work = node.et.dir.path().to_path_buf();
        let kubeconfig = node.cp.node_kubeconfig(&node.node_name).await.unwrap();
        let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
            .await
            .unwrap();
        let handler = Arc::new(CsiRegistrationHandler::new(
            drivers,
            Arc::new(ApiCsiNodeObjects::new(clients.api, node.node_name.clone())),
        ));
        let registry = root.join("plugins_registry");
        std::fs::create_dir_all(&registry).unwrap();
        let stop = CancellationToken::new();
        let manager = PluginManager::new(
            registry.clone(),
            BTreeMap::from([(CSI_PLUGIN.to_string(), handler as Arc<dyn PluginHandler>)]),
        );
        manager.start(stop.clone()).await.unwrap();
        let driver = TestDriver {
            calls_file: work.join("calls.jsonl"),
            fail_file: work.join("fail-publish"),
            data_dir: work.join("csi-data"),
            process: tokio::process::Command::new(env!("CARGO_BIN_EXE_kubelet-rs-csi-test-driver"))
                .arg("--name")
                .arg(&name)
                .arg("--endpoint")
                .arg(root.join("plugins").join(&name).join("csi.sock"))
                .arg("--registration-dir")
                .arg(&registry)
                .arg("--node-id")
                .arg(&node.node_name)
                .arg("--data-dir")
                .arg(work.join("csi-data"))
                .arg("--calls")
                .arg(work.join("calls.jsonl"))
                .arg("--fail-publish-file")
                .arg(work.join("fail-publish"))
                .kill_on_drop(true)
                .spawn()
                .unwrap(),
            name,
            stop,
            manager,
        };
        let csinodes: Api<CSINode> = Api::all(node.admin.clone());
        eventually(Duration::from_secs(60), "driver on CSINode", || {
            let (csinodes, node, driver) = (
                csinodes.clone(),
                node.node_name.clone(),
                driver.name.clone(),
            );
            async move {
                let c = csinodes.get(&node).await.ok()?;
                c.spec
                    .drivers
                    .iter()
                    .any(|d| d.name == driver)
                    .then_some(())
            }
        })
        .await;
        driver
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<serde_json::Value> {
        calls(&self.calls_file)
    }

    /// Stops the driver and the plugin manager; removes the node's CSINode.
    pub async fn finish(mut self, node: &ClusterNode) {
        let _ = self.process.kill().await;
        self.stop.cancel();
        self.manager.stopped().await;
        let csinodes: Api<CSINode> = Api::all(node.admin.clone());
        let _ = csinodes
            .delete(&node.node_name, &DeleteParams::default())
            .await;
    }
}
