//! The kubelet as a cluster member against the real v1.20 control plane: registration,
//! node status, the node lease, and an adopted existing Node.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod cluster_common;

use std::time::Duration;

use cluster_common::{eventually, node_ready, start};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_ready_node_with_capacity_and_renews_its_lease() {
    let Some(node) = start("cluster-register", vec![]).await else {
        return;
    };
    let name = node.node_name.clone();
    let nodes = node.nodes();
    let n = eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let n = nodes.get_opt(&name).await.ok()??;
            (node_ready(&n).as_deref() == Some("True")).then_some(n)
        }
    })
    .await;
    let labels = n.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], name);
    assert_eq!(labels["kubernetes.io/os"], "linux");
    let st = n.status.clone().unwrap();
    let cap = st.capacity.unwrap();
    assert_eq!(cap["pods"].0, "110");
    assert!(cap.contains_key("cpu") && cap.contains_key("memory"));
    assert!(st.allocatable.unwrap().contains_key("memory"));
    let info = st.node_info.unwrap();
    assert!(
        info.container_runtime_version.starts_with("containerd://"),
        "{info:?}"
    );
    assert!(!info.boot_id.is_empty() && !info.kernel_version.is_empty());
    assert_eq!(
        st.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port,
        10250
    );
    let addrs = st.addresses.unwrap();
    assert!(addrs
        .iter()
        .any(|a| a.type_ == "InternalIP" && a.address == "127.0.0.1"));
    let conds = st.conditions.unwrap();
    for (t, s) in [
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
    ] {
        let c = conds
            .iter()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("{t} missing"));
        assert_eq!(c.status, s, "{t}");
    }
    assert!(n.metadata.uid.is_some());

    // The lease: held by the node, 40s, owned by the Node, renewed (about every 10s).
    let leases: Api<Lease> = Api::namespaced(node.admin.clone(), "kube-node-lease");
    let first = eventually(Duration::from_secs(30), "node lease", || {
        let leases = leases.clone();
        let name = name.clone();
        async move { leases.get_opt(&name).await.ok()? }
    })
    .await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let owner = &first.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Node", name.as_str())
    );
    assert_eq!(Some(owner.uid.clone()), n.metadata.uid);
    let t0 = spec.renew_time.unwrap();
    eventually(Duration::from_secs(30), "lease renewal", || {
        let leases = leases.clone();
        let name = name.clone();
        let t0 = t0.clone();
        async move {
            let l = leases.get_opt(&name).await.ok()??;
            (l.spec?.renew_time? > t0).then_some(())
        }
    })
    .await;

    // Node status is patched only on change: with nothing changing, the node object keeps
    // its resourceVersion across two status periods (the lease carries the heartbeat).
    let rv = |n: &k8s_openapi::api::core::v1::Node| n.metadata.resource_version.clone();
    let settled = eventually(Duration::from_secs(60), "node status settles", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let a = nodes.get(&name).await.ok()?;
            tokio::time::sleep(Duration::from_secs(12)).await;
            let b = nodes.get(&name).await.ok()?;
            (rv(&a) == rv(&b)).then_some(b)
        }
    })
    .await;
    assert_eq!(node_ready(&settled).as_deref(), Some("True"));

    // Node events in "default": Starting, RegisteredNode, NodeReady.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(node.admin.clone(), "default");
    let reasons = eventually(Duration::from_secs(30), "node events", || {
        let events = events.clone();
        let name = name.clone();
        async move {
            let list = events.list(&Default::default()).await.ok()?;
            let reasons: Vec<String> = list
                .items
                .iter()
                .filter(|e| {
                    e.involved_object.kind.as_deref() == Some("Node")
                        && e.involved_object.name.as_deref() == Some(name.as_str())
                })
                .filter_map(|e| e.reason.clone())
                .collect();
            ["Starting", "RegisteredNode", "NodeReady"]
                .iter()
                .all(|r| reasons.iter().any(|x| x == r))
                .then_some(reasons)
        }
    })
    .await;
    assert!(!reasons.is_empty());
    node.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopts_an_existing_node_and_keeps_foreign_conditions() {
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::api::{Patch, PatchParams};

    let Some(mut node) = start("cluster-adopt", vec![]).await else {
        return;
    };
    let name = node.node_name.clone();
    let nodes = node.nodes();
    eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            (node_ready(&nodes.get_opt(&name).await.ok()??).as_deref() == Some("True"))
                .then_some(())
        }
    })
    .await;
    node.stop_kubelet().await;
    // Someone else owns a condition and a label.
    let patch = Node {
        metadata: ObjectMeta::default(),
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                reason: Some("RouteCreated".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("foreign condition");
    let mut labels_patch = Node::default();
    labels_patch.metadata.labels = Some(
        [("example.com/team".to_string(), "a".to_string())]
            .into_iter()
            .collect(),
    );
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&labels_patch))
        .await
        .unwrap();
    // A restarted kubelet adopts the Node instead of failing.
    let (handle, shutdown, join, tasks) =
        cluster_common::launch(&node.et, &node.cp, &name, vec![], |_| {}).await;
    let _ = handle;
    eventually(
        Duration::from_secs(60),
        "status patched by the new kubelet",
        || {
            let nodes = nodes.clone();
            let name = name.clone();
            async move {
                let n = nodes.get(&name).await.ok()?;
                let conds = n.status?.conditions?;
                let ready = conds.iter().find(|c| c.type_ == "Ready")?;
                let foreign = conds.iter().find(|c| c.type_ == "NetworkUnavailable")?;
                let labels = n.metadata.labels?;
                (ready.status == "True"
                    && foreign.reason.as_deref() == Some("RouteCreated")
                    && labels.get("example.com/team").map(String::as_str) == Some("a")
                    && labels.contains_key("kubernetes.io/hostname"))
                .then_some(())
            }
        },
    )
    .await;
    shutdown.cancel();
    join.await.unwrap().unwrap();
    tasks.wait().await;
    node.finish().await;
}
