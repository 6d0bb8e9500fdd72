//! Termination messages (`terminationMessagePath`, `terminationMessagePolicy`), as Go's
//! kuberuntime does them.
//!
//! Before a container is created, an empty host file
//! `<root-dir>/pods/<uid>/containers/<name>/<restartCount>` is bind-mounted read-write at the
//! container's `terminationMessagePath` (default `/dev/termination-log`; an empty path turns
//! it off). After the container exited, its `terminated.message` is that file's content (at
//! most 4096 bytes). With `FallbackToLogsOnError`, an empty file and a non-zero exit code, the
//! message is the tail of the container's log instead (last 80 lines, at most 2048 bytes).

use std::io::SeekFrom;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::cri_log::{parse_line, Stream};
use crate::pod;
use crate::runtime::{Mount, MountPropagation};

/// Go's default `terminationMessagePath`.
pub const DEFAULT_PATH: &str = "/dev/termination-log";
/// Most bytes of a termination message file.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Most log lines used by `FallbackToLogsOnError`.
pub const MAX_LOG_LINES: usize = 80;
/// Most log bytes used by `FallbackToLogsOnError`.
pub const MAX_LOG_BYTES: usize = 2048;

/// The host file backing a container attempt's termination message.
pub fn host_path(root_dir: &Path, p: &Pod, container: &str, attempt: u32) -> PathBuf {
    root_dir
        .join("pods")
        .join(pod::uid(p))
        .join("containers")
        .join(container)
        .join(attempt.to_string())
}

/// The container's termination message path in the container (`None`: turned off).
pub fn container_path(c: &Container) -> Option<&str> {
    match c.termination_message_path.as_deref() {
        None => Some(DEFAULT_PATH),
        Some("") => None,
        Some(p) => Some(p),
    }
}

/// Why the termination-message file of a container could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The pod's uid cannot name a directory.
    #[error("pod uid {0:?} cannot name a pod directory")]
    UnsafeUid(String),
    /// Creating the file failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What was done ("creating", "chmod").
        op: &'static str,
        /// The path.
        path: std::path::PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// Creates the (empty, world-writable) host file and returns the mount for it.
pub async fn prepare(
    root_dir: &Path,
    p: &Pod,
    c: &Container,
    attempt: u32,
) -> Result<Option<Mount>, PrepareError> {
    let Some(in_container) = container_path(c) else {
        return Ok(None);
    };
    if root_dir.as_os_str().is_empty() {
        return Ok(None);
    }
    if !pod::is_safe_uid(pod::uid(p)) {
        return Err(PrepareError::UnsafeUid(pod::uid(p).to_string()));
    }
    let file = host_path(root_dir, p, &c.name, attempt);
    let dir = file.parent().unwrap_or(root_dir);
    let io = |op, path: &Path| {
        let path = path.to_path_buf();
        move |error| PrepareError::Io { op, path, error }
    };
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(io("creating", dir))?;
    tokio::fs::write(&file, b"")
        .await
        .map_err(io("creating", &file))?;
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666))
            .await
            .map_err(io("chmod", &file))?;
    }
    Ok(Some(Mount {
        container_path: in_container.to_string(),
        host_path: file,
        read_only: false,
        propagation: MountPropagation::Private,
    }))
}

/// Reads at most `limit` bytes from the start of a file (empty when it is missing).
async fn read_head(path: &Path, limit: usize) -> String {
    let Ok(f) = tokio::fs::File::open(path).await else {
        return String::new();
    };
    let mut buf = Vec::new();
    let _ = f
        .take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(&mut buf)
        .await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// The content of CRI log lines, partial lines joined (per stream, as they were written), each
/// complete line with its newline and an unfinished one (a last `P` record) without, so that
/// the lines put together are exactly what the container wrote (Go's `ReadLogs`); lines that
/// are not CRI records are skipped.
pub fn decode_cri_log(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut partial: std::collections::HashMap<Stream, Vec<u8>> = Default::default();
    for record in raw.lines().filter_map(|l| parse_line(l.as_bytes())) {
        let buf = partial.entry(record.stream).or_default();
        buf.extend_from_slice(&record.content);
        if !record.partial {
            buf.push(b'\n');
            out.push(String::from_utf8_lossy(&std::mem::take(buf)).into_owned());
        }
    }
    out.extend(
        partial
            .into_values()
            .filter(|b| !b.is_empty())
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
    );
    out
}

/// The last [`MAX_LOG_LINES`] lines of a CRI log file, at most [`MAX_LOG_BYTES`] bytes.
pub async fn log_tail(path: &Path) -> String {
    let Ok(mut f) = tokio::fs::File::open(path).await else {
        return String::new();
    };
    // Enough raw bytes for the tail: the CRI prefix is ~40 bytes a line.
    let window = u64::try_from(MAX_LOG_BYTES + MAX_LOG_LINES * 64).unwrap_or(16 * 1024);
    let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
    if len > window && f.seek(SeekFrom::Start(len - window)).await.is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf).await;
    let mut raw = String::from_utf8_lossy(&buf).into_owned();
    if len > window {
        // Drop the first, probably cut, line.
        raw = raw
            .split_once('\n')
            .map(|(_, r)| r.to_string())
            .unwrap_or_default();
    }
    let lines = decode_cri_log(&raw);
    let start = lines.len().saturating_sub(MAX_LOG_LINES);
    let mut text = lines[start..].concat();
    if text.len() > MAX_LOG_BYTES {
        let mut cut = text.len() - MAX_LOG_BYTES;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text = text[cut..].to_string();
    }
    text
}

/// The termination message of an exited container attempt (see the module docs).
pub async fn read(
    root_dir: &Path,
    p: &Pod,
    c: &Container,
    attempt: u32,
    exit_code: i32,
    log_path: Option<&Path>,
) -> String {
    let mut message = String::new();
    if container_path(c).is_some()
        && !root_dir.as_os_str().is_empty()
        && pod::is_safe_uid(pod::uid(p))
    {
        message = read_head(&host_path(root_dir, p, &c.name, attempt), MAX_MESSAGE_BYTES).await;
    }
    let fallback = c.termination_message_policy.as_deref() == Some("FallbackToLogsOnError");
    if message.is_empty() && fallback && exit_code != 0 {
        if let Some(log) = log_path {
            message = log_tail(log).await;
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_log_lines_decode_and_join_partials() {
        let raw = "2024-01-01T00:00:00.000000001Z stdout F hello\n\
                   2024-01-01T00:00:00.000000002Z stderr P par\n\
                   2024-01-01T00:00:00.000000003Z stderr F tial\n\
                   garbage\n\
                   2024-01-01T00:00:00.000000004Z stdout F \n";
        assert_eq!(decode_cri_log(raw), vec!["hello\n", "partial\n", "\n"]);
        // A last partial record (`echo -n DONE`) stays without a newline.
        let unfinished = "2024-01-01T00:00:00Z stdout P DONE\n";
        assert_eq!(decode_cri_log(unfinished), vec!["DONE"]);
        // Tags after `P`/`F` (`P:x`) keep the partial marker.
        let tagged = "2024-01-01T00:00:00Z stdout P:x ab\n2024-01-01T00:00:01Z stdout F:x cd\n";
        assert_eq!(decode_cri_log(tagged), vec!["abcd\n"]);
    }

    #[tokio::test]
    async fn message_from_file_then_logs_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = crate::testing::pod("p", "u1", vec![crate::testing::container("c", "img")]);
        let mut c = crate::testing::container("c", "img");
        let m = prepare(dir.path(), &p, &c, 3).await.unwrap().unwrap();
        assert_eq!(m.container_path, DEFAULT_PATH);
        assert!(m.host_path.ends_with("pods/u1/containers/c/3"));
        tokio::fs::write(&m.host_path, "x".repeat(5000))
            .await
            .unwrap();
        let msg = read(dir.path(), &p, &c, 3, 1, None).await;
        assert_eq!(msg.len(), MAX_MESSAGE_BYTES);

        let log = dir.path().join("0.log");
        let mut lines = String::new();
        for i in 0..100 {
            lines.push_str(&format!("2024-01-01T00:00:00Z stdout F line {i}\n"));
        }
        tokio::fs::write(&log, lines).await.unwrap();
        c.termination_message_policy = Some("FallbackToLogsOnError".into());
        let msg = read(dir.path(), &p, &c, 4, 1, Some(&log)).await;
        assert!(
            msg.starts_with("line 20\n") && msg.ends_with("line 99\n"),
            "{msg}"
        );
        assert_eq!(
            read(dir.path(), &p, &c, 4, 0, Some(&log)).await,
            "",
            "exit 0: no fallback"
        );
        // `echo -n DONE; false`: the message is exactly DONE (conformance: "should report
        // termination message from log output if TerminationMessagePolicy FallbackToLogsOnError").
        let unfinished = dir.path().join("1.log");
        tokio::fs::write(&unfinished, "2024-01-01T00:00:00Z stdout P DONE\n")
            .await
            .unwrap();
        assert_eq!(
            read(dir.path(), &p, &c, 6, 1, Some(&unfinished)).await,
            "DONE"
        );

        c.termination_message_path = Some(String::new());
        assert_eq!(prepare(dir.path(), &p, &c, 5).await.unwrap(), None);
    }
}
