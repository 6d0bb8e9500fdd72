//! The transition table, state by event: every pair of a representative state and an event
//! is either listed here with its outcome or checked to change nothing. A model check over
//! event sequences then proves the worker never gets two long actions at once.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use super::*;

const G30: Duration = Duration::from_secs(30);
const G5: Duration = Duration::from_secs(5);
const G60: Duration = Duration::from_secs(60);

fn ctx(now: Instant) -> Ctx {
    Ctx {
        now,
        is_static: false,
        deleted: false,
        static_blocked: false,
    }
}

/// Every shape a state can take, with deadlines before and after `now`.
fn all_states(now: Instant) -> Vec<State> {
    let past = now - Duration::from_secs(1);
    let future = now + Duration::from_secs(10);
    let mut states = vec![
        State::Syncing(SyncWork::Idle { next: None }),
        State::Syncing(SyncWork::Idle { next: Some(past) }),
        State::Syncing(SyncWork::Idle { next: Some(future) }),
        State::Syncing(SyncWork::Requested),
        State::Syncing(SyncWork::Running { again: false }),
        State::Syncing(SyncWork::Running { again: true }),
    ];
    for cleanup in [false, true] {
        for stop in [
            StepWork::Requested,
            StepWork::Running,
            StepWork::Cancelling,
            StepWork::RetryAt(past),
            StepWork::RetryAt(future),
        ] {
            states.push(State::Terminating {
                grace: G30,
                cleanup,
                stop,
            });
        }
    }
    states.push(State::Terminated {
        cleanup: false,
        work: StepWork::Idle,
    });
    for work in [
        StepWork::Requested,
        StepWork::Running,
        StepWork::RetryAt(past),
        StepWork::RetryAt(future),
    ] {
        states.push(State::Terminated {
            cleanup: true,
            work,
        });
    }
    states.push(State::Finished);
    states
}

fn all_events(now: Instant) -> Vec<Event> {
    vec![
        Event::Sync,
        Event::Kill {
            grace: G5,
            cleanup: false,
        },
        Event::Kill {
            grace: G5,
            cleanup: true,
        },
        Event::Kill {
            grace: G60,
            cleanup: false,
        },
        Event::Kill {
            grace: G60,
            cleanup: true,
        },
        Event::Wake,
        Event::SyncDone(SyncResult::Requeue(now + G60)),
        Event::SyncDone(SyncResult::Terminal { grace: G30 }),
        Event::StopDone { ok: true },
        Event::StopDone { ok: false },
        Event::StopCancelled,
        Event::CleanupDone { ok: true },
        Event::CleanupDone { ok: false },
    ]
}

/// One row of the table: from `state` on `event` (with a non-static, not deleted, unblocked
/// pod unless `tweak` says otherwise) to `want` with `actions`.
struct Row {
    state: State,
    event: Event,
    tweak: fn(&mut Ctx),
    want: State,
    actions: Vec<Action>,
}

fn plain(_: &mut Ctx) {}

#[allow(clippy::too_many_lines)]
fn table(now: Instant) -> Vec<Row> {
    let past = now - Duration::from_secs(1);
    let future = now + Duration::from_secs(10);
    let retry = now + STOP_RETRY;
    let requeue = now + G60;
    let term = |cleanup, stop| State::Terminating {
        grace: G30,
        cleanup,
        stop,
    };
    let term5 = |cleanup, stop| State::Terminating {
        grace: G5,
        cleanup,
        stop,
    };
    let done = |cleanup, work| State::Terminated { cleanup, work };
    let idle = |next| State::Syncing(SyncWork::Idle { next });
    let mut rows = Vec::new();
    let mut row = |state, event, want, actions: Vec<Action>| {
        rows.push(Row {
            state,
            event,
            tweak: plain,
            want,
            actions,
        })
    };

    // Syncing: a sync request while idle is left for the worker; while one runs it is
    // remembered; the worker starts a requested or due sync.
    for next in [None, Some(past), Some(future)] {
        row(
            idle(next),
            Event::Sync,
            State::Syncing(SyncWork::Requested),
            vec![],
        );
    }
    row(
        State::Syncing(SyncWork::Running { again: false }),
        Event::Sync,
        State::Syncing(SyncWork::Running { again: true }),
        vec![],
    );
    row(
        State::Syncing(SyncWork::Running { again: true }),
        Event::Sync,
        State::Syncing(SyncWork::Running { again: true }),
        vec![],
    );
    row(
        State::Syncing(SyncWork::Requested),
        Event::Sync,
        State::Syncing(SyncWork::Requested),
        vec![],
    );
    for from in [State::Syncing(SyncWork::Requested), idle(Some(past))] {
        row(
            from,
            Event::Wake,
            State::Syncing(SyncWork::Running { again: false }),
            vec![Action::Sync],
        );
    }
    row(
        State::Syncing(SyncWork::Running { again: false }),
        Event::SyncDone(SyncResult::Requeue(requeue)),
        idle(Some(requeue)),
        vec![],
    );
    row(
        State::Syncing(SyncWork::Running { again: true }),
        Event::SyncDone(SyncResult::Requeue(requeue)),
        State::Syncing(SyncWork::Requested),
        vec![],
    );
    for again in [false, true] {
        row(
            State::Syncing(SyncWork::Running { again }),
            Event::SyncDone(SyncResult::Terminal { grace: G30 }),
            term(false, StepWork::Requested),
            vec![],
        );
    }
    // A kill in any syncing state: terminating, the stop left for the worker (a running
    // sync returns first). Kill during sync is the `Running` rows.
    for from in all_states(now)
        .into_iter()
        .filter(|s| matches!(s, State::Syncing(_)))
    {
        for (grace, cleanup) in [(G5, false), (G5, true), (G60, false), (G60, true)] {
            row(
                from,
                Event::Kill { grace, cleanup },
                State::Terminating {
                    grace,
                    cleanup,
                    stop: StepWork::Requested,
                },
                vec![],
            );
        }
    }

    // Terminating: only a shorter grace period changes the stop; cleanup only ever turns on.
    for cleanup in [false, true] {
        for stop in [
            StepWork::Requested,
            StepWork::Running,
            StepWork::Cancelling,
            StepWork::RetryAt(past),
            StepWork::RetryAt(future),
        ] {
            let shorter_stop = match stop {
                StepWork::Running => StepWork::Cancelling,
                StepWork::RetryAt(_) => StepWork::Requested,
                other => other,
            };
            let cancel = if stop == StepWork::Running {
                vec![Action::CancelStop]
            } else {
                vec![]
            };
            for wanted in [false, true] {
                row(
                    term(cleanup, stop),
                    Event::Kill {
                        grace: G5,
                        cleanup: wanted,
                    },
                    term5(cleanup || wanted, shorter_stop),
                    cancel.clone(),
                );
                row(
                    term(cleanup, stop),
                    Event::Kill {
                        grace: G60,
                        cleanup: wanted,
                    },
                    term(cleanup || wanted, stop),
                    vec![],
                );
            }
        }
        for from in [StepWork::Requested, StepWork::RetryAt(past)] {
            row(
                term(cleanup, from),
                Event::Wake,
                term(cleanup, StepWork::Running),
                vec![Action::Stop { grace: G30 }],
            );
        }
        let after = if cleanup {
            StepWork::Requested
        } else {
            StepWork::Idle
        };
        for from in [StepWork::Running, StepWork::Cancelling] {
            row(
                term(cleanup, from),
                Event::StopDone { ok: true },
                done(cleanup, after),
                vec![],
            );
        }
        row(
            term(cleanup, StepWork::Running),
            Event::StopDone { ok: false },
            term(cleanup, StepWork::RetryAt(retry)),
            vec![],
        );
        for ev in [Event::StopCancelled, Event::StopDone { ok: false }] {
            row(
                term(cleanup, StepWork::Cancelling),
                ev,
                term(cleanup, StepWork::Requested),
                vec![],
            );
        }
    }

    // Terminated: a removal or deletion starts the cleanup; the worker runs and retries it.
    for grace in [G5, G60] {
        row(
            done(false, StepWork::Idle),
            Event::Kill {
                grace,
                cleanup: true,
            },
            done(true, StepWork::Requested),
            vec![],
        );
    }
    for from in [StepWork::Requested, StepWork::RetryAt(past)] {
        row(
            done(true, from),
            Event::Wake,
            done(true, StepWork::Running),
            vec![Action::Cleanup],
        );
    }
    row(
        done(true, StepWork::Running),
        Event::CleanupDone { ok: true },
        State::Finished,
        vec![Action::Exit],
    );
    row(
        done(true, StepWork::Running),
        Event::CleanupDone { ok: false },
        done(true, StepWork::RetryAt(retry)),
        vec![],
    );

    // Finished: the task ends.
    row(
        State::Finished,
        Event::Wake,
        State::Finished,
        vec![Action::Exit],
    );
    rows
}

#[tokio::test(start_paused = true)]
async fn every_state_and_event_is_in_the_table_or_changes_nothing() {
    let now = Instant::now();
    let rows = table(now);
    let mut listed = HashSet::new();
    for r in &rows {
        let mut c = ctx(now);
        (r.tweak)(&mut c);
        let (got, actions) = transition(r.state, r.event, &c);
        assert_eq!(
            (got, &actions),
            (r.want, &r.actions),
            "{:?} on {:?}",
            r.state,
            r.event
        );
        listed.insert(format!("{:?}|{:?}", r.state, r.event));
    }
    let mut unchanged = 0;
    for state in all_states(now) {
        for event in all_events(now) {
            if listed.contains(&format!("{state:?}|{event:?}")) {
                continue;
            }
            let (got, actions) = transition(state, event, &ctx(now));
            assert_eq!(
                (got, actions),
                (state, vec![]),
                "{state:?} on {event:?} is not in the table, so it must change nothing"
            );
            unchanged += 1;
        }
    }
    // Every pair was checked once: the listed transitions plus the ones that change nothing.
    assert_eq!(
        listed.len() + unchanged,
        all_states(now).len() * all_events(now).len()
    );
}

#[tokio::test(start_paused = true)]
async fn static_pods_claim_and_release_their_name_and_wait_for_it() {
    let now = Instant::now();
    let mut c = ctx(now);
    c.is_static = true;
    // Killed while syncing: the name is claimed at once.
    let (s, a) = transition(
        State::Syncing(SyncWork::Running { again: false }),
        Event::Kill {
            grace: G30,
            cleanup: true,
        },
        &c,
    );
    assert_eq!(a, vec![Action::ClaimName]);
    // A terminal sync claims it too.
    let (_, a2) = transition(
        State::Syncing(SyncWork::Running { again: false }),
        Event::SyncDone(SyncResult::Terminal { grace: G30 }),
        &c,
    );
    assert_eq!(a2, vec![Action::ClaimName]);
    // Stopped: released.
    let (s, _) = transition(s, Event::Wake, &c);
    let (s, a) = transition(s, Event::StopDone { ok: true }, &c);
    assert_eq!(a, vec![Action::ReleaseName]);
    assert_eq!(
        s,
        State::Terminated {
            cleanup: true,
            work: StepWork::Requested
        }
    );
    // A new static pod whose name is still held waits and checks again in 500ms.
    c.static_blocked = true;
    let (s, a) = transition(State::Syncing(SyncWork::Requested), Event::Wake, &c);
    assert_eq!(a, vec![]);
    assert_eq!(s.deadline(), Some(now + STATIC_NAME_RETRY));
    c.static_blocked = false;
    c.now = now + STATIC_NAME_RETRY;
    let (_, a) = transition(s, Event::Wake, &c);
    assert_eq!(a, vec![Action::Sync]);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pod_is_reported_terminated_when_cleaned_up() {
    let now = Instant::now();
    let mut c = ctx(now);
    c.deleted = true;
    // A terminal sync of a deleted pod cleans up after stopping.
    let (s, _) = transition(
        State::Syncing(SyncWork::Running { again: false }),
        Event::SyncDone(SyncResult::Terminal { grace: G30 }),
        &c,
    );
    assert!(matches!(s, State::Terminating { cleanup: true, .. }));
    let (s, a) = transition(
        State::Terminated {
            cleanup: true,
            work: StepWork::Running,
        },
        Event::CleanupDone { ok: true },
        &c,
    );
    assert_eq!(s, State::Finished);
    assert_eq!(a, vec![Action::ReportTerminated, Action::Exit]);
}

#[tokio::test(start_paused = true)]
async fn deadlines_follow_the_state() {
    let now = Instant::now();
    for state in all_states(now) {
        let want = match state {
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
        };
        assert_eq!(state.deadline(), want, "{state:?}");
    }
    assert_eq!(State::new().phase(), WorkerState::Syncing);
    assert_eq!(State::Finished.phase(), WorkerState::Finished);
}

/// The whole worker as a model: the machine, plus the long action the worker runs. Explores
/// every interleaving of sync-loop events and worker results up to a depth and checks that
/// the worker is never handed a second long action, that a cancel only ever meets a running
/// stop, that the task only exits when finished, and that a killed pod can always finish.
#[tokio::test(start_paused = true)]
async fn model_check_every_interleaving() {
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    struct World {
        state: State,
        running: Option<Action>,
        cancelled: bool,
        exited: bool,
    }
    let now = Instant::now();
    let c = Ctx {
        now,
        is_static: true,
        deleted: false,
        static_blocked: false,
    };
    // The worker wakes when its deadlines have passed (time moves on between steps).
    let later = Ctx {
        now: now + Duration::from_secs(3600),
        ..c
    };
    let apply = |w: &World, event: Event| -> World {
        let ctx = if event == Event::Wake { &later } else { &c };
        let (state, actions) = transition(w.state, event, ctx);
        let mut next = World { state, ..*w };
        for a in actions {
            match a {
                Action::Sync | Action::Stop { .. } | Action::Cleanup => {
                    assert_eq!(
                        event,
                        Event::Wake,
                        "{a:?} handed out on {event:?}: only a free worker's wake starts long work"
                    );
                    assert!(
                        next.running.is_none(),
                        "{a:?} handed out while {:?} runs ({w:?} on {event:?})",
                        next.running
                    );
                    next.running = Some(a);
                    next.cancelled = false;
                }
                Action::CancelStop => {
                    assert!(
                        matches!(next.running, Some(Action::Stop { .. })),
                        "cancel without a running stop ({w:?} on {event:?})"
                    );
                    next.cancelled = true;
                }
                Action::Exit => {
                    assert_eq!(next.state, State::Finished);
                    next.exited = true;
                }
                Action::ClaimName | Action::ReleaseName | Action::ReportTerminated => {}
            }
        }
        next
    };
    let steps = |w: &World| -> Vec<World> {
        if w.exited {
            return vec![];
        }
        let mut out = Vec::new();
        for e in [
            Event::Sync,
            Event::Kill {
                grace: G30,
                cleanup: false,
            },
            Event::Kill {
                grace: G5,
                cleanup: true,
            },
        ] {
            out.push(apply(w, e));
        }
        match w.running {
            None => out.push(apply(w, Event::Wake)),
            Some(a) => {
                let free = World {
                    running: None,
                    ..*w
                };
                let results: Vec<Event> = match a {
                    Action::Sync => vec![
                        Event::SyncDone(SyncResult::Requeue(now)),
                        Event::SyncDone(SyncResult::Terminal { grace: G60 }),
                    ],
                    Action::Stop { .. } if w.cancelled => {
                        vec![Event::StopCancelled, Event::StopDone { ok: true }]
                    }
                    Action::Stop { .. } => {
                        vec![Event::StopDone { ok: true }, Event::StopDone { ok: false }]
                    }
                    _ => vec![
                        Event::CleanupDone { ok: true },
                        Event::CleanupDone { ok: false },
                    ],
                };
                for e in results {
                    out.push(apply(&free, e));
                }
            }
        }
        out
    };
    let start = World {
        state: State::new(),
        running: None,
        cancelled: false,
        exited: false,
    };
    let mut seen = HashSet::from([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(w) = queue.pop_front() {
        for n in steps(&w) {
            if seen.insert(n) {
                queue.push_back(n);
            }
        }
    }
    assert!(seen.len() > 20, "explored {} worlds", seen.len());
    // From every reachable world, a removal followed by the worker succeeding finishes.
    for w in &seen {
        let mut x = *w;
        for _ in 0..12 {
            if x.exited {
                break;
            }
            x = match x.running {
                Some(Action::Sync) => apply(
                    &World { running: None, ..x },
                    Event::SyncDone(SyncResult::Requeue(now)),
                ),
                Some(Action::Stop { .. }) => {
                    apply(&World { running: None, ..x }, Event::StopDone { ok: true })
                }
                Some(_) => apply(
                    &World { running: None, ..x },
                    Event::CleanupDone { ok: true },
                ),
                None => {
                    let killed = apply(
                        &x,
                        Event::Kill {
                            grace: G30,
                            cleanup: true,
                        },
                    );
                    apply(&killed, Event::Wake)
                }
            };
        }
        assert!(x.exited, "{w:?} never finished: ended at {x:?}");
    }
}
