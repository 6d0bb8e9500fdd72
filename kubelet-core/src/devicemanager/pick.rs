//! The order in which the device manager picks devices (Go v1.20.2's `devicesToAllocate` and
//! `filterByAffinity`): the NUMA classes of the free devices, taking from an ordered list, and
//! the plugin's preferred allocation asked where Go asks it.

use std::collections::{BTreeMap, BTreeSet};

use super::state::ResourceState;
use crate::topologymanager::NumaMask;

/// A `GetPreferredAllocation` call admission left to make, and how its answer changes the
/// devices chosen (Go's `devicesToAllocate` asks it at one of two points: among the
/// affinity's devices when they are more than needed, or else among every free device once
/// the affinity's are taken).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreferenceQuery {
    /// `available_deviceIDs`.
    pub available: Vec<String>,
    /// `must_include_deviceIDs` (the devices already taken when it is asked).
    pub must_include: Vec<String>,
    /// `allocation_size`: the container's whole request.
    pub size: usize,
    /// The devices taken before the question (kept whatever the answer).
    pub fixed: Vec<String>,
    /// Where the answer may pick from (Go intersects the answer with it).
    pub pool: Vec<String>,
    /// The devices to fill up with, in order, when the answer is short.
    pub fallback: Vec<String>,
}

impl PreferenceQuery {
    /// The devices chosen with the plugin's answer: the fixed ones, then the answer's within
    /// the pool, then the fallback order, up to the request.
    pub fn choose(&self, answer: &[String]) -> BTreeSet<String> {
        let mut chosen: BTreeSet<String> = self.fixed.iter().cloned().collect();
        let mut needed = self.size.saturating_sub(chosen.len());
        let preferred = answer
            .iter()
            .filter(|d| self.pool.contains(d))
            .cloned()
            .collect::<Vec<_>>();
        take(preferred.into_iter(), &mut chosen, &mut needed);
        take(self.fallback.iter().cloned(), &mut chosen, &mut needed);
        chosen
    }
}

/// Adds devices from `from` to `chosen` until `needed` reaches 0; true once it has (Go's
/// `allocateRemainingFrom`).
pub(super) fn take(
    from: impl Iterator<Item = String>,
    chosen: &mut BTreeSet<String>,
    needed: &mut usize,
) -> bool {
    for d in from {
        if *needed == 0 {
            break;
        }
        if chosen.insert(d) {
            *needed -= 1;
        }
    }
    *needed == 0
}

/// Go's `filterByAffinity`: the available devices split into those on the affinity's NUMA
/// nodes, those on other nodes, and those without topology. Without an affinity or any
/// topology, everything is in the last list.
pub(super) fn filter_by_affinity(
    r: &ResourceState,
    available: &BTreeSet<String>,
    affinity: Option<NumaMask>,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let Some(mask) = affinity.filter(|_| r.has_topology()) else {
        return (Vec::new(), Vec::new(), available.iter().cloned().collect());
    };
    // Devices on nodes holding more available devices come first in each list, as Go
    // orders its NUMA nodes (a device on several nodes counts for the first of them).
    let nodes_of = |d: &String| {
        r.devices
            .get(d)
            .map(|d| d.numa_nodes.clone())
            .unwrap_or_default()
    };
    let mut per_node: BTreeMap<i64, usize> = BTreeMap::new();
    for d in available {
        for n in nodes_of(d) {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let mut nodes: Vec<(i64, usize)> = per_node.into_iter().collect();
    nodes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rank = |n: i64| {
        nodes
            .iter()
            .position(|(m, _)| *m == n)
            .unwrap_or(usize::MAX)
    };
    let (mut aligned, mut unaligned, mut none) = (Vec::new(), Vec::new(), Vec::new());
    for d in available {
        let ns = nodes_of(d);
        let Some(first) = ns.iter().copied().min_by_key(|n| rank(*n)) else {
            none.push(d.clone());
            continue;
        };
        let in_mask = u32::try_from(first).is_ok_and(|n| mask.contains(n));
        if in_mask {
            aligned.push((rank(first), d.clone()));
        } else {
            unaligned.push((rank(first), d.clone()));
        }
    }
    aligned.sort();
    unaligned.sort();
    (
        aligned.into_iter().map(|(_, d)| d).collect(),
        unaligned.into_iter().map(|(_, d)| d).collect(),
        none,
    )
}
