//! Tests of `read`.

use super::*;
use crate::logs::render;

fn rec(i: usize, stream: &str, tag: &str, content: &str) -> String {
    format!("2024-05-01T10:00:00.{i:09}Z {stream} {tag} {content}\n")
}

/// A deterministic pseudo-random log: both streams, partial records, long lines.
fn synthetic(seed: u64, records: usize) -> String {
    let mut x = seed.max(1);
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    for i in 0..records {
        let r = next();
        let stream = if r % 3 == 0 { "stderr" } else { "stdout" };
        let tag = if r % 5 == 0 { "P" } else { "F" };
        let len = if r % 97 == 0 {
            70_000
        } else {
            (r % 40) as usize
        };
        let content: String = std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), len).collect();
        out.push_str(&rec(i, stream, tag, &content));
        if r % 53 == 0 {
            out.push_str("junk\n");
        }
    }
    out
}

async fn reference(files: &[PathBuf], o: &LogOptions) -> Vec<u8> {
    let mut asm = Assembler::default();
    let mut msgs = Vec::new();
    for f in files {
        let data = tokio::fs::read(f).await.unwrap();
        decode(&data, &mut asm, &mut msgs);
    }
    // What is still partial at the end counts as it is.
    msgs.extend(asm.flush());
    render(&msgs, o)
}

#[tokio::test]
async fn tail_from_the_end_matches_reading_everything() {
    let dir = tempfile::tempdir().unwrap();
    for seed in [1u64, 7, 42, 1234] {
        let old = dir.path().join(format!("{seed}.log.1"));
        let cur = dir.path().join(format!("{seed}.log"));
        std::fs::write(&old, synthetic(seed, 300)).unwrap();
        std::fs::write(&cur, synthetic(seed + 1, 900)).unwrap();
        let files = vec![old, cur];
        for n in [0usize, 1, 2, 3, 10, 57, 200, 899, 1150, 5000] {
            for timestamps in [false, true] {
                let o = LogOptions {
                    tail_lines: Some(n),
                    timestamps,
                    ..Default::default()
                };
                let got = read_logs(&files, &o).await.unwrap();
                let want = reference(&files, &o).await;
                assert!(
                    got == want,
                    "seed {seed} tail {n}: {} vs {} bytes",
                    got.len(),
                    want.len()
                );
            }
        }
        let o = LogOptions {
            limit_bytes: Some(1000),
            ..Default::default()
        };
        assert_eq!(
            read_logs(&files, &o).await.unwrap(),
            reference(&files, &o).await
        );
        let all = LogOptions::default();
        assert_eq!(
            read_logs(&files, &all).await.unwrap(),
            reference(&files, &all).await
        );
    }
}

#[tokio::test]
async fn a_last_line_without_its_final_record_is_returned_as_is() {
    // `printf 'first\nno newline'`: the runtime writes the unended last line as a
    // partial record, and Go's reader returns its content (without a newline).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let text = [
        rec(0, "stdout", "F", "first"),
        rec(1, "stdout", "P", "no "),
        rec(2, "stderr", "P", "err"),
        rec(3, "stdout", "P", "newline"),
    ]
    .concat();
    std::fs::write(&path, text).unwrap();
    let out = read_logs(std::slice::from_ref(&path), &LogOptions::default())
        .await
        .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "first\nno newlineerr");
    // The unended line counts as the last line.
    let one_stream = [
        rec(0, "stdout", "F", "first"),
        rec(1, "stdout", "P", "no "),
        rec(2, "stdout", "P", "newline"),
    ]
    .concat();
    std::fs::write(&path, one_stream).unwrap();
    let tail = LogOptions {
        tail_lines: Some(1),
        ..Default::default()
    };
    let out = read_logs(std::slice::from_ref(&path), &tail).await.unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "no newline");
    // Only partial records: still returned.
    std::fs::write(&path, rec(0, "stdout", "P", "alone")).unwrap();
    let out = read_logs(&[path], &LogOptions::default()).await.unwrap();
    assert_eq!(out, b"alone");
}

#[tokio::test]
async fn an_endless_partial_line_comes_in_pieces_and_an_overlong_record_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let piece = "x".repeat(16 * 1024);
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&rec(i, "stdout", "P", &piece));
    }
    text.push_str(&rec(200, "stdout", "F", "end"));
    // One record line of 2 MiB (no runtime writes that): skipped, the next one read.
    text.push_str(&rec(201, "stderr", "F", &"y".repeat(2 << 20)));
    text.push_str(&rec(202, "stderr", "F", "after"));
    std::fs::write(&path, text).unwrap();
    let out = read_logs(std::slice::from_ref(&path), &LogOptions::default())
        .await
        .unwrap();
    assert_eq!(
        out.len(),
        200 * piece.len() + "end\n".len() + "after\n".len()
    );
    assert!(out.ends_with(b"end\nafter\n"));
    let o = LogOptions {
        timestamps: true,
        ..Default::default()
    };
    let out = read_logs(&[path], &o).await.unwrap();
    // The pieces of the long line carry the line's time once.
    let stamps = out
        .windows(b"2024-05-01T10:00:00.000000000Z".len())
        .filter(|w| w == b"2024-05-01T10:00:00.000000000Z")
        .count();
    assert_eq!(stamps, 1);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stops_reading_ends_the_stream_after_the_idle_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, synthetic(3, 20_000)).unwrap();
    let (tx, rx) = mpsc::channel(1);
    let task = tokio::spawn(stream_logs(
        vec![path],
        LogOptions::default(),
        tx,
        Duration::from_secs(30),
    ));
    // Nobody reads `rx`: the task gives up after 30 s of virtual time.
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("stream ended")
        .unwrap();
    drop(rx);
}

/// `cargo test -p kubelet-server --release --lib -- --ignored --nocapture tail_on_a_1gib_log`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes a 1 GiB file; run by hand for the figures"]
async fn tail_on_a_1gib_log() {
    use std::io::Write;
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let path = dir.path().join("0.log");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let line = rec(1, "stdout", "F", &"z".repeat(200));
        let mut written = 0u64;
        let mut i = 0u64;
        while written < 1 << 30 {
            let l = line.replacen("zzzz", &format!("{i:04}"), 1);
            f.write_all(l.as_bytes()).unwrap();
            written += l.len() as u64;
            i += 1;
        }
    }
    let rss = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .unwrap()
            .to_string()
    };
    let before = rss();
    let files = vec![path.clone()];
    let o = LogOptions {
        tail_lines: Some(10),
        ..Default::default()
    };
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = kubelet_core::clock::monotonic_now();
        let out = read_logs(&files, &o).await.unwrap();
        times.push(kubelet_core::clock::elapsed(t));
        assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 10);
    }
    let o = LogOptions {
        limit_bytes: Some(4096),
        ..Default::default()
    };
    let t = kubelet_core::clock::monotonic_now();
    let out = read_logs(&files, &o).await.unwrap();
    let limit_time = kubelet_core::clock::elapsed(t);
    assert_eq!(out.len(), 4096);
    println!(
            "1 GiB log: tailLines=10 {:?} (5 runs); limitBytes=4096 {:?}; peak RSS before {before}, after {}",
            times,
            limit_time,
            rss()
        );
}

/// A file listed but rotated away (renamed, compressed) before it is read is skipped: the
/// answer holds what the other files have, it is not cut off with an error.
#[tokio::test]
async fn a_file_rotated_away_after_listing_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("0.log.20240501-100000");
    let cur = dir.path().join("0.log");
    std::fs::write(&cur, rec(1, "stdout", "F", "now")).unwrap();
    for tail in [None, Some(5)] {
        let files = vec![gone.clone(), cur.clone()];
        let o = LogOptions {
            tail_lines: tail,
            ..Default::default()
        };
        let got = read_logs(&files, &o).await.unwrap();
        assert_eq!(String::from_utf8(got).unwrap(), "now\n", "tail {tail:?}");
    }
}
