//! `/containerLogs/{namespace}/{pod}/{container}`: the container's CRI log files decoded and
//! filtered by the `kubectl logs` options.
//!
//! The CRI log format is one record per line:
//! `<RFC3339Nano time> <stdout|stderr> <P|F> <content>`, where `P` marks a partial line
//! continued by the next record of the same stream and `F` a line's final part. Rotated
//! files sit beside the current one as `<n>.log.<timestamp>` (compressed `.gz` ones are
//! skipped) and are read oldest first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use k8s_openapi::jiff::Timestamp;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often a followed log file is checked for new data.
const FOLLOW_POLL: Duration = Duration::from_millis(200);
/// How often a followed container's state is checked.
const FOLLOW_STATE_EVERY: u32 = 5;

/// Errors of the log endpoint.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A query parameter has a bad value.
    #[error("invalid query parameter {name}: {message}")]
    BadOption {
        /// The parameter.
        name: &'static str,
        /// Why.
        message: String,
    },
    /// A log line is not in the CRI format.
    #[error("malformed CRI log line: {0}")]
    Malformed(String),
    /// Reading a log file failed.
    #[error("reading log file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
}

/// `kubectl logs` options (Go's `PodLogOptions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep streaming new lines until the container stops or the client leaves.
    pub follow: bool,
    /// Only the last N lines.
    pub tail_lines: Option<usize>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<usize>,
    /// Only lines at or after this time (ns since the epoch), from `sinceSeconds` or
    /// `sinceTime`.
    pub since_nanos: Option<i64>,
    /// Prefix every line with its RFC3339Nano time.
    pub timestamps: bool,
    /// The previous instance of the container.
    pub previous: bool,
}

fn parse_bool(name: &'static str, v: &str) -> Result<bool, LogError> {
    match v {
        "true" | "1" | "True" | "TRUE" | "" => Ok(true),
        "false" | "0" | "False" | "FALSE" => Ok(false),
        _ => Err(LogError::BadOption {
            name,
            message: format!("{v:?} is not a boolean"),
        }),
    }
}

fn parse_int(name: &'static str, v: &str) -> Result<i64, LogError> {
    v.parse().map_err(|_| LogError::BadOption {
        name,
        message: format!("{v:?} is not an integer"),
    })
}

/// Decodes `%XX` and `+` in a query component.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query pairs, decoded (`+` as space, as in form encoding).
pub(crate) fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

impl LogOptions {
    /// Parses and validates the query string as Go does: `tailLines` ≥ 0, `limitBytes` ≥ 1,
    /// `sinceSeconds` ≥ 1, not both `sinceSeconds` and `sinceTime`. `now_nanos` anchors
    /// `sinceSeconds`.
    pub fn from_query(query: &str, now_nanos: i64) -> Result<LogOptions, LogError> {
        let mut o = LogOptions::default();
        let mut since_seconds = None;
        let mut since_time = None;
        for (k, v) in query_pairs(query) {
            match k.as_str() {
                "follow" => o.follow = parse_bool("follow", &v)?,
                "timestamps" => o.timestamps = parse_bool("timestamps", &v)?,
                "previous" => o.previous = parse_bool("previous", &v)?,
                "tailLines" => {
                    let n = parse_int("tailLines", &v)?;
                    o.tail_lines = Some(usize::try_from(n).map_err(|_| LogError::BadOption {
                        name: "tailLines",
                        message: "must be greater than or equal to 0".into(),
                    })?);
                }
                "limitBytes" => {
                    let n = parse_int("limitBytes", &v)?;
                    if n < 1 {
                        return Err(LogError::BadOption {
                            name: "limitBytes",
                            message: "must be greater than 0".into(),
                        });
                    }
                    o.limit_bytes = Some(usize::try_from(n).unwrap_or(usize::MAX));
                }
                "sinceSeconds" => {
                    let n = parse_int("sinceSeconds", &v)?;
                    if n < 1 {
                        return Err(LogError::BadOption {
                            name: "sinceSeconds",
                            message: "must be greater than 0".into(),
                        });
                    }
                    since_seconds = Some(n);
                }
                "sinceTime" => {
                    let t: Timestamp = v.parse().map_err(|e| LogError::BadOption {
                        name: "sinceTime",
                        message: format!("{v:?} is not an RFC3339 time: {e}"),
                    })?;
                    since_time = Some(i64::try_from(t.as_nanosecond()).unwrap_or(i64::MAX));
                }
                _ => {}
            }
        }
        o.since_nanos = match (since_seconds, since_time) {
            (Some(_), Some(_)) => {
                return Err(LogError::BadOption {
                    name: "sinceSeconds",
                    message: "at most one of sinceTime or sinceSeconds may be specified".into(),
                })
            }
            (Some(s), None) => Some(now_nanos.saturating_sub(s.saturating_mul(1_000_000_000))),
            (None, t) => t,
        };
        Ok(o)
    }
}

pub use kubelet_core::cri_log::{Record, Stream};

/// Parses one line (without its newline) of a CRI log file.
pub fn parse_cri_line(line: &[u8]) -> Result<Record, LogError> {
    kubelet_core::cri_log::parse_line(line).ok_or_else(|| {
        LogError::Malformed(String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned())
    })
}

/// A whole log line: partial records joined, stamped with the first part's time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Time of the line's first part.
    pub time_nanos: i64,
    /// The stream.
    pub stream: Stream,
    /// The line, ending in a newline.
    pub line: Vec<u8>,
}

/// Joins partial records per stream.
#[derive(Debug, Default)]
pub struct Assembler {
    pending: HashMap<Stream, (i64, Vec<u8>)>,
}

impl Assembler {
    /// Feeds a record; returns the line it completes, if any.
    pub fn push(&mut self, r: Record) -> Option<Message> {
        let entry = self
            .pending
            .entry(r.stream)
            .or_insert_with(|| (r.time_nanos, Vec::new()));
        entry.1.extend_from_slice(&r.content);
        if r.partial {
            return None;
        }
        let (time_nanos, mut line) = self.pending.remove(&r.stream)?;
        line.push(b'\n');
        Some(Message {
            time_nanos,
            stream: r.stream,
            line,
        })
    }
}

/// The rotated files of `path` (`<path>.<suffix>`, oldest first, `.gz` skipped) followed by
/// `path` itself when it exists.
pub async fn log_files(path: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        if let Ok(mut rd) = tokio::fs::read_dir(dir).await {
            let prefix = format!("{name}.");
            while let Ok(Some(e)) = rd.next_entry().await {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with(&prefix) && !n.ends_with(".gz") && !n.ends_with(".tmp") {
                    files.push(e.path());
                }
            }
        }
    }
    files.sort();
    if tokio::fs::metadata(path).await.is_ok() {
        files.push(path.to_path_buf());
    }
    files
}

fn format_time(nanos: i64) -> String {
    Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| format!("{t:.9}"))
        .unwrap_or_default()
}

/// Writes messages as the options say, respecting the byte limit; returns false once the
/// limit is reached.
struct Writer {
    timestamps: bool,
    since: Option<i64>,
    remaining: Option<usize>,
}

impl Writer {
    fn new(o: &LogOptions) -> Writer {
        Writer {
            timestamps: o.timestamps,
            since: o.since_nanos,
            remaining: o.limit_bytes,
        }
    }
    fn wanted(&self, m: &Message) -> bool {
        self.since.is_none_or(|s| m.time_nanos >= s)
    }
    fn write(&mut self, m: &Message, out: &mut Vec<u8>) -> bool {
        let mut bytes = Vec::with_capacity(m.line.len() + 32);
        if self.timestamps {
            bytes.extend_from_slice(format_time(m.time_nanos).as_bytes());
            bytes.push(b' ');
        }
        bytes.extend_from_slice(&m.line);
        match &mut self.remaining {
            None => {
                out.extend_from_slice(&bytes);
                true
            }
            Some(rem) => {
                let n = bytes.len().min(*rem);
                out.extend_from_slice(&bytes[..n]);
                *rem -= n;
                *rem > 0
            }
        }
    }
}

/// Decodes whole lines of `data` into messages; malformed lines are skipped with a warning,
/// as Go does.
fn decode(data: &[u8], asm: &mut Assembler, out: &mut Vec<Message>) {
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        match parse_cri_line(line) {
            Ok(r) => out.extend(asm.push(r)),
            Err(e) => tracing::warn!(error = %e, "skipping log line"),
        }
    }
}

/// The log output of the files (oldest first) under the options, except following.
pub async fn read_logs(files: &[PathBuf], o: &LogOptions) -> Result<Vec<u8>, LogError> {
    let mut asm = Assembler::default();
    let mut messages = Vec::new();
    for f in files {
        let data = tokio::fs::read(f).await.map_err(|source| LogError::Read {
            path: f.clone(),
            source,
        })?;
        decode(&data, &mut asm, &mut messages);
    }
    Ok(render(&messages, o))
}

/// Renders messages: `since` filter, then the last `tailLines`, timestamps, byte limit.
pub fn render(messages: &[Message], o: &LogOptions) -> Vec<u8> {
    let mut w = Writer::new(o);
    let wanted: Vec<&Message> = messages.iter().filter(|m| w.wanted(m)).collect();
    let skip = o
        .tail_lines
        .map(|n| wanted.len().saturating_sub(n))
        .unwrap_or(0);
    let mut out = Vec::new();
    for m in &wanted[skip..] {
        if !w.write(m, &mut out) {
            break;
        }
    }
    out
}

/// Follows `path` from the start (after the initial output of `initial`), sending new
/// lines until `running` says the container stopped (then what was written last is sent
/// and the stream ends), the receiver goes away, or `shutdown` fires.
pub async fn follow<F, Fut>(
    files: Vec<PathBuf>,
    path: PathBuf,
    o: LogOptions,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    running: F,
    shutdown: CancellationToken,
) where
    F: Fn() -> Fut + Send,
    Fut: std::future::Future<Output = bool> + Send,
{
    let mut w = Writer::new(&o);
    let mut asm = Assembler::default();
    // Initial output: everything up to now, tail applied.
    let mut messages = Vec::new();
    let mut offset = 0u64;
    for f in &files {
        match tokio::fs::read(f).await {
            Ok(data) => {
                if *f == path {
                    // Only complete lines; the rest is read again while following.
                    let complete = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                    offset = complete as u64;
                    decode(&data[..complete], &mut asm, &mut messages);
                } else {
                    decode(&data, &mut asm, &mut messages);
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        }
    }
    let initial = render(&messages, &o);
    if let Some(rem) = &mut w.remaining {
        *rem = rem.saturating_sub(initial.len());
        if *rem == 0 {
            let _ = tx.send(Ok(Bytes::from(initial))).await;
            return;
        }
    }
    if !initial.is_empty() && tx.send(Ok(Bytes::from(initial))).await.is_err() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    // The file being read and the inode the offset belongs to. A rotation (the kubelet
    // renames the log and the runtime reopens a new one) is noticed when the path names
    // another inode: the old file is read to its end once more — the runtime writes to
    // the new one only after it exists — and then the new one is read from its start, so
    // no line is lost across a rotation.
    let mut ino = inode(&path).await;
    let mut file: Option<(tokio::fs::File, u64)> = None;
    let mut draining = false;
    let mut ticks = 0u32;
    let mut stopping = false;
    loop {
        if file.is_none() {
            if let Ok(f) = tokio::fs::File::open(&path).await {
                let file_ino = f.metadata().await.map(|m| m.ino()).unwrap_or(0);
                if file_ino != ino {
                    offset = 0;
                    ino = file_ino;
                }
                file = Some((f, file_ino));
            }
        }
        let mut data = Vec::new();
        if let Some((f, _)) = file.as_mut() {
            let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
            if len < offset {
                // Truncated: start over.
                offset = 0;
            }
            if f.seek(std::io::SeekFrom::Start(offset)).await.is_ok() {
                let _ = f.read_to_end(&mut data).await;
            }
        }
        let complete = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if complete > 0 {
            offset += complete as u64;
            let mut msgs = Vec::new();
            decode(&data[..complete], &mut asm, &mut msgs);
            let mut out = Vec::new();
            let mut more = true;
            for m in &msgs {
                if !w.wanted(m) {
                    continue;
                }
                if !w.write(m, &mut out) {
                    more = false;
                    break;
                }
            }
            if !out.is_empty() && tx.send(Ok(Bytes::from(out))).await.is_err() {
                return;
            }
            if !more {
                return;
            }
            continue;
        }
        // Nothing new in the file being read: has it been rotated away?
        if let Some((_, file_ino)) = &file {
            let now_ino = inode(&path).await;
            if now_ino != 0 && now_ino != *file_ino {
                if draining {
                    draining = false;
                    file = None;
                    continue;
                }
                draining = true;
                continue;
            }
        }
        if stopping {
            return;
        }
        ticks += 1;
        if ticks % FOLLOW_STATE_EVERY == 0 && !running().await {
            // One more read for what the container wrote last.
            stopping = true;
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
            _ = tokio::time::sleep(FOLLOW_POLL) => {}
        }
    }
}

async fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    tokio::fs::metadata(path)
        .await
        .map(|m| m.ino())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-05-01T10:00:00.000000001Z";
    const T0_NANOS: i64 = 1_714_557_600_000_000_001;

    fn line(t: &str, stream: &str, tag: &str, content: &str) -> String {
        format!("{t} {stream} {tag} {content}\n")
    }

    #[test]
    fn parse_lines_table() {
        type Want<'a> = Option<(Stream, bool, &'a [u8])>;
        let cases: [(&[u8], Want); 7] = [
            (
                b"2024-05-01T10:00:00.000000001Z stdout F hello world",
                Some((Stream::Stdout, false, b"hello world")),
            ),
            (
                b"2024-05-01T10:00:00.000000001Z stderr P part",
                Some((Stream::Stderr, true, b"part")),
            ),
            (
                b"2024-05-01T10:00:00.000000001Z stdout F",
                Some((Stream::Stdout, false, b"")),
            ),
            (
                b"2024-05-01T10:00:00.000000001Z stdout F:x y",
                Some((Stream::Stdout, false, b"y")),
            ),
            (b"garbage", None),
            (b"2024-05-01T10:00:00Z stdin F x", None),
            (b"2024-05-01T10:00:00Z stdout Q x", None),
        ];
        for (input, want) in cases {
            let got = parse_cri_line(input).ok();
            match (got, want) {
                (Some(r), Some((s, p, c))) => {
                    assert_eq!((r.stream, r.partial, r.content.as_slice()), (s, p, c));
                    assert_eq!(r.time_nanos, T0_NANOS);
                }
                (None, None) => {}
                (g, w) => panic!("{:?}: got {g:?} want {w:?}", String::from_utf8_lossy(input)),
            }
        }
    }

    #[test]
    fn query_options() {
        let now = 1_000_000_000_000;
        let o = LogOptions::from_query(
            "follow=true&tailLines=3&limitBytes=10&sinceSeconds=5&timestamps=1&previous=false",
            now,
        )
        .unwrap();
        assert_eq!(
            o,
            LogOptions {
                follow: true,
                tail_lines: Some(3),
                limit_bytes: Some(10),
                since_nanos: Some(now - 5_000_000_000),
                timestamps: true,
                previous: false,
            }
        );
        let t = LogOptions::from_query("sinceTime=2024-05-01T10%3A00%3A00Z", now).unwrap();
        assert_eq!(t.since_nanos, Some(T0_NANOS - 1));
        for bad in [
            "tailLines=-1",
            "tailLines=x",
            "limitBytes=0",
            "sinceSeconds=0",
            "sinceSeconds=1&sinceTime=2024-05-01T10:00:00Z",
            "sinceTime=yesterday",
            "follow=maybe",
        ] {
            assert!(LogOptions::from_query(bad, now).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn files_partials_rotation_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("0.log");
        let old = dir.path().join("0.log.20240501-100000");
        let gz = dir.path().join("0.log.20240501-090000.gz");
        let t = |s: u32| format!("2024-05-01T10:00:{s:02}.000000000Z");
        std::fs::write(&gz, "not read").unwrap();
        std::fs::write(
            &old,
            [
                line(&t(1), "stdout", "F", "one"),
                line(&t(2), "stdout", "P", "tw"),
            ]
            .concat(),
        )
        .unwrap();
        std::fs::write(
            &cur,
            [
                line(&t(3), "stderr", "F", "err"),
                line(&t(4), "stdout", "F", "o"),
                "junk line\n".to_string(),
                line(&t(5), "stdout", "F", "three"),
            ]
            .concat(),
        )
        .unwrap();
        let files = log_files(&cur).await;
        assert_eq!(files, vec![old.clone(), cur.clone()]);
        let read = |o: LogOptions| {
            let files = files.clone();
            async move { String::from_utf8(read_logs(&files, &o).await.unwrap()).unwrap() }
        };
        assert_eq!(read(LogOptions::default()).await, "one\nerr\ntwo\nthree\n");
        let tail = LogOptions {
            tail_lines: Some(2),
            ..Default::default()
        };
        assert_eq!(read(tail).await, "two\nthree\n");
        let zero = LogOptions {
            tail_lines: Some(0),
            ..Default::default()
        };
        assert_eq!(read(zero).await, "");
        let limit = LogOptions {
            limit_bytes: Some(6),
            ..Default::default()
        };
        assert_eq!(read(limit).await, "one\ner");
        let since: Timestamp = t(3).parse().unwrap();
        let since = LogOptions {
            since_nanos: Some(since.as_nanosecond() as i64),
            ..Default::default()
        };
        assert_eq!(read(since).await, "err\nthree\n");
        let ts = LogOptions {
            timestamps: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        assert_eq!(read(ts).await, "2024-05-01T10:00:05.000000000Z three\n");
    }

    #[tokio::test]
    async fn follow_streams_appended_lines_until_the_container_stops() {
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("0.log");
        std::fs::write(&cur, line(T0, "stdout", "F", "first")).unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stopped.clone();
        let files = log_files(&cur).await;
        let task = tokio::spawn(follow(
            files,
            cur.clone(),
            LogOptions {
                follow: true,
                ..Default::default()
            },
            tx,
            move || {
                let s = s2.clone();
                async move { !s.load(std::sync::atomic::Ordering::SeqCst) }
            },
            CancellationToken::new(),
        ));
        assert_eq!(rx.recv().await.unwrap().unwrap(), Bytes::from("first\n"));
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&cur).unwrap();
            f.write_all(line(T0, "stdout", "P", "sec").as_bytes())
                .unwrap();
            f.write_all(line(T0, "stdout", "F", "ond").as_bytes())
                .unwrap();
        }
        assert_eq!(rx.recv().await.unwrap().unwrap(), Bytes::from("second\n"));
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&cur).unwrap();
            f.write_all(line(T0, "stdout", "F", "last").as_bytes())
                .unwrap();
        }
        stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(rx.recv().await.unwrap().unwrap(), Bytes::from("last\n"));
        assert!(rx.recv().await.is_none());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn follow_survives_a_rotation_without_losing_lines() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("0.log");
        std::fs::write(&cur, line(T0, "stdout", "F", "a")).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        let files = log_files(&cur).await;
        let task = tokio::spawn(follow(
            files,
            cur.clone(),
            LogOptions {
                follow: true,
                ..Default::default()
            },
            tx,
            || async { true },
            CancellationToken::new(),
        ));
        assert_eq!(rx.recv().await.unwrap().unwrap(), Bytes::from("a\n"));
        // The kubelet renames the log; the runtime still writes to it until it reopens.
        let mut old = std::fs::OpenOptions::new().append(true).open(&cur).unwrap();
        std::fs::rename(&cur, dir.path().join("0.log.20240501-100000")).unwrap();
        old.write_all(line(T0, "stdout", "F", "b").as_bytes())
            .unwrap();
        // The runtime reopens: a new file; a last line still lands in the old one.
        let mut new = std::fs::File::create(&cur).unwrap();
        old.write_all(line(T0, "stdout", "F", "c").as_bytes())
            .unwrap();
        drop(old);
        new.write_all(line(T0, "stdout", "F", "d").as_bytes())
            .unwrap();
        let mut got = String::new();
        while !got.ends_with("d\n") {
            let b = rx.recv().await.unwrap().unwrap();
            got.push_str(std::str::from_utf8(&b).unwrap());
        }
        assert_eq!(got, "b\nc\nd\n");
        task.abort();
    }
}
