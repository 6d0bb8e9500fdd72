//! End-to-end check that the pod cgroup this crate hands out as cgroup parent is usable by
//! runc: a container started with `cgroupsPath = <cgroup_parent>/<ctr>` lands inside the pod
//! cgroup (and thus under its limits), and the pod cgroup is removable afterwards.
//!
//! Needs root, `runc` and a static `busybox` (`/bin/busybox`); skipped with a message
//! otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_cm::cgroups::{detect, manager_for, CgroupManager};
use kubelet_cm::{CgroupName, CmConfig, LinuxContainerManager, ResourceConfig};
use kubelet_core::ContainerManager;

fn which(bin: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {bin}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

struct Cleanup {
    mgr: Box<dyn CgroupManager>,
    root: CgroupName,
    container: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("runc")
            .args(["delete", "--force", &self.container])
            .output();
        if let Err(e) = self.mgr.destroy(&self.root) {
            eprintln!("cleanup of {} failed: {e}", self.root);
        }
    }
}

#[tokio::test]
async fn runc_container_runs_inside_the_pod_cgroup() {
    if !rustix::process::geteuid().is_root() || !which("runc") {
        eprintln!("SKIPPED: needs root and runc");
        return;
    }
    let busybox = Path::new("/bin/busybox");
    if !busybox.exists() {
        eprintln!("SKIPPED: needs a static /bin/busybox");
        return;
    }
    let mounts = detect(Path::new("/")).unwrap();
    let test_root = format!("/kubelet-rs-cm-runc-{}", std::process::id());
    let root_name = CgroupName::from_cgroupfs(&test_root);
    let container = format!("kubelet-rs-cm-runc-{}", std::process::id());
    let cleanup = Cleanup {
        mgr: manager_for(Path::new("/"), &mounts),
        root: root_name.clone(),
        container: container.clone(),
    };
    cleanup
        .mgr
        .create(&root_name, &ResourceConfig::default())
        .unwrap();
    let cm = LinuxContainerManager::new(CmConfig {
        cgroup_root: test_root.clone(),
        ..CmConfig::default()
    })
    .unwrap();

    let limits: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity("200m".into())),
        ("memory".to_string(), Quantity("64Mi".into())),
    ]
    .into();
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("runc-pod".into()),
            namespace: Some("default".into()),
            uid: Some("runc-uid-1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(limits.clone()),
                    limits: Some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let parent = cm
        .ensure_pod_resources(&pod)
        .await
        .unwrap()
        .cgroup_parent
        .unwrap();
    assert_eq!(parent, format!("{test_root}/kubepods/podrunc-uid-1"));

    // A minimal bundle: busybox as /bin/sh, runc's default spec, our cgroup path.
    let bundle = tempfile::tempdir().unwrap();
    let rootfs = bundle.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("bin")).unwrap();
    std::fs::copy(busybox, rootfs.join("bin/busybox")).unwrap();
    for applet in ["sh", "cat"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
    }
    for d in ["proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(rootfs.join(d)).unwrap();
    }
    let out = Command::new("runc")
        .args(["spec", "--bundle"])
        .arg(bundle.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "runc spec: {out:?}");
    let spec_path = bundle.path().join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    spec["process"]["terminal"] = serde_json::Value::Bool(false);
    spec["process"]["args"] = serde_json::json!(["/bin/sh", "-c", "cat /proc/self/cgroup"]);
    let cgroups_path = format!("{parent}/ctr-app");
    spec["linux"]["cgroupsPath"] = serde_json::Value::String(cgroups_path.clone());
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();

    let out = Command::new("runc")
        .args(["run", "--bundle"])
        .arg(bundle.path())
        .arg(&container)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "runc stdout:\n{stdout}\nrunc stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "runc run failed: {out:?}");
    // The container's memory cgroup (v1 or unified line) is below the pod cgroup.
    assert!(
        stdout
            .lines()
            .any(|l| l.contains(":memory:") && l.ends_with(&cgroups_path))
            || stdout
                .lines()
                .any(|l| l.starts_with("0::") && l.ends_with(&cgroups_path)),
        "container not in {cgroups_path}: {stdout}"
    );

    let _ = Command::new("runc")
        .args(["delete", "--force", &container])
        .output();
    cm.remove_pod_resources("runc-uid-1").await.unwrap();
    for p in cm
        .cgroup_manager()
        .paths(&CgroupName::from_cgroupfs(&parent))
    {
        assert!(!p.exists(), "{} still exists", p.display());
    }
    drop(cleanup);
}
