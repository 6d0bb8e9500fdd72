//! Container and sandbox garbage collection, as the Go kubelet's container GC with its
//! defaults (`MinAge` 0, `MaxPerPodContainer` 1, no global limit), run every
//! `container_gc_period` (1m).
//!
//! - For every pod the kubelet still wants, exited containers are kept only up to
//!   `max_dead_containers_per_container` per container name, newest first: the newest dead
//!   one gives `lastState` in the status; older ones (and their log files) are removed.
//! - A sandbox that is not ready and holds no containers is removed, unless it is the pod's
//!   newest sandbox.
//! - Pods the kubelet does not want are left alone here: their workers (or the orphan
//!   cleanup at housekeeping) remove everything once they are stopped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::runtime::{ContainerState, RuntimeError, SandboxState};

/// One garbage collection pass; returns (containers removed, sandboxes removed).
pub(crate) async fn collect(engine: &Engine) -> Result<(usize, usize), RuntimeError> {
    let runtime = &engine.runtime;
    let keep = engine.config.max_dead_containers_per_container;
    let (sandboxes, containers) =
        crate::pod_status::list_all(runtime.as_ref(), engine.known_pod_uids()).await?;
    let desired = |uid: &str| engine.pods().contains(uid);

    let mut dead: HashMap<(&str, &str), Vec<(i64, &str)>> = HashMap::new();
    for c in &containers {
        if c.state == ContainerState::Exited && desired(&c.pod.uid) {
            dead.entry((c.pod.uid.as_str(), c.name.as_str()))
                .or_default()
                .push((c.created_at, c.id.as_str()));
        }
    }
    let mut removed: HashSet<&str> = HashSet::new();
    for (_, mut list) in dead {
        list.sort_by_key(|(created, _)| std::cmp::Reverse(*created));
        for (_, id) in list.into_iter().skip(keep) {
            match runtime.remove_container(id).await {
                Ok(()) => {
                    removed.insert(id);
                }
                Err(e) => {
                    tracing::warn!(container = id, error = %e, "removing a dead container failed")
                }
            }
        }
    }

    let in_use: HashSet<&str> = containers
        .iter()
        .filter(|c| !removed.contains(c.id.as_str()))
        .map(|c| c.sandbox_id.as_str())
        .collect();
    let mut newest: HashMap<&str, (i64, &str)> = HashMap::new();
    for s in &sandboxes {
        let e = newest
            .entry(s.pod.uid.as_str())
            .or_insert((s.created_at, &s.id));
        if s.created_at > e.0 {
            *e = (s.created_at, &s.id);
        }
    }
    let mut sandboxes_removed = 0;
    for s in &sandboxes {
        let is_newest = newest
            .get(s.pod.uid.as_str())
            .is_some_and(|(_, id)| *id == s.id);
        if s.state == SandboxState::NotReady
            && !is_newest
            && !in_use.contains(s.id.as_str())
            && desired(&s.pod.uid)
        {
            match runtime.remove_pod_sandbox(&s.id).await {
                Ok(()) => sandboxes_removed += 1,
                Err(e) => {
                    tracing::warn!(sandbox = %s.id, error = %e, "removing a dead sandbox failed")
                }
            }
        }
    }
    Ok((removed.len(), sandboxes_removed))
}

/// Runs [`collect`] every `container_gc_period` until shutdown.
pub(crate) async fn run(engine: Arc<Engine>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(engine.config.container_gc_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !engine.runtime_state.ready() {
            continue;
        }
        match collect(&engine).await {
            Ok((0, 0)) => {}
            Ok((c, s)) => tracing::debug!(containers = c, sandboxes = s, "garbage collected"),
            Err(e) => tracing::warn!(error = %e, "container garbage collection failed"),
        }
    }
}
