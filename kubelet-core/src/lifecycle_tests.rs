//! Lifecycle tests: the whole engine driven through the simulated runtime on tokio's paused
//! clock (no sleeps in real time, no API server).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EnvVar as ApiEnvVar, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio_util::sync::CancellationToken;

use crate::runtime::{ContainerRuntime, ListFilter, SandboxConfig};
use crate::testing::{
    container, eventually, pod, FakeContainerManager, RecordingSink, SimRuntime, StaticSource,
};
use crate::{Config, Kubelet, KubeletHandle, WorkerState};

pub(crate) struct Harness {
    pub(crate) handle: KubeletHandle,
    pub(crate) rt: Arc<SimRuntime>,
    pub(crate) src: Arc<StaticSource>,
    pub(crate) sink: Arc<RecordingSink>,
    pub(crate) cm: Arc<FakeContainerManager>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<crate::Result<()>>,
}

pub(crate) fn config() -> Config {
    Config {
        node_name: "node-1".into(),
        resolv_conf: Default::default(),
        root_dir: Default::default(),
        ..Config::default()
    }
}

pub(crate) async fn start_with(
    pods: Vec<Pod>,
    rt: Arc<SimRuntime>,
    cm: FakeContainerManager,
    extra: Option<Arc<StaticSource>>,
) -> Harness {
    start_customised(pods, rt, cm, extra, |b| b).await
}

/// [`start_with`], the builder passed through `customise` before it builds.
pub(crate) async fn start_customised(
    pods: Vec<Pod>,
    rt: Arc<SimRuntime>,
    cm: FakeContainerManager,
    extra: Option<Arc<StaticSource>>,
    customise: impl FnOnce(crate::KubeletBuilder) -> crate::KubeletBuilder,
) -> Harness {
    let src = Arc::new(StaticSource::new("file", pods));
    let sink = Arc::new(RecordingSink::default());
    let cm = Arc::new(cm);
    let mut b = Kubelet::builder()
        .config(config())
        .runtime(rt.clone())
        .container_manager(cm.clone())
        .status_sink(sink.clone())
        .source(src.clone());
    if let Some(extra) = extra {
        b = b.source(extra);
    }
    let kubelet = customise(b).build().expect("build");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    Harness {
        handle,
        rt,
        src,
        sink,
        cm,
        shutdown,
        task,
    }
}

pub(crate) async fn start(pods: Vec<Pod>) -> Harness {
    start_with(
        pods,
        Arc::new(SimRuntime::new()),
        FakeContainerManager::default(),
        None,
    )
    .await
}

impl Harness {
    /// Polls (in virtual time) until `f` holds; panics after `limit`.
    pub(crate) async fn until(&self, limit: Duration, what: &str, f: impl Fn(&Harness) -> bool) {
        eventually(limit, what, || async { f(self).then_some(()) }).await
    }

    pub(crate) fn status(&self, uid: &str) -> Option<PodStatus> {
        self.handle.pod_status(uid)
    }

    pub(crate) fn phase(&self, uid: &str) -> String {
        self.status(uid).and_then(|s| s.phase).unwrap_or_default()
    }

    pub(crate) fn waiting_reason(&self, uid: &str, c: &str) -> Option<String> {
        self.status(uid)?
            .container_statuses?
            .into_iter()
            .find(|s| s.name == c)?
            .state?
            .waiting?
            .reason
    }

    pub(crate) fn restart_count(&self, uid: &str, c: &str) -> i32 {
        self.status(uid)
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs.into_iter().find(|s| s.name == c))
            .map(|s| s.restart_count)
            .unwrap_or(-1)
    }

    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("join").expect("run");
    }
}

pub(crate) fn env(pairs: &[(&str, &str)]) -> Option<Vec<ApiEnvVar>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ApiEnvVar {
                name: k.to_string(),
                value: Some(v.to_string()),
                ..Default::default()
            })
            .collect(),
    )
}

pub(crate) fn with_policy(mut p: Pod, policy: &str) -> Pod {
    if let Some(s) = p.spec.as_mut() {
        s.restart_policy = Some(policy.into());
    }
    p
}

pub(crate) fn crashing(
    name: &str,
    run_ms: &str,
    code: &str,
) -> k8s_openapi::api::core::v1::Container {
    let mut c = container(name, "img:1");
    c.env = env(&[("SIM_RUN_FOR_MS", run_ms), ("SIM_EXIT_CODE", code)]);
    c
}

#[tokio::test(start_paused = true)]
async fn pod_reaches_running_with_conditions_and_ip() {
    let h = start(vec![pod(
        "web",
        "u1",
        vec![container("c", "img:1"), container("d", "img:1")],
    )])
    .await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let s = h.status("u1").expect("status");
    assert!(s
        .pod_ip
        .as_deref()
        .is_some_and(|ip| ip.starts_with("10.88.")));
    let conds = s.conditions.expect("conditions");
    for t in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ] {
        let c = conds.iter().find(|c| c.type_ == t).expect(t);
        assert_eq!(c.status, "True", "{t}");
    }
    assert_eq!(s.qos_class.as_deref(), Some("BestEffort"));
    let cs = s.container_statuses.expect("container statuses");
    assert!(cs
        .iter()
        .all(|c| c.ready && c.state.as_ref().and_then(|s| s.running.as_ref()).is_some()));
    assert!(cs[0]
        .container_id
        .as_deref()
        .is_some_and(|id| id.starts_with("sim://")));
    // The sink saw it too, and the image was pulled once (IfNotPresent).
    assert!(h
        .sink
        .statuses("u1")
        .iter()
        .any(|s| s.phase.as_deref() == Some("Running")));
    assert_eq!(h.rt.calls("PullImage"), 1);
    assert_eq!(h.cm.pod_uids(), vec!["u1".to_string()]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_pod_name_longer_than_a_hostname_runs() {
    // 69 characters, as the e2e spec "Pods should allow activeDeadlineSeconds to be updated"
    // names its pod: the sandbox gets the name cut to 63 characters (Go
    // truncatePodHostnameIfNeeded), not a hostname the kernel refuses.
    let name = "pod-update-activedeadlineseconds-ea039d58-1250-446f-951d-ecb2b340df78";
    let h = start(vec![pod(name, "u1", vec![container("c", "img:1")])]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn crash_loop_backs_off_exponentially() {
    let h = start(vec![pod("crash", "u1", vec![crashing("c", "1000", "1")])]).await;
    h.until(Duration::from_secs(120), "3 restarts", |h| {
        h.restart_count("u1", "c") >= 3
    })
    .await;
    // Between starts: it runs 1s; the first restart is immediate (as in Go), then the
    // back-off is 10s, 20s, 40s.
    let ids = h.rt.container_ids("u1", "c");
    let mut created = Vec::new();
    for id in &ids {
        created.push(
            h.rt.container_status(id)
                .await
                .expect("status")
                .summary
                .created_at,
        );
    }
    let gaps: Vec<i64> = created
        .windows(2)
        .map(|w| (w[1] - w[0]) / 1_000_000_000)
        .collect();
    assert!(gaps.len() >= 3, "{gaps:?}");
    for (gap, want) in gaps.iter().zip([1, 11, 21, 41]) {
        assert!((want..=want + 2).contains(gap), "gaps {gaps:?}");
    }
    h.until(Duration::from_secs(5), "CrashLoopBackOff", |h| {
        h.waiting_reason("u1", "c").as_deref() == Some("CrashLoopBackOff")
    })
    .await;
    let s = h.status("u1").expect("status");
    let c = &s.container_statuses.expect("cs")[0];
    let last = c
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .expect("last state");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert!(h.sink.event_reasons().iter().any(|r| r == "BackOff"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn restart_policy_matrix() {
    // (policy, exit code, expect restarts, final phase)
    let cases = [
        ("Always", "0", true, "Running"),
        ("Always", "1", true, "Running"),
        ("OnFailure", "0", false, "Succeeded"),
        ("OnFailure", "1", true, "Running"),
        ("Never", "0", false, "Succeeded"),
        ("Never", "1", false, "Failed"),
    ];
    let pods: Vec<Pod> = cases
        .iter()
        .enumerate()
        .map(|(i, (policy, code, _, _))| {
            with_policy(
                pod(
                    &format!("p{i}"),
                    &format!("u{i}"),
                    vec![crashing("c", "500", code)],
                ),
                policy,
            )
        })
        .collect();
    let h = start(pods).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    for (i, (policy, code, restarts, phase)) in cases.iter().enumerate() {
        let uid = format!("u{i}");
        assert_eq!(h.phase(&uid), *phase, "{policy} exit {code}");
        let count = h.rt.container_ids(&uid, "c").len();
        assert_eq!(
            count > 1,
            *restarts,
            "{policy} exit {code}: {count} containers"
        );
        if !restarts {
            // Terminal pods are stopped: their sandbox is no longer ready.
            assert_eq!(
                h.handle.worker_state(&uid),
                Some(WorkerState::Terminated),
                "{policy} {code}"
            );
        }
    }
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn init_containers_run_in_order_before_app_containers() {
    let mut p = pod("init", "u1", vec![container("app", "img:1")]);
    let mut i1 = crashing("i1", "1000", "0");
    i1.image = Some("img:1".into());
    let i2 = crashing("i2", "1000", "0");
    if let Some(s) = p.spec.as_mut() {
        s.init_containers = Some(vec![i1, i2]);
    }
    let mut failing = with_policy(
        pod("initfail", "u2", vec![container("app", "img:1")]),
        "Never",
    );
    if let Some(s) = failing.spec.as_mut() {
        s.init_containers = Some(vec![crashing("bad", "500", "3")]);
    }
    let h = start(vec![p, failing]).await;
    h.until(Duration::from_secs(20), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let created = |name: &str| {
        let ids = h.rt.container_ids("u1", name);
        assert_eq!(ids.len(), 1, "{name} ran once");
        ids[0].clone()
    };
    let (a, b, c) = (created("i1"), created("i2"), created("app"));
    let rt = h.rt.clone();
    let a = rt.container_status(&a).await.expect("s");
    let b = rt.container_status(&b).await.expect("s");
    let c = rt.container_status(&c).await.expect("s");
    assert!(a.finished_at <= b.started_at && b.finished_at <= c.started_at);
    let s = h.status("u1").expect("status");
    let inits = s.init_container_statuses.expect("init statuses");
    assert!(inits.iter().all(|i| i
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some_and(|t| t.reason.as_deref() == Some("Completed"))));
    // A failed init container under restartPolicy Never fails the pod; the app never starts.
    h.until(Duration::from_secs(20), "init failure", |h| {
        h.phase("u2") == "Failed"
    })
    .await;
    assert!(h.rt.container_ids("u2", "app").is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn removing_a_pod_stops_and_removes_everything() {
    let mut c = container("c", "img:1");
    c.env = env(&[("SIM_IGNORE_TERM", "1")]);
    let mut p = pod("gone", "u1", vec![c]);
    if let Some(s) = p.spec.as_mut() {
        s.termination_grace_period_seconds = Some(5);
    }
    // A static pod (from a file): its mirror pod is kept while it terminates.
    p.metadata.annotations = Some(
        [(
            crate::pod::CONFIG_SOURCE_ANNOTATION.to_string(),
            "file".to_string(),
        )]
        .into_iter()
        .collect(),
    );
    let h = start(vec![p, pod("stays", "u2", vec![container("c", "img:1")])]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running" && h.phase("u2") == "Running"
    })
    .await;
    assert!(!h.handle.static_pod_terminating("default/gone"));
    let before = tokio::time::Instant::now();
    h.src
        .set(vec![pod("stays", "u2", vec![container("c", "img:1")])]);
    h.until(Duration::from_secs(3), "terminating", |h| {
        h.handle.static_pod_terminating("default/gone")
    })
    .await;
    assert!(!h.handle.static_pod_terminating("default/stays"));
    h.until(Duration::from_secs(30), "cleanup", |h| {
        h.handle.worker_state("u1") == Some(WorkerState::Finished)
            || h.handle.worker_state("u1").is_none()
    })
    .await;
    // The container ignores SIGTERM: it is killed only at the 5s deadline.
    let took = before.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(7),
        "{took:?}"
    );
    let left =
        h.rt.list_containers(&ListFilter::pod("u1"))
            .await
            .expect("list");
    assert!(left.is_empty());
    assert!(!h.handle.static_pod_terminating("default/gone"));
    assert!(h
        .rt
        .list_pod_sandboxes(&ListFilter::pod("u1"))
        .await
        .expect("list")
        .is_empty());
    assert_eq!(h.cm.pod_uids(), vec!["u2".to_string()]);
    assert_eq!(h.phase("u2"), "Running");
    h.until(Duration::from_secs(5), "forgotten", |h| {
        h.status("u1").is_none()
    })
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn spec_change_recreates_container_and_updates_coalesce() {
    let h = start(vec![pod("p", "u1", vec![container("c", "img:1")])]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    // 50 updates in a burst: the worker coalesces them and ends on the last spec.
    for i in 0..50 {
        h.src.set(vec![pod(
            "p",
            "u1",
            vec![container("c", &format!("img:{}", i + 2))],
        )]);
    }
    h.until(Duration::from_secs(20), "last image running", |h| {
        h.status("u1")
            .and_then(|s| s.container_statuses)
            .is_some_and(|cs| cs[0].image == "img:51" && cs[0].ready)
    })
    .await;
    let created = h.rt.calls("CreateContainer");
    assert!(created < 10, "{created} containers created for 50 updates");
    assert!(h
        .sink
        .events()
        .iter()
        .any(|e| e.reason == "Killing" && e.message.contains("definition changed")));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn orphans_are_removed_only_after_all_sources_are_seen() {
    let rt = Arc::new(SimRuntime::new());
    // A pod left in the runtime by an earlier kubelet that no source wants any more.
    let orphan = Arc::new(pod("old", "orphan", vec![]));
    let sandbox = SandboxConfig {
        pod: orphan.clone(),
        attempt: 0,
        hostname: "old".into(),
        log_directory: "/tmp/x".into(),
        cgroup_parent: None,
        dns: None,
        runtime_handler: String::new(),
    };
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.expect("sandbox");
    // A dead container of it: container GC (every minute) must leave it to the orphan
    // cleanup, which waits for every source (Go's `sourcesReady` gate).
    let dead = rt
        .create_container(
            &sandbox_id,
            &crate::runtime::ContainerConfig {
                pod: orphan,
                container: container("c", "img:1"),
                kind: crate::runtime::ContainerKind::Regular,
                restart_count: 0,
                hash: 0,
                image_ref: "img:1".into(),
                command: vec![],
                args: vec![],
                env: vec![],
                mounts: vec![],
                log_path: "c/0.log".into(),
                cpuset_cpus: None,
                cpuset_mems: None,
                devices: Default::default(),
                extra_supplemental_groups: Vec::new(),
            },
            &sandbox,
        )
        .await
        .expect("container");
    rt.start_container(&dead).await.expect("start");
    rt.crash(&dead, 1);
    let silent = Arc::new(StaticSource::silent("http"));
    let h = start_with(
        vec![pod("p", "u1", vec![container("c", "img:1")])],
        rt,
        FakeContainerManager::default(),
        Some(silent.clone()),
    )
    .await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    // Past a container GC period and many housekeepings.
    tokio::time::sleep(Duration::from_secs(70)).await;
    assert_eq!(
        h.rt.list_pod_sandboxes(&ListFilter::pod("orphan"))
            .await
            .expect("l")
            .len(),
        1,
        "orphan kept while a source is silent"
    );
    assert_eq!(
        h.rt.list_containers(&ListFilter::pod("orphan"))
            .await
            .expect("l")
            .len(),
        1,
        "its dead container kept while a source is silent"
    );
    assert!(!h.handle.sources_ready());
    silent.set(vec![]);
    h.until(Duration::from_secs(20), "orphan removed", |h| {
        h.rt.object_counts().0 == 1
    })
    .await;
    assert!(h.handle.sources_ready());
    assert_eq!(h.phase("u1"), "Running");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_kubelet_without_pod_sources_has_seen_all_of_them() {
    let kubelet = Kubelet::builder()
        .config(config())
        .runtime(Arc::new(SimRuntime::new()))
        .container_manager(Arc::new(FakeContainerManager::default()))
        .build()
        .expect("build");
    let handle = kubelet.handle();
    assert!(!handle.sources_ready(), "not before it runs");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    // Image garbage collection and the orphan cleanup wait for this: nothing is to come.
    crate::testing::eventually(Duration::from_secs(5), "sources ready", || {
        std::future::ready(handle.sources_ready().then_some(()))
    })
    .await;
    shutdown.cancel();
    task.await.expect("join").expect("run");
}

#[tokio::test(start_paused = true)]
async fn image_pull_failures_back_off_and_never_policy_fails_fast() {
    let rt = Arc::new(SimRuntime::new());
    rt.fail_pulls("missing:1");
    let mut never = container("c", "absent:1");
    never.image_pull_policy = Some("Never".into());
    let h = start_with(
        vec![
            pod("bad", "u1", vec![container("c", "missing:1")]),
            pod("never", "u2", vec![never]),
            pod("good", "u3", vec![container("c", "img:1")]),
        ],
        rt,
        FakeContainerManager::default(),
        None,
    )
    .await;
    h.until(Duration::from_secs(10), "ErrImagePull", |h| {
        h.waiting_reason("u1", "c").as_deref() == Some("ErrImagePull")
    })
    .await;
    h.until(Duration::from_secs(30), "ImagePullBackOff", |h| {
        h.waiting_reason("u1", "c").as_deref() == Some("ImagePullBackOff")
    })
    .await;
    h.until(Duration::from_secs(10), "ErrImageNeverPull", |h| {
        h.waiting_reason("u2", "c").as_deref() == Some("ErrImageNeverPull")
    })
    .await;
    assert_eq!(h.phase("u1"), "Pending");
    assert_eq!(h.phase("u3"), "Running");
    // Backoff bounds the pull attempts: 10s, 20s, 40s, ... in two minutes that is ≤ 5.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let pulls = h.rt.calls("PullImage");
    assert!(pulls <= 7, "{pulls} pulls");
    h.stop().await;
}

/// Go's timing of pull retries: the pod is synced again 10–15s after each failed image
/// step (the pod worker's `backOffPeriod` with jitter), a sync inside the image back-off
/// answers `ImagePullBackOff` with a `BackOff` event, and the first sync past it pulls:
/// the gaps between pulls are at least the back-off (10s, 20s, 40s, 80s) and less than it
/// plus 15s, and every back-off of 20s or more shows `ImagePullBackOff` in between.
#[tokio::test(start_paused = true)]
async fn image_pulls_are_retried_at_the_first_sync_past_the_back_off() {
    let rt = Arc::new(SimRuntime::new());
    rt.fail_pulls("missing:1");
    let h = start_with(
        vec![pod("bad", "u1", vec![container("c", "missing:1")])],
        rt,
        FakeContainerManager::default(),
        None,
    )
    .await;
    let t0 = tokio::time::Instant::now();
    // (seconds since start, pulls so far, waiting reason), every 100ms for 200s.
    let mut samples = Vec::new();
    while t0.elapsed() < Duration::from_secs(200) {
        samples.push((
            t0.elapsed().as_secs_f64(),
            h.rt.calls("PullImage"),
            h.waiting_reason("u1", "c"),
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut pulls = Vec::new();
    for w in samples.windows(2) {
        if w[1].1 > w[0].1 {
            pulls.push(w[1].0);
        }
    }
    if samples.first().is_some_and(|s| s.1 > 0) {
        pulls.insert(0, 0.0);
    }
    assert!(pulls.len() >= 5, "{pulls:?}");
    for (i, backoff) in [10.0, 20.0, 40.0, 80.0].into_iter().enumerate() {
        let gap = pulls[i + 1] - pulls[i];
        assert!(
            gap >= backoff - 0.2 && gap < backoff + 15.2,
            "pull {} came {gap:.1}s after the previous one (back-off {backoff}s): {pulls:?}",
            i + 2
        );
        let between: Vec<_> = samples
            .iter()
            .filter(|s| s.0 > pulls[i] + 0.2 && s.0 < pulls[i + 1] - 0.2)
            .filter_map(|s| s.2.clone())
            .collect();
        assert!(
            between
                .iter()
                .all(|r| r == "ErrImagePull" || r == "ImagePullBackOff"),
            "{between:?}"
        );
        if backoff >= 20.0 {
            assert!(
                between.iter().any(|r| r == "ImagePullBackOff"),
                "ImagePullBackOff between pulls {} and {}",
                i + 1,
                i + 2
            );
        }
    }
    // One BackOff event per sync inside a back-off: a sync every 10-15s between the pulls.
    let backoffs = h
        .sink
        .events()
        .iter()
        .filter(|e| e.reason == "BackOff" && e.message.contains("Back-off pulling image"))
        .count();
    let failed = h
        .sink
        .events()
        .iter()
        .filter(|e| e.reason == "Failed")
        .count();
    assert_eq!(failed, pulls.len(), "a Failed event per pull");
    assert!((6..=20).contains(&backoffs), "{backoffs} BackOff events");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn edited_static_pod_is_replaced_after_the_old_one_terminates() {
    let h = start(vec![pod("web", "old", vec![container("c", "img:1")])]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("old") == "Running"
    })
    .await;
    h.src
        .set(vec![pod("web", "new", vec![container("c", "img:2")])]);
    h.until(Duration::from_secs(60), "new Running", |h| {
        h.phase("new") == "Running"
    })
    .await;
    assert!(h
        .rt
        .list_containers(&ListFilter::pod("old"))
        .await
        .expect("l")
        .is_empty());
    let old_gone = h
        .handle
        .worker_state("old")
        .is_none_or(|s| s == WorkerState::Finished);
    assert!(old_gone);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn graceful_deletion_period_can_only_be_shortened() {
    let mut c = container("c", "img:1");
    c.env = env(&[("SIM_IGNORE_TERM", "1")]);
    let p = pod("p", "u1", vec![c]);
    let h = start(vec![p.clone()]).await;
    h.until(Duration::from_secs(10), "Running", |h| {
        h.phase("u1") == "Running"
    })
    .await;
    let deleting = |grace: i64| {
        let mut d = p.clone();
        d.metadata.deletion_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1).expect("t"),
        ));
        d.metadata.deletion_grace_period_seconds = Some(grace);
        d
    };
    let before = tokio::time::Instant::now();
    h.src.set(vec![deleting(30)]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    h.src.set(vec![deleting(3)]);
    // A longer period later is ignored.
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.src.set(vec![deleting(60)]);
    h.until(Duration::from_secs(60), "terminated", |h| {
        !h.sink.terminated().is_empty()
    })
    .await;
    let took = before.elapsed();
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert_eq!(
        h.phase("u1"),
        "Failed",
        "killed containers end the deleted pod as Failed"
    );
    h.stop().await;
}
