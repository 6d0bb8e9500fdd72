//! Containers over CRI (their listing is in [`crate::listing`]): `ContainerStatus`,
//! `CreateContainer` (with the image user lookup and the legacy `/var/log/containers`
//! symlink), `StartContainer`, `StopContainer`, `RemoveContainer` (with the container's log
//! files) and `ReopenContainerLog`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{
    ContainerConfig, ContainerStatus, ContainerSummary, ResourcesUpdate, RuntimeError,
    RuntimeResult, SandboxConfig,
};
use tracing::{info, warn};

use crate::client::{ctx, whole_seconds_up, Ctx};
use crate::image_user::image_user;
use crate::{mapping, CriRuntime};

async fn raw_container_status(rt: &CriRuntime, id: &str) -> RuntimeResult<cri::ContainerStatus> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: false,
        },
        rt.deadline(),
    );
    let resp = rt
        .call(
            ctx("ContainerStatus", "container", id),
            rt.deadline(),
            client.container_status(req),
        )
        .await?;
    resp.status.ok_or_else(|| RuntimeError::NotFound {
        kind: "container",
        id: id.to_string(),
    })
}

fn log_symlink(rt: &CriRuntime, pod: &str, namespace: &str, container: &str, id: &str) -> PathBuf {
    rt.config
        .containers_log_dir
        .join(mapping::log_symlink_name(pod, namespace, container, id))
}

/// `ContainerStatus` of a container just listed: the sandbox id from that listing (one call).
pub(crate) async fn status_listed(
    rt: &CriRuntime,
    listed: &ContainerSummary,
) -> RuntimeResult<ContainerStatus> {
    let status = raw_container_status(rt, &listed.id).await?;
    mapping::container_status(&status, &listed.sandbox_id).ok_or_else(|| RuntimeError::NotFound {
        kind: "container",
        id: listed.id.clone(),
    })
}

/// `ContainerStatus`, with the sandbox id from a listing of the container (two calls).
pub(crate) async fn status(rt: &CriRuntime, container_id: &str) -> RuntimeResult<ContainerStatus> {
    let status = raw_container_status(rt, container_id).await?;
    // CRI's ContainerStatus does not name the sandbox; the listing does.
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                id: container_id.to_string(),
                ..Default::default()
            }),
        },
        rt.deadline(),
    );
    let listed = rt
        .call(
            ctx("ListContainers", "container", container_id),
            rt.deadline(),
            client.list_containers(req),
        )
        .await?;
    let sandbox_id = listed
        .containers
        .iter()
        .find(|c| c.id == status.id)
        .map(|c| c.pod_sandbox_id.clone())
        .unwrap_or_default();
    mapping::container_status(&status, &sandbox_id).ok_or_else(|| RuntimeError::NotFound {
        kind: "container",
        id: container_id.to_string(),
    })
}

/// `CreateContainer`: the mapped config with the image's user, the log directory, and the
/// legacy `/var/log/containers` symlink.
pub(crate) async fn create(
    rt: &CriRuntime,
    sandbox_id: &str,
    config: &ContainerConfig,
    sandbox: &SandboxConfig,
) -> RuntimeResult<String> {
    let pod = &config.pod;
    let pod_name = kubelet_core::pod::name(pod);
    let namespace = kubelet_core::pod::namespace(pod);
    let name = config.container.name.as_str();
    let image_user = image_user(rt, config).await?;
    let container_config = mapping::container_config(config, &image_user, &rt.options)?;
    let log_file = sandbox.log_directory.join(&config.log_path);
    if let Some(dir) = log_file.parent() {
        if let Err(e) = tokio::fs::create_dir_all(dir).await {
            return Err(RuntimeError::OperationFailed {
                operation: "CreateContainer",
                message: format!("creating container log directory {}: {e}", dir.display()),
            });
        }
    }
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::CreateContainerRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            config: Some(container_config),
            sandbox_config: Some(mapping::sandbox_config(sandbox, &rt.options)),
        },
        rt.deadline(),
    );
    let id = rt
        .call(
            Ctx {
                image: Some(&config.image_ref),
                ..ctx("CreateContainer", "sandbox", sandbox_id)
            },
            rt.deadline(),
            client.create_container(req),
        )
        .await?
        .container_id;

    // The legacy symlink log shippers read (Go creates it after a successful start; the
    // target appears when the runtime opens the log).
    let link = log_symlink(rt, pod_name, namespace, name, &id);
    if let Err(e) = tokio::fs::create_dir_all(&rt.config.containers_log_dir).await {
        warn!(dir = %rt.config.containers_log_dir.display(), error = %e, "cannot create containers log directory");
    } else {
        remove_file_if_present(&link).await;
        if let Err(e) = tokio::fs::symlink(&log_file, &link).await {
            warn!(link = %link.display(), target = %log_file.display(), error = %e, "cannot create container log symlink");
        }
    }
    info!(pod = %format!("{namespace}/{pod_name}"), uid = kubelet_core::pod::uid(pod), container = name, id = %id, attempt = config.restart_count, "container created");
    Ok(id)
}

/// `StartContainer`.
pub(crate) async fn start(rt: &CriRuntime, container_id: &str) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::StartContainerRequest {
            container_id: container_id.to_string(),
        },
        rt.deadline(),
    );
    rt.call(
        ctx("StartContainer", "container", container_id),
        rt.deadline(),
        client.start_container(req),
    )
    .await?;
    Ok(())
}

/// `StopContainer` with `timeout` as its grace period (the call's deadline on top).
pub(crate) async fn stop(
    rt: &CriRuntime,
    container_id: &str,
    timeout: Duration,
) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let deadline = rt.config.request_timeout.saturating_add(timeout);
    let req = rt.request(
        cri::StopContainerRequest {
            container_id: container_id.to_string(),
            timeout: whole_seconds_up(timeout),
        },
        Some(deadline),
    );
    rt.call(
        ctx("StopContainer", "container", container_id),
        Some(deadline),
        client.stop_container(req),
    )
    .await?;
    Ok(())
}

/// `RemoveContainer`, after dropping its log file and symlink (as Go's `removeContainerLog`);
/// removing a missing container succeeds.
pub(crate) async fn remove(rt: &CriRuntime, container_id: &str) -> RuntimeResult<()> {
    // As Go's removeContainerLog: drop the log file and the legacy symlink first.
    match raw_container_status(rt, container_id).await {
        Ok(status) => {
            let label = |k: &str| status.labels.get(k).cloned().unwrap_or_default();
            if !status.log_path.is_empty() {
                let log = Path::new(&status.log_path);
                remove_file_if_present(log).await;
                // And its rotated files (Go's `ContainerLogManager.Clean`: `<log>*`).
                for rotated in rotated_logs(log).await {
                    remove_file_if_present(&rotated).await;
                }
            }
            let link = log_symlink(
                rt,
                &label(mapping::POD_NAME_LABEL),
                &label(mapping::POD_NAMESPACE_LABEL),
                &label(mapping::CONTAINER_NAME_LABEL),
                &status.id,
            );
            remove_file_if_present(&link).await;
        }
        Err(RuntimeError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::RemoveContainerRequest {
            container_id: container_id.to_string(),
        },
        rt.deadline(),
    );
    match rt
        .call(
            ctx("RemoveContainer", "container", container_id),
            rt.deadline(),
            client.remove_container(req),
        )
        .await
    {
        Ok(_) | Err(RuntimeError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The rotated files of a container log (`<log>.*`).
async fn rotated_logs(log: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.");
    let mut out = Vec::new();
    if let Ok(mut rd) = tokio::fs::read_dir(dir).await {
        while let Ok(Some(e)) = rd.next_entry().await {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                out.push(e.path());
            }
        }
    }
    out
}

/// Makes the runtime reopen the container's log file (after the kubelet rotated it).
pub(crate) async fn reopen_log(rt: &CriRuntime, container_id: &str) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ReopenContainerLogRequest {
            container_id: container_id.to_string(),
        },
        rt.deadline(),
    );
    rt.call(
        ctx("ReopenContainerLog", "container", container_id),
        rt.deadline(),
        client.reopen_container_log(req),
    )
    .await?;
    Ok(())
}

/// `UpdateContainerResources` with only what `update` sets (containerd leaves zero fields
/// as they are, which Go's CPU manager relies on too).
pub(crate) async fn update_resources(
    rt: &CriRuntime,
    container_id: &str,
    update: &ResourcesUpdate,
) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::UpdateContainerResourcesRequest {
            container_id: container_id.to_string(),
            linux: Some(cri::LinuxContainerResources {
                cpuset_cpus: update.cpuset_cpus.clone().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        },
        rt.deadline(),
    );
    rt.call(
        ctx("UpdateContainerResources", "container", container_id),
        rt.deadline(),
        client.update_container_resources(req),
    )
    .await?;
    Ok(())
}

async fn remove_file_if_present(path: &Path) {
    match tokio::fs::remove_file(path).await {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warn!(path = %path.display(), error = %e, "cannot remove file"),
    }
}
