//! `cargo xtask cri-events`: checks that a CRI runtime streams container events
//! (`GetContainerEvents`, containerd >= 1.7) for a container's whole life.
//!
//! The check opens the event stream first, then runs one sandbox with one busybox container
//! that exits at once, and waits for the container's CREATED, STARTED and STOPPED events, then
//! removes it and waits for DELETED. It prints each event with its delay after the call that
//! caused it. A runtime without the RPC (containerd 1.6) answers `Unimplemented`: the check
//! says so and fails. Everything it made is removed on every path.

use std::io;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tonic::transport::{Channel, Endpoint, Uri};

/// Arguments of `cargo xtask cri-events`.
#[derive(clap::Args)]
pub(crate) struct CriEventsArgs {
    /// CRI endpoint.
    #[arg(
        long,
        env = "KUBELET_RS_CRI_ENDPOINT",
        default_value = crate::DEFAULT_ENDPOINT
    )]
    endpoint: String,
    /// The image of the container (present in the runtime: it is not pulled).
    #[arg(long, default_value = "kubelet-rs.local/busybox:1.0")]
    image: String,
    /// Cgroup parent of the sandbox (cgroupfs path).
    #[arg(long, default_value = "/kubelet-rs-test")]
    cgroup_parent: String,
    /// Seconds to wait for each event.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
}

const NAMESPACE: &str = "kubelet-rs-cri-events";

/// Runs the check.
pub(crate) async fn run(args: CriEventsArgs) -> Result<()> {
    let mut client = connect(&args.endpoint).await?;
    let version = client
        .version(cri::VersionRequest::default())
        .await
        .context("Version")?
        .into_inner();
    println!(
        "runtime {} {} (CRI {})",
        version.runtime_name, version.runtime_version, version.runtime_api_version
    );
    // containerd sends the response headers with the first event only: the call runs in its
    // own task, which forwards events (or the call's error) to the channel.
    let (tx, mut rx) = mpsc::channel(256);
    let reader = tokio::spawn(subscribe(client.clone(), tx));
    // A runtime without the RPC answers at once; one that has it stays silent until an event.
    if let Ok(Some(Err(s))) = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await {
        reader.abort();
        if s.code() == tonic::Code::Unimplemented {
            bail!(
                "{} {} does not implement GetContainerEvents: {}",
                version.runtime_name,
                version.runtime_version,
                s.message()
            );
        }
        return Err(s).context("GetContainerEvents");
    }
    let uid = format!("cri-events-{}", std::process::id());
    let log_dir = std::env::temp_dir().join(&uid);
    tokio::fs::create_dir_all(&log_dir).await?;
    let sandbox = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: uid.clone(),
            uid: uid.clone(),
            namespace: NAMESPACE.to_string(),
            attempt: 0,
        }),
        log_directory: log_dir.display().to_string(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: format!("{}/pod{uid}", args.cgroup_parent.trim_end_matches('/')),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut ids = Ids::default();
    let result = lifecycle(&mut client, &args, sandbox, rx, &mut ids).await;
    cleanup(&mut client, &ids).await;
    reader.abort();
    let _ = tokio::fs::remove_dir_all(&log_dir).await;
    result
}

#[derive(Default)]
struct Ids {
    sandbox: Option<String>,
    container: Option<String>,
}

async fn lifecycle(
    client: &mut RuntimeServiceClient<Channel>,
    args: &CriEventsArgs,
    sandbox: cri::PodSandboxConfig,
    mut rx: mpsc::Receiver<Result<cri::ContainerEventResponse, tonic::Status>>,
    ids: &mut Ids,
) -> Result<()> {
    let timeout = Duration::from_secs(args.timeout);
    let sid = client
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox.clone()),
            runtime_handler: String::new(),
        })
        .await
        .context("RunPodSandbox")?
        .into_inner()
        .pod_sandbox_id;
    ids.sandbox = Some(sid.clone());
    let container = cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: "exits".to_string(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: args.image.clone(),
            ..Default::default()
        }),
        command: vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            "exit 3".to_string(),
        ],
        log_path: "exits.log".to_string(),
        ..Default::default()
    };
    let t = kubelet_core::clock::monotonic_now();
    let cid = client
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sid.clone(),
            config: Some(container),
            sandbox_config: Some(sandbox),
        })
        .await
        .context("CreateContainer")?
        .into_inner()
        .container_id;
    ids.container = Some(cid.clone());
    wait_event(
        &mut rx,
        &cid,
        cri::ContainerEventType::ContainerCreatedEvent,
        t,
        timeout,
    )
    .await?;
    let t = kubelet_core::clock::monotonic_now();
    client
        .start_container(cri::StartContainerRequest {
            container_id: cid.clone(),
        })
        .await
        .context("StartContainer")?;
    wait_event(
        &mut rx,
        &cid,
        cri::ContainerEventType::ContainerStartedEvent,
        t,
        timeout,
    )
    .await?;
    let stopped = wait_event(
        &mut rx,
        &cid,
        cri::ContainerEventType::ContainerStoppedEvent,
        t,
        timeout,
    )
    .await?;
    let exit_code = stopped
        .containers_statuses
        .iter()
        .find(|s| s.id == cid)
        .map(|s| s.exit_code);
    println!("  the STOPPED event carries the container's status: exit code {exit_code:?}");
    if exit_code != Some(3) {
        bail!("the STOPPED event's status has exit code {exit_code:?}, want Some(3)");
    }
    let t = kubelet_core::clock::monotonic_now();
    client
        .remove_container(cri::RemoveContainerRequest {
            container_id: cid.clone(),
        })
        .await
        .context("RemoveContainer")?;
    ids.container = None;
    wait_event(
        &mut rx,
        &cid,
        cri::ContainerEventType::ContainerDeletedEvent,
        t,
        timeout,
    )
    .await?;
    println!("GetContainerEvents: CREATED, STARTED, STOPPED, DELETED all received");
    Ok(())
}

async fn subscribe(
    mut client: RuntimeServiceClient<Channel>,
    tx: mpsc::Sender<Result<cri::ContainerEventResponse, tonic::Status>>,
) {
    let mut stream = match client.get_container_events(cri::GetEventsRequest {}).await {
        Ok(s) => s.into_inner(),
        Err(s) => {
            let _ = tx.send(Err(s)).await;
            return;
        }
    };
    loop {
        let item = match stream.message().await {
            Ok(Some(ev)) => Ok(ev),
            Ok(None) => break,
            Err(s) => Err(s),
        };
        let stop = item.is_err();
        if tx.send(item).await.is_err() || stop {
            break;
        }
    }
}

/// Waits for the event `want` of container `cid`; other events are printed and skipped.
async fn wait_event(
    rx: &mut mpsc::Receiver<Result<cri::ContainerEventResponse, tonic::Status>>,
    cid: &str,
    want: cri::ContainerEventType,
    since: Instant,
    timeout: Duration,
) -> Result<cri::ContainerEventResponse> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => bail!("no {want:?} event for {cid} within {timeout:?}"),
            Ok(None) => bail!("the event stream ended while waiting for {want:?}"),
            Ok(Some(Err(s))) => bail!("the event stream failed: {s}"),
            Ok(Some(Ok(ev))) => ev,
        };
        let kind = cri::ContainerEventType::try_from(ev.container_event_type)
            .map(|k| format!("{k:?}"))
            .unwrap_or_else(|_| format!("type {}", ev.container_event_type));
        if ev.container_id == cid && ev.container_event_type == want as i32 {
            println!("  {kind} after {:?}", kubelet_core::clock::elapsed(since));
            return Ok(ev);
        }
        println!("  (other event: {kind} for {})", short(&ev.container_id));
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

async fn cleanup(client: &mut RuntimeServiceClient<Channel>, ids: &Ids) {
    if let Some(cid) = &ids.container {
        let _ = client
            .remove_container(cri::RemoveContainerRequest {
                container_id: cid.clone(),
            })
            .await;
    }
    if let Some(sid) = &ids.sandbox {
        let _ = client
            .stop_pod_sandbox(cri::StopPodSandboxRequest {
                pod_sandbox_id: sid.clone(),
            })
            .await;
        let _ = client
            .remove_pod_sandbox(cri::RemovePodSandboxRequest {
                pod_sandbox_id: sid.clone(),
            })
            .await;
    }
}

async fn connect(endpoint: &str) -> Result<RuntimeServiceClient<Channel>> {
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
