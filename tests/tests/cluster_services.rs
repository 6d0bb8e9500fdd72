//! Services for the Docker-link environment variables are read fresh: a service created
//! after an earlier read of its namespace is in the next read (the Go kubelet reads services
//! from an informer). With a TTL cache the e2e spec "Pods should contain environment
//! variables for services" failed: its client pod got the namespace's services as they were
//! when the spec's server pod started, before the service existed.
//!
//! With the service informer (the kubelet binary's store), reads come from a watch of every
//! service: a service created or deleted is in a read within the watch's latency, with no
//! request to the API server per read.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::objects::ObjectStore;
use kubelet_sources::objects::{ApiObjectStore, DEFAULT_TTL};
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::engine::eventually;

fn names(v: Vec<Service>) -> Vec<String> {
    v.into_iter().filter_map(|s| s.metadata.name).collect()
}

fn service(name: &str, port: i32) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn namespace(admin: &kube::Client, ns: &str) {
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
}

/// The control plane's admin client, a new namespace `PREFIX-PID` and a client with node
/// `node`'s identity (the Node authorizer lets nodes list and watch services); `None` when
/// the control plane is skipped.
async fn cluster(prefix: &str, node: &str) -> Option<(kube::Client, String, kube::Client)> {
    let cp = ControlPlane::ensure_or_skip("services")
        .await
        .expect("control plane under CI")?;
    let admin = cp.admin_client().await.expect("admin client");
    let ns = format!("{prefix}-{}", std::process::id());
    namespace(&admin, &ns).await;
    let node = cp.node_client(node).await.expect("node client");
    Some((admin, ns, node))
}

#[tokio::test]
async fn a_service_created_after_a_read_is_in_the_next_read() {
    // Read as a node does.
    let Some((admin, ns, node)) = cluster("svc-env", "cluster-services-node").await else {
        return;
    };
    let store = ApiObjectStore::new(node, DEFAULT_TTL);
    assert_eq!(
        names(store.services(&ns).await.expect("list")),
        Vec::<String>::new()
    );
    Api::<Service>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &service("fooservice", 8765))
        .await
        .expect("create service");
    // Well within the TTL of the first read.
    assert_eq!(
        names(store.services(&ns).await.expect("list")),
        vec!["fooservice".to_string()]
    );
    let _ = Api::<Namespace>::all(admin)
        .delete(&ns, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn the_service_informer_sees_services_come_and_go() {
    let Some((admin, ns, node)) = cluster("svc-informer", "cluster-services-informer-node").await
    else {
        return;
    };
    let store = ApiObjectStore::new(node, DEFAULT_TTL).with_service_informer();
    eventually(
        Duration::from_secs(30),
        "the informer lists services",
        || std::future::ready(store.services_from_informer().then_some(())),
    )
    .await;
    // The master service, as the API server has it.
    let kubernetes = store.services("default").await.expect("read");
    let master = kubernetes
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("kubernetes"))
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.cluster_ip.clone());
    let want = Api::<Service>::namespaced(admin.clone(), "default")
        .get("kubernetes")
        .await
        .expect("get the kubernetes service")
        .spec
        .and_then(|s| s.cluster_ip);
    assert_eq!(master, want);
    assert_eq!(
        names(store.services(&ns).await.expect("read")),
        Vec::<String>::new()
    );
    let services = Api::<Service>::namespaced(admin.clone(), &ns);
    services
        .create(&PostParams::default(), &service("barservice", 8766))
        .await
        .expect("create service");
    eventually(
        Duration::from_secs(10),
        "the new service in a read",
        || async {
            let read = names(store.services(&ns).await.expect("read"));
            (read == ["barservice"]).then_some(())
        },
    )
    .await;
    services
        .delete("barservice", &DeleteParams::default())
        .await
        .expect("delete service");
    eventually(
        Duration::from_secs(10),
        "the deleted service gone from a read",
        || async {
            names(store.services(&ns).await.expect("read"))
                .is_empty()
                .then_some(())
        },
    )
    .await;
    // Every read above came from the watch, which never ended.
    assert!(store.services_from_informer());
    let _ = Api::<Namespace>::all(admin)
        .delete(&ns, &DeleteParams::default())
        .await;
}
