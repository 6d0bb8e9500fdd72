//! Issue #36: kubelet-rs and the Go kubelet v1.20.2 with the same CSI driver (the project's
//! `kubelet-rs-csi-test-driver`, a separate process) and the same pod.
//!
//! Each kubelet runs as a Node of the real control plane (`csi-go`, `csi-rs`) on a node
//! environment instance of its own (`csicmp`, the runtime emptied between the runs), with
//! the driver's registrar in its `<root-dir>/plugins_registry`. For each kubelet: the driver
//! registers (the Node's `CSINode` entry), a pod with a claim bound to a CSI PersistentVolume
//! of the driver (`attachRequired: false`, `podInfoOnMount: true`) and an inline volume of it
//! runs and writes to both, then is deleted. Then:
//! 1. the driver saw the same calls from both kubelets, for each volume in the same order
//!    (stage, publish, unpublish, unstage; Go sets a pod's volumes up concurrently, so the
//!    order across volumes varies), with the same fields: staging and target paths (the
//!    root directory, the pod's uid, the PV's name and the inline handle's hash put aside),
//!    read-only flag, access mode, fs type, mount flags, publish context and volume context;
//! 2. both kubelets wrote the same `vol_data.json` files while the pod ran;
//! 3. both `CSINode` entries name the driver with the node's ID, topology key and limit.
//!
//! `#[ignore]`d: it needs the Go kubelet built from the control plane's tree
//! (`scripts/test.sh` builds it and runs this test).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, CSIVolumeSource, Container, Node, PersistentVolume,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec, Pod, PodSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec, CSINode, CSINodeDriver};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use kubelet_core::testing::poll_until;
use kubelet_tests::cluster::ControlPlane;
use kubelet_tests::standalone::{
    go_kubelet_binary, kubelet_binary, KubeletProcess, NodeInstance, StandaloneLaunch,
};

const INSTANCE: &str = "csicmp";
const DRIVER: &str = "cmp.csi.kubelet-rs.test";
const NAMESPACE: &str = "default";

const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
cgroupDriver: cgroupfs\ncgroupsPerQOS: true\nenforceNodeAllocatable: []\nfailSwapOn: false\n\
evictionHard: {}\nimageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n\
nodeStatusUpdateFrequency: 2s\n\
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}\n\
authorization: {mode: AlwaysAllow}\n";

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(str::to_string),
        ..Default::default()
    }
}

/// The PV, claim and pod of one run (`tag`: `go` or `rs`).
fn objects(tag: &str, node: &str) -> (PersistentVolume, PersistentVolumeClaim, Pod) {
    let pv = PersistentVolume {
        metadata: meta(&format!("csi-cmp-{tag}"), None),
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(format!("csi-cmp-{tag}")),
            mount_options: Some(vec!["noatime".into()]),
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: format!("handle-{tag}"),
                fs_type: Some("ext4".into()),
                volume_attributes: Some(BTreeMap::from([("color".into(), "blue".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let claim = PersistentVolumeClaim {
        metadata: meta(&format!("csi-cmp-{tag}"), Some(NAMESPACE)),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(format!("csi-cmp-{tag}")),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity("1Gi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = Pod {
        metadata: meta(&format!("csi-cmp-{tag}"), Some(NAMESPACE)),
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            automount_service_account_token: Some(false),
            termination_grace_period_seconds: Some(1),
            containers: vec![Container {
                name: "app".into(),
                image: Some("kubelet-rs.local/busybox:1.0".into()),
                image_pull_policy: Some("Never".into()),
                command: Some(vec![
                    "sh".into(),
                    "-c".into(),
                    "echo p > /data/f; echo i > /scratch/f; exec sleep 3600".into(),
                ]),
                volume_mounts: Some(vec![
                    VolumeMount {
                        name: "data".into(),
                        mount_path: "/data".into(),
                        ..Default::default()
                    },
                    VolumeMount {
                        name: "scratch".into(),
                        mount_path: "/scratch".into(),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "data".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: format!("csi-cmp-{tag}"),
                        read_only: None,
                    }),
                    ..Default::default()
                },
                Volume {
                    name: "scratch".into(),
                    csi: Some(CSIVolumeSource {
                        driver: DRIVER.into(),
                        volume_attributes: Some(BTreeMap::from([("size".into(), "1Mi".into())])),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    (pv, claim, pod)
}

/// What one run saw.
struct Run {
    /// The driver's calls, normalized (see the module docs).
    calls: Vec<serde_json::Value>,
    /// The `vol_data.json` files under the root directory (relative path → content),
    /// normalized.
    vol_data: BTreeMap<String, serde_json::Value>,
    /// The node's CSINode entry of the driver.
    csinode: CSINodeDriver,
}

/// `text` with this run's specifics replaced by placeholders.
fn normalize(text: &str, root: &Path, uid: &str, tag: &str, node: &str) -> String {
    let mut s = text
        .replace(&root.display().to_string(), "<root>")
        .replace(uid, "<uid>")
        .replace(&format!("csi-cmp-{tag}"), "<name>")
        .replace(&format!("handle-{tag}"), "<handle>")
        .replace(node, "<node>");
    // Hashes (the inline volume's handle, attachment names): `csi-` and 64 hex digits.
    let mut from = 0;
    while let Some(i) = s[from..].find("csi-").map(|i| from + i) {
        let hex = &s[i + 4..];
        let n = hex.chars().take_while(char::is_ascii_hexdigit).count();
        if n == 64 {
            s.replace_range(i + 4..i + 4 + 64, "<sha256>");
        }
        from = i + 4;
    }
    s
}

fn read_calls(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn vol_data(root: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && !kubelet_core::mount::is_mount_point(&p).unwrap_or(true) {
                pending.push(p);
            } else if t.is_file() && e.file_name() == "vol_data.json" {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn run(
    binary: &Path,
    go: bool,
    instance: &NodeInstance,
    dir: &Path,
    node: &str,
    kubeconfig: &Path,
    admin: &kube::Client,
) -> Run {
    let tag = if go { "go" } else { "rs" };
    let root = dir.join("root");
    let StandaloneLaunch { mut args, log, .. } =
        StandaloneLaunch::new(INSTANCE, go, CONFIG, dir, &root, &instance.endpoint(), node);
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    let kubelet = KubeletProcess::spawn(binary, &args, &log);
    let calls_file = dir.join("calls.jsonl");
    let driver_log = dir.join("driver.log");
    let registry = root.join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let driver = KubeletProcess::spawn(
        Path::new(env!("CARGO_BIN_EXE_kubelet-rs-csi-test-driver")),
        &[
            "--name".into(),
            DRIVER.into(),
            "--endpoint".into(),
            root.join("plugins")
                .join(DRIVER)
                .join("csi.sock")
                .display()
                .to_string(),
            "--registration-dir".into(),
            registry.display().to_string(),
            "--node-id".into(),
            format!("id-{node}"),
            "--data-dir".into(),
            dir.join("data").display().to_string(),
            "--calls".into(),
            calls_file.display().to_string(),
        ],
        &driver_log,
    );
    let tail = || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(30).collect();
        format!(
            "{}\ndriver: {}",
            lines.join("\n"),
            std::fs::read_to_string(&driver_log).unwrap_or_default()
        )
    };
    let csinodes: Api<CSINode> = Api::all(admin.clone());
    let csinode = poll_until(Duration::from_secs(120), || async {
        let c = csinodes.get_opt(node).await.ok()??;
        let d = c.spec.drivers.into_iter().find(|d| d.name == DRIVER);
        if d.is_none() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        d
    })
    .await
    .unwrap_or_else(|| panic!("{node}: the driver is not on CSINode: {}", tail()));

    let (pv, claim, pod) = objects(tag, node);
    let pp = PostParams::default();
    Api::<PersistentVolume>::all(admin.clone())
        .create(&pp, &pv)
        .await
        .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), NAMESPACE);
    claims.create(&pp, &claim).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    pods.create(&pp, &pod).await.unwrap();
    let name = format!("csi-cmp-{tag}");
    let uid = poll_until(Duration::from_secs(120), || async {
        let p = pods.get(&name).await.ok()?;
        let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
        if !running {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        running.then(|| p.metadata.uid.clone()).flatten()
    })
    .await
    .unwrap_or_else(|| panic!("{node}: the pod did not run: {}", tail()));
    // Both writes landed in the driver's volumes.
    poll_until(Duration::from_secs(30), || async {
        let n = std::fs::read_dir(dir.join("data"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("f").exists())
            .count();
        if n < 2 {
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        (n == 2).then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{node}: the pod's writes are not in the driver's volumes: {}",
            tail()
        )
    });
    let vol_data = vol_data(&root)
        .into_iter()
        .map(|(p, text)| {
            let rel = normalize(&p.display().to_string(), &root, &uid, tag, node);
            let v = serde_json::from_str(&normalize(&text, &root, &uid, tag, node)).unwrap();
            (rel, v)
        })
        .collect();
    pods.delete(&name, &DeleteParams::default()).await.unwrap();
    poll_until(Duration::from_secs(120), || async {
        let c = read_calls(&calls_file);
        let done = c.iter().any(|l| l.contains("NodeUnstageVolume"))
            && c.iter()
                .filter(|l| l.contains("NodeUnpublishVolume"))
                .count()
                >= 2;
        if !done {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        done.then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{node}: the volumes were not torn down: {}", tail()));
    let _ = pods.get_opt(&name).await;
    let _ = claims.delete(&name, &DeleteParams::default()).await;
    let _ = Api::<PersistentVolume>::all(admin.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    drop(driver);
    drop(kubelet);
    let calls = read_calls(&calls_file)
        .iter()
        .filter(|l| !l.contains("NodeGetInfo"))
        .map(|l| serde_json::from_str(&normalize(l, &root, &uid, tag, node)).unwrap())
        .collect();
    let mut csinode = csinode;
    csinode.node_id = normalize(&csinode.node_id, &root, &uid, tag, node);
    Run {
        calls,
        vol_data,
        csinode,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Go kubelet v1.20.2 and the control plane (scripts/test.sh builds and starts them and runs this test)"]
async fn the_csi_calls_paths_and_records_are_the_go_kubelets() {
    let (go_binary, rs_binary) = (go_kubelet_binary(), kubelet_binary());
    let cp = ControlPlane::ensure().await.expect("the control plane");
    let admin = cp.admin_client().await.unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    let (go_name, rs_name) = ("csi-go", "csi-rs");
    for n in [go_name, rs_name] {
        let _ = nodes.delete(n, &Default::default()).await;
        let _ = Api::<CSINode>::all(admin.clone())
            .delete(n, &Default::default())
            .await;
    }
    let csidrivers: Api<CSIDriver> = Api::all(admin.clone());
    let _ = csidrivers.delete(DRIVER, &Default::default()).await;
    csidrivers
        .create(
            &PostParams::default(),
            &CSIDriver {
                metadata: meta(DRIVER, None),
                spec: CSIDriverSpec {
                    attach_required: Some(false),
                    pod_info_on_mount: Some(true),
                    volume_lifecycle_modes: Some(vec!["Persistent".into(), "Ephemeral".into()]),
                    ..Default::default()
                },
            },
        )
        .await
        .unwrap();
    let instance = NodeInstance::up(INSTANCE);
    let tmp = tempfile::tempdir().unwrap();
    let go_kc = cp.node_kubeconfig(go_name).await.unwrap();
    let rs_kc = cp.node_kubeconfig(rs_name).await.unwrap();
    let go = run(
        &go_binary,
        true,
        &instance,
        &tmp.path().join("go"),
        go_name,
        &go_kc,
        &admin,
    )
    .await;
    instance.node_env(&["down"]);
    instance.node_env(&["up"]);
    let rs = run(
        &rs_binary,
        false,
        &instance,
        &tmp.path().join("rs"),
        rs_name,
        &rs_kc,
        &admin,
    )
    .await;
    for n in [go_name, rs_name] {
        let _ = nodes.delete(n, &Default::default()).await;
        let _ = Api::<CSINode>::all(admin.clone())
            .delete(n, &Default::default())
            .await;
    }
    let _ = csidrivers.delete(DRIVER, &Default::default()).await;

    let show = |r: &Run| {
        r.calls
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    eprintln!(
        "the Go kubelet's calls:\n{}\nkubelet-rs's calls:\n{}",
        show(&go),
        show(&rs)
    );
    let sorted = |r: &Run| {
        let mut v: Vec<String> = r.calls.iter().map(|c| c.to_string()).collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(sorted(&rs), sorted(&go), "the same distinct calls");
    // Per volume (Go sets a pod's volumes up concurrently: the order across volumes varies).
    let kinds = |r: &Run| {
        let mut per_volume: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in &r.calls {
            let v = per_volume.entry(c["volume"].to_string()).or_default();
            let m = c["method"].to_string();
            if v.last() != Some(&m) {
                v.push(m);
            }
        }
        per_volume
    };
    assert_eq!(kinds(&rs), kinds(&go), "the same order of calls per volume");
    eprintln!(
        "vol_data.json: Go {:?}\nkubelet-rs {:?}",
        go.vol_data, rs.vol_data
    );
    assert_eq!(rs.vol_data, go.vol_data);
    assert_eq!(rs.csinode, go.csinode);
}
