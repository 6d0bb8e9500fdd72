//! Tests of `manager`.

use super::*;
use crate::cgroups::tests::{HYBRID_MOUNTINFO, V2_MOUNTINFO};
use crate::helpers::tests::pod;
use crate::machine::tests::{fixture_machine, write};
use std::path::Path;

fn hybrid_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture_machine(dir.path());
    write(dir.path(), "/proc/self/mountinfo", HYBRID_MOUNTINFO);
    for c in [
        "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "unified",
    ] {
        std::fs::create_dir_all(dir.path().join("sys/fs/cgroup").join(c)).unwrap();
    }
    write(dir.path(), "/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3");
    write(dir.path(), "/sys/fs/cgroup/cpuset/cpuset.mems", "0");
    dir
}

/// A cgroup v2 host tree with every controller the kubelet wants.
fn v2_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture_machine(dir.path());
    write(dir.path(), "/proc/self/mountinfo", V2_MOUNTINFO);
    write(
        dir.path(),
        "/sys/fs/cgroup/cgroup.controllers",
        "cpuset cpu io memory pids",
    );
    dir
}

fn config(root: &Path) -> CmConfig {
    CmConfig {
        root: root.to_path_buf(),
        root_dir: root.to_path_buf(),
        ..CmConfig::default()
    }
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join("sys/fs/cgroup").join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .trim()
        .to_string()
}

#[test]
fn defaults_match_go() {
    let c = CmConfig::default();
    assert_eq!(c.cgroup_root, "/");
    assert!(c.cgroups_per_qos && c.fail_swap_on && c.cpu_cfs_quota);
    assert_eq!(c.cpu_cfs_quota_period, Duration::from_millis(100));
    assert_eq!(c.pod_pids_limit, -1);
    assert_eq!(c.max_pods, 110);
    assert_eq!(c.eviction_hard.len(), 4);
    assert_eq!(c.enforce_node_allocatable, vec!["pods".to_string()]);
}

#[test]
fn config_errors() {
    let dir = hybrid_fixture();
    let cases: Vec<(CmConfig, &str)> = vec![
        (
            CmConfig {
                cgroup_driver: "systemd".into(),
                ..config(dir.path())
            },
            "needs systemd as the host's init system: ",
        ),
        (
            CmConfig {
                cgroup_root: "/does-not-exist".into(),
                ..config(dir.path())
            },
            "/does-not-exist",
        ),
        (
            CmConfig {
                kube_reserved: [("memory".to_string(), "lots".to_string())].into(),
                ..config(dir.path())
            },
            "kubeReserved[memory]",
        ),
        (
            CmConfig {
                enforce_node_allocatable: vec!["system-reserved".into()],
                ..config(dir.path())
            },
            "system-reserved",
        ),
    ];
    for (cfg, needle) in cases {
        let err = LinuxContainerManager::new(cfg).unwrap_err().to_string();
        assert!(err.contains(needle), "{err} should contain {needle}");
    }
}

#[test]
fn swap_on_refuses_to_start_unless_allowed() {
    let dir = hybrid_fixture();
    write(
        dir.path(),
        "/proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1024 0 -2\n",
    );
    let err = LinuxContainerManager::new(config(dir.path())).unwrap_err();
    assert!(matches!(err, Error::SwapOn { .. }), "{err}");
    LinuxContainerManager::new(CmConfig {
        fail_swap_on: false,
        ..config(dir.path())
    })
    .unwrap();
}

#[tokio::test]
async fn qos_hierarchy_and_pods_on_hybrid_fixture() {
    let dir = hybrid_fixture();
    let cm = LinuxContainerManager::new(CmConfig {
        kube_reserved: [("memory".to_string(), "1Gi".to_string())].into(),
        pod_pids_limit: 1024,
        ..config(dir.path())
    })
    .unwrap();
    let r = dir.path();
    // kubepods: shares from 4 cpus, memory = capacity − kubeReserved (no eviction).
    assert_eq!(read(r, "cpu/kubepods/cpu.shares"), "4096");
    assert_eq!(
        read(r, "memory/kubepods/memory.limit_in_bytes"),
        (24_684_084i64 * 1024 - (1 << 30)).to_string()
    );
    assert_eq!(read(r, "pids/kubepods/pids.max"), "32768");
    assert_eq!(read(r, "cpu/kubepods/besteffort/cpu.shares"), "2");
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "2");
    assert_eq!(read(r, "cpuset/kubepods/burstable/cpuset.cpus"), "0-3");
    assert!(
        !r.join("sys/fs/cgroup/unified/kubepods").exists(),
        "hybrid uses v1 only"
    );

    let alloc = cm.allocatable();
    assert_eq!(alloc["cpu"].0, "4");
    assert_eq!(alloc["pods"].0, "110");
    // 24684084Ki − 1Gi − 100Mi − 16 × 2Mi hugepages
    assert_eq!(
        alloc["memory"].0,
        format!("{}Ki", 24_684_084 - 1_048_576 - 102_400 - 32_768)
    );
    assert_eq!(cm.capacity()["memory"].0, "24684084Ki");
    assert_eq!(cm.capacity()["hugepages-2Mi"].0, "32Mi");

    let full: &[(&str, &str)] = &[("cpu", "500m"), ("memory", "128Mi")];
    let g = pod("gggg", &[(full, full)]);
    let b1 = pod("bbb1", &[(&[("cpu", "250m")], &[("cpu", "1")])]);
    let b2 = pod("bbb2", &[(&[("cpu", "750m"), ("memory", "64Mi")], &[])]);
    let e = pod("eeee", &[(&[], &[])]);

    let res = cm.ensure_pod_resources(&g).await.unwrap();
    assert_eq!(res.cgroup_parent.as_deref(), Some("/kubepods/podgggg"));
    assert_eq!(read(r, "cpu/kubepods/podgggg/cpu.shares"), "512");
    assert_eq!(read(r, "cpu/kubepods/podgggg/cpu.cfs_quota_us"), "50000");
    assert_eq!(read(r, "pids/kubepods/podgggg/pids.max"), "1024");
    assert_eq!(
        cm.ensure_pod_resources(&b1)
            .await
            .unwrap()
            .cgroup_parent
            .as_deref(),
        Some("/kubepods/burstable/podbbb1")
    );
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "256");
    cm.ensure_pod_resources(&b2).await.unwrap();
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "1024");
    assert_eq!(
        cm.ensure_pod_resources(&e)
            .await
            .unwrap()
            .cgroup_parent
            .as_deref(),
        Some("/kubepods/besteffort/podeeee")
    );
    // Idempotent.
    cm.ensure_pod_resources(&e).await.unwrap();

    assert_eq!(
        cm.pods_with_resources().await.unwrap(),
        vec!["bbb1", "bbb2", "eeee", "gggg"]
    );
    cm.remove_pod_resources("bbb2").await.unwrap();
    assert_eq!(read(r, "cpu/kubepods/burstable/cpu.shares"), "256");
    assert!(!r
        .join("sys/fs/cgroup/memory/kubepods/burstable/podbbb2")
        .exists());
    cm.remove_pod_resources("bbb2").await.unwrap();
    cm.remove_pod_resources("gggg").await.unwrap();
    assert_eq!(
        cm.pods_with_resources().await.unwrap(),
        vec!["bbb1", "eeee"]
    );
}

#[tokio::test]
async fn v2_fixture_and_custom_root() {
    let dir = v2_fixture();
    std::fs::create_dir_all(dir.path().join("sys/fs/cgroup/custom")).unwrap();
    let cm = LinuxContainerManager::new(CmConfig {
        cgroup_root: "/custom".into(),
        cpu_cfs_quota: false,
        ..config(dir.path())
    })
    .unwrap();
    let r = dir.path();
    assert_eq!(read(r, "custom/kubepods/cpu.weight"), "157");
    let full: &[(&str, &str)] = &[("cpu", "1"), ("memory", "1Gi")];
    let g = pod("g2", &[(full, full)]);
    let res = cm.ensure_pod_resources(&g).await.unwrap();
    assert_eq!(res.cgroup_parent.as_deref(), Some("/custom/kubepods/podg2"));
    assert_eq!(
        cm.container_cgroup(&g, "c1").as_deref(),
        Some("/custom/kubepods/podg2/c1")
    );
    assert_eq!(read(r, "custom/kubepods/podg2/cpu.max"), "max 100000");
    assert_eq!(read(r, "custom/kubepods/podg2/memory.max"), "1073741824");
    assert_eq!(read(r, "custom/kubepods/besteffort/cpu.weight"), "1");
    cm.remove_pod_resources("g2").await.unwrap();
    assert!(cm.pods_with_resources().await.unwrap().is_empty());
}

#[tokio::test]
async fn systemd_driver_on_v2_fixture() {
    use crate::cgroups::systemd::tests::{Call, FakeSystemd};
    let dir = v2_fixture();
    let bus = FakeSystemd::new(&dir.path().join("sys/fs/cgroup"));
    let cm =
        LinuxContainerManager::with_systemd_bus(config(dir.path()), Box::new(bus.clone())).unwrap();
    let r = dir.path();
    let started: Vec<String> = bus
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Start(unit, _) => Some(unit),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [
            "kubepods.slice",
            "kubepods-burstable.slice",
            "kubepods-besteffort.slice"
        ]
    );
    assert_eq!(read(r, "kubepods.slice/cpu.weight"), "157");
    assert_eq!(
        read(r, "kubepods.slice/kubepods-besteffort.slice/cpu.weight"),
        "1"
    );

    let full: &[(&str, &str)] = &[("cpu", "1"), ("memory", "1Gi")];
    let g = pod("g-1", &[(full, full)]);
    let b = pod("b-2", &[(&[("cpu", "250m")], &[])]);
    let res = cm.ensure_pod_resources(&g).await.unwrap();
    assert_eq!(
        res.cgroup_parent.as_deref(),
        Some("/kubepods.slice/kubepods-podg_1.slice")
    );
    assert_eq!(
        read(r, "kubepods.slice/kubepods-podg_1.slice/memory.max"),
        "1073741824"
    );
    let res = cm.ensure_pod_resources(&b).await.unwrap();
    assert_eq!(
        res.cgroup_parent.as_deref(),
        Some("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_2.slice")
    );
    assert_eq!(cm.pod_cgroup_parent(&b), res.cgroup_parent);
    // cAdvisor's `id` of a container: containerd's scope in the pod slice (CRI-O's when
    // that is the one there).
    let slice = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_2.slice";
    assert_eq!(
        cm.container_cgroup(&b, "c1").as_deref(),
        Some(format!("/{slice}/cri-containerd-c1.scope").as_str())
    );
    std::fs::create_dir_all(r.join(format!("sys/fs/cgroup/{slice}/crio-c2.scope"))).unwrap();
    assert_eq!(
        cm.container_cgroup(&b, "c2").as_deref(),
        Some(format!("/{slice}/crio-c2.scope").as_str())
    );
    assert_eq!(cm.container_cgroup(&b, "../c3"), None);
    assert_eq!(cm.pods_with_resources().await.unwrap(), vec!["b-2", "g-1"]);
    cm.remove_pod_resources("g-1").await.unwrap();
    assert!(bus
        .calls()
        .contains(&Call::Stop("kubepods-podg_1.slice".into())));
    assert!(!r
        .join("sys/fs/cgroup/kubepods.slice/kubepods-podg_1.slice")
        .exists());
    assert_eq!(cm.pods_with_resources().await.unwrap(), vec!["b-2"]);
}

#[tokio::test]
async fn no_cgroups_per_qos() {
    let dir = hybrid_fixture();
    let cm = LinuxContainerManager::new(CmConfig {
        cgroups_per_qos: false,
        ..config(dir.path())
    })
    .unwrap();
    let res = cm
        .ensure_pod_resources(&pod("x", &[(&[], &[])]))
        .await
        .unwrap();
    assert_eq!(res.cgroup_parent, None);
    assert!(!dir.path().join("sys/fs/cgroup/cpu/kubepods").exists());
    assert!(cm.pods_with_resources().await.unwrap().is_empty());
}

#[test]
fn reserved_cgroups_get_their_reservations_as_limits() {
    // The node e2e "Node Container Manager" configuration: pods, system-reserved and
    // kube-reserved enforced on cgroups the operator made.
    let dir = hybrid_fixture();
    let r = dir.path();
    for c in ["cpu", "memory", "pids", "cpuset", "cpuacct"] {
        for g in ["system-reserved", "kube-reserved"] {
            std::fs::create_dir_all(r.join("sys/fs/cgroup").join(c).join(g)).unwrap();
        }
    }
    let reserved = |cpu: &str, mem: &str, pid: &str| -> BTreeMap<String, String> {
        [("cpu", cpu), ("memory", mem), ("pid", pid)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let cfg = CmConfig {
        enforce_node_allocatable: vec![
            "pods".into(),
            "kube-reserved".into(),
            "system-reserved".into(),
        ],
        system_reserved: reserved("100m", "100Mi", "1000"),
        kube_reserved: reserved("200m", "50Mi", "738"),
        system_reserved_cgroup: "/system-reserved".into(),
        kube_reserved_cgroup: "/kube-reserved".into(),
        ..config(r)
    };
    LinuxContainerManager::new(cfg.clone()).unwrap();
    assert_eq!(read(r, "cpu/system-reserved/cpu.shares"), "102");
    assert_eq!(
        read(r, "memory/system-reserved/memory.limit_in_bytes"),
        (100u64 << 20).to_string()
    );
    assert_eq!(read(r, "pids/system-reserved/pids.max"), "1000");
    assert_eq!(read(r, "cpu/kube-reserved/cpu.shares"), "204");
    assert_eq!(
        read(r, "memory/kube-reserved/memory.limit_in_bytes"),
        (50u64 << 20).to_string()
    );
    assert_eq!(read(r, "pids/kube-reserved/pids.max"), "738");

    // A reserved cgroup that is not there: the start fails, in Go's words.
    let err = LinuxContainerManager::new(CmConfig {
        system_reserved_cgroup: "/missing".into(),
        ..cfg.clone()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("Failed to enforce System Reserved Cgroup Limits on \"/missing\""),
        "{err}"
    );

    // Without cgroups per QoS there is no node allocatable cgroup to enforce beside: refused,
    // never silently skipped.
    let err = LinuxContainerManager::new(CmConfig {
        cgroups_per_qos: false,
        ..cfg
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("not supported unless cgroupsPerQOS"), "{err}");
}
