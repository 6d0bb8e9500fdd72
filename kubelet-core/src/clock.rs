//! The one place the workspace reads the clock.
//!
//! Runtime timestamps (container start/finish) are wall-clock nanoseconds; backoff and status
//! arithmetic compare them with "now". Deriving "now" from `tokio::time::Instant` keeps the
//! whole engine on one clock, so tests with a paused tokio clock (and the simulated runtime,
//! which stamps its objects with this same function) are deterministic.
//!
//! Which clock to use:
//! - engine logic (backoff, probes, grace periods, workers): `tokio::time::Instant` and
//!   [`now_unix_nanos`] / [`now_time`], which follow tokio's (pausable) clock;
//! - what must agree with other machines' wall clocks (certificate validity, lease renew
//!   times, event timestamps, log times): [`wall_now`];
//! - durations of real work measured for metrics and benchmarks: [`monotonic_now`].
//!
//! A clippy `disallowed-methods` rule (the workspace's `clippy.toml`) keeps
//! `std::time::{Instant, SystemTime}::now` and their `elapsed` out of every other module.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The real wall clock (`SystemTime::now`), for times that must agree with other machines.
#[allow(clippy::disallowed_methods)] // the one home of the wall-clock reading
pub fn wall_now() -> SystemTime {
    SystemTime::now()
}

/// The real monotonic clock (`std::time::Instant::now`), for measuring real work.
#[allow(clippy::disallowed_methods)] // the one home of the monotonic reading
pub fn monotonic_now() -> std::time::Instant {
    std::time::Instant::now()
}

/// Real time passed since `start` (a [`monotonic_now`] reading); zero if `start` is later.
pub fn elapsed(start: std::time::Instant) -> std::time::Duration {
    monotonic_now().saturating_duration_since(start)
}

static BASE: OnceLock<(i64, std::time::Instant)> = OnceLock::new();

/// Nanoseconds since the Unix epoch, advancing with tokio's clock.
pub fn now_unix_nanos() -> i64 {
    let (wall, mono) = *BASE.get_or_init(|| {
        let wall = wall_now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        (wall, monotonic_now())
    });
    // Signed: a paused tokio clock may read earlier than the moment the base was taken.
    let now = tokio::time::Instant::now().into_std();
    let delta = match now.checked_duration_since(mono) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => -i64::try_from(mono.duration_since(now).as_nanos()).unwrap_or(i64::MAX),
    };
    wall.saturating_add(delta)
}

/// Converts Unix nanoseconds to a Kubernetes `Time` (second precision, as the API stores it).
pub fn to_time(nanos: i64) -> Option<Time> {
    let secs = nanos.div_euclid(1_000_000_000);
    jiff_time(secs)
}

/// The current time as a Kubernetes `Time`.
pub fn now_time() -> Option<Time> {
    to_time(now_unix_nanos())
}

fn jiff_time(secs: i64) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .ok()
        .map(Time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_paused_clock() {
        let a = now_unix_nanos();
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        let b = now_unix_nanos();
        assert!(b - a >= 5_000_000_000, "{a} {b}");
        assert!(b - a < 6_000_000_000, "{a} {b}");
    }
}
