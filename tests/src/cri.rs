//! Helpers for tests that drive a real CRI runtime (the node environment of
//! `scripts/node-env.sh up`).
//!
//! The endpoint comes from `KUBELET_RS_CRI_ENDPOINT` (default: the node environment's socket).
//! When it cannot be reached, a test is skipped with a message, except when `CI` is set: there
//! a missing runtime is a failure.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, Pod};
use kubelet_core::runtime::{ContainerConfig, ContainerKind, ContainerRuntime, SandboxConfig};
use kubelet_core::testing::{ContainerBuilder, PodBuilder};
use kubelet_runtime_cri::{CriConfig, CriRuntime};

/// The node environment's CRI endpoint.
pub const DEFAULT_ENDPOINT: &str = "unix:///run/kubelet-rs/containerd/containerd.sock";
/// The busybox image `scripts/node-env.sh up` imports.
pub const BUSYBOX_IMAGE: &str = "kubelet-rs.local/busybox:1.0";
/// Cgroup parent (cgroupfs) under which test pods are placed; `node-env.sh down` removes it.
pub const TEST_CGROUP_ROOT: &str = "/kubelet-rs-test";

/// The endpoint to test against.
pub fn endpoint() -> String {
    std::env::var("KUBELET_RS_CRI_ENDPOINT").unwrap_or_else(|_| DEFAULT_ENDPOINT.to_string())
}

/// The socket path of [`endpoint`] (for `ctr -a`).
pub fn socket_path() -> String {
    let e = endpoint();
    e.strip_prefix("unix://").unwrap_or(&e).to_string()
}

/// The state directory of the node environment under test: `KUBELET_RS_NODE_DIR` (what
/// `scripts/node-env.sh env` prints for an instance), else the default instance's.
pub fn node_dir() -> PathBuf {
    std::env::var_os("KUBELET_RS_NODE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/kubelet-rs/node"))
}

/// The default node environment's pod subnet (its CNI bridge's range).
pub const DEFAULT_POD_SUBNET: &str = "10.88.0.0/16";

/// The pod subnet of the node environment under test: `KUBELET_RS_POD_SUBNET` (what
/// `scripts/node-env.sh env` prints for an instance), else [`DEFAULT_POD_SUBNET`].
pub fn pod_subnet() -> String {
    std::env::var("KUBELET_RS_POD_SUBNET").unwrap_or_else(|_| DEFAULT_POD_SUBNET.to_string())
}

/// Whether `ip` (IPv4) lies in [`pod_subnet`]; false for anything unparsable.
pub fn in_pod_subnet(ip: &str) -> bool {
    let subnet = pod_subnet();
    let Some((net, bits)) = subnet.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits), Ok(ip)) = (
        net.parse::<std::net::Ipv4Addr>(),
        bits.parse::<u32>(),
        ip.parse::<std::net::Ipv4Addr>(),
    ) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - bits.min(32)).unwrap_or(0);
    u32::from(net) & mask == u32::from(ip) & mask
}

/// A test's runtime, with temporary log directories that live as long as it does.
pub struct TestRuntime {
    /// The runtime under test.
    pub runtime: CriRuntime,
    /// Holds the temporary directories.
    pub dir: tempfile::TempDir,
}

impl TestRuntime {
    /// The per-pod log root (stands in for /var/log/pods).
    pub fn pod_logs_dir(&self) -> PathBuf {
        self.dir.path().join("pods")
    }
    /// The symlink directory (stands in for /var/log/containers).
    pub fn containers_log_dir(&self) -> PathBuf {
        self.dir.path().join("containers")
    }
}

/// Connects to the CRI runtime; `None` (after printing why) when it is unreachable and `CI`
/// is not set. Panics when it is unreachable under CI.
pub async fn runtime_or_skip(test: &str) -> Option<TestRuntime> {
    let dir = tempfile::Builder::new()
        .prefix("kubelet-rs-cri-test")
        .tempdir()
        .expect("temp dir");
    let config = CriConfig {
        runtime_endpoint: endpoint(),
        request_timeout: Duration::from_secs(60),
        pod_logs_dir: dir.path().join("pods"),
        containers_log_dir: dir.path().join("containers"),
        ..CriConfig::default()
    };
    match CriRuntime::connect(config).await {
        Ok(runtime) => Some(TestRuntime { runtime, dir }),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!(
                "SKIPPED {test}: CRI endpoint {} unreachable ({e}); run `scripts/node-env.sh up` (or `cargo xtask node-up`) first",
                endpoint()
            );
            None
        }
        Err(e) => panic!(
            "{test}: CRI endpoint {} unreachable under CI: {e}",
            endpoint()
        ),
    }
}

/// A unique pod uid for this test process.
pub fn unique_uid(tag: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = kubelet_core::clock::wall_now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{tag}-{}-{nanos:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// A busybox container running `sh -c script` (pull policy `IfNotPresent`), from the shared
/// [`ContainerBuilder`].
pub fn busybox(name: &str, script: &str) -> Container {
    ContainerBuilder::new(name, BUSYBOX_IMAGE)
        .command(&["sh", "-c", script])
        .build()
}

/// A pod in namespace `kubelet-rs-test` with the given uid and containers (label
/// `test=<name>`, grace period 1 s), from the shared [`PodBuilder`].
pub fn pod(name: &str, uid: &str, containers: Vec<Container>) -> Arc<Pod> {
    let pod = containers
        .into_iter()
        .fold(PodBuilder::new(name, uid), PodBuilder::container)
        .namespace("kubelet-rs-test")
        .label("test", name)
        .grace_period(1)
        .build();
    Arc::new(pod)
}

/// The sandbox config the engine would build for `pod`, logging under `t`'s temp dir and
/// placed in the cgroup `/kubelet-rs-test/pod<uid>`.
pub fn sandbox_config(t: &TestRuntime, pod: &Arc<Pod>) -> SandboxConfig {
    let name = kubelet_core::pod::name(pod);
    let ns = kubelet_core::pod::namespace(pod);
    let uid = kubelet_core::pod::uid(pod);
    SandboxConfig {
        pod: pod.clone(),
        attempt: 0,
        hostname: name.to_string(),
        log_directory: t.pod_logs_dir().join(format!("{ns}_{name}_{uid}")),
        cgroup_parent: Some(format!("{TEST_CGROUP_ROOT}/pod{uid}")),
        dns: None,
        runtime_handler: String::new(),
    }
}

/// The container config the engine would build for container `index` of `pod`.
pub fn container_config(pod: &Arc<Pod>, index: usize, image_ref: &str) -> ContainerConfig {
    let container = pod
        .spec
        .as_ref()
        .map(|s| s.containers[index].clone())
        .expect("pod has a spec");
    ContainerConfig {
        pod: pod.clone(),
        kind: ContainerKind::Regular,
        restart_count: 0,
        hash: kubelet_core::hash::container_hash(&container),
        image_ref: image_ref.to_string(),
        command: container.command.clone().unwrap_or_default(),
        args: container.args.clone().unwrap_or_default(),
        env: Vec::new(),
        mounts: Vec::new(),
        log_path: PathBuf::from(&container.name).join("0.log"),
        cpuset_cpus: None,
        cpuset_mems: None,
        devices: Default::default(),
        container,
        extra_supplemental_groups: Vec::new(),
    }
}

/// Reads a file, "" when missing.
pub async fn read_or_empty(path: &Path) -> String {
    tokio::fs::read_to_string(path).await.unwrap_or_default()
}

/// The pod cgroup directories `/sys/fs/cgroup/<hierarchy>/kubelet-rs-test/pod<uid>` that exist.
pub fn pod_cgroup_dirs(uid: &str) -> Vec<PathBuf> {
    let rel = format!("{}/pod{uid}", TEST_CGROUP_ROOT.trim_start_matches('/'));
    let mut dirs = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        for e in entries.flatten() {
            let d = e.path().join(&rel);
            if d.is_dir() {
                dirs.push(d);
            }
        }
    }
    let top = Path::new("/sys/fs/cgroup").join(&rel);
    if top.is_dir() {
        dirs.push(top);
    }
    dirs
}

/// Removes the pod's (empty) cgroups, as the container manager does after a pod is gone.
/// Returns the ones that could not be removed.
pub fn remove_pod_cgroups(uid: &str) -> Vec<PathBuf> {
    pod_cgroup_dirs(uid)
        .into_iter()
        .filter(|d| std::fs::remove_dir(d).is_err())
        .collect()
}

/// Stops and removes every sandbox (and so every container) of the pod with `uid`, then its
/// pod cgroups.
pub async fn cleanup_pod(rt: &CriRuntime, uid: &str) {
    let filter = kubelet_core::runtime::ListFilter::pod(uid);
    if let Ok(containers) = rt.list_containers(&filter).await {
        for c in containers {
            let _ = rt.stop_container(&c.id, Duration::from_secs(1)).await;
            let _ = rt.remove_container(&c.id).await;
        }
    }
    if let Ok(sandboxes) = rt.list_pod_sandboxes(&filter).await {
        for s in sandboxes {
            let _ = rt.stop_pod_sandbox(&s.id).await;
            let _ = rt.remove_pod_sandbox(&s.id).await;
        }
    }
    remove_pod_cgroups(uid);
}
