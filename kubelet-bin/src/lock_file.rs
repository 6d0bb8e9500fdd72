//! `--lock-file` and `--exit-on-lock-contention`, as the Go kubelet's `run` has them: before
//! anything else the kubelet takes an exclusive `flock` on the lock file (created mode 0600
//! when missing), waiting while another process holds it — so two kubelets of one node never
//! run at once. With `--exit-on-lock-contention` it then watches the file with inotify
//! (`IN_OPEN`, `IN_DELETE_SELF`): when another process opens it (a new kubelet about to take
//! the lock) or it is deleted, the kubelet shuts down, releasing the lock for the other.
//! `--exit-on-lock-contention` without `--lock-file` is refused with Go's message.

use std::fs::File;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

/// Why the lock could not be taken or watched.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `--exit-on-lock-contention` without a lock file.
    #[error("cannot exit on lock file contention: no lock file specified")]
    NoLockFile,
    /// Opening or locking the file failed.
    #[error("unable to acquire file lock on {path:?}: {error}")]
    Acquire {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
    /// The inotify watch could not be set up.
    #[error("unable to watch lock file {path:?} for contention: {error}")]
    Watch {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        error: std::io::Error,
    },
}

/// A held lock: released when dropped (the file is closed).
#[derive(Debug)]
pub struct LockFile {
    _file: File,
    path: PathBuf,
}

impl LockFile {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens (creating, mode 0600) and exclusively locks `path`, waiting while another process
/// holds the lock (Go's `flock.Acquire`). Blocking: call it from `spawn_blocking`.
pub fn acquire(path: &Path) -> Result<LockFile, LockError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |error| LockError::Acquire {
        path: path.to_path_buf(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| err(e.into()))?;
    Ok(LockFile {
        _file: file,
        path: path.to_path_buf(),
    })
}

/// Starts watching the held lock for contention; `shutdown` is cancelled at the first
/// `IN_OPEN` or `IN_DELETE_SELF` event (or when the watch fails). The watch task ends with
/// `shutdown` too.
pub fn watch_for_contention(
    lock: &LockFile,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, LockError> {
    use futures::StreamExt;
    use inotify::{Inotify, WatchMask};
    let err = |error| LockError::Watch {
        path: lock.path.clone(),
        error,
    };
    let inotify = Inotify::init().map_err(err)?;
    inotify
        .watches()
        .add(&lock.path, WatchMask::OPEN | WatchMask::DELETE_SELF)
        .map_err(err)?;
    let mut events = inotify.into_event_stream([0u8; 1024]).map_err(err)?;
    let path = lock.path.clone();
    Ok(tokio::spawn(async move {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            event = events.next() => {
                match event {
                    Some(Ok(e)) => tracing::info!(path = %path.display(), event = ?e.mask, "lock file contention: another process opened the lock file; exiting"),
                    Some(Err(e)) => tracing::error!(path = %path.display(), error = %e, "watching the lock file failed; exiting"),
                    None => tracing::error!(path = %path.display(), "the lock file watch ended; exiting"),
                }
                shutdown.cancel();
            }
        }
    }))
}

/// Go's start-up order for the two flags: the lock when `lock_file` is set (waiting for it),
/// and with `exit_on_contention` the watch that cancels `shutdown`. The returned lock must be
/// kept for the kubelet's lifetime.
pub async fn take(
    lock_file: Option<&Path>,
    exit_on_contention: bool,
    shutdown: &CancellationToken,
) -> Result<Option<LockFile>, LockError> {
    let Some(path) = lock_file else {
        return if exit_on_contention {
            Err(LockError::NoLockFile)
        } else {
            Ok(None)
        };
    };
    tracing::info!(path = %path.display(), "acquiring file lock");
    let owned = path.to_path_buf();
    let lock = tokio::task::spawn_blocking(move || acquire(&owned))
        .await
        .map_err(|e| LockError::Acquire {
            path: path.to_path_buf(),
            error: std::io::Error::other(e),
        })??;
    if exit_on_contention {
        tracing::info!(path = %path.display(), "watching for inotify events");
        // The task ends with `shutdown`; its handle is not needed.
        drop(watch_for_contention(&lock, shutdown.clone())?);
    }
    Ok(Some(lock))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;

    fn try_lock(path: &Path) -> bool {
        let f = File::open(path).unwrap();
        rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
    }

    #[test]
    fn the_lock_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let lock = acquire(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(!try_lock(&path), "held");
        drop(lock);
        assert!(try_lock(&path), "released");
        assert!(matches!(
            acquire(&dir.path().join("missing/dir/lock")),
            Err(LockError::Acquire { .. })
        ));
    }

    #[tokio::test]
    async fn a_second_kubelet_waits_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let first = acquire(&path).unwrap();
        let p = path.clone();
        let second = tokio::task::spawn_blocking(move || acquire(&p));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!second.is_finished(), "waits while the first holds it");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .expect("acquired once released")
            .unwrap();
        assert!(second.is_ok());
    }

    #[tokio::test]
    async fn another_process_opening_the_lock_file_shuts_the_kubelet_down() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubelet.lock");
        let shutdown = CancellationToken::new();
        let lock = take(Some(&path), true, &shutdown).await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!shutdown.is_cancelled(), "its own open does not count");
        // What a second kubelet does first: open the file to lock it.
        let _other = File::open(&path).unwrap();
        tokio::time::timeout(Duration::from_secs(10), shutdown.cancelled())
            .await
            .expect("shut down on contention");
        drop(lock);
        // Without --exit-on-lock-contention nobody watches.
        let shutdown = CancellationToken::new();
        let _lock = take(Some(&path), false, &shutdown).await.unwrap().unwrap();
        let _other = File::open(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!shutdown.is_cancelled());
    }

    #[tokio::test]
    async fn exit_on_contention_needs_a_lock_file() {
        let shutdown = CancellationToken::new();
        let e = take(None, true, &shutdown).await.unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot exit on lock file contention: no lock file specified"
        );
        assert!(take(None, false, &shutdown).await.unwrap().is_none());
    }
}
