//! The raw CRI floor: the workload as plain gRPC calls with the very messages the backend
//! sends ([`kubelet_runtime_cri::mapping`]), prepared before the timing starts.

use std::io;

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

pub(super) async fn raw_client(endpoint: &str) -> Result<RuntimeServiceClient<Channel>> {
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

pub(super) async fn raw_run(
    client: &RuntimeServiceClient<Channel>,
    pods: &[BenchPod],
    image_ref: &str,
) -> Result<WorkloadRun> {
    // Prepared outside the timing: the exact messages, and the log directories.
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

    let mut run = WorkloadRun::default();
    let t0 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for (sandbox, container) in prepared {
        let mut c = client.clone();
        set.spawn(async move {
            let t = kubelet_core::clock::monotonic_now();
            let sid = c
                .run_pod_sandbox(cri::RunPodSandboxRequest {
                    config: Some(sandbox.clone()),
                    runtime_handler: String::new(),
                })
                .await
                .map_err(|e| format!("RunPodSandbox: {e}"))?
                .into_inner()
                .pod_sandbox_id;
            let cid = c
                .create_container(cri::CreateContainerRequest {
                    pod_sandbox_id: sid.clone(),
                    config: Some(container),
                    sandbox_config: Some(sandbox),
                })
                .await
                .map_err(|e| format!("CreateContainer: {e}"))?
                .into_inner()
                .container_id;
            c.start_container(cri::StartContainerRequest {
                container_id: cid.clone(),
            })
            .await
            .map_err(|e| format!("StartContainer: {e}"))?;
            Ok::<_, String>((kubelet_core::clock::elapsed(t), sid, cid))
        });
    }
    let started = run.collect_started(&mut set).await;
    run.start = kubelet_core::clock::elapsed(t0);
    // PID 1 ignores SIGTERM until the shell has set its trap: let the last ones get there
    // (otherwise a stop right after start waits out the whole grace period).
    tokio::time::sleep(SETTLE).await;

    let t1 = kubelet_core::clock::monotonic_now();
    let mut set = JoinSet::new();
    for (sid, cid) in started {
        let mut c = client.clone();
        set.spawn(async move {
            c.stop_container(cri::StopContainerRequest {
                container_id: cid.clone(),
                timeout: STOP_TIMEOUT.as_secs() as i64,
            })
            .await
            .map_err(|e| format!("StopContainer: {e}"))?;
            c.remove_container(cri::RemoveContainerRequest { container_id: cid })
                .await
                .map_err(|e| format!("RemoveContainer: {e}"))?;
            c.stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: sid.clone(),
            })
            .await
            .map_err(|e| format!("StopPodSandbox: {e}"))?;
            c.remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: sid,
            })
            .await
            .map_err(|e| format!("RemovePodSandbox: {e}"))?;
            Ok::<_, String>(())
        });
    }
    collect_errors(&mut set, &mut run.errors).await;
    run.stop = kubelet_core::clock::elapsed(t1);
    Ok(run)
}
