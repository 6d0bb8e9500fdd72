//! The kubelet restart of the end-to-end rows: with every pod running, the kubelet is stopped
//! (SIGTERM; a kubelet leaves its pods running when it exits) and started again on the same
//! root directory and manifests; timed from the new process's start until `/pods` shows every
//! pod Running again, then checked: the same containers run (CRI ids before and after), and no
//! container's restart count moved.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{bail, Result};
use kubelet_core::runtime::ContainerState;
use kubelet_runtime_cri::CriRuntime;
use tokio::process::Child;

use super::backend::prefixed_containers;
use super::kubelets::{http_get, running_pods, terminate, Kind, KubeletRun};

/// What the restart showed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Restart {
    /// New process started -> every pod Running in `/pods`.
    pub(super) adopted: Option<Duration>,
    /// Running containers of the pods before the restart.
    pub(super) before: usize,
    /// Of those, still running (same CRI id) after it.
    pub(super) kept: usize,
    /// Sum of the pods' container restart counts after it.
    pub(super) restarts: u64,
}

/// How a run starts its kubelet (`log` names the log file): the child and its pid.
pub(super) type Spawn<'a> = dyn Fn(&str) -> Result<(Child, u32)> + 'a;

/// Restarts the kubelet (`child`, `pid` are replaced by the new process) and measures the
/// adoption of `pods` pods named `prefix…`; the result lands in `out.restart`.
#[allow(clippy::too_many_arguments)]
pub(super) async fn restart(
    kind: Kind,
    rt: &CriRuntime,
    prefix: &str,
    pods: usize,
    child: &mut Child,
    pid: &mut u32,
    spawn: &Spawn<'_>,
    out: &mut KubeletRun,
) -> Result<()> {
    let before = running_ids(rt, prefix).await?;
    if !terminate(child, *pid).await {
        bail!("the kubelet did not exit within 30 s of SIGTERM (restart)");
    }
    let (new_child, new_pid) = spawn("kubelet-restarted.log")?;
    let t0 = kubelet_core::clock::monotonic_now();
    *child = new_child;
    *pid = new_pid;
    let mut restart = Restart {
        before: before.len(),
        ..Restart::default()
    };
    let mut body = String::new();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("the restarted kubelet exited: {status}");
        }
        if let Ok((200, b)) = http_get(kind.read_only_port(), "/pods").await {
            if running_pods(&b, prefix) >= pods {
                restart.adopted = Some(kubelet_core::clock::elapsed(t0));
                body = b;
                break;
            }
        }
        if kubelet_core::clock::elapsed(t0) > Duration::from_secs(60) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = running_ids(rt, prefix).await?;
    restart.kept = before.intersection(&after).count();
    restart.restarts = restart_counts(&body, prefix);
    eprintln!(
        "[bench] {kind:?}: restarted; all Running after {}, {}/{} containers kept, restart counts {}",
        restart
            .adopted
            .map(|d| format!("{:.2}s", d.as_secs_f64()))
            .unwrap_or("(not within 60 s)".into()),
        restart.kept,
        restart.before,
        restart.restarts
    );
    out.restart = Some(restart);
    Ok(())
}

/// CRI ids of the running containers of pods named `prefix…`.
async fn running_ids(rt: &CriRuntime, prefix: &str) -> Result<HashSet<String>> {
    Ok(prefixed_containers(rt, prefix)
        .await?
        .into_iter()
        .filter(|c| c.state == ContainerState::Running)
        .map(|c| c.id)
        .collect())
}

/// The sum of the container restart counts of the pods named `prefix…` in a PodList.
fn restart_counts(body: &str, prefix: &str) -> u64 {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return 0;
    };
    let items = v.get("items").and_then(|i| i.as_array());
    items
        .into_iter()
        .flatten()
        .filter(|p| {
            p.pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .flat_map(|p| {
            p.pointer("/status/containerStatuses")
                .and_then(|c| c.as_array())
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("restartCount").and_then(|r| r.as_u64()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_counts_add_up_the_prefixed_pods_containers() {
        let body = serde_json::json!({
            "items": [
                { "metadata": { "name": "bench-rs-1-000" },
                  "status": { "containerStatuses": [ { "restartCount": 0 }, { "restartCount": 2 } ] } },
                { "metadata": { "name": "bench-rs-1-001" },
                  "status": { "containerStatuses": [ { "restartCount": 1 } ] } },
                { "metadata": { "name": "other" },
                  "status": { "containerStatuses": [ { "restartCount": 7 } ] } },
                { "metadata": { "name": "bench-rs-1-002" }, "status": {} }
            ]
        })
        .to_string();
        assert_eq!(restart_counts(&body, "bench-rs-1"), 3);
        assert_eq!(restart_counts("not json", "bench-rs-1"), 0);
    }
}
