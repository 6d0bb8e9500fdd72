//! A deterministic in-memory container runtime.
//!
//! Time comes from [`crate::clock::now_unix_nanos`] (tokio's clock), so under a paused tokio
//! clock everything is reproducible. A container's behaviour is set per image with
//! [`SimRuntime::set_behavior`], or per container through its environment:
//! `SIM_RUN_FOR_MS` (how long it runs after starting; absent: forever), `SIM_EXIT_CODE`
//! (its exit code then; default 0), `SIM_OOM=1` (it exits as OOMKilled, code 137) and
//! `SIM_IGNORE_TERM=1` (a stop waits out the whole grace period and then kills it with 137;
//! otherwise a stop ends it at once with 143). Exits are evaluated lazily whenever the
//! runtime is read, so no timers run.
//!
//! `exec_sync` runs a tiny shell: `exit N`, `touch F`, `rm F`, `test -f F` work on the
//! container's simulated files (initially the comma-separated `SIM_FILES`), `sleep N` takes N
//! seconds of tokio time (failing with `DeadlineExceeded` past the timeout), anything else
//! echoes its arguments. [`SimRuntime::execs`] lists what ran.
//!
//! Image pulls succeed and add the image unless the image was marked with
//! [`SimRuntime::fail_pulls`]; [`SimRuntime::add_image`] preloads one. Every image is 1 MiB,
//! on a simulated image filesystem (`image_fs_info`).
//! A pod annotated `sim.kubelet-rs.io/sandbox-dies: "true"` gets sandboxes that are dead
//! (`NotReady`) as soon as they are created, like a sandbox whose pause process fails at once;
//! creating a container in a sandbox that is not ready fails with `NotFound`, as in CRI.
//! [`SimRuntime::set_unavailable`] makes every call fail with `Unavailable`, like a
//! runtime that is restarting. [`SimRuntime::calls`] counts calls per operation;
//! [`SimRuntime::keep_counts_at`] keeps them as they stood at an operation's latest call.
//!
//! It implements every optional capability but the streaming URLs (it has no streaming
//! server): container stats come from simulated rates (`SIM_CPU_MILLICORES`, default 10m, of
//! CPU time while running; a working set of `SIM_MEMORY_BYTES`, default 8 MiB, while
//! running; a writable layer of `SIM_DISK_BYTES`, default 4 KiB); `reopen_container_log`
//! succeeds on a running container; `container_events` streams its own state changes
//! (created, started, stopped, deleted) in order. As exits are evaluated lazily, the
//! `Stopped` event of a container that ends by itself is sent when the exit is first
//! observed (the next call that reads the container), stamped with the exit time.

mod calls;
mod events;
#[cfg(test)]
mod tests;
mod usage;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::now_unix_nanos;
use crate::runtime::{
    ContainerConfig, ContainerEventKind, ContainerEventStream, ContainerRuntime, ContainerState,
    ContainerStats, ContainerStatus, ContainerSummary, ExecOutput, ImageFsInfo, ImageInfo,
    ListFilter, PullImageRequest, RuntimeError, RuntimeResult, RuntimeStatus, RuntimeVersion,
    SandboxConfig, SandboxState, SandboxStatus, SandboxSummary,
};
use events::Events;
use usage::Usage;

/// What a simulated container does once started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContainerBehavior {
    /// How long it runs; `None`: until stopped.
    pub run_for: Option<Duration>,
    /// Exit code when it ends by itself.
    pub exit_code: i32,
    /// It ends OOMKilled.
    pub oom: bool,
    /// It ignores SIGTERM: a stop takes the whole grace period.
    pub ignore_term: bool,
}

#[derive(Debug, Clone)]
struct SimSandbox {
    summary: SandboxSummary,
    ip: String,
    host_network: bool,
    runtime_handler: String,
}

#[derive(Debug, Clone)]
struct SimContainer {
    status: ContainerStatus,
    behavior: ContainerBehavior,
    /// What it uses while it runs (stats).
    usage: Usage,
    /// The container's simulated files (`touch`, `rm`, `test -f`).
    files: HashSet<String>,
}

/// One command run with `exec_sync`, for tests to inspect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRecord {
    /// Pod uid.
    pub pod_uid: String,
    /// Container name.
    pub container: String,
    /// The command.
    pub cmd: Vec<String>,
    /// When it started (tokio clock, ns).
    pub at: i64,
}

#[derive(Debug, Default)]
struct State {
    sandboxes: HashMap<String, SimSandbox>,
    containers: HashMap<String, SimContainer>,
    by_pod: HashMap<String, (Vec<String>, Vec<String>)>,
    images: HashMap<String, ImageInfo>,
    pull_failures: HashSet<String>,
    /// image → (user, password) the simulated registry wants.
    pull_credentials: HashMap<String, (String, String)>,
    /// The user name of every pull request (empty: anonymous), oldest first.
    pull_users: Vec<(String, String)>,
    behaviors: HashMap<String, ContainerBehavior>,
    next_id: u64,
    unavailable: bool,
    /// `container_events` answers `Unimplemented`.
    events_unimplemented: bool,
    calls: calls::Calls,
    execs: Vec<ExecRecord>,
}

/// The annotation that makes a pod's sandboxes die at once (see the module docs).
pub const SANDBOX_DIES: &str = "sim.kubelet-rs.io/sandbox-dies";

/// The simulated runtime. See the module docs.
#[derive(Debug, Default)]
pub struct SimRuntime {
    state: Mutex<State>,
    events: Events,
}

fn behavior_from_env(config: &ContainerConfig, base: ContainerBehavior) -> ContainerBehavior {
    let mut b = base;
    for e in &config.env {
        match e.name.as_str() {
            "SIM_RUN_FOR_MS" => {
                b.run_for = e.value.parse().ok().map(Duration::from_millis);
            }
            "SIM_EXIT_CODE" => b.exit_code = e.value.parse().unwrap_or(0),
            "SIM_OOM" => b.oom = e.value == "1",
            "SIM_IGNORE_TERM" => b.ignore_term = e.value == "1",
            _ => {}
        }
    }
    b
}

/// A pod's (sandbox ids, container ids), sized for the usual one sandbox and few containers.
fn new_index() -> (Vec<String>, Vec<String>) {
    (Vec::with_capacity(1), Vec::with_capacity(1))
}

fn not_found(kind: &'static str, id: &str) -> RuntimeError {
    RuntimeError::NotFound {
        kind,
        id: id.to_string(),
    }
}

/// Marks a running container exited if its run time is over (and says so).
fn advance(c: &mut SimContainer, now: i64, events: &Events) {
    if c.status.summary.state != ContainerState::Running {
        return;
    }
    let Some(run_for) = c.behavior.run_for else {
        return;
    };
    let end = c
        .status
        .started_at
        .saturating_add(i64::try_from(run_for.as_nanos()).unwrap_or(i64::MAX));
    if now >= end {
        let code = if c.behavior.oom {
            137
        } else {
            c.behavior.exit_code
        };
        exit(c, end, code, c.behavior.oom, events);
    }
}

fn exit(c: &mut SimContainer, at: i64, code: i32, oom: bool, events: &Events) {
    c.status.set_exited(at, code, oom);
    events.emit(c, ContainerEventKind::Stopped, at);
}

fn sim_image(image: &str) -> ImageInfo {
    ImageInfo {
        id: format!("sha256:{image}"),
        repo_tags: vec![image.to_string()],
        size_bytes: usage::IMAGE_BYTES,
        ..Default::default()
    }
}

impl SimRuntime {
    /// An empty runtime.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enter(&self, op: &'static str) -> RuntimeResult<MutexGuard<'_, State>> {
        let mut st = self.lock();
        st.calls.record(op);
        if st.unavailable {
            return Err(RuntimeError::Unavailable(
                "simulated runtime is down".into(),
            ));
        }
        Ok(st)
    }

    /// Sets the behaviour of containers created from `image`.
    pub fn set_behavior(&self, image: &str, behavior: ContainerBehavior) {
        self.lock().behaviors.insert(image.to_string(), behavior);
    }

    /// Makes pulls of `image` fail.
    pub fn fail_pulls(&self, image: &str) {
        self.lock().pull_failures.insert(image.to_string());
    }

    /// Makes pulls of `image` need these credentials (else they fail with a 401).
    pub fn require_pull_credentials(&self, image: &str, username: &str, password: &str) {
        self.lock().pull_credentials.insert(
            image.to_string(),
            (username.to_string(), password.to_string()),
        );
    }

    /// Every pull so far as (image, user name; empty when anonymous), oldest first.
    pub fn pull_users(&self) -> Vec<(String, String)> {
        self.lock().pull_users.clone()
    }

    /// Makes the image present.
    pub fn add_image(&self, image: &str) {
        self.lock()
            .images
            .insert(image.to_string(), sim_image(image));
    }

    /// Makes every call fail with `Unavailable` (or work again).
    pub fn set_unavailable(&self, down: bool) {
        self.lock().unavailable = down;
    }

    /// Ends every open container event stream (as a runtime restart does).
    pub fn break_event_streams(&self) {
        self.events.break_subscribers();
    }

    /// Makes `container_events` answer `Unimplemented` (as containerd 1.6 does), or work again.
    pub fn set_events_unimplemented(&self, unimplemented: bool) {
        self.lock().events_unimplemented = unimplemented;
    }

    /// How many times `op` ("CreateContainer", "StartContainer", "PullImage", …) was called.
    /// Every command run with `exec_sync`, oldest first.
    pub fn execs(&self) -> Vec<ExecRecord> {
        self.lock().execs.clone()
    }

    /// Whether a container has a simulated file.
    pub fn has_file(&self, container_id: &str, file: &str) -> bool {
        self.lock()
            .containers
            .get(container_id)
            .is_some_and(|c| c.files.contains(file))
    }

    /// Number of calls of a runtime operation (e.g. "CreateContainer").
    pub fn calls(&self, op: &str) -> usize {
        self.lock().calls.count(op)
    }

    /// From now on, each call of `op` keeps every operation's count as it stood then.
    pub fn keep_counts_at(&self, op: &'static str) {
        self.lock().calls.keep_counts_at(op);
    }

    /// `of`'s call count at the latest call of `op` since [`Self::keep_counts_at`] (0 before).
    pub fn calls_at_last(&self, op: &str, of: &str) -> usize {
        self.lock().calls.count_at_last(op, of)
    }

    /// Number of containers and sandboxes that exist (any state).
    pub fn object_counts(&self) -> (usize, usize) {
        let st = self.lock();
        (st.sandboxes.len(), st.containers.len())
    }

    /// Makes a running container exit now with `code` (a crash).
    pub fn crash(&self, container_id: &str, code: i32) {
        let mut st = self.lock();
        if let Some(c) = st.containers.get_mut(container_id) {
            if c.status.summary.state == ContainerState::Running {
                exit(c, now_unix_nanos(), code, false, &self.events);
            }
        }
    }

    /// The runtime handlers the pod's sandboxes were created with, oldest first.
    pub fn sandbox_handlers(&self, pod_uid: &str) -> Vec<String> {
        let st = self.lock();
        st.by_pod
            .get(pod_uid)
            .map(|(ids, _)| {
                ids.iter()
                    .filter_map(|id| st.sandboxes.get(id))
                    .map(|s| s.runtime_handler.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Ids of the pod's containers named `name`, oldest first.
    pub fn container_ids(&self, pod_uid: &str, name: &str) -> Vec<String> {
        let st = self.lock();
        let mut v: Vec<(i64, String)> = st
            .by_pod
            .get(pod_uid)
            .map(|(_, cs)| {
                cs.iter()
                    .filter_map(|id| st.containers.get(id))
                    .filter(|c| c.status.summary.name == name)
                    .map(|c| (c.status.summary.created_at, c.status.summary.id.clone()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.into_iter().map(|(_, id)| id).collect()
    }

    fn next_id(st: &mut State, prefix: &str) -> String {
        st.next_id += 1;
        format!("{prefix}{:012x}", st.next_id)
    }
}

#[async_trait]
impl ContainerRuntime for SimRuntime {
    async fn version(&self) -> RuntimeResult<RuntimeVersion> {
        let _st = self.enter("Version")?;
        Ok(RuntimeVersion {
            runtime_name: "sim".into(),
            runtime_version: "0.1.0".into(),
            runtime_api_version: "v1".into(),
        })
    }

    async fn status(&self) -> RuntimeResult<RuntimeStatus> {
        let _st = self.enter("Status")?;
        Ok(RuntimeStatus {
            runtime_ready: true,
            network_ready: true,
            ..Default::default()
        })
    }

    async fn list_pod_sandboxes(&self, filter: &ListFilter) -> RuntimeResult<Vec<SandboxSummary>> {
        let st = self.enter("ListPodSandbox")?;
        Ok(match filter.pod_uid.as_deref() {
            Some(uid) => st
                .by_pod
                .get(uid)
                .map(|(ss, _)| {
                    ss.iter()
                        .filter_map(|id| st.sandboxes.get(id))
                        .map(|s| s.summary.clone())
                        .collect()
                })
                .unwrap_or_default(),
            None => st.sandboxes.values().map(|s| s.summary.clone()).collect(),
        })
    }

    async fn pod_sandbox_status(&self, sandbox_id: &str) -> RuntimeResult<SandboxStatus> {
        let st = self.enter("PodSandboxStatus")?;
        let s = st
            .sandboxes
            .get(sandbox_id)
            .ok_or_else(|| not_found("sandbox", sandbox_id))?;
        Ok(SandboxStatus {
            id: s.summary.id.clone(),
            pod: s.summary.pod.clone(),
            attempt: s.summary.attempt,
            state: s.summary.state,
            created_at: s.summary.created_at,
            ip: (!s.host_network).then(|| s.ip.clone()),
            additional_ips: Vec::new(),
            host_network: s.host_network,
        })
    }

    async fn run_pod_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        let mut st = self.enter("RunPodSandbox")?;
        // As runc: the kernel takes hostnames of at most 64 bytes (HOST_NAME_MAX).
        if config.hostname.len() > 64 {
            return Err(RuntimeError::OperationFailed {
                operation: "RunPodSandbox",
                message: "sethostname: invalid argument".into(),
            });
        }
        let id = Self::next_id(&mut st, "sb");
        let n = st.next_id;
        let mut summary = SandboxSummary::new(id.clone(), config);
        if crate::pod::annotation(&config.pod, SANDBOX_DIES) == Some("true") {
            summary.state = SandboxState::NotReady;
        }
        let uid = summary.pod.uid.clone();
        let sandbox = SimSandbox {
            summary,
            ip: format!("10.88.{}.{}", (n >> 8) & 0xff, (n & 0xff).max(1)),
            host_network: crate::pod::host_network(&config.pod),
            runtime_handler: config.runtime_handler.clone(),
        };
        st.sandboxes.insert(id.clone(), sandbox);
        st.by_pod
            .entry(uid)
            .or_insert_with(new_index)
            .0
            .push(id.clone());
        Ok(id)
    }

    async fn stop_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let mut st = self.enter("StopPodSandbox")?;
        let now = now_unix_nanos();
        let Some(s) = st.sandboxes.get_mut(sandbox_id) else {
            return Ok(());
        };
        s.summary.state = SandboxState::NotReady;
        let uid = s.summary.pod.uid.clone();
        let ids: Vec<String> = st
            .by_pod
            .get(&uid)
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        for id in ids {
            if let Some(c) = st.containers.get_mut(&id) {
                advance(c, now, &self.events);
                if c.status.summary.sandbox_id == sandbox_id
                    && c.status.summary.state == ContainerState::Running
                {
                    exit(c, now, 137, false, &self.events);
                }
            }
        }
        Ok(())
    }

    async fn remove_pod_sandbox(&self, sandbox_id: &str) -> RuntimeResult<()> {
        let mut st = self.enter("RemovePodSandbox")?;
        let Some(s) = st.sandboxes.remove(sandbox_id) else {
            return Ok(());
        };
        let uid = s.summary.pod.uid;
        let containers: Vec<String> = st
            .containers
            .iter()
            .filter(|(_, c)| c.status.summary.sandbox_id == sandbox_id)
            .map(|(id, _)| id.clone())
            .collect();
        let now = now_unix_nanos();
        for id in &containers {
            if let Some(c) = st.containers.remove(id) {
                self.events.emit(&c, ContainerEventKind::Deleted, now);
            }
        }
        if let Some((ss, cs)) = st.by_pod.get_mut(&uid) {
            ss.retain(|x| x != sandbox_id);
            cs.retain(|x| !containers.contains(x));
            if ss.is_empty() && cs.is_empty() {
                st.by_pod.remove(&uid);
            }
        }
        Ok(())
    }

    async fn list_containers(&self, filter: &ListFilter) -> RuntimeResult<Vec<ContainerSummary>> {
        let mut st = self.enter("ListContainers")?;
        let now = now_unix_nanos();
        let ids: Vec<String> = match filter.pod_uid.as_deref() {
            Some(uid) => st
                .by_pod
                .get(uid)
                .map(|(_, c)| c.clone())
                .unwrap_or_default(),
            None => st.containers.keys().cloned().collect(),
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(c) = st.containers.get_mut(&id) {
                advance(c, now, &self.events);
                out.push(c.status.summary.clone());
            }
        }
        Ok(out)
    }

    async fn container_status(&self, container_id: &str) -> RuntimeResult<ContainerStatus> {
        let mut st = self.enter("ContainerStatus")?;
        let c = st
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found("container", container_id))?;
        advance(c, now_unix_nanos(), &self.events);
        Ok(c.status.clone())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        let mut st = self.enter("CreateContainer")?;
        let pod = st
            .sandboxes
            .get(sandbox_id)
            .filter(|s| s.summary.state == SandboxState::Ready)
            .map(|s| s.summary.pod.clone())
            .ok_or_else(|| not_found("sandbox", sandbox_id))?;
        let image = config.container.image.clone().unwrap_or_default();
        let base = st.behaviors.get(&image).copied().unwrap_or_default();
        let id = Self::next_id(&mut st, "c");
        let mut status = ContainerStatus::new(id.clone(), sandbox_id, config, sandbox);
        // The sandbox's pod, as the runtime recorded it.
        status.summary.pod = pod.clone();
        let c = SimContainer {
            status,
            behavior: behavior_from_env(config, base),
            usage: Usage::from_env(config),
            files: config
                .env
                .iter()
                .filter(|e| e.name == "SIM_FILES")
                .flat_map(|e| e.value.split(',').map(str::to_string))
                .filter(|f| !f.is_empty())
                .collect(),
        };
        self.events
            .emit(&c, ContainerEventKind::Created, c.status.summary.created_at);
        st.containers.insert(id.clone(), c);
        st.by_pod
            .entry(pod.uid)
            .or_insert_with(new_index)
            .1
            .push(id.clone());
        Ok(id)
    }

    async fn start_container(&self, container_id: &str) -> RuntimeResult<()> {
        let mut st = self.enter("StartContainer")?;
        let c = st
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found("container", container_id))?;
        if c.status.summary.state != ContainerState::Created {
            return Err(RuntimeError::OperationFailed {
                operation: "StartContainer",
                message: format!("container {container_id} is not in created state"),
            });
        }
        c.status.set_running();
        self.events
            .emit(c, ContainerEventKind::Started, c.status.started_at);
        Ok(())
    }

    async fn stop_container(&self, container_id: &str, timeout: Duration) -> RuntimeResult<()> {
        let ignore_term = {
            let mut st = self.enter("StopContainer")?;
            let Some(c) = st.containers.get_mut(container_id) else {
                return Ok(());
            };
            advance(c, now_unix_nanos(), &self.events);
            if c.status.summary.state != ContainerState::Running {
                return Ok(());
            }
            if !c.behavior.ignore_term {
                exit(c, now_unix_nanos(), 143, false, &self.events);
                return Ok(());
            }
            true
        };
        if ignore_term {
            tokio::time::sleep(timeout).await;
            let mut st = self.lock();
            if let Some(c) = st.containers.get_mut(container_id) {
                advance(c, now_unix_nanos(), &self.events);
                if c.status.summary.state == ContainerState::Running {
                    exit(c, now_unix_nanos(), 137, false, &self.events);
                }
            }
        }
        Ok(())
    }

    async fn remove_container(&self, container_id: &str) -> RuntimeResult<()> {
        let mut st = self.enter("RemoveContainer")?;
        if let Some(c) = st.containers.remove(container_id) {
            if let Some((_, cs)) = st.by_pod.get_mut(&c.status.summary.pod.uid) {
                cs.retain(|x| x != container_id);
            }
            self.events
                .emit(&c, ContainerEventKind::Deleted, now_unix_nanos());
        }
        Ok(())
    }

    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        let st = self.enter("ImageStatus")?;
        Ok(st.images.get(image).cloned())
    }

    async fn pull_image(&self, request: &PullImageRequest) -> RuntimeResult<String> {
        let mut st = self.enter("PullImage")?;
        let user = request
            .auth
            .as_ref()
            .map(|a| a.username.clone())
            .unwrap_or_default();
        st.pull_users.push((request.image.clone(), user));
        if st.pull_failures.contains(&request.image) {
            return Err(RuntimeError::ImagePull {
                image: request.image.clone(),
                message: "simulated registry: not found".into(),
            });
        }
        if let Some((u, p)) = st.pull_credentials.get(&request.image) {
            let given = request.auth.as_ref().map(|a| (&a.username, &a.password));
            if given != Some((u, p)) {
                return Err(RuntimeError::ImagePull {
                    image: request.image.clone(),
                    message: "simulated registry: 401 Unauthorized".into(),
                });
            }
        }
        let image = sim_image(&request.image);
        let id = image.id.clone();
        st.images.insert(request.image.clone(), image);
        Ok(id)
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        let st = self.enter("ListImages")?;
        Ok(st.images.values().cloned().collect())
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let mut st = self.enter("RemoveImage")?;
        // By the reference it was pulled with, or by its id (as image GC removes).
        st.images.retain(|name, i| name != image && i.id != image);
        Ok(())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> RuntimeResult<ExecOutput> {
        let ok = |stdout: String| ExecOutput {
            stdout: stdout.into_bytes(),
            ..Default::default()
        };
        let code = |exit_code: i32| ExecOutput {
            exit_code,
            ..Default::default()
        };
        let sleep_for = {
            let mut st = self.enter("ExecSync")?;
            let now = now_unix_nanos();
            let c = st
                .containers
                .get_mut(container_id)
                .ok_or_else(|| not_found("container", container_id))?;
            advance(c, now, &self.events);
            if c.status.summary.state != ContainerState::Running {
                return Err(RuntimeError::OperationFailed {
                    operation: "ExecSync",
                    message: format!("container {container_id} is not running"),
                });
            }
            let record = ExecRecord {
                pod_uid: c.status.summary.pod.uid.clone(),
                container: c.status.summary.name.clone(),
                cmd: cmd.to_vec(),
                at: now,
            };
            // The simulated shell; anything else echoes its arguments.
            let out = match cmd {
                [exit, n] if exit == "exit" => Some(code(n.parse().unwrap_or(1))),
                [touch, f] if touch == "touch" => {
                    c.files.insert(f.clone());
                    Some(code(0))
                }
                [rm, f] if rm == "rm" => Some(code(if c.files.remove(f) { 0 } else { 1 })),
                [test, flag, f] if test == "test" && flag == "-f" => {
                    Some(code(if c.files.contains(f) { 0 } else { 1 }))
                }
                [sleep, _] if sleep == "sleep" => None,
                _ => Some(ok(format!("{}\n", cmd.join(" ")))),
            };
            st.execs.push(record);
            match out {
                Some(out) => return Ok(out),
                None => cmd
                    .get(1)
                    .and_then(|n| n.parse::<u64>().ok())
                    .map(Duration::from_secs)
                    .unwrap_or_default(),
            }
        };
        if !timeout.is_zero() && sleep_for > timeout {
            tokio::time::sleep(timeout).await;
            return Err(RuntimeError::DeadlineExceeded {
                operation: "ExecSync",
            });
        }
        tokio::time::sleep(sleep_for).await;
        Ok(code(0))
    }

    // No streaming server: exec_url, attach_url and port_forward_url keep the trait's
    // Unimplemented answers.

    async fn image_fs_info(&self) -> RuntimeResult<ImageFsInfo> {
        let st = self.enter("ImageFsInfo")?;
        Ok(usage::image_fs(st.images.values(), now_unix_nanos()))
    }

    async fn container_stats(&self, container_id: &str) -> RuntimeResult<ContainerStats> {
        let mut st = self.enter("ContainerStats")?;
        let now = now_unix_nanos();
        let c = st
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found("container", container_id))?;
        advance(c, now, &self.events);
        Ok(usage::container_stats(c, now))
    }

    async fn list_container_stats(
        &self,
        filter: &ListFilter,
    ) -> RuntimeResult<Vec<ContainerStats>> {
        let mut st = self.enter("ListContainerStats")?;
        let now = now_unix_nanos();
        let mut out: Vec<ContainerStats> = Vec::new();
        for c in st.containers.values_mut() {
            if filter.matches(&c.status.summary.pod) {
                advance(c, now, &self.events);
                out.push(usage::container_stats(c, now));
            }
        }
        out.sort_by(|a, b| a.container_id.cmp(&b.container_id));
        Ok(out)
    }

    async fn reopen_container_log(&self, container_id: &str) -> RuntimeResult<()> {
        let mut st = self.enter("ReopenContainerLog")?;
        let c = st
            .containers
            .get_mut(container_id)
            .ok_or_else(|| not_found("container", container_id))?;
        advance(c, now_unix_nanos(), &self.events);
        if c.status.summary.state != ContainerState::Running {
            return Err(RuntimeError::OperationFailed {
                operation: "ReopenContainerLog",
                message: format!("container {container_id} is not running"),
            });
        }
        Ok(())
    }

    async fn container_events(&self) -> RuntimeResult<ContainerEventStream> {
        let st = self.enter("GetContainerEvents")?;
        if st.events_unimplemented {
            return Err(RuntimeError::Unimplemented {
                operation: "GetContainerEvents",
            });
        }
        Ok(self.events.subscribe())
    }
}
