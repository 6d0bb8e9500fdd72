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

/// The runtime's `config` info from `Status` with `verbose` (containerd's CRI configuration,
/// JSON); `None` when the call fails or the runtime gives none.
async fn verbose_config(rt: &CriRuntime) -> Option<String> {
    let mut client = rt.runtime.clone();
    let req = rt.request(cri::StatusRequest { verbose: true }, rt.deadline());
    let resp = rt
        .call(
            ctx("Status", "runtime", ""),
            rt.deadline(),
            client.status(req),
        )
        .await
        .ok()?;
    resp.info.get("config").cloned()
}

/// The sandbox image the runtime is configured with, from `Status` with `verbose` (the
/// `config` info's `sandboxImage`, as containerd reports it); `None` when it says nothing.
pub(crate) async fn sandbox_image(rt: &CriRuntime) -> Option<String> {
    let config: serde_json::Value = serde_json::from_str(&verbose_config(rt).await?).ok()?;
    config
        .get("sandboxImage")
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// The cgroup driver the runtime's default handler uses, from `Status` with `verbose`:
/// containerd's `config` info names its default runtime and that runtime's runc options
/// (`SystemdCgroup`). `None` when the runtime does not say.
pub(crate) async fn cgroup_driver(rt: &CriRuntime) -> Option<&'static str> {
    cgroup_driver_from_config(&verbose_config(rt).await?)
}

/// [`cgroup_driver`]'s reading of containerd's `config` info (JSON).
pub(crate) fn cgroup_driver_from_config(config: &str) -> Option<&'static str> {
    let config: serde_json::Value = serde_json::from_str(config).ok()?;
    let containerd = config.get("containerd")?;
    let default = containerd.get("defaultRuntimeName")?.as_str()?;
    let systemd = containerd
        .get("runtimes")?
        .get(default)?
        .get("options")?
        .get("SystemdCgroup")?
        .as_bool()?;
    Some(if systemd { "systemd" } else { "cgroupfs" })
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

#[cfg(test)]
mod tests {
    use super::cgroup_driver_from_config;

    #[test]
    fn containerds_cgroup_driver() {
        let config = |options: &str| {
            format!(
                r#"{{"containerd":{{"snapshotter":"overlayfs","defaultRuntimeName":"runc","runtimes":{{"runc":{{"runtimeType":"io.containerd.runc.v2","options":{options}}}}}}},"sandboxImage":"pause"}}"#
            )
        };
        let table: &[(String, Option<&str>)] = &[
            (
                config(r#"{"SystemdCgroup":true,"BinaryName":""}"#),
                Some("systemd"),
            ),
            (config(r#"{"SystemdCgroup":false}"#), Some("cgroupfs")),
            (config("{}"), None),
            (config("null"), None),
            ("{}".into(), None),
            ("not json".into(), None),
        ];
        for (text, want) in table {
            assert_eq!(cgroup_driver_from_config(text), *want, "{text}");
        }
    }
}
