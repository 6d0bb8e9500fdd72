//! The device manager with the upstream sample device plugin (the v1.20.2 tree's
//! `test/images/sample-device-plugin`, built by `scripts/node-e2e.sh sample-device-plugin`)
//! and real containerd: the plugin registers on the kubelet's socket, the node gets
//! `example.com/resource: 2`, a pod asking for one gets its `/tmp/Dev-N` mount, keeps it
//! across a container restart and a kubelet restart, a second pod gets the other device, a
//! third is rejected, and the plugin going away drops allocatable to 0 while capacity stays
//! and the pods keep running. The checkpoint is Go's format.
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
/// once the kubelet listens there.
async fn start_plugin(dir: &Path) -> tokio::process::Child {
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
        .env("PLUGIN_SOCK_DIR", "/var/lib/kubelet/device-plugins")
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
