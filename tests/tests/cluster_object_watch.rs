//! Config maps and secrets under the `Watch` strategy (Go's default): the node watches each
//! object its pods reference and reads it from the watch — a change or a deletion is seen
//! within the watch's latency, and reads make no GET requests (counted in the apiserver's
//! audit log under the node's own identity); a reference a pod drops releases its watch.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, Namespace, Pod, PodSpec, Secret,
    SecretVolumeSource, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::objects::ObjectStore;
use kubelet_sources::objects::{ApiObjectStore, ChangeDetection};
use kubelet_tests::cluster::ControlPlane;

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn secret(value: &str) -> Secret {
    Secret {
        metadata: meta("app-secret"),
        data: Some(BTreeMap::from([(
            "k".to_string(),
            ByteString(value.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

fn secret_value(s: &Secret) -> String {
    let data = s.data.as_ref().and_then(|d| d.get("k")).expect("key k");
    String::from_utf8(data.0.clone()).expect("utf-8")
}

/// Polls `f` every 100 ms until it is true; panics after `limit`.
async fn until<F: std::future::Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut f: impl FnMut() -> F,
) {
    let start = kubelet_core::clock::monotonic_now();
    while !f().await {
        assert!(
            kubelet_core::clock::elapsed(start) < limit,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET requests of `user` on `resource` in `namespace`, from the audit log (written from
/// the first request of a node user on).
fn gets(cp: &ControlPlane, user: &str, resource: &str, namespace: &str) -> usize {
    let text = match std::fs::read_to_string(cp.audit_log_path()) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("audit log: {e}"),
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["user"]["username"] == user
                && e["verb"] == "get"
                && e["objectRef"]["resource"] == resource
                && e["objectRef"]["namespace"] == namespace
        })
        .count()
}

#[tokio::test]
async fn watched_objects_follow_changes_without_gets() {
    let Some(cp) = ControlPlane::ensure_or_skip("object watch")
        .await
        .expect("control plane under CI")
    else {
        return;
    };
    let admin = cp.admin_client().await.expect("admin client");
    let tag = std::process::id();
    let ns = format!("obj-watch-{tag}");
    let node_name = format!("obj-watch-node-{tag}");
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta(&ns),
                ..Default::default()
            },
        )
        .await
        .expect("create namespace");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    secrets
        .create(&PostParams::default(), &secret("v1"))
        .await
        .expect("create secret");
    config_maps
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: meta("app-config"),
                data: Some(BTreeMap::from([("k".to_string(), "c1".to_string())])),
                ..Default::default()
            },
        )
        .await
        .expect("create config map");
    // A pod bound to the node that references both: the Node authorizer lets the node read
    // and watch exactly these.
    let pod = Pod {
        metadata: meta("user"),
        spec: Some(PodSpec {
            node_name: Some(node_name.clone()),
            // No token volume: the namespace's service account may not have one yet.
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "s".into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some("app-secret".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "c".into(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: "app-config".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = Api::<Pod>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create pod");

    let node = cp.node_client(&node_name).await.expect("node client");
    let store = ApiObjectStore::with_strategy(node, ChangeDetection::Watch);
    store.register_pod(&pod);
    assert_eq!(store.watched_objects(), 2);
    let user = format!("system:node:{node_name}");
    // Reads before the watch has listed go to the API server; wait until they stop.
    until(
        Duration::from_secs(20),
        "the watch answers reads",
        || async {
            let before = gets(&cp, &user, "secrets", &ns);
            let s = store.secret(&ns, "app-secret").await.expect("read secret");
            secret_value(&s) == "v1" && gets(&cp, &user, "secrets", &ns) == before
        },
    )
    .await;
    let baseline = gets(&cp, &user, "secrets", &ns);
    for _ in 0..20 {
        let s = store.secret(&ns, "app-secret").await.expect("read secret");
        assert_eq!(secret_value(&s), "v1");
    }
    // A change arrives through the watch.
    secrets
        .replace("app-secret", &PostParams::default(), &{
            let mut s = secrets.get("app-secret").await.expect("get secret");
            s.data = secret("v2").data;
            s
        })
        .await
        .expect("update secret");
    until(Duration::from_secs(20), "the changed secret", || async {
        secret_value(&store.secret(&ns, "app-secret").await.expect("read")) == "v2"
    })
    .await;
    assert_eq!(
        gets(&cp, &user, "secrets", &ns),
        baseline,
        "reads after the watch synced made GET requests"
    );
    // So does a deletion: the store answers not found.
    until(Duration::from_secs(20), "the config map", || async {
        store.config_map(&ns, "app-config").await.is_ok()
    })
    .await;
    config_maps
        .delete("app-config", &DeleteParams::default())
        .await
        .expect("delete config map");
    until(
        Duration::from_secs(20),
        "the deleted config map",
        || async {
            matches!(store.config_map(&ns, "app-config").await, Err(e) if e.is_not_found())
        },
    )
    .await;
    // The pod updated to reference the secret alone: the config map's watch goes, the
    // secret's stays and still answers.
    let mut updated = pod.clone();
    if let Some(spec) = updated.spec.as_mut() {
        spec.volumes
            .as_mut()
            .expect("volumes")
            .retain(|v| v.secret.is_some());
    }
    store.register_pod(&updated);
    assert_eq!(store.watched_objects(), 1);
    assert_eq!(
        secret_value(&store.secret(&ns, "app-secret").await.expect("read")),
        "v2"
    );
    assert_eq!(gets(&cp, &user, "secrets", &ns), baseline);
    // The last pod gone, so are the watches.
    store.unregister_pod(pod.metadata.uid.as_deref().expect("uid"));
    assert_eq!(store.watched_objects(), 0);
    let _ = Api::<Namespace>::all(admin)
        .delete(&ns, &DeleteParams::default())
        .await;
}
