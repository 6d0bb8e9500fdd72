//! `heap_trim::trim` gives glibc's free pages back to the kernel.
//!
//! A test binary of its own: it measures the process's resident anonymous memory, which the
//! threads of other tests (allocating, or trimming through `heap_trim::run`) would move.

#![allow(clippy::expect_used)]

/// This process's resident anonymous memory in KiB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn rss_anon_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .expect("an RssAnon line");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("RssAnon in KiB")
}

/// 32 MiB freed below live allocations: glibc keeps it resident, `trim` gives it back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn trim_gives_back_memory_freed_below_live_allocations() {
    // On one thread: the blocks and the small allocations between them share its arena.
    std::thread::spawn(|| {
        let mut big = Vec::new();
        let mut live = Vec::new();
        for i in 0..512 {
            big.push(vec![i as u8 | 1; 64 * 1024]);
            live.push(vec![1u8; 64]);
        }
        drop(big);
        let before = rss_anon_kib();
        assert!(
            before >= 32 * 1024,
            "the freed 32 MiB should still be resident: RssAnon {before} KiB"
        );
        assert!(kubelet_bin::heap_trim::trim(), "glibc gave nothing back");
        let after = rss_anon_kib();
        assert!(
            after + 16 * 1024 <= before,
            "RssAnon {before} KiB before the trim, {after} KiB after"
        );
        assert!(live.iter().all(|v| v[0] == 1));
    })
    .join()
    .expect("the measuring thread");
}
