//! Container log rotation (Go's `container_log_manager.go`).
//!
//! Every `monitor_interval` the running containers are listed and handled by at most
//! `max_workers` at a time. For each: its log path from `ContainerStatus` (asked once per
//! container: a container's log path never changes, so it is kept while the container runs —
//! Go asks every period, which with 110 containers was most of the kubelet's idle gRPC
//! traffic); the sizes of all the logs are read in one blocking task; a missing log is
//! reopened first; a log smaller than `max_size` is left alone. Otherwise, as Go does (so
//! `kubectl logs`, log shippers and the kubelet's own log reader see the same files):
//!
//! 1. leftovers of an interrupted rotation go: `*.tmp` files, and uncompressed files whose
//!    `.gz` exists;
//! 2. the oldest rotated files go until `max_files - 2` are left (the current log and the
//!    one about to be rotated make up the rest);
//! 3. the rotated files still uncompressed are gzipped to `<name>.gz` (through `<name>.gz.tmp`
//!    … renamed when complete);
//! 4. the current log is renamed to `<log>.<YYYYMMDD-hhmmss>` (UTC) and the runtime is asked
//!    to reopen the container's log (`ReopenContainerLog`); if that fails the rename is
//!    undone, so nothing is lost and the next period tries again.
//!
//! The newest rotated file stays uncompressed for one period so readers that were at its end
//! can finish it. A runtime that answers `ReopenContainerLog` with `Unimplemented` is warned
//! about once; rotation then stops.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::ContainerLogConfig;
use crate::runtime::{ContainerRuntime, ContainerState, ListFilter, RuntimeError};

/// The suffix of compressed rotated logs.
pub(crate) const COMPRESS_SUFFIX: &str = ".gz";
/// The suffix of files being written.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Why one container's log could not be rotated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RotationError {
    /// A file operation failed.
    #[error("{op} {path}: {error}")]
    File {
        /// What was done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: io::Error,
    },
    /// The runtime failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A blocking file task failed.
    #[error("log rotation task failed: {0}")]
    Task(String),
}

fn file_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RotationError + 'a {
    move |source| RotationError::File {
        op,
        path: path.to_path_buf(),
        error: source,
    }
}

/// The rotated files of `log` (`<log>.*`), sorted (oldest first: the timestamps sort).
fn rotated_files(log: &Path) -> Result<Vec<PathBuf>, RotationError> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}.");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(file_err("listing", dir))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// Whether a rotated file is still in use: not a temporary file, and not an uncompressed
/// file whose compressed copy exists (Go's `isInUse`).
fn in_use(file: &Path, all: &[PathBuf]) -> bool {
    let s = file.to_string_lossy();
    if s.ends_with(TMP_SUFFIX) {
        return false;
    }
    if s.ends_with(COMPRESS_SUFFIX) {
        return true;
    }
    let compressed = PathBuf::from(format!("{s}{COMPRESS_SUFFIX}"));
    !all.contains(&compressed)
}

fn remove(path: &Path) -> Result<(), RotationError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(file_err("removing", path)(e)),
    }
}

/// Compresses `file` to `file.gz` (through a temporary file) and removes it.
fn compress(file: &Path) -> Result<(), RotationError> {
    use std::io::Write as _;
    let tmp = PathBuf::from(format!("{}{COMPRESS_SUFFIX}{TMP_SUFFIX}", file.display()));
    let done = PathBuf::from(format!("{}{COMPRESS_SUFFIX}", file.display()));
    let result = (|| {
        let mut src = std::fs::File::open(file).map_err(file_err("opening", file))?;
        let dst = std::fs::File::create(&tmp).map_err(file_err("creating", &tmp))?;
        let mut gz = flate2::write::GzEncoder::new(dst, flate2::Compression::default());
        io::copy(&mut src, &mut gz).map_err(file_err("compressing", file))?;
        let mut dst = gz.finish().map_err(file_err("compressing", file))?;
        dst.flush().map_err(file_err("writing", &tmp))?;
        std::fs::rename(&tmp, &done).map_err(file_err("renaming", &tmp))?;
        remove(file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Steps 1–3 and the rename of step 4 (see the module docs); the rotated file's path.
fn rotate_files(log: &Path, max_files: usize, timestamp: &str) -> Result<PathBuf, RotationError> {
    let all = rotated_files(log)?;
    let (used, unused): (Vec<PathBuf>, Vec<PathBuf>) =
        all.iter().cloned().partition(|f| in_use(f, &all));
    for f in &unused {
        remove(f)?;
    }
    let keep = max_files.saturating_sub(2);
    let excess = used.len().saturating_sub(keep);
    for f in &used[..excess] {
        remove(f)?;
    }
    for f in &used[excess..] {
        if !f.to_string_lossy().ends_with(COMPRESS_SUFFIX) {
            compress(f)?;
        }
    }
    let rotated = PathBuf::from(format!("{}.{timestamp}", log.display()));
    std::fs::rename(log, &rotated).map_err(file_err("rotating", log))?;
    Ok(rotated)
}

/// Go's timestamp of a rotated log (`20060102-150405`), in UTC.
fn timestamp() -> String {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(crate::clock::now_unix_nanos()))
        .map(|t| t.strftime("%Y%m%d-%H%M%S").to_string())
        .unwrap_or_default()
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RotationError> + Send + 'static,
) -> Result<T, RotationError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RotationError::Task(e.to_string()))?
}

/// Container log rotation. See the module docs.
pub(crate) struct LogRotator {
    config: ContainerLogConfig,
    runtime: Arc<dyn ContainerRuntime>,
    unsupported: AtomicBool,
    /// The log path of each running container seen (`None`: it has none), by container id.
    paths: Mutex<HashMap<String, Option<PathBuf>>>,
}

impl LogRotator {
    /// A rotator over `runtime`.
    pub(crate) fn new(config: ContainerLogConfig, runtime: Arc<dyn ContainerRuntime>) -> Self {
        LogRotator {
            config,
            runtime,
            unsupported: AtomicBool::new(false),
            paths: Mutex::new(HashMap::new()),
        }
    }

    fn paths(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<PathBuf>>> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The log paths of `ids`: kept ones, the others from `ContainerStatus` (at most
    /// `max_workers` at a time); containers gone meanwhile or without a log are left out.
    async fn log_paths(&self, ids: Vec<String>) -> Vec<(String, PathBuf)> {
        let running: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let known: HashMap<String, Option<PathBuf>> = {
            let mut paths = self.paths();
            paths.retain(|id, _| running.contains(id.as_str()));
            paths.clone()
        };
        let (mut out, new): (Vec<(String, PathBuf)>, Vec<String>) =
            ids.iter()
                .fold((Vec::new(), Vec::new()), |(mut out, mut new), id| {
                    match known.get(id) {
                        Some(Some(p)) => out.push((id.clone(), p.clone())),
                        Some(None) => {}
                        None => new.push(id.clone()),
                    }
                    (out, new)
                });
        let asked: Vec<(String, Option<PathBuf>)> = futures::stream::iter(new)
            .map(|id| async move {
                match self.runtime.container_status(&id).await {
                    Ok(s) => Some((id, s.log_path.filter(|p| !p.as_os_str().is_empty()))),
                    Err(RuntimeError::NotFound { .. }) => None,
                    Err(e) => {
                        tracing::warn!(container = %id, error = %e, "failed to rotate the container's log");
                        None
                    }
                }
            })
            .buffer_unordered(self.config.max_workers.max(1))
            .filter_map(std::future::ready)
            .collect()
            .await;
        let mut paths = self.paths();
        for (id, path) in asked {
            if let Some(p) = &path {
                out.push((id.clone(), p.clone()));
            }
            paths.insert(id, path);
        }
        out
    }

    /// Rotates every `monitor_interval` until `shutdown` (or until the runtime turns out not
    /// to reopen logs).
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        if self.config.max_size < 0 {
            tracing::info!("container log rotation is off (containerLogMaxSize < 0)");
            return;
        }
        tracing::info!(workers = self.config.max_workers, interval = ?self.config.monitor_interval, max_size = self.config.max_size, max_files = self.config.max_files, "container log rotation started");
        let mut tick = tokio::time::interval(self.config.monitor_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.rotate_logs().await {
                tracing::warn!(error = %e, "failed to rotate container logs");
            }
            if self.unsupported.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// One pass over the running containers.
    pub(crate) async fn rotate_logs(&self) -> Result<(), RuntimeError> {
        let containers = self.runtime.list_containers(&ListFilter::all()).await?;
        let ids: Vec<String> = containers
            .into_iter()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| c.id)
            .collect();
        let logs = self.log_paths(ids).await;
        // One blocking task for every size: logs under `max_size` (nearly all) end here.
        let sized = match tokio::task::spawn_blocking(move || {
            logs.into_iter()
                .map(|(id, path)| {
                    let size = std::fs::metadata(&path).map(|m| m.len());
                    (id, path, size)
                })
                .collect::<Vec<_>>()
        })
        .await
        {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "log rotation: reading the log sizes failed");
                return Ok(());
            }
        };
        let max_size = self.config.max_size;
        let due = sized.into_iter().filter(|(_, _, size)| match size {
            Ok(n) => i64::try_from(*n).unwrap_or(i64::MAX) >= max_size,
            Err(_) => true,
        });
        futures::stream::iter(due)
            .for_each_concurrent(
                self.config.max_workers.max(1),
                |(id, path, size)| async move {
                    if self.unsupported.load(Ordering::Relaxed) {
                        return;
                    }
                    match self.process(&id, path, size).await {
                        Ok(()) => {}
                        // Gone since it was listed.
                        Err(RotationError::Runtime(RuntimeError::NotFound { .. })) => {
                            self.paths().remove(&id);
                        }
                        Err(e) => {
                            tracing::warn!(container = %id, error = %e, "failed to rotate the container's log")
                        }
                    }
                },
            )
            .await;
        Ok(())
    }

    async fn reopen(&self, id: &str) -> Result<(), RotationError> {
        match self.runtime.reopen_container_log(id).await {
            Err(e) if e.is_unimplemented() => {
                if !self.unsupported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "container log rotation cannot run: the container runtime does not reopen container logs");
                }
                Err(e.into())
            }
            other => Ok(other?),
        }
    }

    /// One container whose log at `path` measured `size`. See the module docs.
    async fn process(
        &self,
        id: &str,
        path: PathBuf,
        size: io::Result<u64>,
    ) -> Result<(), RotationError> {
        let size = match size {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.reopen(id).await?;
                tokio::fs::metadata(&path)
                    .await
                    .map_err(file_err("stat after reopen", &path))?
                    .len()
            }
            Err(e) => return Err(file_err("stat", &path)(e)),
        };
        if i64::try_from(size).unwrap_or(i64::MAX) < self.config.max_size {
            return Ok(());
        }
        let (log, max_files, ts) = (path.clone(), self.config.max_files, timestamp());
        let rotated = blocking(move || rotate_files(&log, max_files, &ts)).await?;
        if let Err(e) = self.reopen(id).await {
            let (from, to) = (rotated.clone(), path.clone());
            if let Err(re) = blocking(move || {
                std::fs::rename(&from, &to).map_err(file_err("renaming back", &from))
            })
            .await
            {
                tracing::error!(container = %id, error = %re, "failed to rename the rotated log back; the container's log was lost");
            }
            return Err(e);
        }
        tracing::debug!(container = %id, log = %path.display(), size, "rotated the container's log");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn rotation_keeps_max_files_compresses_and_cleans_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let write = |p: &Path, s: &str| std::fs::write(p, s).unwrap();
        write(&log, "one\n");
        // Leftovers of an interrupted rotation.
        write(&dir.path().join("0.log.20240101-000000.gz.tmp"), "x");
        write(&dir.path().join("0.log.20240101-000001"), "kept as .gz");
        write(&dir.path().join("0.log.20240101-000001.gz"), "done");
        rotate_files(&log, 3, "20240101-000010").unwrap();
        assert_eq!(
            names(dir.path()),
            ["0.log.20240101-000001.gz", "0.log.20240101-000010"]
        );
        write(&log, "two\n");
        rotate_files(&log, 3, "20240101-000020").unwrap();
        // max 3 files: the current log (re-created by the runtime), one compressed, the
        // newest rotated one uncompressed.
        assert_eq!(
            names(dir.path()),
            ["0.log.20240101-000010.gz", "0.log.20240101-000020"]
        );
        let gz = std::fs::File::open(dir.path().join("0.log.20240101-000010.gz")).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).unwrap();
        assert_eq!(text, "one\n");
        assert_eq!(timestamp().len(), "20060102-150405".len());
    }

    /// A running container on the simulator logging to `<dir>/<name>/0.log`; its id.
    async fn running(sim: &crate::testing::SimRuntime, dir: &Path, name: &str) -> String {
        use crate::runtime::{ContainerConfig, ContainerKind, SandboxConfig};
        use crate::testing::{container, pod};
        let p = Arc::new(pod(
            name,
            &format!("uid-{name}"),
            vec![container(name, "img")],
        ));
        let sandbox = SandboxConfig {
            pod: p.clone(),
            attempt: 0,
            hostname: name.into(),
            log_directory: dir.to_path_buf(),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        };
        let sb = sim.run_pod_sandbox(&sandbox).await.unwrap();
        let config = ContainerConfig {
            pod: p.clone(),
            container: container(name, "img"),
            kind: ContainerKind::Regular,
            restart_count: 0,
            hash: 0,
            image_ref: "sha256:img".into(),
            command: vec![],
            args: vec![],
            env: vec![],
            mounts: vec![],
            log_path: PathBuf::from(format!("{name}/0.log")),
            cpuset_cpus: None,
            cpuset_mems: None,
            devices: Default::default(),
            extra_supplemental_groups: Vec::new(),
        };
        let id = sim.create_container(&sb, &config, &sandbox).await.unwrap();
        sim.start_container(&id).await.unwrap();
        std::fs::create_dir_all(dir.join(name)).unwrap();
        id
    }

    #[tokio::test]
    async fn a_container_log_path_is_asked_once_and_only_big_logs_are_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let sim = Arc::new(crate::testing::SimRuntime::new());
        let small = running(&sim, dir.path(), "small").await;
        let big = running(&sim, dir.path(), "big").await;
        std::fs::write(dir.path().join("small/0.log"), "x\n").unwrap();
        std::fs::write(dir.path().join("big/0.log"), vec![b'y'; 2048]).unwrap();
        let rotator = LogRotator::new(
            ContainerLogConfig {
                max_size: 1024,
                ..ContainerLogConfig::default()
            },
            sim.clone(),
        );
        rotator.rotate_logs().await.unwrap();
        assert_eq!(sim.calls("ContainerStatus"), 2);
        assert_eq!(sim.calls("ReopenContainerLog"), 1);
        let rotated: Vec<String> = names(&dir.path().join("big"));
        assert_eq!(rotated.len(), 1, "{rotated:?}");
        assert!(rotated[0].starts_with("0.log."), "{rotated:?}");
        assert_eq!(names(&dir.path().join("small")), ["0.log"]);

        // Next period: the paths are known; the reopened log (re-created by the runtime,
        // here by the test) is small again, and a missing one is reopened.
        std::fs::write(dir.path().join("big/0.log"), "z\n").unwrap();
        std::fs::remove_file(dir.path().join("small/0.log")).unwrap();
        let reopened = sim.calls("ReopenContainerLog");
        let _ = rotator.rotate_logs().await;
        assert_eq!(sim.calls("ContainerStatus"), 2, "asked once per container");
        assert_eq!(
            sim.calls("ReopenContainerLog"),
            reopened + 1,
            "the missing log reopened"
        );

        // A container that stops is forgotten.
        sim.stop_container(&small, std::time::Duration::ZERO)
            .await
            .unwrap();
        rotator.rotate_logs().await.unwrap();
        assert_eq!(rotator.paths().len(), 1);
        assert!(rotator.paths().contains_key(&big));
    }
}
