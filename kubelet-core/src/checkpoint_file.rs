//! Reading and writing the resource managers' state files (Go's checkpoint store,
//! `pkg/kubelet/checkpointmanager`): `cpu_manager_state`, `memory_manager_state` and
//! `device-plugins/kubelet_internal_checkpoint`.
//!
//! A read is bounded ([`MAX_CHECKPOINT_BYTES`]); a write goes through a temporary file of its
//! own in the same directory, renamed over the file (as Go's `TempFile` + rename), so a
//! reader never sees half a file and two writers never meet in one temporary file.

use std::path::{Path, PathBuf};

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

/// A manager's state file: where it is (`None`: no files at all, a kubelet without a root
/// directory), read bounded and parsed at start, and written only when the state changed
/// since the last write — the manager bumps a generation on every change, and
/// [`write_if_newer`](StateFile::write_if_newer) writes a snapshot whose generation was not
/// written yet. Writes are serialised (one at a time, never an older snapshot after a
/// newer one).
#[derive(Debug, Default)]
pub struct StateFile {
    path: Option<PathBuf>,
    written: tokio::sync::Mutex<Option<u64>>,
}

/// Why a state file could not be read: the file, or its contents.
#[derive(Debug)]
pub enum ReadError<E> {
    /// Reading failed.
    Io(std::io::Error),
    /// The contents do not parse.
    Parse(E),
}

impl StateFile {
    /// The state file at `path`.
    pub fn new(path: Option<PathBuf>) -> StateFile {
        StateFile {
            path,
            written: tokio::sync::Mutex::new(None),
        }
    }

    /// Takes generation `generation` as written already (a state that needs no file until
    /// it changes).
    pub fn written_at(self, generation: u64) -> StateFile {
        StateFile {
            written: tokio::sync::Mutex::new(Some(generation)),
            ..self
        }
    }

    /// The file (`None`: no files).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The file for error messages (empty without one).
    pub fn display_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_default()
    }

    /// Reads and parses the file: `None` when there is none (or no path).
    pub async fn read<T, E>(
        &self,
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, ReadError<E>> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        match read_bounded(path).await.map_err(ReadError::Io)? {
            None => Ok(None),
            Some(bytes) => parse(&bytes).map(Some).map_err(ReadError::Parse),
        }
    }

    /// Calls `snapshot(last written generation)`, which reads the manager's generation
    /// under its lock and returns it with a copy of the state only when it differs; then
    /// writes `encode(state)` (an encoding error is returned as an I/O error of kind
    /// `Other`). Nothing without a path.
    pub async fn write_if_newer<S, E: std::fmt::Display>(
        &self,
        snapshot: impl FnOnce(Option<u64>) -> Option<(u64, S)>,
        encode: impl FnOnce(&S) -> Result<Vec<u8>, E>,
    ) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let mut written = self.written.lock().await;
        let Some((generation, state)) = snapshot(*written) else {
            return Ok(());
        };
        let bytes = encode(&state).map_err(|e| std::io::Error::other(e.to_string()))?;
        write_atomically(path, &bytes).await?;
        *written = Some(generation);
        Ok(())
    }
}
