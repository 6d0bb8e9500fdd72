//! The admin's side of a hollow-node run: the admin client, the node identities, waiting for
//! the hollow Nodes to be Ready, removing them (and their leases) afterwards, leftovers of an
//! interrupted run, and the nodes' request rate from the API server's audit log.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{DeleteParams, ListParams};
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::node::{node_name, HOLLOW_KEY, HOLLOW_VALUE};
use super::pause;
use super::workload::{delete_pods, RUN_LABEL};
use crate::control_plane;

/// The namespace of node leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Prefix of the user names of hollow nodes in the audit log.
const AUDIT_USER_PREFIX: &str = "system:node:hollow-node-";

/// An admin client of the control plane.
pub(super) async fn admin_client() -> Result<kube::Client> {
    let path = control_plane::admin_kubeconfig().await?;
    let cfg = kubelet_sources::apiserver::client::load_kubeconfig(&path)
        .await
        .with_context(|| format!("admin kubeconfig {}", path.display()))?;
    kube::Client::try_from(cfg).context("building the admin client")
}

/// Issues (once per machine: they are cached) the identities of nodes `0..n` and returns
/// their kubeconfigs.
pub(super) async fn node_kubeconfigs(n: usize, stop: &CancellationToken) -> Result<Vec<PathBuf>> {
    let mut paths = Vec::with_capacity(n);
    for i in 0..n {
        if stop.is_cancelled() {
            bail!("interrupted");
        }
        paths.push(control_plane::node_kubeconfig(&node_name(i)).await?);
    }
    Ok(paths)
}

fn hollow_selector() -> ListParams {
    ListParams::default().labels(&format!("{HOLLOW_KEY}={HOLLOW_VALUE}"))
}

fn is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Number of hollow Nodes the API server shows Ready, among `names`.
pub(super) async fn ready_nodes(admin: &kube::Client, names: &[String]) -> Result<usize> {
    let nodes = Api::<Node>::all(admin.clone())
        .list(&hollow_selector())
        .await
        .context("listing hollow nodes")?;
    Ok(nodes
        .items
        .iter()
        .filter(|n| n.metadata.name.as_ref().is_some_and(|m| names.contains(m)))
        .filter(|n| is_ready(n))
        .count())
}

/// Polls until all of `names` are Ready; `Err` after `timeout`.
pub(super) async fn wait_ready(
    admin: &kube::Client,
    names: &[String],
    timeout: Duration,
    stop: &CancellationToken,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let ready = ready_nodes(admin, names).await?;
        if ready == names.len() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{ready}/{} hollow nodes Ready after {timeout:?}",
                names.len()
            );
        }
        pause(stop, Duration::from_millis(250)).await?;
    }
}

/// Deletes the Node objects and node leases of `names` (missing ones are fine); returns the
/// failures.
pub(super) async fn delete_nodes(admin: &kube::Client, names: &[String]) -> Vec<String> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let leases: Api<Lease> = Api::namespaced(admin.clone(), LEASE_NAMESPACE);
    let dp = DeleteParams::default();
    let mut failures = Vec::new();
    for name in names {
        if let Err(e) = nodes.delete(name, &dp).await {
            if !is_not_found(&e) {
                failures.push(format!("deleting node {name}: {e}"));
            }
        }
        if let Err(e) = leases.delete(name, &dp).await {
            if !is_not_found(&e) {
                failures.push(format!("deleting lease {LEASE_NAMESPACE}/{name}: {e}"));
            }
        }
    }
    failures
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Deletes the namespace (missing is fine).
pub(super) async fn delete_namespace(admin: &kube::Client, namespace: &str) -> Result<()> {
    match Api::<Namespace>::all(admin.clone())
        .delete(namespace, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting namespace {namespace}")),
    }
}

/// Polls until the namespace no longer exists; `false` after `timeout`.
pub(super) async fn wait_namespace_gone(
    admin: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> bool {
    let api: Api<Namespace> = Api::all(admin.clone());
    let deadline = Instant::now() + timeout;
    loop {
        match api.get_opt(namespace).await {
            Ok(None) => return true,
            Ok(Some(_)) => {}
            Err(e) => tracing::warn!(namespace, error = %e, "reading the namespace failed"),
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Removes what an interrupted earlier run left: hollow Nodes (and their leases) and run
/// namespaces (their pods force-deleted first). Returns what it removed.
pub(super) async fn remove_leftovers(admin: &kube::Client) -> Result<Vec<String>> {
    let nodes: Vec<String> = Api::<Node>::all(admin.clone())
        .list(&hollow_selector())
        .await
        .context("listing hollow nodes")?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let namespaces = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default().labels(RUN_LABEL))
        .await
        .context("listing hollow namespaces")?;
    let mut removed = Vec::new();
    for ns in namespaces.items {
        let Some(name) = ns.metadata.name else {
            continue;
        };
        if ns.metadata.deletion_timestamp.is_none() {
            removed.push(format!("namespace {name}"));
        }
        delete_pods(admin, &name, &nodes, Some(0), 10).await?;
        delete_namespace(admin, &name).await?;
    }
    for f in delete_nodes(admin, &nodes).await {
        tracing::warn!("{f}");
    }
    removed.extend(nodes.into_iter().map(|n| format!("node {n}")));
    Ok(removed)
}

/// The control plane's components and their pids (`run/<name>.pid` next to the admin
/// kubeconfig, as `scripts/control-plane.sh` records them); those it cannot find are left out.
pub(super) async fn control_plane_pids() -> Vec<(String, u32)> {
    let Ok(admin) = control_plane::admin_kubeconfig().await else {
        return Vec::new();
    };
    let Some(dir) = admin.parent().map(|d| d.join("run")) else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for name in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        if let Ok(text) = tokio::fs::read_to_string(dir.join(format!("{name}.pid"))).await {
            if let Ok(pid) = text.trim().parse() {
                pids.push((name.to_string(), pid));
            }
        }
    }
    pids
}

/// The hollow nodes' requests over the last `seconds` from the audit log
/// (`scripts/control-plane.sh audit-rate`): its report, first line the total.
pub(super) async fn audit_rate(seconds: u64) -> Result<String> {
    control_plane::output(&["audit-rate", AUDIT_USER_PREFIX, &seconds.max(1).to_string()]).await
}
