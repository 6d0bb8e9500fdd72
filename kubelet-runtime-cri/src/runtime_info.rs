//! The runtime's name, version and readiness over CRI: `Version`, `Status`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{RuntimeHandler, RuntimeResult, RuntimeStatus, RuntimeVersion};

use crate::client::ctx;
use crate::{CriRuntime, CRI_API_VERSION};

/// `Version`, asking for API `v1`.
pub(crate) async fn version(rt: &CriRuntime) -> RuntimeResult<RuntimeVersion> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::VersionRequest {
            version: CRI_API_VERSION.to_string(),
        },
        rt.deadline(),
    );
    let v = rt
        .call(
            ctx("Version", "runtime", ""),
            rt.deadline(),
            client.version(req),
        )
        .await?;
    Ok(RuntimeVersion {
        runtime_name: v.runtime_name,
        runtime_version: v.runtime_version,
        runtime_api_version: v.runtime_api_version,
    })
}

/// `Status`: the RuntimeReady and NetworkReady conditions, and why any is false; the runtime
/// handlers and features, where the runtime reports them.
pub(crate) async fn status(rt: &CriRuntime) -> RuntimeResult<RuntimeStatus> {
    let mut client = rt.runtime.clone();
    let req = rt.request(cri::StatusRequest { verbose: false }, rt.deadline());
    let resp = rt
        .call(
            ctx("Status", "runtime", ""),
            rt.deadline(),
            client.status(req),
        )
        .await?;
    let conditions = resp.status.map(|s| s.conditions).unwrap_or_default();
    let ready = |t: &str| conditions.iter().any(|c| c.r#type == t && c.status);
    let message = conditions
        .iter()
        .filter(|c| !c.status)
        .map(|c| format!("{} is false: {}: {}", c.r#type, c.reason, c.message))
        .collect::<Vec<_>>()
        .join("; ");
    Ok(RuntimeStatus {
        runtime_ready: ready("RuntimeReady"),
        network_ready: ready("NetworkReady"),
        message,
        handlers: resp
            .runtime_handlers
            .iter()
            .map(|h| RuntimeHandler {
                name: h.name.clone(),
                recursive_read_only_mounts: h
                    .features
                    .as_ref()
                    .is_some_and(|f| f.recursive_read_only_mounts),
                user_namespaces: h.features.as_ref().is_some_and(|f| f.user_namespaces),
            })
            .collect(),
        supplemental_groups_policy: resp.features.map(|f| f.supplemental_groups_policy),
    })
}
