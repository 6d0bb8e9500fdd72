//! The backend run: the workload through `CriRuntime` and the `ContainerRuntime` trait (image
//! user lookup, log directories, log symlinks, error mapping included); also the backend
//! helpers the other parts use to connect, count and clean up.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kubelet_core::runtime::{ContainerRuntime, ContainerState, ContainerSummary, ListFilter};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use tokio::task::JoinSet;

use super::raw::TeardownOrder;
use super::workload::{collect_errors, BenchPod, WorkloadRun};
use super::{BENCH_DIR, SETTLE, STOP_TIMEOUT};

pub(crate) fn cri_config(endpoint: &str) -> CriConfig {
    CriConfig {
        runtime_endpoint: endpoint.to_string(),
        request_timeout: Duration::from_secs(120),
        pod_logs_dir: Path::new(BENCH_DIR).join("pod-logs"),
        containers_log_dir: Path::new(BENCH_DIR).join("container-logs"),
        ..CriConfig::default()
    }
}

pub(crate) async fn connect_backend(endpoint: &str) -> Result<CriRuntime> {
    CriRuntime::connect(cri_config(endpoint))
        .await
        .with_context(|| format!("connecting to {endpoint}"))
}

pub(super) async fn backend_run(
    rt: &Arc<CriRuntime>,
    pods: &[BenchPod],
    image_ref: &str,
    order: TeardownOrder,
) -> WorkloadRun {
    let mut run = WorkloadRun::default();
    let t0 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for p in pods {
        let rt = rt.clone();
        let sandbox = p.sandbox.clone();
        let mut container = p.container.clone();
        container.image_ref = image_ref.to_string();
        set.spawn(async move {
            let t = kubelet_core::clock::monotonic_now();
            let sid = rt
                .run_pod_sandbox(&sandbox)
                .await
                .map_err(|e| e.to_string())?;
            let cid = rt
                .create_container(&sid, &container, &sandbox)
                .await
                .map_err(|e| e.to_string())?;
            rt.start_container(&cid).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((kubelet_core::clock::elapsed(t), sid, cid))
        });
    }
    let started = run.collect_started(&mut set).await;
    run.start = kubelet_core::clock::elapsed(t0);
    // PID 1 ignores SIGTERM until the shell has set its trap: let the last ones get there
    // (otherwise a stop right after start waits out the whole grace period).
    tokio::time::sleep(SETTLE).await;

    let t1 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for (sid, cid) in started {
        let rt = rt.clone();
        set.spawn(async move {
            rt.stop_container(&cid, STOP_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            if order == TeardownOrder::StopSandboxFirst {
                rt.stop_pod_sandbox(&sid).await.map_err(|e| e.to_string())?;
            }
            rt.remove_container(&cid).await.map_err(|e| e.to_string())?;
            if order == TeardownOrder::RemoveFirst {
                rt.stop_pod_sandbox(&sid).await.map_err(|e| e.to_string())?;
            }
            rt.remove_pod_sandbox(&sid)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(())
        });
    }
    collect_errors(&mut set, &mut run.errors).await;
    run.stop = kubelet_core::clock::elapsed(t1);
    run
}

/// Removes every container and sandbox whose pod name starts with `prefix`.
pub(crate) async fn cleanup_prefix(rt: &Arc<CriRuntime>, prefix: &str) {
    if let Ok(cs) = prefixed_containers(rt, prefix).await {
        for c in &cs {
            let _ = rt.stop_container(&c.id, Duration::from_secs(2)).await;
            let _ = rt.remove_container(&c.id).await;
        }
    }
    if let Ok(ss) = rt.list_pod_sandboxes(&ListFilter::all()).await {
        for s in ss.iter().filter(|s| s.pod.name.starts_with(prefix)) {
            let _ = rt.stop_pod_sandbox(&s.id).await;
            let _ = rt.remove_pod_sandbox(&s.id).await;
        }
    }
}

/// The containers whose pod name starts with `prefix`, as CRI lists them.
pub(crate) async fn prefixed_containers(
    rt: &CriRuntime,
    prefix: &str,
) -> Result<Vec<ContainerSummary>> {
    let mut listed = rt.list_containers(&ListFilter::all()).await?;
    listed.retain(|c| c.pod.name.starts_with(prefix));
    Ok(listed)
}

/// (running, all) containers whose pod name starts with `prefix`.
pub(super) async fn count_containers(rt: &CriRuntime, prefix: &str) -> Result<(usize, usize)> {
    let ours = prefixed_containers(rt, prefix).await?;
    let running = ours
        .iter()
        .filter(|c| c.state == ContainerState::Running)
        .count();
    Ok((running, ours.len()))
}
