//! Giving the allocator's free pages back to the kernel.
//!
//! glibc's allocator returns freed memory to the kernel only from the top of each arena: pages
//! freed below a live allocation stay resident. A kubelet's heap peaks while it starts its
//! pods (every pod worker, CRI call and status at once) and is much smaller at rest, so
//! without help its resident size stays near that peak for as long as it runs. Measured with
//! 110 pods (`cargo xtask bench-cri`): 13.4–14.2 MiB of anonymous memory at rest without the
//! trim, 10.4–11.0 MiB with it; a trim took 1.3–1.6 ms. The Go runtime's scavenger does the
//! same for the Go kubelet.
//!
//! [`run`] calls [`trim`] every period until shutdown, on tokio's blocking pool (glibc walks
//! and locks each arena in turn). Off glibc (musl, other systems) [`trim`] does nothing: those
//! allocators have no such call.
//!
//! [`one_arena`], called before the first thread starts, keeps glibc to its main arena. By
//! default glibc gives threads arenas of their own (up to 8 per core), and each keeps its own
//! free pages and fragments; a kubelet allocates little and rarely, so it gains nothing from
//! them. Measured with 110 pods (`bench-cri`, the PGO build): 10.7 MiB of anonymous memory at
//! rest with the default, 10.2 with two arenas, 9.0 with one, and no slower start. An operator's
//! `MALLOC_ARENA_MAX` or `glibc.malloc.arena_max` tunable is left to glibc.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let task = tokio::spawn(kubelet_bin::heap_trim::run(
//!     kubelet_bin::heap_trim::PERIOD,
//!     shutdown.clone(),
//! ));
//! shutdown.cancel();
//! task.await.unwrap();
//! # }
//! ```

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the stock binary trims: rarely enough that the walk costs nothing at idle, often
/// enough that a start-up or teardown peak is given back within a minute.
pub const PERIOD: Duration = Duration::from_secs(30);

/// Asks the allocator to return every free page of every arena; true when it gave some back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "malloc_trim is a glibc call with no Rust binding"
)]
pub fn trim() -> bool {
    // SAFETY: malloc_trim takes no pointer and touches only the allocator's own state, under
    // the arenas' locks (it is safe to call from any thread at any time).
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Asks the allocator to return its free pages; off glibc there is no such call: false.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

/// Limits glibc's allocator to one arena, unless the environment sets the limit
/// (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`); true when it did.
/// Call it before any thread starts: threads that already have an arena keep it.
pub fn one_arena() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() || tunables.contains("malloc.arena_max") {
        return false;
    }
    limit_arenas(1)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "mallopt is a glibc call with no Rust binding")]
fn limit_arenas(arenas: i32) -> bool {
    // SAFETY: mallopt takes two integers and changes only the allocator's settings, under its
    // own lock.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_arenas(_: i32) -> bool {
    false
}

/// Calls [`trim`] every `period` (the first after one period) until `shutdown` is cancelled.
pub async fn run(period: Duration, shutdown: CancellationToken) {
    run_with(period, shutdown, trim).await
}

/// [`run`] with the call to make each period (the unit tests count calls instead of trimming
/// the test process's heap under a measurement running beside them).
async fn run_with(period: Duration, shutdown: CancellationToken, trim: fn() -> bool) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let started = tokio::time::Instant::now();
        match tokio::task::spawn_blocking(trim).await {
            Ok(released) => tracing::debug!(
                released,
                took_us = started.elapsed().as_micros() as u64,
                "returned the allocator's free pages"
            ),
            Err(error) => tracing::warn!(%error, "trimming the allocator failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    static TRIMS: AtomicUsize = AtomicUsize::new(0);

    fn count_trim() -> bool {
        TRIMS.fetch_add(1, Ordering::SeqCst);
        true
    }

    // That `trim` gives memory back is tested in `tests/heap_trim.rs`, a process of its own:
    // it measures the process's resident memory, which other tests' threads would move.
    #[tokio::test(start_paused = true)]
    async fn run_trims_every_period_until_shutdown() {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run_with(
            Duration::from_secs(30),
            shutdown.clone(),
            count_trim,
        ));
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(
            TRIMS.load(Ordering::SeqCst),
            0,
            "the first trim waits one period"
        );
        tokio::time::sleep(Duration::from_secs(66)).await;
        assert_eq!(TRIMS.load(Ordering::SeqCst), 3, "at 30, 60 and 90 s");
        assert!(!task.is_finished(), "runs until shutdown");
        shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .expect("stops at once on shutdown")
            .expect("no panic");
        assert_eq!(TRIMS.load(Ordering::SeqCst), 3);
    }
}
