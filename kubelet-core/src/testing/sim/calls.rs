//! The simulated runtime's call counts: per operation, and, for the operations a test asks
//! about, every operation's counts as they stood at that operation's latest call (a test can
//! tell what the runtime was asked before it was asked to act).

use std::collections::HashMap;

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Calls {
    counts: HashMap<&'static str, usize>,
    /// Operation → the counts as they stood at its latest call (that call included).
    at_last: HashMap<&'static str, HashMap<&'static str, usize>>,
}

impl Calls {
    /// Counts a call of `op`.
    pub(super) fn record(&mut self, op: &'static str) {
        *self.counts.entry(op).or_default() += 1;
        if let Some(snapshot) = self.at_last.get_mut(op) {
            snapshot.clone_from(&self.counts);
        }
    }

    /// How many times `op` was called.
    pub(super) fn count(&self, op: &str) -> usize {
        self.counts.get(op).copied().unwrap_or(0)
    }

    /// From now on, each call of `op` keeps a copy of the counts.
    pub(super) fn keep_counts_at(&mut self, op: &'static str) {
        self.at_last.entry(op).or_default();
    }

    /// `of`'s count at `op`'s latest call since [`Self::keep_counts_at`] (0 before any).
    pub(super) fn count_at_last(&self, op: &str, of: &str) -> usize {
        let snapshot = self.at_last.get(op);
        snapshot.and_then(|s| s.get(of)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_as_they_stood_at_the_latest_call() {
        let mut calls = Calls::default();
        calls.record("Create");
        calls.keep_counts_at("Create");
        for op in ["Status", "Status", "Create", "Status", "List"] {
            calls.record(op);
        }
        assert_eq!(
            (
                calls.count("Status"),
                calls.count("Create"),
                calls.count("Other")
            ),
            (3, 2, 0)
        );
        assert_eq!(calls.count_at_last("Create", "Status"), 2);
        assert_eq!(calls.count_at_last("Create", "Create"), 2);
        assert_eq!(calls.count_at_last("Create", "List"), 0);
        assert_eq!(
            calls.count_at_last("List", "Status"),
            0,
            "not kept for List"
        );
    }
}
