//! Container lifecycle hooks and stopping a container (Go's `lifecycle/handlers.go` and
//! `kuberuntime_container.go` `killContainer`), as one component, [`Hooks`], that needs only
//! the runtime (exec and stop), the status sink (events) and an HTTP client.
//!
//! - **postStart** runs right after the container started (exec, httpGet or sleep). If it
//!   fails, a `FailedPostStartHook` event is recorded, the container is killed, and the start
//!   counts as failed (`PostStartHookError`); the restart policy and back-off take it from there.
//! - **Stopping a container** ([`Engine::kill_container`]): the grace period is the caller's
//!   override if any, else the container's probe `terminationGracePeriodSeconds` when a
//!   liveness/startup failure is the reason, else the pod's deletion grace period, else its
//!   `terminationGracePeriodSeconds`. A **preStop** hook runs first and may use up to the whole
//!   grace period; `StopContainer` gets what is left, but never less than 2 seconds (Go's
//!   minimum shutdown window), after which the runtime sends SIGKILL. A failed preStop hook is
//!   recorded (`FailedPreStopHook`) and the stop goes on.
//!
//! Hooks run on the calling pod worker: a slow postStart delays only its own pod.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use tokio::time::Instant;

use crate::pod;
use crate::prober::probe::{self, Outcome, Target};
use crate::runtime::{ContainerRuntime, RuntimeError};
use crate::sink::{Event, EventType, StatusSink};

/// Go's minimum grace period for stopping a container.
pub const MIN_GRACE_SECONDS: i64 = 2;

/// Whole seconds of a duration, as the grace arithmetic counts them.
pub(crate) fn whole_secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The grace left for `StopContainer` after a preStop hook took `elapsed` of `grace` seconds:
/// at least [`MIN_GRACE_SECONDS`].
pub fn remaining_grace(grace: i64, elapsed: Duration) -> i64 {
    grace
        .saturating_sub(whole_secs(elapsed))
        .max(MIN_GRACE_SECONDS)
}

/// A container to stop.
#[derive(Debug, Clone)]
pub(crate) struct KillTarget<'a> {
    /// Runtime id.
    pub id: &'a str,
    /// Container name.
    pub name: &'a str,
    /// The spec, when the pod still has it (orphans have none: no hook runs).
    pub spec: Option<&'a Container>,
    /// Pod IP for httpGet hooks.
    pub pod_ip: &'a str,
}

/// The container spec with this name (app, init or ephemeral-less), if the pod has one.
pub(crate) fn container_spec<'a>(p: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = p.spec.as_ref()?;
    spec.containers.iter().find(|c| c.name == name).or_else(|| {
        spec.init_containers
            .as_deref()
            .unwrap_or(&[])
            .iter()
            .find(|c| c.name == name)
    })
}

/// Why a lifecycle hook failed; the message is what the `Failed*Hook` event says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The exec or httpGet action failed.
    #[error("{0}")]
    Failed(String),
    /// The handler cannot run here.
    #[error("{0}")]
    Unsupported(&'static str),
}

/// Runs lifecycle hooks and stops containers. See the module docs.
pub(crate) struct Hooks {
    runtime: Arc<dyn ContainerRuntime>,
    sink: Arc<dyn StatusSink>,
    http: Option<reqwest::Client>,
}

impl Hooks {
    /// Hooks that exec and stop through `runtime`, record events on `sink` and make httpGet
    /// requests with `http` (none: httpGet hooks fail as unavailable).
    pub fn new(
        runtime: Arc<dyn ContainerRuntime>,
        sink: Arc<dyn StatusSink>,
        http: Option<reqwest::Client>,
    ) -> Self {
        Hooks {
            runtime,
            sink,
            http,
        }
    }

    /// Runs a lifecycle handler against a running container.
    pub async fn run_hook(
        &self,
        handler: &LifecycleHandler,
        target: Target<'_>,
    ) -> Result<(), HookError> {
        if let Some(exec) = handler.exec.as_ref() {
            // Go runs exec hooks without a timeout of their own.
            return match probe::run_exec(self.runtime.as_ref(), target, exec, Duration::ZERO).await
            {
                Outcome::Success(_) | Outcome::Warning(_) => Ok(()),
                Outcome::Failure(m) | Outcome::Unknown(m) => Err(HookError::Failed(m)),
            };
        }
        if let Some(http) = handler.http_get.as_ref() {
            let Some(client) = self.http.as_ref() else {
                return Err(HookError::Unsupported(
                    "HTTP lifecycle hooks are unavailable",
                ));
            };
            return probe::run_http_hook(client, target, http)
                .await
                .map_err(HookError::Failed);
        }
        if let Some(sleep) = handler.sleep.as_ref() {
            let secs = u64::try_from(sleep.seconds.max(0)).unwrap_or(0);
            tokio::time::sleep(Duration::from_secs(secs)).await;
            return Ok(());
        }
        if handler.tcp_socket.is_some() {
            return Err(HookError::Unsupported(
                "tcpSocket lifecycle handlers are not supported (deprecated)",
            ));
        }
        Err(HookError::Unsupported(
            "the lifecycle handler has no action",
        ))
    }

    /// Runs the container's postStart hook, if any. On failure records the event, kills the
    /// container and returns the message.
    pub async fn post_start(
        &self,
        p: &Pod,
        c: &Container,
        container_id: &str,
        pod_ip: &str,
    ) -> Result<(), HookError> {
        let Some(handler) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return Ok(());
        };
        let target = Target {
            container_id,
            container: c,
            pod_ip,
        };
        let Err(message) = self.run_hook(handler, target).await else {
            return Ok(());
        };
        tracing::info!(pod = %pod::full_name(p), container = %c.name, error = %message, "postStart hook failed");
        self.sink.record_event(Event::for_pod(
            p,
            Some(&c.name),
            EventType::Warning,
            "FailedPostStartHook",
            format!("PostStartHook failed: {message}"),
        ));
        let kill = KillTarget {
            id: container_id,
            name: &c.name,
            spec: Some(c),
            pod_ip,
        };
        let grace = pod::termination_grace_period_seconds(p);
        if let Err(e) = self
            .kill_container(p, &kill, grace, "FailedPostStartHook")
            .await
        {
            tracing::warn!(pod = %pod::full_name(p), container = %c.name, error = %e, "killing the container after its failed postStart hook failed");
        }
        Err(message)
    }

    /// Stops one container: preStop hook (if any) within `grace` seconds, then
    /// `StopContainer` with the remaining grace (at least 2s). See the module docs.
    pub async fn kill_container(
        &self,
        p: &Pod,
        target: &KillTarget<'_>,
        grace: i64,
        message: &str,
    ) -> Result<(), RuntimeError> {
        self.sink.record_event(Event::for_pod(
            p,
            Some(target.name),
            EventType::Normal,
            "Killing",
            message.to_string(),
        ));
        let started = Instant::now();
        if let Some((c, handler)) = target.spec.and_then(|c| {
            c.lifecycle
                .as_ref()
                .and_then(|l| l.pre_stop.as_ref())
                .map(|h| (c, h))
        }) {
            if grace > 0 {
                let budget = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
                let hook_target = Target {
                    container_id: target.id,
                    container: c,
                    pod_ip: target.pod_ip,
                };
                match tokio::time::timeout(budget, self.run_hook(handler, hook_target)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(m)) => {
                        tracing::info!(pod = %pod::full_name(p), container = %target.name, error = %m, "preStop hook failed");
                        self.sink.record_event(Event::for_pod(
                            p,
                            Some(target.name),
                            EventType::Warning,
                            "FailedPreStopHook",
                            format!("PreStopHook failed: {m}"),
                        ));
                    }
                    Err(_) => {
                        tracing::info!(pod = %pod::full_name(p), container = %target.name, grace, "preStop hook did not finish within the grace period");
                    }
                }
            }
        }
        let left = remaining_grace(grace, started.elapsed());
        tracing::debug!(pod = %pod::full_name(p), container = %target.name, grace, left, "stopping container");
        self.runtime
            .stop_container(
                target.id,
                Duration::from_secs(u64::try_from(left).unwrap_or(0)),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_left_after_pre_stop() {
        let cases = [
            (30, 0, 30),
            (30, 10_500, 20),
            (30, 29_000, 2),
            (30, 45_000, 2),
            (1, 0, 2),
            (0, 0, 2),
        ];
        for (grace, elapsed_ms, want) in cases {
            assert_eq!(
                remaining_grace(grace, Duration::from_millis(elapsed_ms)),
                want,
                "grace {grace}, elapsed {elapsed_ms}ms"
            );
        }
    }
}
