//! CSI volumes end to end against the real control plane (v1.20.2) and containerd, with the
//! project's CSI test driver (`kubelet-rs-csi-test-driver`, a separate process: real gRPC on
//! real sockets, real bind mounts) registered through the kubelet's plugin manager:
//!
//! - the driver registers: `CSINode` lists it;
//! - a pod's claim, bound by the PV controller to a CSI PersistentVolume of the driver
//!   (its CSIDriver object: `attachRequired: false`, `podInfoOnMount: true`), is staged at
//!   Go's `globalmount` and published at the pod's `kubernetes.io~csi/<pv>/mount` with the
//!   volume's attributes and the pod's; the pod's write lands in the driver's volume;
//! - while the driver fails `NodePublishVolume`, a second pod stays `ContainerCreating` with
//!   a `FailedMount` event naming the failure and the first keeps running; once the driver
//!   recovers the second pod starts (no kubelet restart);
//! - an inline (ephemeral) volume of the driver in the same pod is published only (no
//!   staging), with `csi.storage.k8s.io/ephemeral: "true"`;
//! - the pods deleted: each volume is unpublished, then unstaged, and Go's directories go.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod cluster_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cluster_common::{eventually, phase, start_built};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Event, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Pod,
    Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec, CSINode};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use kubelet_cm::csi::node_service::GrpcCsiNodeService;
use kubelet_cm::csi::registration::CsiRegistrationHandler;
use kubelet_cm::csi::CsiDrivers;
use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, CSI_PLUGIN};
use kubelet_sources::apiserver::{ApiClients, ApiCsiNodeObjects, ClientConfig};
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(120);

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    }
}

fn csi_pv(name: &str, driver: &str, class: &str) -> PersistentVolume {
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

/// A claim of the volume `pv` (named: the two volumes match either claim otherwise).
fn claim(name: &str, ns: &str, class: &str, pv: &str) -> PersistentVolumeClaim {
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

fn with_claim(mut pod: Pod, claim: &str) -> Pod {
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
fn calls(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn has_call(calls: &[serde_json::Value], method: &str, volume: &str) -> bool {
    calls
        .iter()
        .any(|c| c["method"] == method && c["volume"] == volume)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_volumes_are_staged_published_retried_and_torn_down() {
    let drivers = Arc::new(CsiDrivers::default());
    let service = Arc::new(GrpcCsiNodeService::new(drivers.clone()));
    let Some(node) = start_built("cluster-csi-vol", move |b| b.csi_node_service(service)).await
    else {
        return;
    };
    let ns = node.et.namespace.clone();
    let driver = format!("{ns}.csi.test");
    let root = node.et.root_dir();
    let work = node.et.dir.path().to_path_buf();
    let (calls_file, fail_file, data_dir) = (
        work.join("calls.jsonl"),
        work.join("fail-publish"),
        work.join("csi-data"),
    );

    // The plugin manager with the CSI handler, recording on the node's objects.
    let kubeconfig = node.cp.node_kubeconfig(&node.node_name).await.unwrap();
    let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
        .await
        .unwrap();
    let handler = Arc::new(CsiRegistrationHandler::new(
        drivers.clone(),
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
    let mut driver_process =
        tokio::process::Command::new(env!("CARGO_BIN_EXE_kubelet-rs-csi-test-driver"))
            .arg("--name")
            .arg(&driver)
            .arg("--endpoint")
            .arg(root.join("plugins").join(&driver).join("csi.sock"))
            .arg("--registration-dir")
            .arg(&registry)
            .arg("--node-id")
            .arg(&node.node_name)
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--calls")
            .arg(&calls_file)
            .arg("--fail-publish-file")
            .arg(&fail_file)
            .kill_on_drop(true)
            .spawn()
            .unwrap();

    let csinodes: Api<CSINode> = Api::all(node.admin.clone());
    eventually(Duration::from_secs(60), "driver on CSINode", || {
        let (csinodes, name, driver) = (csinodes.clone(), node.node_name.clone(), driver.clone());
        async move {
            let c = csinodes.get(&name).await.ok()?;
            c.spec
                .drivers
                .iter()
                .any(|d| d.name == driver)
                .then_some(())
        }
    })
    .await;

    let pp = PostParams::default();
    let csidrivers: Api<CSIDriver> = Api::all(node.admin.clone());
    csidrivers
        .create(
            &pp,
            &CSIDriver {
                metadata: meta(&driver, None),
                spec: CSIDriverSpec {
                    attach_required: Some(false),
                    pod_info_on_mount: Some(true),
                    volume_lifecycle_modes: Some(vec!["Persistent".into(), "Ephemeral".into()]),
                    ..Default::default()
                },
            },
        )
        .await
        .unwrap();
    let class = format!("csi-{ns}");
    let pvs: Api<PersistentVolume> = Api::all(node.admin.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(node.admin.clone(), &ns);
    let (pv1, pv2) = (format!("{ns}-a"), format!("{ns}-b"));
    for (pv, c) in [(&pv1, "claim-a"), (&pv2, "claim-b")] {
        pvs.create(&pp, &csi_pv(pv, &driver, &class)).await.unwrap();
        claims
            .create(&pp, &claim(c, &ns, &class, pv))
            .await
            .unwrap();
    }
    let pods = node.pods();
    let mut p1 = with_claim(
        node.pod(
            "one",
            "echo hello > /data/hello; echo inline > /scratch/note; sleep 3600",
            "Always",
        ),
        "claim-a",
    );
    // And an inline (ephemeral) volume of the driver.
    if let Some(spec) = p1.spec.as_mut() {
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: "scratch".into(),
            csi: Some(k8s_openapi::api::core::v1::CSIVolumeSource {
                driver: driver.clone(),
                volume_attributes: Some(BTreeMap::from([("size".into(), "10Mi".into())])),
                ..Default::default()
            }),
            ..Default::default()
        });
        spec.containers[0]
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: "scratch".into(),
                mount_path: "/scratch".into(),
                ..Default::default()
            });
    }
    pods.create(&pp, &p1).await.unwrap();
    let running = |name: &'static str| {
        let pods = pods.clone();
        async move {
            eventually(LONG, name, || {
                let pods = pods.clone();
                async move {
                    let p = pods.get(name).await.ok()?;
                    (phase(&p) == "Running").then_some(p)
                }
            })
            .await
        }
    };
    let one = running("one").await;
    let uid1 = one.metadata.uid.clone().unwrap();
    let handle1 = format!("handle-{pv1}");
    eventually(
        Duration::from_secs(30),
        "the pod's write in the driver's volume",
        || {
            let f = data_dir.join(&handle1).join("hello");
            async move { (std::fs::read_to_string(f).ok()? == "hello\n").then_some(()) }
        },
    )
    .await;
    let seen = calls(&calls_file);
    let publish = seen
        .iter()
        .find(|c| c["method"] == "NodePublishVolume" && c["volume"] == handle1.as_str())
        .expect("NodePublishVolume")
        .clone();
    let staging = root.join(format!("plugins/kubernetes.io/csi/pv/{pv1}/globalmount"));
    let target = root.join(format!("pods/{uid1}/volumes/kubernetes.io~csi/{pv1}/mount"));
    assert_eq!(publish["staging"], staging.display().to_string());
    assert_eq!(publish["target"], target.display().to_string());
    assert_eq!(publish["readonly"], false);
    assert_eq!(publish["accessMode"], 1, "SINGLE_NODE_WRITER");
    assert_eq!(publish["context"]["color"], "blue");
    assert_eq!(publish["context"]["csi.storage.k8s.io/pod.name"], "one");
    assert_eq!(
        publish["context"]["csi.storage.k8s.io/pod.namespace"],
        ns.as_str()
    );
    assert_eq!(
        publish["context"]["csi.storage.k8s.io/pod.uid"],
        uid1.as_str()
    );
    assert_eq!(publish["context"]["csi.storage.k8s.io/ephemeral"], "false");
    assert!(has_call(&seen, "NodeStageVolume", &handle1));
    let inline = seen
        .iter()
        .find(|c| {
            c["method"] == "NodePublishVolume"
                && c["context"]["csi.storage.k8s.io/ephemeral"] == "true"
        })
        .expect("the inline volume published")
        .clone();
    assert_eq!(inline["staging"], "");
    assert_eq!(inline["context"]["size"], "10Mi");
    assert_eq!(
        inline["target"],
        root.join(format!(
            "pods/{uid1}/volumes/kubernetes.io~csi/scratch/mount"
        ))
        .display()
        .to_string()
    );
    let inline_handle = inline["volume"].as_str().unwrap().to_string();
    assert!(inline_handle.starts_with("csi-"), "{inline_handle}");
    eventually(
        Duration::from_secs(30),
        "the pod's write in the inline volume",
        || {
            let f = data_dir.join(&inline_handle).join("note");
            async move { (std::fs::read_to_string(f).ok()? == "inline\n").then_some(()) }
        },
    )
    .await;

    // A failing driver: the second pod waits with the reason, the first keeps running.
    std::fs::write(&fail_file, "").unwrap();
    let p2 = with_claim(node.pod("two", "sleep 3600", "Always"), "claim-b");
    pods.create(&pp, &p2).await.unwrap();
    let events: Api<Event> = Api::namespaced(node.admin.clone(), &ns);
    // (An earlier FailedMount may say the claim is not bound yet: the PV controller binds it
    // while the pod is already on the node, and the kubelet retries.)
    let failed = eventually(
        LONG,
        "FailedMount event for two naming the driver's failure",
        || {
            let events = events.clone();
            async move {
                let list = events.list(&ListParams::default()).await.ok()?;
                list.items.into_iter().find(|e| {
                    e.reason.as_deref() == Some("FailedMount")
                        && e.involved_object.name.as_deref() == Some("two")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.contains("injected NodePublishVolume failure"))
                })
            }
        },
    )
    .await;
    let message = failed.message.unwrap_or_default();
    assert!(
        message.contains("MountVolume.SetUp failed for volume")
            && message.contains("injected NodePublishVolume failure"),
        "{message}"
    );
    let two = pods.get("two").await.unwrap();
    let waiting = two
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c[0].state.as_ref()?.waiting.as_ref()?.reason.clone());
    assert_eq!(waiting.as_deref(), Some("ContainerCreating"));
    assert_eq!(phase(&pods.get("one").await.unwrap()), "Running");
    std::fs::remove_file(&fail_file).unwrap();
    let two = running("two").await;
    let uid2 = two.metadata.uid.clone().unwrap();

    // Deleted: unpublished, unstaged, Go's directories gone.
    for name in ["one", "two"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let handle2 = format!("handle-{pv2}");
    eventually(LONG, "both volumes unpublished and unstaged", || {
        let (calls_file, h1, h2) = (calls_file.clone(), handle1.clone(), handle2.clone());
        async move {
            let c = calls(&calls_file);
            let persistent = [&h1, &h2].iter().all(|h| {
                has_call(&c, "NodeUnpublishVolume", h) && has_call(&c, "NodeUnstageVolume", h)
            });
            let inline = c.iter().any(|x| {
                x["method"] == "NodeUnpublishVolume"
                    && x["volume"].as_str().is_some_and(|v| v.starts_with("csi-"))
            });
            (persistent && inline).then_some(())
        }
    })
    .await;
    eventually(Duration::from_secs(30), "directories removed", || {
        let dirs = [
            root.join(format!("plugins/kubernetes.io/csi/pv/{pv1}")),
            root.join(format!("plugins/kubernetes.io/csi/pv/{pv2}")),
            root.join(format!("pods/{uid1}")),
            root.join(format!("pods/{uid2}")),
        ];
        async move { dirs.iter().all(|d| !d.exists()).then_some(()) }
    })
    .await;
    assert!(
        data_dir.join(&handle1).join("hello").exists(),
        "the data stays with the driver"
    );

    let dp = DeleteParams::default();
    for c in ["claim-a", "claim-b"] {
        let _ = claims.delete(c, &dp).await;
    }
    for pv in [&pv1, &pv2] {
        let _ = pvs.delete(pv, &dp).await;
    }
    let _ = csidrivers.delete(&driver, &dp).await;
    let _ = driver_process.kill().await;
    stop.cancel();
    manager.stopped().await;
    let _ = csinodes.delete(&node.node_name, &dp).await;
    node.finish().await;
}
