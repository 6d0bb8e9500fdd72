//! Reading CRI log files with work bounded by the output.
//!
//! - Files are read in [`CHUNK`]-sized pieces ([`LineChunks`]); only complete lines are
//!   decoded, and a line longer than [`MAX_RECORD_BYTES`] (no CRI runtime writes one) is
//!   skipped up to its newline instead of being buffered.
//! - Without `tailLines` the output is streamed as it is decoded, through a bounded channel:
//!   a slow client slows the reader, memory stays a few chunks.
//! - With `tailLines = n`, [`tail_start`] scans backwards from the end of the newest file
//!   (then older ones) in chunks, counting final (`F`) records until it has `n` of them and
//!   the partial (`P`) records that begin the oldest of those lines; reading forward from
//!   there keeps the last `n` lines in a ring. A `tailLines=10` request on a 1 GiB log reads a
//!   few kilobytes.
//! - Following goes on reading the newest file after its last complete line, a chunk at a
//!   time, and ends the stream when the client has not taken a chunk for
//!   [`FollowLimits::idle_timeout`] (a peer that stopped reading).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{decode, Assembler, LogError, LogOptions, Message, Writer, MAX_LINE_BYTES};
use kubelet_core::cri_log::Stream;

/// Read size.
pub const CHUNK: usize = 64 * 1024;
/// Longest CRI record line decoded (records carry at most 16 KiB of content in practice).
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// How much further back than the `n`-th line the tail scan looks for that line's
/// beginning (its partial records).
const MAX_TAIL_EXTRA: u64 = 2 * MAX_LINE_BYTES as u64;

/// How a followed stream is paced and bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowLimits {
    /// How often the file is checked for new data.
    pub poll: Duration,
    /// How often (in polls) the container's state is checked.
    pub state_every: u32,
    /// The stream ends when the client has not taken a chunk for this long
    /// (`streamingConnectionIdleTimeout`).
    pub idle_timeout: Duration,
}

impl Default for FollowLimits {
    fn default() -> Self {
        FollowLimits {
            poll: Duration::from_millis(200),
            state_every: 5,
            idle_timeout: Duration::from_secs(4 * 3600),
        }
    }
}

/// Complete lines of one file, read forward in chunks.
struct LineChunks {
    file: tokio::fs::File,
    /// Offset of the next byte to read.
    pos: u64,
    /// Bytes after the last newline read (an unfinished line).
    carry: Vec<u8>,
    /// Inside a line over the limit: drop bytes up to the next newline.
    skipping: bool,
}

impl LineChunks {
    async fn open(path: &Path, start: u64) -> std::io::Result<LineChunks> {
        let mut file = tokio::fs::File::open(path).await?;
        if start > 0 {
            file.seek(std::io::SeekFrom::Start(start)).await?;
        }
        Ok(LineChunks {
            file,
            pos: start,
            carry: Vec::new(),
            skipping: false,
        })
    }

    /// The next run of complete lines (each ending in a newline); `None` at the end of the
    /// file, with an unfinished last line left in `carry`.
    async fn next(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = self.file.read(&mut buf).await?;
            if n == 0 {
                return Ok(None);
            }
            self.pos += n as u64;
            let mut data = &buf[..n];
            if self.skipping {
                match data.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        data = &data[i + 1..];
                        self.skipping = false;
                    }
                    None => continue,
                }
            }
            match data.iter().rposition(|b| *b == b'\n') {
                None => self.keep(data),
                Some(i) => {
                    let mut out = std::mem::take(&mut self.carry);
                    out.extend_from_slice(&data[..=i]);
                    self.keep(&data[i + 1..]);
                    return Ok(Some(out));
                }
            }
        }
    }

    fn keep(&mut self, rest: &[u8]) {
        self.carry.extend_from_slice(rest);
        if self.carry.len() > MAX_RECORD_BYTES {
            tracing::warn!(
                bytes = self.carry.len(),
                "skipping a log line longer than {MAX_RECORD_BYTES} bytes"
            );
            self.carry.clear();
            self.skipping = true;
        }
    }

    /// Offset just past the last complete line returned.
    fn complete_offset(&self) -> u64 {
        self.pos - self.carry.len() as u64
    }
}

/// The tag byte (`F`/`P`) and stream of a record line, from its first bytes.
fn tag_of(prefix: &[u8]) -> Option<(Stream, bool)> {
    let mut parts = prefix.splitn(4, |b| *b == b' ');
    let _time = parts.next()?;
    let stream = match parts.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    match parts.next()?.first()? {
        b'F' => Some((stream, false)),
        b'P' => Some((stream, true)),
        _ => None,
    }
}

/// Bytes of a line's beginning that [`tag_of`] needs.
const PREFIX: usize = 64;

/// State of the backward scan.
#[derive(Default)]
struct TailCount {
    wanted: usize,
    /// Final records counted in the window, per stream (stdout, stderr).
    in_window: [usize; 2],
    /// Final records seen beyond the window, per stream.
    beyond: [usize; 2],
    total: usize,
    /// Bytes scanned since the window was complete.
    extra: u64,
}

impl TailCount {
    /// Counts one line (seen backwards); true when reading may start at this line.
    fn line(&mut self, prefix: &[u8], len: u64) -> bool {
        let Some((stream, partial)) = tag_of(prefix) else {
            return false;
        };
        let s = usize::from(stream == Stream::Stderr);
        if self.total < self.wanted {
            if !partial {
                self.in_window[s] += 1;
                self.total += 1;
            }
            return self.total >= self.wanted && self.complete();
        }
        self.extra += len;
        if !partial {
            self.beyond[s] += 1;
        }
        self.complete() || self.extra > MAX_TAIL_EXTRA
    }

    /// Has every stream with a line in the window seen the final record before it (so the
    /// window's oldest lines start after this point)?
    fn complete(&self) -> bool {
        (0..2).all(|s| self.in_window[s] == 0 || self.beyond[s] > 0)
    }
}

/// Where to start reading `files` (oldest first) so that the last `n` lines (with their
/// partial records) follow: a file index and an offset in it. Reads backwards in chunks.
async fn tail_start(files: &[PathBuf], n: usize) -> std::io::Result<(usize, u64)> {
    let mut count = TailCount {
        wanted: n,
        ..TailCount::default()
    };
    if n == 0 {
        let last = files.len().saturating_sub(1);
        let len = match files.get(last) {
            Some(f) => match tokio::fs::metadata(f).await {
                Ok(m) => m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
                Err(e) => return Err(e),
            },
            None => 0,
        };
        return Ok((last, len));
    }
    let mut buf = vec![0u8; CHUNK];
    for (idx, path) in files.iter().enumerate().rev() {
        let mut f = match tokio::fs::File::open(path).await {
            Ok(f) => f,
            // Rotated away (renamed, compressed) since the files were listed: nothing of it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut end = f.metadata().await?.len();
        // The line that continues into what was already scanned: its first bytes as known
        // so far, and its length so far.
        let mut frag_prefix: Vec<u8> = Vec::new();
        let mut frag_len = 0u64;
        while end > 0 {
            let start = end.saturating_sub(CHUNK as u64);
            let len = (end - start) as usize;
            f.seek(std::io::SeekFrom::Start(start)).await?;
            f.read_exact(&mut buf[..len]).await?;
            let block = &buf[..len];
            let mut right = len;
            let mut joined = true;
            while let Some(nl) = block[..right].iter().rposition(|b| *b == b'\n') {
                let seg = &block[nl + 1..right];
                let mut prefix = seg[..seg.len().min(PREFIX)].to_vec();
                let mut line_len = seg.len() as u64;
                if joined {
                    prefix.extend(frag_prefix.iter().take(PREFIX - prefix.len()));
                    line_len += frag_len;
                }
                if line_len > 0 && count.line(&prefix, line_len) {
                    return Ok((idx, start + nl as u64 + 1));
                }
                right = nl;
                joined = false;
            }
            let seg = &block[..right];
            let mut prefix = seg[..seg.len().min(PREFIX)].to_vec();
            if joined {
                prefix.extend(frag_prefix.iter().take(PREFIX - prefix.len()));
                frag_len += right as u64;
            } else {
                frag_len = right as u64;
            }
            frag_prefix = prefix;
            end = start;
        }
        if frag_len > 0 && count.line(&frag_prefix, frag_len) {
            return Ok((idx, 0));
        }
    }
    Ok((0, 0))
}

/// Messages of `files` from a starting point on, a chunk at a time. At the end of the last
/// file it stays open there, so a follower can read what is appended later.
struct Reader {
    files: Vec<PathBuf>,
    idx: usize,
    chunks: Option<LineChunks>,
    next_offset: u64,
    asm: Assembler,
    /// Decode the newest file's unfinished last line and pass on the partial records still
    /// waiting for their final one at its end (not when following).
    include_unfinished: bool,
}

impl Reader {
    fn new(files: Vec<PathBuf>, start: (usize, u64), include_unfinished: bool) -> Reader {
        Reader {
            files,
            idx: start.0,
            chunks: None,
            next_offset: start.1,
            asm: Assembler::default(),
            include_unfinished,
        }
    }

    fn read_err(&self, source: std::io::Error) -> LogError {
        LogError::Read {
            path: self.files.get(self.idx).cloned().unwrap_or_default(),
            error: source,
        }
    }

    /// The next messages; `None` at the end of the last file (call again for more).
    async fn next_batch(&mut self) -> Result<Option<Vec<Message>>, LogError> {
        loop {
            let Some(path) = self.files.get(self.idx).cloned() else {
                return Ok(None);
            };
            let is_last = self.idx + 1 == self.files.len();
            if self.chunks.is_none() {
                let c = match LineChunks::open(&path, self.next_offset).await {
                    Ok(c) => c,
                    // Rotated away (renamed, compressed) since the files were listed: what it
                    // held is in a file this read does not cover; go on with the next one.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.idx += 1;
                        self.next_offset = 0;
                        continue;
                    }
                    Err(e) => return Err(self.read_err(e)),
                };
                self.chunks = Some(c);
            }
            let Some(chunks) = self.chunks.as_mut() else {
                return Ok(None);
            };
            let data = match chunks.next().await {
                Ok(d) => d,
                Err(e) => return Err(self.read_err(e)),
            };
            let mut msgs = Vec::new();
            match data {
                Some(d) => {
                    decode(&d, &mut self.asm, &mut msgs);
                    return Ok(Some(msgs));
                }
                None if is_last => {
                    if !self.include_unfinished {
                        return Ok(None);
                    }
                    if !chunks.carry.is_empty() {
                        let rest = std::mem::take(&mut chunks.carry);
                        decode(&rest, &mut self.asm, &mut msgs);
                    }
                    // The end of a read that does not follow: the last line's partial
                    // records count as they are (Go writes each partial record as read).
                    msgs.extend(self.asm.flush());
                    if msgs.is_empty() {
                        return Ok(None);
                    }
                    return Ok(Some(msgs));
                }
                None => {
                    // A rotated file's unfinished last line is all there is of it.
                    let rest = std::mem::take(&mut chunks.carry);
                    decode(&rest, &mut self.asm, &mut msgs);
                    self.chunks = None;
                    self.idx += 1;
                    self.next_offset = 0;
                    if !msgs.is_empty() {
                        return Ok(Some(msgs));
                    }
                }
            }
        }
    }

    /// Starts over on a new file at `path` (rotated or truncated under a follower).
    fn restart(&mut self, path: PathBuf) {
        self.files = vec![path];
        self.idx = 0;
        self.chunks = None;
        self.next_offset = 0;
    }
}

/// Sends `bytes`, waiting at most `idle` for the client to take them; false when the client
/// is gone or stopped reading.
async fn send(
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    bytes: Vec<u8>,
    idle: Duration,
) -> bool {
    if bytes.is_empty() {
        return true;
    }
    match tokio::time::timeout(idle, tx.send(Ok(Bytes::from(bytes)))).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            tracing::debug!("log stream client stopped reading; ending the stream");
            false
        }
    }
}

/// The output before following: everything under the options (the last `tailLines` found
/// by seeking backwards), sent as it is produced. Returns the reader (positioned at the end
/// of the newest file) and the writer, or `None` when the stream ended (limit reached,
/// client gone).
async fn initial(
    files: Vec<PathBuf>,
    o: &LogOptions,
    include_unfinished: bool,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    idle: Duration,
) -> Result<Option<(Reader, Writer)>, LogError> {
    let mut w = Writer::new(o);
    let Some(n) = o.tail_lines else {
        let mut reader = Reader::new(files, (0, 0), include_unfinished);
        while let Some(batch) = reader.next_batch().await? {
            let mut out = Vec::new();
            for m in &batch {
                if w.wanted(m) && !w.write(m, &mut out) {
                    break;
                }
            }
            if !send(tx, out, idle).await || w.done() {
                return Ok(None);
            }
        }
        return Ok(Some((reader, w)));
    };
    let start = tail_start(&files, n)
        .await
        .map_err(|source| LogError::Read {
            path: files.last().cloned().unwrap_or_default(),
            error: source,
        })?;
    let mut reader = Reader::new(files, start, include_unfinished);
    let mut ring: VecDeque<Message> = VecDeque::with_capacity(n.min(1024));
    while let Some(batch) = reader.next_batch().await? {
        for m in batch.into_iter().filter(|m| w.wanted(m)) {
            if n == 0 {
                break;
            }
            if ring.len() == n {
                ring.pop_front();
            }
            ring.push_back(m);
        }
    }
    let mut out = Vec::new();
    for m in &ring {
        if !w.write(m, &mut out) {
            break;
        }
    }
    if !send(tx, out, idle).await || w.done() {
        return Ok(None);
    }
    Ok(Some((reader, w)))
}

/// The log output of the files (oldest first) under the options, except following,
/// collected (see [`stream_logs`] for the streamed form).
pub async fn read_logs(files: &[PathBuf], o: &LogOptions) -> Result<Vec<u8>, LogError> {
    let (tx, mut rx) = mpsc::channel(4);
    let files = files.to_vec();
    let o = o.clone();
    let producer = async move {
        let r = initial(files, &o, true, &tx, Duration::MAX).await;
        drop(tx);
        r
    };
    let consumer = async move {
        let mut out = Vec::new();
        while let Some(Ok(chunk)) = rx.recv().await {
            out.extend_from_slice(&chunk);
        }
        out
    };
    let (r, out) = tokio::join!(producer, consumer);
    r.map(|_| out)
}

/// Streams the log output of the files (oldest first) under the options, except following,
/// into `tx`; ends when done, at the byte limit, when the client leaves or has not taken a
/// chunk for `idle`. A read error ends the stream with that error.
pub async fn stream_logs(
    files: Vec<PathBuf>,
    o: LogOptions,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    idle: Duration,
) {
    if let Err(e) = initial(files, &o, true, &tx, idle).await {
        let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
    }
}

/// Follows `path` (after the initial output of `files`, tail applied), sending new lines
/// until `running` says the container stopped (then what was written last is sent and the
/// stream ends), the receiver goes away, or `shutdown` fires. [`FollowLimits::default`].
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
    follow_with(
        files,
        path,
        o,
        tx,
        running,
        shutdown,
        FollowLimits::default(),
    )
    .await
}

/// [`follow`] with explicit pacing and idle limits.
pub async fn follow_with<F, Fut>(
    files: Vec<PathBuf>,
    path: PathBuf,
    o: LogOptions,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    running: F,
    shutdown: CancellationToken,
    limits: FollowLimits,
) where
    F: Fn() -> Fut + Send,
    Fut: std::future::Future<Output = bool> + Send,
{
    let idle = limits.idle_timeout;
    let ino = inode(&path).await;
    let started = tokio::select! {
        _ = shutdown.cancelled() => return,
        r = initial(files, &o, false, &tx, idle) => r,
    };
    let (mut reader, mut w) = match started {
        Ok(Some(x)) => x,
        Ok(None) => return,
        Err(e) => {
            let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
            return;
        }
    };
    if reader.files.last() != Some(&path) {
        // The current file did not exist yet: start on it.
        reader.restart(path.clone());
    }
    let mut ino = ino;
    let mut draining = false;
    let mut ticks = 0u32;
    let mut stopping = false;
    loop {
        let batch = tokio::select! {
            _ = shutdown.cancelled() => return,
            b = reader.next_batch() => b,
        };
        match batch {
            Ok(Some(msgs)) => {
                let mut out = Vec::new();
                for m in &msgs {
                    if w.wanted(m) && !w.write(m, &mut out) {
                        break;
                    }
                }
                if !send(&tx, out, idle).await || w.done() {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                return;
            }
        }
        if stopping {
            return;
        }
        // Rotated (the kubelet renamed the log and the runtime reopened a new one at the
        // path) or truncated: start over on the new file. After a rotation the old file,
        // still open, is read to its end once more first — the runtime writes to the new
        // one only after it exists — so no line is lost across a rotation.
        let now_ino = inode(&path).await;
        let len = tokio::fs::metadata(&path)
            .await
            .map(|m| m.len())
            .unwrap_or(0);
        let offset = reader
            .chunks
            .as_ref()
            .map_or(0, LineChunks::complete_offset);
        // Between the rename and the runtime's reopen the path is missing (`now_ino` 0):
        // the old file, still open, is read on; only a file that is still the same one and
        // shrank was truncated.
        let rotated = now_ino != 0 && now_ino != ino;
        let truncated = now_ino == ino && len < offset;
        if rotated && !draining {
            draining = true;
            continue;
        }
        if rotated || truncated {
            draining = false;
            ino = now_ino;
            reader.restart(path.clone());
            continue;
        }
        ticks += 1;
        if ticks % limits.state_every.max(1) == 0 && !running().await {
            // One more read for what the container wrote last.
            stopping = true;
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
            _ = tokio::time::sleep(limits.poll) => {}
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
#[path = "read_tests.rs"]
mod tests;
