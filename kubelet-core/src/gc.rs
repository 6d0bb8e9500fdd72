//! Container and sandbox garbage collection, as the Go kubelet's container GC
//! (`kuberuntime_gc.go`) with its policy — `minimumContainerTTLDuration` (0),
//! `maximumDeadContainersPerContainer` (1), `maximumDeadContainers` (-1: no limit) — run
//! every `container_gc_period` (1m).
//!
//! - Dead (exited) containers older than the minimum TTL are grouped by pod and container
//!   name. For every pod the kubelet still wants, only the newest
//!   `max_dead_containers_per_container` of each group are kept: the newest dead one gives
//!   `lastState` in the status; older ones (and their log files) are removed. With a global
//!   limit, every group keeps an equal share (at least one) and then the oldest go until the
//!   limit holds.
//! - When the eviction manager reclaims disk (Go's `DeleteAllUnusedContainers`), the dead
//!   containers of pods whose worker has terminated them (an evicted pod, a completed one)
//!   go too, and so do their sandboxes.
//! - A sandbox that is not ready and holds no containers is removed, unless it is the pod's
//!   newest sandbox (or the pod's runtime is being reclaimed).
//! - Pods the kubelet does not want are left alone here: their workers (or the orphan
//!   cleanup at housekeeping) remove everything once they are stopped.
//! - Once every source was seen, the log directories of pods that are gone and dangling
//!   container log symlinks are removed ([`crate::logs`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::engine::Engine;
use crate::runtime::{ContainerState, RuntimeError, SandboxState};

/// What one pass may remove besides the policy's dead containers.
#[derive(Clone, Copy)]
pub(crate) struct Reclaim<'a> {
    /// Pods whose runtime may be removed entirely (Go's `ShouldPodRuntimeBeRemoved` with
    /// `evictNonDeletedPods`): terminated pods, when the eviction manager reclaims disk.
    pub terminated: &'a (dyn Fn(&str) -> bool + Send + Sync),
}

impl Reclaim<'_> {
    /// The periodic pass: nothing beyond the policy.
    pub(crate) fn none() -> Reclaim<'static> {
        Reclaim {
            terminated: &|_| false,
        }
    }
}

/// One garbage collection pass; returns (containers removed, sandboxes removed).
pub(crate) async fn collect(
    engine: &Engine,
    reclaim: Reclaim<'_>,
) -> Result<(usize, usize), RuntimeError> {
    let runtime = &engine.runtime;
    let keep = engine.config.max_dead_containers_per_container;
    let min_age = i64::try_from(engine.config.minimum_container_ttl.as_nanos()).unwrap_or(i64::MAX);
    let now = crate::clock::now_unix_nanos();
    let crate::pod_status::Listing {
        sandboxes,
        containers,
        ..
    } = crate::pod_status::list_all(runtime.as_ref(), || engine.known_pod_uids()).await?;
    let desired = |uid: &str| engine.pods().contains(uid);

    let mut dead: HashMap<(&str, &str), Vec<(i64, &str)>> = HashMap::new();
    let mut doomed: Vec<&str> = Vec::new();
    for c in &containers {
        if c.state != ContainerState::Exited || now.saturating_sub(c.created_at) < min_age {
            continue;
        }
        if (reclaim.terminated)(&c.pod.uid) {
            doomed.push(c.id.as_str());
        } else if desired(&c.pod.uid) {
            dead.entry((c.pod.uid.as_str(), c.name.as_str()))
                .or_default()
                .push((c.created_at, c.id.as_str()));
        }
    }
    // Newest first; beyond the per-container limit they go.
    for list in dead.values_mut() {
        list.sort_by_key(|(created, _)| std::cmp::Reverse(*created));
        doomed.extend(list.iter().skip(keep).map(|(_, id)| *id));
        list.truncate(keep);
    }
    // The global limit (Go's MaxContainers): an equal share per group (at least one), then
    // the oldest go until the limit holds.
    if let Ok(max) = usize::try_from(engine.config.maximum_dead_containers) {
        let left: usize = dead.values().map(Vec::len).sum();
        if left > max && !dead.is_empty() {
            let share = (max / dead.len()).max(1);
            let mut kept: Vec<(i64, &str)> = Vec::new();
            for list in dead.values() {
                doomed.extend(list.iter().skip(share).map(|(_, id)| *id));
                kept.extend(list.iter().take(share).copied());
            }
            if kept.len() > max {
                kept.sort_by_key(|(created, _)| std::cmp::Reverse(*created));
                doomed.extend(kept.iter().skip(max).map(|(_, id)| *id));
            }
        }
    }
    let mut removed: HashSet<&str> = HashSet::new();
    for id in doomed {
        match runtime.remove_container(id).await {
            Ok(()) => {
                removed.insert(id);
            }
            Err(e) => {
                tracing::warn!(container = id, error = %e, "removing a dead container failed")
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
        let reclaimed = (reclaim.terminated)(&s.pod.uid);
        if s.state == SandboxState::NotReady
            && (!is_newest || reclaimed)
            && !in_use.contains(s.id.as_str())
            && (desired(&s.pod.uid) || reclaimed)
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

/// The log directories of pods that are gone and dangling log symlinks (only with a root
/// dir, once every source was seen).
async fn clean_logs(engine: &Engine) {
    if engine.config.root_dir.as_os_str().is_empty()
        || !engine
            .sources_ready
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        return;
    }
    let keep = |uid: &str| engine.pods().contains(uid) || engine.runtime_state.has_pod(uid);
    crate::logs::cleanup::remove_pod_log_dirs(&engine.config.pod_logs_dir, keep).await;
    if !engine.config.container_logs_dir.as_os_str().is_empty() {
        crate::logs::cleanup::remove_dangling_symlinks(
            &engine.config.container_logs_dir,
            engine.runtime.as_ref(),
        )
        .await;
    }
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
        match collect(&engine, Reclaim::none()).await {
            Ok((0, 0)) => {}
            Ok((c, s)) => tracing::debug!(containers = c, sandboxes = s, "garbage collected"),
            Err(e) => tracing::warn!(error = %e, "container garbage collection failed"),
        }
        clean_logs(&engine).await;
    }
}
