//! Exponential backoff per key, as Go's `flowcontrol.Backoff` used for CrashLoopBackOff and
//! ImagePullBackOff.
//!
//! - [`Backoff::next`] records a new attempt: the first delay is `initial`, each later one
//!   doubles up to `max`. An entry whose last attempt is older than `2 × max` starts over, so a
//!   container that ran cleanly for 10 minutes (with the 5-minute cap) is restarted at once.
//! - [`Backoff::is_in_backoff_since`] answers whether an event at `event_time` (the container's
//!   finish time) is still inside the delay of the last attempt.
//! - [`Backoff::gc`] drops entries unused for `2 × max`.
//!
//! Times are Unix nanoseconds from [`crate::clock::now_unix_nanos`].

use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: i64,
}

/// Backoff state for a set of keys. Not thread-safe on its own; the engine wraps it in a mutex.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Backoff {
    /// A backoff starting at `initial` and capped at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    fn expired(&self, event_time: i64, last_update: i64) -> bool {
        event_time.saturating_sub(last_update) > nanos(self.max).saturating_mul(2)
    }

    /// Records an attempt for `key` at `now`, for an event (e.g. a container exit) at
    /// `event_time`, and returns the delay before the next one. The delay starts over when
    /// the event came more than `2 × max` after the previous attempt.
    pub fn next(&mut self, key: &str, event_time: i64, now: i64) -> Duration {
        let initial = self.initial;
        let max = self.max;
        let expired = self
            .entries
            .get(key)
            .is_none_or(|e| self.expired(event_time, e.last_update));
        let entry = self.entries.entry(key.to_string()).or_insert(Entry {
            delay: initial,
            last_update: now,
        });
        if expired {
            entry.delay = initial;
        } else {
            entry.delay = (entry.delay * 2).min(max);
        }
        entry.last_update = now;
        entry.delay
    }

    /// The current delay of `key`, if it has one.
    pub fn get(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.delay)
    }

    /// Whether `now` is still inside the delay that started with the last attempt, for an
    /// event (e.g. a container exit) at `event_time`. Returns the remaining delay if so.
    pub fn is_in_backoff_since(&self, key: &str, event_time: i64, now: i64) -> Option<Duration> {
        let e = self.entries.get(key)?;
        if self.expired(event_time, e.last_update) {
            return None;
        }
        let since = now.saturating_sub(event_time);
        let delay = nanos(e.delay);
        if since < delay {
            Some(Duration::from_nanos(
                u64::try_from(delay - since).unwrap_or(0),
            ))
        } else {
            None
        }
    }

    /// Whether `now` is inside the delay since the last attempt itself (image pulls).
    pub fn is_in_backoff_since_update(&self, key: &str, now: i64) -> Option<Duration> {
        let e = self.entries.get(key)?;
        self.is_in_backoff_since(key, e.last_update, now)
    }

    /// Forgets `key` (e.g. after a successful pull).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops entries unused for longer than `2 × max`.
    pub fn gc(&mut self, now: i64) {
        let limit = nanos(self.max).saturating_mul(2);
        self.entries
            .retain(|_, e| now.saturating_sub(e.last_update) <= limit);
    }

    /// No keys tracked.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn doubles_to_cap_and_resets_after_twice_max() {
        let mut b = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
        let mut now = 0;
        let mut seen = vec![];
        for _ in 0..7 {
            let d = b.next("k", now, now);
            seen.push(d.as_secs());
            now += d.as_secs() as i64 * S;
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300]);
        // 10 minutes and a second later the entry has expired: back to the initial delay.
        now += 601 * S;
        assert_eq!(b.next("k", now, now).as_secs(), 10);
    }

    #[test]
    fn in_backoff_since_event() {
        let mut b = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));
        assert!(b.is_in_backoff_since("k", 0, 0).is_none());
        b.next("k", 0, 0);
        // The container died at t=1s; at t=5s it is still in its 10s backoff.
        assert_eq!(
            b.is_in_backoff_since("k", S, 5 * S),
            Some(Duration::from_secs(6))
        );
        assert!(b.is_in_backoff_since("k", S, 11 * S).is_none());
        // An exit long after the last restart is not in backoff at all.
        assert!(b.is_in_backoff_since("k", 700 * S, 701 * S).is_none());
        b.gc(1000 * S);
        assert!(b.is_empty());
    }
}
