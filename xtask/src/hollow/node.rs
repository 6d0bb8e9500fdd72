//! One hollow node: a kubelet engine on the simulated runtime, composed as a cluster member
//! exactly as `kubelet --kubeconfig` composes itself (kubelet-bin's `app.rs`: API clients from
//! the node's kubeconfig, a [`ClusterMember`], the engine built with the member's pod source,
//! status sink and object store, the member's tasks started before the engine runs).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Taint;
use kubelet_core::metrics::InstrumentedRuntime;
use kubelet_core::testing::{FakeContainerManager, SimRuntime};
use kubelet_core::{Config, ContainerRuntime, Kubelet};
use kubelet_sources::apiserver::{ApiClients, ClientConfig, ClusterMember, ClusterMemberConfig};
use kubelet_sources::objects::{ApiObjectStore, DEFAULT_TTL};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The label (and taint) key every hollow node registers with.
pub(super) const HOLLOW_KEY: &str = "kubelet-rs.io/hollow";
/// Its value.
pub(super) const HOLLOW_VALUE: &str = "true";
/// The taint's effect: only pods that tolerate it are scheduled onto a hollow node.
pub(super) const HOLLOW_EFFECT: &str = "NoSchedule";

/// The name of hollow node `i`.
pub(super) fn node_name(i: usize) -> String {
    format!("hollow-node-{i}")
}

/// The InternalIP hollow node `i` reports: 198.18.0.0/15 (RFC 2544, benchmarking), never
/// routed, so nothing that tries to reach a hollow node's kubelet reaches another one.
pub(super) fn node_ip(i: usize) -> String {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    let offset = u32::try_from(i % 131_070).unwrap_or(0) + 1;
    Ipv4Addr::from(base + offset).to_string()
}

/// The member configuration of hollow node `i`: its name, label, taint and address; every
/// other field at Go's defaults, as the binary would have them.
pub(super) fn member_config(i: usize) -> ClusterMemberConfig {
    let mut cfg = ClusterMemberConfig::new(node_name(i));
    cfg.node
        .labels
        .insert(HOLLOW_KEY.to_string(), HOLLOW_VALUE.to_string());
    cfg.node.taints = vec![Taint {
        key: HOLLOW_KEY.to_string(),
        value: Some(HOLLOW_VALUE.to_string()),
        effect: HOLLOW_EFFECT.to_string(),
        time_added: None,
    }];
    cfg.node.node_ips = vec![node_ip(i)];
    cfg
}

/// The engine configuration of a hollow node running up to `max_pods` pods: the node's labels
/// for admission (as the binary does), no root directory (no per-pod files) and no
/// resolv.conf.
pub(super) fn engine_config(member: &ClusterMemberConfig, max_pods: u32) -> Config {
    let mut node_labels = kubelet_sources::apiserver::node::default_labels(&member.node);
    node_labels.extend(member.node.labels.clone());
    Config {
        node_name: member.node.node_name.clone(),
        node_labels,
        node_ips: member.node.node_ips.clone(),
        root_dir: PathBuf::new(),
        resolv_conf: PathBuf::new(),
        max_pods,
        ..Config::default()
    }
}

/// A running hollow node.
pub(super) struct HollowNode {
    name: String,
    shutdown: CancellationToken,
    engine: JoinHandle<kubelet_core::Result<()>>,
    tasks: TaskTracker,
}

impl HollowNode {
    /// Builds and starts hollow node `i` with the identity in `kubeconfig`, sized for
    /// `max_pods` pods.
    pub(super) async fn start(i: usize, kubeconfig: &Path, max_pods: u32) -> Result<HollowNode> {
        let member_cfg = member_config(i);
        let name = member_cfg.node.node_name.clone();
        let clients = ApiClients::from_kubeconfig(&ClientConfig::new(kubeconfig))
            .await
            .with_context(|| format!("{name}: API clients from {}", kubeconfig.display()))?;
        let member = ClusterMember::new(clients, member_cfg.clone());
        let runtime: Arc<dyn ContainerRuntime> =
            Arc::new(InstrumentedRuntime::new(Arc::new(SimRuntime::new())));
        let cm = FakeContainerManager::with_pods(max_pods);
        let store = ApiObjectStore::new(member.api_client(), DEFAULT_TTL);
        let kubelet = Kubelet::builder()
            .config(engine_config(&member_cfg, max_pods))
            .runtime(runtime)
            .container_manager(Arc::new(cm))
            .source(member.source())
            .status_sink(member.status_sink())
            .object_store(Arc::new(store))
            .build()
            .with_context(|| format!("{name}: building the kubelet"))?;
        let shutdown = CancellationToken::new();
        let tasks = member.start(kubelet.handle(), shutdown.clone()).await;
        let engine = tokio::spawn(kubelet.run(shutdown.clone()));
        Ok(HollowNode {
            name,
            shutdown,
            engine,
            tasks,
        })
    }

    /// The node's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Asks the engine and the member's tasks to stop (pods are left as they are).
    pub(super) fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Waits (up to `timeout`) until the engine and the member's tasks have stopped.
    pub(super) async fn wait(self, timeout: Duration) -> Result<()> {
        self.shutdown.cancel();
        let name = self.name;
        let tasks = self.tasks;
        let engine = self.engine;
        let all = async move {
            let r = engine.await;
            tasks.wait().await;
            r
        };
        match tokio::time::timeout(timeout, all).await {
            Err(_) => anyhow::bail!("{name}: did not stop within {timeout:?}"),
            Ok(Err(e)) => anyhow::bail!("{name}: engine task: {e}"),
            Ok(Ok(Err(e))) => anyhow::bail!("{name}: engine: {e}"),
            Ok(Ok(Ok(()))) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_get_distinct_unroutable_addresses() {
        let cases = [
            (0, "198.18.0.1"),
            (1, "198.18.0.2"),
            (254, "198.18.0.255"),
            (255, "198.18.1.0"),
            (131_069, "198.19.255.254"),
        ];
        for (i, want) in cases {
            assert_eq!(node_ip(i), want, "node {i}");
        }
    }

    #[test]
    fn a_hollow_node_registers_its_label_and_taint_and_admits_on_them() {
        let cfg = member_config(7);
        assert_eq!(cfg.node.node_name, "hollow-node-7");
        assert_eq!(
            cfg.node.labels.get(HOLLOW_KEY).map(String::as_str),
            Some("true")
        );
        assert_eq!(cfg.node.taints.len(), 1);
        assert_eq!(cfg.node.taints[0].effect, "NoSchedule");
        assert!(
            kubelet_sources::apiserver::node::disallowed_node_labels(&cfg.node.labels).is_empty()
        );
        let engine = engine_config(&cfg, 30);
        assert_eq!(engine.max_pods, 30);
        assert!(engine.root_dir.as_os_str().is_empty());
        assert_eq!(
            engine.node_labels.get(HOLLOW_KEY).map(String::as_str),
            Some("true")
        );
        assert_eq!(
            engine
                .node_labels
                .get("kubernetes.io/hostname")
                .map(String::as_str),
            Some("hollow-node-7")
        );
    }
}
