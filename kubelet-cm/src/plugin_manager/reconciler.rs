//! The reconciler's decisions, without I/O (Go's `reconciler.reconcile` and the
//! per-socket bookkeeping of its operation executor, `goroutinemap` with exponential
//! back-off): which sockets to deregister and which to register, given the desired and the
//! actual state, the operations running and the failures' back-off. The times are passed
//! in, so the tests drive the clock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The first wait after a failed registration (Go's `initialDurationBeforeRetry`).
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(500);
/// The longest wait after failed registrations (Go's `maxDurationBeforeRetry`).
pub const BACKOFF_MAX: Duration = Duration::from_secs(122);

/// Something the reconcile loop should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    /// Deregister the plugin registered from this socket: the socket is gone, or is another
    /// file now. Done at once on the loop, before any registration of the same pass.
    Deregister {
        /// The socket.
        socket: PathBuf,
    },
    /// Register the plugin on this socket generation: a task of its own.
    Register {
        /// The socket.
        socket: PathBuf,
        /// Its generation in the desired state.
        generation: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    generation: u64,
    at: Instant,
    delay: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Entry {
    /// The generation whose registration is running.
    running: Option<u64>,
    /// The last failed registration, which holds the next one back.
    failure: Option<Failure>,
}

/// The registrations running and the back-off of failed ones, by socket (Go's
/// `goroutinemap` keyed by socket path): at most one registration of a socket runs at a
/// time, and after a failure the socket waits [`BACKOFF_INITIAL`], doubled after every
/// further failure up to [`BACKOFF_MAX`]. A success clears the back-off, and so does a new
/// generation of the socket (a re-created socket is a new plugin; Go keeps waiting).
#[derive(Debug, Default)]
pub(crate) struct Operations {
    entries: BTreeMap<PathBuf, Entry>,
}

impl Operations {
    /// Whether a registration of `socket` is running.
    pub fn is_running(&self, socket: &Path) -> bool {
        self.entries
            .get(socket)
            .is_some_and(|e| e.running.is_some())
    }

    /// Whether `generation` of `socket` may be registered at `now`: nothing runs for the
    /// socket and no back-off of the same generation holds it.
    pub fn may_register(&self, socket: &Path, generation: u64, now: Instant) -> bool {
        let Some(entry) = self.entries.get(socket) else {
            return true;
        };
        if entry.running.is_some() {
            return false;
        }
        match &entry.failure {
            Some(f) if f.generation == generation => now.saturating_duration_since(f.at) > f.delay,
            _ => true,
        }
    }

    /// A registration of `generation` of `socket` started.
    pub fn started(&mut self, socket: &Path, generation: u64) {
        self.entries
            .entry(socket.to_path_buf())
            .or_default()
            .running = Some(generation);
    }

    /// The registration of `generation` of `socket` ended at `now`: succeeded (`ok`) or
    /// failed. Returns the back-off a failure starts.
    pub fn finished(
        &mut self,
        socket: &Path,
        generation: u64,
        ok: bool,
        now: Instant,
    ) -> Option<Duration> {
        if ok {
            self.entries.remove(socket);
            return None;
        }
        let entry = self.entries.entry(socket.to_path_buf()).or_default();
        entry.running = None;
        let delay = match &entry.failure {
            Some(f) if f.generation == generation => (f.delay * 2).min(BACKOFF_MAX),
            _ => BACKOFF_INITIAL,
        };
        entry.failure = Some(Failure {
            generation,
            at: now,
            delay,
        });
        Some(delay)
    }

    /// Drops the back-off of sockets that are no longer desired.
    pub fn prune(&mut self, desired: &BTreeMap<PathBuf, u64>) {
        self.entries
            .retain(|socket, e| e.running.is_some() || desired.contains_key(socket));
    }
}

/// One reconcile pass (Go's `reconcile`): every registered socket whose generation is no
/// longer desired (gone, or re-created) is deregistered, unless its registration is still
/// running; then every desired generation that is not the registered one is registered,
/// when [`Operations::may_register`] lets it. A socket deregistered in this pass may be
/// registered again in the same pass, since deregistration is done first and at once.
pub(crate) fn plan(
    desired: &BTreeMap<PathBuf, u64>,
    actual: &BTreeMap<PathBuf, u64>,
    operations: &Operations,
    now: Instant,
) -> Vec<Operation> {
    let mut planned = Vec::new();
    for (socket, registered) in actual {
        if desired.get(socket) != Some(registered) && !operations.is_running(socket) {
            planned.push(Operation::Deregister {
                socket: socket.clone(),
            });
        }
    }
    for (socket, &generation) in desired {
        let registered = actual.get(socket);
        if registered == Some(&generation) {
            continue;
        }
        let deregistered = registered.is_none()
            || planned.contains(&Operation::Deregister {
                socket: socket.clone(),
            });
        if deregistered && operations.may_register(socket, generation, now) {
            planned.push(Operation::Register {
                socket: socket.clone(),
                generation,
            });
        }
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket(name: &str) -> PathBuf {
        PathBuf::from("/var/lib/kubelet/plugins_registry").join(name)
    }

    fn states(pairs: &[(&str, u64)]) -> BTreeMap<PathBuf, u64> {
        pairs.iter().map(|&(s, g)| (socket(s), g)).collect()
    }

    fn register(name: &str, generation: u64) -> Operation {
        Operation::Register {
            socket: socket(name),
            generation,
        }
    }

    fn deregister(name: &str) -> Operation {
        Operation::Deregister {
            socket: socket(name),
        }
    }

    #[test]
    fn new_sockets_are_registered_and_gone_ones_deregistered() {
        let now = kubelet_core::clock::monotonic_now();
        let ops = Operations::default();
        assert_eq!(
            plan(&states(&[("a", 1), ("b", 2)]), &states(&[]), &ops, now),
            vec![register("a", 1), register("b", 2)]
        );
        // Registered and still desired: nothing to do.
        assert_eq!(
            plan(&states(&[("a", 1)]), &states(&[("a", 1)]), &ops, now),
            vec![]
        );
        assert_eq!(
            plan(
                &states(&[("a", 1)]),
                &states(&[("a", 1), ("b", 2)]),
                &ops,
                now
            ),
            vec![deregister("b")]
        );
        assert_eq!(plan(&states(&[]), &states(&[]), &ops, now), vec![]);
    }

    #[test]
    fn a_recreated_socket_is_deregistered_then_registered() {
        let now = kubelet_core::clock::monotonic_now();
        let ops = Operations::default();
        assert_eq!(
            plan(&states(&[("a", 5)]), &states(&[("a", 1)]), &ops, now),
            vec![deregister("a"), register("a", 5)]
        );
    }

    #[test]
    fn one_operation_per_socket() {
        let now = kubelet_core::clock::monotonic_now();
        let mut ops = Operations::default();
        ops.started(&socket("a"), 1);
        assert!(ops.is_running(&socket("a")));
        // Not registered again while the registration runs.
        assert_eq!(plan(&states(&[("a", 1)]), &states(&[]), &ops, now), vec![]);
        // Re-created while registering: nothing until it ends.
        assert_eq!(plan(&states(&[("a", 2)]), &states(&[]), &ops, now), vec![]);
        // Registered by then but gone: deregistered once it ends.
        assert_eq!(plan(&states(&[]), &states(&[("a", 1)]), &ops, now), vec![]);
        assert_eq!(ops.finished(&socket("a"), 1, true, now), None);
        assert_eq!(
            plan(&states(&[]), &states(&[("a", 1)]), &ops, now),
            vec![deregister("a")]
        );
    }

    #[test]
    fn failures_back_off_exponentially() {
        let start = kubelet_core::clock::monotonic_now();
        let mut ops = Operations::default();
        let desired = states(&[("a", 1)]);
        let mut now = start;
        let mut want = BACKOFF_INITIAL;
        for _ in 0..12 {
            assert_eq!(
                plan(&desired, &states(&[]), &ops, now),
                vec![register("a", 1)]
            );
            ops.started(&socket("a"), 1);
            assert_eq!(ops.finished(&socket("a"), 1, false, now), Some(want));
            // Held back up to and including the end of the delay (Go's `<=`) ...
            assert_eq!(plan(&desired, &states(&[]), &ops, now), vec![]);
            now += want;
            assert_eq!(plan(&desired, &states(&[]), &ops, now), vec![]);
            // ... and free just after it.
            now += Duration::from_millis(1);
            want = (want * 2).min(BACKOFF_MAX);
        }
        assert_eq!(want, BACKOFF_MAX);
        // Another socket is not held back.
        assert_eq!(
            plan(&states(&[("b", 2)]), &states(&[]), &ops, start),
            vec![register("b", 2)]
        );
    }

    #[test]
    fn success_or_a_new_generation_clears_the_back_off() {
        let now = kubelet_core::clock::monotonic_now();
        let mut ops = Operations::default();
        ops.started(&socket("a"), 1);
        ops.finished(&socket("a"), 1, false, now);
        ops.started(&socket("a"), 1);
        assert_eq!(
            ops.finished(&socket("a"), 1, false, now),
            Some(BACKOFF_INITIAL * 2)
        );
        // The socket was re-created: tried at once.
        assert_eq!(
            plan(&states(&[("a", 2)]), &states(&[]), &ops, now),
            vec![register("a", 2)]
        );
        ops.started(&socket("a"), 2);
        // And its failure starts the back-off over.
        assert_eq!(
            ops.finished(&socket("a"), 2, false, now),
            Some(BACKOFF_INITIAL)
        );
        let later = now + BACKOFF_INITIAL + Duration::from_millis(1);
        ops.started(&socket("a"), 2);
        assert_eq!(ops.finished(&socket("a"), 2, true, later), None);
        ops.started(&socket("a"), 2);
        assert_eq!(
            ops.finished(&socket("a"), 2, false, later),
            Some(BACKOFF_INITIAL)
        );
    }

    #[test]
    fn pruning_forgets_sockets_no_longer_desired() {
        let now = kubelet_core::clock::monotonic_now();
        let mut ops = Operations::default();
        ops.started(&socket("a"), 1);
        ops.finished(&socket("a"), 1, false, now);
        ops.started(&socket("b"), 1);
        ops.prune(&states(&[]));
        // The running one stays; the failed one is forgotten.
        assert!(ops.is_running(&socket("b")));
        assert!(ops.may_register(&socket("a"), 1, now));
    }
}
