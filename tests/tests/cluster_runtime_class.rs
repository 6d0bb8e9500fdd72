//! RuntimeClass through the real API server: a `node.k8s.io/v1` RuntimeClass whose handler is
//! the node containerd's runtime (`runc`, scripts/node-env.sh) with a pod overhead; the API
//! server's RuntimeClass admission copies the overhead into the pod, the kubelet resolves the
//! class through the API and passes the handler to `RunPodSandbox` (the sandbox's CRI
//! `PodSandboxStatus.runtime_handler` says `runc`), the pod runs and its cgroup holds the
//! overhead. A pod whose class is gone when it reaches the node gets Go's
//! `FailedCreatePodSandBox` event (`runtimeclass.node.k8s.io "x" not found`) and never starts;
//! one naming a class that does not exist is refused by the API server's admission.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster_common::{eventually, phase, start};
use hyper_util::rt::TokioIo;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::PodSandboxStatusRequest;
use k8s_openapi::api::core::v1::{Event, Pod, ResourceRequirements};
use k8s_openapi::api::node::v1::{Overhead, RuntimeClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;

fn class(name: &str, handler: &str, overhead_memory: Option<&str>) -> RuntimeClass {
    RuntimeClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        handler: handler.into(),
        overhead: overhead_memory.map(|m| Overhead {
            pod_fixed: Some(BTreeMap::from([("memory".to_string(), Quantity(m.into()))])),
        }),
        ..Default::default()
    }
}

fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// The runtime handler containerd reports for a sandbox (CRI `PodSandboxStatus`).
async fn sandbox_runtime_handler(sandbox_id: &str) -> String {
    let endpoint = kubelet_tests::cri::endpoint();
    let socket = endpoint
        .strip_prefix("unix://")
        .unwrap_or(&endpoint)
        .to_string();
    let channel = tonic::transport::Endpoint::from_static("http://cri.local")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
        .expect("CRI connects");
    let status = RuntimeServiceClient::new(channel)
        .pod_sandbox_status(PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.into(),
            verbose: false,
        })
        .await
        .expect("PodSandboxStatus")
        .into_inner();
    status.status.expect("sandbox status").runtime_handler
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_class_handler_and_overhead_through_the_api_server() {
    let Some(node) = start("cluster-rc", vec![]).await else {
        return;
    };
    let ns = node.et.namespace.clone();
    let classes: Api<RuntimeClass> = Api::all(node.admin.clone());
    let runc = format!("rc-runc-{ns}");
    let gone = format!("rc-gone-{ns}");
    for c in [
        class(&runc, "runc", Some("32Mi")),
        class(&gone, "runc", None),
    ] {
        classes.create(&PostParams::default(), &c).await.unwrap();
    }
    let pods = node.pods();

    // A Guaranteed pod of the runc class: admission adds the class's overhead.
    let mut classy = node.pod("classy", "exec sleep 3600", "Never");
    {
        let spec = classy.spec.as_mut().unwrap();
        spec.runtime_class_name = Some(runc.clone());
        spec.containers[0].resources = Some(ResourceRequirements {
            limits: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
            requests: Some(quantities(&[("cpu", "100m"), ("memory", "64Mi")])),
            ..Default::default()
        });
    }
    let created = pods.create(&PostParams::default(), &classy).await.unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().overhead,
        Some(quantities(&[("memory", "32Mi")])),
        "the API server's RuntimeClass admission sets the overhead"
    );
    let uid = created.metadata.uid.clone().unwrap();

    // A pod naming a class that does not exist: the API server's admission refuses it.
    let mut nameless = node.pod("nameless", "exec sleep 3600", "Never");
    nameless.spec.as_mut().unwrap().runtime_class_name = Some(format!("rc-none-{ns}"));
    let refused = pods
        .create(&PostParams::default(), &nameless)
        .await
        .expect_err("admission refuses an unknown RuntimeClass");
    assert!(
        refused.to_string().contains(&format!(
            "pod rejected: RuntimeClass \"rc-none-{ns}\" not found"
        )),
        "{refused}"
    );

    // A pod of a class deleted before the pod reaches the node: created unscheduled (no
    // scheduler takes it), the class deleted, then bound to the node.
    let mut orphan = node.pod("orphan", "exec sleep 3600", "Never");
    {
        let spec = orphan.spec.as_mut().unwrap();
        spec.runtime_class_name = Some(gone.clone());
        spec.node_name = None;
        spec.scheduler_name = Some("kubelet-rs-no-scheduler".into());
    }
    let orphan = pods.create(&PostParams::default(), &orphan).await.unwrap();
    let orphan_uid = orphan.metadata.uid.clone().unwrap();
    classes
        .delete(&gone, &DeleteParams::default())
        .await
        .unwrap();
    let binding = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "orphan", "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node.node_name},
    });
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "orphan",
        &PostParams::default(),
        &binding,
    )
    .await
    .expect("bind the orphan pod to the node");

    // The runc pod runs with the class's handler and the overhead in its cgroup.
    eventually(Duration::from_secs(90), "classy Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("classy").await.ok()?;
            (phase(&p) == "Running").then_some(())
        }
    })
    .await;
    let sandboxes = node.et.sandboxes(&uid).await;
    assert_eq!(sandboxes.len(), 1, "{sandboxes:?}");
    assert_eq!(sandbox_runtime_handler(&sandboxes[0].id).await, "runc");
    let dirs = node.et.pod_cgroup_dirs(&uid);
    let limit = dirs
        .iter()
        .find_map(|d| {
            std::fs::read_to_string(d.join("memory.limit_in_bytes"))
                .or_else(|_| std::fs::read_to_string(d.join("memory.max")))
                .ok()
        })
        .expect("pod memory cgroup");
    assert_eq!(
        limit.trim(),
        (96u64 << 20).to_string(),
        "64Mi + 32Mi overhead"
    );

    // The orphan: Go's event, Pending, no sandbox.
    let events: Api<Event> = Api::namespaced(node.admin.clone(), &ns);
    let want =
        format!("Failed to create pod sandbox: runtimeclass.node.k8s.io \"{gone}\" not found");
    let message = eventually(Duration::from_secs(60), "FailedCreatePodSandBox", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some("orphan"))
                .filter(|e| e.reason.as_deref() == Some("FailedCreatePodSandBox"))
                .find_map(|e| e.message)
        }
    })
    .await;
    assert_eq!(message, want);
    let p: Pod = pods.get("orphan").await.unwrap();
    assert_eq!(phase(&p), "Pending");
    assert!(node.et.sandboxes(&orphan_uid).await.is_empty());

    let _ = classes.delete(&runc, &DeleteParams::default()).await;
    node.finish().await;
}
