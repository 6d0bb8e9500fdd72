//! Wall-clock time derived from tokio's clock.
//!
//! Runtime timestamps (container start/finish) are wall-clock nanoseconds; backoff and status
//! arithmetic compare them with "now". Deriving "now" from `tokio::time::Instant` keeps the
//! whole engine on one clock, so tests with a paused tokio clock (and the simulated runtime,
//! which stamps its objects with this same function) are deterministic.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

static BASE: OnceLock<(i64, std::time::Instant)> = OnceLock::new();

/// Nanoseconds since the Unix epoch, advancing with tokio's clock.
pub fn now_unix_nanos() -> i64 {
    let (wall, mono) = *BASE.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        (wall, std::time::Instant::now())
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
