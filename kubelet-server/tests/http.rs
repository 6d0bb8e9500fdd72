//! HTTP-level tests of the kubelet server: real TLS with certificates generated here, the
//! authentication and authorization matrix, and the endpoints over an engine running on the
//! simulated runtime.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kubelet_core::testing::{container, pod, FakeContainerManager, SimRuntime, StaticSource};
use kubelet_core::{Config, ContainerRuntime, Kubelet, KubeletHandle};
use kubelet_server::auth::{
    AlwaysAllow, Attributes, AuthConfig, AuthError, Authorizer, Decision, TokenAuthenticator,
    UserInfo,
};
use kubelet_server::tls::{ServerTls, TlsOptions};
use kubelet_server::{Endpoints, Host, ServerConfig};
use tokio_util::sync::CancellationToken;

struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, name);
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A client certificate + key PEM signed by `ca` for user `cn` in `groups`.
fn client_pem(ca: &Ca, cn: &str, groups: &[&str]) -> Vec<u8> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    for g in groups {
        p.distinguished_name
            .push(rcgen::DnType::OrganizationName, *g);
    }
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    format!("{}{}", cert.pem(), key.serialize_pem()).into_bytes()
}

/// The engine on the simulated runtime with one pod `default/web` (containers `app`,
/// `side`), plus a node log directory.
struct Node {
    handle: KubeletHandle,
    rt: Arc<SimRuntime>,
    logs: tempfile::TempDir,
    node_logs: tempfile::TempDir,
    shutdown: CancellationToken,
}

async fn node() -> Node {
    let logs = tempfile::tempdir().unwrap();
    let node_logs = tempfile::tempdir().unwrap();
    let rt = Arc::new(SimRuntime::new());
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: "node-1".into(),
            pod_logs_dir: logs.path().into(),
            resolv_conf: PathBuf::new(),
            ..Config::default()
        })
        .runtime(rt.clone())
        .container_manager(Arc::new(FakeContainerManager::default()))
        .source(Arc::new(StaticSource::new(
            "file",
            vec![pod(
                "web",
                "uid-web",
                vec![container("app", "img:1"), container("side", "img:1")],
            )],
        )))
        .build()
        .unwrap();
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    tokio::spawn(kubelet.run(shutdown.clone()));
    // Bounded wait; the tests below assert what they need of the pod.
    let _ = kubelet_core::testing::poll_until(Duration::from_secs(10), || async {
        handle
            .pod_status("uid-web")
            .and_then(|s| s.phase)
            .is_some_and(|p| p == "Running")
            .then_some(())
    })
    .await;
    Node {
        handle,
        rt,
        logs,
        node_logs,
        shutdown,
    }
}

/// The handle with `/logs/` pointed at a temp dir.
struct TestHost {
    handle: KubeletHandle,
    node_logs: PathBuf,
}

#[async_trait]
impl Host for TestHost {
    fn node_name(&self) -> String {
        Host::node_name(&self.handle)
    }
    fn health(&self) -> Result<(), String> {
        Host::health(&self.handle)
    }
    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)> {
        Host::pods(&self.handle)
    }
    fn pod_by_name(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        Host::pod_by_name(&self.handle, namespace, name)
    }
    fn runtime(&self) -> Arc<dyn ContainerRuntime> {
        Host::runtime(&self.handle)
    }
    fn pod_logs_dir(&self) -> PathBuf {
        Host::pod_logs_dir(&self.handle)
    }
    fn node_logs_dir(&self) -> Option<PathBuf> {
        Some(self.node_logs.clone())
    }
    fn configz(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({"port": 10250}))
    }
    fn metrics_text(&self) -> Option<String> {
        Host::metrics_text(&self.handle)
    }
}

struct Server {
    addr: SocketAddr,
    server_ca: Vec<u8>,
    _certs: tempfile::TempDir,
}

async fn start_secure(n: &Node, auth: AuthConfig, client_ca: Option<&Ca>) -> Server {
    let certs = tempfile::tempdir().unwrap();
    let ca_file = client_ca.map(|ca| {
        let p = certs.path().join("client-ca.crt");
        std::fs::write(&p, ca.cert.pem()).unwrap();
        p
    });
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: certs.path().join("pki"),
        host_name: "node-1".into(),
        client_ca_file: ca_file,
        ..Default::default()
    })
    .unwrap();
    let server_ca = std::fs::read(certs.path().join("pki/kubelet.crt")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let host = Arc::new(TestHost {
        handle: n.handle.clone(),
        node_logs: n.node_logs.path().into(),
    });
    let config = ServerConfig {
        tls: Some(tls),
        auth,
        ..ServerConfig::plain(Endpoints::Full)
    };
    tokio::spawn(kubelet_server::serve_with(
        listener,
        host,
        config,
        n.shutdown.clone(),
    ));
    Server {
        addr,
        server_ca,
        _certs: certs,
    }
}

fn client(s: &Server, identity: Option<&[u8]>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&s.server_ca).unwrap());
    if let Some(id) = identity {
        b = b.identity(reqwest::Identity::from_pem(id).unwrap());
    }
    b.build().unwrap()
}

fn url(s: &Server, path: &str) -> String {
    format!("https://localhost:{}{path}", s.addr.port())
}

async fn get(c: &reqwest::Client, u: &str, token: Option<&str>) -> (u16, String) {
    let mut r = c.get(u);
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    match r.send().await {
        Ok(resp) => {
            let code = resp.status().as_u16();
            (code, resp.text().await.unwrap_or_default())
        }
        Err(e) => panic!("GET {u}: {e:?}"),
    }
}

#[tokio::test]
async fn x509_and_anonymous_matrix() {
    let n = node().await;
    let good = ca("good-ca");
    let bad = ca("bad-ca");
    let alice = client_pem(&good, "alice", &["admins"]);
    let mallory = client_pem(&bad, "alice", &["admins"]);
    for anonymous in [false, true] {
        let auth = AuthConfig {
            anonymous,
            ..AuthConfig::allow_all()
        };
        let s = start_secure(&n, auth, Some(&good)).await;
        let cases: [(&str, Option<&[u8]>, u16); 3] = [
            ("no certificate", None, if anonymous { 200 } else { 401 }),
            ("good CA", Some(&alice), 200),
            ("bad CA", Some(&mallory), 401),
        ];
        for (what, id, want) in cases {
            let (code, body) = get(&client(&s, id), &url(&s, "/pods"), None).await;
            assert_eq!(code, want, "anonymous={anonymous} {what}: {body}");
            if code == 401 {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(v["kind"], "Status");
                assert_eq!(v["code"], 401);
            } else {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                assert_eq!(v["items"][0]["metadata"]["name"], "web");
            }
        }
    }
    n.shutdown.cancel();
}

/// Records what it was asked and allows per user: `alice` everything, `bob` only `stats`,
/// `carol` only `create` on `proxy`.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Attributes>>,
}

#[async_trait]
impl Authorizer for Recorder {
    async fn authorize(&self, a: &Attributes) -> Result<Decision, AuthError> {
        self.seen.lock().unwrap().push(a.clone());
        let allowed = match a.user.name.as_str() {
            "alice" => true,
            "bob" => a.subresource == "stats" || a.subresource == "healthz",
            "carol" => a.verb == "create" && a.subresource == "proxy",
            // Fine-grained only: nodes/pods and nodes/configz, never nodes/proxy.
            "dave" => a.subresource == "pods" || a.subresource == "configz",
            _ => false,
        };
        Ok(if allowed {
            Decision::Allow
        } else {
            Decision::Deny("no".into())
        })
    }
}

struct Tokens(HashMap<&'static str, &'static str>);

#[async_trait]
impl TokenAuthenticator for Tokens {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
        Ok(self.0.get(token).map(|n| UserInfo {
            name: n.to_string(),
            uid: String::new(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }))
    }
}

#[tokio::test]
async fn authorization_matrix_and_tokens() {
    let n = node().await;
    let good = ca("good-ca");
    let recorder = Arc::new(Recorder::default());
    let auth = AuthConfig {
        anonymous: false,
        tokens: Some(Arc::new(Tokens(HashMap::from([
            ("t-bob", "bob"),
            ("t-carol", "carol"),
            ("t-dave", "dave"),
        ])))),
        authorizer: recorder.clone(),
    };
    let s = start_secure(&n, auth, Some(&good)).await;
    let alice = client(&s, Some(&client_pem(&good, "alice", &["admins"])));
    let plain = client(&s, None);
    let cases: [(&reqwest::Client, Option<&str>, &str, u16); 14] = [
        (&alice, None, "/pods", 200),
        (&alice, None, "/healthz", 200),
        (&plain, Some("t-bob"), "/pods", 403),
        (&plain, Some("t-bob"), "/healthz", 200),
        (&plain, Some("t-bob"), "/metrics", 403),
        // Authorized, then answered by the host (no stats on the bare handle).
        (&plain, Some("t-bob"), "/stats/summary", 500),
        (&plain, Some("t-carol"), "/pods", 403),
        (&plain, Some("wrong"), "/pods", 401),
        (&plain, None, "/pods", 401),
        // Fine-grained authorization: nodes/pods and nodes/configz without nodes/proxy.
        (&plain, Some("t-dave"), "/pods", 200),
        (&plain, Some("t-dave"), "/runningpods/", 200),
        (&plain, Some("t-dave"), "/configz", 200),
        (&plain, Some("t-dave"), "/healthz", 403),
        (
            &plain,
            Some("t-dave"),
            "/containerLogs/default/web/app",
            403,
        ),
    ];
    for (c, token, path, want) in cases {
        let (code, body) = get(c, &url(&s, path), token).await;
        assert_eq!(code, want, "{token:?} {path}: {body}");
        if code == 403 {
            assert!(body.contains("\"reason\":\"Forbidden\""), "{body}");
        }
    }
    // Go asks the fine-grained subresource first, then falls back to nodes/proxy.
    let dave: Vec<(String, String)> = recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.user.name == "dave" && a.path == "/healthz")
        .map(|a| (a.verb.clone(), a.subresource.clone()))
        .collect();
    assert_eq!(
        dave,
        vec![
            ("get".to_string(), "healthz".to_string()),
            ("get".to_string(), "proxy".to_string())
        ]
    );
    // Refused clients do not keep their connection (a slot of the connection limit).
    let refused = plain.get(url(&s, "/pods")).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert_eq!(
        refused
            .headers()
            .get("connection")
            .and_then(|v| v.to_str().ok()),
        Some("close")
    );
    let seen = recorder.seen.lock().unwrap().clone();
    let alice_pods = seen.iter().find(|a| a.user.name == "alice").unwrap();
    // Go's AuthenticatedGroupAdder: certificate users are in system:authenticated too.
    assert_eq!(
        alice_pods.user.groups,
        vec!["admins".to_string(), "system:authenticated".to_string()]
    );
    assert_eq!(
        (
            alice_pods.verb.as_str(),
            alice_pods.resource.as_str(),
            alice_pods.subresource.as_str(),
            alice_pods.name.as_str()
        ),
        ("get", "nodes", "pods", "node-1")
    );
    assert!(seen.iter().all(|a| a.user.name != "wrong"));

    // An upgrade request to exec is a `create`: carol may, bob may not.
    let exec = |token: &'static str| {
        let (c, u) = (
            plain.clone(),
            url(&s, "/exec/default/web/app?command=ls&stdout=1"),
        );
        async move {
            c.get(u)
                .bearer_auth(token)
                .header("Connection", "Upgrade")
                .header("Upgrade", "SPDY/3.1")
                .header("X-Stream-Protocol-Version", "v4.channel.k8s.io")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(exec("t-bob").await, 403);
    // A doubled slash must not turn the exec into something authorized as a `get`: the
    // request is refused before authorization (the path is not canonical).
    let raw = url(&s, "/x").replace("/x", "//exec/default/web/app?command=ls&stdout=1");
    let doubled = plain
        .get(raw)
        .bearer_auth("t-bob")
        .header("Connection", "Upgrade")
        .header("Upgrade", "SPDY/3.1")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(doubled, 400);
    assert!(recorder
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|a| !a.path.starts_with("//")));
    // Authorized; the simulated runtime has no streaming server.
    assert_eq!(exec("t-carol").await, 500);
    let seen = recorder.seen.lock().unwrap().clone();
    let carol_exec = seen
        .iter()
        .find(|a| a.user.name == "carol" && a.path.starts_with("/exec"))
        .unwrap();
    assert_eq!(carol_exec.verb, "create");
    n.shutdown.cancel();
}

fn cri(t: u32, stream: &str, tag: &str, s: &str) -> String {
    format!("2024-05-01T10:00:{t:02}.000000000Z {stream} {tag} {s}\n")
}

async fn log_file(n: &Node, container: &str) -> PathBuf {
    let id = n.rt.container_ids("uid-web", container).pop().unwrap();
    let status = n.rt.container_status(&id).await.unwrap();
    status.log_path.unwrap()
}

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

#[tokio::test]
async fn endpoints_over_tls() {
    let n = node().await;
    let s = start_secure(&n, AuthConfig::allow_all(), None).await;
    let c = client(&s, None);
    let app_log = log_file(&n, "app").await;
    assert!(app_log.starts_with(n.logs.path()), "{}", app_log.display());
    write(
        &app_log.with_file_name(format!(
            "{}.20240501-100000",
            app_log.file_name().unwrap().to_string_lossy()
        )),
        &cri(1, "stdout", "F", "rotated"),
    );
    write(
        &app_log,
        &[
            cri(2, "stdout", "P", "hel"),
            cri(3, "stderr", "F", "oops"),
            cri(4, "stdout", "F", "lo"),
            cri(5, "stdout", "F", "end"),
        ]
        .concat(),
    );
    write(&n.node_logs.path().join("syslog"), "node log\n");
    let outside = tempfile::tempdir().unwrap();
    write(&outside.path().join("secret"), "secret\n");
    std::os::unix::fs::symlink(
        outside.path().join("secret"),
        n.node_logs.path().join("link"),
    )
    .unwrap();

    let cases: Vec<(&str, u16, Option<&str>)> = vec![
        ("/healthz", 200, Some("ok")),
        ("/healthz/ping", 200, Some("ok")),
        ("/healthz/syncloop", 200, Some("ok")),
        (
            "/containerLogs/default/web/app",
            200,
            Some("rotated\noops\nhello\nend\n"),
        ),
        (
            "/containerLogs/default/web/app?tailLines=2",
            200,
            Some("hello\nend\n"),
        ),
        (
            "/containerLogs/default/web/app?limitBytes=4",
            200,
            Some("rota"),
        ),
        (
            "/containerLogs/default/web/app?sinceTime=2024-05-01T10:00:03Z",
            200,
            Some("oops\nend\n"),
        ),
        (
            "/containerLogs/default/web/app?timestamps=true&tailLines=1",
            200,
            Some("2024-05-01T10:00:05.000000000Z end\n"),
        ),
        ("/containerLogs/default/web/side", 200, Some("")),
        ("/containerLogs/default/web/app?previous=true", 400, None),
        ("/containerLogs/default/web/app?tailLines=-3", 400, None),
        ("/containerLogs/default/web/nope", 404, None),
        ("/containerLogs/default/missing/app", 404, None),
        ("/logs/syslog", 200, Some("node log\n")),
        ("/logs/link", 404, None),
        // Encoded slashes are refused before authorization; encoded dots by /logs itself.
        ("/logs/..%2F..%2Fetc%2Fpasswd", 400, None),
        ("/logs/%2e%2e/%2e%2e/etc/passwd", 404, None),
        (
            "/configz",
            200,
            Some("{\"kubeletconfig\":{\"port\":10250}}"),
        ),
        ("/nope", 404, None),
    ];
    for (path, want, body) in cases {
        let (code, text) = get(&c, &url(&s, path), None).await;
        assert_eq!(code, want, "{path}: {text}");
        if let Some(b) = body {
            assert_eq!(text, b, "{path}");
        }
        if code >= 400 {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["kind"], "Status", "{path}");
        }
    }
    let (_, listing) = get(&c, &url(&s, "/logs/"), None).await;
    assert!(
        listing.contains("<a href=\"syslog\">syslog</a>"),
        "{listing}"
    );

    let (code, rp) = get(&c, &url(&s, "/runningpods/"), None).await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&rp).unwrap();
    assert_eq!(v["items"][0]["metadata"]["uid"], "uid-web");
    let names: Vec<&str> = v["items"][0]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{rp}");

    // /run: the simulated shell echoes.
    let r = c
        .post(url(&s, "/run/default/web/app?cmd=echo+hi+there"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().await.unwrap(), "echo hi there\n");

    // A non-upgrade exec request is refused.
    let (code, _) = get(&c, &url(&s, "/exec/default/web/app?command=ls"), None).await;
    assert_eq!(code, 400);

    let (code, metrics) = get(&c, &url(&s, "/metrics"), None).await;
    assert_eq!(code, 200);
    for name in [
        "kubelet_pleg_relist_duration_seconds_count",
        "kubelet_pod_worker_duration_seconds_count{operation_type=\"sync\"}",
        "kubelet_running_pods",
        "kubelet_running_containers{container_state=\"running\"}",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
    n.shutdown.cancel();
}

#[tokio::test]
async fn follow_streams_new_lines() {
    let n = node().await;
    let s = start_secure(&n, AuthConfig::allow_all(), None).await;
    let c = client(&s, None);
    let app_log = log_file(&n, "app").await;
    write(&app_log, &cri(1, "stdout", "F", "one"));
    let mut resp = c
        .get(url(&s, "/containerLogs/default/web/app?follow=true"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let first = resp.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], b"one\n");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&app_log)
            .unwrap();
        f.write_all(cri(2, "stdout", "F", "two").as_bytes())
            .unwrap();
    }
    let second = resp.chunk().await.unwrap().unwrap();
    assert_eq!(&second[..], b"two\n");
    n.shutdown.cancel();
}

#[tokio::test]
async fn stats_metrics_and_spec_from_the_core_collector() {
    let n = node().await;
    let collector = Arc::new(
        kubelet_server::stats::SummaryCollector::for_kubelet(&n.handle)
            .expect("the fake container manager measures"),
    );
    let host = kubelet_server::KubeletHost::new(n.handle.clone())
        .with_machine_info(&collector.machine_info())
        .with_stats(collector);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(kubelet_server::serve(
        l,
        Arc::new(host),
        Endpoints::ReadOnly,
        n.shutdown.clone(),
    ));
    let c = reqwest::Client::new();
    let get = |path: &str| {
        let c = c.clone();
        let u = format!("http://{addr}{path}");
        async move {
            let r = c.get(u).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (code, text) = get("/stats/summary").await;
    assert_eq!(code, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["node"]["nodeName"], "node-1");
    assert_eq!(v["node"]["startTime"], "2023-11-14T22:13:20Z");
    assert_eq!(v["node"]["memory"]["availableBytes"], 8u64 << 30);
    assert_eq!(v["node"]["fs"]["capacityBytes"], 100u64 << 30);
    assert_eq!(v["pods"][0]["podRef"]["name"], "web");
    let names: Vec<&str> = v["pods"][0]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["app", "side"]);
    let (code, text) = get("/stats/summary?only_cpu_and_memory=true").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["node"].get("fs").is_none(), "{v}");
    let (code, text) = get("/metrics/resource").await;
    assert_eq!(code, 200);
    assert!(text.contains("node_memory_working_set_bytes 0 "), "{text}");
    let (code, text) = get("/spec/").await;
    assert_eq!(code, 200);
    let spec: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(spec["num_cores"], 4);
    assert_eq!(spec["boot_id"], "fake-boot-id");
    n.shutdown.cancel();
}

#[tokio::test]
async fn read_only_and_healthz_listeners_serve_only_their_endpoints() {
    let n = node().await;
    let mut addrs = Vec::new();
    for eps in [Endpoints::ReadOnly, Endpoints::Healthz] {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        addrs.push(l.local_addr().unwrap());
        tokio::spawn(kubelet_server::serve(
            l,
            Arc::new(n.handle.clone()),
            eps,
            n.shutdown.clone(),
        ));
    }
    let c = reqwest::Client::new();
    let cases = [
        (0, "/pods", 200),
        (0, "/healthz", 200),
        (0, "/metrics", 200),
        (0, "/containerLogs/default/web/app", 404),
        (0, "/configz", 404),
        (0, "/runningpods/", 404),
        (0, "/logs/", 404),
        (1, "/healthz", 200),
        (1, "/pods", 404),
        (1, "/metrics", 404),
    ];
    for (i, path, want) in cases {
        let code = c
            .get(format!("http://{}{path}", addrs[i]))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        assert_eq!(code, want, "listener {i} {path}");
    }
    // POST on the read-only port is refused.
    let code = c
        .post(format!("http://{}/pods", addrs[0]))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(code, 405);
    n.shutdown.cancel();
}

/// A hung or slow client, oversized bodies, idle connections; handlers switched off.
#[path = "http/hardening.rs"]
mod hardening;
