//! Machine information, as cAdvisor reports it to the Go kubelet: [`read_machine_info`]
//! fills the core [`MachineInfo`] from `/proc`, `/sys` and `/etc`.
//!
//! Every reader takes a `root` path that the absolute `/proc`, `/sys` and `/etc` paths are
//! resolved under: `/` in production, a fixture directory in tests.

use std::collections::BTreeSet;
use std::path::Path;

use procfs::{CpuInfo, FromRead, Meminfo};

use kubelet_core::cpu::parse_cpuset;

use crate::error::Error;
use crate::host_root::under;

pub use kubelet_core::stats::{CpuTopology, HugePages, MachineInfo, NumaMemory};

/// The Kubernetes resource name of a huge page size, e.g. `hugepages-2Mi`.
pub fn hugepage_resource_name(h: &HugePages) -> String {
    h.resource_name()
}

pub(crate) fn read_string(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        error: source,
    })
}

fn read_trimmed_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn parse_u64(path: &Path, text: &str) -> Result<u64, Error> {
    text.trim().parse().map_err(|_| Error::ParseFile {
        path: path.to_path_buf(),
        message: format!("{:?} is not an unsigned integer", text.trim()),
    })
}

/// Reads machine info from the `/proc`, `/sys` and `/etc` trees under `root`, and the
/// filesystem size of `root_dir` (the kubelet root dir, an absolute path on the real
/// system; its nearest existing ancestor is used if it does not exist yet).
pub fn read_machine_info(root: &Path, root_dir: &Path) -> Result<MachineInfo, Error> {
    let topology = read_topology(root)?;
    let num_cores = u32::try_from(topology.len()).unwrap_or(u32::MAX);
    let num_physical_cores = u32::try_from(
        topology
            .iter()
            .map(|t| (t.socket, t.core))
            .collect::<BTreeSet<_>>()
            .len(),
    )
    .unwrap_or(u32::MAX);
    let num_sockets = u32::try_from(
        topology
            .iter()
            .map(|t| t.socket)
            .collect::<BTreeSet<_>>()
            .len(),
    )
    .unwrap_or(u32::MAX);

    let meminfo_path = under(root, "/proc/meminfo");
    let meminfo = Meminfo::from_file(&meminfo_path).map_err(|e| Error::ParseFile {
        path: meminfo_path.clone(),
        message: e.to_string(),
    })?;

    let boot_id_path = under(root, "/proc/sys/kernel/random/boot_id");
    let boot_id = read_string(&boot_id_path)?.trim().to_string();
    let machine_id = read_trimmed_opt(&under(root, "/etc/machine-id"))
        .or_else(|| read_trimmed_opt(&under(root, "/var/lib/dbus/machine-id")))
        .unwrap_or_default();
    let system_uuid =
        read_trimmed_opt(&under(root, "/sys/class/dmi/id/product_uuid")).unwrap_or_default();
    let kernel_path = under(root, "/proc/sys/kernel/osrelease");
    let kernel_version = read_string(&kernel_path)?.trim().to_string();
    let os_image = read_os_image(root);
    let pid_max_path = under(root, "/proc/sys/kernel/pid_max");
    let max_pids = parse_u64(&pid_max_path, &read_string(&pid_max_path)?)?;
    let (ephemeral_storage_capacity, ephemeral_storage_inodes) = fs_capacity(root_dir)?;

    Ok(MachineInfo {
        num_cores,
        num_physical_cores,
        num_sockets,
        topology,
        memory_capacity: meminfo.mem_total,
        hugepages: read_hugepages(&under(root, "/sys/kernel/mm/hugepages"))?,
        numa_memory: read_numa_memory(root),
        boot_id,
        machine_id,
        system_uuid,
        kernel_version,
        os_image,
        max_pids,
        ephemeral_storage_capacity,
        ephemeral_storage_inodes,
        boot_time_seconds: read_boot_time(root),
    })
}

/// Online CPUs with their core and socket ids, from sysfs; falls back to /proc/cpuinfo.
fn read_topology(root: &Path) -> Result<Vec<CpuTopology>, Error> {
    let online_path = under(root, "/sys/devices/system/cpu/online");
    if let Some(online) = read_trimmed_opt(&online_path) {
        let cpus = parse_cpuset(&online).map_err(|e| Error::ParseFile {
            path: online_path.clone(),
            message: e.to_string(),
        })?;
        let numa = read_numa_nodes(root);
        let mut out = Vec::with_capacity(cpus.len());
        for cpu in cpus {
            let dir = under(root, &format!("/sys/devices/system/cpu/cpu{cpu}/topology"));
            let read_id = |name: &str| -> Result<Option<u32>, Error> {
                let p = dir.join(name);
                match read_trimmed_opt(&p) {
                    None => Ok(None),
                    Some(text) => {
                        // Some platforms report -1 for unknown.
                        Ok(text
                            .parse::<i64>()
                            .ok()
                            .map(|v| u32::try_from(v).unwrap_or(0)))
                    }
                }
            };
            let core = read_id("core_id")?.unwrap_or(cpu);
            let socket = read_id("physical_package_id")?.unwrap_or(0);
            let numa_node = numa.get(&cpu).copied().unwrap_or(0);
            out.push(CpuTopology {
                cpu,
                core,
                socket,
                numa_node,
            });
        }
        if !out.is_empty() {
            return Ok(out);
        }
    }
    let cpuinfo_path = under(root, "/proc/cpuinfo");
    let info = CpuInfo::from_file(&cpuinfo_path).map_err(|e| Error::ParseFile {
        path: cpuinfo_path.clone(),
        message: e.to_string(),
    })?;
    let mut out = Vec::with_capacity(info.num_cores());
    for i in 0..info.num_cores() {
        let cpu = info
            .get_field(i, "processor")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(i as u32);
        let core = info
            .get_field(i, "core id")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(cpu);
        let socket = info.physical_id(i).unwrap_or(0);
        out.push(CpuTopology {
            cpu,
            core,
            socket,
            numa_node: 0,
        });
    }
    if out.is_empty() {
        return Err(Error::ParseFile {
            path: cpuinfo_path,
            message: "no processors listed".to_string(),
        });
    }
    out.sort_by_key(|t| t.cpu);
    Ok(out)
}

/// The NUMA nodes' sysfs directories, `/sys/devices/system/node/node<N>` (none on kernels
/// without NUMA support).
fn numa_node_dirs(root: &Path) -> Vec<(u32, std::path::PathBuf)> {
    let Ok(entries) = std::fs::read_dir(under(root, "/sys/devices/system/node")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let node = entry
                .file_name()
                .to_str()?
                .strip_prefix("node")?
                .parse::<u32>()
                .ok()?;
            Some((node, entry.path()))
        })
        .collect()
}

/// Each CPU's NUMA node, from `/sys/devices/system/node/node<N>/cpulist` (as cAdvisor);
/// empty on kernels without NUMA support (every CPU then counts as node 0).
fn read_numa_nodes(root: &Path) -> std::collections::BTreeMap<u32, u32> {
    let mut out = std::collections::BTreeMap::new();
    for (node, dir) in numa_node_dirs(root) {
        let Some(list) = read_trimmed_opt(&dir.join("cpulist")) else {
            continue;
        };
        match parse_cpuset(&list) {
            Ok(cpus) => out.extend(cpus.into_iter().map(|cpu| (cpu, node))),
            Err(e) => {
                tracing::warn!(node, error = %e, "unreadable NUMA node CPU list; its CPUs count as node 0")
            }
        }
    }
    out
}

/// Each NUMA node's memory and huge page pools, from `/sys/devices/system/node/node<N>`
/// (`meminfo`'s `MemTotal`, `hugepages/hugepages-<size>kB/nr_hugepages`), as cAdvisor
/// reads them; empty on kernels without NUMA information.
fn read_numa_memory(root: &Path) -> Vec<NumaMemory> {
    let mut out = Vec::new();
    for (node, dir) in numa_node_dirs(root) {
        match read_node_memory(node, &dir) {
            Ok(n) => out.push(n),
            // As cAdvisor: a node whose memory cannot be read is left out with a warning;
            // only the memory manager's Static policy needs it (and then reports the node
            // missing).
            Err(e) => {
                tracing::warn!(node, error = %e, "NUMA node memory unreadable; the node is left out of the machine's NUMA memory")
            }
        }
    }
    out.sort_by_key(|n| n.node);
    out
}

fn read_node_memory(node: u32, dir: &Path) -> Result<NumaMemory, Error> {
    let meminfo = dir.join("meminfo");
    let text = read_string(&meminfo)?;
    // "Node 0 MemTotal:       24683772 kB"
    let memory_kb = text
        .lines()
        .find_map(|l| l.split_once("MemTotal:").map(|(_, v)| v))
        .map(|v| v.trim().trim_end_matches("kB").trim())
        .ok_or_else(|| Error::ParseFile {
            path: meminfo.clone(),
            message: "no MemTotal line".to_string(),
        })
        .and_then(|v| parse_u64(&meminfo, v))?;
    Ok(NumaMemory {
        node,
        memory_bytes: memory_kb.saturating_mul(1024),
        hugepages: read_hugepages(&dir.join("hugepages"))?,
    })
}

/// Huge page pools from `<dir>/hugepages-<size>kB/nr_hugepages` (the machine's
/// `/sys/kernel/mm/hugepages`, or a NUMA node's `hugepages`).
fn read_hugepages(dir: &Path) -> Result<Vec<HugePages>, Error> {
    let dir = dir.to_path_buf();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::ReadFile {
                path: dir,
                error: source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::ReadFile {
            path: dir.clone(),
            error: source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(size) = name
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        let nr_path = entry.path().join("nr_hugepages");
        let num_pages = parse_u64(&nr_path, &read_string(&nr_path)?)?;
        out.push(HugePages {
            page_size_kb: size,
            num_pages,
        });
    }
    out.sort_by_key(|h| h.page_size_kb);
    Ok(out)
}

fn read_os_image(root: &Path) -> String {
    let text = read_trimmed_opt(&under(root, "/etc/os-release"))
        .or_else(|| read_trimmed_opt(&under(root, "/usr/lib/os-release")))
        .unwrap_or_default();
    parse_pretty_name(&text)
}

/// `PRETTY_NAME` from os-release text, unquoted (`"Linux"` when absent or empty, as Go).
pub fn parse_pretty_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_string())
}

/// The boot time in Unix seconds: `btime` of `/proc/stat` (0 when unreadable).
fn read_boot_time(root: &Path) -> i64 {
    std::fs::read_to_string(under(root, "/proc/stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<i64>().ok())
        })
        .unwrap_or_default()
}

/// Capacity in bytes and total inodes of the filesystem holding `path` (cAdvisor:
/// blocks × block size).
pub fn fs_capacity(path: &Path) -> Result<(u64, u64), Error> {
    let mut p = path.to_path_buf();
    while !p.exists() {
        match p.parent() {
            Some(parent) => p = parent.to_path_buf(),
            None => break,
        }
    }
    let st = rustix::fs::statvfs(&p).map_err(|e| Error::StatFs {
        path: p.clone(),
        error: e.into(),
    })?;
    Ok((st.f_blocks.saturating_mul(st.f_bsize), st.f_files))
}

/// Checks `/proc/swaps` under `root` the way Go's kubelet does with `failSwapOn`: any line
/// after the header means swap is on and start-up is refused. A missing file means no swap.
pub fn check_swap(root: &Path) -> Result<(), Error> {
    let path = under(root, "/proc/swaps");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(path = %path.display(), "file does not exist, assuming that swap is disabled");
            return Ok(());
        }
        Err(source) => {
            return Err(Error::ReadFile {
                path,
                error: source,
            })
        }
    };
    let lines: Vec<String> = text.trim().split('\n').map(str::to_string).collect();
    if lines.len() > 1 {
        return Err(Error::SwapOn { lines });
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn write(root: &Path, abs: &str, contents: &str) {
        let p = under(root, abs);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, contents).unwrap();
    }

    const MEMINFO: &str = "MemTotal:       24684084 kB\nMemFree:        24104676 kB\nMemAvailable:   24334796 kB\nBuffers:            2324 kB\nCached:           403336 kB\nSwapCached:            0 kB\nActive:           100000 kB\nInactive:         100000 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nDirty:                 0 kB\nWriteback:             0 kB\nAnonPages:         10000 kB\nMapped:            10000 kB\nShmem:              1000 kB\nSlab:              10000 kB\nSReclaimable:       5000 kB\nSUnreclaim:         5000 kB\nKernelStack:        1000 kB\nPageTables:         1000 kB\nNFS_Unstable:          0 kB\nBounce:                0 kB\nWritebackTmp:          0 kB\nCommitLimit:    12342040 kB\nCommitted_AS:     100000 kB\nVmallocTotal:   34359738367 kB\nVmallocUsed:           0 kB\nVmallocChunk:          0 kB\n";

    /// A fixture machine: 4 CPUs (2 sockets × 2 cores), 24684084 KiB memory, 2 hugepage sizes.
    pub(crate) fn fixture_machine(root: &Path) {
        write(root, "/proc/meminfo", MEMINFO);
        write(root, "/sys/devices/system/cpu/online", "0-3\n");
        for cpu in 0..4 {
            write(
                root,
                &format!("/sys/devices/system/cpu/cpu{cpu}/topology/core_id"),
                &format!("{}\n", cpu % 2),
            );
            write(
                root,
                &format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
                &format!("{}\n", cpu / 2),
            );
        }
        write(
            root,
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "16\n",
        );
        write(
            root,
            "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
            "0\n",
        );
        write(
            root,
            "/proc/sys/kernel/random/boot_id",
            "d1f9bbf2-2857-4ede-8ccc-bca1d2285675\n",
        );
        write(root, "/var/lib/dbus/machine-id", "dbusid\n");
        write(root, "/proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(
            root,
            "/etc/os-release",
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        write(root, "/proc/sys/kernel/pid_max", "32768\n");
        write(
            root,
            "/proc/swaps",
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        );
    }

    #[test]
    fn reads_fixture_machine() {
        let dir = tempfile::tempdir().unwrap();
        fixture_machine(dir.path());
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        assert_eq!(info.num_cores, 4);
        assert_eq!(info.num_physical_cores, 4);
        assert_eq!(info.num_sockets, 2);
        let numa: Vec<u32> = info.topology.iter().map(|t| t.numa_node).collect();
        assert_eq!(numa, [0, 0, 0, 0], "no node directories: node 0");
        assert_eq!(info.memory_capacity, 24_684_084 * 1024);
        assert_eq!(
            info.hugepages,
            vec![
                HugePages {
                    page_size_kb: 2048,
                    num_pages: 16
                },
                HugePages {
                    page_size_kb: 1_048_576,
                    num_pages: 0
                }
            ]
        );
        assert_eq!(hugepage_resource_name(&info.hugepages[0]), "hugepages-2Mi");
        assert_eq!(hugepage_resource_name(&info.hugepages[1]), "hugepages-1Gi");
        assert_eq!(info.boot_id, "d1f9bbf2-2857-4ede-8ccc-bca1d2285675");
        assert_eq!(info.machine_id, "dbusid", "falls back to dbus machine-id");
        assert_eq!(info.system_uuid, "");
        assert_eq!(info.kernel_version, "6.1.0-test");
        assert_eq!(info.os_image, "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(info.max_pids, 32768);
        assert!(info.ephemeral_storage_capacity > 0);

        // /etc/machine-id wins over dbus; product_uuid is read when present.
        write(dir.path(), "/etc/machine-id", "etcid\n");
        write(dir.path(), "/sys/class/dmi/id/product_uuid", "UUID-1\n");
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        assert_eq!(info.machine_id, "etcid");
        assert_eq!(info.system_uuid, "UUID-1");

        // One NUMA node per socket; a garbled list leaves its CPUs on node 0.
        write(
            dir.path(),
            "/sys/devices/system/node/node0/cpulist",
            "0-1\n",
        );
        write(
            dir.path(),
            "/sys/devices/system/node/node1/cpulist",
            "2-3\n",
        );
        write(dir.path(), "/sys/devices/system/node/node2/cpulist", "x\n");
        write(dir.path(), "/sys/devices/system/node/online", "0-2\n");
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        let numa: Vec<u32> = info.topology.iter().map(|t| t.numa_node).collect();
        assert_eq!(numa, [0, 0, 1, 1]);
        assert!(info.numa_memory.is_empty(), "no node meminfo: {info:?}");

        // Each node's memory and huge pages (the memory manager's machine).
        for (node, kb) in [(0, 12_000_000), (1, 12_684_084)] {
            write(
                dir.path(),
                &format!("/sys/devices/system/node/node{node}/meminfo"),
                &format!("Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:  10 kB\n"),
            );
            write(
                dir.path(),
                &format!(
                    "/sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages"
                ),
                &format!("{}\n", 8 * node),
            );
        }
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        let two_mi = |n| {
            vec![HugePages {
                page_size_kb: 2048,
                num_pages: n,
            }]
        };
        assert_eq!(
            info.numa_memory,
            vec![
                NumaMemory {
                    node: 0,
                    memory_bytes: 12_000_000 * 1024,
                    hugepages: two_mi(0),
                },
                NumaMemory {
                    node: 1,
                    memory_bytes: 12_684_084 * 1024,
                    hugepages: two_mi(8),
                },
            ]
        );
        write(
            dir.path(),
            "/sys/devices/system/node/node1/meminfo",
            "Node 1 MemFree: 1 kB\n",
        );
        // A node whose memory cannot be read is left out (as cAdvisor), not fatal.
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        assert_eq!(
            info.numa_memory.iter().map(|n| n.node).collect::<Vec<_>>(),
            [0]
        );
    }

    #[test]
    fn pretty_name() {
        assert_eq!(
            parse_pretty_name("ID=debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            "Debian GNU/Linux 12 (bookworm)"
        );
        assert_eq!(parse_pretty_name(""), "Linux");
        assert_eq!(parse_pretty_name("PRETTY_NAME=''\n"), "Linux");
    }

    #[test]
    fn boot_time_from_proc_stat() {
        let dir = tempfile::tempdir().unwrap();
        fixture_machine(dir.path());
        assert_eq!(
            read_machine_info(dir.path(), dir.path())
                .unwrap()
                .boot_time_seconds,
            0,
            "unknown without /proc/stat"
        );
        write(
            dir.path(),
            "/proc/stat",
            "cpu  1 2 3 4\nintr 5\nbtime 1714557600\nprocesses 9\n",
        );
        assert_eq!(
            read_machine_info(dir.path(), dir.path())
                .unwrap()
                .boot_time_seconds,
            1_714_557_600
        );
    }

    #[test]
    fn topology_falls_back_to_cpuinfo() {
        let dir = tempfile::tempdir().unwrap();
        fixture_machine(dir.path());
        std::fs::remove_dir_all(under(dir.path(), "/sys/devices")).unwrap();
        write(
            dir.path(),
            "/proc/cpuinfo",
            "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 1\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 2\nphysical id\t: 0\ncore id\t\t: 1\n\n",
        );
        let info = read_machine_info(dir.path(), dir.path()).unwrap();
        assert_eq!(info.num_cores, 3);
        assert_eq!(info.num_physical_cores, 2);
        assert_eq!(info.num_sockets, 1);
    }

    #[test]
    fn missing_required_file_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        fixture_machine(dir.path());
        std::fs::remove_file(under(dir.path(), "/proc/sys/kernel/pid_max")).unwrap();
        let err = read_machine_info(dir.path(), dir.path()).unwrap_err();
        assert!(err.to_string().contains("pid_max"), "{err}");
    }

    #[test]
    fn swap_table() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority";
        let cases: &[(Option<String>, bool)] = &[
            (None, true),
            (Some(format!("{header}\n")), true),
            (
                Some(format!(
                    "{header}\n/dev/vda2                               partition\t1048572\t\t0\t\t-2\n"
                )),
                false,
            ),
        ];
        for (contents, ok) in cases {
            let dir = tempfile::tempdir().unwrap();
            if let Some(c) = contents {
                write(dir.path(), "/proc/swaps", c);
            }
            let res = check_swap(dir.path());
            assert_eq!(res.is_ok(), *ok, "{contents:?}");
            if let Err(e) = res {
                let msg = e.to_string();
                assert!(
                    msg.starts_with("running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. /proc/swaps contained: [Filename"),
                    "{msg}"
                );
                assert!(msg.contains("/dev/vda2"), "{msg}");
                assert!(msg.ends_with("-2]"), "{msg}");
            }
        }
    }
}
