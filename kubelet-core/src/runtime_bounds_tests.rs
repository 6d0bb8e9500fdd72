//! One pod must not break the node through the runtime: dead sandboxes do not pile up, and a
//! listing of everything that is too large for the runtime's message limit falls back to
//! listings pod by pod, so the other pods keep being managed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::lifecycle_tests::{config, start, Harness};
use crate::runtime::{
    ContainerConfig, ContainerRuntime, ContainerStatus, ContainerSummary, ListFilter, RuntimeError,
    RuntimeResult, SandboxConfig, SandboxStatus, SandboxSummary,
};
use crate::testing::SANDBOX_DIES;
use crate::testing::{
    container, eventually, pod, FakeContainerManager, PodBuilder, SimRuntime, StaticSource,
};
use crate::Kubelet;

#[tokio::test(start_paused = true)]
async fn sandboxes_that_keep_dying_do_not_pile_up() {
    let dying = PodBuilder::new("dying", "u1")
        .annotation(SANDBOX_DIES, "true")
        .container(container("c", "img:1"))
        .build();
    let h: Harness = start(vec![
        dying,
        pod("good", "u2", vec![container("c", "img:1")]),
    ])
    .await;
    h.until(Duration::from_secs(10), "the good pod runs", |h| {
        h.phase("u2") == "Running"
    })
    .await;
    // A minute of retries every 2s (under one garbage collection period).
    tokio::time::sleep(Duration::from_secs(55)).await;
    let created = h.rt.calls("RunPodSandbox");
    assert!(created >= 10, "sandbox re-created {created} times");
    let sandboxes =
        h.rt.list_pod_sandboxes(&ListFilter::pod("u1"))
            .await
            .expect("list");
    assert!(
        sandboxes.len() <= 2,
        "{} dead sandboxes left after {created} attempts",
        sandboxes.len()
    );
    assert_eq!(h.phase("u2"), "Running");
    h.stop().await;
}

/// A runtime whose answer to an unfiltered listing is too large (as containerd's once a
/// pod's records exceed 16 MiB).
struct TooLargeWhenUnfiltered {
    inner: Arc<SimRuntime>,
    refused: AtomicUsize,
}

impl TooLargeWhenUnfiltered {
    fn check(&self, filter: &ListFilter, operation: &'static str) -> RuntimeResult<()> {
        if filter.pod_uid.is_none() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(RuntimeError::TooLarge {
                operation,
                message: "trying to send message larger than max (18002774 vs. 16777216)".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl ContainerRuntime for TooLargeWhenUnfiltered {
    async fn list_pod_sandboxes(&self, f: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        self.check(f, "ListPodSandbox")?;
        self.inner.list_pod_sandboxes(f).await
    }
    async fn pod_sandbox_status(&self, id: &str) -> RuntimeResult<SandboxStatus> {
        self.inner.pod_sandbox_status(id).await
    }
    async fn run_pod_sandbox(&self, c: &SandboxConfig) -> RuntimeResult<String> {
        self.inner.run_pod_sandbox(c).await
    }
    async fn stop_pod_sandbox(&self, id: &str) -> RuntimeResult<()> {
        self.inner.stop_pod_sandbox(id).await
    }
    async fn remove_pod_sandbox(&self, id: &str) -> RuntimeResult<()> {
        self.inner.remove_pod_sandbox(id).await
    }
    async fn list_containers(&self, f: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        self.check(f, "ListContainers")?;
        self.inner.list_containers(f).await
    }
    async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
        self.inner.container_status(id).await
    }
    async fn create_container(
        &self,
        sandbox: &str,
        c: &ContainerConfig,
        s: &SandboxConfig,
    ) -> RuntimeResult<String> {
        self.inner.create_container(sandbox, c, s).await
    }
    async fn start_container(&self, id: &str) -> RuntimeResult<()> {
        self.inner.start_container(id).await
    }
    async fn stop_container(&self, id: &str, timeout: Duration) -> RuntimeResult<()> {
        self.inner.stop_container(id, timeout).await
    }
    async fn remove_container(&self, id: &str) -> RuntimeResult<()> {
        self.inner.remove_container(id).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_too_large_relist_falls_back_to_listing_pod_by_pod() {
    let sim = Arc::new(SimRuntime::new());
    let runtime = Arc::new(TooLargeWhenUnfiltered {
        inner: sim.clone(),
        refused: AtomicUsize::new(0),
    });
    let mut crashing = container("c", "img:1");
    crashing.env =
        crate::lifecycle_tests::env(&[("SIM_RUN_FOR_MS", "1000"), ("SIM_EXIT_CODE", "1")]);
    let src = Arc::new(StaticSource::new(
        "file",
        vec![
            pod("steady", "u1", vec![container("c", "img:1")]),
            pod("crash", "u2", vec![crashing]),
        ],
    ));
    let kubelet = Kubelet::builder()
        .config(config())
        .runtime(runtime.clone())
        .container_manager(Arc::new(FakeContainerManager::default()))
        .source(src)
        .build()
        .expect("build");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    // The crashing container is restarted: the PLEG saw it die although every unfiltered
    // listing failed, and the healthy pod keeps running.
    eventually(
        Duration::from_secs(60),
        "the crashing container restarted",
        || {
            let h = handle.clone();
            async move {
                let s = h.pod_status("u2")?;
                let cs = s.container_statuses?;
                (cs.first()?.restart_count >= 2).then_some(())
            }
        },
    )
    .await;
    assert!(runtime.refused.load(Ordering::Relaxed) > 0);
    assert_eq!(
        handle.pod_status("u1").and_then(|s| s.phase).as_deref(),
        Some("Running")
    );
    assert!(handle.check_health().is_ok());
    shutdown.cancel();
    task.await.expect("join").expect("run");
}
