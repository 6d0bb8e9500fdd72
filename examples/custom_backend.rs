//! # A custom container runtime backend, driven by the stock engine
//!
//! `MemoryRuntime` keeps pods in memory — a container "runs" from its creation until it is
//! stopped — and is a complete [`ContainerRuntime`]: the engine (`Kubelet::builder()`, the
//! same one the `kubelet` binary runs) takes a static pod from a manifest directory to
//! Running on it, and this program prints the pod's status.
//!
//! **The trait code is 30 lines**: the `impl ContainerRuntime for MemoryRuntime` block,
//! attribute and braces included, as rustfmt lays it out — the nine required methods (the
//! core the lifecycle cannot run without), one line of body each. Everything else is the
//! trait's defaults: sandbox status without a pod network, `start_container` as a no-op
//! (creating a container here starts it), "every image is present", and `Unimplemented`
//! for exec, streaming, stats, log reopening and events (an exec probe on this backend
//! fails saying so). The methods delegate to the backend's own bookkeeping, `Pods` (59
//! lines with its docs; a real backend has its VM manager or process supervisor there).
//! The whole backend, from the `NewId` alias to the end of `Pods`, is 97 lines.
//!
//! ```text
//! cargo run -p kubelet-bin --example custom_backend
//! ```
//!
//! It needs no containerd, no root and no cgroups (the container manager is the fixed-
//! capacity one of `kubelet_core::testing`; a real node uses `kubelet_cm`, see
//! `embed_node.rs`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::clock::now_unix_nanos;
use kubelet_core::runtime::{
    ContainerConfig, ContainerRuntime, ContainerStatus, ContainerSummary, ListFilter, RuntimeError,
    RuntimeResult, SandboxConfig, SandboxState, SandboxSummary,
};
use kubelet_core::testing::FakeContainerManager;
use kubelet_core::{Config, Kubelet};
use kubelet_sources::file::{Config as FileConfig, FileSource};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// What `run_pod_sandbox` and `create_container` answer: the new object's id.
type NewId = RuntimeResult<String>;

/// The backend: its bookkeeping behind a lock.
#[derive(Default)]
struct MemoryRuntime(Mutex<Pods>);

#[async_trait]
impl ContainerRuntime for MemoryRuntime {
    async fn list_pod_sandboxes(&self, f: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        Ok(self.0.lock().await.sandboxes(f))
    }
    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> NewId {
        Ok(self.0.lock().await.run_sandbox(config))
    }
    async fn stop_pod_sandbox(&self, id: &str) -> RuntimeResult<()> {
        self.0.lock().await.stop_sandbox(id)
    }
    async fn remove_pod_sandbox(&self, id: &str) -> RuntimeResult<()> {
        self.0.lock().await.remove_sandbox(id)
    }
    async fn list_containers(&self, f: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        Ok(self.0.lock().await.containers(f))
    }
    async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
        self.0.lock().await.container(id).cloned()
    }
    async fn create_container(&self, sb: &str, c: &ContainerConfig, s: &SandboxConfig) -> NewId {
        Ok(self.0.lock().await.run_container(sb, c, s))
    }
    async fn stop_container(&self, id: &str, _grace: Duration) -> RuntimeResult<()> {
        self.0.lock().await.stop_container(id)
    }
    async fn remove_container(&self, id: &str) -> RuntimeResult<()> {
        self.0.lock().await.remove_container(id)
    }
}

/// The backend's bookkeeping: its sandboxes and containers as the engine sees them.
#[derive(Default)]
struct Pods {
    sandboxes: Vec<SandboxSummary>,
    containers: Vec<ContainerStatus>,
    created: u64,
}

impl Pods {
    fn new_id(&mut self, kind: &str) -> String {
        self.created += 1;
        format!("{kind}-{}", self.created)
    }
    fn sandboxes(&self, f: &ListFilter) -> Vec<SandboxSummary> {
        let mine = self.sandboxes.iter().filter(|s| f.matches(&s.pod));
        mine.cloned().collect()
    }
    fn run_sandbox(&mut self, config: &SandboxConfig) -> String {
        let id = self.new_id("sandbox");
        self.sandboxes.push(SandboxSummary::new(&id, config));
        id
    }
    fn stop_sandbox(&mut self, id: &str) -> RuntimeResult<()> {
        let found = self.sandboxes.iter_mut().filter(|s| s.id == id);
        found.for_each(|s| s.state = SandboxState::NotReady);
        Ok(())
    }
    fn remove_sandbox(&mut self, id: &str) -> RuntimeResult<()> {
        self.sandboxes.retain(|s| s.id != id);
        Ok(())
    }
    fn containers(&self, f: &ListFilter) -> Vec<ContainerSummary> {
        let mine = self.containers.iter().filter(|c| f.matches(&c.summary.pod));
        mine.map(|c| c.summary.clone()).collect()
    }
    fn container(&self, id: &str) -> RuntimeResult<&ContainerStatus> {
        let found = self.containers.iter().find(|c| c.summary.id == id);
        found.ok_or_else(|| RuntimeError::NotFound {
            kind: "container",
            id: id.to_string(),
        })
    }
    fn run_container(&mut self, sandbox: &str, c: &ContainerConfig, s: &SandboxConfig) -> String {
        let id = self.new_id("container");
        let mut container = ContainerStatus::new(&id, sandbox, c, s);
        container.set_running();
        self.containers.push(container);
        id
    }
    fn stop_container(&mut self, id: &str) -> RuntimeResult<()> {
        let found = self.containers.iter_mut().filter(|c| c.summary.id == id);
        found.for_each(|c| c.set_exited(now_unix_nanos(), 0, false));
        Ok(())
    }
    fn remove_container(&mut self, id: &str) -> RuntimeResult<()> {
        self.containers.retain(|c| c.summary.id != id);
        Ok(())
    }
}

/// The static pod: one long-running container.
const MANIFEST: &str = "\
apiVersion: v1
kind: Pod
metadata:
  name: hello
spec:
  containers:
  - name: app
    image: example.invalid/hello:1.0
";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests)?;
    std::fs::write(manifests.join("hello.yaml"), MANIFEST)?;
    let node = "custom-node";

    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: node.into(),
            root_dir: dir.path().join("root"),
            pod_logs_dir: dir.path().join("logs"),
            ..Config::default()
        })
        .runtime(Arc::new(MemoryRuntime::default()))
        .container_manager(Arc::new(FakeContainerManager::default()))
        .source(Arc::new(FileSource::new(FileConfig::new(&manifests, node))))
        .build()?;
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(kubelet.run(shutdown.clone()));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let running = handle.pods().into_iter().find_map(|p| {
            let status = handle.pod_status(kubelet_core::pod::uid(&p))?;
            (status.phase.as_deref() == Some("Running")).then_some((p, status))
        });
        if let Some(found) = running {
            break Some(found);
        }
        if tokio::time::Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    shutdown.cancel();
    engine.await??;
    let Some((pod, status)) = status else {
        return Err("the pod did not reach Running within 30s".into());
    };
    println!(
        "pod {} is {}",
        kubelet_core::pod::full_name(&pod),
        status.phase.as_deref().unwrap_or("Unknown")
    );
    println!("{}", serde_json::to_string_pretty(&status)?);
    Ok(())
}
