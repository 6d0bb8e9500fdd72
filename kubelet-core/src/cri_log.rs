//! The CRI container log format (`<RFC3339Nano time> <stdout|stderr> <P|F>[:tags] <content>`,
//! one record a line; `P` marks a line continued by the stream's next record). Used by the
//! engine for `FallbackToLogsOnError` termination messages and by the HTTP server for
//! `/containerLogs`.

use k8s_openapi::jiff::Timestamp;

/// Which output stream a record is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// stdout
    Stdout,
    /// stderr
    Stderr,
}

/// One parsed CRI log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Time, ns since the epoch.
    pub time_nanos: i64,
    /// The stream.
    pub stream: Stream,
    /// `P`: continued by the next record of the stream.
    pub partial: bool,
    /// The content (no trailing newline).
    pub content: Vec<u8>,
}

/// Parses one line (without its newline); `None` when it is not a CRI log record.
pub fn parse_line(line: &[u8]) -> Option<Record> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let time = parts.next()?;
    let stream = parts.next()?;
    let tag = parts.next()?;
    let content = parts.next().unwrap_or_default();
    let time: Timestamp = std::str::from_utf8(time).ok()?.parse().ok()?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    // The tag is `P` or `F`, possibly followed by more `:`-separated tags.
    let partial = match tag.split(|b| *b == b':').next() {
        Some(b"P") => true,
        Some(b"F") => false,
        _ => return None,
    };
    Some(Record {
        time_nanos: i64::try_from(time.as_nanosecond()).unwrap_or(i64::MAX),
        stream,
        partial,
        content: content.to_vec(),
    })
}
