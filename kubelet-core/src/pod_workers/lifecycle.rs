//! The pod worker's lifecycle: one state enum whose variants carry their data, and one pure
//! transition function, [`transition`], that decides everything a worker does.
//!
//! # States
//! ```text
//!                       Sync                                   Kill (removed, deleted,
//!                  ┌──────────┐                                 │     or a terminal sync)
//!                  ▼          │                                 ▼
//!   ┌───────────────────────────────────┐  Kill / Terminal  ┌──────────────────────────────┐
//!   │ Syncing                           │ ────────────────► │ Terminating { grace, cleanup }│
//!   │  Idle{next} ─Sync/due─► Requested │                   │  Requested ─Wake─► Running    │
//!   │  Requested ─Wake─► Running{again} │                   │  Running ─shorter grace─►     │
//!   │  Running ─SyncDone─► Idle|Requested│                   │    Cancelling ─► Requested    │
//!   └───────────────────────────────────┘                   │  Running ─StopDone(err)─►     │
//!                                                           │    RetryAt ─due─► Requested   │
//!                                                           └──────────────┬───────────────┘
//!                                                                          │ StopDone(ok)
//!                                                                          ▼
//!   ┌──────────┐  CleanupDone(ok)  ┌────────────────────────────────────────────────────┐
//!   │ Finished │ ◄──────────────── │ Terminated { cleanup }                              │
//!   └──────────┘                   │  Idle (a completed pod still desired: kept for logs)│
//!                                  │  ─Kill(removed/deleted)─► Requested ─Wake─► Running │
//!                                  │  Running ─CleanupDone(err)─► RetryAt ─due─► Requested│
//!                                  └────────────────────────────────────────────────────┘
//! ```
//! - **Syncing**: the pod should run. Every sync runs the sync step (create what is missing,
//!   restart what the restart policy allows, publish status). A sync asked for while one runs
//!   is remembered (`again`) and runs right after it: updates coalesce, latest spec wins. A
//!   sync returns when to sync next (`syncFrequency` with jitter, or earlier for a backoff).
//!   A new static pod waits (re-checking every 500ms) while an older pod with the same full
//!   name is still terminating.
//! - **Terminating**: stop every container with the grace period, then the sandbox. A later
//!   kill may only *shorten* the grace period; doing so cancels the running stop, which then
//!   starts again with the shorter period. Sync updates are ignored from here on: a
//!   terminating pod never runs again. A kill that arrives during a sync waits for the sync to
//!   return (the worker does one thing at a time). A failed stop is retried every 2s.
//! - **Terminated**: nothing runs, the final status is recorded. A pod that is still desired
//!   (it completed) stays here with its exited containers kept for logs. Once it is removed
//!   from its source or deleted (`cleanup`), its containers, sandboxes, volumes and pod-level
//!   resources are removed (retried every 2s on failure).
//! - **Finished**: cleaned up; a deleted pod is reported terminated to the status manager and
//!   the worker's task ends. The sync loop forgets the worker at housekeeping.
//!
//! # Who may call what
//! - The **sync loop** (through `PodWorkers::update_pod`) delivers [`Event::Sync`] and
//!   [`Event::Kill`]. It never blocks: the transition runs under the worker's lock and only the
//!   immediate actions (claiming a static pod's name, cancelling a running stop) execute on
//!   the caller; long work is left as a `Requested` state for the worker.
//! - The **worker task** delivers [`Event::Wake`] whenever it is free (woken by the sync loop,
//!   by a deadline from [`State::deadline`], or right after finishing a step) and the `*Done`
//!   events with the result of the long action it ran. At most one long action
//!   ([`Action::Sync`], [`Action::Stop`], [`Action::Cleanup`]) is in flight per worker; the
//!   state records which.
//!
//! [`transition`] is pure: it reads only its arguments (the clock arrives in [`Ctx::now`]),
//! so the whole table is unit-tested below, state by event.

use std::time::Duration;

use tokio::time::Instant;

use super::WorkerState;

/// How long a new static pod waits before checking again whether the old pod with its name
/// has terminated.
pub(crate) const STATIC_NAME_RETRY: Duration = Duration::from_millis(500);
/// How long a failed stop or cleanup waits before it is tried again.
pub(crate) const STOP_RETRY: Duration = Duration::from_secs(2);

/// A worker's lifecycle state. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum State {
    /// The pod should run.
    Syncing(SyncWork),
    /// The pod is being stopped.
    Terminating {
        /// The grace period of the stop (only ever shortened).
        grace: Duration,
        /// Once stopped, remove everything (the pod left its source or was deleted).
        cleanup: bool,
        /// Where the stop is.
        stop: StepWork,
    },
    /// The pod is stopped.
    Terminated {
        /// Remove everything (the pod left its source or was deleted).
        cleanup: bool,
        /// Where the cleanup is ([`StepWork::Idle`] while no cleanup is wanted).
        work: StepWork,
    },
    /// Cleaned up; the worker's task ends.
    Finished,
}

/// Where syncing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SyncWork {
    /// No sync runs; the next one is due at `next` (`None`: only when asked).
    Idle {
        /// When the next periodic or backoff sync is due.
        next: Option<Instant>,
    },
    /// A sync was asked for; the worker starts it when it is free.
    Requested,
    /// A sync runs; `again`: another was asked for meanwhile.
    Running {
        /// Sync once more right after this one.
        again: bool,
    },
}

/// Where a stop or a cleanup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum StepWork {
    /// Not wanted (only for a cleanup of a pod that is still desired).
    Idle,
    /// Wanted; the worker starts it when it is free.
    Requested,
    /// Running.
    Running,
    /// Running, but cancelled to start again with a shorter grace period (stops only).
    Cancelling,
    /// Failed; tried again at this time.
    RetryAt(Instant),
}

/// What happened. See the module docs for who delivers which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The sync loop: bring the pod to its desired state.
    Sync,
    /// The sync loop: stop the pod with this grace period; `cleanup` when it left its source
    /// or is deleted.
    Kill {
        /// Grace period for the stop.
        grace: Duration,
        /// Remove everything once stopped.
        cleanup: bool,
    },
    /// The worker is free and awake.
    Wake,
    /// The worker's sync returned.
    SyncDone(SyncResult),
    /// The worker's stop returned (`ok`: everything is stopped).
    StopDone {
        /// Everything stopped.
        ok: bool,
    },
    /// The worker's stop was cancelled (after [`Action::CancelStop`]).
    StopCancelled,
    /// The worker's cleanup returned (`ok`: everything is removed).
    CleanupDone {
        /// Everything removed.
        ok: bool,
    },
}

/// What a sync found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncResult {
    /// Sync again at this time (or earlier when asked).
    Requeue(Instant),
    /// The pod reached a terminal phase: stop it with this grace period.
    Terminal {
        /// The pod's grace period.
        grace: Duration,
    },
}

/// What the worker (long actions) or the caller (immediate actions) does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Long, on the worker: run one sync and deliver [`Event::SyncDone`].
    Sync,
    /// Long, on the worker: stop the pod with this grace period and deliver
    /// [`Event::StopDone`] (or [`Event::StopCancelled`] after a cancel).
    Stop {
        /// Grace period.
        grace: Duration,
    },
    /// Long, on the worker: remove the pod's containers, sandboxes, volumes and pod-level
    /// resources and deliver [`Event::CleanupDone`].
    Cleanup,
    /// Immediate: cancel the running stop.
    CancelStop,
    /// Immediate: a static pod starts terminating; new static pods with its full name wait.
    ClaimName,
    /// Immediate: the static pod has terminated; its full name is free again.
    ReleaseName,
    /// Immediate: tell the status manager a deleted pod is gone for good.
    ReportTerminated,
    /// The worker's task ends.
    Exit,
}

/// Facts about the pod and the moment a transition may depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ctx {
    /// The current time.
    pub now: Instant,
    /// The pod is a static pod (file or URL source).
    pub is_static: bool,
    /// The pod has a deletion timestamp.
    pub deleted: bool,
    /// Another pod with this static pod's full name is still terminating.
    pub static_blocked: bool,
}

/// The actions of one transition, in the order they are to be carried out.
pub(crate) type Actions = Vec<Action>;

impl State {
    /// The state of a new worker.
    pub fn new() -> Self {
        State::Syncing(SyncWork::Idle { next: None })
    }

    /// The coarse state the handle reports.
    pub fn phase(&self) -> WorkerState {
        match self {
            State::Syncing(_) => WorkerState::Syncing,
            State::Terminating { .. } => WorkerState::Terminating,
            State::Terminated { .. } => WorkerState::Terminated,
            State::Finished => WorkerState::Finished,
        }
    }

    /// When the worker must wake on its own (a periodic sync, a retry).
    pub fn deadline(&self) -> Option<Instant> {
        match *self {
            State::Syncing(SyncWork::Idle { next }) => next,
            State::Terminating {
                stop: StepWork::RetryAt(at),
                ..
            }
            | State::Terminated {
                work: StepWork::RetryAt(at),
                ..
            } => Some(at),
            _ => None,
        }
    }
}

fn due(at: Instant, now: Instant) -> bool {
    at <= now
}

/// Entering Terminating from Syncing (a kill, or a sync that found the pod terminal).
fn start_terminating(grace: Duration, cleanup: bool, ctx: &Ctx) -> (State, Actions) {
    let state = State::Terminating {
        grace,
        cleanup,
        stop: StepWork::Requested,
    };
    let actions = if ctx.is_static {
        vec![Action::ClaimName]
    } else {
        vec![]
    };
    (state, actions)
}

/// The lifecycle's transition function. See the module docs.
pub(crate) fn transition(state: State, event: Event, ctx: &Ctx) -> (State, Actions) {
    use Event as E;
    use State as S;
    use StepWork as W;
    use SyncWork as Y;
    let same = (state, vec![]);
    match (state, event) {
        // ── Syncing ───────────────────────────────────────────────────────────────────
        (S::Syncing(Y::Idle { .. }), E::Sync) => (S::Syncing(Y::Requested), vec![]),
        (S::Syncing(Y::Requested), E::Sync) => same,
        (S::Syncing(Y::Running { .. }), E::Sync) => {
            (S::Syncing(Y::Running { again: true }), vec![])
        }
        (S::Syncing(_), E::Kill { grace, cleanup }) => start_terminating(grace, cleanup, ctx),
        (S::Syncing(Y::Requested), E::Wake) => start_sync(ctx),
        (S::Syncing(Y::Idle { next: Some(at) }), E::Wake) if due(at, ctx.now) => start_sync(ctx),
        (S::Syncing(Y::Running { again }), E::SyncDone(SyncResult::Requeue(at))) => {
            if again {
                (S::Syncing(Y::Requested), vec![])
            } else {
                (S::Syncing(Y::Idle { next: Some(at) }), vec![])
            }
        }
        (S::Syncing(Y::Running { .. }), E::SyncDone(SyncResult::Terminal { grace })) => {
            start_terminating(grace, ctx.deleted, ctx)
        }
        (S::Syncing(_), _) => same,

        // ── Terminating ───────────────────────────────────────────────────────────────
        (S::Terminating { .. }, E::Sync) => same,
        (
            S::Terminating {
                grace: old,
                cleanup: was,
                stop,
            },
            E::Kill { grace, cleanup },
        ) => {
            let cleanup = was || cleanup;
            if grace >= old {
                return (
                    S::Terminating {
                        grace: old,
                        cleanup,
                        stop,
                    },
                    vec![],
                );
            }
            let (stop, actions) = match stop {
                W::Running => (W::Cancelling, vec![Action::CancelStop]),
                W::RetryAt(_) => (W::Requested, vec![]),
                other => (other, vec![]),
            };
            (
                S::Terminating {
                    grace,
                    cleanup,
                    stop,
                },
                actions,
            )
        }
        (
            S::Terminating {
                grace,
                cleanup,
                stop: W::Requested,
            },
            E::Wake,
        ) => start_stop(grace, cleanup),
        (
            S::Terminating {
                grace,
                cleanup,
                stop: W::RetryAt(at),
            },
            E::Wake,
        ) if due(at, ctx.now) => start_stop(grace, cleanup),
        (
            S::Terminating {
                cleanup,
                stop: W::Running | W::Cancelling,
                ..
            },
            E::StopDone { ok: true },
        ) => {
            let work = if cleanup { W::Requested } else { W::Idle };
            let actions = if ctx.is_static {
                vec![Action::ReleaseName]
            } else {
                vec![]
            };
            (S::Terminated { cleanup, work }, actions)
        }
        (
            S::Terminating {
                grace,
                cleanup,
                stop: W::Running,
            },
            E::StopDone { ok: false },
        ) => (
            S::Terminating {
                grace,
                cleanup,
                stop: W::RetryAt(ctx.now + STOP_RETRY),
            },
            vec![],
        ),
        // Cancelled for a shorter grace period (or failed while being cancelled): start
        // again at once with the shorter period.
        (
            S::Terminating {
                grace,
                cleanup,
                stop: W::Cancelling,
            },
            E::StopCancelled | E::StopDone { ok: false },
        ) => (
            S::Terminating {
                grace,
                cleanup,
                stop: W::Requested,
            },
            vec![],
        ),
        (S::Terminating { .. }, _) => same,

        // ── Terminated ────────────────────────────────────────────────────────────────
        (
            S::Terminated { cleanup, work },
            E::Kill {
                cleanup: wanted, ..
            },
        ) => {
            if cleanup || !wanted {
                return same;
            }
            let work = if work == W::Idle { W::Requested } else { work };
            (
                S::Terminated {
                    cleanup: true,
                    work,
                },
                vec![],
            )
        }
        (
            S::Terminated {
                cleanup: true,
                work: W::Requested,
            },
            E::Wake,
        ) => start_cleanup(),
        (
            S::Terminated {
                cleanup: true,
                work: W::RetryAt(at),
            },
            E::Wake,
        ) if due(at, ctx.now) => start_cleanup(),
        (
            S::Terminated {
                work: W::Running, ..
            },
            E::CleanupDone { ok: true },
        ) => {
            let mut actions = Vec::with_capacity(2);
            if ctx.deleted {
                actions.push(Action::ReportTerminated);
            }
            actions.push(Action::Exit);
            (S::Finished, actions)
        }
        (
            S::Terminated {
                cleanup,
                work: W::Running,
            },
            E::CleanupDone { ok: false },
        ) => (
            S::Terminated {
                cleanup,
                work: W::RetryAt(ctx.now + STOP_RETRY),
            },
            vec![],
        ),
        (S::Terminated { .. }, _) => same,

        // ── Finished ──────────────────────────────────────────────────────────────────
        (S::Finished, E::Wake) => (S::Finished, vec![Action::Exit]),
        (S::Finished, _) => same,
    }
}

fn start_sync(ctx: &Ctx) -> (State, Actions) {
    if ctx.static_blocked {
        return (
            State::Syncing(SyncWork::Idle {
                next: Some(ctx.now + STATIC_NAME_RETRY),
            }),
            vec![],
        );
    }
    (
        State::Syncing(SyncWork::Running { again: false }),
        vec![Action::Sync],
    )
}

fn start_stop(grace: Duration, cleanup: bool) -> (State, Actions) {
    (
        State::Terminating {
            grace,
            cleanup,
            stop: StepWork::Running,
        },
        vec![Action::Stop { grace }],
    )
}

fn start_cleanup() -> (State, Actions) {
    (
        State::Terminated {
            cleanup: true,
            work: StepWork::Running,
        },
        vec![Action::Cleanup],
    )
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
