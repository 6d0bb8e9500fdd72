//! The kubelet's own OOM score (`oomScoreAdj`, Go's `oom.ApplyOOMScoreAdj`): written to
//! `/proc/<pid>/oom_score_adj` at start-up so that the OOM killer takes pods before the
//! kubelet. Lowering a score needs `CAP_SYS_RESOURCE`; without it the write fails and the
//! caller logs it and goes on, as Go does.

use std::path::PathBuf;

/// Why the score could not be set.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    /// The value is outside [-1000, 1000].
    #[error("invalid oomScoreAdj {0}: must be between -1000 and 1000")]
    OutOfRange(i32),
    /// Writing the file failed (no permission, no such process).
    #[error("writing {value} to {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The value.
        value: i32,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// The `oom_score_adj` file of `pid` (`None`: this process).
pub fn score_path(pid: Option<u32>) -> PathBuf {
    match pid {
        Some(pid) => PathBuf::from(format!("/proc/{pid}/oom_score_adj")),
        None => PathBuf::from("/proc/self/oom_score_adj"),
    }
}

/// Sets the OOM score adjustment of `pid` (`None`: this process) — a small blocking write
/// to procfs; call it from `spawn_blocking` on a runtime.
pub fn apply_oom_score_adj(pid: Option<u32>, value: i32) -> Result<(), OomError> {
    if !(-1000..=1000).contains(&value) {
        return Err(OomError::OutOfRange(value));
    }
    let path = score_path(pid);
    std::fs::write(&path, value.to_string()).map_err(|error| OomError::Write { path, value, error })
}

/// The current OOM score adjustment of `pid` (`None`: this process).
pub fn oom_score_adj(pid: Option<u32>) -> Option<i32> {
    std::fs::read_to_string(score_path(pid))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_is_refused() {
        assert!(matches!(
            apply_oom_score_adj(None, 1001),
            Err(OomError::OutOfRange(1001))
        ));
        assert!(matches!(
            apply_oom_score_adj(None, -1001),
            Err(OomError::OutOfRange(-1001))
        ));
    }

    #[test]
    fn a_child_gets_the_score() {
        // Raising a score needs no privilege; lowering it again needs CAP_SYS_RESOURCE.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        apply_oom_score_adj(Some(pid), 500).unwrap();
        assert_eq!(oom_score_adj(Some(pid)), Some(500));
        // Lowering needs CAP_SYS_RESOURCE: either it works, or it is refused as a write
        // error the caller logs (as the kubelet does at start-up).
        match apply_oom_score_adj(Some(pid), -999) {
            Ok(()) => assert_eq!(oom_score_adj(Some(pid)), Some(-999)),
            Err(OomError::Write { error, .. }) => {
                assert_eq!(
                    error.kind(),
                    std::io::ErrorKind::PermissionDenied,
                    "{error}"
                );
                assert_eq!(oom_score_adj(Some(pid)), Some(500));
            }
            Err(e) => panic!("unexpected: {e}"),
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
