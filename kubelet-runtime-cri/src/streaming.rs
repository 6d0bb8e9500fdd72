//! Commands in containers over CRI: `ExecSync`, and the URLs of the runtime's streaming
//! server for `Exec`, `Attach` and `PortForward`.

use std::time::Duration;

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{AttachRequest, ExecOutput, ExecRequest, RuntimeResult};

use crate::client::{ctx, whole_seconds_up};
use crate::CriRuntime;

/// `ExecSync`: the command's timeout plus the request timeout as the deadline, none when the
/// command has no timeout.
pub(crate) async fn exec_sync(
    rt: &CriRuntime,
    container_id: &str,
    cmd: &[String],
    timeout: Duration,
) -> RuntimeResult<ExecOutput> {
    let mut client = rt.runtime.clone();
    // As Go: the command's timeout plus the request timeout, or no deadline at all when
    // the command has none.
    let deadline = (!timeout.is_zero()).then(|| rt.config.request_timeout.saturating_add(timeout));
    let req = rt.request(
        cri::ExecSyncRequest {
            container_id: container_id.to_string(),
            cmd: cmd.to_vec(),
            timeout: whole_seconds_up(timeout),
        },
        deadline,
    );
    let resp = rt
        .call(
            ctx("ExecSync", "container", container_id),
            deadline,
            client.exec_sync(req),
        )
        .await?;
    Ok(ExecOutput {
        stdout: resp.stdout,
        stderr: resp.stderr,
        exit_code: resp.exit_code,
    })
}

/// `Exec`: the streaming server's URL for the session.
pub(crate) async fn exec_url(rt: &CriRuntime, request: &ExecRequest) -> RuntimeResult<String> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ExecRequest {
            container_id: request.container_id.clone(),
            cmd: request.cmd.clone(),
            tty: request.tty,
            stdin: request.stdin,
            stdout: request.stdout,
            stderr: request.stderr,
        },
        rt.deadline(),
    );
    Ok(rt
        .call(
            ctx("Exec", "container", &request.container_id),
            rt.deadline(),
            client.exec(req),
        )
        .await?
        .url)
}

/// `Attach`: the streaming server's URL for the session.
pub(crate) async fn attach_url(rt: &CriRuntime, request: &AttachRequest) -> RuntimeResult<String> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::AttachRequest {
            container_id: request.container_id.clone(),
            stdin: request.stdin,
            tty: request.tty,
            stdout: request.stdout,
            stderr: request.stderr,
        },
        rt.deadline(),
    );
    Ok(rt
        .call(
            ctx("Attach", "container", &request.container_id),
            rt.deadline(),
            client.attach(req),
        )
        .await?
        .url)
}

/// `PortForward`: the streaming server's URL for the session.
pub(crate) async fn port_forward_url(
    rt: &CriRuntime,
    sandbox_id: &str,
    ports: &[i32],
) -> RuntimeResult<String> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::PortForwardRequest {
            pod_sandbox_id: sandbox_id.to_string(),
            port: ports.to_vec(),
        },
        rt.deadline(),
    );
    Ok(rt
        .call(
            ctx("PortForward", "sandbox", sandbox_id),
            rt.deadline(),
            client.port_forward(req),
        )
        .await?
        .url)
}
