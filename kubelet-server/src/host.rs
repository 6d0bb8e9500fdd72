//! The narrow interface the server needs from the kubelet.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kubelet_core::KubeletHandle;

/// What the HTTP server reads from the kubelet (Go's `server.HostInterface`, the part
/// implemented so far).
pub trait Host: Send + Sync + 'static {
    /// Ok when the sync loop and PLEG are alive; the error says what is not.
    fn health(&self) -> Result<(), String>;
    /// The pods this kubelet runs, each with its latest status.
    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)>;
}

impl Host for KubeletHandle {
    fn health(&self) -> Result<(), String> {
        self.check_health()
    }

    fn pods(&self) -> Vec<(Arc<Pod>, Option<PodStatus>)> {
        let mut pods: Vec<(Arc<Pod>, Option<PodStatus>)> = KubeletHandle::pods(self)
            .into_iter()
            .map(|p| {
                let status = self.pod_status(kubelet_core::pod::uid(&p));
                (p, status)
            })
            .collect();
        pods.sort_by_key(|(p, _)| kubelet_core::pod::full_name(p));
        pods
    }
}
