//! Stopping a pod and removing what is left of it (Go's `killPodWithSyncResult` and the
//! cleanup of a terminated pod's containers, sandboxes, volumes and pod-level resources).
//! Only pod workers call these, one call at a time per pod.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;

use crate::engine::Engine;
use crate::hooks::{container_spec, whole_secs, KillTarget, MIN_GRACE_SECONDS};
use crate::pod;
use crate::pod_status::{self, PodRuntimeStatus};
use crate::runtime::{ContainerState, RuntimeError, SandboxState};
use crate::termination_message;

use super::{update_status, SyncError, WorkerMemory};

/// Stops every running container and then every ready sandbox: app and regular init
/// containers first (in parallel), then sidecars (in parallel) with what is left of the
/// grace period, so sidecars outlive the containers they serve.
pub(crate) async fn kill_pod(
    e: &Engine,
    p: &Pod,
    rt: &PodRuntimeStatus,
    grace: Duration,
) -> Result<(), RuntimeError> {
    let pod_ip = rt.pod_ips().into_iter().next().unwrap_or_default();
    let started = tokio::time::Instant::now();
    let inits = p
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[]);
    let (sidecars, others): (Vec<_>, Vec<_>) = rt.running_containers().partition(|c| {
        inits
            .iter()
            .any(|i| i.name == c.summary.name && pod::is_restartable_init(i))
    });
    let mut first_err = None;
    for (phase, group) in [others, sidecars].into_iter().enumerate() {
        let grace = if phase == 0 {
            whole_secs(grace)
        } else {
            whole_secs(grace.saturating_sub(started.elapsed())).max(MIN_GRACE_SECONDS)
        };
        let stops = group.into_iter().map(|c| {
            let target = KillTarget {
                id: &c.summary.id,
                name: &c.summary.name,
                spec: container_spec(p, &c.summary.name),
                pod_ip: &pod_ip,
            };
            let message = format!("Stopping container {}", c.summary.name);
            async move { e.hooks.kill_container(p, &target, grace, &message).await }
        });
        for r in join_all(stops).await {
            if let Err(err) = r {
                first_err.get_or_insert(err);
            }
        }
    }
    if let Some(err) = first_err {
        return Err(err);
    }
    for s in rt
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready)
    {
        e.runtime.stop_pod_sandbox(&s.id).await?;
    }
    Ok(())
}

/// Reads the termination messages of exited containers that have none (once each).
pub(crate) async fn fill_termination_messages(
    e: &Engine,
    p: &Pod,
    rt: &mut PodRuntimeStatus,
    memory: &mut WorkerMemory,
) {
    for c in rt.containers.iter_mut() {
        if c.summary.state != ContainerState::Exited || !c.message.is_empty() {
            continue;
        }
        if let Some(m) = memory.messages.get(&c.summary.id) {
            c.message = m.clone();
            continue;
        }
        let Some(spec) = container_spec(p, &c.summary.name) else {
            continue;
        };
        let message = termination_message::read(
            &e.config.root_dir,
            p,
            spec,
            c.summary.attempt,
            c.exit_code,
            c.log_path.as_deref(),
        )
        .await;
        memory
            .messages
            .insert(c.summary.id.clone(), message.clone());
        c.message = message;
    }
    let ids: std::collections::HashSet<&str> = rt
        .containers
        .iter()
        .map(|c| c.summary.id.as_str())
        .collect();
    memory.messages.retain(|id, _| ids.contains(id.as_str()));
}

/// Terminates a pod: stops everything with the grace period and records the final status.
pub(crate) async fn terminate_pod(
    e: &Engine,
    p: &Arc<Pod>,
    grace: Duration,
    memory: &mut WorkerMemory,
) -> Result<(), RuntimeError> {
    let uid = pod::uid(p);
    e.prober.stop_liveness_and_startup(uid);
    // Stopping reads the runtime afresh at every step; nothing stored is served any more.
    e.pod_cache.remove(uid);
    let rt = pod_status::fetch(e.runtime.as_ref(), uid).await?;
    kill_pod(e, p, &rt, grace).await?;
    e.prober.remove_pod(uid);
    // Nothing runs any more: its volumes go (best effort; cleanup retries).
    if let Err(err) = e.volumes.unmount_volumes(uid).await {
        tracing::warn!(pod = %pod::full_name(p), uid, error = %err, "tearing down volumes failed");
    }
    // An orphan found in the runtime has no spec and no status to publish.
    if p.spec.is_some() {
        let mut rt = pod_status::fetch(e.runtime.as_ref(), uid).await?;
        fill_termination_messages(e, p, &mut rt, memory).await;
        let terminated = pod::is_deleted(p) || !e.pods().contains(uid);
        update_status(e, p, &rt, memory, terminated);
        if is_evicted(memory) {
            remove_evicted_containers(e, p, &rt).await;
        }
    }
    Ok(())
}

/// Whether the kubelet failed the pod as evicted (Go's `eviction.PodIsEvicted`).
fn is_evicted(memory: &WorkerMemory) -> bool {
    memory
        .failure
        .as_ref()
        .is_some_and(|f| f.reason == crate::eviction::messages::REASON)
}

/// Removes an evicted pod's stopped containers once its final status is recorded (Go's
/// `cleanUpContainersInPod` with `removeAll` for evicted pods): the eviction manager waits
/// for them to be gone, and what their writable layers held is freed before it measures
/// again. Best effort: what fails here the next reclaim removes.
async fn remove_evicted_containers(e: &Engine, p: &Pod, rt: &PodRuntimeStatus) {
    for c in rt
        .containers
        .iter()
        .filter(|c| c.summary.state != ContainerState::Running)
    {
        if let Err(err) = e.runtime.remove_container(&c.summary.id).await {
            tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), container = %c.summary.id, error = %err, "removing an evicted pod's container failed");
        }
    }
}

/// Removes the terminated pod's containers, sandboxes and pod-level resources.
pub(crate) async fn cleanup_pod(e: &Engine, p: &Arc<Pod>) -> Result<(), SyncError> {
    let uid = pod::uid(p);
    e.pod_cache.remove(uid);
    let rt = pod_status::fetch(e.runtime.as_ref(), uid).await?;
    for c in &rt.containers {
        e.runtime.remove_container(&c.summary.id).await?;
    }
    for s in &rt.sandboxes {
        if s.state == SandboxState::Ready {
            e.runtime.stop_pod_sandbox(&s.id).await?;
        }
        e.runtime.remove_pod_sandbox(&s.id).await?;
    }
    e.volumes.teardown_pod(uid).await?;
    e.cm.remove_pod_resources(uid).await?;
    // Termination-message files; the pod directory itself belongs to the volume manager.
    if e.config.root_dir.as_os_str().is_empty() || !pod::is_safe_uid(uid) {
        return Ok(());
    }
    let dir = e.config.root_dir.join("pods").join(uid).join("containers");
    match tokio::fs::remove_dir_all(&dir).await {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(SyncError::RemoveFile { path: dir, error }),
    }
}
