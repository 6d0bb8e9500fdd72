//! [`InstrumentedRuntime`]: `kubelet_runtime_operations_*` (and `kubelet_run_podsandbox_*`
//! per runtime handler) for every call of a wrapped [`ContainerRuntime`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{global, Metrics};
use crate::runtime::{
    AttachRequest, ContainerConfig, ContainerEventStream, ContainerRuntime, ContainerStats,
    ContainerStatus, ContainerSummary, ExecOutput, ExecRequest, ImageFsInfo, ImageInfo, ListFilter,
    PullImageRequest, RuntimeResult, RuntimeStatus, RuntimeVersion, SandboxConfig, SandboxStatus,
    SandboxSummary,
};

/// A [`ContainerRuntime`] that records `kubelet_runtime_operations_*` for every call and
/// forwards it to the wrapped runtime unchanged — every method, the defaulted ones included,
/// so the wrapped backend's own answers (and its `Unimplemented`s) come through. The
/// `operation_type` labels are Go's (`instrumented_services.go`); `get_container_events`
/// times establishing the stream, not its lifetime.
pub struct InstrumentedRuntime {
    inner: Arc<dyn ContainerRuntime>,
    metrics: &'static Metrics,
}

impl InstrumentedRuntime {
    /// Wraps `inner`, recording into [`global`].
    pub fn new(inner: Arc<dyn ContainerRuntime>) -> InstrumentedRuntime {
        InstrumentedRuntime {
            inner,
            metrics: global(),
        }
    }

    async fn record<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = RuntimeResult<T>>,
    ) -> RuntimeResult<T> {
        let started = crate::clock::monotonic_now();
        let result = call.await;
        let m = self.metrics;
        m.runtime_operations.inc(operation);
        m.runtime_operation_duration
            .with(operation)
            .observe(crate::clock::elapsed(started));
        if result.is_err() {
            m.runtime_operation_errors.inc(operation);
        }
        result
    }
}

#[async_trait]
impl ContainerRuntime for InstrumentedRuntime {
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        self.record("version", self.inner.version()).await
    }
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        self.record("status", self.inner.status()).await
    }
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        self.record("list_podsandbox", self.inner.list_pod_sandboxes(filter))
            .await
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        self.record(
            "podsandbox_status",
            self.inner.pod_sandbox_status(sandbox_id),
        )
        .await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        let started = crate::clock::monotonic_now();
        let result = self
            .record("run_podsandbox", self.inner.run_pod_sandbox(config))
            .await;
        let m = self.metrics;
        let handler = config.runtime_handler.as_str();
        m.run_podsandbox_duration
            .with(handler)
            .observe(crate::clock::elapsed(started));
        if result.is_err() {
            m.run_podsandbox_errors.inc(handler);
        }
        result
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.record("stop_podsandbox", self.inner.stop_pod_sandbox(sandbox_id))
            .await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.record(
            "remove_podsandbox",
            self.inner.remove_pod_sandbox(sandbox_id),
        )
        .await
    }
    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        self.record("list_containers", self.inner.list_containers(filter))
            .await
    }
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.record(
            "container_status",
            self.inner.container_status(container_id),
        )
        .await
    }
    async fn container_status_listed(
        &self,
        listed: &ContainerSummary,
    ) -> RuntimeResult<ContainerStatus> {
        self.record(
            "container_status",
            self.inner.container_status_listed(listed),
        )
        .await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        self.record(
            "create_container",
            self.inner.create_container(sandbox_id, config, sandbox),
        )
        .await
    }
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.record("start_container", self.inner.start_container(container_id))
            .await
    }
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.record(
            "stop_container",
            self.inner.stop_container(container_id, timeout),
        )
        .await
    }
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.record(
            "remove_container",
            self.inner.remove_container(container_id),
        )
        .await
    }
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        self.record("image_status", self.inner.image_status(image))
            .await
    }
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        self.record("pull_image", self.inner.pull_image(request))
            .await
    }
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        self.record("list_images", self.inner.list_images()).await
    }
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        self.record("remove_image", self.inner.remove_image(image))
            .await
    }
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        self.record(
            "exec_sync",
            self.inner.exec_sync(container_id, cmd, timeout),
        )
        .await
    }
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.record("exec", self.inner.exec_url(request)).await
    }
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.record("attach", self.inner.attach_url(request)).await
    }
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.record(
            "port_forward",
            self.inner.port_forward_url(sandbox_id, ports),
        )
        .await
    }
    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        self.record("image_fs_info", self.inner.image_fs_info())
            .await
    }
    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        self.record("container_stats", self.inner.container_stats(container_id))
            .await
    }
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        self.record(
            "list_container_stats",
            self.inner.list_container_stats(filter),
        )
        .await
    }
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        self.record(
            "reopen_container_log",
            self.inner.reopen_container_log(container_id),
        )
        .await
    }
    async fn update_container_resources(
        &self,
        container_id: &str,
        update: &crate::runtime::ResourcesUpdate,
    ) -> RuntimeResult<()> {
        self.record(
            "update_container",
            self.inner.update_container_resources(container_id, update),
        )
        .await
    }
    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        self.record("get_container_events", self.inner.container_events())
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::RuntimeError;

    /// Only the required core plus `version` and `status`; the rest are the trait's defaults.
    struct Failing;

    #[async_trait]
    impl crate::runtime::ContainerRuntime for Failing {
        async fn version(&self) -> RuntimeResult<RuntimeVersion> {
            Ok(RuntimeVersion::default())
        }
        async fn status(&self) -> RuntimeResult<RuntimeStatus> {
            Err(RuntimeError::Unavailable("down".into()))
        }
        async fn list_pod_sandboxes(&self, _: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
            Ok(vec![])
        }
        async fn run_pod_sandbox(&self, _: &SandboxConfig) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_pod_sandbox(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
        async fn list_containers(&self, _: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
            Ok(vec![])
        }
        async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
            Err(RuntimeError::NotFound {
                kind: "container",
                id: id.into(),
            })
        }
        async fn create_container(
            &self,
            _: &str,
            _: &ContainerConfig,
            _: &SandboxConfig,
        ) -> RuntimeResult<String> {
            Ok(String::new())
        }
        async fn stop_container(&self, _: &str, _: Duration) -> RuntimeResult<()> {
            Ok(())
        }
        async fn remove_container(&self, _: &str) -> RuntimeResult<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn instrumented_runtime_counts_calls_and_errors() {
        let m: &'static Metrics = Box::leak(Box::default());
        let rt = InstrumentedRuntime {
            inner: Arc::new(Failing),
            metrics: m,
        };
        rt.version().await.unwrap();
        rt.version().await.unwrap();
        assert!(rt.status().await.is_err());
        assert_eq!(m.runtime_operations.get("version"), 2);
        assert_eq!(m.runtime_operation_errors.get("version"), 0);
        assert_eq!(m.runtime_operations.get("status"), 1);
        assert_eq!(m.runtime_operation_errors.get("status"), 1);
        let text = m.render();
        assert!(
            text.contains("kubelet_runtime_operations_total{operation_type=\"version\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("kubelet_runtime_operations_errors_total{operation_type=\"status\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "kubelet_runtime_operations_duration_seconds_count{operation_type=\"version\"} 2"
            ),
            "{text}"
        );
    }

    #[tokio::test]
    async fn instrumented_runtime_forwards_the_capabilities_with_go_labels() {
        let m: &'static Metrics = Box::leak(Box::default());
        let sim = Arc::new(crate::testing::SimRuntime::new());
        sim.add_image("busybox");
        let rt = InstrumentedRuntime {
            inner: sim.clone(),
            metrics: m,
        };
        // The simulator's own answers come through, not the trait's defaults.
        let fs = rt.image_fs_info().await.unwrap();
        assert_eq!(fs.image_filesystems.len(), 1);
        assert!(rt
            .list_container_stats(&ListFilter::all())
            .await
            .unwrap()
            .is_empty());
        assert!(rt.container_stats("nope").await.is_err());
        assert!(rt.reopen_container_log("nope").await.is_err());
        assert!(rt.container_events().await.is_ok());
        assert_eq!(sim.calls("ImageFsInfo"), 1);
        assert_eq!(sim.calls("GetContainerEvents"), 1);
        for (op, errors) in [
            ("image_fs_info", 0),
            ("list_container_stats", 0),
            ("container_stats", 1),
            ("reopen_container_log", 1),
            ("get_container_events", 0),
        ] {
            assert_eq!(m.runtime_operations.get(op), 1, "{op}");
            assert_eq!(m.runtime_operation_errors.get(op), errors, "{op}");
        }
        // A backend without a capability: its Unimplemented is counted as an error.
        let bare = InstrumentedRuntime {
            inner: Arc::new(Failing),
            metrics: m,
        };
        assert!(bare
            .exec_sync("c", &[], Duration::ZERO)
            .await
            .unwrap_err()
            .is_unimplemented());
        assert_eq!(m.runtime_operation_errors.get("exec_sync"), 1);
    }
}
