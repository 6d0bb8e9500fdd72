//! The real control plane (scripts/control-plane.sh, through `kubelet_tests::cluster`): the
//! admin sees the cluster, a node identity is held to what the Node authorizer and
//! NodeRestriction allow, and the controller-manager's service-account tokens pass a TokenReview.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, Pod, PodSpec, Secret, SecretVolumeSource, ServiceAccount, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kubelet_tests::cluster::ControlPlane;

const TIMEOUT: Duration = Duration::from_secs(60);

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

fn api_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Deletes an object if it exists (a previous run's leftovers).
async fn delete_if_exists<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if api_code(&e) == Some(404) => {}
        Err(e) => panic!("deleting {name}: {e}"),
    }
}

/// Creates a namespace (waiting out a previous run's deletion) and waits for its default service
/// account (the controller-manager makes it; pods need it).
async fn fresh_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let start = kubelet_core::clock::monotonic_now();
    loop {
        match namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: meta(name, None),
                    ..Namespace::default()
                },
            )
            .await
        {
            Ok(_) => break,
            // Exists or is still terminating from an earlier run: delete and wait it out.
            Err(e) if api_code(&e) == Some(409) => {
                delete_if_exists(&namespaces, name).await;
            }
            Err(e) => panic!("creating namespace {name}: {e}"),
        }
        assert!(
            kubelet_core::clock::elapsed(start) < Duration::from_secs(120),
            "namespace {name} never went away"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let start = kubelet_core::clock::monotonic_now();
    while sas.get_opt("default").await.unwrap().is_none() {
        assert!(
            kubelet_core::clock::elapsed(start) < TIMEOUT,
            "no default service account in {name}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A pod bound to `node` that mounts `secret`.
fn pod_with_secret(name: &str, namespace: &str, node: &str, secret: &str) -> Pod {
    Pod {
        metadata: meta(name, Some(namespace)),
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "c".into(),
                image: Some("kubelet-rs.local/busybox:1.0".into()),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "s".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.to_string()),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn secret(name: &str, namespace: &str) -> Secret {
    Secret {
        metadata: meta(name, Some(namespace)),
        data: Some(BTreeMap::from([(
            "k".to_string(),
            ByteString(b"v".to_vec()),
        )])),
        ..Secret::default()
    }
}

#[tokio::test]
async fn admin_lists_namespaces_with_client_and_kubectl() {
    let cp = ControlPlane::ensure().await.expect("control plane");
    let admin = cp.admin_client().await.unwrap();
    let names: Vec<String> = Api::<Namespace>::all(admin)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect();
    for want in ["default", "kube-system", "kube-node-lease"] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }

    let out = cp.kubectl(&["get", "--raw", "/readyz"]).await.unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");

    let out = cp
        .kubectl(&["get", "ns", "-o", "jsonpath={.items[*].metadata.name}"])
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.split_whitespace().any(|n| n == "kube-node-lease"),
        "{listed}"
    );

    let version = cp.kubectl(&["version", "-o", "json"]).await.unwrap();
    let v: serde_json::Value = serde_json::from_slice(&version.stdout).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.20.2", "{v}");
}

#[tokio::test]
async fn node_identity_is_held_to_the_node_authorizer() {
    let cp = ControlPlane::ensure().await.expect("control plane");
    let admin = cp.admin_client().await.unwrap();
    let node_name = "cp-test-node";
    let other_node = "cp-test-other-node";
    let ns = "cp-test-node-authz";

    let admin_nodes: Api<Node> = Api::all(admin.clone());
    delete_if_exists(&admin_nodes, node_name).await;
    delete_if_exists(&admin_nodes, other_node).await;
    fresh_namespace(&admin, ns).await;

    let identity = cp.node_identity(node_name).await.unwrap();
    assert!(identity.kubeconfig.is_file());
    assert!(identity.serving_cert.is_file() && identity.serving_key.is_file());
    // Issued once: asking again gives the same files.
    assert_eq!(cp.node_identity(node_name).await.unwrap(), identity);
    let node = cp.node_client(node_name).await.unwrap();

    // Its own Node object: allowed.
    let nodes: Api<Node> = Api::all(node.clone());
    let created = nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: meta(node_name, None),
                ..Node::default()
            },
        )
        .await
        .expect("a node creates its own Node");
    assert_eq!(created.metadata.name.as_deref(), Some(node_name));
    // Another node's: refused by NodeRestriction.
    let err = nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: meta(other_node, None),
                ..Node::default()
            },
        )
        .await
        .expect_err("a node must not create another node's Node");
    assert_eq!(api_code(&err), Some(403), "{err}");

    // Its Lease in kube-node-lease: allowed.
    let leases: Api<Lease> = Api::namespaced(node.clone(), "kube-node-lease");
    delete_if_exists(
        &Api::<Lease>::namespaced(admin.clone(), "kube-node-lease"),
        node_name,
    )
    .await;
    let lease = leases
        .create(
            &PostParams::default(),
            &Lease {
                metadata: meta(node_name, Some("kube-node-lease")),
                spec: Some(LeaseSpec {
                    holder_identity: Some(node_name.to_string()),
                    lease_duration_seconds: Some(40),
                    renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                    ..LeaseSpec::default()
                }),
            },
        )
        .await
        .expect("a node creates its own Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(node_name)
    );

    // Secrets: only those of pods bound to this node (the Node authorizer's graph).
    let admin_secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    let admin_pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
    for s in ["mine", "theirs"] {
        admin_secrets
            .create(&PostParams::default(), &secret(s, ns))
            .await
            .unwrap();
    }
    admin_pods
        .create(
            &PostParams::default(),
            &pod_with_secret("mine", ns, node_name, "mine"),
        )
        .await
        .unwrap();
    admin_pods
        .create(
            &PostParams::default(),
            &pod_with_secret("theirs", ns, other_node, "theirs"),
        )
        .await
        .unwrap();
    let node_secrets: Api<Secret> = Api::namespaced(node.clone(), ns);
    // The authorizer's graph follows the pods through an informer: wait until the pod's
    // secret is readable (this also proves the identity works at all).
    let start = kubelet_core::clock::monotonic_now();
    loop {
        match node_secrets.get("mine").await {
            Ok(s) => {
                assert_eq!(s.data.unwrap()["k"].0, b"v");
                break;
            }
            Err(e)
                if api_code(&e) == Some(403) && kubelet_core::clock::elapsed(start) < TIMEOUT =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("node reading the secret of its own pod: {e}"),
        }
    }
    let err = node_secrets
        .get("theirs")
        .await
        .expect_err("a node must not read the secret of another node's pod");
    assert_eq!(api_code(&err), Some(403), "{err}");
    let err = node_secrets
        .list(&ListParams::default())
        .await
        .expect_err("a node must not list secrets");
    assert_eq!(api_code(&err), Some(403), "{err}");

    // kubectl as the node says the same.
    for (args, want) in [
        (
            vec!["auth", "can-i", "get", "secret/theirs", "-n", ns],
            "no",
        ),
        (vec!["auth", "can-i", "get", "secret/mine", "-n", ns], "yes"),
        (vec!["auth", "can-i", "create", "nodes"], "yes"),
        (
            vec!["auth", "can-i", "list", "pods", "--all-namespaces"],
            "yes",
        ),
    ] {
        let out = cp.kubectl_as(&identity.kubeconfig, &args).await.unwrap();
        // "yes", or "no" with the authorizer's reason after it.
        let answer = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            answer.split_whitespace().next(),
            Some(want),
            "kubectl {args:?}: {out:?}"
        );
        assert_eq!(
            out.status.success(),
            want == "yes",
            "kubectl {args:?}: {out:?}"
        );
    }

    // Clean up (the namespace takes the pods and secrets with it).
    delete_if_exists(&Api::<Namespace>::all(admin.clone()), ns).await;
    delete_if_exists(
        &Api::<Lease>::namespaced(admin.clone(), "kube-node-lease"),
        node_name,
    )
    .await;
    delete_if_exists(&admin_nodes, node_name).await;
}

#[tokio::test]
async fn service_account_token_passes_token_review() {
    let cp = ControlPlane::ensure().await.expect("control plane");
    let admin = cp.admin_client().await.unwrap();
    // The token controller of kube-controller-manager gives every service account a token
    // secret (v1.20); the default one in `default` is there once `up` returned.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    let start = kubelet_core::clock::monotonic_now();
    let token = loop {
        let list = secrets
            .list(&ListParams::default().fields("type=kubernetes.io/service-account-token"))
            .await
            .unwrap();
        let found = list.items.into_iter().find(|s| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kubernetes.io/service-account.name"))
                .map(String::as_str)
                == Some("default")
        });
        if let Some(token) = found
            .and_then(|s| s.data)
            .and_then(|d| d.get("token").cloned())
        {
            break String::from_utf8(token.0).unwrap();
        }
        assert!(
            kubelet_core::clock::elapsed(start) < TIMEOUT,
            "no token secret for default/default"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    let reviews: Api<TokenReview> = Api::all(admin);
    let review = |token: String| TokenReview {
        spec: TokenReviewSpec {
            token,
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let good = reviews
        .create(&PostParams::default(), &review(token.clone()))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(good.authenticated, Some(true), "{good:?}");
    let user = good.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:default:default")
    );
    assert!(user
        .groups
        .unwrap()
        .iter()
        .any(|g| g == "system:serviceaccounts"));

    // A token with a broken signature is not authenticated.
    let mut forged = token;
    forged.truncate(forged.len() - 4);
    forged.push_str("AAAA");
    let bad = reviews
        .create(&PostParams::default(), &review(forged))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_ne!(bad.authenticated, Some(true), "{bad:?}");
}

/// An `openssl s_server -www` standing in for a kubelet's HTTPS port (it answers with the TLS
/// session, including the client's certificate), killed on drop.
async fn fake_kubelet(
    cert: &std::path::Path,
    key: &std::path::Path,
    client_ca: &std::path::Path,
) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-Verify", "1", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-cert")
        .arg(cert)
        .arg("-key")
        .arg(key)
        .arg("-CAfile")
        .arg(client_ca)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let start = kubelet_core::clock::monotonic_now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            kubelet_core::clock::elapsed(start) < TIMEOUT,
            "openssl s_server did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (child, port)
}

#[tokio::test]
async fn apiserver_reaches_kubelets_with_its_client_cert_and_trusts_only_the_kubelet_ca() {
    let cp = ControlPlane::ensure().await.expect("control plane");
    let admin = cp.admin_client().await.unwrap();
    let node_name = "cp-test-proxy-node";
    let admin_nodes: Api<Node> = Api::all(admin.clone());
    delete_if_exists(&admin_nodes, node_name).await;
    let identity = cp.node_identity(node_name).await.unwrap();
    let nodes: Api<Node> = Api::all(cp.node_client(node_name).await.unwrap());
    nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: meta(node_name, None),
                ..Node::default()
            },
        )
        .await
        .unwrap();

    // `path` through the apiserver's node proxy, to a fake kubelet serving `cert`.
    let proxy_to = |cert: std::path::PathBuf, key: std::path::PathBuf| {
        let cp = cp.clone();
        let admin_nodes = admin_nodes.clone();
        async move {
            let (_server, port) = fake_kubelet(&cert, &key, cp.client_ca_path()).await;
            let status = serde_json::json!({
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": node_name},
                    ],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                }
            });
            admin_nodes
                .patch_status(
                    node_name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&status),
                )
                .await
                .unwrap();
            let path = format!("/api/v1/nodes/{node_name}/proxy/healthz");
            cp.kubectl(&["get", "--raw", &path]).await.unwrap()
        }
    };

    // The node's serving cert (signed by the kubelet CA): the apiserver connects and shows its
    // kubelet client cert.
    let out = proxy_to(identity.serving_cert.clone(), identity.serving_key.clone()).await;
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        page.contains("CN=kube-apiserver-kubelet-client") && page.contains("O=system:masters"),
        "{page}"
    );

    // A serving cert for 127.0.0.1 from another CA (the apiserver's own, cluster CA): refused.
    let pki = cp.pki_dir();
    let out = proxy_to(pki.join("apiserver.crt"), pki.join("apiserver.key")).await;
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("x509") && err.contains("unknown authority"),
        "{err}"
    );

    delete_if_exists(&admin_nodes, node_name).await;
}
