//! Carrying out a pod's actions (Go's `kuberuntime.SyncPod` after `computePodActions`):
//! kill what must go, create the sandbox when needed, then start the next init container,
//! sidecars and app containers — each with its image, environment, mounts and hooks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::Instrument;

use crate::clock::now_unix_nanos;
use crate::dns::pod_dns;
use crate::engine::Engine;
use crate::env::{expand_command, make_environment, EnvError, EnvInputs, FieldValues};
use crate::hash::container_hash;
use crate::hooks::{container_spec, whole_secs, KillTarget};
use crate::pod;
use crate::pod_status::PodRuntimeStatus;
use crate::runtime::{
    ContainerConfig, ContainerKind, ContainerState, DeviceSettings, EnvVar, Mount,
    MountPropagation, SandboxConfig, SandboxState,
};
use crate::sink::{Event, EventType};
use crate::status::WaitingReason;
use crate::telemetry;
use crate::termination_message;
use crate::volume::VolumeError;

use super::actions::PodActions;
use super::stop::kill_pod;
use super::{field_values, grace_period, WorkerMemory, ERROR_RETRY};

/// Carries out the actions; returns the earliest time a retry is due, if any.
pub(super) async fn execute(
    e: &Engine,
    p: &Arc<Pod>,
    rt: &PodRuntimeStatus,
    actions: &PodActions,
    memory: &mut WorkerMemory,
) -> Option<Duration> {
    let grace = grace_period(p, None);
    let pod_ip = rt.pod_ips().into_iter().next().unwrap_or_default();
    let stops = actions.containers_to_kill.iter().map(|k| {
        let target = KillTarget {
            id: &k.id,
            name: &k.name,
            spec: container_spec(p, &k.name),
            pod_ip: &pod_ip,
        };
        let grace = k.grace_seconds.unwrap_or_else(|| whole_secs(grace)).max(0);
        async move { e.hooks.kill_container(p, &target, grace, &k.message).await }
    });
    for r in join_all(stops).await {
        if let Err(err) = r {
            tracing::warn!(pod = %pod::full_name(p), error = %err, "stopping container failed");
        }
    }
    if actions.kill_pod {
        if actions.create_sandbox && !rt.sandboxes.is_empty() {
            e.sink.record_event(Event::for_pod(
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
        if let Err(err) = kill_pod(e, p, &rest, grace).await {
            tracing::warn!(pod = %pod::full_name(p), error = %err, "killing pod failed");
            return Some(ERROR_RETRY);
        }
        if !actions.create_sandbox {
            return None;
        }
    }
    let sandbox_part = telemetry::sync_part_span(telemetry::SyncPart::SandboxConfig);
    let mut sandbox = match sandbox_config(e, p, actions.attempt)
        .instrument(sandbox_part)
        .await
    {
        Ok(s) => s,
        Err(err) => {
            e.sink.record_event(Event::for_pod(
                p,
                None,
                EventType::Warning,
                "FailedCreatePodSandBox",
                err,
            ));
            return Some(ERROR_RETRY);
        }
    };
    if actions.create_sandbox {
        let handler = match super::sandbox::runtime_handler(e, p).await.and_then(|h| {
            super::sandbox::check_user_namespaces(p, &h, &e.runtime_state.handlers()).map(|()| h)
        }) {
            Ok(h) => h,
            Err(message) => {
                tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), error = %message, "cannot create the pod's sandbox");
                e.sink.record_event(Event::for_pod(
                    p,
                    None,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {message}"),
                ));
                return Some(ERROR_RETRY);
            }
        };
        sandbox.runtime_handler = handler;
    }
    let mut pod_ip = pod_ip;
    let sandbox_id = if actions.create_sandbox {
        remove_dead_sandboxes(e, p, rt).await;
        crate::metrics::global().started_pods.inc_labels(&[]);
        match e.runtime.run_pod_sandbox(&sandbox).await {
            Ok(id) => {
                if let Ok(st) = e.runtime.pod_sandbox_status(&id).await {
                    pod_ip = st.ip.unwrap_or_default();
                }
                id
            }
            Err(err) => {
                crate::metrics::global().started_pods_errors.inc_labels(&[]);
                // Go logs this at error level ("CreatePodSandbox for pod failed").
                tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), error = %err, "creating the pod's sandbox failed; retrying");
                e.sink.record_event(Event::for_pod(
                    p,
                    None,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {err}"),
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
    let fields = field_values(e, pod_ip);
    let spec = p.spec.as_ref()?;
    let mut retry: Option<Duration> = None;
    let mut todo: Vec<(&Container, ContainerKind)> = Vec::new();
    // Ephemeral containers first, so that a pod stuck in an init container can be debugged.
    let ephemeral = pod::ephemeral_containers(p);
    let mut not_started: Vec<(String, WaitingReason)> = Vec::new();
    for &i in &actions.ephemeral_to_start {
        let Some(c) = ephemeral.get(i) else { continue };
        match ephemeral_kind(p, rt, &c.name) {
            Ok(kind) => todo.push((c, kind)),
            Err(message) => {
                e.sink.record_event(Event::for_pod(
                    p,
                    Some(&c.name),
                    EventType::Warning,
                    "Failed",
                    format!("Error: {message}"),
                ));
                not_started.push((
                    c.name.clone(),
                    WaitingReason {
                        reason: "CreateContainerConfigError".into(),
                        message,
                    },
                ));
            }
        }
    }
    for (name, reason) in not_started {
        memory.reasons.insert(name, reason);
        retry = Some(ERROR_RETRY);
    }
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
        let started = &mut memory.image_pull;
        match start_container(e, p, rt, &sandbox_id, &sandbox, c, kind, &fields, started).await {
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

/// How an ephemeral container is started: in the process namespace of its running target
/// container, when it names one (Go's `getTargetID`: "unable to find target container X"
/// while the target does not run).
fn ephemeral_kind(p: &Pod, rt: &PodRuntimeStatus, name: &str) -> Result<ContainerKind, String> {
    let Some(target) = pod::ephemeral_target(p, name) else {
        return Ok(ContainerKind::Ephemeral { target_id: None });
    };
    match rt.latest(target) {
        Some(s) if s.summary.state == ContainerState::Running => Ok(ContainerKind::Ephemeral {
            target_id: Some(s.summary.id.clone()),
        }),
        _ => Err(format!("unable to find target container {target}")),
    }
}

/// Builds the sandbox config, asking the container manager for the cgroup parent. The error
/// is the `FailedCreatePodSandBox` event's message.
async fn sandbox_config(e: &Engine, p: &Arc<Pod>, attempt: u32) -> Result<SandboxConfig, String> {
    let hostname = crate::volume::etc_hosts::sandbox_hostname(p, &e.config.cluster_domain)
        .map_err(|err| format!("Failed to create pod sandbox: {err}"))?;
    let resources =
        e.cm.ensure_pod_resources(p)
            .await
            .map_err(|err| err.to_string())?;
    let log_directory = e.config.pod_logs_dir.join(format!(
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
        dns: Some(pod_dns(p, &e.config, &e.runtime_state.host_dns())),
        runtime_handler: String::new(),
    })
}

#[allow(clippy::too_many_arguments)]
async fn start_container(
    e: &Engine,
    p: &Arc<Pod>,
    rt: &PodRuntimeStatus,
    sandbox_id: &str,
    sandbox: &SandboxConfig,
    c: &Container,
    kind: ContainerKind,
    fields: &FieldValues,
    image_pull: &mut Duration,
) -> Result<(), (WaitingReason, Option<Duration>)> {
    let event = |t: EventType, reason: &str, message: String| {
        e.sink
            .record_event(Event::for_pod(p, Some(&c.name), t, reason, message));
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
        let mut backoff = e.crash_backoff();
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
    let pull_started = tokio::time::Instant::now();
    let image = e
        .images
        .ensure_image(
            e.runtime.as_ref(),
            e.sink.as_ref(),
            e.volumes.store().as_ref(),
            p,
            c,
            sandbox,
        )
        .await;
    *image_pull += pull_started.elapsed();
    let image_ref = image.map_err(|err| (err.reason, err.retry_after))?;
    let restart_count = latest.map_or(0, |s| s.summary.attempt.saturating_add(1));
    let metrics = crate::metrics::global();
    let container_type = crate::metrics::container_type(&kind);
    let config_part = telemetry::sync_part_span(telemetry::SyncPart::ContainerConfig);
    let config = container_config(e, p, c, kind, fields, restart_count, hash, image_ref)
        .instrument(config_part)
        .await?;
    metrics.started_containers.inc(container_type);
    let id = match e
        .runtime
        .create_container(sandbox_id, &config, sandbox)
        .await
    {
        Ok(id) => id,
        Err(err) => {
            metrics
                .started_containers_errors
                .inc_labels(&[container_type, crate::metrics::error_code(&err)]);
            let message = err.to_string();
            event(EventType::Warning, "Failed", format!("Error: {message}"));
            return Err(fail("CreateContainerError", message));
        }
    };
    event(
        EventType::Normal,
        "Created",
        format!("Created container {}", c.name),
    );
    // Go's `PreStartContainer`: the init containers before this one are done with their
    // pinned memory (on disk at once, as Go writes every change).
    e.memory_manager.container_started(p, &c.name);
    if let Err(err) = e.memory_manager.persist().await {
        tracing::warn!(pod = %pod::full_name(p), uid = pod::uid(p), error = %err, "memory manager: writing the state file failed");
    }
    if let Err(err) = e.runtime.start_container(&id).await {
        metrics
            .started_containers_errors
            .inc_labels(&[container_type, crate::metrics::error_code(&err)]);
        let message = err.to_string();
        event(EventType::Warning, "Failed", format!("Error: {message}"));
        return Err(fail("RunContainerError", message));
    }
    event(
        EventType::Normal,
        "Started",
        format!("Started container {}", c.name),
    );
    if let Err(err) = e.hooks.post_start(p, c, &id, &fields.pod_ip).await {
        return Err(fail("PostStartHookError", err.to_string()));
    }
    Ok(())
}

/// A container not started for `reason` (no retry of its own).
fn fail(reason: &str, message: String) -> (WaitingReason, Option<Duration>) {
    (
        WaitingReason {
            reason: reason.to_string(),
            message,
        },
        None,
    )
}

/// The container's config for the runtime (Go's `generateContainerConfig`): the devices'
/// settings, the environment, the mounts, the termination message file, the CPU and memory
/// managers' assignments (on disk first).
#[allow(clippy::too_many_arguments)]
async fn container_config(
    e: &Engine,
    p: &Arc<Pod>,
    c: &Container,
    kind: ContainerKind,
    fields: &FieldValues,
    restart_count: u32,
    hash: u64,
    image_ref: String,
) -> Result<ContainerConfig, (WaitingReason, Option<Duration>)> {
    let config_error =
        |err: &dyn std::fmt::Display| fail("CreateContainerConfigError", err.to_string());
    // The devices' settings come first, as Go's `GenerateRunContainerOptions` puts them
    // (a pod's own env of the same name comes later and wins in the runtime).
    let device_opts = e
        .device_manager
        .run_options(p, c)
        .await
        .map_err(|err| config_error(&err))?;
    let mut env: Vec<EnvVar> = device_opts
        .envs
        .into_iter()
        .map(|(name, value)| EnvVar { name, value })
        .collect();
    env.extend(
        container_env(e, p, c, fields)
            .await
            .map_err(|err| config_error(&err))?,
    );
    let (command, args) = expand_command(c, &env);
    let mut mounts: Vec<Mount> = device_opts
        .mounts
        .into_iter()
        .map(|m| Mount {
            container_path: m.container_path,
            host_path: PathBuf::from(m.host_path),
            read_only: m.read_only,
            propagation: MountPropagation::Private,
        })
        .collect();
    mounts.extend(
        container_mounts(e, p, c, &env, fields)
            .await
            .map_err(|err| config_error(&err))?,
    );
    // The raw block volumes' devices after the device plugins' (Go appends them).
    let mut device_nodes = device_opts.devices;
    device_nodes.extend(
        e.volumes
            .block_devices(p, c)
            .map_err(|err| config_error(&err))?,
    );
    match termination_message::prepare(&e.config.root_dir, p, c, restart_count).await {
        Ok(Some(m)) => mounts.push(m),
        Ok(None) => {}
        Err(err) => return Err(config_error(&err)),
    }
    // The CPU and memory managers' assignments are on disk before a container runs on
    // them.
    if let Err(err) = e.cpu_manager.persist().await {
        return Err(fail("CreateContainerError", err.to_string()));
    }
    if let Err(err) = e.memory_manager.persist().await {
        return Err(fail("CreateContainerError", err.to_string()));
    }
    let cpuset_cpus = e
        .cpu_manager
        .container_cpus(pod::uid(p), &c.name)
        .map(|cpus| cpus.to_string());
    let cpuset_mems = e.memory_manager.container_numa_nodes(pod::uid(p), &c.name);
    Ok(ContainerConfig {
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
        cpuset_cpus,
        cpuset_mems,
        devices: DeviceSettings {
            nodes: device_nodes,
            annotations: device_opts.annotations,
            cdi_devices: device_opts.cdi_devices,
        },
        extra_supplemental_groups: e.volumes.extra_supplemental_groups(p),
    })
}

/// The container's environment (see [`make_environment`]); invalid `envFrom` keys become
/// `InvalidEnvironmentVariableNames` events.
async fn container_env(
    e: &Engine,
    p: &Arc<Pod>,
    c: &Container,
    fields: &FieldValues,
) -> Result<Vec<EnvVar>, EnvError> {
    let out = make_environment(&EnvInputs {
        pod: p,
        container: c,
        fields,
        allocatable: &e.cm.allocatable(),
        store: e.volumes.store().as_ref(),
    })
    .await?;
    for message in out.invalid_keys {
        e.sink.record_event(Event::for_pod(
            p,
            None,
            EventType::Warning,
            "InvalidEnvironmentVariableNames",
            message,
        ));
    }
    Ok(out.env)
}

/// The container's mounts (see [`crate::volume::VolumeManager::container_mounts`]);
/// host-network pods use the node's IPs for `/etc/hosts`.
async fn container_mounts(
    e: &Engine,
    p: &Arc<Pod>,
    c: &Container,
    env: &[EnvVar],
    fields: &FieldValues,
) -> Result<Vec<Mount>, VolumeError> {
    let ips: Vec<String> = if pod::host_network(p) {
        e.config.node_ips.clone()
    } else {
        Some(fields.pod_ip.clone())
            .filter(|ip| !ip.is_empty())
            .into_iter()
            .collect()
    };
    e.volumes.container_mounts(p, c, env, &ips).await
}

/// Removes the pod's dead sandboxes that hold no containers before a new one is created, so
/// that a pod whose sandboxes keep failing does not pile up records in the runtime (each
/// carrying the pod's labels and annotations) between garbage collections. Sandboxes that
/// still hold (exited) containers stay for their logs; the garbage collector takes them.
async fn remove_dead_sandboxes(e: &Engine, p: &Pod, rt: &PodRuntimeStatus) {
    for s in rt
        .sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::NotReady)
    {
        if rt.containers.iter().any(|c| c.summary.sandbox_id == s.id) {
            continue;
        }
        if let Err(err) = e.runtime.remove_pod_sandbox(&s.id).await {
            tracing::debug!(pod = %pod::full_name(p), sandbox = %s.id, error = %err, "removing a dead sandbox failed");
        }
    }
}
