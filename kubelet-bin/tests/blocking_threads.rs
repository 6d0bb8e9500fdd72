//! `async_runtime::build`'s blocking pool shrinks after a burst while a trickle of tasks goes
//! on, as a kubelet at rest has one (with tokio's 10 s default, each thread of the burst is
//! woken in turn and none exits).
//!
//! No test harness (`harness = false`): the test counts the process's threads, and libtest's
//! own would be among them.

#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use tokio::time::Instant;

const BURST: usize = 24;

fn main() {
    let runtime = kubelet_bin::async_runtime::build().expect("the runtime");
    let base = threads();
    let (peak, after) = runtime.block_on(async {
        // A burst: BURST tasks at once, each holding a blocking thread.
        let burst: Vec<_> = (0..BURST)
            .map(|_| tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(100))))
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let peak = threads();
        for task in burst {
            task.await.expect("a burst task");
        }
        // A trickle: four short tasks a second, for three keep-alives.
        let until = Instant::now() + 3 * kubelet_bin::async_runtime::BLOCKING_THREAD_KEEP_ALIVE;
        while Instant::now() < until {
            tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(1)))
                .await
                .expect("a trickle task");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        (peak, threads())
    });
    let (peak, after) = (peak - base, after - base);
    assert!(
        peak >= BURST,
        "{peak} blocking threads during a burst of {BURST} tasks"
    );
    assert!(
        after <= 8,
        "{after} of the burst's {peak} blocking threads still alive after three keep-alives of \
         four tasks a second"
    );
    println!("blocking_threads: {peak} during the burst, {after} left under the trickle: ok");
}

/// The process's threads (`Threads:` of `/proc/self/status`).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Threads: line")
}
