//! Tests of the summary collector on the simulator and the fake stats provider.

use super::*;
use crate::config::Config;
use crate::runtime::{ContainerConfig, ContainerKind, SandboxConfig};
use crate::runtime::{ContainerRuntime, ListFilter};
use crate::stats::DirUsage;
use crate::stats::StatsError;
use crate::testing::{container, pod, CgroupUsage, FakeNodeStats, SimRuntime};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const GIB: u64 = 1 << 30;

fn eth(name: &str, rx: u64, tx: u64) -> InterfaceStats {
    InterfaceStats {
        name: name.into(),
        rx_bytes: rx,
        rx_errors: 0,
        tx_bytes: tx,
        tx_errors: 0,
    }
}

/// Runs the pod's sandbox and containers on the simulator; returns the container ids by
/// name.
async fn run(sim: &SimRuntime, p: &Arc<Pod>) -> HashMap<String, String> {
    let sandbox = SandboxConfig {
        pod: p.clone(),
        attempt: 0,
        hostname: crate::pod::name(p).into(),
        log_directory: PathBuf::from("/logs"),
        cgroup_parent: None,
        dns: None,
        runtime_handler: String::new(),
    };
    let sb = sim.run_pod_sandbox(&sandbox).await.unwrap();
    let mut ids = HashMap::new();
    for c in &p.spec.as_ref().unwrap().containers {
        let config = ContainerConfig {
            pod: p.clone(),
            container: c.clone(),
            kind: ContainerKind::Regular,
            restart_count: 0,
            hash: 0,
            image_ref: "sha256:img".into(),
            command: vec![],
            args: vec![],
            env: vec![],
            mounts: vec![],
            log_path: PathBuf::from(format!("{}/0.log", c.name)),
            cpuset_cpus: None,
            cpuset_mems: None,
            devices: Default::default(),
            extra_supplemental_groups: Vec::new(),
        };
        let id = sim.create_container(&sb, &config, &sandbox).await.unwrap();
        sim.start_container(&id).await.unwrap();
        ids.insert(c.name.clone(), id);
    }
    ids
}

fn config() -> SummaryConfig {
    SummaryConfig {
        node_name: "node-1".into(),
        root_dir: PathBuf::from("/var/lib/kubelet"),
        pod_logs_dir: PathBuf::from("/var/log/pods"),
        image_fs_dir: Some(PathBuf::from("/var/lib/containerd")),
        pods_system_container: false,
    }
}

fn entry(p: &Arc<Pod>) -> PodEntry {
    PodEntry {
        pod: p.clone(),
        start_time: Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(1_714_557_600).unwrap(),
        )),
    }
}

type Fixture = (
    Arc<SimRuntime>,
    Arc<FakeNodeStats>,
    SummaryCollector,
    Arc<Pod>,
    HashMap<String, String>,
);

async fn fixture() -> Fixture {
    let sim = Arc::new(SimRuntime::new());
    let stats = Arc::new(FakeNodeStats::default());
    let web = Arc::new(pod(
        "web",
        "u1",
        vec![container("side", "busybox"), container("app", "busybox")],
    ));
    let ids = run(&sim, &web).await;
    let collector = SummaryCollector::new(stats.clone(), sim.clone(), config());
    (sim, stats, collector, web, ids)
}

#[tokio::test(start_paused = true)]
async fn summary_of_a_pod_with_rates_two_samples_a_second_apart() {
    let (_sim, stats, collector, web, ids) = fixture().await;
    let (app, side) = (&ids["app"], &ids["side"]);
    stats.set_node_usage(Some(CgroupUsage::new(0, 2 * GIB)));
    stats.set_pod_usage("u1", CgroupUsage::new(0, 300));
    stats.set_container_usage(app, CgroupUsage::new(0, 200));
    stats.set_container_usage(side, CgroupUsage::new(0, 100));
    stats.set_node_interfaces(vec![eth("ens3", 10, 10), eth("ens4", 100, 1)]);
    stats.set_pod_interfaces("u1", vec![eth("net1", 500, 500), eth("eth0", 1, 2)]);
    let app_logs = Path::new("/var/log/pods/default_web_u1/app");
    stats.set_directory(
        app_logs,
        DirUsage {
            used_bytes: 4096,
            inodes_used: 3,
            filesystem: None,
        },
    );
    let pods = [entry(&web)];

    let s = collector.summary(&pods, false).await.unwrap();
    let node = &s.node;
    assert_eq!(node.node_name, "node-1");
    assert_eq!(node.start_time, "2023-11-14T22:13:20Z");
    let cpu = node.cpu.as_ref().unwrap();
    assert_eq!(cpu.usage_nano_cores, None, "one sample: no rate yet");
    assert_eq!(cpu.usage_core_nano_seconds, 0);
    let mem = node.memory.as_ref().unwrap();
    assert_eq!(mem.working_set_bytes, 2 * GIB);
    assert_eq!(
        mem.available_bytes,
        Some(6 * GIB),
        "8Gi capacity − working set"
    );
    let net = node.network.as_ref().unwrap();
    assert_eq!(net.default, None, "no eth0: no default interface, as Go");
    assert_eq!(
        net.interfaces
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["ens3", "ens4"]
    );
    let fs = node.fs.as_ref().unwrap();
    assert_eq!(fs.capacity_bytes, Some(100 * GIB));
    assert_eq!(fs.available_bytes, Some(50 * GIB));
    assert!(node.runtime.as_ref().unwrap().image_fs.is_some());

    assert_eq!(s.pods.len(), 1);
    let p = &s.pods[0];
    assert_eq!(
        (
            p.pod_ref.namespace.as_str(),
            p.pod_ref.name.as_str(),
            p.pod_ref.uid.as_str()
        ),
        ("default", "web", "u1")
    );
    assert_eq!(p.start_time, "2024-05-01T10:00:00Z");
    assert_eq!(p.memory.as_ref().unwrap().working_set_bytes, 300);
    assert_eq!(p.memory.as_ref().unwrap().available_bytes, None);
    assert_eq!(
        p.network.as_ref().unwrap().default.as_ref().unwrap().name,
        "eth0"
    );
    let names: Vec<&str> = p.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["app", "side"], "sorted by name");
    let logs = p.containers[0].logs.as_ref().unwrap();
    assert_eq!((logs.used_bytes, logs.inodes_used), (Some(4096), Some(3)));
    assert_eq!(logs.capacity_bytes, None, "its filesystem was not measured");
    assert!(!logs.time.is_empty());
    let side_logs = p.containers[1].logs.as_ref().unwrap();
    assert_eq!(
        side_logs.used_bytes,
        Some(0),
        "an unmeasured directory is empty"
    );

    // 0.5s later: too close to the kept samples for a rate.
    tokio::time::advance(Duration::from_millis(500)).await;
    stats.set_node_usage(Some(CgroupUsage::new(1_000_000_000, 2 * GIB)));
    let s = collector.summary(&pods, true).await.unwrap();
    assert_eq!(s.node.cpu.as_ref().unwrap().usage_nano_cores, None);

    // 1s after the first: rates over that second.
    tokio::time::advance(Duration::from_millis(500)).await;
    stats.set_node_usage(Some(CgroupUsage::new(2_000_000_000, 2 * GIB)));
    stats.set_pod_usage("u1", CgroupUsage::new(750_000_000, 300));
    stats.set_container_usage(app, CgroupUsage::new(500_000_000, 200));
    stats.set_container_usage(side, CgroupUsage::new(250_000_000, 100));
    let s = collector.summary(&pods, true).await.unwrap();
    assert_eq!(
        s.node.cpu.as_ref().unwrap().usage_nano_cores,
        Some(2_000_000_000)
    );
    let p = &s.pods[0];
    assert_eq!(p.cpu.as_ref().unwrap().usage_nano_cores, Some(750_000_000));
    assert_eq!(
        p.containers[0].cpu.as_ref().unwrap().usage_nano_cores,
        Some(500_000_000)
    );
    assert_eq!(
        p.containers[1].cpu.as_ref().unwrap().usage_nano_cores,
        Some(250_000_000)
    );
    assert_eq!(
        p.containers[1]
            .cpu
            .as_ref()
            .unwrap()
            .usage_core_nano_seconds,
        250_000_000
    );
    // CPU and memory only: no network, filesystems or logs, and none asked for.
    assert!(s.node.network.is_none() && s.node.fs.is_none() && s.node.runtime.is_none());
    assert!(p.network.is_none() && p.containers[0].logs.is_none());
    let last = stats.requests().pop().unwrap();
    assert!(!last.network && last.filesystems.is_empty() && last.directories.is_empty());
    assert_eq!(last.pods.len(), 1);
    assert_eq!(last.pods[0].container_ids.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn kept_samples_of_gone_pods_and_containers_are_dropped() {
    let (sim, stats, collector, web, ids) = fixture().await;
    let db = Arc::new(pod("db", "u2", vec![container("db", "busybox")]));
    let db_ids = run(&sim, &db).await;
    for (uid, cs) in [("u1", &ids), ("u2", &db_ids)] {
        stats.set_pod_usage(uid, CgroupUsage::new(1, 1));
        for id in cs.values() {
            stats.set_container_usage(id, CgroupUsage::new(1, 1));
        }
    }
    collector
        .summary(&[entry(&web), entry(&db)], true)
        .await
        .unwrap();
    // node + 2 pods + 3 containers.
    assert_eq!(collector.kept_samples(), 6);

    // db's sandbox stops (its pod is not measured any more) and web's side container
    // exits: their samples go.
    let db_sandbox = sim
        .list_pod_sandboxes(&ListFilter::pod("u2"))
        .await
        .unwrap()
        .remove(0)
        .id;
    sim.stop_pod_sandbox(&db_sandbox).await.unwrap();
    sim.crash(&ids["side"], 1);
    let s = collector
        .summary(&[entry(&web), entry(&db)], true)
        .await
        .unwrap();
    assert_eq!(s.pods.len(), 1);
    assert_eq!(s.pods[0].containers.len(), 1);
    assert_eq!(
        collector.kept_samples(),
        3,
        "node, web and its app container"
    );

    // A pod the kubelet no longer runs is not measured, even with a ready sandbox.
    let s = collector.summary(&[], true).await.unwrap();
    assert!(s.pods.is_empty());
    assert_eq!(collector.kept_samples(), 1);

    // A cgroup that cannot be read (removed) reports no usage and keeps no sample.
    stats.remove_pod("u1");
    stats.remove_container(&ids["app"]);
    let s = collector.summary(&[entry(&web)], true).await.unwrap();
    assert!(s.pods[0].cpu.is_none() && s.pods[0].containers[0].cpu.is_none());
    assert_eq!(collector.kept_samples(), 1);
}

#[tokio::test(start_paused = true)]
async fn host_network_pods_and_runtime_errors() {
    let (sim, stats, collector, _web, _ids) = fixture().await;
    let mut host = pod("host", "u3", vec![container("c", "busybox")]);
    if let Some(spec) = host.spec.as_mut() {
        spec.host_network = Some(true);
    }
    let host = Arc::new(host);
    run(&sim, &host).await;
    stats.set_pod_interfaces("u3", vec![eth("eth0", 1, 1)]);
    let s = collector.summary(&[entry(&host)], false).await.unwrap();
    assert!(s.pods[0].network.is_none(), "host network: the node's");
    assert!(!stats.requests().pop().unwrap().pods[0].network);

    sim.set_unavailable(true);
    let err = collector.summary(&[entry(&host)], false).await.unwrap_err();
    assert!(
        matches!(
            err,
            StatsError::Runtime {
                what: "sandboxes",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn config_from_engine_config() {
    let c = Config {
        node_name: "n".into(),
        ..Config::default()
    };
    let s = SummaryConfig::from_config(&c);
    assert_eq!(s.node_name, "n");
    assert_eq!(s.root_dir, c.root_dir);
    assert_eq!(s.pod_logs_dir, c.pod_logs_dir);
    assert_eq!(s.image_fs_dir, None);
}

#[tokio::test(start_paused = true)]
async fn eviction_inputs_rootfs_volumes_ephemeral_storage_pids_and_the_pods_cgroup() {
    use crate::stats::{FsUsage, RlimitSample};
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
    let sim = Arc::new(SimRuntime::new());
    sim.add_image("busybox");
    let stats = Arc::new(FakeNodeStats::default());
    let p = crate::testing::PodBuilder::new("web", "u1")
        .container(crate::testing::container("app", "busybox"))
        .volume(Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        })
        .volume(Volume {
            name: "ram".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".into()),
                ..Default::default()
            }),
            ..Default::default()
        })
        .build();
    let p = Arc::new(p);
    let ids = run(&sim, &p).await;
    let fs = |id: u64, avail: u64| FsUsage {
        capacity_bytes: 100 * GIB,
        available_bytes: avail,
        used_bytes: 100 * GIB - avail,
        inodes: 1000,
        inodes_free: 600,
        inodes_used: 400,
        fs_id: id,
    };
    stats.clear_default_filesystem();
    stats.set_filesystem(Path::new("/var/lib/kubelet"), fs(1, 40 * GIB));
    stats.set_filesystem(Path::new("/var/lib/kubelet-rs-sim/images"), fs(2, 30 * GIB));
    let vol = Path::new("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir");
    let du = |bytes| DirUsage {
        used_bytes: bytes,
        inodes_used: 2,
        filesystem: None,
    };
    stats.set_disk_usage(&vol.join("scratch"), du(5000));
    stats.set_disk_usage(&vol.join("ram"), du(7000));
    stats.set_directory(
        Path::new("/var/log/pods/default_web_u1/app"),
        DirUsage {
            used_bytes: 300,
            inodes_used: 1,
            filesystem: None,
        },
    );
    // kubepods limited to 6 GiB (capacity − reserved; the node's allocatable is lower still
    // by the hard eviction thresholds, which the cgroup's limit does not subtract).
    stats.set_pods_cgroup_usage(Some(CgroupUsage::new(0, 2 * GIB).with_limit(6 * GIB)));
    stats.set_rlimit(Some(RlimitSample {
        max_pid: 4000,
        running_processes: 321,
    }));
    stats.set_pod_process_count("u1", 7);
    let collector = SummaryCollector::new(
        stats.clone(),
        sim.clone(),
        SummaryConfig {
            image_fs_dir: None,
            pods_system_container: true,
            ..config()
        },
    );
    assert_eq!(collector.has_dedicated_image_fs(), None);
    let s = collector.summary(&[entry(&p)], false).await.unwrap();
    assert_eq!(collector.has_dedicated_image_fs(), Some(true));

    let pods_sc = &s.node.system_containers[0];
    assert_eq!(pods_sc.name, "pods");
    assert_eq!(
        s.node.system_containers.len(),
        1,
        "no other system container measured"
    );
    assert_eq!(
        pods_sc.memory.as_ref().unwrap().available_bytes,
        Some(4 * GIB),
        "the kubepods limit − the pods' working set"
    );
    let rl = s.node.rlimit.as_ref().unwrap();
    assert_eq!((rl.maxpid, rl.curproc), (Some(4000), Some(321)));
    let image_fs = s.node.runtime.as_ref().unwrap().image_fs.as_ref().unwrap();
    assert_eq!(image_fs.available_bytes, Some(30 * GIB));
    assert_eq!(
        image_fs.used_bytes,
        Some(1 << 20),
        "the runtime's image bytes"
    );

    let ps = &s.pods[0];
    let rootfs = ps.containers[0].rootfs.as_ref().unwrap();
    assert_eq!(
        rootfs.used_bytes,
        Some(4 << 10),
        "the simulated writable layer"
    );
    assert_eq!(rootfs.capacity_bytes, Some(100 * GIB));
    let names: Vec<&str> = ps.volume.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["scratch", "ram"]);
    let eph = ps.ephemeral_storage.as_ref().unwrap();
    assert_eq!(
        eph.used_bytes,
        Some((4 << 10) + 300 + 5000),
        "rootfs + logs + disk emptyDir (not the memory one)"
    );
    assert_eq!(eph.available_bytes, Some(40 * GIB), "on nodefs");
    assert_eq!(ps.process_stats.as_ref().unwrap().process_count, Some(7));
    let _ = ids;

    // The JSON names are Go's.
    let v = serde_json::to_value(&s).unwrap();
    assert!(v["pods"][0]["ephemeral-storage"]["usedBytes"].is_u64());
    assert_eq!(v["pods"][0]["volume"][0]["name"], "scratch");
    assert_eq!(v["pods"][0]["process_stats"]["process_count"], 7);
    assert_eq!(v["node"]["rlimit"]["maxpid"], 4000);
    assert!(v["pods"][0]["containers"][0]["rootfs"]["usedBytes"].is_u64());

    // CPU and memory only: no runtime filesystem calls.
    let before = (sim.calls("ImageFsInfo"), sim.calls("ListContainerStats"));
    collector.summary(&[entry(&p)], true).await.unwrap();
    assert_eq!(
        (sim.calls("ImageFsInfo"), sim.calls("ListContainerStats")),
        before
    );
    assert_eq!(
        collector.image_fs().await.unwrap().available_bytes,
        Some(30 * GIB)
    );
}

#[tokio::test(start_paused = true)]
async fn a_selection_of_pods_keeps_the_others_samples_and_none_lists_nothing() {
    let (sim, stats, collector, web, ids) = fixture().await;
    stats.set_node_usage(Some(CgroupUsage::new(1, GIB)));
    stats.set_pod_usage("u1", CgroupUsage::new(1, 1));
    for id in ids.values() {
        stats.set_container_usage(id, CgroupUsage::new(1, 1));
    }
    collector.summary(&[entry(&web)], true).await.unwrap();
    assert_eq!(
        collector.kept_samples(),
        4,
        "node, web and its two containers"
    );
    let runtime_calls = |sim: &SimRuntime| {
        [
            "ListPodSandbox",
            "ListContainers",
            "ListContainerStats",
            "ImageFsInfo",
        ]
        .map(|c| sim.calls(c))
    };

    // No pod selected: the node's figures, the image filesystem, no listing, no pod read.
    let before = runtime_calls(&sim);
    let s = collector.collect(&[], Detail::SelectedPods).await.unwrap();
    assert!(s.pods.is_empty());
    assert!(s.node.memory.is_some());
    assert_eq!(
        runtime_calls(&sim),
        [before[0], before[1], before[2], before[3] + 1]
    );
    assert_eq!(collector.kept_samples(), 4, "web's samples stay");

    // web selected: listed and measured like any collection.
    let s = collector
        .collect(&[entry(&web)], Detail::SelectedPods)
        .await
        .unwrap();
    assert_eq!(s.pods.len(), 1);
    assert_eq!(s.pods[0].containers.len(), 2);
    assert!(s.pods[0].ephemeral_storage.is_some());
    assert_eq!(
        runtime_calls(&sim),
        [before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 2]
    );
}

#[tokio::test(start_paused = true)]
async fn system_containers_the_provider_measures_come_before_pods_with_rates() {
    let (_sim, stats, _collector, web, _ids) = fixture().await;
    let collector = SummaryCollector::new(
        stats.clone(),
        Arc::new(SimRuntime::new()),
        SummaryConfig {
            pods_system_container: true,
            ..config()
        },
    );
    let created = 1_700_000_100_000_000_000;
    stats.set_pods_cgroup_usage(Some(CgroupUsage::new(0, GIB)));
    stats.set_system_container("kubelet", CgroupUsage::new(0, 50), Some(created));
    stats.set_system_container("runtime", CgroupUsage::new(0, 70), None);
    let pods = [entry(&web)];
    collector.summary(&pods, false).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    stats.set_system_container("kubelet", CgroupUsage::new(100_000_000, 60), Some(created));
    stats.set_system_container(
        "runtime",
        CgroupUsage::new(300_000_000, 70).with_limit(1000),
        None,
    );
    let s = collector.summary(&pods, false).await.unwrap();
    let sc = &s.node.system_containers;
    let names: Vec<&str> = sc.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["kubelet", "runtime", "pods"]);
    let (kubelet, runtime) = (&sc[0], &sc[1]);
    assert_eq!(
        sc[2].memory.as_ref().unwrap().available_bytes,
        None,
        "kubepods unlimited: no availableBytes (cAdvisor's), so no allocatableMemory.available"
    );
    assert_eq!(
        kubelet.start_time, "2023-11-14T22:15:00Z",
        "its creation time"
    );
    assert_eq!(runtime.start_time, s.node.start_time, "unknown: boot time");
    assert_eq!(
        kubelet.cpu.as_ref().unwrap().usage_nano_cores,
        Some(100_000_000)
    );
    assert_eq!(
        runtime.cpu.as_ref().unwrap().usage_nano_cores,
        Some(300_000_000)
    );
    let mem = kubelet.memory.as_ref().unwrap();
    assert_eq!(mem.working_set_bytes, 60);
    assert_eq!(mem.available_bytes, None, "no limit, no allocatable");
    assert_eq!((mem.page_faults, mem.major_page_faults), (Some(0), Some(0)));
    assert_eq!(
        runtime.memory.as_ref().unwrap().available_bytes,
        Some(930),
        "a limit: limit − working set, as cAdvisor"
    );
    assert!(kubelet.rootfs.is_none() && kubelet.logs.is_none());
}
