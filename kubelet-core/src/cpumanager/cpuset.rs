//! Sets of logical CPUs in the Linux list format (`0-3,8,10-11`): what `cpuset.cpus` holds
//! and what Go's `cpuset` package prints, so a set written by either kubelet reads the same
//! in the other. Parsing is [`crate::cpu::parse_cpuset`]'s (bounded; it also takes what
//! Go's stricter parser refuses, such as spaces around elements).

use std::collections::BTreeSet;
use std::fmt;

pub use crate::cpu::CpuSetError;

/// A set of logical CPU ids, kept sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// The empty set.
    pub fn new() -> CpuSet {
        CpuSet::default()
    }

    /// Parses a Linux CPU list (`""` is the empty set), as [`crate::cpu::parse_cpuset`].
    pub fn parse(list: &str) -> Result<CpuSet, CpuSetError> {
        crate::cpu::parse_cpuset(list).map(CpuSet)
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in it.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    /// The ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The CPUs in either.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    /// The CPUs in both.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// The CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

/// Go's `CPUSet.String()`: runs of consecutive ids as `a-b` (two included), others alone,
/// comma-separated; the empty set is `""`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = ids.next() {
            let mut end = start;
            while ids.peek() == Some(&(end + 1)) {
                end += 1;
                ids.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_and_prints_as_go() {
        for (list, ids, printed) in [
            ("", vec![], ""),
            ("0", vec![0], "0"),
            ("0-3", vec![0, 1, 2, 3], "0-3"),
            ("0,1", vec![0, 1], "0-1"),
            ("5,0-2,9", vec![0, 1, 2, 5, 9], "0-2,5,9"),
            ("3-3", vec![3], "3"),
            ("2,2,1", vec![1, 2], "1-2"),
        ] {
            let set = CpuSet::parse(list).unwrap();
            assert_eq!(set.iter().collect::<Vec<_>>(), ids, "{list}");
            assert_eq!(set.to_string(), printed, "{list}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_list() {
        for list in ["a", "1-", "-1", "1--2", "3-1", "0-70000", "1-2-3", "0,x"] {
            assert!(CpuSet::parse(list).is_err(), "{list:?}");
        }
    }

    #[test]
    fn set_operations() {
        let a = CpuSet::parse("0-5").unwrap();
        let b = CpuSet::parse("4-7").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-7");
        assert_eq!(a.intersection(&b).to_string(), "4-5");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert!(CpuSet::parse("1-2").unwrap().is_subset(&a));
        assert!(!b.is_subset(&a));
    }

    proptest! {
        #[test]
        fn printing_then_parsing_gives_the_set(ids in proptest::collection::btree_set(0u32..300, 0..64)) {
            let set: CpuSet = ids.iter().copied().collect();
            let printed = set.to_string();
            prop_assert_eq!(CpuSet::parse(&printed).unwrap(), set);
        }

        #[test]
        fn parsing_never_panics(list in "[0-9,\\-]{0,40}") {
            let _ = CpuSet::parse(&list);
        }
    }
}
