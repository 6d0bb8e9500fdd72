//! The tokio runtime the stock binary runs on: tokio's defaults (a worker per core, up to 512
//! blocking threads), except how long an idle blocking thread waits for work before it exits.
//!
//! The blocking pool runs the kubelet's file and cgroup I/O (`tokio::fs`, `spawn_blocking`).
//! It starts a thread whenever a task finds none idle, so the start-up of 110 pods leaves
//! about 30. An idle thread exits when no task woke it for the keep-alive, but tokio wakes its
//! idle threads in turn (one condition variable, woken first-in first-out), so a trickle of a
//! few tasks a second at rest wakes each of them within tokio's 10 s default and none ever
//! exits. [`BLOCKING_THREAD_KEEP_ALIVE`] is short enough that the pool shrinks to what that
//! trickle needs. Measured with 110 pods at rest (`cargo xtask bench-cri`, the `ship` build):
//! 35 threads and 8.6 MiB of anonymous memory with the default, 5 threads and 7.6 MiB with
//! 1 s.
//!
//! The cap on blocking threads stays tokio's: a small one would let a few calls that hang (a
//! mount of an unreachable server, a stuck DNS lookup) hold up every other file operation.
//!
//! ```
//! let runtime = kubelet_bin::async_runtime::build().unwrap();
//! let n = runtime.block_on(async { tokio::task::spawn_blocking(|| 2 + 2).await.unwrap() });
//! assert_eq!(n, 4);
//! ```

use std::time::Duration;

/// How long an idle blocking thread waits for a task before it exits (tokio's default: 10 s).
pub const BLOCKING_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(1);

/// The multi-threaded runtime, with every driver (I/O, time) and
/// [`BLOCKING_THREAD_KEEP_ALIVE`].
///
/// # Errors
/// The runtime could not be built (its threads or its I/O driver could not be created).
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_keep_alive(BLOCKING_THREAD_KEEP_ALIVE)
        .build()
}
