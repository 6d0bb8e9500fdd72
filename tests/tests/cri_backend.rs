//! `CriRuntime` against the real containerd of `scripts/node-env.sh up`.
//!
//! Skipped (with a message) when the endpoint is unreachable and `CI` is unset; failing in CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::FutureExt;
use kubelet_core::runtime::{
    ContainerRuntime, ContainerState, ListFilter, PullImageRequest, RuntimeError, SandboxState,
};
use kubelet_core::testing::poll_until;
use kubelet_tests::cri::{
    busybox, cleanup_pod, container_config, in_pod_subnet, pod, pod_cgroup_dirs, pod_subnet,
    read_or_empty, remove_pod_cgroups, runtime_or_skip, sandbox_config, unique_uid, BUSYBOX_IMAGE,
    TEST_CGROUP_ROOT,
};

const WAIT: Duration = Duration::from_secs(30);

/// Host networking, the pod IP and host ports.
#[path = "cri_backend/network.rs"]
mod network;

/// The image reference the runtime resolved for the local busybox image.
async fn busybox_ref(rt: &impl ContainerRuntime) -> String {
    let info = rt
        .image_status(BUSYBOX_IMAGE)
        .await
        .expect("image status")
        .unwrap_or_else(|| panic!("{BUSYBOX_IMAGE} missing: run scripts/node-env.sh up"));
    assert!(
        info.repo_tags.iter().any(|t| t == BUSYBOX_IMAGE),
        "{info:?}"
    );
    info.id
}

/// Inodes of the network namespaces CNI pinned under /var/run/netns.
fn pinned_netns_inodes() -> HashSet<u64> {
    std::fs::read_dir("/var/run/netns")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("cni-"))
                .filter_map(|e| std::fs::metadata(e.path()).ok())
                .map(|m| m.ino())
                .collect()
        })
        .unwrap_or_default()
}

fn netns_inode(link: &str) -> u64 {
    // "net:[4026532561]"
    link.trim()
        .trim_start_matches("net:[")
        .trim_end_matches(']')
        .parse()
        .unwrap_or_else(|_| panic!("unexpected ns link {link:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_with_two_containers_runs_logs_execs_and_cleans_up() {
    let Some(t) = runtime_or_skip("pod_with_two_containers").await else {
        return;
    };
    let rt = &t.runtime;
    let status = rt.status().await.unwrap();
    assert!(status.runtime_ready && status.network_ready, "{status:?}");
    let image_ref = busybox_ref(rt).await;

    let uid = unique_uid("two");
    let pod = pod(
        "two-containers",
        &uid,
        vec![
            busybox(
                "one",
                "echo hello-from-one; echo second-line-one; exec sleep 3600",
            ),
            busybox("two", "echo hello-from-two; exec sleep 3600"),
        ],
    );
    let sandbox = sandbox_config(&t, &pod);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();

    let result = async {
        // The sandbox is ready, listed under the pod, and has a pod-network IP.
        let s = rt.pod_sandbox_status(&sandbox_id).await.unwrap();
        assert_eq!(s.state, SandboxState::Ready);
        assert_eq!(s.pod.uid, uid);
        assert_eq!(s.pod.name, "two-containers");
        assert_eq!(s.pod.namespace, "kubelet-rs-test");
        assert!(!s.host_network);
        let ip = s.ip.clone().expect("pod IP");
        assert!(in_pod_subnet(&ip), "pod IP {ip} not in {}", pod_subnet());
        let listed = rt.list_pod_sandboxes(&ListFilter::pod(&uid)).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, sandbox_id);
        assert!(listed[0].created_at > 0);
        // Another pod's filter does not see it.
        let other = rt
            .list_pod_sandboxes(&ListFilter::pod("no-such-uid"))
            .await
            .unwrap();
        assert!(other.is_empty());

        let mut ids = Vec::new();
        for i in 0..2 {
            let cfg = container_config(&pod, i, &image_ref);
            let id = rt
                .create_container(&sandbox_id, &cfg, &sandbox)
                .await
                .unwrap();
            rt.start_container(&id).await.unwrap();
            ids.push((cfg, id));
        }

        // Both run, in the pod's cgroup, and are listed with their names and hashes.
        let containers = rt.list_containers(&ListFilter::pod(&uid)).await.unwrap();
        assert_eq!(containers.len(), 2);
        for (cfg, id) in &ids {
            let c = containers.iter().find(|c| &c.id == id).expect("listed");
            assert_eq!(c.name, cfg.container.name);
            assert_eq!(c.hash, cfg.hash);
            assert_eq!(c.sandbox_id, sandbox_id);
            assert_eq!(c.pod.uid, uid);
            let st = rt.container_status(id).await.unwrap();
            assert_eq!(st.summary.state, ContainerState::Running, "{st:?}");
            assert!(st.started_at > 0);
            assert_eq!(st.summary.sandbox_id, sandbox_id);
            let cgroup = PathBuf::from(format!(
                "/sys/fs/cgroup/memory{TEST_CGROUP_ROOT}/pod{uid}/{id}"
            ));
            assert!(cgroup.is_dir(), "{} missing", cgroup.display());
        }

        // Their stdout lands in the CRI log files, reachable through the legacy symlinks.
        for (cfg, id) in &ids {
            let log = sandbox.log_directory.join(&cfg.log_path);
            let expected = format!("hello-from-{}", cfg.container.name);
            let text = poll_until(WAIT, || {
                let log = log.clone();
                let expected = expected.clone();
                async move {
                    let text = read_or_empty(&log).await;
                    text.contains(&expected).then_some(text)
                }
            })
            .await
            .unwrap_or_else(|| panic!("{expected} never appeared in {}", log.display()));
            let first = text.lines().next().unwrap();
            // CRI log format: "<RFC3339Nano> stdout F <line>".
            let fields: Vec<&str> = first.splitn(4, ' ').collect();
            assert_eq!(fields.len(), 4, "{first:?}");
            assert_eq!(fields[1], "stdout");
            assert_eq!(fields[2], "F");
            assert_eq!(fields[3], expected);
            let st = rt.container_status(id).await.unwrap();
            assert_eq!(st.log_path.as_deref(), Some(log.as_path()));
            let link = t.containers_log_dir().join(format!(
                "two-containers_kubelet-rs-test_{}-{id}.log",
                cfg.container.name
            ));
            assert_eq!(std::fs::read_link(&link).unwrap(), log);
            assert_eq!(std::fs::read_to_string(&link).unwrap(), text);
        }
        assert!(read_or_empty(&sandbox.log_directory.join("one/0.log"))
            .await
            .contains("second-line-one"));

        // exec_sync: output, stderr and exit code.
        let (_, one) = &ids[0];
        let out = rt
            .exec_sync(
                one,
                &[
                    "sh".into(),
                    "-c".into(),
                    "echo out; echo err >&2; exit 7".into(),
                ],
                Duration::from_secs(10),
            )
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
        assert_eq!(out.exit_code, 7);
        let host = rt
            .exec_sync(one, &["hostname".into()], Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&host.stdout).trim(),
            "two-containers"
        );
        // Containers of a pod share its network namespace.
        let ns_of = |id: String| async move {
            let out = rt
                .exec_sync(
                    &id,
                    &["readlink".into(), "/proc/self/ns/net".into()],
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        let ns_one = ns_of(ids[0].1.clone()).await;
        let ns_two = ns_of(ids[1].1.clone()).await;
        assert_eq!(ns_one, ns_two);
        let netns = netns_inode(&ns_one);
        assert!(
            pinned_netns_inodes().contains(&netns),
            "pod netns not pinned under /var/run/netns"
        );
        // Streaming URLs come from the runtime's streaming server.
        let url = rt
            .exec_url(&kubelet_core::runtime::ExecRequest {
                container_id: one.clone(),
                cmd: vec!["sh".into()],
                stdout: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let pf = rt.port_forward_url(&sandbox_id, &[80]).await.unwrap();
        assert!(pf.starts_with("http://127.0.0.1:"), "{pf}");

        // Stop and remove: nothing of the pod is left, the netns is gone.
        for (_, id) in &ids {
            rt.stop_container(id, Duration::from_secs(2)).await.unwrap();
            let st = rt.container_status(id).await.unwrap();
            assert_eq!(st.summary.state, ContainerState::Exited);
        }
        rt.stop_pod_sandbox(&sandbox_id).await.unwrap();
        // Stopping again succeeds.
        rt.stop_pod_sandbox(&sandbox_id).await.unwrap();
        assert_eq!(
            rt.pod_sandbox_status(&sandbox_id).await.unwrap().state,
            SandboxState::NotReady
        );
        for (cfg, id) in &ids {
            rt.remove_container(id).await.unwrap();
            // Removing again succeeds.
            rt.remove_container(id).await.unwrap();
            let link = t.containers_log_dir().join(format!(
                "two-containers_kubelet-rs-test_{}-{id}.log",
                cfg.container.name
            ));
            assert!(!link.exists() && std::fs::symlink_metadata(&link).is_err());
            assert!(!sandbox.log_directory.join(&cfg.log_path).exists());
        }
        rt.remove_pod_sandbox(&sandbox_id).await.unwrap();
        rt.remove_pod_sandbox(&sandbox_id).await.unwrap();
        assert!(rt
            .list_containers(&ListFilter::pod(&uid))
            .await
            .unwrap()
            .is_empty());
        assert!(rt
            .list_pod_sandboxes(&ListFilter::pod(&uid))
            .await
            .unwrap()
            .is_empty());
        assert!(matches!(
            rt.pod_sandbox_status(&sandbox_id).await,
            Err(RuntimeError::NotFound {
                kind: "sandbox",
                ..
            })
        ));
        assert!(matches!(
            rt.container_status(&ids[0].1).await,
            Err(RuntimeError::NotFound {
                kind: "container",
                ..
            })
        ));
        assert!(
            !pinned_netns_inodes().contains(&netns),
            "pod netns still pinned after removal"
        );
        // The pod cgroup exists and is empty once its sandbox is gone.
        assert!(!pod_cgroup_dirs(&uid).is_empty());
        let stuck = remove_pod_cgroups(&uid);
        assert!(stuck.is_empty(), "pod cgroups not empty: {stuck:?}");
    };
    // Clean up even when an assertion fails.
    let outcome = AssertUnwindSafe(result).catch_unwind().await;
    cleanup_pod(rt, &uid).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_exiting_with_code_3_reports_error() {
    let Some(t) = runtime_or_skip("container_exiting_with_code_3").await else {
        return;
    };
    let rt = &t.runtime;
    let image_ref = busybox_ref(rt).await;
    let uid = unique_uid("exit3");
    let pod = pod(
        "exit-three",
        &uid,
        vec![busybox("fail", "echo about-to-fail; exit 3")],
    );
    let sandbox = sandbox_config(&t, &pod);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let cfg = container_config(&pod, 0, &image_ref);
    let id = rt
        .create_container(&sandbox_id, &cfg, &sandbox)
        .await
        .unwrap();
    let created = rt.container_status(&id).await.unwrap();
    assert_eq!(created.summary.state, ContainerState::Created);
    assert_eq!(created.started_at, 0);
    assert_eq!(created.summary.sandbox_id, sandbox_id);
    // The status of a listed container (one CRI call, the sandbox id from the listing) is
    // the same status.
    let listed = rt
        .list_containers(&ListFilter::pod(&uid))
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.id == id)
        .expect("the container is listed");
    assert_eq!(rt.container_status_listed(&listed).await.unwrap(), created);
    rt.start_container(&id).await.unwrap();

    let status = poll_until(WAIT, || async {
        let s = rt.container_status(&id).await.ok()?;
        // containerd may report the exit a moment before it records the start time.
        (s.summary.state == ContainerState::Exited && s.started_at > 0).then_some(s)
    })
    .await;
    let log = read_or_empty(&sandbox.log_directory.join(&cfg.log_path)).await;
    cleanup_pod(rt, &uid).await;

    let status = status.expect("container never exited");
    assert_eq!(status.exit_code, 3);
    assert_eq!(status.reason, "Error");
    // containerd stamps started_at when StartContainer returns, which for a container this
    // short can be a little after the exit it recorded; only ask for both to be set.
    assert!(
        status.started_at > 0 && status.finished_at >= status.summary.created_at,
        "{status:?}"
    );
    assert!(log.contains("about-to-fail"), "{log:?}");
    assert!(rt
        .list_pod_sandboxes(&ListFilter::pod(&uid))
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_image_fails_cleanly() {
    let Some(t) = runtime_or_skip("missing_image").await else {
        return;
    };
    let rt = &t.runtime;
    let missing = "kubelet-rs.local/does-not-exist:1.0";
    assert_eq!(rt.image_status(missing).await.unwrap(), None);
    let err = rt
        .pull_image(&PullImageRequest {
            image: missing.into(),
            auth: None,
            sandbox: None,
        })
        .await
        .unwrap_err();
    match &err {
        RuntimeError::ImagePull { image, message } => {
            assert_eq!(image, missing);
            assert!(!message.is_empty());
        }
        other => panic!("expected ImagePull, got {other:?}"),
    }

    // Creating a container from an image that is not there fails and leaves nothing behind.
    let uid = unique_uid("noimg");
    let mut c = busybox("ghost", "true");
    c.image = Some(missing.into());
    let pod = pod("no-image", &uid, vec![c]);
    let sandbox = sandbox_config(&t, &pod);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let cfg = container_config(&pod, 0, missing);
    let res = rt.create_container(&sandbox_id, &cfg, &sandbox).await;
    let left = rt.list_containers(&ListFilter::pod(&uid)).await.unwrap();
    cleanup_pod(rt, &uid).await;
    let err = res.expect_err("create from a missing image must fail");
    assert!(
        matches!(&err, RuntimeError::NotFound { kind: "image", id } if id == missing),
        "{err:?}"
    );
    assert!(left.is_empty(), "{left:?}");
    // A dangling symlink must not have been left either.
    let links: Vec<_> = std::fs::read_dir(t.containers_log_dir())
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(links.is_empty(), "{links:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_non_root_with_root_image_is_rejected() {
    let Some(t) = runtime_or_skip("run_as_non_root").await else {
        return;
    };
    let rt = &t.runtime;
    let image_ref = busybox_ref(rt).await;
    let uid = unique_uid("nonroot");
    let mut c = busybox("strict", "id -u; sleep 3600");
    c.security_context = Some(k8s_openapi::api::core::v1::SecurityContext {
        run_as_non_root: Some(true),
        ..Default::default()
    });
    let mut ok = busybox("as-1000", "id -u; exec sleep 3600");
    ok.security_context = Some(k8s_openapi::api::core::v1::SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(1000),
        ..Default::default()
    });
    let pod = pod("non-root", &uid, vec![c, ok]);
    let sandbox = sandbox_config(&t, &pod);
    let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
    let rejected = rt
        .create_container(
            &sandbox_id,
            &container_config(&pod, 0, &image_ref),
            &sandbox,
        )
        .await;
    let accepted = rt
        .create_container(
            &sandbox_id,
            &container_config(&pod, 1, &image_ref),
            &sandbox,
        )
        .await;
    let id_out = match &accepted {
        Ok(id) => {
            rt.start_container(id).await.unwrap();
            rt.exec_sync(id, &["id".into(), "-u".into()], Duration::from_secs(10))
                .await
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        }
        Err(e) => Err(e.clone()),
    };
    cleanup_pod(rt, &uid).await;
    match rejected {
        Err(RuntimeError::InvalidInput { message, .. }) => {
            assert!(message.contains("run as root"), "{message}")
        }
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    assert_eq!(id_out.unwrap(), "1000");
}

/// Tiny unix-socket proxy in front of the real runtime, so a test can take "the runtime" away
/// and bring it back without disturbing other tests.
struct Proxy {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    fn start(path: &Path, target: PathBuf) -> Proxy {
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path).unwrap();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                let target = target.clone();
                conns.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::UnixStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Proxy {
            path: path.to_path_buf(),
            task,
        }
    }

    /// Stops listening and drops every proxied connection (the JoinSet aborts them).
    async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
        let _ = std::fs::remove_file(&self.path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_unavailable_while_runtime_is_away_and_recover() {
    let Some(t) = runtime_or_skip("runtime_restart").await else {
        return;
    };
    let real = kubelet_runtime_cri::socket_path(&kubelet_tests::cri::endpoint()).unwrap();
    let sock = t.dir.path().join("proxy.sock");
    let proxy = Proxy::start(&sock, real.clone());
    let rt = kubelet_runtime_cri::CriRuntime::connect(kubelet_runtime_cri::CriConfig {
        runtime_endpoint: format!("unix://{}", sock.display()),
        request_timeout: Duration::from_secs(10),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(rt.version().await.unwrap().runtime_api_version, "v1");

    proxy.stop().await;
    for _ in 0..3 {
        match rt.version().await {
            Err(RuntimeError::Unavailable(msg)) => assert!(msg.contains("Version"), "{msg}"),
            other => panic!("expected Unavailable while the runtime is away, got {other:?}"),
        }
    }
    assert!(matches!(
        rt.list_pod_sandboxes(&ListFilter::all()).await,
        Err(RuntimeError::Unavailable(_))
    ));

    let proxy = Proxy::start(&sock, real);
    let back = poll_until(WAIT, || async { rt.status().await.ok() }).await;
    proxy.stop().await;
    let back = back.expect("calls never succeeded again after the runtime came back");
    assert!(back.runtime_ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_missing_socket_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("unix://{}/nothing.sock", dir.path().display());
    let err = kubelet_runtime_cri::CriRuntime::connect(kubelet_runtime_cri::CriConfig {
        runtime_endpoint: endpoint.clone(),
        request_timeout: Duration::from_secs(5),
        ..Default::default()
    })
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&endpoint), "{text}");
    assert!(
        matches!(
            err,
            kubelet_runtime_cri::Error::Connect {
                error: RuntimeError::Unavailable(_),
                ..
            }
        ),
        "{err:?}"
    );
    let bad = kubelet_runtime_cri::CriRuntime::connect(kubelet_runtime_cri::CriConfig {
        runtime_endpoint: "tcp://127.0.0.1:1".into(),
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(
        bad,
        kubelet_runtime_cri::Error::InvalidEndpoint { .. }
    ));
}

/// Restarts the node's real containerd under a live `CriRuntime`. Disruptive for other tests
/// running at the same time, so run it alone:
/// `cargo test -p kubelet-tests --test cri_backend -- --ignored real_containerd_restart`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "restarts the node's containerd; run alone"]
async fn real_containerd_restart() {
    let Some(t) = runtime_or_skip("real_containerd_restart").await else {
        return;
    };
    let rt = &t.runtime;
    assert!(rt.status().await.unwrap().runtime_ready);
    let pid_file = "/run/kubelet-rs/containerd/containerd.pid";
    let pid = std::fs::read_to_string(pid_file)
        .expect("containerd pid file of scripts/node-env.sh")
        .trim()
        .to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let gone = poll_until(WAIT, || {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        async move { (!proc_dir.exists()).then_some(()) }
    })
    .await;
    assert!(gone.is_some(), "containerd {pid} did not exit");
    match rt.version().await {
        Err(RuntimeError::Unavailable(_)) => {}
        other => panic!("expected Unavailable while containerd is down, got {other:?}"),
    }
    let script = kubelet_tests::scripts::script("node-env.sh");
    // Descriptors closed: the restarted containerd must not hold the test lock.
    let up = kubelet_tests::cluster::blocking_script_command(&script)
        .arg("up")
        .status()
        .unwrap();
    assert!(up.success());
    let back = poll_until(WAIT, || async {
        rt.status()
            .await
            .ok()
            .filter(|s| s.runtime_ready && s.network_ready)
    })
    .await;
    assert!(back.is_some(), "the same CriRuntime never worked again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_fs_container_stats_log_reopen_and_events() {
    let Some(t) = runtime_or_skip("image_fs_container_stats").await else {
        return;
    };
    let rt = &t.runtime;

    // The image filesystem: containerd's snapshotter mount, with the images' bytes.
    // containerd sums snapshot usage in a periodic sync (every 10 s), so a containerd just
    // started or restarted (test.sh starts the 1.7 instance right before these) reports 0.
    let fs = rt.image_fs_info().await.unwrap();
    let image_fs = fs.image_filesystems.first().expect("an image filesystem");
    assert!(!image_fs.mountpoint.is_empty(), "{fs:?}");
    assert!(image_fs.timestamp > 0, "{fs:?}");
    let counted = poll_until(WAIT, || async {
        let fs = rt.image_fs_info().await.ok()?;
        (fs.image_filesystems.first()?.used_bytes.unwrap_or(0) > 0).then_some(())
    })
    .await;
    assert!(
        counted.is_some(),
        "the image filesystem never counted the images' bytes"
    );

    // GetContainerEvents: containerd 1.7 streams events, 1.6 has no such method.
    let version = rt.version().await.unwrap();
    let events = rt.container_events().await;
    if version.runtime_version.starts_with("1.6.") {
        match events {
            Err(RuntimeError::Unimplemented { operation }) => {
                assert_eq!(operation, "GetContainerEvents")
            }
            Err(e) => panic!("expected Unimplemented from {version:?}, got {e:?}"),
            Ok(_) => panic!("expected Unimplemented from {version:?}, got a stream"),
        }
    } else {
        assert!(events.is_ok(), "{version:?}: {:?}", events.err());
    }

    let image_ref = busybox_ref(rt).await;
    let uid = unique_uid("stats");
    let pod = pod(
        "stats",
        &uid,
        vec![busybox(
            "busy",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo counted; exec sleep 3600",
        )],
    );
    let sandbox = sandbox_config(&t, &pod);
    let result = async {
        let sandbox_id = rt.run_pod_sandbox(&sandbox).await.unwrap();
        let cfg = container_config(&pod, 0, &image_ref);
        let id = rt
            .create_container(&sandbox_id, &cfg, &sandbox)
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        let log = sandbox.log_directory.join(&cfg.log_path);
        let counted = poll_until(WAIT, || {
            let log = log.clone();
            async move { read_or_empty(&log).await.contains("counted").then_some(()) }
        })
        .await;
        assert!(counted.is_some(), "the container never finished counting");

        // A running container's stats: CPU time spent counting, memory in use.
        let stats = rt.container_stats(&id).await.unwrap();
        assert_eq!(stats.container_id, id);
        assert_eq!(stats.name, "busy");
        assert_eq!(stats.pod.uid, uid);
        let cpu = stats.cpu.expect("cpu stats");
        assert!(cpu.usage_core_nano_seconds.unwrap_or(0) > 0, "{cpu:?}");
        let memory = stats.memory.expect("memory stats");
        assert!(memory.working_set_bytes.unwrap_or(0) > 0, "{memory:?}");
        let listed = rt
            .list_container_stats(&ListFilter::pod(&uid))
            .await
            .unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].container_id, id);
        assert!(matches!(
            rt.container_stats("no-such-container").await,
            Err(RuntimeError::NotFound { .. })
        ));

        // Log rotation: the runtime reopens the log of a running container, and new output
        // lands in the new file.
        let rotated = log.with_extension("log.1");
        std::fs::rename(&log, &rotated).unwrap();
        rt.reopen_container_log(&id).await.unwrap();
        assert!(log.exists(), "reopen did not create {}", log.display());
        rt.exec_sync(
            &id,
            &[
                "sh".into(),
                "-c".into(),
                "echo after-rotation > /proc/1/fd/1".into(),
            ],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        let after = poll_until(WAIT, || {
            let log = log.clone();
            async move {
                read_or_empty(&log)
                    .await
                    .contains("after-rotation")
                    .then_some(())
            }
        })
        .await;
        assert!(after.is_some(), "no output in the reopened log");
        assert!(read_or_empty(&rotated).await.contains("counted"));

        // Not running any more: nothing to reopen.
        rt.stop_container(&id, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(rt.reopen_container_log(&id).await.is_err());
    };
    let outcome = AssertUnwindSafe(result).catch_unwind().await;
    cleanup_pod(rt, &uid).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
