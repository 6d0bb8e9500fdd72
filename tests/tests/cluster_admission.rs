//! Admission of API pods against the real control plane and containerd, as the conformance
//! specs exercise it: node selectors match the Node object's current labels (a label added
//! with the API after the kubelet started counts), a host port an admitted pod holds is
//! refused (`NodePorts`), and an extended resource patched into the node's capacity reaches
//! allocatable and is counted by admission (`OutOf<name>`), and goes away when removed.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, node_ready, phase, start, ClusterNode};
use k8s_openapi::api::core::v1::{ContainerPort, Node, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;

const FAKE: &str = "example.com/fakecpu";
/// A host port nothing else on the machine uses.
const HOST_PORT: i32 = 28417;

async fn create(node: &ClusterNode, p: &Pod) {
    node.pods()
        .create(&PostParams::default(), p)
        .await
        .expect("create pod");
}

async fn wait_phase(node: &ClusterNode, name: &str, want: &str) -> Pod {
    let pods = node.pods();
    eventually(Duration::from_secs(90), &format!("{name} {want}"), || {
        let pods = pods.clone();
        let name = name.to_string();
        let want = want.to_string();
        async move {
            let p = pods.get(&name).await.ok()?;
            (phase(&p) == want).then_some(p)
        }
    })
    .await
}

fn rejection(p: &Pod) -> (String, String) {
    let st = p.status.clone().unwrap_or_default();
    (
        st.reason.unwrap_or_default(),
        st.message.unwrap_or_default(),
    )
}

fn sleeper(node: &ClusterNode, name: &str) -> Pod {
    node.pod(
        name,
        "trap 'exit 0' TERM; while true; do sleep 1; done",
        "Always",
    )
}

fn allocatable(n: &Node, name: &str) -> Option<String> {
    n.status
        .as_ref()?
        .allocatable
        .as_ref()?
        .get(name)
        .map(|q| q.0.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_follows_node_labels_host_ports_and_extended_resources() {
    let Some(node) = start("cluster-admission", vec![]).await else {
        return;
    };
    let nodes: Api<Node> = node.nodes();
    eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = node.node_name.clone();
        async move {
            let n = nodes.get(&name).await.ok()?;
            (node_ready(&n).as_deref() == Some("True")).then_some(())
        }
    })
    .await;

    // A label added to the Node object after registration.
    let label = format!("e2e-{}", node.et.namespace);
    let patch = serde_json::json!({"metadata": {"labels": {label.clone(): "yes"}}});
    nodes
        .patch(
            &node.node_name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("label the node");
    // The kubelet learns it through its node watch; give the event a moment (the scheduler
    // would have had to see it too before binding).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut labelled = sleeper(&node, "labelled");
    labelled.spec.as_mut().unwrap().node_selector =
        Some([(label.clone(), "yes".to_string())].into_iter().collect());
    create(&node, &labelled).await;
    wait_phase(&node, "labelled", "Running").await;
    let mut unlabelled = node.pod("unlabelled", "true", "Never");
    unlabelled.spec.as_mut().unwrap().node_selector =
        Some([(label.clone(), "no".to_string())].into_iter().collect());
    create(&node, &unlabelled).await;
    let p = wait_phase(&node, "unlabelled", "Failed").await;
    assert_eq!(
        rejection(&p),
        (
            "NodeAffinity".to_string(),
            "Pod was rejected: Predicate NodeAffinity failed".to_string()
        )
    );

    // Host ports: the second pod asking for the port the first holds is refused.
    let with_port = |name: &str| {
        let mut p = sleeper(&node, name);
        p.spec.as_mut().unwrap().containers[0].ports = Some(vec![ContainerPort {
            container_port: 8080,
            host_port: Some(HOST_PORT),
            ..Default::default()
        }]);
        p
    };
    create(&node, &with_port("holder")).await;
    wait_phase(&node, "holder", "Running").await;
    create(&node, &with_port("clash")).await;
    let p = wait_phase(&node, "clash", "Failed").await;
    assert_eq!(
        rejection(&p),
        (
            "NodePorts".to_string(),
            "Pod was rejected: Predicate NodePorts failed".to_string()
        )
    );

    // An extended resource patched into capacity reaches allocatable.
    let add = serde_json::json!({"status": {"capacity": {FAKE: "1k"}}});
    nodes
        .patch_status(
            &node.node_name,
            &PatchParams::default(),
            &Patch::Strategic(&add),
        )
        .await
        .expect("patch capacity");
    eventually(Duration::from_secs(60), "fakecpu allocatable", || {
        let nodes = nodes.clone();
        let name = node.node_name.clone();
        async move {
            let n = nodes.get(&name).await.ok()?;
            (allocatable(&n, FAKE).as_deref() == Some("1k")).then_some(())
        }
    })
    .await;
    // Admission counts it: 600 fits, another 600 does not.
    let asking = |name: &str| {
        let mut p = sleeper(&node, name);
        p.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
            limits: Some(
                [(FAKE.to_string(), Quantity("600".into()))]
                    .into_iter()
                    .collect(),
            ),
            requests: Some(
                [(FAKE.to_string(), Quantity("600".into()))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        });
        p
    };
    create(&node, &asking("fake-a")).await;
    wait_phase(&node, "fake-a", "Running").await;
    create(&node, &asking("fake-b")).await;
    let p = wait_phase(&node, "fake-b", "Failed").await;
    assert_eq!(
        rejection(&p),
        (
            format!("OutOf{FAKE}"),
            format!(
                "Pod was rejected: Node didn't have enough resource: {FAKE}, requested: 600, used: 600, capacity: 1000"
            )
        )
    );
    // Removed from capacity: gone from allocatable too.
    let remove = serde_json::json!({"status": {"capacity": {FAKE: null}}});
    nodes
        .patch_status(
            &node.node_name,
            &PatchParams::default(),
            &Patch::Strategic(&remove),
        )
        .await
        .expect("patch capacity");
    eventually(
        Duration::from_secs(60),
        "fakecpu gone from allocatable",
        || {
            let nodes = nodes.clone();
            let name = node.node_name.clone();
            async move {
                let n = nodes.get(&name).await.ok()?;
                allocatable(&n, FAKE).is_none().then_some(())
            }
        },
    )
    .await;
    node.finish().await;
}
