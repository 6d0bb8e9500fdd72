//! The topology manager (Go: `pkg/kubelet/cm/topologymanager`, v1.20.2): at admission it asks
//! the resource managers (the hint providers: the CPU manager so far) on which NUMA nodes
//! they could satisfy a container (or, with `topologyManagerScope: pod`, the whole pod),
//! merges their hints under `topologyManagerPolicy` ([`policy::merge`]), rejects the pod
//! when the policy does not admit the result (`TopologyAffinityError`, Go's reason and
//! message), and hands the chosen affinity to every provider's allocation.
//!
//! With the `none` policy nothing is computed: every container is allocated with no
//! preference, as Go does.
//!
//! ```
//! use kubelet_core::topologymanager::{merge, NumaMask, ProviderHints, TopologyHint, TopologyPolicy};
//!
//! // CPUs fit on node 0 or 1; a device only on node 1: single-numa-node picks node 1.
//! let cpu: ProviderHints = [("cpu".to_string(), Some(vec![
//!     TopologyHint::on(&[0], true),
//!     TopologyHint::on(&[1], true),
//! ]))].into();
//! let dev: ProviderHints = [("example.com/dev".to_string(), Some(vec![TopologyHint::on(&[1], true)]))].into();
//! let (hint, admit) = merge(TopologyPolicy::SingleNumaNode, &[0, 1], &[cpu, dev]);
//! assert!(admit);
//! assert_eq!(hint.affinity, Some(NumaMask::of(&[1])));
//! ```

pub mod manager;
pub mod policy;

use std::fmt;

pub use manager::{AllocateError, HintProvider, TopologyManager, TopologyScope, MAX_NUMA_NODES};
pub use policy::{merge, ProviderHints, TopologyPolicy};

/// A set of NUMA nodes (Go's `bitmask.BitMask`; nodes 0–63).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumaMask(u64);

impl NumaMask {
    /// The mask of these nodes (nodes above 63 are left out).
    pub fn of(nodes: &[u32]) -> NumaMask {
        NumaMask(
            nodes
                .iter()
                .filter(|n| **n < 64)
                .fold(0, |m, n| m | (1u64 << n)),
        )
    }

    /// How many nodes.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// The nodes, lowest first.
    pub fn nodes(self) -> Vec<u32> {
        (0..64).filter(|n| self.0 & (1u64 << n) != 0).collect()
    }

    /// Whether `node` is in the mask.
    pub fn contains(self, node: u32) -> bool {
        node < 64 && self.0 & (1u64 << node) != 0
    }

    /// The nodes of both.
    pub fn and(self, other: NumaMask) -> NumaMask {
        NumaMask(self.0 & other.0)
    }

    /// Go's `IsNarrowerThan`: fewer nodes, or as many and a lower value.
    pub fn is_narrower_than(self, other: NumaMask) -> bool {
        if self.count() == other.count() {
            return self.0 < other.0;
        }
        self.count() < other.count()
    }

    /// Every non-empty subset of `nodes`, by size then in Go's order (`IterateBitMasks`).
    pub fn subsets(nodes: &[u32]) -> Vec<NumaMask> {
        fn pick(nodes: &[u32], acc: &mut Vec<u32>, size: usize, out: &mut Vec<NumaMask>) {
            if acc.len() == size {
                out.push(NumaMask::of(acc));
                return;
            }
            for (i, n) in nodes.iter().enumerate() {
                acc.push(*n);
                pick(&nodes[i + 1..], acc, size, out);
                acc.pop();
            }
        }
        let mut out = Vec::new();
        for size in 1..=nodes.len() {
            pick(nodes, &mut Vec::new(), size, &mut out);
        }
        out
    }
}

impl fmt::Display for NumaMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes().iter().map(u32::to_string).collect();
        write!(f, "[{}]", nodes.join(","))
    }
}

/// Where a resource could be placed (Go's `TopologyHint`): `affinity` `None` means any node
/// (no preference); `preferred` marks the narrowest placements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopologyHint {
    /// The NUMA nodes, `None`: any.
    pub affinity: Option<NumaMask>,
    /// Whether this is a preferred placement.
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint on these nodes.
    pub fn on(nodes: &[u32], preferred: bool) -> TopologyHint {
        TopologyHint {
            affinity: Some(NumaMask::of(nodes)),
            preferred,
        }
    }

    /// A hint with no node preference.
    pub fn any(preferred: bool) -> TopologyHint {
        TopologyHint {
            affinity: None,
            preferred,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_as_gos_bitmask() {
        let m = NumaMask::of(&[0, 2]);
        assert_eq!(
            (m.count(), m.nodes(), m.to_string()),
            (2, vec![0, 2], "[0,2]".into())
        );
        assert!(NumaMask::of(&[1]).is_narrower_than(m));
        assert!(
            NumaMask::of(&[0, 1]).is_narrower_than(m),
            "as many nodes, lower"
        );
        assert!(!m.is_narrower_than(m));
        assert_eq!(m.and(NumaMask::of(&[2, 3])), NumaMask::of(&[2]));
        let subsets: Vec<String> = NumaMask::subsets(&[0, 1, 2])
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            subsets,
            ["[0]", "[1]", "[2]", "[0,1]", "[0,2]", "[1,2]", "[0,1,2]"]
        );
        assert_eq!(NumaMask::of(&[64, 1]), NumaMask::of(&[1]));
    }
}
