//! Issue #37: the device manager of kubelet-rs and of the Go kubelet v1.20.2 with the same
//! device plugin (the tree's `test/images/sample-device-plugin`) and the same static pod.
//!
//! Each kubelet runs standalone on a node environment instance of its own (`devplug`, the
//! runtime emptied between the runs), in a mount namespace where
//! `/var/lib/kubelet/device-plugins` — the Go kubelet's fixed socket directory, where the
//! plugin looks for the kubelet's `DEPRECATION` file — is `<root-dir>/device-plugins`. The
//! plugin starts once the kubelet wrote that file and watches `<root-dir>/plugins_registry`,
//! and serves its socket there (`PLUGIN_SOCK_DIR`, as the upstream e2e runs it): both
//! kubelets take it through their plugin managers. Once the plugin's two devices are in the checkpoint, the static pod asking for one
//! `example.com/resource` is written. Then, for both kubelets:
//! 1. the pod runs and its container sees the device's `/tmp/Dev-N` mount (an exec through
//!    the runtime);
//! 2. the checkpoints are the same document up to the pod's uid and which of the two devices
//!    was taken (Go picks from a set): one entry for the container with one device on NUMA node
//!    0, whose allocation response mounts `/tmp/<device>`, and both devices registered;
//! 3. kubelet-rs started on the Go kubelet's root directory reads its checkpoint (no warning)
//!    and runs the pod with a device.
//!
//! The first two runs are members of the real v1.20.2 control plane (each its own Node,
//! `devplug-go` / `devplug-rs`, with a node client certificate): both Nodes show
//! `example.com/resource` capacity and allocatable 2 while the pod holds a device, and
//! capacity 2, allocatable 0 once the plugin is killed (Go's grace before capacity goes).
//!
//! `#[ignore]`d: it needs the Go kubelet and the sample plugin built from the control plane's
//! tree (`scripts/test.sh` builds both and runs this test).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kubelet_core::devicemanager::{DeviceCheckpoint, CHECKPOINT_FILE, DEVICE_PLUGIN_DIR};
use kubelet_core::testing::poll_until;
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::standalone::{
    go_kubelet_binary, http_get, kubelet_binary, KubeletProcess, NodeInstance, StandaloneLaunch,
};

const INSTANCE: &str = "devplug";
const RESOURCE: &str = "example.com/resource";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dev\n  namespace: default\n\
spec:\n  containers:\n  - name: app\n    image: kubelet-rs.local/busybox:1.0\n    imagePullPolicy: Never\n    \
command: [sh, -c, 'exec sleep 3600']\n    resources:\n      limits: {example.com/resource: '1'}\n";

const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
cgroupDriver: cgroupfs\ncgroupsPerQOS: true\nenforceNodeAllocatable: []\nfailSwapOn: false\n\
evictionHard: {}\nimageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n\
nodeStatusUpdateFrequency: 2s\n\
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}\n\
authorization: {mode: AlwaysAllow}\n";

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

/// What one run saw.
struct Run {
    uid: String,
    checkpoint: DeviceCheckpoint,
    log: String,
    /// In a cluster: the Node's `example.com/resource` (capacity, allocatable) with the
    /// plugin up, then once it is killed.
    node_status: Option<[(String, String); 2]>,
}

/// A member of the control plane: its client and the node's kubeconfig.
struct Member<'a> {
    admin: &'a kube::Client,
    kubeconfig: PathBuf,
}

/// The Node's `example.com/resource` (capacity, allocatable), `"-"` where it has none.
async fn device_status(admin: &kube::Client, node: &str) -> Option<(String, String)> {
    let nodes: kube::Api<Node> = kube::Api::all(admin.clone());
    let n = nodes.get_opt(node).await.ok()??;
    let status = n.status?;
    let get = |l: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        l.as_ref()
            .and_then(|m| m.get(RESOURCE))
            .map_or_else(|| "-".to_string(), |q| q.0.clone())
    };
    Some((get(&status.capacity), get(&status.allocatable)))
}

/// Polls the Node until its device status is `want` (90 s).
async fn wait_device_status(
    admin: &kube::Client,
    node: &str,
    want: (&str, &str),
) -> (String, String) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        last = device_status(admin, node).await;
        if last
            .as_ref()
            .is_some_and(|(c, a)| (c.as_str(), a.as_str()) == want)
        {
            return (want.0.to_string(), want.1.to_string());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("node {node}: {RESOURCE} (capacity, allocatable) is {last:?}, want {want:?}");
}

/// The kubelet and the plugin in a mount namespace of their own (see the module docs); the
/// shell stops both when it is stopped.
fn spawn(binary: &Path, args: &[String], root: &Path, log: &Path) -> KubeletProcess {
    let dir = root.join(DEVICE_PLUGIN_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all("/var/lib/kubelet/device-plugins").unwrap();
    // The plugin starts once this kubelet wrote its DEPRECATION file: one left by the kubelet
    // before on this root (the switch) goes first.
    let _ = std::fs::remove_file(dir.join("DEPRECATION"));
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "mount --bind '{dir}' /var/lib/kubelet/device-plugins || exit 1\n\
         '{kubelet}' {args} & K=$!\n\
         trap 'kill -TERM $K $P 2>/dev/null; wait; exit 0' TERM\n\
         while [ ! -e /var/lib/kubelet/device-plugins/DEPRECATION ] || [ ! -d '{registry}' ]; do sleep 0.2; done\n\
         PLUGIN_SOCK_DIR='{registry}' '{plugin}' >'{plugin_log}' 2>&1 & P=$!\n\
         echo $P > '{plugin_pid}'\n\
         wait $K\n",
        dir = dir.display(),
        kubelet = binary.display(),
        args = quoted.join(" "),
        plugin = plugin_binary().display(),
        registry = root.join("plugins_registry").display(),
        plugin_log = log.with_extension("plugin.log").display(),
        plugin_pid = log.with_extension("plugin.pid").display(),
    );
    let unshare = PathBuf::from("unshare");
    KubeletProcess::spawn(
        &unshare,
        &[
            "--mount".to_string(),
            "--propagation".to_string(),
            "private".to_string(),
            "sh".to_string(),
            "-c".to_string(),
            script,
        ],
        log,
    )
}

/// Runs `binary` on `root` (standalone, or as node `node` of the control plane with
/// `member`) until the pod runs with its device; in a cluster, reads the Node's device
/// status, kills the plugin and reads it again; stops it.
async fn run(
    binary: &Path,
    go: bool,
    instance: &NodeInstance,
    dir: &Path,
    root: &Path,
    node: &str,
    member: Option<&Member<'_>>,
) -> Run {
    let StandaloneLaunch {
        mut args,
        manifests,
        log,
        read_only_port: read_only,
    } = StandaloneLaunch::new(INSTANCE, go, CONFIG, dir, root, &instance.endpoint(), node);
    if let Some(m) = member {
        args.push(format!("--kubeconfig={}", m.kubeconfig.display()));
    }
    // The checkpoint as it was before this kubelet (another's, when switching): the plugin's
    // devices count once this kubelet has written it anew.
    let file = root.join(DEVICE_PLUGIN_DIR).join(CHECKPOINT_FILE);
    let before = std::fs::metadata(&file)
        .ok()
        .and_then(|m| m.modified().ok());
    let kubelet = spawn(binary, &args, root, &log);
    let tail = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let plugin = std::fs::read_to_string(log.with_extension("plugin.log")).unwrap_or_default();
        let kubelet: Vec<&str> = text.lines().rev().take(40).collect();
        format!("{}\nplugin: {plugin}", kubelet.join("\n"))
    };
    // The plugin's devices first (the pod would be rejected without them, and a rejected
    // static pod stays rejected).
    poll_until(Duration::from_secs(60), || async {
        // Written again: newer than before (inode numbers are reused, times are not).
        let modified = std::fs::metadata(&file)
            .ok()
            .and_then(|m| m.modified().ok());
        let rewritten = before.is_none_or(|b| modified.is_some_and(|m| m > b));
        let cp = DeviceCheckpoint::from_json(&std::fs::read(&file).ok()?).ok()?;
        let registered = rewritten && cp.registered.get(RESOURCE)?.len() == 2;
        if !registered {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        registered.then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the plugin's devices are not in {}: {}",
            file.display(),
            tail()
        )
    });
    std::fs::write(manifests.join("dev.yaml"), POD).unwrap();
    let pods_url = format!("http://127.0.0.1:{read_only}/pods");
    let uid = poll_until(Duration::from_secs(120), || async {
        let v: serde_json::Value = serde_json::from_str(&http_get(&pods_url).await?).ok()?;
        let p = v["items"]
            .as_array()?
            .iter()
            .find(|p| p["status"]["phase"] == "Running")?;
        p["metadata"]["uid"].as_str().map(str::to_string)
    })
    .await
    .unwrap_or_else(|| panic!("the pod did not run: {}", tail()));
    let checkpoint = poll_until(Duration::from_secs(30), || async {
        let cp = DeviceCheckpoint::from_json(&std::fs::read(&file).ok()?).ok()?;
        let held = cp.entries.iter().any(|e| e.pod_uid == uid);
        if !held {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        held.then_some(cp)
    })
    .await
    .unwrap_or_else(|| panic!("no checkpoint entry for the pod: {}", tail()));
    // The container sees the device's mount (checked in the runtime: the pod log directory
    // is the machine's shared /var/log/pods, which other kubelets clean up).
    let held = checkpoint
        .entries
        .iter()
        .find(|e| e.pod_uid == uid)
        .and_then(|e| e.devices.values().flatten().next().cloned())
        .unwrap_or_default();
    let sees = poll_until(Duration::from_secs(30), || async {
        let seen = container_sees(instance, &uid, &held).await;
        if !seen {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        seen.then_some(())
    })
    .await
    .is_some();
    assert!(sees, "the container does not see /tmp/{held}: {}", tail());
    let node_status = match member {
        None => None,
        Some(m) => {
            let up = wait_device_status(m.admin, node, ("2", "2")).await;
            let pid = std::fs::read_to_string(log.with_extension("plugin.pid")).unwrap();
            let _ = std::process::Command::new("kill").arg(pid.trim()).status();
            let down = wait_device_status(m.admin, node, ("2", "0")).await;
            Some([up, down])
        }
    };
    drop(kubelet);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    Run {
        uid,
        checkpoint,
        log: text,
        node_status,
    }
}

/// Whether the pod's running container (in the instance's runtime) sees `/tmp/<device>`.
async fn container_sees(instance: &NodeInstance, uid: &str, device: &str) -> bool {
    use kubelet_core::runtime::{ContainerRuntime, ContainerState};
    let Ok(rt) = kubelet_runtime_cri::CriRuntime::connect(kubelet_runtime_cri::CriConfig {
        runtime_endpoint: instance.endpoint(),
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    })
    .await
    else {
        return false;
    };
    let Ok(containers) = rt
        .list_containers(&kubelet_core::runtime::ListFilter::default())
        .await
    else {
        return false;
    };
    let Some(c) = containers
        .iter()
        .find(|c| c.pod.uid == uid && c.state == ContainerState::Running)
    else {
        return false;
    };
    let cmd = ["test", "-e", &format!("/tmp/{device}")].map(String::from);
    rt.exec_sync(&c.id, &cmd, Duration::from_secs(10))
        .await
        .is_ok_and(|o| o.exit_code == 0)
}

/// The run's checkpoint entry: the device taken and the mounts of its allocation.
fn entry(run: &Run) -> (String, i64, Vec<(String, String)>) {
    let cp = &run.checkpoint;
    let e: Vec<_> = cp.entries.iter().filter(|e| e.pod_uid == run.uid).collect();
    assert_eq!(e.len(), 1, "{cp:?}");
    let e = e[0];
    assert_eq!(
        (e.container.as_str(), e.resource.as_str()),
        ("app", RESOURCE)
    );
    assert_eq!(e.devices.len(), 1, "{e:?}");
    let (node, ids) = e.devices.iter().next().unwrap();
    assert_eq!(ids.len(), 1, "{e:?}");
    let mounts = e
        .response
        .as_ref()
        .expect("the allocation response decodes")
        .mounts
        .iter()
        .map(|m| (m.container_path.clone(), m.host_path.clone()))
        .collect();
    (ids[0].clone(), *node, mounts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Go kubelet v1.20.2, the sample device plugin and the control plane (scripts/test.sh builds and starts them and runs this test)"]
async fn the_device_checkpoint_mounts_and_node_status_are_the_go_kubelets() {
    let (go_binary, rs_binary) = (go_kubelet_binary(), kubelet_binary());
    let cp = ControlPlane::ensure().await.expect("the control plane");
    let admin = cp.admin_client().await.unwrap();
    let nodes: kube::Api<Node> = kube::Api::all(admin.clone());
    let (go_name, rs_name) = ("devplug-go", "devplug-rs");
    for n in [go_name, rs_name] {
        let _ = nodes.delete(n, &Default::default()).await;
    }
    let member = |node: &str| {
        let cp = &cp;
        let admin = &admin;
        let node = node.to_string();
        async move {
            Member {
                admin,
                kubeconfig: cp.node_kubeconfig(&node).await.unwrap(),
            }
        }
    };
    let (go_member, rs_member) = (member(go_name).await, member(rs_name).await);
    let instance = NodeInstance::up(INSTANCE);
    let tmp = tempfile::tempdir().unwrap();
    let (go_root, rs_root) = (tmp.path().join("go-root"), tmp.path().join("rs-root"));

    let go = run(
        &go_binary,
        true,
        &instance,
        &tmp.path().join("go"),
        &go_root,
        go_name,
        Some(&go_member),
    )
    .await;
    instance.node_env(&["down"]);
    instance.node_env(&["up"]);
    let rs = run(
        &rs_binary,
        false,
        &instance,
        &tmp.path().join("rs"),
        &rs_root,
        rs_name,
        Some(&rs_member),
    )
    .await;
    eprintln!(
        "Node {RESOURCE} (capacity, allocatable), plugin up then killed: the Go kubelet {:?}, kubelet-rs {:?}",
        go.node_status, rs.node_status
    );
    assert_eq!(rs.node_status, go.node_status);
    for n in [go_name, rs_name] {
        let _ = nodes.delete(n, &Default::default()).await;
    }

    let (go_dev, go_node, go_mounts) = entry(&go);
    let (rs_dev, rs_node, rs_mounts) = entry(&rs);
    eprintln!("the Go kubelet: {go_dev} on NUMA node {go_node}, mounts {go_mounts:?}");
    eprintln!("kubelet-rs: {rs_dev} on NUMA node {rs_node}, mounts {rs_mounts:?}");
    assert_eq!(go_node, 0, "Go records a device without topology on node 0");
    assert_eq!(rs_node, go_node);
    for (dev, mounts) in [(&go_dev, &go_mounts), (&rs_dev, &rs_mounts)] {
        let path = format!("/tmp/{dev}");
        assert_eq!(mounts, &vec![(path.clone(), path)]);
    }
    let devices = |r: &Run| {
        let mut d = r.checkpoint.registered[RESOURCE].clone();
        d.sort();
        d
    };
    assert_eq!(devices(&go), vec!["Dev-1", "Dev-2"]);
    assert_eq!(devices(&rs), devices(&go));

    // kubelet-rs on the Go kubelet's root directory: Go's checkpoint is read as it is.
    instance.node_env(&["down"]);
    instance.node_env(&["up"]);
    let switched = run(
        &rs_binary,
        false,
        &instance,
        &tmp.path().join("switch"),
        &go_root,
        go_name,
        None,
    )
    .await;
    assert!(
        !switched.log.contains("continuing without the checkpoint"),
        "kubelet-rs read the Go kubelet's checkpoint"
    );
    let (dev, _, mounts) = entry(&switched);
    assert_eq!(mounts, vec![(format!("/tmp/{dev}"), format!("/tmp/{dev}"))]);
}
