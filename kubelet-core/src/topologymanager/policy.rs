//! How the hints of every provider become one affinity (Go's `Policy.Merge`, v1.20.2):
//! every combination of one hint per resource is merged (the NUMA nodes they all have, and
//! preferred only if all were); the best merge is preferred over not, then narrower (fewer
//! nodes, then lower ones). The policies differ in what they admit and, for
//! `single-numa-node`, in which hints take part.

use std::collections::BTreeMap;

use super::{NumaMask, TopologyHint};

/// `topologyManagerPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TopologyPolicy {
    /// No alignment: every pod admitted, nothing computed (the default).
    #[default]
    None,
    /// The best alignment, admitted whatever it is.
    BestEffort,
    /// Admitted only with a preferred alignment.
    Restricted,
    /// Admitted only when everything fits one NUMA node.
    SingleNumaNode,
}

impl TopologyPolicy {
    /// Parses Go's names (`none`, `best-effort`, `restricted`, `single-numa-node`).
    pub fn parse(name: &str) -> Result<TopologyPolicy, String> {
        match name {
            "none" | "" => Ok(TopologyPolicy::None),
            "best-effort" => Ok(TopologyPolicy::BestEffort),
            "restricted" => Ok(TopologyPolicy::Restricted),
            "single-numa-node" => Ok(TopologyPolicy::SingleNumaNode),
            other => Err(format!("unknown policy: \"{other}\"")),
        }
    }
}

/// One provider's hints, by resource: no entry at all means no preference; `None` for a
/// resource means no preference for it; an empty list means no NUMA node can satisfy it.
pub type ProviderHints = BTreeMap<String, Option<Vec<TopologyHint>>>;

/// The best hint for `providers` on a machine with `numa_nodes`, and whether `policy`
/// admits it. `None` admits everything with no hint.
pub fn merge(
    policy: TopologyPolicy,
    numa_nodes: &[u32],
    providers: &[ProviderHints],
) -> (TopologyHint, bool) {
    let all = NumaMask::of(numa_nodes);
    match policy {
        TopologyPolicy::None => (TopologyHint::default(), true),
        TopologyPolicy::BestEffort => (merge_filtered(all, &filter(providers)), true),
        TopologyPolicy::Restricted => {
            let hint = merge_filtered(all, &filter(providers));
            let admit = hint.preferred;
            (hint, admit)
        }
        TopologyPolicy::SingleNumaNode => {
            let single: Vec<Vec<TopologyHint>> = filter(providers)
                .into_iter()
                .map(|hints| {
                    hints
                        .into_iter()
                        .filter(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1))
                        .collect()
                })
                .collect();
            let mut hint = merge_filtered(all, &single);
            if hint.affinity == Some(all) {
                hint.affinity = None;
            }
            let admit = hint.preferred;
            (hint, admit)
        }
    }
}

/// Every resource's hints as a list (Go's `filterProvidersHints`): no preference becomes
/// `[{any, preferred}]`, no possible affinity `[{any, not preferred}]`.
fn filter(providers: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut out = Vec::new();
    for hints in providers {
        if hints.is_empty() {
            out.push(vec![TopologyHint::any(true)]);
            continue;
        }
        for resource_hints in hints.values() {
            match resource_hints {
                None => out.push(vec![TopologyHint::any(true)]),
                Some(h) if h.is_empty() => out.push(vec![TopologyHint::any(false)]),
                Some(h) => out.push(h.clone()),
            }
        }
    }
    out
}

/// Go's `mergeFilteredHints`: the best of every permutation's merge; `{all, not preferred}`
/// when none has a node in common.
fn merge_filtered(all: NumaMask, hints: &[Vec<TopologyHint>]) -> TopologyHint {
    let mut best = TopologyHint {
        affinity: Some(all),
        preferred: false,
    };
    let mut permutation = Vec::with_capacity(hints.len());
    permutations(hints, &mut permutation, &mut |perm| {
        let mut mask = all;
        let mut preferred = true;
        for h in perm {
            mask = mask.and(h.affinity.unwrap_or(all));
            preferred &= h.preferred;
        }
        if mask.count() == 0 {
            return;
        }
        let best_mask = best.affinity.unwrap_or(all);
        let better = match (preferred, best.preferred) {
            (true, false) => true,
            (false, true) => false,
            _ => mask.is_narrower_than(best_mask),
        };
        if better {
            best = TopologyHint {
                affinity: Some(mask),
                preferred,
            };
        }
    });
    best
}

fn permutations(
    hints: &[Vec<TopologyHint>],
    acc: &mut Vec<TopologyHint>,
    callback: &mut dyn FnMut(&[TopologyHint]),
) {
    let Some((first, rest)) = hints.split_first() else {
        callback(acc);
        return;
    };
    for h in first {
        acc.push(*h);
        permutations(rest, acc, callback);
        acc.pop();
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
