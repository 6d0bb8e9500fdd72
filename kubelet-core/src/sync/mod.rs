//! Pod sync: carrying out [`actions::compute_pod_actions`] against the runtime (Go's
//! `kuberuntime.SyncPod`), killing a pod (`killPodWithSyncResult`) and removing what is left
//! of it after termination.
//!
//! Only pod workers call these, one call at a time per pod.

pub mod actions;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::clock::{now_time, now_unix_nanos};
use crate::dns::pod_dns;
use crate::engine::Engine;
use crate::env::{expand_command, FieldValues};
use crate::hash::container_hash;
use crate::pod;
use crate::pod_status::{self, PodRuntimeStatus};
use crate::runtime::{ContainerConfig, ContainerKind, ContainerState, SandboxConfig, SandboxState};
use crate::sink::{Event, EventType};
use crate::status::{generate, is_terminal, StatusInputs, WaitingReason};
use crate::termination_message;

use actions::{compute_pod_actions_with_probes, PodActions};

/// How long to wait before retrying after a failed runtime call.
const ERROR_RETRY: Duration = Duration::from_secs(2);
use crate::lifecycle::{container_spec, whole_secs, KillTarget, MIN_GRACE_SECONDS};

/// What the worker does after a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncOutcome {
    /// The pod reached a terminal phase: terminate it.
    Terminal,
    /// Sync again after this long (or earlier on an event).
    Requeue(Duration),
}

/// Per-pod memory of the worker: why containers last failed to start, termination messages
/// already read, and why the kubelet failed the pod (if it did).
#[derive(Debug, Default)]
pub(crate) struct WorkerMemory {
    pub reasons: HashMap<String, WaitingReason>,
    /// Termination messages by container id.
    pub messages: HashMap<String, String>,
    /// Set when the kubelet fails the pod (`DeadlineExceeded`).
    pub failure: Option<WaitingReason>,
}

/// Go's reason and message for a pod past its `activeDeadlineSeconds`.
const DEADLINE_REASON: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

fn nothing_to_do(a: &PodActions) -> bool {
    !a.kill_pod
        && !a.create_sandbox
        && a.next_init_container.is_none()
        && a.sidecars_to_start.is_empty()
        && a.containers_to_start.is_empty()
        && a.containers_to_kill.is_empty()
}

/// Time left before the pod's `activeDeadlineSeconds` (counted from its start time) runs out;
/// `None` when it has no deadline.
fn active_deadline_left(
    p: &Pod,
    status: &k8s_openapi::api::core::v1::PodStatus,
) -> Option<Duration> {
    let deadline = p.spec.as_ref()?.active_deadline_seconds?;
    let start = status.start_time.as_ref()?.0.as_nanosecond();
    let end = start + i128::from(deadline.max(0)) * 1_000_000_000;
    let left = end - i128::from(now_unix_nanos());
    Some(Duration::from_nanos(
        u64::try_from(left.max(0)).unwrap_or(u64::MAX),
    ))
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

impl Engine {
    fn event(&self, e: Event) {
        self.sink.record_event(e);
    }

    /// Generates and records the pod's status; returns it.
    pub(crate) fn update_status(
        &self,
        p: &Arc<Pod>,
        rt: &PodRuntimeStatus,
        memory: &WorkerMemory,
        terminated: bool,
    ) -> k8s_openapi::api::core::v1::PodStatus {
        let old = self.status.get(pod::uid(p));
        let runtime_name = self.runtime_name();
        let status = generate(&StatusInputs {
            pod: p,
            runtime: rt,
            reasons: &memory.reasons,
            old: old.as_ref(),
            runtime_name: &runtime_name,
            host_ips: &self.config.node_ips,
            terminated,
            now: now_time(),
            probes: self.prober.as_ref(),
            failure: memory.failure.as_ref(),
        });
        self.status.set(p, status.clone());
        status
    }

    /// One sync of a pod that should be running. See the module docs.
    pub(crate) async fn sync_pod(&self, p: &Arc<Pod>, memory: &mut WorkerMemory) -> SyncOutcome {
        let _permit = match self.sync_permits.as_ref() {
            Some(s) => s.acquire().await.ok(),
            None => None,
        };
        let uid = pod::uid(p);
        let mut rt = match pod_status::fetch(self.runtime.as_ref(), uid).await {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!(pod = %pod::full_name(p), uid, error = %e, "reading pod state from the runtime failed");
                return SyncOutcome::Requeue(ERROR_RETRY);
            }
        };
        self.fill_termination_messages(p, &mut rt, memory).await;
        let status = self.update_status(p, &rt, memory, false);
        if is_terminal(&status) {
            return SyncOutcome::Terminal;
        }
        let deadline_left = match active_deadline_left(p, &status) {
            Some(left) if left.is_zero() => {
                tracing::info!(pod = %pod::full_name(p), uid, "pod exceeded its activeDeadlineSeconds");
                self.event(Event::for_pod(
                    p,
                    None,
                    EventType::Warning,
                    DEADLINE_REASON,
                    DEADLINE_MESSAGE.into(),
                ));
                memory.failure = Some(WaitingReason {
                    reason: DEADLINE_REASON.into(),
                    message: DEADLINE_MESSAGE.into(),
                });
                self.update_status(p, &rt, memory, false);
                return SyncOutcome::Terminal;
            }
            other => other,
        };
        self.prober.ensure_pod(p);
        if !self
            .prepare_volumes(p, rt.pod_ips().into_iter().next(), memory)
            .await
        {
            self.update_status(p, &rt, memory, false);
            return SyncOutcome::Requeue(ERROR_RETRY);
        }
        if !pod::host_network(p)
            && !self
                .network_ready
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            tracing::debug!(pod = %pod::full_name(p), "network is not ready; waiting");
            return SyncOutcome::Requeue(Duration::from_secs(1));
        }
        let actions = compute_pod_actions_with_probes(p, &rt, self.prober.as_ref());
        let resync = match deadline_left {
            Some(left) => left.min(self.config.sync_frequency),
            None => self.config.sync_frequency,
        };
        if nothing_to_do(&actions) {
            return SyncOutcome::Requeue(resync);
        }
        tracing::debug!(pod = %pod::full_name(p), uid, ?actions, "syncing pod");
        let retry = self.execute(p, &rt, &actions, memory).await;
        let next = retry.unwrap_or(resync).min(resync);
        match pod_status::fetch(self.runtime.as_ref(), uid).await {
            Ok(mut rt) => {
                self.fill_termination_messages(p, &mut rt, memory).await;
                let status = self.update_status(p, &rt, memory, false);
                if is_terminal(&status) {
                    return SyncOutcome::Terminal;
                }
                SyncOutcome::Requeue(next)
            }
            Err(_) => SyncOutcome::Requeue(ERROR_RETRY),
        }
    }

    /// Builds the sandbox config, asking the container manager for the cgroup parent.
    async fn sandbox_config(&self, p: &Arc<Pod>, attempt: u32) -> Result<SandboxConfig, String> {
        let resources = self
            .cm
            .ensure_pod_resources(p)
            .await
            .map_err(|e| e.to_string())?;
        let hostname = crate::volume::etc_hosts::sandbox_hostname(p);
        let log_directory = self.config.pod_logs_dir.join(format!(
            "{}_{}_{}",
            pod::namespace(p),
            pod::name(p),
            pod::uid(p)
        ));
        Ok(SandboxConfig {
            pod: p.clone(),
            attempt,
            hostname,
            log_directory,
            cgroup_parent: resources.cgroup_parent,
            dns: Some(pod_dns(p, &self.config, &self.host_dns())),
        })
    }

    /// Carries out the actions; returns the earliest time a retry is due, if any.
    async fn execute(
        &self,
        p: &Arc<Pod>,
        rt: &PodRuntimeStatus,
        actions: &PodActions,
        memory: &mut WorkerMemory,
    ) -> Option<Duration> {
        let grace = self.grace_period(p, None);
        let pod_ip = rt.pod_ips().into_iter().next().unwrap_or_default();
        let stops = actions.containers_to_kill.iter().map(|k| {
            let target = KillTarget {
                id: &k.id,
                name: &k.name,
                spec: container_spec(p, &k.name),
                pod_ip: &pod_ip,
            };
            let grace = k.grace_seconds.unwrap_or_else(|| whole_secs(grace)).max(0);
            async move { self.kill_container(p, &target, grace, &k.message).await }
        });
        for r in join_all(stops).await {
            if let Err(e) = r {
                tracing::warn!(pod = %pod::full_name(p), error = %e, "stopping container failed");
            }
        }
        if actions.kill_pod {
            if actions.create_sandbox && !rt.sandboxes.is_empty() {
                self.event(Event::for_pod(
                    p,
                    None,
                    EventType::Normal,
                    "SandboxChanged",
                    "Pod sandbox changed, it will be killed and re-created.".into(),
                ));
            }
            // Containers killed above with their own reason are not stopped twice.
            let mut rest = rt.clone();
            rest.containers.retain(|c| {
                !actions
                    .containers_to_kill
                    .iter()
                    .any(|k| k.id == c.summary.id)
            });
            if let Err(e) = self.kill_pod(p, &rest, grace).await {
                tracing::warn!(pod = %pod::full_name(p), error = %e, "killing pod failed");
                return Some(ERROR_RETRY);
            }
            if !actions.create_sandbox {
                return None;
            }
        }
        let sandbox = match self.sandbox_config(p, actions.attempt).await {
            Ok(s) => s,
            Err(message) => {
                self.event(Event::for_pod(
                    p,
                    None,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    message,
                ));
                return Some(ERROR_RETRY);
            }
        };
        let mut pod_ip = pod_ip;
        let sandbox_id = if actions.create_sandbox {
            match self.runtime.run_pod_sandbox(&sandbox).await {
                Ok(id) => {
                    if let Ok(st) = self.runtime.pod_sandbox_status(&id).await {
                        pod_ip = st.ip.unwrap_or_default();
                    }
                    id
                }
                Err(e) => {
                    self.event(Event::for_pod(
                        p,
                        None,
                        EventType::Warning,
                        "FailedCreatePodSandBox",
                        format!("Failed to create pod sandbox: {e}"),
                    ));
                    return Some(ERROR_RETRY);
                }
            }
        } else {
            match actions.sandbox_id.clone() {
                Some(id) => id,
                None => return Some(ERROR_RETRY),
            }
        };
        let fields = FieldValues {
            pod_ip,
            host_ip: self.config.node_ips.first().cloned().unwrap_or_default(),
            node_name: self.config.node_name.clone(),
            host_ips: self.config.node_ips.clone(),
        };
        let spec = p.spec.as_ref()?;
        let mut retry: Option<Duration> = None;
        let mut todo: Vec<(&Container, ContainerKind)> = Vec::new();
        let inits = spec.init_containers.as_deref().unwrap_or(&[]);
        for i in actions
            .next_init_container
            .iter()
            .chain(&actions.sidecars_to_start)
        {
            if let Some(c) = inits.get(*i) {
                todo.push((c, ContainerKind::Init));
            }
        }
        for &i in &actions.containers_to_start {
            if let Some(c) = spec.containers.get(i) {
                todo.push((c, ContainerKind::Regular));
            }
        }
        for (c, kind) in todo {
            match self
                .start_container(p, rt, &sandbox_id, &sandbox, c, kind, &fields)
                .await
            {
                Ok(()) => {
                    memory.reasons.remove(&c.name);
                }
                Err((reason, after)) => {
                    tracing::info!(pod = %pod::full_name(p), container = %c.name, reason = %reason.reason, message = %reason.message, "container not started");
                    memory.reasons.insert(c.name.clone(), reason);
                    let after = after.unwrap_or(ERROR_RETRY);
                    retry = Some(retry.map_or(after, |r| r.min(after)));
                }
            }
        }
        retry
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_container(
        &self,
        p: &Arc<Pod>,
        rt: &PodRuntimeStatus,
        sandbox_id: &str,
        sandbox: &SandboxConfig,
        c: &Container,
        kind: ContainerKind,
        fields: &FieldValues,
    ) -> Result<(), (WaitingReason, Option<Duration>)> {
        let fail = |reason: &str, message: String| {
            (
                WaitingReason {
                    reason: reason.to_string(),
                    message,
                },
                None,
            )
        };
        let event = |t: EventType, reason: &str, message: String| {
            self.event(Event::for_pod(p, Some(&c.name), t, reason, message));
        };
        let latest = rt.latest(&c.name);
        let hash = container_hash(c);
        // Back-off looks at the newest exited attempt, even when a newer one is running and
        // being replaced (a liveness restart), as Go's doBackOff does.
        let newest_exited = rt
            .containers
            .iter()
            .find(|s| s.summary.name == c.name && s.summary.state == ContainerState::Exited);
        if let Some(s) = newest_exited {
            let key = format!(
                "{}_{}_{}_{:x}",
                pod::name(p),
                pod::namespace(p),
                pod::uid(p),
                hash
            );
            let now = now_unix_nanos();
            let mut backoff = self.crash_backoff();
            if let Some(left) = backoff.is_in_backoff_since(&key, s.finished_at, now) {
                let delay = backoff.get(&key).unwrap_or_default();
                drop(backoff);
                event(
                    EventType::Warning,
                    "BackOff",
                    format!(
                        "Back-off restarting failed container {} in pod {}",
                        c.name,
                        pod::full_name(p)
                    ),
                );
                return Err((
                    WaitingReason {
                        reason: "CrashLoopBackOff".into(),
                        message: format!(
                            "back-off {}s restarting failed container={} pod={}_{}({})",
                            delay.as_secs(),
                            c.name,
                            pod::name(p),
                            pod::namespace(p),
                            pod::uid(p)
                        ),
                    },
                    Some(left),
                ));
            }
            backoff.next(&key, s.finished_at, now);
        }
        let image_ref = self
            .images
            .ensure_image(self.runtime.as_ref(), self.sink.as_ref(), p, c, sandbox)
            .await
            .map_err(|e| (e.reason, e.retry_after))?;
        let restart_count = latest.map_or(0, |s| s.summary.attempt.saturating_add(1));
        let env = self
            .make_container_env(p, c, fields)
            .await
            .map_err(|m| fail("CreateContainerConfigError", m))?;
        let (command, args) = expand_command(c, &env);
        let mut mounts = self
            .make_container_mounts(p, c, &env, fields)
            .await
            .map_err(|m| fail("CreateContainerConfigError", m))?;
        match termination_message::prepare(&self.config.root_dir, p, c, restart_count).await {
            Ok(Some(m)) => mounts.push(m),
            Ok(None) => {}
            Err(m) => return Err(fail("CreateContainerConfigError", m)),
        }
        let config = ContainerConfig {
            pod: p.clone(),
            container: c.clone(),
            kind,
            restart_count,
            hash,
            image_ref,
            command,
            args,
            env,
            mounts,
            log_path: PathBuf::from(&c.name).join(format!("{restart_count}.log")),
        };
        let id = match self
            .runtime
            .create_container(sandbox_id, &config, sandbox)
            .await
        {
            Ok(id) => id,
            Err(e) => {
                let message = e.to_string();
                event(EventType::Warning, "Failed", format!("Error: {message}"));
                return Err(fail("CreateContainerError", message));
            }
        };
        event(
            EventType::Normal,
            "Created",
            format!("Created container {}", c.name),
        );
        if let Err(e) = self.runtime.start_container(&id).await {
            let message = e.to_string();
            event(EventType::Warning, "Failed", format!("Error: {message}"));
            return Err(fail("RunContainerError", message));
        }
        event(
            EventType::Normal,
            "Started",
            format!("Started container {}", c.name),
        );
        if let Err(message) = self.post_start(p, c, &id, &fields.pod_ip).await {
            return Err(fail("PostStartHookError", message));
        }
        Ok(())
    }

    /// The grace period for stopping the pod's containers: an explicit override as given,
    /// otherwise the pod's (deletion or spec) grace period, at least 2s.
    pub(crate) fn grace_period(&self, p: &Pod, override_seconds: Option<i64>) -> Duration {
        match override_seconds {
            Some(s) => secs(s),
            None => secs(pod::termination_grace_period_seconds(p).max(MIN_GRACE_SECONDS)),
        }
    }

    /// Stops every running container and then every ready sandbox: app and regular init
    /// containers first (in parallel), then sidecars (in parallel) with what is left of the
    /// grace period, so sidecars outlive the containers they serve.
    pub(crate) async fn kill_pod(
        &self,
        p: &Pod,
        rt: &PodRuntimeStatus,
        grace: Duration,
    ) -> Result<(), crate::runtime::RuntimeError> {
        let pod_ip = rt.pod_ips().into_iter().next().unwrap_or_default();
        let started = tokio::time::Instant::now();
        let inits = p
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or(&[]);
        let (sidecars, others): (Vec<_>, Vec<_>) = rt.running_containers().partition(|c| {
            inits
                .iter()
                .any(|i| i.name == c.summary.name && pod::is_restartable_init(i))
        });
        let mut first_err = None;
        for (phase, group) in [others, sidecars].into_iter().enumerate() {
            let grace = if phase == 0 {
                whole_secs(grace)
            } else {
                whole_secs(grace.saturating_sub(started.elapsed())).max(MIN_GRACE_SECONDS)
            };
            let stops = group.into_iter().map(|c| {
                let target = KillTarget {
                    id: &c.summary.id,
                    name: &c.summary.name,
                    spec: container_spec(p, &c.summary.name),
                    pod_ip: &pod_ip,
                };
                let message = format!("Stopping container {}", c.summary.name);
                async move { self.kill_container(p, &target, grace, &message).await }
            });
            for r in join_all(stops).await {
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        for s in rt
            .sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
        {
            self.runtime.stop_pod_sandbox(&s.id).await?;
        }
        Ok(())
    }

    /// Reads the termination messages of exited containers that have none (once each).
    pub(crate) async fn fill_termination_messages(
        &self,
        p: &Pod,
        rt: &mut PodRuntimeStatus,
        memory: &mut WorkerMemory,
    ) {
        for c in rt.containers.iter_mut() {
            if c.summary.state != ContainerState::Exited || !c.message.is_empty() {
                continue;
            }
            if let Some(m) = memory.messages.get(&c.summary.id) {
                c.message = m.clone();
                continue;
            }
            let Some(spec) = container_spec(p, &c.summary.name) else {
                continue;
            };
            let message = termination_message::read(
                &self.config.root_dir,
                p,
                spec,
                c.summary.attempt,
                c.exit_code,
                c.log_path.as_deref(),
            )
            .await;
            memory
                .messages
                .insert(c.summary.id.clone(), message.clone());
            c.message = message;
        }
        let ids: std::collections::HashSet<&str> = rt
            .containers
            .iter()
            .map(|c| c.summary.id.as_str())
            .collect();
        memory.messages.retain(|id, _| ids.contains(id.as_str()));
    }

    /// Terminates a pod: stops everything with the grace period and records the final status.
    pub(crate) async fn terminate_pod(
        &self,
        p: &Arc<Pod>,
        grace: Duration,
        memory: &mut WorkerMemory,
    ) -> Result<(), crate::runtime::RuntimeError> {
        let uid = pod::uid(p);
        self.prober.stop_liveness_and_startup(uid);
        let rt = pod_status::fetch(self.runtime.as_ref(), uid).await?;
        self.kill_pod(p, &rt, grace).await?;
        self.prober.remove_pod(uid);
        // Nothing runs any more: its volumes go (best effort; cleanup retries).
        if let Err(e) = self.volumes.unmount_volumes(uid).await {
            tracing::warn!(pod = %pod::full_name(p), uid, error = %e, "tearing down volumes failed");
        }
        // An orphan found in the runtime has no spec and no status to publish.
        if p.spec.is_some() {
            let mut rt = pod_status::fetch(self.runtime.as_ref(), uid).await?;
            self.fill_termination_messages(p, &mut rt, memory).await;
            let terminated = pod::is_deleted(p) || !self.pods().contains(uid);
            self.update_status(p, &rt, memory, terminated);
        }
        Ok(())
    }

    /// Removes the terminated pod's containers, sandboxes and pod-level resources.
    pub(crate) async fn cleanup_pod(&self, p: &Arc<Pod>) -> Result<(), String> {
        let uid = pod::uid(p);
        let rt = pod_status::fetch(self.runtime.as_ref(), uid)
            .await
            .map_err(|e| e.to_string())?;
        for c in &rt.containers {
            self.runtime
                .remove_container(&c.summary.id)
                .await
                .map_err(|e| e.to_string())?;
        }
        for s in &rt.sandboxes {
            if s.state == SandboxState::Ready {
                self.runtime
                    .stop_pod_sandbox(&s.id)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            self.runtime
                .remove_pod_sandbox(&s.id)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.volumes
            .teardown_pod(uid)
            .await
            .map_err(|e| e.to_string())?;
        self.cm
            .remove_pod_resources(uid)
            .await
            .map_err(|e| e.to_string())?;
        // Termination-message files; the pod directory itself belongs to the volume manager.
        if self.config.root_dir.as_os_str().is_empty() || !pod::is_safe_uid(uid) {
            return Ok(());
        }
        let dir = self
            .config
            .root_dir
            .join("pods")
            .join(uid)
            .join("containers");
        match tokio::fs::remove_dir_all(&dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("removing {}: {e}", dir.display())),
        }
        Ok(())
    }
}
