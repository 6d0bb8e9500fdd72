//! [`ScopedRuntime`]: the view of the node environment's containerd that one engine test gets
//! (see [`crate::engine`]'s isolation notes): every call goes to the real runtime, but only the
//! test's namespace is listed.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use kubelet_core::runtime::{
    AttachRequest, ContainerConfig, ContainerEventStream, ContainerRuntime, ContainerStats,
    ContainerStatus, ContainerSummary, ExecOutput, ExecRequest, ImageFsInfo, ImageInfo, ListFilter,
    PullImageRequest, RuntimeError, RuntimeResult, RuntimeStatus, RuntimeVersion, SandboxConfig,
    SandboxStatus, SandboxSummary,
};
use kubelet_runtime_cri::CriRuntime;
use tokio_util::sync::CancellationToken;

/// A [`ContainerRuntime`] that forwards every call to the real runtime but lists only the
/// sandboxes and containers of pods in one namespace (and their stats and events). See the
/// module docs. It forwards every method, the trait's defaulted ones included, so no
/// capability of the real runtime is lost behind it.
///
/// Images are shared by every test and every developer on the machine, so the view never
/// removes one it was not given ([`ScopedRuntime::with_images`]): `RemoveImage` of any
/// other image is refused. With an image prefix, `ListImages` shows only the images tagged
/// under it, the images the namespace's containers use and the pinned ones — what image
/// garbage collection may consider — and only images tagged under the prefix alone may be
/// removed. With [`ScopedRuntime::with_image_fs`], `ImageFsInfo` reports that directory as
/// where images live (so a disk-pressure test's image filesystem is its own small one).
pub struct ScopedRuntime {
    inner: Arc<CriRuntime>,
    namespace: String,
    image_prefix: Option<String>,
    image_fs: Option<PathBuf>,
    /// Cancelled by [`ScopedRuntime::cut_events`].
    events_cut: CancellationToken,
}

impl ScopedRuntime {
    /// A view of `inner` limited to pods in `namespace`.
    pub fn new(inner: Arc<CriRuntime>, namespace: &str) -> ScopedRuntime {
        ScopedRuntime {
            inner,
            namespace: namespace.to_string(),
            image_prefix: None,
            image_fs: None,
            events_cut: CancellationToken::new(),
        }
    }

    /// The view lists (and may remove) only images tagged under `prefix`, plus those the
    /// namespace uses and the pinned ones (listed, never removed).
    pub fn with_images(mut self, prefix: &str) -> ScopedRuntime {
        self.image_prefix = Some(prefix.to_string());
        self
    }

    /// `ImageFsInfo` reports `dir` as the image filesystem.
    pub fn with_image_fs(mut self, dir: &Path) -> ScopedRuntime {
        self.image_fs = Some(dir.to_path_buf());
        self
    }

    fn owned(&self, image: &ImageInfo) -> bool {
        self.image_prefix.as_deref().is_some_and(|p| {
            !image.repo_tags.is_empty() && image.repo_tags.iter().all(|t| t.starts_with(p))
        })
    }

    /// Ends every open container event stream and makes later subscriptions answer
    /// `Unimplemented` (a runtime that lost its events, as after a downgrade to 1.6).
    pub fn cut_events(&self) {
        self.events_cut.cancel();
    }
}

#[async_trait]
impl ContainerRuntime for ScopedRuntime {
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        self.inner.version().await
    }
    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        self.inner.status().await
    }
    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        let mut list = self.inner.list_pod_sandboxes(filter).await?;
        list.retain(|s| s.pod.namespace == self.namespace);
        Ok(list)
    }
    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        self.inner.pod_sandbox_status(sandbox_id).await
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        self.inner.run_pod_sandbox(config).await
    }
    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.inner.stop_pod_sandbox(sandbox_id).await
    }
    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        self.inner.remove_pod_sandbox(sandbox_id).await
    }
    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        let mut list = self.inner.list_containers(filter).await?;
        list.retain(|c| c.pod.namespace == self.namespace);
        Ok(list)
    }
    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        self.inner.container_status(container_id).await
    }
    async fn container_status_listed(
        &self,
        listed: &ContainerSummary,
    ) -> RuntimeResult<ContainerStatus> {
        self.inner.container_status_listed(listed).await
    }
    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        self.inner
            .create_container(sandbox_id, config, sandbox)
            .await
    }
    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.inner.start_container(container_id).await
    }
    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.inner.stop_container(container_id, timeout).await
    }
    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        self.inner.remove_container(container_id).await
    }
    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        self.inner.image_status(image).await
    }
    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        self.inner.pull_image(request).await
    }
    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        let mut images = self.inner.list_images().await?;
        let Some(prefix) = self.image_prefix.as_deref() else {
            return Ok(images);
        };
        let used: Vec<String> = self
            .list_containers(&ListFilter::all())
            .await?
            .into_iter()
            .flat_map(|c| [c.image, c.image_ref])
            .collect();
        images.retain(|i| {
            i.pinned
                || i.repo_tags.iter().any(|t| t.starts_with(prefix))
                || used
                    .iter()
                    .any(|u| *u == i.id || i.repo_tags.contains(u) || i.repo_digests.contains(u))
        });
        Ok(images)
    }
    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let listed = self.inner.list_images().await?;
        let target = listed
            .iter()
            .find(|i| i.id == image || i.repo_tags.iter().any(|t| t == image));
        match target {
            Some(i) if self.owned(i) => self.inner.remove_image(image).await,
            _ => Err(RuntimeError::OperationFailed {
                operation: "RemoveImage",
                message: format!(
                    "the test's view of the shared containerd does not remove image {image} (not created by this test)"
                ),
            }),
        }
    }
    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        self.inner.exec_sync(container_id, cmd, timeout).await
    }
    async fn exec_url(&self, request: &ExecRequest) -> RuntimeResult<String> {
        self.inner.exec_url(request).await
    }
    async fn attach_url(&self, request: &AttachRequest) -> RuntimeResult<String> {
        self.inner.attach_url(request).await
    }
    async fn port_forward_url(&self, sandbox_id: &str, ports: &[i32]) -> RuntimeResult<String> {
        self.inner.port_forward_url(sandbox_id, ports).await
    }
    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        let mut info = self.inner.image_fs_info().await?;
        if let Some(dir) = &self.image_fs {
            for f in &mut info.image_filesystems {
                f.mountpoint = dir.display().to_string();
            }
        }
        Ok(info)
    }
    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        self.inner.container_stats(container_id).await
    }
    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        let mut list = self.inner.list_container_stats(filter).await?;
        list.retain(|s| s.pod.namespace == self.namespace);
        Ok(list)
    }
    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        self.inner.reopen_container_log(container_id).await
    }
    async fn update_container_resources(
        &self,
        container_id: &str,
        update: &kubelet_core::runtime::ResourcesUpdate,
    ) -> RuntimeResult<()> {
        self.inner
            .update_container_resources(container_id, update)
            .await
    }
    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        if self.events_cut.is_cancelled() {
            return Err(RuntimeError::Unimplemented {
                operation: "GetContainerEvents",
            });
        }
        let namespace = self.namespace.clone();
        let events = self.inner.container_events().await?;
        Ok(events
            .filter(move |e| {
                let keep = e.as_ref().map_or(true, |e| e.pod.namespace == namespace);
                std::future::ready(keep)
            })
            .take_until(self.events_cut.clone().cancelled_owned())
            .boxed())
    }
}
