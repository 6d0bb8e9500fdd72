//! Which CPUs an exclusive request gets (Go's `takeByTopology`, the topology-aware best fit
//! of the v1.20.2 kubelet the control plane comes from): whole sockets first when the request
//! is at least a socket's worth, then whole cores when it is at least a core's worth, then
//! single threads, preferring partly used cores on the sockets the request already has.
//!
//! Go's orderings are written as chains of `||` (not a strict order, so `sort.Slice` may
//! permute ties differently between runs); here they are the lexicographic orders its
//! comments document, which is what the chains give whenever the keys agree.

use std::cmp::Reverse;

use super::cpuset::CpuSet;
use super::topology::CpuTopology;

/// Why no set of CPUs could be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeError {
    /// Fewer CPUs are free than asked for (Go's message).
    #[error("not enough cpus available to satisfy request")]
    NotEnough,
}

/// The CPUs still free and what has been taken so far (Go's `cpuAccumulator`).
struct Accumulator<'a> {
    topo: &'a CpuTopology,
    free: CpuTopology,
    needed: usize,
    result: CpuSet,
}

impl Accumulator<'_> {
    fn take(&mut self, cpus: &CpuSet) {
        self.result = self.result.union(cpus);
        self.free = self
            .free
            .keep_only(&self.free.cpus().difference(&self.result));
        self.needed = self.needed.saturating_sub(cpus.len());
    }

    /// Takes `units` (whole sockets or cores of `size` CPUs) in order while at least one
    /// more whole unit is needed; true once the request is satisfied.
    fn take_whole(&mut self, units: Vec<CpuSet>, size: usize) -> bool {
        for cpus in units {
            self.take(&cpus);
            if self.needed == 0 {
                return true;
            }
            if !self.needs(size) {
                break;
            }
        }
        false
    }

    fn needs(&self, n: usize) -> bool {
        n > 0 && self.needed >= n
    }

    fn is_socket_free(&self, socket: u32) -> bool {
        self.free.cpus_in_sockets(&[socket]).len() == self.topo.cpus_per_socket()
    }

    fn is_core_free(&self, core: u32) -> bool {
        self.free.cpus_in_cores(&[core]).len() == self.topo.cpus_per_core()
    }

    fn free_cores_of(&self, socket: u32) -> Vec<u32> {
        let cpus = self.free.cpus_in_sockets(&[socket]);
        let mut cores: Vec<u32> = self
            .free
            .keep_only(&cpus)
            .cores()
            .into_iter()
            .filter(|c| self.is_core_free(*c))
            .collect();
        cores.sort_unstable();
        cores
    }

    /// Whole free cores: sockets with fewer free cores first, then by socket and core id.
    fn free_cores(&self) -> Vec<u32> {
        let mut sockets: Vec<(usize, u32)> = self
            .free
            .sockets()
            .into_iter()
            .map(|s| (self.free_cores_of(s).len(), s))
            .collect();
        sockets.sort_unstable();
        sockets
            .into_iter()
            .flat_map(|(_, s)| self.free_cores_of(s))
            .collect()
    }

    /// Free threads, core by core: cores on sockets the result already uses most first, then
    /// sockets with fewer free CPUs, cores with fewer free CPUs, socket id, core id.
    fn free_cpus(&self) -> Vec<u32> {
        let mut cores: Vec<_> = self
            .free
            .cores()
            .into_iter()
            .filter_map(|core| {
                let socket = self.topo.info(core)?.socket;
                let colocated = self
                    .topo
                    .cpus_in_sockets(&[socket])
                    .intersection(&self.result)
                    .len();
                let socket_free = self.free.cpus_in_sockets(&[socket]).len();
                let core_free = self.free.cpus_in_cores(&[core]).len();
                Some((
                    (Reverse(colocated), socket_free, core_free, socket, core),
                    core,
                ))
            })
            .collect();
        cores.sort_unstable();
        cores
            .into_iter()
            .flat_map(|(_, core)| self.free.cpus_in_cores(&[core]).iter().collect::<Vec<_>>())
            .collect()
    }
}

/// Takes `n` CPUs of `available` (a subset of `topo`'s) by topology: see the module docs.
pub fn take_by_topology(
    topo: &CpuTopology,
    available: &CpuSet,
    n: usize,
) -> Result<CpuSet, TakeError> {
    let mut acc = Accumulator {
        topo,
        free: topo.keep_only(available),
        needed: n,
        result: CpuSet::new(),
    };
    if acc.needed == 0 {
        return Ok(acc.result);
    }
    if acc.needed > acc.free.cpus().len() {
        return Err(TakeError::NotEnough);
    }
    // 1. Whole sockets.
    if acc.needs(topo.cpus_per_socket()) {
        let sockets: Vec<CpuSet> = acc
            .free
            .sockets()
            .into_iter()
            .filter(|s| acc.is_socket_free(*s))
            .map(|s| acc.free.cpus_in_sockets(&[s]))
            .collect();
        if acc.take_whole(sockets, topo.cpus_per_socket()) {
            return Ok(acc.result);
        }
    }
    // 2. Whole cores.
    if acc.needs(topo.cpus_per_core()) {
        let cores: Vec<CpuSet> = acc
            .free_cores()
            .into_iter()
            .map(|c| acc.free.cpus_in_cores(&[c]))
            .collect();
        if acc.take_whole(cores, topo.cpus_per_core()) {
            return Ok(acc.result);
        }
    }
    // 3. Single threads.
    for cpu in acc.free_cpus() {
        if acc.needs(1) {
            acc.take(&[cpu].into_iter().collect());
        }
        if acc.needed == 0 {
            return Ok(acc.result);
        }
    }
    Err(TakeError::NotEnough)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cpumanager::topology::fixtures::{dual_socket_ht, single_socket_ht};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse(s).unwrap()
    }

    /// Go's `TestTakeByTopology` (cpu_assignment_test.go, v1.20.2), case for case.
    #[test]
    fn takes_sockets_then_cores_then_threads() {
        let single = single_socket_ht();
        let dual = dual_socket_ht();
        type Case<'a> = (
            &'a str,
            &'a CpuTopology,
            &'a str,
            usize,
            Result<&'a str, TakeError>,
        );
        let cases: [Case<'_>; 9] = [
            (
                "more than available",
                &single,
                "0,2,4,6",
                5,
                Err(TakeError::NotEnough),
            ),
            ("zero", &single, "0-7", 0, Ok("")),
            ("one", &single, "0-7", 1, Ok("0")),
            ("one, some taken", &single, "1,3,5-7", 1, Ok("6")),
            ("two", &single, "0-7", 2, Ok("0,4")),
            ("all", &single, "0-7", 8, Ok("0-7")),
            ("two, one core free", &single, "0-3,6", 2, Ok("2,6")),
            ("dual: one, from socket 0", &dual, "1-5,7-11", 1, Ok("2")),
            ("dual: a socket", &dual, "0-11", 6, Ok("0,2,4,6,8,10")),
        ];
        for (name, topo, available, n, want) in cases {
            let got = take_by_topology(topo, &set(available), n).map(|s| s.to_string());
            assert_eq!(got, want.map(str::to_string), "{name}");
        }
    }

    #[test]
    fn a_core_partly_used_is_filled_first() {
        let single = single_socket_ht();
        // Core 0 has only CPU 4 left: one whole core (1: CPUs 1 and 5), then that thread.
        assert_eq!(
            take_by_topology(&single, &set("1-7"), 3)
                .unwrap()
                .to_string(),
            "1,4-5"
        );
    }
}
