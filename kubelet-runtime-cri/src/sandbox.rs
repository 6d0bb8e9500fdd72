//! Pod sandboxes over CRI (their listing is in [`crate::listing`]): `PodSandboxStatus`,
//! `RunPodSandbox`, `StopPodSandbox`, `RemovePodSandbox`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{
    ListFilter, RuntimeError, RuntimeResult, SandboxConfig, SandboxStatus,
};
use tracing::{debug, info};

use crate::client::ctx;
use crate::{mapping, CriRuntime};

/// The CRI label selector of a listing: the pod uid label, when the filter names a pod.
pub(crate) fn uid_selector(filter: &ListFilter) -> std::collections::HashMap<String, String> {
    filter
        .pod_uid
        .iter()
        .map(|uid| (mapping::POD_UID_LABEL.to_string(), uid.clone()))
        .collect()
}

/// `PodSandboxStatus`: state, IPs and network mode of one sandbox.
pub(crate) async fn status(rt: &CriRuntime, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::PodSandboxStatusRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            verbose: false,
        },
        rt.deadline(),
    );
    let resp = rt
        .call(
            ctx("PodSandboxStatus", "sandbox", sandbox_id),
            rt.deadline(),
            client.pod_sandbox_status(req),
        )
        .await?;
    resp.status
        .as_ref()
        .and_then(mapping::sandbox_status)
        .ok_or_else(|| RuntimeError::NotFound {
            kind: "sandbox",
            id: sandbox_id.to_string(),
        })
}

/// `RunPodSandbox`, after creating the pod's log directory.
pub(crate) async fn run(rt: &CriRuntime, config: &SandboxConfig) -> RuntimeResult<String> {
    let pod = kubelet_core::pod::full_name(&config.pod);
    let uid = kubelet_core::pod::uid(&config.pod).to_string();
    if let Err(e) = tokio::fs::create_dir_all(&config.log_directory).await {
        return Err(RuntimeError::OperationFailed {
            operation: "RunPodSandbox",
            message: format!(
                "creating pod log directory {}: {e}",
                config.log_directory.display()
            ),
        });
    }
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::RunPodSandboxRequest {
            config: Some(mapping::sandbox_config(config, &rt.options)),
            runtime_handler: config.runtime_handler.clone(),
        },
        rt.deadline(),
    );
    let resp = rt
        .call(
            ctx("RunPodSandbox", "sandbox", &pod),
            rt.deadline(),
            client.run_pod_sandbox(req),
        )
        .await?;
    info!(pod = %pod, uid = %uid, sandbox = %resp.pod_sandbox_id, attempt = config.attempt, "pod sandbox running");
    Ok(resp.pod_sandbox_id)
}

/// `StopPodSandbox`; stopping a stopped sandbox succeeds.
pub(crate) async fn stop(rt: &CriRuntime, sandbox_id: &str) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::StopPodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        },
        rt.deadline(),
    );
    rt.call(
        ctx("StopPodSandbox", "sandbox", sandbox_id),
        rt.deadline(),
        client.stop_pod_sandbox(req),
    )
    .await?;
    debug!(sandbox = sandbox_id, "pod sandbox stopped");
    Ok(())
}

/// `RemovePodSandbox`; removing a missing sandbox succeeds.
pub(crate) async fn remove(rt: &CriRuntime, sandbox_id: &str) -> RuntimeResult<()> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::RemovePodSandboxRequest {
            pod_sandbox_id: sandbox_id.to_string(),
        },
        rt.deadline(),
    );
    match rt
        .call(
            ctx("RemovePodSandbox", "sandbox", sandbox_id),
            rt.deadline(),
            client.remove_pod_sandbox(req),
        )
        .await
    {
        Ok(_) | Err(RuntimeError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
