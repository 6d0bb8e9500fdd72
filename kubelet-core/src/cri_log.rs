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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any bytes: a record or `None`, never a panic.
        #[test]
        fn any_bytes(line in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = parse_line(&line);
        }

        /// Record-shaped lines with any time, stream, tag and content.
        #[test]
        fn shaped(
            time in "([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{0,12})?(Z|[+-][0-9]{2}:[0-9]{2})|[0-9TZ:.-]{0,30})",
            stream in "(stdout|stderr|stdin|)",
            tag in "(F|P|F:[a-z:]{0,8}|P:x|Q|)",
            content in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut line = format!("{time} {stream} {tag} ").into_bytes();
            line.extend_from_slice(&content);
            if let Some(r) = parse_line(&line) {
                proptest::prop_assert_eq!(r.content, content);
                proptest::prop_assert_eq!(r.partial, tag.starts_with('P'));
            }
        }
    }

    #[test]
    fn well_formed_record() {
        let r = parse_line(b"2024-05-01T10:00:00.5Z stderr P:x a b").unwrap();
        assert_eq!(r.stream, Stream::Stderr);
        assert!(r.partial);
        assert_eq!(r.content, b"a b");
        assert_eq!(r.time_nanos, 1_714_557_600_500_000_000);
    }
}
