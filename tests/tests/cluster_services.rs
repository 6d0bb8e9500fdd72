//! Services for the Docker-link environment variables are read fresh: a service created
//! after an earlier read of its namespace is in the next read (the Go kubelet reads services
//! from an informer). With a TTL cache the e2e spec "Pods should contain environment
//! variables for services" failed: its client pod got the namespace's services as they were
//! when the spec's server pod started, before the service existed.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::objects::ObjectStore;
use kubelet_sources::objects::{ApiObjectStore, DEFAULT_TTL};
use kubelet_tests::cluster::ControlPlane;

#[tokio::test]
async fn a_service_created_after_a_read_is_in_the_next_read() {
    let Some(cp) = ControlPlane::ensure_or_skip("services")
        .await
        .expect("control plane under CI")
    else {
        return;
    };
    let admin = cp.admin_client().await.expect("admin client");
    let ns = format!("svc-env-{}", std::process::id());
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    // Read as a node does (the Node authorizer lets nodes list services).
    let node = cp
        .node_client("cluster-services-node")
        .await
        .expect("node client");
    let store = ApiObjectStore::new(node, DEFAULT_TTL);
    let names = |v: Vec<Service>| -> Vec<String> {
        v.into_iter()
            .filter_map(|s| s.metadata.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(store.services(&ns).await.expect("list")),
        Vec::<String>::new()
    );
    let svc = Service {
        metadata: ObjectMeta {
            name: Some("fooservice".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 8765,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<Service>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &svc)
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
