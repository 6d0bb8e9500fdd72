//! The device manager with the upstream sample device plugin (the v1.20.2 tree's
//! `test/images/sample-device-plugin`, built by `scripts/node-e2e.sh sample-device-plugin`)
//! and real containerd: the plugin registers on the kubelet's socket, the node gets
//! `example.com/resource: 2`, a pod asking for one gets its `/tmp/Dev-N` mount, keeps it
//! across a container restart and a kubelet restart, a second pod gets the other device, a
//! third is rejected, and the plugin going away drops allocatable to 0 while capacity stays
//! and the pods keep running. The checkpoint is Go's format, and the pod resources API lists
//! the assignments.
//!
//! The plugin hard-codes `/var/lib/kubelet/device-plugins/kubelet.sock`: it runs in a mount
//! namespace of its own where that directory is the test kubelet's `device-plugins`.
//!
//! `#[ignore]`d: `scripts/test.sh` builds the plugin, then runs it with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kubelet_cm::device_plugins::GrpcDevicePluginRegistry;
use kubelet_core::devicemanager::{DeviceCheckpoint, CHECKPOINT_FILE, DEVICE_PLUGIN_DIR};
use kubelet_core::runtime::{ContainerRuntime, ContainerState};
use kubelet_core::testing::StaticSource;
use kubelet_core::{KubeletHandle, PodSource};
use kubelet_tests::engine::{
    busybox, phase, resources, wait_running, wait_until, EngineTest, RunningKubelet,
};

const RESOURCE: &str = "example.com/resource";

fn plugin_binary() -> PathBuf {
    let path = std::env::var_os("KUBELET_RS_SAMPLE_DEVICE_PLUGIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/kubelet-rs/node-e2e/bin/sample-device-plugin".into());
    assert!(
        path.is_file(),
        "{} is missing: build it with scripts/node-e2e.sh sample-device-plugin",
        path.display()
    );
    path
}

/// The sample plugin, in a mount namespace where `/var/lib/kubelet/device-plugins` is `dir`,
/// once the kubelet listens there; it serves its socket in `/var/lib/kubelet/device-plugins`.
async fn start_plugin(dir: &Path) -> tokio::process::Child {
    start_plugin_in(dir, Path::new("/var/lib/kubelet/device-plugins")).await
}

/// [`start_plugin`] with the plugin's socket in `sock_dir`. The plugin registers through the
/// `Register` call unless it finds `/var/lib/kubelet/device-plugins/DEPRECATION` (its fixed
/// path; `dir` in its namespace), which the kubelet writes when it takes plugins through
/// `plugins_registry`.
async fn start_plugin_in(dir: &Path, sock_dir: &Path) -> tokio::process::Child {
    wait_until(
        Duration::from_secs(30),
        "the kubelet's device plugin socket",
        || dir.join("kubelet.sock").exists().then_some(()),
    )
    .await;
    std::fs::create_dir_all("/var/lib/kubelet/device-plugins").unwrap();
    let script = format!(
        "mount --bind '{}' /var/lib/kubelet/device-plugins && exec '{}'",
        dir.display(),
        plugin_binary().display()
    );
    tokio::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("PLUGIN_SOCK_DIR", sock_dir)
        .kill_on_drop(true)
        .spawn()
        .expect("unshare starts the sample device plugin")
}

fn start(t: &EngineTest, source: &Arc<StaticSource>) -> RunningKubelet {
    let dir = t.root_dir().join(DEVICE_PLUGIN_DIR);
    t.start_customized(
        t.config(),
        vec![source.clone() as Arc<dyn PodSource>],
        |b| b.device_plugin_registry(Arc::new(GrpcDevicePluginRegistry::new(dir))),
    )
}

fn counts(h: &KubeletHandle) -> (Option<String>, Option<String>) {
    let (cap, alloc) = h.device_capacity();
    (
        cap.get(RESOURCE).map(|q| q.0.clone()),
        alloc.get(RESOURCE).map(|q| q.0.clone()),
    )
}

async fn wait_counts(h: &KubeletHandle, cap: &str, alloc: &str, what: &str) {
    let want = (Some(cap.to_string()), Some(alloc.to_string()));
    wait_until(Duration::from_secs(60), what, || {
        (counts(h) == want).then_some(())
    })
    .await;
}

/// The device the pod's container holds.
fn device_of(h: &KubeletHandle, uid: &str) -> String {
    let held = h.container_devices(uid, "c");
    assert_eq!(held.len(), 1, "{held:?}");
    let ids: Vec<String> = held[0].1.values().flatten().cloned().collect();
    assert_eq!(ids.len(), 1, "{held:?}");
    ids[0].clone()
}

/// Whether `/tmp/<dev>` exists in the pod's running container.
async fn sees(t: &EngineTest, uid: &str, dev: &str) -> bool {
    let Some(c) = t
        .containers(uid)
        .await
        .into_iter()
        .find(|c| c.state == ContainerState::Running)
    else {
        return false;
    };
    let cmd = ["test", "-e", &format!("/tmp/{dev}")].map(String::from);
    t.runtime
        .exec_sync(&c.id, &cmd, Duration::from_secs(10))
        .await
        .is_ok_and(|o| o.exit_code == 0)
}

/// `List` of the pod resources API served for this kubelet on a socket of the test's: (pod,
/// container, `example.com/resource` devices) of every listed container holding some.
async fn pod_resources(t: &EngineTest, h: &KubeletHandle) -> Vec<(String, String, Vec<String>)> {
    use kubelet_server::pod_resources::api::pod_resources_lister_client::PodResourcesListerClient;
    use kubelet_server::pod_resources::api::ListPodResourcesRequest;
    use kubelet_server::pod_resources::{PodResourcesListener, PodResourcesService};
    let socket = kubelet_server::pod_resources::socket_path(&t.root_dir());
    let listener = PodResourcesListener::bind(&socket).await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(listener.serve(
        PodResourcesService::new(Arc::new(h.clone())),
        shutdown.clone(),
    ));
    let path = socket.clone();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(path).await?,
                ))
            }
        }))
        .await
        .unwrap();
    let resp = PodResourcesListerClient::new(channel)
        .list(ListPodResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    shutdown.cancel();
    let _ = server.await;
    let mut out = Vec::new();
    for p in resp.pod_resources {
        for c in p.containers {
            let ids: Vec<String> = c
                .devices
                .iter()
                .filter(|d| d.resource_name == RESOURCE)
                .flat_map(|d| d.device_ids.clone())
                .collect();
            if !ids.is_empty() {
                out.push((p.name.clone(), c.name.clone(), ids));
            }
        }
    }
    out.sort();
    out
}

fn device_pod(t: &EngineTest, name: &str, uid: &str) -> k8s_openapi::api::core::v1::Pod {
    let mut c = busybox("c", "exec sleep 3600");
    c.resources = Some(resources(&[(RESOURCE, "1")], &[(RESOURCE, "1")]));
    t.pod(name, uid, vec![c])
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the sample device plugin: scripts/test.sh builds it and runs this"]
async fn sample_device_plugin_devices_reach_pods_and_survive_restarts() {
    let Some(t) = EngineTest::new("deviceplugin").await else {
        return;
    };
    let dir = t.root_dir().join(DEVICE_PLUGIN_DIR);
    let (a, b, c) = (t.uid("a"), t.uid("b"), t.uid("c"));
    let source = Arc::new(StaticSource::new("file", vec![]));
    let k = start(&t, &source);
    let mut plugin = start_plugin(&dir).await;
    wait_counts(&k.handle, "2", "2", "the plugin's two devices on the node").await;

    // A pod asking for one device gets it, and its mount.
    source.set(vec![device_pod(&t, "a", &a)]);
    wait_running(&k.handle, &a, Duration::from_secs(60)).await;
    let dev_a = device_of(&k.handle, &a);
    assert!(sees(&t, &a, &dev_a).await, "pod a sees /tmp/{dev_a}");

    // Its container restarts: same device.
    let first = t.containers(&a).await;
    let id = first
        .iter()
        .find(|c| c.state == ContainerState::Running)
        .unwrap()
        .id
        .clone();
    t.runtime.stop_container(&id, Duration::ZERO).await.unwrap();
    wait_until(
        Duration::from_secs(60),
        "pod a's container restarted",
        || {
            k.handle.pod_status(&a).and_then(|s| {
                s.container_statuses?
                    .first()
                    .filter(|c| c.restart_count >= 1 && c.ready)
                    .map(|_| ())
            })
        },
    )
    .await;
    assert_eq!(device_of(&k.handle, &a), dev_a);
    assert!(sees(&t, &a, &dev_a).await, "pod a still sees /tmp/{dev_a}");

    // The checkpoint is Go's format and holds the assignment.
    let bytes = std::fs::read(dir.join(CHECKPOINT_FILE)).unwrap();
    let cp = DeviceCheckpoint::from_json(&bytes).expect("Go's format and checksum");
    assert_eq!(cp.entries.len(), 1, "{cp:?}");
    assert_eq!(cp.entries[0].pod_uid, a);
    assert_eq!(cp.registered[RESOURCE].len(), 2);

    // A restarted kubelet: the plugin registers again (the registry removed its socket),
    // pod a keeps its device.
    k.stop().await;
    let _ = plugin.kill().await;
    let k = start(&t, &source);
    let mut plugin = start_plugin(&dir).await;
    wait_counts(
        &k.handle,
        "2",
        "2",
        "the plugin back after a kubelet restart",
    )
    .await;
    wait_running(&k.handle, &a, Duration::from_secs(60)).await;
    assert_eq!(device_of(&k.handle, &a), dev_a);

    // A second pod gets the other device; a third is rejected.
    source.set(vec![device_pod(&t, "a", &a), device_pod(&t, "b", &b)]);
    wait_running(&k.handle, &b, Duration::from_secs(60)).await;
    let dev_b = device_of(&k.handle, &b);
    assert_ne!(dev_a, dev_b);
    assert!(sees(&t, &b, &dev_b).await, "pod b sees /tmp/{dev_b}");
    source.set(vec![
        device_pod(&t, "a", &a),
        device_pod(&t, "b", &b),
        device_pod(&t, "c", &c),
    ]);
    let s = wait_until(Duration::from_secs(30), "pod c rejected", || {
        k.handle.pod_status(&c).filter(|s| phase(s) == "Failed")
    })
    .await;
    // The predicates reject it first, as Go's do: both devices are in use.
    assert_eq!(
        s.reason.as_deref(),
        Some("OutOfexample.com/resource"),
        "{s:?}"
    );
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was rejected: Node didn't have enough resource: example.com/resource, requested: 1, used: 2, capacity: 2"),
    );
    assert!(
        t.sandboxes(&c).await.is_empty(),
        "a rejected pod never runs"
    );

    // The pod resources API lists both assignments (what GPU exporters read).
    let listed = pod_resources(&t, &k.handle).await;
    assert_eq!(
        listed,
        vec![
            ("a".to_string(), "c".to_string(), vec![dev_a.clone()]),
            ("b".to_string(), "c".to_string(), vec![dev_b.clone()]),
        ]
    );

    // The plugin goes: allocatable 0, capacity kept; the pods keep running.
    let _ = plugin.kill().await;
    wait_counts(&k.handle, "2", "0", "the plugin gone").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_running(&k.handle, &a, Duration::from_secs(10)).await;
    wait_running(&k.handle, &b, Duration::from_secs(10)).await;

    source.set(vec![]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for uid in [&a, &b] {
        while !t.sandboxes(uid).await.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "pod {uid} not removed"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    k.stop().await;
}

/// The other registration path Go accepts: the plugin serves `pluginregistration.v1` on a
/// socket in `<root-dir>/plugins_registry`, the plugin manager finds it (inotify), asks its
/// info and hands it to the device plugin registry's `DevicePlugin` handler. The sample plugin
/// takes this path when it finds the `DEPRECATION` file the kubelet writes in its device
/// plugin directory (as upstream's e2e runs it, its socket in `plugins_registry`).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the sample device plugin: scripts/test.sh builds it and runs this"]
async fn sample_device_plugin_registers_through_plugins_registry() {
    use kubelet_cm::plugin_manager::{plugins_registry_dir, PluginManager, DEVICE_PLUGIN};
    let Some(t) = EngineTest::new("pluginswatch").await else {
        return;
    };
    let registry = Arc::new(GrpcDevicePluginRegistry::new(
        t.root_dir().join(DEVICE_PLUGIN_DIR),
    ));
    let source = Arc::new(StaticSource::new("file", vec![]));
    let r = registry.clone();
    let k = t.start_customized(
        t.config(),
        vec![source.clone() as Arc<dyn PodSource>],
        |b| b.device_plugin_registry(r),
    );
    assert!(registry.wait_started().await, "the registry listens");
    let handler = registry
        .watcher_handler()
        .await
        .expect("a DevicePlugin handler");
    assert!(
        t.root_dir()
            .join(DEVICE_PLUGIN_DIR)
            .join("DEPRECATION")
            .exists(),
        "Go's DEPRECATION file"
    );
    let dir = plugins_registry_dir(&t.root_dir());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let manager = PluginManager::new(
        dir.clone(),
        [(DEVICE_PLUGIN.to_string(), handler)].into_iter().collect(),
    );
    let watching = tokio::spawn(manager.run(shutdown.clone()));
    // The plugin's socket directory, with the file that tells it to skip the Register call.
    wait_until(Duration::from_secs(30), "plugins_registry", || {
        dir.is_dir().then_some(())
    })
    .await;
    let mut plugin = start_plugin_in(&t.root_dir().join(DEVICE_PLUGIN_DIR), &dir).await;
    wait_counts(
        &k.handle,
        "2",
        "2",
        "the plugin registered through plugins_registry",
    )
    .await;

    let a = t.uid("a");
    source.set(vec![device_pod(&t, "a", &a)]);
    wait_running(&k.handle, &a, Duration::from_secs(60)).await;
    let dev = device_of(&k.handle, &a);
    assert!(sees(&t, &a, &dev).await, "pod a sees /tmp/{dev}");

    let _ = plugin.kill().await;
    wait_counts(&k.handle, "2", "0", "the plugin gone").await;
    source.set(vec![]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !t.sandboxes(&a).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "pod a not removed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    shutdown.cancel();
    let _ = watching.await;
    k.stop().await;
}
