//! The raw CRI floor: the workload as plain gRPC calls with the very messages the backend
//! sends ([`kubelet_runtime_cri::mapping`]), prepared before the timing starts.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use kubelet_runtime_cri::{mapping, ImageUser};
use tokio::net::UnixStream;
use tokio::task::JoinSet;
use tonic::transport::{Channel, Endpoint, Uri};

use super::workload::{collect_errors, BenchPod, WorkloadRun};
use super::{SETTLE, STOP_TIMEOUT};
use crate::proc_stats::MachineTicks;

pub(crate) async fn raw_client(endpoint: &str) -> Result<RuntimeServiceClient<Channel>> {
    let socket = kubelet_runtime_cri::socket_path(endpoint)?;
    let channel = Endpoint::from_static("http://cri.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
        .with_context(|| format!("dialing {endpoint}"))?;
    Ok(RuntimeServiceClient::new(channel))
}

/// The order of the teardown calls for each pod in the raw floor and the backend row.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TeardownOrder {
    /// StopContainer, RemoveContainer, StopPodSandbox, RemovePodSandbox: the container is
    /// gone before its sandbox stops.
    #[default]
    RemoveFirst,
    /// StopContainer, StopPodSandbox, RemoveContainer, RemovePodSandbox: the kubelets' order
    /// (Go's and kubelet-rs's kill the pod, sandbox included, before anything is removed).
    StopSandboxFirst,
}

pub(super) async fn raw_run(
    client: &RuntimeServiceClient<Channel>,
    pods: &[BenchPod],
    image_ref: &str,
    order: TeardownOrder,
) -> Result<WorkloadRun> {
    // Prepared outside the timing: the exact messages, and the log directories.
    let prepared = prepare(pods, image_ref).await?;

    let mut run = WorkloadRun::default();
    let calls = CallTimes::default();
    let busy0 = MachineTicks::read().await?;
    let t0 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for (sandbox, container) in prepared {
        let mut c = client.clone();
        let calls = calls.clone();
        set.spawn(async move {
            let t = kubelet_core::clock::monotonic_now();
            let (sid, cid) = start_pod(&mut c, &calls, sandbox, container).await?;
            Ok::<_, String>((kubelet_core::clock::elapsed(t), sid, cid))
        });
    }
    let started = run.collect_started(&mut set).await;
    run.start = kubelet_core::clock::elapsed(t0);
    run.start_busy = Some(MachineTicks::read().await?.busy_cores_since(&busy0));
    // PID 1 ignores SIGTERM until the shell has set its trap: let the last ones get there
    // (otherwise a stop right after start waits out the whole grace period).
    tokio::time::sleep(SETTLE).await;

    let busy1 = MachineTicks::read().await?;
    let t1 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for (sid, cid) in started {
        let mut c = client.clone();
        let calls = calls.clone();
        set.spawn(async move {
            let stop = cri::StopContainerRequest {
                container_id: cid.clone(),
                timeout: STOP_TIMEOUT.as_secs() as i64,
            };
            calls
                .time("StopContainer", c.stop_container(stop))
                .await
                .map_err(|e| format!("StopContainer: {e}"))?;
            let remove = cri::RemoveContainerRequest { container_id: cid };
            let stop_sandbox = cri::StopPodSandboxRequest {
                pod_sandbox_id: sid.clone(),
            };
            if order == TeardownOrder::StopSandboxFirst {
                calls
                    .time("StopPodSandbox", c.stop_pod_sandbox(stop_sandbox.clone()))
                    .await
                    .map_err(|e| format!("StopPodSandbox: {e}"))?;
            }
            calls
                .time("RemoveContainer", c.remove_container(remove))
                .await
                .map_err(|e| format!("RemoveContainer: {e}"))?;
            if order == TeardownOrder::RemoveFirst {
                calls
                    .time("StopPodSandbox", c.stop_pod_sandbox(stop_sandbox))
                    .await
                    .map_err(|e| format!("StopPodSandbox: {e}"))?;
            }
            let remove = cri::RemovePodSandboxRequest {
                pod_sandbox_id: sid,
            };
            calls
                .time("RemovePodSandbox", c.remove_pod_sandbox(remove))
                .await
                .map_err(|e| format!("RemovePodSandbox: {e}"))?;
            Ok::<_, String>(())
        });
    }
    collect_errors(&mut set, &mut run.errors).await;
    run.stop = kubelet_core::clock::elapsed(t1);
    run.stop_busy = Some(MachineTicks::read().await?.busy_cores_since(&busy1));
    run.calls = calls.take();
    Ok(run)
}

/// One pod's CRI messages: its sandbox config and its container's config.
pub(crate) type PreparedPod = (cri::PodSandboxConfig, cri::ContainerConfig);

/// The exact messages the backend would send for `pods` (their container running as root,
/// `image_ref` resolved), with the pods' log directories made.
pub(crate) async fn prepare(pods: &[BenchPod], image_ref: &str) -> Result<Vec<PreparedPod>> {
    let root = ImageUser {
        uid: Some(0),
        username: String::new(),
    };
    let mut prepared = Vec::with_capacity(pods.len());
    for p in pods {
        let mut cc = p.container.clone();
        cc.image_ref = image_ref.to_string();
        let opts = mapping::Options::default();
        let sandbox = mapping::sandbox_config(&p.sandbox, &opts);
        let container = mapping::container_config(&cc, &root, &opts)?;
        tokio::fs::create_dir_all(p.sandbox.log_directory.join("busybox")).await?;
        prepared.push((sandbox, container));
    }
    Ok(prepared)
}

/// `RunPodSandbox`, `CreateContainer` and `StartContainer` for one prepared pod, each call
/// timed into `calls`: the pod's (sandbox id, container id).
pub(crate) async fn start_pod(
    c: &mut RuntimeServiceClient<Channel>,
    calls: &CallTimes,
    sandbox: cri::PodSandboxConfig,
    container: cri::ContainerConfig,
) -> Result<(String, String), String> {
    let sid = calls
        .time(
            "RunPodSandbox",
            c.run_pod_sandbox(cri::RunPodSandboxRequest {
                config: Some(sandbox.clone()),
                runtime_handler: String::new(),
            }),
        )
        .await
        .map_err(|e| format!("RunPodSandbox: {e}"))?
        .into_inner()
        .pod_sandbox_id;
    let cid = calls
        .time(
            "CreateContainer",
            c.create_container(cri::CreateContainerRequest {
                pod_sandbox_id: sid.clone(),
                config: Some(container),
                sandbox_config: Some(sandbox),
            }),
        )
        .await
        .map_err(|e| format!("CreateContainer: {e}"))?
        .into_inner()
        .container_id;
    calls
        .time(
            "StartContainer",
            c.start_container(cri::StartContainerRequest {
                container_id: cid.clone(),
            }),
        )
        .await
        .map_err(|e| format!("StartContainer: {e}"))?;
    Ok((sid, cid))
}

/// Each call's duration by CRI method, shared by the run's tasks.
#[derive(Clone, Default)]
pub(crate) struct CallTimes(Arc<Mutex<BTreeMap<String, Vec<Duration>>>>);

impl CallTimes {
    /// Awaits `call` and records how long it took under `method`.
    async fn time<T>(&self, method: &str, call: impl Future<Output = T>) -> T {
        let t = kubelet_core::clock::monotonic_now();
        let out = call.await;
        if let Ok(mut m) = self.0.lock() {
            m.entry(method.to_string())
                .or_default()
                .push(kubelet_core::clock::elapsed(t));
        }
        out
    }

    /// Every recorded duration by method, leaving none behind.
    pub(crate) fn take(&self) -> BTreeMap<String, Vec<Duration>> {
        self.0
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }
}
