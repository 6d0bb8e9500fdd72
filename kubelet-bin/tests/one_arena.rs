//! `heap_trim::one_arena` keeps glibc's allocator to its main arena: threads that allocate at
//! once all use it, where each would otherwise get an arena of its own.
//!
//! No test harness (`harness = false`): the limit has to be set before any other thread
//! allocates, and libtest runs each test on a thread of its own.

#![allow(clippy::expect_used, clippy::panic)]

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        println!("one_arena: skipped, MALLOC_ARENA_MAX is set");
        return;
    }
    let before = arenas();
    assert!(
        kubelet_bin::heap_trim::one_arena(),
        "mallopt(M_ARENA_MAX, 1) failed"
    );
    let threads: Vec<_> = (0..8)
        .map(|t| {
            std::thread::spawn(move || {
                let blocks: Vec<Vec<u8>> = (0..2_000).map(|i| vec![t as u8; 64 + i]).collect();
                std::thread::sleep(std::time::Duration::from_millis(50));
                blocks.iter().map(Vec::len).sum::<usize>()
            })
        })
        .collect();
    for t in threads {
        t.join().expect("an allocating thread");
    }
    let after = arenas();
    assert_eq!(
        (before, after),
        (1, 1),
        "arenas before the limit and after 8 threads allocated at once"
    );
    println!("one_arena: 8 threads allocated in the one main arena: ok");
}

/// The allocator's arenas: the `<heap nr=…>` elements of glibc's `malloc_info` report.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code, reason = "malloc_info and open_memstream are C calls")]
fn arenas() -> usize {
    extern "C" {
        fn malloc_info(options: libc::c_int, stream: *mut libc::FILE) -> libc::c_int;
    }
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream writes the buffer's address and length into the two locals, which
    // outlive the stream; malloc_info writes to the open stream; fclose flushes it and leaves
    // the buffer (len bytes, NUL-terminated) to us, which we read once and free.
    let report = unsafe {
        let stream = libc::open_memstream(&mut buf, &mut len);
        assert!(!stream.is_null(), "open_memstream");
        assert_eq!(malloc_info(0, stream), 0, "malloc_info");
        libc::fclose(stream);
        let text = std::slice::from_raw_parts(buf.cast::<u8>(), len).to_vec();
        libc::free(buf.cast());
        String::from_utf8(text).expect("malloc_info's XML")
    };
    report.matches("<heap nr=").count()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() {
    println!("one_arena: glibc only");
}
