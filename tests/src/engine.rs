//! A harness that runs the real kubelet engine ([`kubelet_core::Kubelet`]) on the node
//! environment's containerd (through [`CriRuntime`]) and the real Linux container manager
//! ([`LinuxContainerManager`]) under a per-test cgroup root.
//!
//! # Isolation
//! Tests run in parallel against one containerd, and every engine lists *all* sandboxes and
//! containers of the runtime (PLEG, orphan cleanup). Each test therefore gets its own pod
//! namespace ([`EngineTest::namespace`]) and its engines see the runtime through
//! [`ScopedRuntime`], which only lists the sandboxes and containers of pods in that namespace;
//! every call still goes to the real runtime unchanged. Without it, one test's engine would
//! kill the pods of every other test as orphans.
//!
//! Each test also gets its own cgroup root (`/kubelet-rs-test/<test>-<pid>-<n>`, created in
//! every cgroup hierarchy before the container manager starts), temporary log and root
//! directories, and a cleanup ([`EngineTest`]'s `Drop`) that removes every sandbox of the
//! test's namespace through CRI and the cgroup root, even when the test failed.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus as K8sContainerStatus, Pod, PodSpec, PodStatus, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_cm::{CmConfig, LinuxContainerManager};
use kubelet_core::runtime::{ContainerRuntime, ContainerSummary, ListFilter, SandboxSummary};
use kubelet_core::{Config, ContainerManager, Kubelet, KubeletBuilder, KubeletHandle, PodSource};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use tokio_util::sync::CancellationToken;

use crate::cri::{endpoint, TEST_CGROUP_ROOT};
pub use crate::scoped_runtime::ScopedRuntime;

/// The node name the test engines use.
pub const NODE_NAME: &str = "kubelet-rs-itest";

/// One test's environment: namespace, cgroup root, directories, the real runtime and
/// container manager. Dropping it removes everything the test's pods left in the runtime and
/// the cgroup root.
pub struct EngineTest {
    /// The test's name (for messages).
    pub name: String,
    /// The namespace all of this test's pods live in.
    pub namespace: String,
    /// The container manager's cgroup root, e.g. `/kubelet-rs-test/pods-1234-0`.
    pub cgroup_root: String,
    /// Temporary directory holding `pods/` (pod logs), `containers/` and `root/`.
    pub dir: tempfile::TempDir,
    /// The unscoped CRI runtime (for assertions that look at everything).
    pub cri: Arc<CriRuntime>,
    /// The scoped view the engines use.
    pub runtime: Arc<ScopedRuntime>,
    /// The container manager the engines use.
    pub cm: Arc<LinuxContainerManager>,
    /// Shutdown tokens of every engine started, cancelled before cleanup so that no engine
    /// re-creates what the cleanup removes.
    engines: std::sync::Mutex<Vec<CancellationToken>>,
}

/// A running engine.
pub struct RunningKubelet {
    /// Read access to the engine.
    pub handle: KubeletHandle,
    /// Cancel to stop the engine (pods keep running).
    pub shutdown: CancellationToken,
    /// The engine's task.
    pub join: tokio::task::JoinHandle<kubelet_core::Result<()>>,
}

impl RunningKubelet {
    /// Cancels the engine and waits for it to return.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.join)
            .await
            .expect("the kubelet stops within 60s")
            .expect("kubelet task")
            .expect("kubelet run");
    }
}

fn short_unique() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = kubelet_core::clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{:x}-{}",
        std::process::id(),
        nanos & 0xfffff,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// Every cgroup hierarchy directory: `/sys/fs/cgroup/<hierarchy>` for each mounted v1
/// hierarchy and `/sys/fs/cgroup/unified` (hybrid mode).
pub fn hierarchies() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(mounts) = std::fs::read_to_string("/proc/mounts") {
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
                out.push(PathBuf::from(f[1]));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Removes a cgroup directory tree bottom-up (cgroup directories are removed with rmdir).
fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    for _ in 0..20 {
        if !dir.exists() || std::fs::remove_dir(dir).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("cannot remove cgroup {}", dir.display());
}

/// Stops and removes every container and sandbox of pods in `namespace`.
pub async fn remove_namespace(rt: &CriRuntime, namespace: &str) {
    let all = ListFilter::all();
    if let Ok(containers) = rt.list_containers(&all).await {
        for c in containers.iter().filter(|c| c.pod.namespace == namespace) {
            let _ = rt.stop_container(&c.id, Duration::from_secs(0)).await;
            let _ = rt.remove_container(&c.id).await;
        }
    }
    if let Ok(sandboxes) = rt.list_pod_sandboxes(&all).await {
        for s in sandboxes.iter().filter(|s| s.pod.namespace == namespace) {
            let _ = rt.stop_pod_sandbox(&s.id).await;
            let _ = rt.remove_pod_sandbox(&s.id).await;
        }
    }
}

async fn connect(dir: &Path) -> Result<CriRuntime, kubelet_runtime_cri::Error> {
    CriRuntime::connect(CriConfig {
        runtime_endpoint: endpoint(),
        request_timeout: Duration::from_secs(60),
        pod_logs_dir: dir.join("pods"),
        containers_log_dir: dir.join("containers"),
        ..CriConfig::default()
    })
    .await
}

/// With `KUBELET_RS_TEST_LOG` set (an `EnvFilter` directive such as `kubelet_core=debug`), the
/// engine's tracing output goes to the test's captured output: what a failed run then prints.
/// For a developer chasing a failure; not set by `scripts/test.sh`, since tests that capture
/// the log themselves (hardening, join) need the global subscriber to be theirs.
fn init_test_log() {
    if let Ok(directives) = std::env::var("KUBELET_RS_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(directives))
            .with_test_writer()
            .try_init();
    }
}

impl EngineTest {
    /// Sets up the test's environment; `None` (after printing why) when the CRI endpoint is
    /// unreachable and `CI` is unset. Panics when it is unreachable under CI.
    pub async fn new(test: &str) -> Option<EngineTest> {
        init_test_log();
        let unique = short_unique();
        let dir = tempfile::Builder::new()
            .prefix("kubelet-rs-engine-test")
            .tempdir()
            .expect("temp dir");
        for sub in ["pods", "containers", "root"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let cri = match connect(dir.path()).await {
            Ok(rt) => rt,
            Err(e) if std::env::var_os("CI").is_none() => {
                eprintln!(
                    "SKIPPED {test}: CRI endpoint {} unreachable ({e}); run `scripts/node-env.sh up` first",
                    endpoint()
                );
                return None;
            }
            Err(e) => panic!(
                "{test}: CRI endpoint {} unreachable under CI: {e}",
                endpoint()
            ),
        };
        let cri = Arc::new(cri);
        let tag: String = test
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(20)
            .collect::<String>()
            .to_ascii_lowercase();
        let namespace = format!("it-{tag}-{unique}");
        let cgroup_root = format!("{TEST_CGROUP_ROOT}/{tag}-{unique}");
        for h in hierarchies() {
            std::fs::create_dir_all(h.join(cgroup_root.trim_start_matches('/')))
                .unwrap_or_else(|e| panic!("creating cgroup root in {}: {e}", h.display()));
        }
        let cm_config = CmConfig {
            root_dir: dir.path().join("root"),
            cgroup_root: cgroup_root.clone(),
            fail_swap_on: false,
            ..CmConfig::default()
        };
        let cm = tokio::task::spawn_blocking(move || LinuxContainerManager::new(cm_config))
            .await
            .unwrap()
            .expect("container manager starts");
        Some(EngineTest {
            name: test.to_string(),
            runtime: Arc::new(ScopedRuntime::new(cri.clone(), &namespace)),
            namespace,
            cgroup_root,
            dir,
            cri,
            cm: Arc::new(cm),
            engines: Default::default(),
        })
    }

    /// Replaces the container manager with a new one on the same cgroup root, as a restarted
    /// kubelet process would create.
    pub async fn new_container_manager(&mut self) {
        self.new_container_manager_with(|_| {}).await;
    }

    /// Like [`EngineTest::new_container_manager`], with `customize` changing its
    /// configuration (reservations, say).
    pub async fn new_container_manager_with(&mut self, customize: impl FnOnce(&mut CmConfig)) {
        let mut cm_config = CmConfig {
            root_dir: self.dir.path().join("root"),
            cgroup_root: self.cgroup_root.clone(),
            fail_swap_on: false,
            ..CmConfig::default()
        };
        customize(&mut cm_config);
        let cm = tokio::task::spawn_blocking(move || LinuxContainerManager::new(cm_config))
            .await
            .unwrap()
            .expect("container manager starts");
        self.cm = Arc::new(cm);
    }

    /// The pod log root (`Config::pod_logs_dir` and `CriConfig::pod_logs_dir`).
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.dir.path().join("pods")
    }

    /// A unique pod uid for this test.
    pub fn uid(&self, tag: &str) -> String {
        format!("{tag}-{}", short_unique())
    }

    /// The engine configuration the tests use: the Go defaults except a short
    /// CrashLoopBackOff and ImagePullBackOff (1s doubling up to 4s) and a 1s housekeeping
    /// period, so crash-loop and image tests finish quickly — and without eviction
    /// thresholds or image garbage collection: the machine's memory and disk are shared
    /// (and its disk may well be past Go's default thresholds), so a test that is not about
    /// them must not act on them. Tests of those managers set their own.
    pub fn config(&self) -> Config {
        Config {
            node_name: NODE_NAME.into(),
            node_ips: vec!["127.0.0.1".into()],
            root_dir: self.dir.path().join("root"),
            pod_logs_dir: self.pod_logs_dir(),
            container_logs_dir: self.dir.path().join("containers"),
            eviction: kubelet_core::eviction::EvictionConfig::disabled(),
            image_gc: kubelet_core::images::gc::ImageGcPolicy {
                high_threshold_percent: 100,
                low_threshold_percent: 80,
                ..Default::default()
            },
            housekeeping_interval: Duration::from_secs(1),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(4),
            image_backoff_initial: Duration::from_secs(1),
            image_backoff_max: Duration::from_secs(4),
            resolv_conf: PathBuf::new(),
            ..Config::default()
        }
    }

    /// Builds and runs an engine with [`EngineTest::config`] and these sources.
    pub fn start(&self, sources: Vec<Arc<dyn PodSource>>) -> RunningKubelet {
        self.start_with(self.config(), sources)
    }

    /// Builds and runs an engine with this configuration and these sources.
    pub fn start_with(&self, config: Config, sources: Vec<Arc<dyn PodSource>>) -> RunningKubelet {
        self.start_customized(config, sources, |b| b)
    }

    /// Like [`EngineTest::start_with`], letting `customize` add to the builder (an object
    /// store, a status sink, ...).
    pub fn start_customized(
        &self,
        config: Config,
        sources: Vec<Arc<dyn PodSource>>,
        customize: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
    ) -> RunningKubelet {
        self.start_on(self.runtime.clone(), config, sources, customize)
    }

    /// Like [`EngineTest::start_customized`] on another view of the runtime (a
    /// [`ScopedRuntime`] with an image scope, say).
    pub fn start_on(
        &self,
        runtime: Arc<ScopedRuntime>,
        config: Config,
        sources: Vec<Arc<dyn PodSource>>,
        customize: impl FnOnce(KubeletBuilder) -> KubeletBuilder,
    ) -> RunningKubelet {
        let mut builder = Kubelet::builder()
            .config(config)
            .runtime(runtime)
            .container_manager(self.cm.clone() as Arc<dyn ContainerManager>);
        for s in sources {
            builder = builder.source(s);
        }
        let kubelet = customize(builder).build().expect("kubelet builds");
        let handle = kubelet.handle();
        let shutdown = CancellationToken::new();
        self.engines.lock().unwrap().push(shutdown.clone());
        let join = tokio::spawn(kubelet.run(shutdown.clone()));
        RunningKubelet {
            handle,
            shutdown,
            join,
        }
    }

    /// A pod in this test's namespace.
    pub fn pod(&self, name: &str, uid: &str, containers: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(self.namespace.clone()),
                uid: Some(uid.to_string()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                termination_grace_period_seconds: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The existing directories of the cgroup `<cgroup_root>/<rel>` over all hierarchies.
    pub fn cgroup_dirs(&self, rel: &str) -> Vec<PathBuf> {
        let path = format!("{}/{rel}", self.cgroup_root.trim_start_matches('/'));
        hierarchies()
            .into_iter()
            .map(|h| h.join(&path))
            .filter(|d| d.is_dir())
            .collect()
    }

    /// The pod cgroup directories (`…/pod<uid>` anywhere under the QoS tiers) that exist.
    pub fn pod_cgroup_dirs(&self, uid: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for tier in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
            out.extend(self.cgroup_dirs(&format!("{tier}/pod{uid}")));
        }
        out
    }

    /// Sandboxes of the pod with `uid` in the real runtime.
    pub async fn sandboxes(&self, uid: &str) -> Vec<SandboxSummary> {
        self.cri
            .list_pod_sandboxes(&ListFilter::pod(uid))
            .await
            .unwrap()
    }

    /// The test's kubelet root directory (`Config::root_dir`).
    pub fn root_dir(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Containers of the pod with `uid` in the real runtime.
    pub async fn containers(&self, uid: &str) -> Vec<ContainerSummary> {
        self.cri
            .list_containers(&ListFilter::pod(uid))
            .await
            .unwrap()
    }
}

impl Drop for EngineTest {
    fn drop(&mut self) {
        // Runs on its own thread and runtime: works from inside the test's runtime and while
        // a failed test unwinds.
        let engines: Vec<CancellationToken> =
            self.engines.lock().map(|e| e.clone()).unwrap_or_default();
        let running = engines.iter().any(|e| !e.is_cancelled());
        for e in &engines {
            e.cancel();
        }
        let namespace = self.namespace.clone();
        let dir = self.dir.path().to_path_buf();
        let root = self.cgroup_root.clone();
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if running {
                    // Let the engines' workers finish what they were doing.
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                if let Ok(cri) = connect(&dir).await {
                    remove_namespace(&cri, &namespace).await;
                    if running {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        remove_namespace(&cri, &namespace).await;
                    }
                }
            });
            for h in hierarchies() {
                remove_cgroup_tree(&h.join(root.trim_start_matches('/')));
            }
            // Volumes the engines left mounted under the pod directories (tmpfs, subPath
            // binds), so the temporary directory can be removed.
            if let Ok(mounts) = kubelet_core::mount::mount_points_under(&dir) {
                for m in mounts {
                    let _ = kubelet_core::mount::unmount(&m);
                }
            }
        })
        .join();
        if done.is_err() {
            eprintln!("cleanup of {} failed", self.name);
        }
    }
}

/// The tests' one wait ([`kubelet_core::testing::eventually`]), re-exported beside the harness.
pub use kubelet_core::testing::eventually;

/// [`eventually`] for a synchronous check: polls `check` until it returns `Some` and panics
/// naming `what` once `timeout` has passed.
pub async fn wait_until<T, F>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Option<T>,
{
    eventually(timeout, what, || std::future::ready(check())).await
}

pub use crate::cri::busybox;

/// Resource requirements from `(name, quantity)` pairs.
pub fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
    let list = |pairs: &[(&str, &str)]| {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect::<BTreeMap<_, _>>()
        })
    };
    ResourceRequirements {
        requests: list(requests),
        limits: list(limits),
        ..Default::default()
    }
}

/// The pod's phase.
pub fn phase(s: &PodStatus) -> &str {
    s.phase.as_deref().unwrap_or("")
}

/// The status of container `name`.
pub fn container_status<'a>(s: &'a PodStatus, name: &str) -> Option<&'a K8sContainerStatus> {
    s.container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// The waiting reason of container `name`, if it is waiting.
pub fn waiting_reason(s: &PodStatus, name: &str) -> Option<String> {
    container_status(s, name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// The status of condition `type_` ("True"/"False"), if present.
pub fn condition(s: &PodStatus, type_: &str) -> Option<String> {
    s.conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// Whether the pod is Running with every container ready.
pub fn running_and_ready(s: &PodStatus) -> bool {
    phase(s) == "Running"
        && s.container_statuses
            .as_ref()
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready))
}

/// Waits until the engine reports the pod Running with all containers ready; returns the status.
pub async fn wait_running(handle: &KubeletHandle, uid: &str, timeout: Duration) -> PodStatus {
    let mut last = None;
    let start = kubelet_core::clock::monotonic_now();
    loop {
        if let Some(s) = handle.pod_status(uid) {
            if running_and_ready(&s) {
                return s;
            }
            last = Some(s);
        }
        if kubelet_core::clock::elapsed(start) > timeout {
            panic!("pod {uid} not Running+ready after {timeout:?}; last status: {last:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Network namespaces pinned under /var/run/netns.
pub fn netns_names() -> Vec<String> {
    std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The inode of the network namespace of process `pid` (`/proc/<pid>/ns/net`).
pub fn netns_inode_of_pid(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// The pinned netns (name under /var/run/netns) whose inode is `ino`.
pub fn pinned_netns_with_inode(ino: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    netns_names().into_iter().find(|n| {
        std::fs::metadata(Path::new("/var/run/netns").join(n))
            .map(|m| m.ino() == ino)
            .unwrap_or(false)
    })
}

/// Kills the node environment's containerd (pid file of `scripts/node-env.sh`), waits for it
/// to exit, and starts it again with `scripts/node-env.sh up` (same command line). Disrupts
/// every other user of the runtime: only for tests that run alone.
pub async fn restart_node_containerd() {
    let pid_file = "/run/kubelet-rs/containerd/containerd.pid";
    let pid = std::fs::read_to_string(pid_file)
        .expect("containerd pid file of scripts/node-env.sh")
        .trim()
        .to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -TERM {pid}");
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    wait_until(Duration::from_secs(30), "containerd to exit", || {
        (!proc_dir.exists()).then_some(())
    })
    .await;
    let script = crate::scripts::script("node-env.sh");
    // Descriptors closed: the restarted containerd must not hold the test lock.
    let up = crate::cluster::script_command(&script)
        .arg("up")
        .status()
        .await
        .unwrap();
    assert!(up.success(), "scripts/node-env.sh up");
}
