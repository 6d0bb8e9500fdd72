//! [`CgroupStats`]: the [`NodeStatsProvider`] of the Linux container manager. CPU and memory
//! from the node's root cgroup and the pod and container cgroups (`<pod cgroup>/<container
//! id>`, where the runtime puts them under the cgroup parent the manager hands out), network
//! interfaces from `/proc/net/dev` and `/proc/<pid>/net/dev` of a process in the pod's cgroup,
//! filesystems from `statvfs`, directory usage by walking the tree, `du`-style disk usage
//! (allocated blocks, one filesystem, at most [`DU_MAX_ENTRIES`] entries), the node's process
//! limits from `/proc/sys/kernel/{pid_max,threads-max}` and `/proc/loadavg`. One sample is
//! one blocking task; every path is resolved under the manager's `root`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use kubelet_core::stats::{
    system_container, DirUsage, FsUsage, InterfaceStats, MachineInfo, NodeStatsProvider, PodSample,
    RlimitSample, Sample, SampleRequest, StatsError, SystemContainerSample, DU_MAX_ENTRIES,
};

use crate::cgroups::CgroupName;
use crate::host_root::under;
use crate::manager::Inner;
use crate::system_containers::created_at;

/// Measurements over the container manager's cgroups. See the module docs.
#[derive(Debug, Clone)]
pub struct CgroupStats {
    inner: Arc<Inner>,
    machine: Arc<MachineInfo>,
    /// When this provider was made (Unix nanoseconds): the `kubelet` system container's
    /// start time, as Go's summary provider reports its own creation.
    created: i64,
}

impl CgroupStats {
    pub(crate) fn new(inner: Arc<Inner>, machine: Arc<MachineInfo>) -> Self {
        CgroupStats {
            inner,
            machine,
            created: kubelet_core::clock::now_unix_nanos(),
        }
    }

    /// Takes the sample (blocking file reads).
    fn read(&self, request: SampleRequest) -> Sample {
        let root = &self.inner.config.root;
        let cgroups = self.inner.cgroups.as_ref();
        let usage_in =
            |mgr: &dyn crate::cgroups::CgroupManager, name: &CgroupName| match mgr.usage(name) {
                Ok(u) => Some(u),
                Err(e) => {
                    tracing::debug!(cgroup = %name, error = %e, "reading cgroup usage failed");
                    None
                }
            };
        let usage = |name: &CgroupName| usage_in(cgroups, name);
        // The system containers' and the containers' cgroups are the runtime's and the host's
        // paths, not names of the kubelet's driver.
        let literal = cgroups.cgroupfs();
        let boot = self.machine.boot_time_seconds.saturating_mul(1_000_000_000);
        let system_containers = self
            .inner
            .config
            .system_cgroups
            .resolve(root, cgroups.mode())
            .into_iter()
            .filter_map(|(name, cgroup)| {
                let created_at = if name == system_container::KUBELET {
                    Some(self.created)
                } else {
                    created_at(literal, &cgroup, boot)
                };
                Some(SystemContainerSample {
                    name: name.to_string(),
                    usage: usage_in(literal, &cgroup)?,
                    created_at,
                })
            })
            .collect();
        let mut sample = Sample {
            node: usage(&CgroupName::root()),
            pods_cgroup: usage(self.inner.node_cgroup()),
            pods_cgroup_created_at: created_at(cgroups, self.inner.node_cgroup(), boot),
            system_containers,
            rlimit: read_rlimit(root),
            node_interfaces: request
                .network
                .then(|| read_net_dev(&under(root, "/proc/net/dev")))
                .flatten(),
            ..Sample::default()
        };
        for p in &request.pods {
            let uid = kubelet_core::pod::uid(&p.pod).to_string();
            let cgroup = self.inner.pod_cgroup(&p.pod);
            let mut pod = PodSample::default();
            if let Some(c) = &cgroup {
                pod.usage = usage(c);
                pod.process_count = cgroups
                    .pids(c)
                    .ok()
                    .map(|pids| u64::try_from(pids.len()).unwrap_or(u64::MAX));
                for id in &p.container_ids {
                    if !crate::cgroups::is_plain_container_id(id) {
                        continue;
                    }
                    let candidates = cgroups.container_cgroups(c, id);
                    match candidates.iter().find_map(|cg| literal.usage(cg).ok()) {
                        Some(u) => {
                            pod.containers.insert(id.clone(), u);
                        }
                        None => {
                            tracing::debug!(pod_cgroup = %c, container = %id, "no readable container cgroup")
                        }
                    }
                }
                if request.network && p.network {
                    pod.interfaces = cgroups
                        .pids(c)
                        .ok()
                        .and_then(|pids| pids.first().copied())
                        .and_then(|pid| {
                            read_net_dev(&under(root, &format!("/proc/{pid}/net/dev")))
                        });
                }
            }
            sample.pods.insert(uid, pod);
        }
        for path in request.filesystems {
            if let Some(fs) = fs_usage(&path) {
                sample.filesystems.insert(path, fs);
            }
        }
        for path in request.directories {
            let (used_bytes, inodes_used) = dir_usage(&path);
            let filesystem = fs_usage(&path);
            sample.directories.insert(
                path,
                DirUsage {
                    used_bytes,
                    inodes_used,
                    filesystem,
                },
            );
        }
        for path in request.disk_usage {
            if let Some(d) = du(&path, DU_MAX_ENTRIES) {
                sample.disk_usage.insert(path, d);
            }
        }
        sample
    }
}

#[async_trait]
impl NodeStatsProvider for CgroupStats {
    fn machine_info(&self) -> Arc<MachineInfo> {
        self.machine.clone()
    }

    async fn sample(&self, request: SampleRequest) -> Result<Sample, StatsError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.read(request))
            .await
            .map_err(|e| StatsError::Task(e.to_string()))
    }
}

/// Parses `/proc/<pid>/net/dev`, leaving out loopback and host-side virtual devices.
pub fn parse_net_dev(text: &str) -> Vec<InterfaceStats> {
    const IGNORED: [&str; 7] = ["lo", "veth", "docker", "cni", "flannel", "cali", "virbr"];
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let name = name.trim();
            if IGNORED
                .iter()
                .any(|p| name == *p || (*p != "lo" && name.starts_with(p)))
            {
                return None;
            }
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|v| v.parse().unwrap_or(0))
                .collect();
            Some(InterfaceStats {
                name: name.to_string(),
                rx_bytes: *f.first()?,
                rx_errors: *f.get(2)?,
                tx_bytes: *f.get(8)?,
                tx_errors: *f.get(10)?,
            })
        })
        .collect()
}

fn read_net_dev(path: &Path) -> Option<Vec<InterfaceStats>> {
    std::fs::read_to_string(path)
        .ok()
        .map(|t| parse_net_dev(&t))
}

/// Capacity and usage of the filesystem holding `path` (`statvfs`, in fragment-size units).
fn fs_usage(path: &Path) -> Option<FsUsage> {
    let st = rustix::fs::statvfs(path).ok()?;
    let frsize = st.f_frsize;
    let capacity = st.f_blocks.saturating_mul(frsize);
    let free = st.f_bfree.saturating_mul(frsize);
    Some(FsUsage {
        capacity_bytes: capacity,
        available_bytes: st.f_bavail.saturating_mul(frsize),
        used_bytes: capacity.saturating_sub(free),
        inodes: st.f_files,
        inodes_free: st.f_ffree,
        inodes_used: st.f_files.saturating_sub(st.f_ffree),
        fs_id: st.f_fsid,
    })
}

/// Disk usage of `dir` as `du -x` counts it: allocated blocks (512-byte units) of every
/// entry on `dir`'s own filesystem, hard links counted once; at most `max_entries` entries
/// are visited. `None` when `dir` cannot be read.
fn du(dir: &Path, max_entries: u64) -> Option<DirUsage> {
    use std::os::unix::fs::MetadataExt;
    let top = dir.symlink_metadata().ok()?;
    if !top.is_dir() {
        return None;
    }
    let dev = top.dev();
    let mut seen = std::collections::HashSet::new();
    let mut bytes = top.blocks().saturating_mul(512);
    let mut entries = 0u64;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    'walk: while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if entries >= max_entries {
                tracing::debug!(path = %dir.display(), max_entries, "disk usage measurement stopped at its entry bound");
                break 'walk;
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.dev() != dev {
                continue;
            }
            entries += 1;
            if m.nlink() > 1 && !m.is_dir() && !seen.insert(m.ino()) {
                continue;
            }
            bytes = bytes.saturating_add(m.blocks().saturating_mul(512));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Some(DirUsage {
        used_bytes: bytes,
        inodes_used: entries,
        filesystem: fs_usage(dir),
    })
}

/// Go's `pidlimit.Stats`: the task limit (the smaller of `kernel.pid_max` and
/// `kernel.threads-max`) and the tasks that exist (the total of `/proc/loadavg`'s fourth
/// field).
fn read_rlimit(root: &Path) -> Option<RlimitSample> {
    let read = |p: &str| {
        std::fs::read_to_string(under(root, p))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let max_pid = [
        read("/proc/sys/kernel/pid_max"),
        read("/proc/sys/kernel/threads-max"),
    ]
    .into_iter()
    .flatten()
    .min()?;
    let loadavg = std::fs::read_to_string(under(root, "/proc/loadavg")).ok()?;
    let running_processes = parse_loadavg_tasks(&loadavg)?;
    Some(RlimitSample {
        max_pid,
        running_processes,
    })
}

/// The total task count of `/proc/loadavg` (`0.10 0.20 0.30 2/345 6789` → 345).
pub fn parse_loadavg_tasks(text: &str) -> Option<u64> {
    let field = text.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// Bytes and entries under `dir` (not following symlinks).
fn dir_usage(dir: &Path) -> (u64, u64) {
    let mut bytes = 0u64;
    let mut files = 0u64;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            files += 1;
            if m.is_dir() {
                stack.push(e.path());
            } else {
                bytes = bytes.saturating_add(m.len());
            }
        }
    }
    (bytes, files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::tests::HYBRID_MOUNTINFO;
    use crate::machine::tests::{fixture_machine, write};
    use crate::{CmConfig, LinuxContainerManager};
    use kubelet_core::stats::PodSampleRequest;
    use kubelet_core::ContainerManager;

    #[test]
    fn net_dev_parsing() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n  eth0: 2000 10 3 0 0 0 0 0 5000 20 4 0 0 0 0 0\nveth12: 7 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n";
        let v = parse_net_dev(text);
        assert_eq!(
            v,
            vec![InterfaceStats {
                name: "eth0".into(),
                rx_bytes: 2000,
                rx_errors: 3,
                tx_bytes: 5000,
                tx_errors: 4
            }]
        );
    }

    const NET_DEV: &str = "h1\nh2\n  eth0: 2000 10 3 0 0 0 0 0 5000 20 4 0 0 0 0 0\n";

    #[tokio::test]
    async fn samples_cgroups_network_filesystems_and_dirs_of_a_fixture() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fixture_machine(r);
        write(r, "/proc/self/mountinfo", HYBRID_MOUNTINFO);
        for c in [
            "cpu", "cpuacct", "cpuset", "memory", "pids", "systemd", "unified",
        ] {
            std::fs::create_dir_all(r.join("sys/fs/cgroup").join(c)).unwrap();
        }
        write(r, "/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3");
        write(r, "/sys/fs/cgroup/cpuset/cpuset.mems", "0");
        let cm = LinuxContainerManager::new(CmConfig {
            root: r.to_path_buf(),
            root_dir: r.to_path_buf(),
            ..CmConfig::default()
        })
        .unwrap();
        let pod = Arc::new(crate::helpers::tests::pod("p1", &[(&[], &[])]));
        cm.ensure_pod_resources(&pod).await.unwrap();
        // The node (root) and the pod's container cgroups, as the kernel would fill them.
        let usage_files = |cg: &str, cpu: u64, mem: u64| {
            write(
                r,
                &format!("/sys/fs/cgroup/cpuacct{cg}/cpuacct.usage"),
                &format!("{cpu}\n"),
            );
            write(
                r,
                &format!("/sys/fs/cgroup/memory{cg}/memory.usage_in_bytes"),
                &format!("{mem}\n"),
            );
            write(
                r,
                &format!("/sys/fs/cgroup/memory{cg}/memory.stat"),
                "total_inactive_file 100\ntotal_rss 300\n",
            );
        };
        usage_files("", 9_000, 10_000);
        usage_files("/kubepods/besteffort/podp1", 5_000, 1_000);
        usage_files("/kubepods/besteffort/podp1/c1", 4_000, 900);
        write(
            r,
            "/sys/fs/cgroup/memory/kubepods/besteffort/podp1/cgroup.procs",
            "42\n",
        );
        write(r, "/proc/net/dev", NET_DEV);
        write(r, "/proc/42/net/dev", NET_DEV);
        let logs = r.join("logs/c1");
        write(&logs, "/0.log", "hello\n");

        let stats = cm.node_stats().unwrap();
        assert_eq!(stats.machine_info().num_cores, 4);
        let s = stats
            .sample(SampleRequest {
                pods: vec![PodSampleRequest {
                    pod: pod.clone(),
                    container_ids: vec!["c1".into(), "gone".into(), "../x".into()],
                    network: true,
                }],
                network: true,
                filesystems: vec![r.to_path_buf(), r.join("missing")],
                directories: vec![logs.clone()],
                disk_usage: vec![],
            })
            .await
            .unwrap();
        let node = s.node.unwrap();
        assert_eq!(node.cpu_usage_ns, 9_000);
        assert_eq!(node.memory_working_set_bytes, 9_900);
        assert_eq!(s.node_interfaces.unwrap()[0].name, "eth0");
        let p = &s.pods["p1"];
        assert_eq!(p.usage.unwrap().cpu_usage_ns, 5_000);
        assert_eq!(p.containers.len(), 1, "missing and unsafe ids are left out");
        assert_eq!(p.containers["c1"].memory_working_set_bytes, 800);
        assert_eq!(p.interfaces.as_ref().unwrap()[0].rx_bytes, 2000);
        assert!(s.filesystems[r].capacity_bytes > 0);
        assert!(!s.filesystems.contains_key(&r.join("missing")));
        let d = s.directories[&logs];
        assert_eq!((d.used_bytes, d.inodes_used), (6, 1));
        assert!(d.filesystem.is_some());

        // CPU and memory only: no interfaces read.
        let s = stats
            .sample(SampleRequest {
                pods: vec![PodSampleRequest {
                    pod,
                    container_ids: vec![],
                    network: true,
                }],
                ..SampleRequest::default()
            })
            .await
            .unwrap();
        assert!(s.node_interfaces.is_none() && s.pods["p1"].interfaces.is_none());
    }
}
