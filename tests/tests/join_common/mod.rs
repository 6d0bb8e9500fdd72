//! Shared set-up of the join tests: a kubelet composed from `kubelet-bin`'s own parts for a
//! command line (flags and config file parsed by `kubelet_bin::config`, TLS bootstrap and
//! rotation by `kubelet_bin::app::cluster`, the listeners by `kubelet_bin::server`), running
//! the test's pods on the real containerd through the test's [`ScopedRuntime`].

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::Api;
use kubelet_bin::app::Cluster;
use kubelet_bin::config::LoadedConfig;
use kubelet_core::{Config, ContainerManager, Kubelet, KubeletHandle};
use kubelet_sources::apiserver::certificate::bootstrap::Outcome;
use kubelet_sources::apiserver::certificate::CertificateManager;
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::engine::EngineTest;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The signer of kubelet client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of kubelet serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// CSRs of `signer` requested by `user`.
pub async fn csrs_of(
    admin: &kube::Client,
    signer: &str,
    user: &str,
) -> Vec<k8s_openapi::api::certificates::v1::CertificateSigningRequest> {
    Api::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.spec.signer_name == signer && c.spec.username.as_deref() == Some(user))
        .collect()
}

/// The token id of a bootstrap kubeconfig made by the script (`bootstrap-kubelet-<id>...`).
pub fn token_id(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    name.trim_start_matches("bootstrap-kubelet-")
        .trim_end_matches(".kubeconfig")
        .to_string()
}

/// A running kubelet of a join test.
pub struct JoinKubelet {
    pub loaded: LoadedConfig,
    pub handle: KubeletHandle,
    /// What bootstrap did.
    pub bootstrap: Option<Outcome>,
    /// The client certificate's manager (rotation on).
    pub client_manager: Option<Arc<CertificateManager>>,
    /// How long `kubelet_bin::app::cluster` took (bootstrap included).
    pub cluster_setup: Duration,
    shutdown: CancellationToken,
    join: Option<tokio::task::JoinHandle<kubelet_core::Result<()>>>,
    tasks: Option<TaskTracker>,
}

/// The control plane, or `None` (skipped outside CI).
pub async fn join_control_plane(test: &str) -> Option<ControlPlane> {
    match ControlPlane::ensure_join().await {
        Ok(cp) => Some(cp),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED {test}: join control plane unavailable: {e}");
            None
        }
        Err(e) => panic!("{test}: join control plane unavailable under CI: {e}"),
    }
}

/// Creates the namespace of the test.
pub async fn create_namespace(admin: &kube::Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// What every join test starts from: its environment, the join control plane, an admin client,
/// the node's name, the test's namespace, and `<test dir>/etc-kubernetes` (the `/etc/kubernetes`
/// of the README's command line) holding a KubeletConfiguration with `extra_config`.
pub struct JoinSetup {
    /// The test's environment.
    pub et: EngineTest,
    /// The join control plane.
    pub cp: ControlPlane,
    /// Its admin client.
    pub admin: kube::Client,
    /// `n-<namespace>`.
    pub node: String,
    /// The configuration directory.
    pub etc: PathBuf,
}

/// [`JoinSetup`] for `test`, with a bootstrap kubeconfig of a fresh one-hour token
/// (`etc/bootstrap-kubelet.kubeconfig`) when `token` is set; `None` when the test is skipped.
pub async fn join_setup(test: &str, token: bool, extra_config: &str) -> Option<JoinSetup> {
    let et = EngineTest::new(test).await?;
    let cp = join_control_plane(test).await?;
    let admin = cp.admin_client().await.unwrap();
    let node = format!("n-{}", et.namespace);
    create_namespace(&admin, &et.namespace).await;
    let etc = et.dir.path().join("etc-kubernetes");
    std::fs::create_dir_all(&etc).unwrap();
    if token {
        std::fs::copy(
            cp.bootstrap_kubeconfig("1h").await.unwrap(),
            etc.join("bootstrap-kubelet.kubeconfig"),
        )
        .unwrap();
    }
    write_config(&etc, &cp, extra_config);
    Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    })
}

/// The Go kubelet's command line from the issue, with a test's paths
/// (`etc` of [`JoinSetup`], the kubelet's root dir, the node name).
pub fn command_line(etc: &Path, root: &Path, node: &str) -> Vec<String> {
    vec![
        format!(
            "--bootstrap-kubeconfig={}",
            etc.join("bootstrap-kubelet.kubeconfig").display()
        ),
        format!("--kubeconfig={}", etc.join("kubelet.kubeconfig").display()),
        format!("--config={}", etc.join("kubelet-conf.yml").display()),
        format!(
            "--container-runtime-endpoint={}",
            kubelet_tests::cri::endpoint()
        ),
        "--node-labels=node.kubernetes.io/node=".into(),
        // Beside the flags: the test's node name, address and state dir.
        format!("--hostname-override={node}"),
        "--node-ip=127.0.0.1".into(),
        format!("--root-dir={}", root.display()),
    ]
}

/// The node `name` once it is Ready (at most a minute).
pub async fn wait_ready(nodes: &Api<Node>, name: &str) -> Node {
    eventually(Duration::from_secs(60), "node Ready", || {
        let nodes = nodes.clone();
        let name = name.to_string();
        async move {
            let n = nodes.get_opt(&name).await.ok()??;
            (ready(&n).as_deref() == Some("True")).then_some(n)
        }
    })
    .await
}

/// A KubeletConfiguration file in `dir` with these extra lines (webhook authentication and
/// authorization against the cluster, the cluster CA for client certificates; pod logs under
/// `dir`: a kubelet removes the log directories in its `podLogsDir` of pods it does not know,
/// so one sharing `/var/log/pods` would remove another kubelet's).
pub fn write_config(dir: &Path, cp: &ControlPlane, extra: &str) -> PathBuf {
    let path = dir.join("kubelet-conf.yml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: false\n\
             healthzPort: 0\nreadOnlyPort: 0\nauthentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: true\n  \
             x509:\n    clientCAFile: {}\nauthorization:\n  mode: Webhook\npodLogsDir: {}\n{extra}",
            cp.client_ca_path().display(),
            dir.join("pod-logs").display()
        ),
    )
    .unwrap();
    path
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Parses `args` as the kubelet binary does.
pub fn load(args: &[String]) -> LoadedConfig {
    let argv = std::iter::once(OsString::from("kubelet")).chain(args.iter().map(OsString::from));
    kubelet_bin::config::load_with_hostname(argv, || Ok("unused-hostname".into()))
        .expect("the command line loads")
}

/// Starts a kubelet for `args` (with the secure port when `serve`), composed as
/// `kubelet_bin::app::run` composes it, on the test's runtime and container manager.
pub async fn start(et: &EngineTest, args: &[String], serve: bool) -> JoinKubelet {
    let loaded = load(args);
    let t0 = tokio::time::Instant::now();
    let Cluster {
        member,
        certificates,
    } = kubelet_bin::app::cluster(&loaded)
        .await
        .expect("cluster set-up")
        .expect("cluster mode");
    let cluster_setup = t0.elapsed();
    let mut node_labels = kubelet_sources::apiserver::node::default_labels(
        &kubelet_sources::apiserver::node::NodeConfig::new(loaded.node_name.clone()),
    );
    node_labels.extend(loaded.node_labels.clone());
    let config = Config {
        node_name: loaded.node_name.clone(),
        node_labels,
        ..et.config()
    };
    let mut builder = Kubelet::builder()
        .config(config)
        .runtime(et.runtime.clone())
        .container_manager(et.cm.clone() as Arc<dyn ContainerManager>)
        .source(member.source())
        .status_sink(member.status_sink())
        .object_store(Arc::new(kubelet_sources::objects::ApiObjectStore::new(
            member.api_client(),
            kubelet_sources::objects::DEFAULT_TTL,
        )));
    for p in kubelet_bin::certificates::credential_providers(&loaded)
        .await
        .expect("credential providers")
    {
        builder = builder.credential_provider(Arc::new(p));
    }
    let kubelet = builder.build().expect("kubelet builds");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let csr_client = Some(member.api_client());
    let tasks = member.start(handle.clone(), shutdown.clone()).await;
    let servers =
        kubelet_bin::app::start_certificates(&loaded, csr_client, &certificates, &shutdown)
            .await
            .expect("certificates start");
    if serve {
        kubelet_bin::server::start_servers_with(&loaded, &handle, None, servers, &shutdown)
            .await
            .expect("listeners start");
    }
    let join = tokio::spawn(kubelet.run(shutdown.clone()));
    JoinKubelet {
        loaded,
        handle,
        bootstrap: certificates.bootstrap,
        client_manager: certificates.manager.clone(),
        cluster_setup,
        shutdown,
        join: Some(join),
        tasks: Some(tasks),
    }
}

impl JoinKubelet {
    /// Stops the kubelet (pods keep running) and its tasks.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(j) = self.join.take() {
            tokio::time::timeout(Duration::from_secs(60), j)
                .await
                .expect("kubelet stops")
                .expect("kubelet task")
                .expect("kubelet run");
        }
        if let Some(t) = self.tasks.take() {
            tokio::time::timeout(Duration::from_secs(30), t.wait())
                .await
                .expect("member tasks stop");
        }
    }
}

impl Drop for JoinKubelet {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The Ready condition's status of a node.
pub fn ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// A busybox pod on `node` in `namespace` running `script`.
pub fn pod(namespace: &str, node: &str, name: &str, image: &str, script: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(1),
            containers: vec![Container {
                name: "main".into(),
                image: Some(image.into()),
                image_pull_policy: Some("IfNotPresent".into()),
                command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Polls `check` every 250ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Removes the test's node and namespace (without waiting).
pub fn cleanup(cp: &ControlPlane, node: &str, namespace: &str) {
    for args in [
        vec!["delete", "node", node, "--wait=false"],
        vec!["delete", "namespace", namespace, "--wait=false"],
    ] {
        let _ = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(cp.admin_kubeconfig_path())
            .args(&args)
            .output();
    }
}

/// Requests of `user` in the audit log with their response codes: (verb, resource, code).
pub fn audit_of(cp: &ControlPlane, user: &str) -> Vec<(String, String, u16)> {
    let text = std::fs::read_to_string(cp.audit_log_path()).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["stage"] == "ResponseComplete" && v["user"]["username"] == user)
        .map(|v| {
            (
                v["verb"].as_str().unwrap_or_default().to_string(),
                v["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                u16::try_from(v["responseStatus"]["code"].as_u64().unwrap_or(0)).unwrap_or(0),
            )
        })
        .collect()
}

/// The bootstrap group of [`manual_bootstrap_kubeconfig`]'s tokens: it may create node CSRs
/// (`system:node-bootstrapper`) but, unlike kubeadm's default node token group, has no
/// auto-approval binding, so its CSRs wait for `kubectl certificate approve`.
pub const MANUAL_APPROVAL_GROUP: &str = "system:bootstrappers:kubelet-rs:manual-approval";

/// A bootstrap kubeconfig (in `dir`) with a new token of [`MANUAL_APPROVAL_GROUP`], and the
/// token's id (its CSRs are requested by `system:bootstrap:<id>`).
pub async fn manual_bootstrap_kubeconfig(cp: &ControlPlane, dir: &Path) -> (PathBuf, String) {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    let admin = cp.admin_client().await.unwrap();
    // A script-made kubeconfig for the cluster part (and kubeadm's RBAC applied).
    let template = std::fs::read_to_string(cp.bootstrap_kubeconfig("1h").await.unwrap()).unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some("kubelet-rs:manual-approval-bootstrap".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: "system:node-bootstrapper".into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Group".into(),
            name: MANUAL_APPROVAL_GROUP.into(),
            ..Default::default()
        }]),
    };
    match Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("binding the manual-approval group: {e}"),
    }
    let nanos = kubelet_core::clock::now_unix_nanos();
    let id = format!("{:06x}", (nanos / 1000) & 0xff_ffff);
    let secret = format!("{:016x}", nanos.unsigned_abs() ^ 0x5a5a_5a5a_5a5a_5a5a);
    let expiration = kubelet_core::clock::wall_now() + Duration::from_secs(3600);
    let expiration = k8s_openapi::jiff::Timestamp::try_from(expiration)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let data = [
        ("description", "kubelet-rs test token without auto-approval"),
        ("token-id", id.as_str()),
        ("token-secret", secret.as_str()),
        ("expiration", expiration.as_str()),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        ("auth-extra-groups", MANUAL_APPROVAL_GROUP),
    ];
    let token = Secret {
        metadata: ObjectMeta {
            name: Some(format!("bootstrap-token-{id}")),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        string_data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    Api::<Secret>::namespaced(admin, "kube-system")
        .create(&PostParams::default(), &token)
        .await
        .expect("create the bootstrap token");
    let text: String = template
        .lines()
        .map(|l| match l.split_once("token: ") {
            Some((indent, _)) => format!("{indent}token: {id}.{secret}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    let path = dir.join("bootstrap-kubelet.kubeconfig");
    std::fs::write(&path, text).unwrap();
    (path, id)
}

/// Log lines captured from `tracing` (the process-wide subscriber, installed once).
pub fn captured_logs() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOGS: std::sync::OnceLock<&'static std::sync::Mutex<Vec<u8>>> =
        std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs: &'static std::sync::Mutex<Vec<u8>> =
            Box::leak(Box::new(std::sync::Mutex::new(Vec::new())));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_ansi(false)
            .with_writer(move || LogWriter(logs))
            .try_init();
        logs
    })
}

struct LogWriter(&'static std::sync::Mutex<Vec<u8>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The captured log lines containing `needle`.
pub fn log_lines_with(needle: &str) -> Vec<String> {
    String::from_utf8_lossy(&captured_logs().lock().unwrap())
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}
