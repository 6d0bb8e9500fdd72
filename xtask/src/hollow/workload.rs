//! The hollow nodes' workload: a namespace `hollow-<run id>` with N×M pods that tolerate the
//! hollow taint and select the hollow label (so the real scheduler binds them to hollow nodes
//! only), created by the admin; then waited for (Running as the API server shows them) and
//! deleted.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec, ServiceAccount, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::node::{HOLLOW_EFFECT, HOLLOW_KEY, HOLLOW_VALUE};
use super::pause;

/// An image the simulated runtime "pulls" (it accepts any); the node environment's pause image.
const IMAGE: &str = "kubelet-rs.local/pause:1.0";
/// Label on the run's namespace (and pods), valued with the run id.
pub(super) const RUN_LABEL: &str = "kubelet-rs.io/hollow-run";
/// Attempts per pod creation (transient API errors are retried).
const CREATE_ATTEMPTS: u32 = 5;

/// The run's namespace name.
pub(super) fn namespace_name(run_id: &str) -> String {
    format!("hollow-{run_id}")
}

/// Pod `i` of the run: one container of the pause image, no service-account token (a hollow
/// node has no root directory, so no volumes), tolerating the hollow taint and selecting
/// the hollow label.
pub(super) fn pod(namespace: &str, run_id: &str, i: usize) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("hollow-pod-{i:05}")),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                RUN_LABEL.to_string(),
                run_id.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            node_selector: Some(BTreeMap::from([(
                HOLLOW_KEY.to_string(),
                HOLLOW_VALUE.to_string(),
            )])),
            tolerations: Some(vec![Toleration {
                key: Some(HOLLOW_KEY.to_string()),
                operator: Some("Equal".to_string()),
                value: Some(HOLLOW_VALUE.to_string()),
                effect: Some(HOLLOW_EFFECT.to_string()),
                toleration_seconds: None,
            }]),
            termination_grace_period_seconds: Some(5),
            containers: vec![Container {
                name: "main".to_string(),
                image: Some(IMAGE.to_string()),
                image_pull_policy: Some("IfNotPresent".to_string()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates the run's namespace and waits until its `default` service account exists (pods
/// are refused before that).
pub(super) async fn create_namespace(
    admin: &kube::Client,
    namespace: &str,
    run_id: &str,
    stop: &CancellationToken,
) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                RUN_LABEL.to_string(),
                run_id.to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {namespace}"))?;
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if sas.get_opt("default").await?.is_some() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("namespace {namespace}: no default service account after 60 s");
        }
        pause(stop, Duration::from_millis(200)).await?;
    }
}

/// Creates pods `0..count` with up to `concurrency` requests in flight.
pub(super) async fn create_pods(
    admin: &kube::Client,
    namespace: &str,
    run_id: &str,
    count: usize,
    concurrency: usize,
    stop: &CancellationToken,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let creates = futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            let p = pod(namespace, run_id, i);
            async move { create_one(&api, &p).await }
        })
        .buffer_unordered(concurrency.max(1));
    tokio::select! {
        _ = stop.cancelled() => bail!("interrupted"),
        r = creates.try_collect::<Vec<()>>() => r.map(|_| ()),
    }
}

async fn create_one(api: &Api<Pod>, p: &Pod) -> Result<()> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let mut delay = Duration::from_millis(200);
    for attempt in 1..=CREATE_ATTEMPTS {
        match api.create(&PostParams::default(), p).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(e) if attempt < CREATE_ATTEMPTS => {
                tracing::warn!(pod = %name, error = %e, "creating a pod failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(e) => return Err(e).with_context(|| format!("creating pod {name}")),
        }
    }
    bail!("creating pod {name}: no attempt left")
}

/// Number of the namespace's pods whose phase is not Running (a metadata-only list, so
/// polling stays cheap for the process being measured).
pub(super) async fn not_running(admin: &kube::Client, namespace: &str) -> Result<usize> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let lp = ListParams::default().fields("status.phase!=Running");
    Ok(api
        .list_metadata(&lp)
        .await
        .with_context(|| format!("listing pods of {namespace}"))?
        .items
        .len())
}

/// Number of the namespace's pods (any phase).
pub(super) async fn count(admin: &kube::Client, namespace: &str) -> Result<usize> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    Ok(api
        .list_metadata(&ListParams::default())
        .await
        .with_context(|| format!("listing pods of {namespace}"))?
        .items
        .len())
}

/// Polls until every pod of the namespace is Running; `Err` after `timeout`.
pub(super) async fn wait_running(
    admin: &kube::Client,
    namespace: &str,
    timeout: Duration,
    stop: &CancellationToken,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = not_running(admin, namespace).await?;
        if left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{left} pods of {namespace} not Running after {timeout:?}");
        }
        pause(stop, Duration::from_millis(500)).await?;
    }
}

/// Deletes the namespace's pods with `grace` seconds (`None`: each pod's own): one
/// delete-collection request per node in `nodes` (field selector `spec.nodeName`), up to
/// `concurrency` at once, then one for pods bound to no node. Small requests: one over
/// thousands of pods outlasts the API server's request timeout on a small machine.
pub(super) async fn delete_pods(
    admin: &kube::Client,
    namespace: &str,
    nodes: &[String],
    grace: Option<u32>,
    concurrency: usize,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(admin.clone(), namespace);
    let dp = DeleteParams {
        grace_period_seconds: grace,
        ..DeleteParams::default()
    };
    let selectors: Vec<String> = nodes
        .iter()
        .map(|n| format!("spec.nodeName={n}"))
        .chain(std::iter::once("spec.nodeName=".to_string()))
        .collect();
    futures::stream::iter(selectors)
        .map(|sel| {
            let (api, dp) = (api.clone(), dp.clone());
            async move {
                match api
                    .delete_collection(&dp, &ListParams::default().fields(&sel))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => {
                        Err(e).with_context(|| format!("deleting the pods of {namespace} ({sel})"))
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

/// Polls until the namespace has no pod left; `false` after `timeout`.
pub(super) async fn wait_gone(admin: &kube::Client, namespace: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match count(admin, namespace).await {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => tracing::warn!(namespace, error = %e, "listing pods failed"),
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_go_only_to_hollow_nodes_and_need_no_volumes() {
        let p = pod("hollow-x", "x", 42);
        assert_eq!(p.metadata.name.as_deref(), Some("hollow-pod-00042"));
        assert_eq!(p.metadata.namespace.as_deref(), Some("hollow-x"));
        let spec = p.spec.unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert!(spec.volumes.is_none());
        assert_eq!(
            spec.node_selector
                .unwrap()
                .get(HOLLOW_KEY)
                .map(String::as_str),
            Some(HOLLOW_VALUE)
        );
        let t = &spec.tolerations.unwrap()[0];
        assert_eq!(t.key.as_deref(), Some(HOLLOW_KEY));
        assert_eq!(t.effect.as_deref(), Some(HOLLOW_EFFECT));
        assert!(spec.node_name.is_none(), "the scheduler binds them");
    }
}
