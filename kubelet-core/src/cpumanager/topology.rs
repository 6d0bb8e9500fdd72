//! The machine's CPU topology as the CPU manager sees it (Go's `topology.CPUTopology` and
//! `CPUDetails`): every logical CPU with its core, socket and NUMA node. A core is named by
//! its lowest logical CPU, as Go's `getUniqueCoreID` does, so core ids are unique across
//! sockets (sysfs' `core_id` is only unique within one). Built from the machine's own CPU
//! records ([`MachineInfo::topology`](crate::stats::MachineInfo)) and their NUMA nodes.

use std::collections::{BTreeMap, BTreeSet};

use super::cpuset::CpuSet;
use crate::stats::CpuTopology as MachineCpu;

/// Where one logical CPU sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuInfo {
    /// The core (its lowest logical CPU).
    pub core: u32,
    /// The socket (physical package).
    pub socket: u32,
    /// The NUMA node.
    pub numa_node: u32,
}

/// The CPUs of a machine (or the part of it still free: [`keep_only`](Self::keep_only)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTopology {
    cpus: BTreeMap<u32, CpuInfo>,
}

impl CpuTopology {
    /// The topology of the machine's CPUs (`core` being sysfs' per-socket `core_id`); the
    /// threads of one core are those with the same socket and `core_id`.
    pub fn new(cpus: &[MachineCpu]) -> CpuTopology {
        let mut lowest: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        for c in cpus {
            let e = lowest.entry((c.socket, c.core)).or_insert(c.cpu);
            *e = (*e).min(c.cpu);
        }
        let cpus = cpus
            .iter()
            .map(|c| {
                let core = lowest.get(&(c.socket, c.core)).copied().unwrap_or(c.cpu);
                let info = CpuInfo {
                    core,
                    socket: c.socket,
                    numa_node: c.numa_node,
                };
                (c.cpu, info)
            })
            .collect();
        CpuTopology { cpus }
    }

    /// Where `cpu` sits, if it is here.
    pub fn info(&self, cpu: u32) -> Option<CpuInfo> {
        self.cpus.get(&cpu).copied()
    }

    /// Every CPU.
    pub fn cpus(&self) -> CpuSet {
        self.cpus.keys().copied().collect()
    }

    /// The cores (by their lowest CPU).
    pub fn cores(&self) -> BTreeSet<u32> {
        self.cpus.values().map(|i| i.core).collect()
    }

    /// The sockets.
    pub fn sockets(&self) -> BTreeSet<u32> {
        self.cpus.values().map(|i| i.socket).collect()
    }

    /// The NUMA nodes.
    pub fn numa_nodes(&self) -> BTreeSet<u32> {
        self.cpus.values().map(|i| i.numa_node).collect()
    }

    /// The CPUs of these cores.
    pub fn cpus_in_cores(&self, cores: &[u32]) -> CpuSet {
        self.select(|i| cores.contains(&i.core))
    }

    /// The CPUs of these sockets.
    pub fn cpus_in_sockets(&self, sockets: &[u32]) -> CpuSet {
        self.select(|i| sockets.contains(&i.socket))
    }

    /// The CPUs of these NUMA nodes.
    pub fn cpus_in_numa_nodes(&self, nodes: &[u32]) -> CpuSet {
        self.select(|i| nodes.contains(&i.numa_node))
    }

    /// Threads per core (Go's `CPUsPerCore`: CPUs over cores; 0 without CPUs).
    pub fn cpus_per_core(&self) -> usize {
        self.cpus.len().checked_div(self.cores().len()).unwrap_or(0)
    }

    /// CPUs per socket (Go's `CPUsPerSocket`).
    pub fn cpus_per_socket(&self) -> usize {
        self.cpus
            .len()
            .checked_div(self.sockets().len())
            .unwrap_or(0)
    }

    /// Only the CPUs of `cpus` (Go's `KeepOnly`): what is still free.
    pub fn keep_only(&self, cpus: &CpuSet) -> CpuTopology {
        CpuTopology {
            cpus: self
                .cpus
                .iter()
                .filter(|(c, _)| cpus.contains(**c))
                .map(|(c, i)| (*c, *i))
                .collect(),
        }
    }

    fn select(&self, keep: impl Fn(&CpuInfo) -> bool) -> CpuSet {
        self.cpus
            .iter()
            .filter(|(_, i)| keep(i))
            .map(|(c, _)| *c)
            .collect()
    }
}

/// Go's test machines (policy_test.go, v1.20.2), for the CPU manager's tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    fn machine(cpus: u32, core: impl Fn(u32) -> u32, socket: impl Fn(u32) -> u32) -> CpuTopology {
        let cpus: Vec<MachineCpu> = (0..cpus)
            .map(|cpu| MachineCpu {
                cpu,
                core: core(cpu),
                socket: socket(cpu),
                numa_node: socket(cpu),
            })
            .collect();
        CpuTopology::new(&cpus)
    }

    /// One socket, 4 cores × 2 threads: CPU n and n+4 are siblings.
    pub(crate) fn single_socket_ht() -> CpuTopology {
        machine(8, |c| c % 4, |_| 0)
    }

    /// Two sockets (and NUMA nodes), 3 cores × 2 threads each: even CPUs on socket 0, CPU n
    /// and n+6 siblings.
    pub(crate) fn dual_socket_ht() -> CpuTopology {
        machine(12, |c| c % 6, |c| c % 2)
    }

    /// Two sockets (and NUMA nodes) of 4 single-thread cores: CPUs 0-3 and 4-7.
    pub(crate) fn dual_socket_no_ht() -> CpuTopology {
        machine(8, |c| c, |c| c / 4)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn cores_are_named_by_their_lowest_thread() {
        let t = dual_socket_ht();
        assert_eq!(t.cpus().to_string(), "0-11");
        assert_eq!(
            t.cores().into_iter().collect::<Vec<_>>(),
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(t.info(7).map(|i| (i.core, i.socket)), Some((1, 1)));
        assert_eq!(t.cpus_in_cores(&[0, 4]).to_string(), "0,4,6,10");
        assert_eq!(t.cpus_in_sockets(&[1]).to_string(), "1,3,5,7,9,11");
        assert_eq!(t.cpus_in_numa_nodes(&[0]).to_string(), "0,2,4,6,8,10");
        assert_eq!((t.cpus_per_core(), t.cpus_per_socket()), (2, 6));
        // sysfs' core_id repeats on every socket; the lowest thread tells them apart.
        let per_socket_ids: Vec<MachineCpu> = (0..4)
            .map(|cpu| MachineCpu {
                cpu,
                core: cpu % 2,
                socket: cpu / 2,
                numa_node: 0,
            })
            .collect();
        let t = CpuTopology::new(&per_socket_ids);
        assert_eq!(t.cores().into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn keep_only_is_what_is_free() {
        let t = dual_socket_ht();
        let free = t.keep_only(&CpuSet::parse("0-2,9").unwrap());
        assert_eq!(free.cpus().to_string(), "0-2,9");
        assert_eq!(free.sockets().into_iter().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(free.cpus_in_sockets(&[1]).to_string(), "1,9");
        assert_eq!(CpuTopology::default().cpus_per_core(), 0);
        assert_eq!(dual_socket_no_ht().cpus_per_core(), 1);
    }
}
