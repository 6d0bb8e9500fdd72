//! What a new sandbox needs beyond its config: the runtime handler of the pod's
//! RuntimeClass (Go's `runtimeClassManager.LookupRuntimeHandler`) and the user-namespace
//! check of `hostUsers: false` (Go's `HandlerSupportsUserNamespaces`).
//!
//! Both run only when a sandbox is about to be created; a failure is the message of the
//! `FailedCreatePodSandBox` event ("Failed to create pod sandbox: …") and the pod waits,
//! retried at the next sync, as in Go:
//! - `runtimeClassName` naming no RuntimeClass: `runtimeclass.node.k8s.io "x" not found`
//!   (Go's NotFound error); in standalone mode, where there is no API server to ask, the pod
//!   does not run either (Go would silently use the default handler);
//! - `hostUsers: false` on a handler that does not report user-namespace support (CRI
//!   `runtime_handlers`; runtimes that report none, as containerd 1.6/1.7, support none):
//!   `RuntimeClass handler "h" does not support user namespaces`. kubelet-rs does not
//!   allocate ID mappings, so a handler that does support them is refused too, saying so.

use k8s_openapi::api::core::v1::Pod;

use crate::engine::Engine;
use crate::objects::ObjectError;
use crate::runtime::RuntimeHandler;

/// The runtime handler the pod's sandbox must run with (empty: the default handler).
pub(super) async fn runtime_handler(e: &Engine, p: &Pod) -> Result<String, String> {
    let Some(name) = p
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.as_deref())
        .filter(|n| !n.is_empty())
    else {
        return Ok(String::new());
    };
    match e.volumes.store().runtime_class(name).await {
        Ok(rc) => Ok(rc.handler),
        Err(ObjectError::NotFound { .. }) => {
            Err(format!("runtimeclass.node.k8s.io {name:?} not found"))
        }
        Err(ObjectError::NotAvailable { .. }) => Err(format!(
            "RuntimeClass {name:?} cannot be looked up: no API server (standalone mode)"
        )),
        Err(err) => Err(format!("failed to lookup RuntimeClass {name}: {err}")),
    }
}

/// Whether the pod may run on `handler` as far as user namespaces go.
pub(super) fn check_user_namespaces(
    p: &Pod,
    handler: &str,
    handlers: &[RuntimeHandler],
) -> Result<(), String> {
    if p.spec.as_ref().and_then(|s| s.host_users) != Some(false) {
        return Ok(());
    }
    if handlers.is_empty() {
        return Err(format!(
            "RuntimeClass handler {handler:?} does not support user namespaces"
        ));
    }
    match handlers.iter().find(|h| h.name == handler) {
        None => Err(format!(
            "failed to check if runtime handler {handler:?} supports user namespaces: the handler {handler:?} is not known"
        )),
        Some(h) if !h.user_namespaces => Err(format!(
            "RuntimeClass handler {handler:?} does not support user namespaces"
        )),
        Some(_) => Err(
            "hostUsers: false: kubelet-rs does not allocate user-namespace ID mappings; run the pod with hostUsers unset or true"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(host_users: Option<bool>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                host_users,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn user_namespaces_table() {
        let runc = RuntimeHandler {
            name: "runc".into(),
            ..Default::default()
        };
        let userns = RuntimeHandler {
            name: "crun".into(),
            user_namespaces: true,
            ..Default::default()
        };
        type Case<'a> = (Option<bool>, &'a str, Vec<RuntimeHandler>, Option<&'a str>);
        let cases: Vec<Case> = vec![
            (None, "", vec![], None),
            (Some(true), "", vec![], None),
            (
                Some(false),
                "",
                vec![],
                Some("RuntimeClass handler \"\" does not support user namespaces"),
            ),
            (
                Some(false),
                "runc",
                vec![runc.clone()],
                Some("RuntimeClass handler \"runc\" does not support user namespaces"),
            ),
            (
                Some(false),
                "kata",
                vec![runc.clone()],
                Some("failed to check if runtime handler \"kata\" supports user namespaces: the handler \"kata\" is not known"),
            ),
        ];
        for (i, (hu, h, hs, want)) in cases.into_iter().enumerate() {
            let got = check_user_namespaces(&pod(hu), h, &hs);
            assert_eq!(got.err().as_deref(), want, "case {i}");
        }
        let got = check_user_namespaces(&pod(Some(false)), "crun", &[userns]);
        assert!(got.unwrap_err().contains("does not allocate"));
    }
}
