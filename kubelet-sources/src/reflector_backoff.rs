//! The back-off of the node's watches after a failure: client-go's reflector back-off
//! (`wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)`), for kube-runtime's
//! `WatchStreamExt::backoff`.
//!
//! kube-runtime's `default_backoff` is reset by every `Ok` item of the watcher's stream,
//! and the watcher yields `Event::Init` before each listing, even one that then fails: an API
//! server that refuses a listing (a 403 from the Node authorizer, say) was asked again about
//! once a second, at the first step, for as long as it refused (76 listings in 91 s in
//! `objects::store_tests`). Here, as in client-go, only time resets the delay: the first
//! failure after two minutes without one waits 0.8 s again; every other failure waits twice
//! as long as the one before, up to 30 s, plus a random jitter of up to as much again (so
//! the watches a restarted API server dropped do not all come back at once).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use kube::runtime::utils::Backoff;
use tokio::time::Instant;

/// The first delay.
const INITIAL: Duration = Duration::from_millis(800);
/// The longest delay before jitter.
const MAX: Duration = Duration::from_secs(30);
/// Time without a failure after which the delay starts again from [`INITIAL`].
const RESET_AFTER: Duration = Duration::from_secs(120);

/// See the module docs.
#[derive(Debug)]
pub(crate) struct ReflectorBackoff {
    next: Duration,
    last_failure: Option<Instant>,
}

impl ReflectorBackoff {
    /// A back-off that has seen no failure.
    pub(crate) fn new() -> Self {
        ReflectorBackoff {
            next: INITIAL,
            last_failure: None,
        }
    }

    /// The delay before jitter of the next failure at `now`, and the state moved past it.
    fn step(&mut self, now: Instant) -> Duration {
        if self
            .last_failure
            .is_some_and(|at| now.saturating_duration_since(at) >= RESET_AFTER)
        {
            self.next = INITIAL;
        }
        self.last_failure = Some(now);
        let delay = self.next;
        self.next = (self.next * 2).min(MAX);
        delay
    }
}

/// A fraction in [0, 1) of `delay`, from a randomly keyed hasher.
fn jitter(delay: Duration) -> Duration {
    let permille = RandomState::new().build_hasher().finish() % 1000;
    delay * u32::try_from(permille).unwrap_or(0) / 1000
}

impl Iterator for ReflectorBackoff {
    type Item = Duration;

    /// The wait after a failure (never ends: a watch is retried until it is cancelled).
    fn next(&mut self) -> Option<Duration> {
        let delay = self.step(Instant::now());
        Some(delay + jitter(delay))
    }
}

impl Backoff for ReflectorBackoff {
    /// Nothing: the stream's `Ok` items do not reset the delay, time does (see the module
    /// docs).
    fn reset(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn doubles_to_thirty_seconds_and_only_time_resets_it() {
        let mut backoff = ReflectorBackoff::new();
        let mut delays = Vec::new();
        for _ in 0..8 {
            let delay = backoff.next().expect("a delay");
            delays.push(delay);
            tokio::time::sleep(delay).await;
        }
        backoff.reset();
        let want = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0];
        for (got, want) in delays.iter().zip(want) {
            let got = got.as_secs_f64();
            assert!((want..want * 2.0).contains(&got), "{delays:?}");
        }
        let after_reset = backoff.next().expect("a delay").as_secs_f64();
        assert!(
            after_reset >= 30.0,
            "an Ok item does not reset it: {after_reset}"
        );
        tokio::time::sleep(RESET_AFTER).await;
        let after_quiet = backoff.next().expect("a delay").as_secs_f64();
        assert!(
            after_quiet < 1.6,
            "two minutes without a failure reset it: {after_quiet}"
        );
    }
}
