//! Creates the QoS hierarchy and pod cgroups in the host's real cgroup filesystem under a
//! test-specific cgroup root, checks the values written against Go's, and removes it all.
//!
//! Needs root and a writable cgroupfs; skipped (with a message) otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_cm::cgroups::{detect, manager_for, CgroupManager, CgroupMode};
use kubelet_cm::{CgroupName, CmConfig, LinuxContainerManager, ResourceConfig};
use kubelet_core::stats::{PodSampleRequest, Sample, SampleRequest};
use kubelet_core::ContainerManager;

type Pairs<'a> = &'a [(&'a str, &'a str)];

fn list(pairs: Pairs<'_>) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    })
}

fn pod(uid: &str, requests: Pairs<'_>, limits: Pairs<'_>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("cm-test-{uid}")),
            namespace: Some("default".into()),
            uid: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("kubelet-rs.local/busybox:1.0".into()),
                resources: Some(ResourceRequirements {
                    requests: list(requests),
                    limits: list(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Removes the test cgroup root from every hierarchy, also when the test panics.
struct Cleanup {
    mgr: Box<dyn CgroupManager>,
    root: CgroupName,
    children: Vec<Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Err(e) = self.mgr.destroy(&self.root) {
            eprintln!("cleanup of {} failed: {e}", self.root);
        }
    }
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("reading {}/{file}: {e}", dir.display()))
        .trim()
        .to_string()
}

fn can_run() -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: real_cgroups needs root");
        return false;
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        eprintln!("SKIPPED: no /sys/fs/cgroup");
        return false;
    }
    true
}

#[tokio::test]
async fn qos_and_pod_cgroups_on_this_machine() {
    if !can_run() {
        return;
    }
    let mounts = detect(Path::new("/")).unwrap();
    eprintln!("cgroup mode: {:?}", mounts.mode);
    let test_root = format!("/kubelet-rs-cm-test-{}", std::process::id());
    let root_name = CgroupName::from_cgroupfs(&test_root);
    let mut cleanup = Cleanup {
        mgr: manager_for(Path::new("/"), &mounts),
        root: root_name.clone(),
        children: Vec::new(),
    };
    // Go requires the cgroup root to exist already.
    cleanup
        .mgr
        .create(&root_name, &ResourceConfig::default())
        .unwrap();

    let cm = LinuxContainerManager::new(CmConfig {
        cgroup_root: test_root.clone(),
        pod_pids_limit: 1024,
        ..CmConfig::default()
    })
    .unwrap();
    eprintln!("capacity: {:?}", cm.capacity());
    eprintln!("allocatable: {:?}", cm.allocatable());

    // Directory of a cgroup in the hierarchy holding `controller` (v1) or the unified one.
    let dir = |controller: &str, cgroup: &str| -> PathBuf {
        let name = CgroupName::from_cgroupfs(&format!("{test_root}{cgroup}"));
        match mounts.mode {
            CgroupMode::V2 => name.dir_in(mounts.unified.as_ref().unwrap()),
            _ => name.dir_in(&mounts.v1[controller]),
        }
    };
    let v1 = mounts.mode != CgroupMode::V2;
    let cores = i64::from(cm.machine_info().num_cores);

    // The QoS hierarchy.
    if v1 {
        assert_eq!(
            read(&dir("cpu", "/kubepods"), "cpu.shares"),
            (cores * 1024).to_string()
        );
        assert_eq!(
            read(&dir("memory", "/kubepods"), "memory.limit_in_bytes"),
            // memory capacity rounded down to the page size by the kernel
            {
                let cap = cm.machine_info().memory_capacity;
                (cap - cap % 4096).to_string()
            }
        );
        assert_eq!(
            read(&dir("pids", "/kubepods"), "pids.max"),
            cm.machine_info().max_pids.to_string()
        );
        assert_eq!(read(&dir("cpu", "/kubepods/besteffort"), "cpu.shares"), "2");
        assert_eq!(read(&dir("cpu", "/kubepods/burstable"), "cpu.shares"), "2");
        let cpus = read(&dir("cpuset", ""), "cpuset.cpus");
        assert!(!cpus.is_empty());
        assert_eq!(
            read(&dir("cpuset", "/kubepods/burstable"), "cpuset.cpus"),
            cpus
        );
    } else {
        assert_eq!(read(&dir("", "/kubepods/besteffort"), "cpu.weight"), "1");
    }

    // Three pods, one per QoS class.
    let g = pod(
        "guaranteed-1",
        &[("cpu", "500m"), ("memory", "128Mi")],
        &[("cpu", "500m"), ("memory", "128Mi")],
    );
    let b = pod(
        "burstable-1",
        &[("cpu", "250m"), ("memory", "64Mi")],
        &[("cpu", "1"), ("memory", "256Mi")],
    );
    let e = pod("besteffort-1", &[], &[]);

    let pg = cm.ensure_pod_resources(&g).await.unwrap();
    let pb = cm.ensure_pod_resources(&b).await.unwrap();
    let pe = cm.ensure_pod_resources(&e).await.unwrap();
    assert_eq!(
        pg.cgroup_parent.as_deref(),
        Some(format!("{test_root}/kubepods/podguaranteed-1").as_str())
    );
    assert_eq!(
        pb.cgroup_parent.as_deref(),
        Some(format!("{test_root}/kubepods/burstable/podburstable-1").as_str())
    );
    assert_eq!(
        pe.cgroup_parent.as_deref(),
        Some(format!("{test_root}/kubepods/besteffort/podbesteffort-1").as_str())
    );

    let gp = "/kubepods/podguaranteed-1";
    let bp = "/kubepods/burstable/podburstable-1";
    let ep = "/kubepods/besteffort/podbesteffort-1";
    if v1 {
        // Guaranteed: 500m → 512 shares, 50ms quota per 100ms, 128Mi.
        assert_eq!(read(&dir("cpu", gp), "cpu.shares"), "512");
        assert_eq!(read(&dir("cpu", gp), "cpu.cfs_quota_us"), "50000");
        assert_eq!(read(&dir("cpu", gp), "cpu.cfs_period_us"), "100000");
        assert_eq!(
            read(&dir("memory", gp), "memory.limit_in_bytes"),
            "134217728"
        );
        assert_eq!(read(&dir("pids", gp), "pids.max"), "1024");
        // Burstable: 250m → 256 shares, limit 1 cpu → 100ms quota, 256Mi.
        assert_eq!(read(&dir("cpu", bp), "cpu.shares"), "256");
        assert_eq!(read(&dir("cpu", bp), "cpu.cfs_quota_us"), "100000");
        assert_eq!(
            read(&dir("memory", bp), "memory.limit_in_bytes"),
            "268435456"
        );
        assert_eq!(read(&dir("pids", bp), "pids.max"), "1024");
        // The burstable tier follows the burstable pods' requests.
        assert_eq!(
            read(&dir("cpu", "/kubepods/burstable"), "cpu.shares"),
            "256"
        );
        // BestEffort: 2 shares, no quota, no memory limit.
        assert_eq!(read(&dir("cpu", ep), "cpu.shares"), "2");
        assert_eq!(read(&dir("cpu", ep), "cpu.cfs_quota_us"), "-1");
        let unlimited: u64 = read(&dir("memory", ep), "memory.limit_in_bytes")
            .parse()
            .unwrap();
        assert!(
            unlimited > 1 << 60,
            "besteffort memory is unlimited: {unlimited}"
        );
        // Created in every mounted hierarchy.
        for p in cm
            .cgroup_manager()
            .paths(&CgroupName::from_cgroupfs(&format!("{test_root}{gp}")))
        {
            assert!(p.is_dir(), "{} missing", p.display());
        }
    } else {
        assert_eq!(read(&dir("", gp), "cpu.max"), "50000 100000");
        assert_eq!(read(&dir("", gp), "memory.max"), "134217728");
        assert_eq!(read(&dir("", gp), "pids.max"), "1024");
    }

    let mut uids = cm.pods_with_resources().await.unwrap();
    uids.sort();
    assert_eq!(uids, vec!["besteffort-1", "burstable-1", "guaranteed-1"]);

    // A live process in the burstable pod: it waits on stdin until moved into the pod
    // cgroup, then burns a little CPU there and sleeps.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("read x; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec sleep 300")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    cleanup.children.push(child);
    let bname = CgroupName::from_cgroupfs(&format!("{test_root}{bp}"));
    for p in cm.cgroup_manager().paths(&bname) {
        std::fs::write(p.join("cgroup.procs"), pid.to_string()).unwrap();
    }
    assert_eq!(cm.cgroup_manager().pids(&bname).unwrap(), vec![pid]);
    // Usage through the core stats contract, as the summary collector reads it.
    let stats = cm.node_stats().unwrap();
    let b = std::sync::Arc::new(b);
    let sample = |network: bool| {
        let stats = stats.clone();
        let b = b.clone();
        async move {
            stats
                .sample(SampleRequest {
                    pods: vec![PodSampleRequest {
                        pod: b,
                        container_ids: vec![],
                        network,
                    }],
                    network,
                    ..SampleRequest::default()
                })
                .await
                .unwrap()
        }
    };
    let pod_usage = |s: &Sample| s.pods["burstable-1"].usage.unwrap();
    let before = pod_usage(&sample(false).await);
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    // Wait (bounded) for the busy loop to show up as CPU time of the pod cgroup.
    let after = kubelet_core::testing::poll_until(std::time::Duration::from_secs(10), || async {
        let after = pod_usage(&sample(false).await);
        (after.cpu_usage_ns > before.cpu_usage_ns).then_some(after)
    })
    .await
    .unwrap_or(before);
    assert!(
        after.cpu_usage_ns > before.cpu_usage_ns,
        "{before:?} {after:?}"
    );
    assert!(after.nanocores_since(&before).is_some());
    let last = sample(true).await;
    let node = last.node.unwrap();
    // The process shares the test's network namespace: its interfaces are the node's.
    assert_eq!(last.pods["burstable-1"].interfaces, last.node_interfaces);
    assert!(
        node.cpu_usage_ns > 0 && node.memory_working_set_bytes > 0,
        "{node:?}"
    );
    eprintln!("burstable pod usage: {after:?}\nnode usage: {node:?}");

    let err = cm.remove_pod_resources("burstable-1").await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("still holds processes") && msg.contains(&pid.to_string()),
        "{msg}"
    );
    for c in &mut cleanup.children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    cleanup.children.clear();

    // A leftover container cgroup (as runc leaves) is removed with the pod.
    for p in cm.cgroup_manager().paths(&bname) {
        std::fs::create_dir(p.join("leftover-ctr")).unwrap();
    }
    // On a hybrid host runc also creates the container cgroup in the unified hierarchy.
    let unified_leftover = (mounts.mode == CgroupMode::Hybrid)
        .then(|| {
            mounts
                .unified
                .as_ref()
                .map(|u| bname.dir_in(u).join("leftover-ctr"))
        })
        .flatten();
    if let Some(u) = &unified_leftover {
        std::fs::create_dir_all(u).unwrap();
        let mut uids = cm.pods_with_resources().await.unwrap();
        uids.sort();
        assert_eq!(uids, vec!["besteffort-1", "burstable-1", "guaranteed-1"]);
    }
    for uid in ["guaranteed-1", "burstable-1", "besteffort-1"] {
        cm.remove_pod_resources(uid).await.unwrap();
    }
    for cg in [gp, bp, ep] {
        for p in cm
            .cgroup_manager()
            .paths(&CgroupName::from_cgroupfs(&format!("{test_root}{cg}")))
        {
            assert!(!p.exists(), "{} still exists", p.display());
        }
    }
    assert!(cm.pods_with_resources().await.unwrap().is_empty());
    if let Some(u) = &unified_leftover {
        assert!(!u.exists() && !bname.dir_in(mounts.unified.as_ref().unwrap()).exists());
    }
    if v1 {
        assert_eq!(read(&dir("cpu", "/kubepods/burstable"), "cpu.shares"), "2");
    }

    drop(cleanup);
    for p in manager_for(Path::new("/"), &mounts).paths(&root_name) {
        assert!(!p.exists(), "{} still exists after cleanup", p.display());
    }
}
