//! Where log lines go, as klog's flags and component-base's split streams send them.
//!
//! - `--logtostderr=true` (klog's default): standard error only (`--log-file` and the rest
//!   have no effect, as in klog); with `splitStream`, the info stream (info, debug, trace,
//!   and warnings: component-base's JSON writes them as info lines at `v` 0) to standard
//!   output and errors to standard error.
//! - `--logtostderr=false` with `--log-file`: every line to the file (opened for appending,
//!   created 0600 if missing); lines at or above `--stderrthreshold` (klog's severities:
//!   INFO 0, WARNING 1, ERROR 2, the default) to standard error too, and every line with
//!   `--alsologtostderr`. With `--log-file-max-size` N (MB, 0: no limit) the file is emptied
//!   when a line would take it over N MB, as klog truncates it.
//!
//! Each line is one `write` (the formatter hands over a whole line); a failed write to the
//! file is reported once on standard error, and logging goes on.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// klog's severity of a `tracing` level (INFO 0, WARNING 1, ERROR 2).
pub fn severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 2,
        Level::WARN => 1,
        _ => 0,
    }
}

/// klog's `--stderrthreshold` value: a severity name, or any 32-bit number (klog takes
/// one; above 2 nothing logged reaches standard error, below 1 everything does).
pub fn parse_severity(text: &str) -> Option<i32> {
    match text.trim().to_ascii_uppercase().as_str() {
        "INFO" => Some(0),
        "WARNING" => Some(1),
        "ERROR" => Some(2),
        "FATAL" => Some(3),
        number => number.parse().ok(),
    }
}

/// Where lines go. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard error (standard output for info lines when `split_stream`).
    Stderr {
        /// Info lines to standard output.
        split_stream: bool,
    },
    /// A file, and standard error for some lines.
    File {
        /// The file.
        path: PathBuf,
        /// Truncate beyond this many bytes (0: never).
        max_bytes: u64,
        /// Lines of at least this severity also go to standard error.
        stderr_threshold: i32,
        /// Every line also goes to standard error.
        also_to_stderr: bool,
    },
}

#[derive(Debug)]
struct OpenFile {
    file: File,
    written: u64,
    max_bytes: u64,
    failed: bool,
}

/// The `MakeWriter` of the log layer.
#[derive(Debug, Clone)]
pub struct Sink {
    destination: Destination,
    file: Option<Arc<Mutex<OpenFile>>>,
}

impl Sink {
    /// Opens the destination (the log file, when there is one).
    pub fn open(destination: Destination) -> io::Result<Sink> {
        let file = match &destination {
            Destination::File {
                path, max_bytes, ..
            } => {
                use std::os::unix::fs::OpenOptionsExt as _;
                let file = std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let written = file.metadata()?.len();
                Some(Arc::new(Mutex::new(OpenFile {
                    file,
                    written,
                    max_bytes: *max_bytes,
                    failed: false,
                })))
            }
            Destination::Stderr { .. } => None,
        };
        Ok(Sink { destination, file })
    }
}

/// One line's writer.
#[derive(Debug)]
pub struct LineWriter {
    file: Option<Arc<Mutex<OpenFile>>>,
    stdout: bool,
    stderr: bool,
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(file) = &self.file {
            let mut f = file.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = f.append(buf) {
                if !f.failed {
                    f.failed = true;
                    let _ = writeln!(io::stderr(), "kubelet: writing the log file: {e}");
                }
            }
        }
        if self.stdout {
            io::stdout().write_all(buf)?;
        }
        if self.stderr {
            io::stderr().write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl OpenFile {
    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        if self.max_bytes > 0 && self.written > 0 && self.written + len > self.max_bytes {
            // klog re-creates the file: it starts empty.
            self.file.set_len(0)?;
            self.written = 0;
        }
        self.file.write_all(buf)?;
        self.written += len;
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Sink {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            file: self.file.clone(),
            stdout: false,
            stderr: self.file.is_none(),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter {
        self.route(meta.level())
    }
}

impl Sink {
    /// The writer of a line at `level`.
    fn route(&self, level: &Level) -> LineWriter {
        let sev = severity(level);
        match &self.destination {
            // component-base's streams: errors, and the info stream (warnings included:
            // the JSON format's warnings are info lines at v=0).
            Destination::Stderr { split_stream } => LineWriter {
                file: None,
                stdout: *split_stream && sev < 2,
                stderr: !(*split_stream && sev < 2),
            },
            Destination::File {
                stderr_threshold,
                also_to_stderr,
                ..
            } => LineWriter {
                file: self.file.clone(),
                stdout: false,
                stderr: *also_to_stderr || i32::from(sev) >= *stderr_threshold,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_routed_by_severity() {
        let split = Sink::open(Destination::Stderr { split_stream: true }).unwrap();
        let w = split.route(&Level::INFO);
        assert!(w.stdout && !w.stderr);
        let w = split.route(&Level::WARN);
        assert!(w.stdout && !w.stderr);
        let w = split.route(&Level::ERROR);
        assert!(!w.stdout && w.stderr);
        let plain = Sink::open(Destination::Stderr {
            split_stream: false,
        })
        .unwrap();
        let w = plain.route(&Level::INFO);
        assert!(!w.stdout && w.stderr);

        let dir = tempfile::tempdir().unwrap();
        let file = |threshold, also| {
            Sink::open(Destination::File {
                path: dir.path().join("k.log"),
                max_bytes: 0,
                stderr_threshold: threshold,
                also_to_stderr: also,
            })
            .unwrap()
        };
        let s = file(2, false);
        assert!(!s.route(&Level::WARN).stderr);
        assert!(s.route(&Level::ERROR).stderr);
        assert!(s.route(&Level::INFO).file.is_some());
        assert!(file(0, false).route(&Level::INFO).stderr);
        assert!(file(2, true).route(&Level::INFO).stderr);
    }

    #[test]
    fn the_file_is_appended_to_and_emptied_past_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.log");
        std::fs::write(&path, "old\n").unwrap();
        let sink = Sink::open(Destination::File {
            path: path.clone(),
            max_bytes: 10,
            stderr_threshold: 3,
            also_to_stderr: false,
        })
        .unwrap();
        sink.route(&Level::INFO).write_all(b"one\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\none\n");
        sink.route(&Level::INFO).write_all(b"three\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "three\n",
            "emptied first"
        );
        use std::os::unix::fs::PermissionsExt as _;
        let fresh = dir.path().join("new.log");
        Sink::open(Destination::File {
            path: fresh.clone(),
            max_bytes: 0,
            stderr_threshold: 2,
            also_to_stderr: false,
        })
        .unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn severities_parse_as_klog() {
        for (text, want) in [
            ("2", Some(2)),
            ("ERROR", Some(2)),
            ("warning", Some(1)),
            ("INFO", Some(0)),
            ("FATAL", Some(3)),
            ("7", Some(7)),
            ("-1", Some(-1)),
            ("loud", None),
        ] {
            assert_eq!(parse_severity(text), want, "{text}");
        }
    }
}
