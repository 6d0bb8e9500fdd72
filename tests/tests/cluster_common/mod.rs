//! Shared set-up of the cluster member tests: one node name and one namespace per test, the
//! real control plane ([`ControlPlane::ensure`]), the real containerd through the test's
//! [`ScopedRuntime`], and the kubelet composed through the library as the binary does
//! (API source + status sink + [`ClusterMember`] tasks).

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::{Config, ContainerManager, Kubelet, KubeletBuilder, KubeletHandle, PodSource};
use kubelet_sources::apiserver::{ApiClients, ClientConfig, ClusterMember, ClusterMemberConfig};
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::engine::EngineTest;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A running cluster member for one test.
pub struct ClusterNode {
    pub et: EngineTest,
    pub cp: ControlPlane,
    pub admin: kube::Client,
    pub node_name: String,
    pub handle: KubeletHandle,
    shutdown: CancellationToken,
    join: Option<tokio::task::JoinHandle<kubelet_core::Result<()>>>,
    tasks: Option<TaskTracker>,
}

/// Test environment or `None` (skipped, outside CI) when containerd or the control plane is
/// not available.
pub async fn start(test: &str, extra_sources: Vec<Arc<dyn PodSource>>) -> Option<ClusterNode> {
    start_with(test, move |_| extra_sources).await
}

/// [`start`] with extra sources made for the test's node name.
pub async fn start_with(
    test: &str,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
) -> Option<ClusterNode> {
    start_configured(test, sources, |_| {}).await
}

/// [`start_with`], editing the member's configuration first.
pub async fn start_configured(
    test: &str,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
) -> Option<ClusterNode> {
    start_engine_configured(test, sources, edit, |_| {}).await
}

/// [`start_configured`], editing the engine's configuration ([`EngineTest::config`] with
/// the node's name and labels) too.
pub async fn start_engine_configured(
    test: &str,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
) -> Option<ClusterNode> {
    let et = EngineTest::new(test).await?;
    start_on_shared(et, test, sources, edit, edit_engine, |b| b).await
}

/// [`start`] with the kubelet's builder edited last (to add components, say).
pub async fn start_built(
    test: &str,
    edit_builder: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
) -> Option<ClusterNode> {
    start_built_configured(test, |_| {}, edit_builder).await
}

/// [`start_built`], editing the engine's configuration too.
pub async fn start_built_configured(
    test: &str,
    edit_engine: impl FnOnce(&mut Config),
    edit_builder: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
) -> Option<ClusterNode> {
    let et = EngineTest::new(test).await?;
    start_on_shared(et, test, |_| vec![], |_| {}, edit_engine, edit_builder).await
}

/// [`start_engine_configured`], with `prepare` run on the test's environment before the
/// kubelet starts (mounting a small filesystem over its root dir, say); the container
/// manager is made again afterwards, so it sees what `prepare` did. Returns what `prepare`
/// returned too.
pub async fn start_prepared<G>(
    test: &str,
    prepare: impl FnOnce(&EngineTest) -> G,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
) -> Option<(ClusterNode, G)> {
    let mut et = EngineTest::new(test).await?;
    let prepared = prepare(&et);
    et.new_container_manager().await;
    let node = start_on_shared(et, test, sources, edit, edit_engine, |b| b).await?;
    Some((node, prepared))
}

/// [`start_on`] the shared control plane (skipped outside CI when it is unavailable).
async fn start_on_shared(
    et: EngineTest,
    test: &str,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
    edit_builder: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
) -> Option<ClusterNode> {
    let cp = match ControlPlane::ensure().await {
        Ok(cp) => cp,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED {test}: control plane unavailable: {e}");
            return None;
        }
        Err(e) => panic!("{test}: control plane unavailable under CI: {e}"),
    };
    Some(start_on(et, cp, sources, edit, edit_engine, edit_builder).await)
}

/// A cluster member for the test of `et` on the control plane `cp` (the shared one or an
/// instance of the test's own).
pub async fn start_on(
    et: EngineTest,
    cp: ControlPlane,
    sources: impl FnOnce(&str) -> Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
    edit_builder: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
) -> ClusterNode {
    let admin = cp.admin_client().await.expect("admin client");
    let node_name = format!("n-{}", et.namespace);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(et.namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let node = launch_built(
        &et,
        &cp,
        &node_name,
        sources(&node_name),
        edit,
        edit_engine,
        edit_builder,
    )
    .await;
    ClusterNode {
        et,
        cp,
        admin,
        node_name,
        handle: node.0,
        shutdown: node.1,
        join: Some(node.2),
        tasks: Some(node.3),
    }
}

type Launched = (
    KubeletHandle,
    CancellationToken,
    tokio::task::JoinHandle<kubelet_core::Result<()>>,
    TaskTracker,
);

/// Builds and runs a kubelet for `node_name` (as kubelet-bin's cluster mode does).
pub async fn launch(
    et: &EngineTest,
    cp: &ControlPlane,
    node_name: &str,
    extra_sources: Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
) -> Launched {
    launch_configured(et, cp, node_name, extra_sources, edit, |_| {}).await
}

/// [`launch`], editing the engine's configuration last.
pub async fn launch_configured(
    et: &EngineTest,
    cp: &ControlPlane,
    node_name: &str,
    extra_sources: Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
) -> Launched {
    launch_built(et, cp, node_name, extra_sources, edit, edit_engine, |b| b).await
}

/// [`launch_configured`], editing the kubelet's builder last.
pub async fn launch_built(
    et: &EngineTest,
    cp: &ControlPlane,
    node_name: &str,
    extra_sources: Vec<Arc<dyn PodSource>>,
    edit: impl FnOnce(&mut ClusterMemberConfig),
    edit_engine: impl FnOnce(&mut Config),
    edit_builder: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
) -> Launched {
    let kubeconfig = cp
        .node_kubeconfig(node_name)
        .await
        .expect("node kubeconfig");
    let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
        .await
        .expect("api clients");
    let mut cfg = ClusterMemberConfig::new(node_name);
    cfg.node.node_ips = vec!["127.0.0.1".into()];
    edit(&mut cfg);
    let member = ClusterMember::new(clients, cfg.clone());
    // Admission sees the node's labels, as Go's kubelet sees its Node object.
    let mut node_labels = kubelet_sources::apiserver::node::default_labels(&cfg.node);
    node_labels.extend(cfg.node.labels.clone());
    let mut config = Config {
        node_name: node_name.to_string(),
        node_labels,
        ..et.config()
    };
    edit_engine(&mut config);
    let mut builder = Kubelet::builder()
        .config(config)
        .runtime(et.runtime.clone())
        .container_manager(et.cm.clone() as Arc<dyn ContainerManager>)
        .source(member.source())
        .status_sink(member.status_sink())
        .object_store(Arc::new(kubelet_sources::objects::ApiObjectStore::new(
            member.api_client(),
            kubelet_sources::objects::DEFAULT_TTL,
        )))
        .node_lister(member.node_lister());
    for s in extra_sources {
        builder = builder.source(s);
    }
    let kubelet = edit_builder(builder).build().expect("kubelet builds");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let tasks = member.start(handle.clone(), shutdown.clone()).await;
    let join = tokio::spawn(kubelet.run(shutdown.clone()));
    (handle, shutdown, join, tasks)
}

impl ClusterNode {
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.admin.clone(), &self.et.namespace)
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.admin.clone())
    }

    /// A busybox pod for this node in the test's namespace (no service account token).
    pub fn pod(&self, name: &str, script: &str, restart: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(self.et.namespace.clone()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(self.node_name.clone()),
                automount_service_account_token: Some(false),
                restart_policy: Some(restart.into()),
                termination_grace_period_seconds: Some(2),
                containers: vec![Container {
                    name: "main".into(),
                    image: Some(kubelet_tests::cri::BUSYBOX_IMAGE.into()),
                    command: Some(vec!["sh".into(), "-c".into(), script.into()]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Stops the kubelet (pods keep running) and its member tasks.
    pub async fn stop_kubelet(&mut self) {
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

    /// Stops the kubelet (pods keep running) and starts a new one for the same node, root
    /// directory and runtime, as a restarted kubelet process would be.
    pub async fn restart_kubelet(&mut self) {
        self.stop_kubelet().await;
        let (handle, shutdown, join, tasks) =
            launch(&self.et, &self.cp, &self.node_name, vec![], |_| {}).await;
        self.handle = handle;
        self.shutdown = shutdown;
        self.join = Some(join);
        self.tasks = Some(tasks);
    }

    /// Stops everything and removes the node and namespace from the API server.
    pub async fn finish(mut self) {
        self.stop_kubelet().await;
        let dp = DeleteParams::default();
        let _ = self.nodes().delete(&self.node_name, &dp).await;
        let _ = Api::<Namespace>::all(self.admin.clone())
            .delete(&self.et.namespace, &dp)
            .await;
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        // Never let an engine re-create what EngineTest's cleanup removes.
        self.shutdown.cancel();
        if self.join.is_some() {
            // A failed test: remove its node and namespace without waiting.
            let kc = self.cp.admin_kubeconfig_path().to_path_buf();
            for args in [
                vec!["delete", "node", self.node_name.as_str(), "--wait=false"],
                vec![
                    "delete",
                    "namespace",
                    self.et.namespace.as_str(),
                    "--wait=false",
                ],
            ] {
                let _ = std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kc)
                    .args(&args)
                    .output();
            }
        }
    }
}

/// The tests' one wait, re-exported for the cluster tests.
pub use kubelet_core::testing::eventually;

/// Waits up to `timeout` for the pod `name` to be Running; the pod then.
pub async fn running(pods: &Api<Pod>, name: &str, timeout: Duration) -> Pod {
    eventually(timeout, &format!("{name} Running"), || {
        let (pods, name) = (pods.clone(), name.to_string());
        async move {
            let p = pods.get(&name).await.ok()?;
            (phase(&p) == "Running").then_some(p)
        }
    })
    .await
}

/// Phase of an API pod.
pub fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// Ready condition status of a node.
pub fn node_ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}
