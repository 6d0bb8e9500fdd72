//! Building the [`Summary`] from one collection: the sample, the runtime's image filesystem
//! and writable layers, and the targets the collector chose. CPU rates against the kept
//! samples; the kept samples of cgroups not seen are dropped (when the collection covered
//! every pod).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::collector::{PodTarget, SummaryConfig};
use super::rates::{CpuRates, RateKey};
use crate::runtime::FilesystemUsage;
use crate::stats::{DirUsage, FsUsage, InterfaceStats, MachineInfo, ResourceUsage, Sample};
use crate::summary::{
    ContainerStats, CpuStats, FsStats, MemoryStats, NetworkStats, NodeStats, PodReference,
    PodStats, ProcessStats, RlimitStats, RuntimeStats, Summary, VolumeStats, SYSTEM_CONTAINER_PODS,
};

/// Everything one collection gathered besides the targets.
pub(super) struct Collected<'a> {
    pub machine: &'a MachineInfo,
    pub sample: &'a Sample,
    /// CRI `ImageFsInfo`'s image filesystem.
    pub image_fs: Option<&'a FilesystemUsage>,
    /// Where images live (CRI's mount point or the configured store).
    pub image_mount: Option<&'a PathBuf>,
    /// Writable layers by container id.
    pub layers: &'a HashMap<String, FilesystemUsage>,
    /// Filesystems, logs and volumes were measured.
    pub full: bool,
    /// Network interfaces were read.
    pub network: bool,
    /// The targets are every pod the kubelet runs (not a selection): kept CPU samples of
    /// cgroups not seen are dropped.
    pub every_pod: bool,
    /// Measured persistent volumes by pod uid (listed after the emptyDir volumes).
    pub persistent_volumes: &'a HashMap<String, Vec<VolumeStats>>,
}

/// The summary of one collection. See the module docs.
pub(super) fn summary(
    config: &SummaryConfig,
    rates: &mut CpuRates,
    targets: Vec<PodTarget>,
    c: &Collected<'_>,
) -> Summary {
    let time = rfc3339(crate::clock::now_unix_nanos());
    let sample = c.sample;
    let mut seen = HashSet::new();
    let mut cpu = |key: RateKey, u: &ResourceUsage| {
        seen.insert(key.clone());
        CpuStats {
            time: time.clone(),
            usage_nano_cores: rates.rate(key, u),
            usage_core_nano_seconds: u.cpu_usage_ns,
        }
    };
    let nodefs = c
        .full
        .then(|| sample.filesystems.get(&config.root_dir))
        .flatten();
    let image_fs = c
        .full
        .then(|| {
            image_fs_stats(
                c.image_mount.and_then(|m| sample.filesystems.get(m)),
                c.image_fs,
                &time,
            )
        })
        .flatten();
    let boot = c.machine.boot_time_seconds.saturating_mul(1_000_000_000);
    // Go's order is a map's; the summary lists kubelet, runtime, misc, then pods. System
    // containers have no filesystem (Go clears `logs` and `rootfs`).
    let mut system_containers: Vec<ContainerStats> = sample
        .system_containers
        .iter()
        .map(|s| ContainerStats {
            name: s.name.clone(),
            start_time: rfc3339(s.created_at.unwrap_or(boot)),
            cpu: Some(cpu(RateKey::SystemContainer(s.name.clone()), &s.usage)),
            memory: Some(memory(&s.usage, &time, None)),
            ..Default::default()
        })
        .collect();
    if let (Some(u), true) = (sample.pods_cgroup.as_ref(), config.pods_system_container) {
        system_containers.push(ContainerStats {
            name: SYSTEM_CONTAINER_PODS.to_string(),
            start_time: rfc3339(sample.pods_cgroup_created_at.unwrap_or(boot)),
            cpu: Some(cpu(RateKey::PodsCgroup, u)),
            memory: Some(memory(u, &time, None)),
            ..Default::default()
        });
    }
    let node = NodeStats {
        node_name: config.node_name.clone(),
        system_containers,
        start_time: rfc3339(boot),
        cpu: sample.node.as_ref().map(|u| cpu(RateKey::Node, u)),
        memory: sample
            .node
            .as_ref()
            .map(|u| memory(u, &time, Some(c.machine.memory_capacity))),
        network: sample
            .node_interfaces
            .as_deref()
            .filter(|_| c.network)
            .and_then(|i| network(i, &time)),
        fs: nodefs.map(|f| fs_stats(f, &time)),
        runtime: (c.full && (c.image_fs.is_some() || config.image_fs_dir.is_some())).then(|| {
            RuntimeStats {
                image_fs: image_fs.clone(),
            }
        }),
        rlimit: sample.rlimit.map(|r| RlimitStats {
            time: time.clone(),
            maxpid: Some(r.max_pid),
            curproc: Some(r.running_processes),
        }),
    };
    let pods = targets
        .into_iter()
        .map(|t| {
            let measured = sample.pods.get(&t.uid);
            let containers: Vec<ContainerStats> = t
                .containers
                .iter()
                .map(|ct| {
                    let usage = measured.and_then(|m| m.containers.get(&ct.id));
                    ContainerStats {
                        name: ct.name.clone(),
                        start_time: rfc3339(ct.created_at),
                        cpu: usage.map(|u| cpu(RateKey::Container(ct.id.clone()), u)),
                        memory: usage.map(|u| memory(u, &time, None)),
                        rootfs: c
                            .full
                            .then(|| c.layers.get(&ct.id))
                            .flatten()
                            .map(|l| rootfs_stats(l, image_fs.as_ref(), &time)),
                        logs: c.full.then(|| {
                            log_stats(
                                &sample
                                    .directories
                                    .get(&ct.log_dir)
                                    .copied()
                                    .unwrap_or_default(),
                                &time,
                            )
                        }),
                    }
                })
                .collect();
            let volume: Vec<VolumeStats> = t
                .volumes
                .iter()
                .filter_map(|v| {
                    let d = sample.disk_usage.get(&v.path)?;
                    Some(VolumeStats {
                        fs: log_stats(d, &time),
                        name: v.name.clone(),
                        pvc_ref: None,
                    })
                })
                .chain(
                    c.persistent_volumes
                        .get(&t.uid)
                        .into_iter()
                        .flatten()
                        .cloned(),
                )
                .collect();
            let ephemeral_storage = c.full.then(|| {
                let mut used = 0u64;
                let mut inodes = 0u64;
                for cs in &containers {
                    for f in [cs.rootfs.as_ref(), cs.logs.as_ref()].into_iter().flatten() {
                        used = used.saturating_add(f.used_bytes.unwrap_or(0));
                        inodes = inodes.saturating_add(f.inodes_used.unwrap_or(0));
                    }
                }
                for v in t.volumes.iter().filter(|v| !v.memory) {
                    if let Some(d) = sample.disk_usage.get(&v.path) {
                        used = used.saturating_add(d.used_bytes);
                        inodes = inodes.saturating_add(d.inodes_used);
                    }
                }
                FsStats {
                    used_bytes: Some(used),
                    inodes_used: Some(inodes),
                    ..nodefs.map(|f| fs_stats(f, &time)).unwrap_or(FsStats {
                        time: time.clone(),
                        ..Default::default()
                    })
                }
            });
            let pod_usage = measured.and_then(|m| m.usage.as_ref());
            PodStats {
                pod_ref: PodReference {
                    name: crate::pod::name(&t.pod).to_string(),
                    namespace: crate::pod::namespace(&t.pod).to_string(),
                    uid: t.uid.clone(),
                },
                start_time: t.start_time,
                containers,
                cpu: pod_usage.map(|u| cpu(RateKey::Pod(t.uid.clone()), u)),
                memory: pod_usage.map(|u| memory(u, &time, None)),
                network: measured
                    .and_then(|m| m.interfaces.as_deref())
                    .filter(|_| c.network && !crate::pod::host_network(&t.pod))
                    .and_then(|i| network(i, &time)),
                volume,
                ephemeral_storage,
                process_stats: measured
                    .and_then(|m| m.process_count)
                    .map(|n| ProcessStats {
                        process_count: Some(n),
                    }),
            }
        })
        .collect();
    if c.every_pod {
        rates.retain(&seen);
    }
    Summary { node, pods }
}

/// RFC 3339 of Unix nanoseconds (empty when out of range).
pub(super) fn rfc3339(nanos: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The image filesystem: capacity and availability of its filesystem (`statvfs`), used
/// bytes and inodes as the runtime counts them (its images) when it reports them.
pub(super) fn image_fs_stats(
    fs: Option<&FsUsage>,
    cri: Option<&FilesystemUsage>,
    time: &str,
) -> Option<FsStats> {
    let mut stats = match (fs, cri) {
        (Some(f), _) => fs_stats(f, time),
        (None, Some(_)) => FsStats {
            time: time.to_string(),
            ..Default::default()
        },
        (None, None) => return None,
    };
    if let Some(c) = cri {
        if c.used_bytes.is_some() {
            stats.used_bytes = c.used_bytes;
        }
        if c.inodes_used.is_some() {
            stats.inodes_used = c.inodes_used;
        }
    }
    Some(stats)
}

/// A writable layer: what the runtime measured, on what the image filesystem offers.
fn rootfs_stats(layer: &FilesystemUsage, image_fs: Option<&FsStats>, time: &str) -> FsStats {
    FsStats {
        time: time.to_string(),
        used_bytes: layer.used_bytes,
        inodes_used: layer.inodes_used,
        ..image_fs.cloned().unwrap_or_default()
    }
}

/// Memory stats of a cgroup; `capacity` (the node's) stands in for the cgroup's own limit.
fn memory(u: &ResourceUsage, time: &str, capacity: Option<u64>) -> MemoryStats {
    MemoryStats {
        time: time.to_string(),
        available_bytes: capacity
            .or(u.memory_limit_bytes)
            .map(|c| c.saturating_sub(u.memory_working_set_bytes)),
        usage_bytes: u.memory_usage_bytes,
        working_set_bytes: u.memory_working_set_bytes,
        rss_bytes: u.memory_rss_bytes,
        page_faults: Some(u.memory_page_faults),
        major_page_faults: Some(u.memory_major_page_faults),
        cache_bytes: Some(u.memory_cache_bytes),
    }
}

/// Network stats: all interfaces sorted by name, the default one (eth0 when there is one,
/// else the busiest) inline; `None` without interfaces.
fn network(interfaces: &[InterfaceStats], time: &str) -> Option<NetworkStats> {
    let mut interfaces = interfaces.to_vec();
    interfaces.sort_by(|a, b| a.name.cmp(&b.name));
    if interfaces.is_empty() {
        return None;
    }
    // Go's default interface is eth0 only (a node whose interfaces have other names reports
    // none inline; every interface is in the list).
    let default = interfaces.iter().find(|i| i.name == "eth0").cloned();
    Some(NetworkStats {
        time: time.to_string(),
        default,
        interfaces,
    })
}

fn fs_stats(f: &FsUsage, time: &str) -> FsStats {
    FsStats {
        time: time.to_string(),
        available_bytes: Some(f.available_bytes),
        capacity_bytes: Some(f.capacity_bytes),
        used_bytes: Some(f.used_bytes),
        inodes_free: Some(f.inodes_free),
        inodes: Some(f.inodes),
        inodes_used: Some(f.inodes_used),
    }
}

/// A directory (logs, a volume): what it holds, on what its filesystem offers.
fn log_stats(d: &DirUsage, time: &str) -> FsStats {
    let fs = d.filesystem.as_ref().map(|f| fs_stats(f, time));
    FsStats {
        time: time.to_string(),
        used_bytes: Some(d.used_bytes),
        inodes_used: Some(d.inodes_used),
        ..fs.unwrap_or_default()
    }
}
