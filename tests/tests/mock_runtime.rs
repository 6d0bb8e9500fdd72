//! The stock engine driven by a mockall mock of `ContainerRuntime` (kubelet-core's `mock`
//! feature): the expectations say what the engine may call, and the test checks what it did
//! call — one sandbox, then one container created in it and started — to bring a pod to
//! Running. No containerd needed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_core::runtime::{
    ContainerState, ContainerStatus, ImageInfo, MockContainerRuntime, RuntimeStatus,
    RuntimeVersion, SandboxState, SandboxStatus, SandboxSummary,
};
use kubelet_core::testing::{container, pod, FakeContainerManager, StaticSource};
use kubelet_core::{Config, Kubelet};
use mockall::{predicate, Sequence};
use tokio_util::sync::CancellationToken;

const UID: &str = "mock-uid-1";

/// What the mock's runtime "has", as the engine created it.
#[derive(Default)]
struct Objects {
    sandboxes: Vec<SandboxSummary>,
    containers: Vec<ContainerStatus>,
    /// The calls the test asserts on, in order.
    calls: Vec<String>,
}

type Shared = Arc<Mutex<Objects>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Objects> {
    s.lock().unwrap()
}

/// A mock that answers every read from `objects` and expects exactly one
/// run_pod_sandbox → create_container → start_container, in that order.
fn mock(objects: &Shared) -> MockContainerRuntime {
    let mut rt = MockContainerRuntime::new();
    rt.expect_version().returning(|| {
        Ok(RuntimeVersion {
            runtime_name: "mock".into(),
            runtime_version: "0.1.0".into(),
            runtime_api_version: "v1".into(),
        })
    });
    rt.expect_status().returning(|| {
        Ok(RuntimeStatus {
            runtime_ready: true,
            network_ready: true,
            ..Default::default()
        })
    });
    let o = objects.clone();
    rt.expect_list_pod_sandboxes().returning(move |f| {
        let all = lock(&o).sandboxes.clone();
        Ok(all.into_iter().filter(|s| f.matches(&s.pod)).collect())
    });
    let o = objects.clone();
    rt.expect_pod_sandbox_status().returning(move |id| {
        let s = lock(&o)
            .sandboxes
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .expect("status of a sandbox the engine created");
        Ok(SandboxStatus {
            id: s.id,
            pod: s.pod,
            attempt: s.attempt,
            state: s.state,
            created_at: s.created_at,
            ip: Some("10.88.0.7".into()),
            additional_ips: vec![],
            host_network: false,
        })
    });
    let o = objects.clone();
    rt.expect_list_containers().returning(move |f| {
        let all = lock(&o).containers.clone();
        Ok(all
            .into_iter()
            .filter(|c| f.matches(&c.summary.pod))
            .map(|c| c.summary)
            .collect())
    });
    let o = objects.clone();
    rt.expect_container_status().returning(move |id| {
        Ok(lock(&o)
            .containers
            .iter()
            .find(|c| c.summary.id == id)
            .cloned()
            .expect("status of a container the engine created"))
    });
    // The engine reads the status of containers it has just listed through
    // `container_status_listed` (a default method: mockall mocks it too).
    let o = objects.clone();
    rt.expect_container_status_listed()
        .returning(move |listed| {
            Ok(lock(&o)
                .containers
                .iter()
                .find(|c| c.summary.id == listed.id)
                .cloned()
                .expect("status of a container the engine created"))
        });
    rt.expect_image_status().returning(|image| {
        Ok(Some(ImageInfo {
            id: format!("sha256:{image}"),
            repo_tags: vec![image.to_string()],
            ..Default::default()
        }))
    });

    let mut seq = Sequence::new();
    let o = objects.clone();
    rt.expect_run_pod_sandbox()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|c| kubelet_core::pod::uid(&c.pod) == UID && c.attempt == 0)
        .returning(move |c| {
            let mut o = lock(&o);
            o.calls.push(format!("run_pod_sandbox {}", c.hostname));
            o.sandboxes.push(SandboxSummary::new("sb-1", c));
            Ok("sb-1".into())
        });
    let o = objects.clone();
    rt.expect_create_container()
        .times(1)
        .in_sequence(&mut seq)
        .withf(|sandbox_id, c, _| {
            sandbox_id == "sb-1" && c.container.name == "app" && c.image_ref == "sha256:busybox"
        })
        .returning(move |sandbox_id, c, s| {
            let mut o = lock(&o);
            o.calls.push(format!(
                "create_container {} in {sandbox_id}",
                c.container.name
            ));
            o.containers
                .push(ContainerStatus::new("c-1", sandbox_id, c, s));
            Ok("c-1".into())
        });
    let o = objects.clone();
    rt.expect_start_container()
        .times(1)
        .in_sequence(&mut seq)
        .with(predicate::eq("c-1"))
        .returning(move |id| {
            let mut o = lock(&o);
            o.calls.push(format!("start_container {id}"));
            o.containers[0].set_running();
            Ok(())
        });
    rt
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_runs_a_pod_through_the_mock() {
    let objects = Shared::default();
    let rt = Arc::new(mock(&objects));
    let p = pod("web", UID, vec![container("app", "busybox")]);
    let dir = tempfile::tempdir().unwrap();
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: "mock-node".into(),
            root_dir: dir.path().join("root"),
            pod_logs_dir: dir.path().join("logs"),
            resolv_conf: Default::default(),
            ..Config::default()
        })
        .runtime(rt)
        .container_manager(Arc::new(FakeContainerManager::default()))
        .source(Arc::new(StaticSource::new("file", vec![p])))
        .build()
        .unwrap();
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(kubelet.run(shutdown.clone()));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let phase = loop {
        let phase = handle.pod_status(UID).and_then(|s| s.phase);
        if phase.as_deref() == Some("Running") || tokio::time::Instant::now() >= deadline {
            break phase;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Let a few more syncs and relists run: the engine must not create anything again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), engine)
        .await
        .expect("the engine stops")
        .expect("engine task")
        .expect("engine run");

    assert_eq!(phase.as_deref(), Some("Running"));
    let o = lock(&objects);
    assert_eq!(
        o.calls,
        [
            "run_pod_sandbox web",
            "create_container app in sb-1",
            "start_container c-1"
        ]
    );
    assert_eq!(o.sandboxes[0].state, SandboxState::Ready);
    assert_eq!(o.containers[0].summary.state, ContainerState::Running);
    let status = handle.pod_status(UID).unwrap();
    let c = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(c.container_id.as_deref(), Some("mock://c-1"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.88.0.7"));
}
