//! The kubelet server behind the real control plane, as a person uses it: the apiserver
//! reaches it through the Node object's address with its kubelet client certificate
//! (x509 against the cluster CA, authorized by SubjectAccessReview), bearer tokens are
//! checked by TokenReview, and `kubectl logs/exec/port-forward/get --raw` work end to end
//! on a pod the engine runs on containerd.
//!
//! The node is registered here by hand (the Node object with its kubelet endpoint, the pod
//! bound to it), so the test needs only the control plane and containerd.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubelet_core::testing::poll_until;
use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_server::auth::{
    ApiServerClient, AuthConfig, WebhookAuthorizer, WebhookTokenAuthenticator,
};
use kubelet_server::stats::SummaryCollector;
use kubelet_server::tls::{ServerTls, TlsOptions};
use kubelet_server::{Endpoints, KubeletHost, ServerConfig};
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::engine::{busybox, container_status, wait_running, EngineTest};

const NODE: &str = "kubelet-rs-server-itest";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..ObjectMeta::default()
    }
}

async fn delete_if_exists<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let _ = api.delete(name, &DeleteParams::default()).await;
}

fn out(o: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_through_the_apiserver_and_webhook_auth() {
    let cp = match ControlPlane::ensure().await {
        Ok(cp) => cp,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: no control plane ({e})");
            return;
        }
        Err(e) => panic!("control plane: {e}"),
    };
    let Some(t) = EngineTest::new("srvcluster").await else {
        return;
    };
    let ns = t.namespace.clone();
    let admin = cp.admin_client().await.unwrap();
    let identity = cp.node_identity(NODE).await.unwrap();

    // The pod, run by the engine on containerd.
    let uid = t.uid("web");
    let containers = vec![
        busybox("app", "echo hello; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.5; done"),
        busybox("crash", "echo run $(cat /proc/uptime); sleep 1; exit 3"),
        busybox("httpd", "mkdir -p /www && echo hi-from-httpd > /www/index.html && exec httpd -f -p 8080 -h /www"),
    ];
    let pod = t.pod("web", &uid, containers.clone());
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;

    // The kubelet server: the node's serving cert, x509 against the cluster CA, tokens and
    // authorization through the apiserver (as the node's own identity).
    let mut id_pem = std::fs::read(&identity.client_cert).unwrap();
    id_pem.extend(std::fs::read(&identity.client_key).unwrap());
    let api = ApiServerClient::new(
        cp.apiserver_url(),
        Some(&std::fs::read(cp.ca_cert_path()).unwrap()),
        Some(&id_pem),
        None,
    )
    .unwrap();
    let tls = ServerTls::load(&TlsOptions {
        cert_file: Some(identity.serving_cert.clone()),
        key_file: Some(identity.serving_key.clone()),
        client_ca_file: Some(cp.client_ca_path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let auth = AuthConfig {
        anonymous: false,
        tokens: Some(Arc::new(WebhookTokenAuthenticator::new(
            api.clone(),
            Duration::from_secs(120),
        ))),
        authorizer: Arc::new(WebhookAuthorizer::new(
            api,
            Duration::from_secs(300),
            Duration::from_secs(30),
        )),
    };
    let host = KubeletHost::new(k.handle.clone()).with_stats(Arc::new(
        SummaryCollector::for_kubelet(&k.handle).expect("kubelet-cm measures"),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(kubelet_server::serve_with(
        listener,
        Arc::new(host),
        ServerConfig {
            tls: Some(tls),
            auth,
            ..ServerConfig::plain(Endpoints::Full)
        },
        k.shutdown.clone(),
    ));

    // The Node object pointing at this server; the namespace and the pod bound to it.
    let admin_nodes: Api<Node> = Api::all(admin.clone());
    delete_if_exists(&admin_nodes, NODE).await;
    let nodes: Api<Node> = Api::all(cp.node_client(NODE).await.unwrap());
    nodes
        .create(
            &PostParams::default(),
            &Node {
                metadata: meta(NODE, None),
                ..Node::default()
            },
        )
        .await
        .unwrap();
    let status = serde_json::json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": NODE}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }});
    admin_nodes
        .patch_status(NODE, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta(&ns, None),
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    poll_until(Duration::from_secs(60), || async {
        sas.get_opt("default").await.ok().flatten()
    })
    .await
    .expect("default service account");
    let api_pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": false,
            "containers": containers.iter().map(|c| serde_json::json!({"name": c.name, "image": c.image})).collect::<Vec<_>>(),
        },
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    pods.create(&PostParams::default(), &api_pod).await.unwrap();
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();

    // kubectl get --raw through the node proxy: healthz, stats, metrics.
    let raw = |path: String| {
        let cp = cp.clone();
        async move { cp.kubectl(&["get", "--raw", &path]).await.unwrap() }
    };
    let o = raw(format!("/api/v1/nodes/{NODE}/proxy/healthz")).await;
    assert!(o.status.success(), "{}", out(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok");
    let o = raw(format!("/api/v1/nodes/{NODE}/proxy/stats/summary")).await;
    assert!(o.status.success(), "{}", out(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    println!(
        "summary through the apiserver:\n{}",
        serde_json::to_string_pretty(&summary).unwrap()
    );
    assert_eq!(summary["pods"][0]["podRef"]["uid"], uid.as_str());
    assert!(
        summary["pods"][0]["memory"]["workingSetBytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let o = raw(format!("/api/v1/nodes/{NODE}/proxy/metrics")).await;
    assert!(o.status.success(), "{}", out(&o));
    let m = String::from_utf8_lossy(&o.stdout);
    assert!(m.contains("kubelet_running_pods"), "{m}");
    assert!(m.contains("kubelet_runtime_operations_total"), "{m}");

    // kubectl logs: --tail, --since, --previous, -f.
    let o = cp
        .kubectl(&["logs", "-n", &ns, "web", "-c", "app"])
        .await
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("hello\ntick 1\n"),
        "{}",
        out(&o)
    );
    let o = cp
        .kubectl(&["logs", "-n", &ns, "web", "-c", "app", "--tail=2"])
        .await
        .unwrap();
    let tail = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(tail.lines().count(), 2, "{}", out(&o));
    assert!(tail.lines().all(|l| l.starts_with("tick ")), "{tail}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let o = cp
        .kubectl(&["logs", "-n", &ns, "web", "-c", "app", "--since=1s"])
        .await
        .unwrap();
    let since = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success() && !since.contains("hello") && since.contains("tick"),
        "{}",
        out(&o)
    );
    poll_until(Duration::from_secs(60), || async {
        let s = k.handle.pod_status(&uid)?;
        (container_status(&s, "crash")?.restart_count >= 1).then_some(())
    })
    .await
    .expect("the crashing container restarted");
    let o = cp
        .kubectl(&["logs", "-n", &ns, "web", "-c", "crash", "--previous"])
        .await
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("run "),
        "{}",
        out(&o)
    );
    {
        let mut child = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(cp.admin_kubeconfig_path())
            .args(["logs", "-f", "-n", &ns, "web", "-c", "app", "--tail=0"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut got = String::new();
        let mut buf = [0u8; 1024];
        while got.matches("tick").count() < 2 {
            use tokio::io::AsyncReadExt;
            let n = tokio::time::timeout(Duration::from_secs(15), stdout.read(&mut buf))
                .await
                .expect("kubectl logs -f keeps printing")
                .unwrap();
            assert!(n > 0, "kubectl logs -f ended: {got}");
            got.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        assert!(!got.contains("hello"), "{got}");
        let _ = child.kill().await;
    }

    // kubectl exec: output and exit code.
    let o = cp
        .kubectl(&[
            "exec",
            "-n",
            &ns,
            "web",
            "-c",
            "app",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 5",
        ])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", out(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "out\n", "{}", out(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("err"),
        "{}",
        out(&o)
    );
    // Interactive, through a pty (`script` gives kubectl a terminal).
    let kubeconfig = cp.admin_kubeconfig_path().display().to_string();
    let o = tokio::process::Command::new("script")
        .args(["-qec"])
        .arg(format!("kubectl --kubeconfig {kubeconfig} exec -it -n {ns} web -c app -- sh -c 'tty; echo cols=$(stty size)'"))
        .arg("/dev/null")
        .stdin(std::process::Stdio::piped())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", out(&o));
    assert!(text.contains("/dev/pts/"), "{}", out(&o));

    // kubectl port-forward to the httpd container.
    let local = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut pf = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig_path())
        .args([
            "port-forward",
            "-n",
            &ns,
            "pod/web",
            &format!("{local}:8080"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let page = poll_until(Duration::from_secs(20), || async {
        let r = reqwest::get(format!("http://127.0.0.1:{local}/"))
            .await
            .ok()?;
        r.text().await.ok()
    })
    .await;
    let _ = pf.kill().await;
    let pf_out = pf.wait_with_output().await.unwrap();
    assert_eq!(page.as_deref(), Some("hi-from-httpd\n"), "{}", out(&pf_out));

    // Bearer tokens straight to the kubelet: TokenReview, then SubjectAccessReview.
    let reader = format!("{ns}-reader");
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: meta("reader", Some(&ns)),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    delete_if_exists(&roles, &reader).await;
    delete_if_exists(&bindings, &reader).await;
    roles
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta(&reader, None),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["nodes/metrics".into()]),
                    verbs: vec!["get".into()],
                    ..Default::default()
                }]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    bindings
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: meta(&reader, None),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "ClusterRole".into(),
                    name: reader.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "reader".into(),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();
    let o = cp
        .kubectl(&["create", "token", "reader", "-n", &ns])
        .await
        .unwrap();
    assert!(o.status.success(), "{}", out(&o));
    let token = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(cp.kubelet_ca_path()).unwrap()).unwrap(),
        )
        .build()
        .unwrap();
    let call = |path: &'static str, token: Option<String>| {
        let client = client.clone();
        async move {
            let mut r = client.get(format!("https://127.0.0.1:{port}{path}"));
            if let Some(t) = token {
                r = r.bearer_auth(t);
            }
            r.send().await.unwrap().status().as_u16()
        }
    };
    // RBAC bindings reach the authorizer's cache within a moment.
    let start = kubelet_core::clock::monotonic_now();
    while call("/metrics", Some(token.clone())).await != 200 {
        assert!(
            kubelet_core::clock::elapsed(start) < Duration::from_secs(30),
            "the reader never got /metrics"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(call("/pods", Some(token.clone())).await, 403);
    assert_eq!(call("/stats/summary", Some(token.clone())).await, 403);
    assert_eq!(call("/metrics", Some("not-a-token".into())).await, 401);
    assert_eq!(call("/metrics", None).await, 401);

    let _ = std::io::stdout().flush();
    delete_if_exists(&bindings, &reader).await;
    delete_if_exists(&roles, &reader).await;
    delete_if_exists(&namespaces, &ns).await;
    delete_if_exists(&admin_nodes, NODE).await;
    k.stop().await;
}
