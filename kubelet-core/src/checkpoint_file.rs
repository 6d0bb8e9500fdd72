//! Reading and writing the resource managers' state files (Go's checkpoint store,
//! `pkg/kubelet/checkpointmanager`): `cpu_manager_state`, `memory_manager_state` and
//! `device-plugins/kubelet_internal_checkpoint`.
//!
//! A read is bounded ([`MAX_CHECKPOINT_BYTES`]); a write goes through a temporary file of its
//! own in the same directory, renamed over the file (as Go's `TempFile` + rename), so a
//! reader never sees half a file and two writers never meet in one temporary file.

use std::path::Path;

/// The largest state file read (a node's assignments fit in a few KiB).
pub const MAX_CHECKPOINT_BYTES: usize = 4 << 20;

/// The file's bytes, `None` when it does not exist. A file over [`MAX_CHECKPOINT_BYTES`]
/// is returned cut one byte past the bound, for the caller to refuse by its length.
pub async fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_CHECKPOINT_BYTES).unwrap_or(u64::MAX) + 1;
    file.take(limit).read_to_end(&mut bytes).await?;
    Ok(Some(bytes))
}

/// Writes `bytes` to `path` through a temporary file of its own in the same directory
/// (created when missing), renamed over `path`; mode 0600 like Go's temporary files.
pub async fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::AsyncWriteExt;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(dir).await?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("checkpoint");
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp.{}.{unique}", std::process::id()));
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let mut file = options.open(&tmp).await?;
    let written = async {
        file.write_all(bytes).await?;
        file.sync_all().await
    }
    .await;
    drop(file);
    let result = match written {
        Ok(()) => tokio::fs::rename(&tmp, path).await,
        Err(e) => Err(e),
    };
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}

/// Writes a manager's state file only when its state changed since the last write: the
/// manager bumps a generation on every change, and [`write_if_newer`] writes a snapshot
/// whose generation was not written yet. Writes are serialised (one at a time, never an
/// older snapshot after a newer one).
///
/// [`write_if_newer`]: GenerationWriter::write_if_newer
#[derive(Debug, Default)]
pub struct GenerationWriter {
    written: tokio::sync::Mutex<Option<u64>>,
}

impl GenerationWriter {
    /// A writer that takes generation `generation` as written already (a state that needs
    /// no file until it changes).
    pub fn written_at(generation: u64) -> GenerationWriter {
        GenerationWriter {
            written: tokio::sync::Mutex::new(Some(generation)),
        }
    }

    /// Takes `snapshot()` (the generation and state, read under the manager's lock) and,
    /// when that generation is not the one last written, writes `encode(state)` to `path`
    /// (an encoding error is returned as an I/O error of kind `Other`).
    pub async fn write_if_newer<S, E: std::fmt::Display>(
        &self,
        path: &Path,
        snapshot: impl FnOnce() -> (u64, S),
        encode: impl FnOnce(&S) -> Result<Vec<u8>, E>,
    ) -> std::io::Result<()> {
        let mut written = self.written.lock().await;
        let (generation, state) = snapshot();
        if *written == Some(generation) {
            return Ok(());
        }
        let bytes = encode(&state).map_err(|e| std::io::Error::other(e.to_string()))?;
        write_atomically(path, &bytes).await?;
        *written = Some(generation);
        Ok(())
    }
}
