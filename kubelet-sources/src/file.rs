//! The manifest file/directory source (`--pod-manifest-path`, `staticPodPath`), as Go's
//! `pkg/kubelet/config/file.go` and `file_linux.go`.
//!
//! The path is a single file or a directory whose regular, non-hidden files are read (no
//! recursion). Changes are noticed through inotify (events are coalesced and debounced) and a
//! periodic rescan (`fileCheckFrequency`, 20s). After every scan the source sends the complete
//! set of its pods as one [`PodOperation::Set`] — the first scan always (even when empty, which
//! marks the source as seen), later ones only when the set changed. A scan reads only files
//! whose stamp (device, inode, size, modification and change times) differs from the last
//! read; Go reads every file every 20 s. A file modified less than 2 s before it was read is
//! read again at the next scan (file times are coarse: a quick second write of the same size
//! could leave the stamp unchanged).
//!
//! A file that cannot be read, parsed or validated is *skipped*: the error is logged once per
//! content (naming the file and the reason) and whatever that file last contributed
//! successfully stays in effect, so a partially written manifest never stops a running pod; a
//! new broken file contributes nothing. A file that disappears removes only its own pods.
//!
//! Every file costs bounded work: entries that are not regular files (after following
//! symlinks, as Go does: FIFOs, devices, directories, dangling links) are never opened, a file
//! over [`MANIFEST_LIMITS`]'s size is not read (and at most that many bytes are ever read, for
//! files whose size lies, like `/proc`'s), and decoding runs on a blocking thread within the
//! limits of [`crate::decode`]. Pods accepted with unknown (dropped) fields are logged with the
//! fields' paths and, when the source has an event recorder ([`FileSource::with_events`]),
//! get a Warning event `UnknownFields`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::sink::StatusSink;
use kubelet_core::source::{PodOperation, PodSource, PodUpdate, SourceError};
use notify::{RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::decode::MANIFEST_LIMITS;
use crate::static_pod::{self, Context, ManifestError, SeenTracker, FILE_SOURCE};

/// How long events are collected after the first one before rescanning: an editor's save or
/// a burst of renames arrives within a few milliseconds, and every pod written waits this long
/// before the kubelet sees it (Go reads on each event, without a delay).
const DEBOUNCE: Duration = Duration::from_millis(10);
/// Files larger than this are not manifests: they are skipped (with one warning).
const MAX_MANIFEST_BYTES: u64 = MANIFEST_LIMITS.max_bytes as u64;

/// Configuration of a [`FileSource`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// A manifest file, or a directory of manifests.
    pub path: PathBuf,
    /// The node name (static pods are named `<name>-<node>`).
    pub node_name: String,
    /// Period of the full rescan (`fileCheckFrequency`, default 20s).
    pub check_frequency: Duration,
}

impl Config {
    /// A configuration with the Go default check frequency (20s).
    pub fn new(path: impl Into<PathBuf>, node_name: impl Into<String>) -> Self {
        Config {
            path: path.into(),
            node_name: node_name.into(),
            check_frequency: Duration::from_secs(20),
        }
    }
}

/// Static pods from a manifest file or directory. See the module docs.
pub struct FileSource {
    config: Config,
    events: Option<Arc<dyn StatusSink>>,
}

impl std::fmt::Debug for FileSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSource")
            .field("config", &self.config)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl FileSource {
    /// Creates the source; nothing is read until [`PodSource::run`].
    pub fn new(config: Config) -> FileSource {
        FileSource {
            config,
            events: None,
        }
    }

    /// Records events (unknown fields dropped, duplicate pods refused) through `events`, for
    /// example the cluster member's status sink. Without it they are only logged.
    pub fn with_events(mut self, events: Arc<dyn StatusSink>) -> FileSource {
        self.events = Some(events);
        self
    }
}

/// Records the events of a manifest's outcome (warnings on accepted pods) when there is a
/// recorder, and logs them either way.
pub(crate) fn report_warnings(
    warnings: &[static_pod::ManifestWarning],
    pods: &[Pod],
    events: Option<&Arc<dyn StatusSink>>,
) {
    for w in warnings {
        tracing::warn!(origin = %w.origin, pod = %w.pod, uid = %w.uid, fields = ?w.unknown_fields, "static pod manifest has unknown fields; they were dropped (as the API server drops them)");
        let (Some(events), Some(pod)) = (
            events,
            pods.iter().find(|p| kubelet_core::pod::uid(p) == w.uid),
        ) else {
            continue;
        };
        events.record_event(kubelet_core::sink::Event::for_pod(
            pod,
            None,
            kubelet_core::sink::EventType::Warning,
            "UnknownFields",
            format!(
                "unknown fields dropped from {}: {}",
                w.origin,
                w.unknown_fields.join(", ")
            ),
        ));
    }
}

/// Records a FailedValidation event for a pod refused as a duplicate (as Go's
/// `filterInvalidPods` does), when there is a recorder.
pub(crate) fn report_duplicate(e: &ManifestError, pod: &Pod, events: Option<&Arc<dyn StatusSink>>) {
    if let Some(events) = events {
        events.record_event(kubelet_core::sink::Event::for_pod(
            pod,
            None,
            kubelet_core::sink::EventType::Warning,
            "FailedValidation",
            e.to_string(),
        ));
    }
}

/// What reading one manifest file gave.
enum Read {
    /// The file is gone (a race with its removal): it contributes nothing.
    Gone,
    /// The file's content.
    Bytes(Vec<u8>),
    /// The file cannot be used (unreadable, too large): why, and a fingerprint of its state
    /// so the same problem is logged once.
    Unusable(String, [u8; 32]),
}

/// Reads at most `limit` bytes of a regular file; a larger file is [`Read::Unusable`] without
/// being read (its size, modification time and inode are its fingerprint).
async fn read_bounded(path: &Path, limit: u64) -> Read {
    use std::os::unix::fs::MetadataExt;
    let fingerprint = |m: &std::fs::Metadata, what: &str| -> [u8; 32] {
        Sha256::digest(format!(
            "{what}:{}:{}.{}:{}",
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ino()
        ))
        .into()
    };
    let meta = match tokio::fs::metadata(path).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Gone,
        Err(e) => {
            return Read::Unusable(
                format!("cannot stat: {e}"),
                Sha256::digest(e.to_string()).into(),
            )
        }
    };
    if !meta.is_file() {
        return Read::Unusable(
            "not a regular file".into(),
            fingerprint(&meta, "not-regular"),
        );
    }
    if meta.len() > limit {
        return Read::Unusable(
            format!(
                "{} bytes is larger than the limit of {limit} bytes",
                meta.len()
            ),
            fingerprint(&meta, "too-large"),
        );
    }
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Gone,
        Err(e) => return Read::Unusable(format!("cannot open: {e}"), fingerprint(&meta, "open")),
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.take(limit + 1).read_to_end(&mut bytes).await {
        return Read::Unusable(format!("cannot read: {e}"), fingerprint(&meta, "read"));
    }
    if bytes.len() as u64 > limit {
        return Read::Unusable(
            format!("larger than the limit of {limit} bytes"),
            fingerprint(&meta, "grew"),
        );
    }
    Read::Bytes(bytes)
}

/// What identifies a file's content without reading it: device, inode, size, and the
/// modification and change times (nanoseconds). Any write or replacement changes one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// A stamp younger than this, at the time of the read, is not trusted: file times are coarse
/// (a clock tick), so a second write of the same size within the tick of the first would
/// leave the stamp unchanged ("racily clean", as git calls it). Such a file is read again.
const RACY_STAMP: Duration = Duration::from_secs(2);

impl FileStamp {
    /// The stamp to keep for a file read at `read_at`: `None` while it may be racy.
    fn settled(stamp: Option<FileStamp>, read_at: std::time::SystemTime) -> Option<FileStamp> {
        let stamp = stamp?;
        let modified = std::time::UNIX_EPOCH
            + Duration::new(
                u64::try_from(stamp.mtime.0).ok()?,
                u32::try_from(stamp.mtime.1).ok()?,
            );
        let age = read_at.duration_since(modified).ok()?;
        (age >= RACY_STAMP).then_some(stamp)
    }

    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// What one file contributed at its last successful read.
#[derive(Debug, Clone)]
struct FileState {
    /// The file's stamp when it was last read and used (`None`: read it again next time).
    /// A file whose stamp is unchanged is not read again: the periodic check of a directory
    /// of unchanged manifests costs one `stat` per file.
    stamp: Option<FileStamp>,
    /// Hash of the bytes last read (to skip re-parsing and re-logging unchanged content).
    content_hash: [u8; 32],
    /// The pods of the last content that processed without errors.
    good_pods: Vec<Pod>,
}

/// The scanning state of one running source.
struct Scanner {
    config: Config,
    files: BTreeMap<PathBuf, FileState>,
    seen: SeenTracker,
    last_duplicates: Vec<String>,
    events: Option<Arc<dyn StatusSink>>,
    /// Whether a scan has completed (the first one always reports its pods).
    scanned: bool,
    /// Files read so far (unchanged files are not: see [`FileState::stamp`]).
    files_read: u64,
}

impl Scanner {
    fn new(config: Config, events: Option<Arc<dyn StatusSink>>) -> Self {
        Scanner {
            config,
            files: BTreeMap::new(),
            seen: SeenTracker::new(),
            last_duplicates: Vec::new(),
            events,
            scanned: false,
            files_read: 0,
        }
    }

    /// The files to read, with their stamps: the path itself, or the directory's regular
    /// non-hidden files.
    async fn list_files(&self) -> Vec<(PathBuf, Option<FileStamp>)> {
        let path = &self.config.path;
        let meta = match tokio::fs::metadata(path).await {
            Ok(m) => m,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    tracing::debug!(path = %path.display(), "manifest path does not exist");
                } else {
                    tracing::warn!(path = %path.display(), error = %e, "cannot stat manifest path");
                }
                return Vec::new();
            }
        };
        if !meta.is_dir() {
            // A single file; `read_bounded` refuses it when it is not a regular file (a FIFO
            // would block a reader forever).
            let stamp = meta.is_file().then(|| FileStamp::of(&meta));
            return vec![(path.clone(), stamp)];
        }
        let mut out = Vec::new();
        let mut dir = match tokio::fs::read_dir(path).await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read manifest directory");
                return out;
            }
        };
        loop {
            match dir.next_entry().await {
                Ok(Some(entry)) => {
                    let name = entry.file_name();
                    if name.to_string_lossy().starts_with('.') {
                        continue;
                    }
                    let p = entry.path();
                    match tokio::fs::metadata(&p).await {
                        Ok(m) if m.is_file() => out.push((p, Some(FileStamp::of(&m)))),
                        Ok(m) if m.is_dir() => {
                            tracing::debug!(path = %p.display(), "not recursing into a directory of the manifest path");
                        }
                        Ok(_) => {
                            tracing::debug!(path = %p.display(), "ignoring a manifest path entry that is not a regular file");
                        }
                        Err(e) => {
                            tracing::debug!(path = %p.display(), error = %e, "manifest entry vanished while listing");
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "error listing manifest directory");
                    break;
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Reads what changed and returns the complete, de-duplicated pod set (with config.seen);
    /// `None` when no file changed, appeared or went since the last scan (files whose stamp
    /// is unchanged are not read).
    async fn scan(&mut self) -> Option<Vec<Pod>> {
        let files = self.list_files().await;
        let mut next = BTreeMap::new();
        let mut changed = !self.scanned;
        for (file, stamp) in files {
            let unchanged = stamp.is_some()
                && self
                    .files
                    .get(&file)
                    .is_some_and(|prev| prev.stamp == stamp);
            if unchanged {
                if let Some(prev) = self.files.remove(&file) {
                    next.insert(file, prev);
                }
                continue;
            }
            self.files_read += 1;
            let read_at = kubelet_core::clock::wall_now();
            let stamp = FileStamp::settled(stamp, read_at);
            let (bytes, hash) = match read_bounded(&file, MAX_MANIFEST_BYTES).await {
                Read::Gone => continue,
                Read::Bytes(b) => {
                    let hash: [u8; 32] = Sha256::digest(&b).into();
                    (Some(b), hash)
                }
                Read::Unusable(reason, hash) => {
                    let prev = self.files.remove(&file);
                    if prev.as_ref().is_none_or(|p| p.content_hash != hash) {
                        tracing::warn!(path = %file.display(), reason, "cannot use manifest file; skipping it");
                    }
                    changed |= prev.is_none();
                    let good_pods = prev.map(|p| p.good_pods).unwrap_or_default();
                    next.insert(
                        file,
                        FileState {
                            stamp: None,
                            content_hash: hash,
                            good_pods,
                        },
                    );
                    continue;
                }
            };
            let prev = match self.files.remove(&file) {
                Some(mut prev) if prev.content_hash == hash => {
                    // Same bytes (a touch, a rewrite with equal content): kept, newly stamped.
                    prev.stamp = stamp;
                    next.insert(file, prev);
                    continue;
                }
                other => other,
            };
            changed = true;
            let previous = prev.map(|p| p.good_pods).unwrap_or_default();
            let mut state = self
                .process(&file, bytes.unwrap_or_default(), hash, previous)
                .await;
            state.stamp = stamp;
            next.insert(file, state);
        }
        for gone in self.files.keys() {
            tracing::info!(path = %gone.display(), "manifest file removed");
            changed = true;
        }
        self.files = next;
        self.scanned = true;
        if !changed {
            return None;
        }

        let all: Vec<(String, Pod)> = self
            .files
            .iter()
            .flat_map(|(path, st)| {
                let origin = path.display().to_string();
                st.good_pods
                    .iter()
                    .map(move |p| (origin.clone(), p.clone()))
            })
            .collect();
        let (keep, dups) = static_pod::reject_duplicates_with_pods(all, FILE_SOURCE);
        let dup_msgs: Vec<String> = dups.iter().map(|(e, _)| e.to_string()).collect();
        if dup_msgs != self.last_duplicates {
            for (e, pod) in &dups {
                tracing::warn!(error = %e, "rejecting static pod");
                report_duplicate(e, pod, self.events.as_ref());
            }
            self.last_duplicates = dup_msgs;
        }
        let mut pods: Vec<Pod> = keep.into_iter().map(|(_, p)| p).collect();
        self.seen.stamp(&mut pods);
        Some(pods)
    }

    /// Processes changed content (decoding on a blocking thread); on any error the previous
    /// good pods stay.
    async fn process(
        &self,
        file: &Path,
        bytes: Vec<u8>,
        hash: [u8; 32],
        previous: Vec<Pod>,
    ) -> FileState {
        let origin = file.display().to_string();
        let node_name = self.config.node_name.clone();
        let task_origin = origin.clone();
        let decoded = tokio::task::spawn_blocking(move || {
            let ctx = Context {
                source: FILE_SOURCE,
                origin: &task_origin,
                node_name: &node_name,
            };
            static_pod::parse_manifest(&bytes, &ctx)
        })
        .await;
        let manifest = match decoded {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(path = %origin, error = %e, "decoding the manifest failed");
                return FileState {
                    stamp: None,
                    content_hash: hash,
                    good_pods: previous,
                };
            }
        };
        if manifest.errors.is_empty() {
            report_warnings(&manifest.warnings, &manifest.pods, self.events.as_ref());
            tracing::debug!(path = %origin, pods = manifest.pods.len(), "read manifest file");
            return FileState {
                stamp: None,
                content_hash: hash,
                good_pods: manifest.pods,
            };
        }
        for e in &manifest.errors {
            log_manifest_error(e, !previous.is_empty());
        }
        FileState {
            stamp: None,
            content_hash: hash,
            good_pods: previous,
        }
    }
}

fn log_manifest_error(e: &ManifestError, keeping_previous: bool) {
    if keeping_previous {
        tracing::warn!(error = %e, "skipping invalid manifest; its last valid content stays in effect");
    } else {
        tracing::warn!(error = %e, "skipping invalid manifest");
    }
}

/// The directory to watch: the path itself when it is a directory, else its parent (so a
/// manifest file that is created, replaced by an editor or removed is noticed).
fn watch_target(path: &Path) -> Option<PathBuf> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Some(path.to_path_buf()),
        _ => {
            let parent = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            std::fs::metadata(&parent)
                .ok()
                .filter(std::fs::Metadata::is_dir)
                .map(|_| parent)
        }
    }
}

/// Does this event mean some file may have changed? Our own reads produce open/close-nowrite
/// events, which must not trigger rescans.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// A live inotify watch and the directory it watches.
struct Watch {
    _watcher: notify::RecommendedWatcher,
    target: PathBuf,
}

/// Sets up an inotify watch (see [`watch_target`]). Events only trigger rescans, so they are
/// collapsed into a capacity-1 channel. Blocking: run it off the runtime threads.
fn start_watch(path: &Path, tx: mpsc::Sender<()>) -> Option<Watch> {
    let target = watch_target(path)?;
    let handler = move |res: notify::Result<notify::Event>| {
        let relevant = match res {
            Ok(ev) => is_change(&ev.kind),
            // An error (e.g. queue overflow): rescan to be safe.
            Err(_) => true,
        };
        if relevant {
            // A full channel means a rescan is already pending: nothing is lost.
            let _ = tx.try_send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot create a file watcher; relying on periodic rescans");
            return None;
        }
    };
    match watcher.watch(&target, RecursiveMode::NonRecursive) {
        Ok(()) => {
            tracing::debug!(path = %target.display(), "watching manifest path");
            Some(Watch {
                _watcher: watcher,
                target,
            })
        }
        Err(e) => {
            tracing::warn!(path = %target.display(), error = %e, "cannot watch manifest path; relying on periodic rescans");
            None
        }
    }
}

#[async_trait]
impl PodSource for FileSource {
    fn name(&self) -> &str {
        FILE_SOURCE
    }

    async fn run(
        &self,
        updates: mpsc::Sender<PodUpdate>,
        shutdown: CancellationToken,
    ) -> Result<(), SourceError> {
        if self.config.path.as_os_str().is_empty() {
            return Err(SourceError::InvalidConfig {
                source_name: FILE_SOURCE.into(),
                message: "the manifest path is empty".into(),
            });
        }
        let period = self.config.check_frequency.max(Duration::from_millis(10));
        let (tx, mut rx) = mpsc::channel::<()>(1);
        let mut scanner = Scanner::new(self.config.clone(), self.events.clone());
        let mut watch: Option<Watch> = None;
        let mut last_sent: Option<Vec<Arc<Pod>>> = None;
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick of an interval fires immediately; consume it, we scan right away.
        ticker.tick().await;
        tracing::info!(path = %self.config.path.display(), "starting static pod file source");
        loop {
            if watch.is_none() {
                let path = self.config.path.clone();
                let tx = tx.clone();
                watch = tokio::task::spawn_blocking(move || start_watch(&path, tx))
                    .await
                    .ok()
                    .flatten();
            }
            let scanned = scanner.scan().await;
            let changed = scanned.filter(|pods| {
                !last_sent.as_ref().is_some_and(|last| {
                    last.len() == pods.len() && last.iter().zip(pods).all(|(a, b)| **a == *b)
                })
            });
            if let Some(pods) = changed {
                let pods: Vec<Arc<Pod>> = kubelet_core::source::shared_pods(pods);
                tracing::info!(path = %self.config.path.display(), pods = pods.len(), "static pods changed");
                let update = PodUpdate {
                    op: PodOperation::Set,
                    pods: pods.clone(),
                    source: FILE_SOURCE.into(),
                };
                tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    sent = updates.send(update) => if sent.is_err() {
                        return Err(SourceError::ChannelClosed { source_name: FILE_SOURCE.into() });
                    },
                }
                last_sent = Some(pods);
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticker.tick() => {
                    // The watched directory may have been removed or (for a directory path
                    // that did not exist) created: set the watch up again on the next round.
                    let stale = match &watch {
                        Some(w) => tokio::fs::metadata(&w.target).await.is_err(),
                        None => false,
                    };
                    let was_dir = watch.as_ref().is_some_and(|w| w.target == self.config.path);
                    let is_dir = tokio::fs::metadata(&self.config.path).await.is_ok_and(|m| m.is_dir());
                    if stale || was_dir != is_dir {
                        watch = None;
                    }
                }
                _ = rx.recv() => {
                    // Debounce: let a burst of events (an editor's save) settle, then rescan once.
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(DEBOUNCE) => {}
                    }
                    while rx.try_recv().is_ok() {}
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
