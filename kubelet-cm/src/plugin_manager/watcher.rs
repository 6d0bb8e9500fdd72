//! The plugin watcher (Go's `pluginwatcher.Watcher`, the desired state's populator): walks
//! the registration directory once, then follows it with inotify, every subdirectory too,
//! and keeps the desired state equal to the unix sockets found.
//!
//! - A name starting with `.` is ignored, file or directory (Go skips such files and new
//!   such directories).
//! - Only unix sockets count; other files are ignored. Symbolic links are not followed.
//! - A socket created (or moved in) is added; one removed (or moved out) is forgotten.
//! - A directory created (or moved in) is watched, then walked: what was made in it before
//!   the watch is found too. One removed or moved out is forgotten with everything below.
//! - When the kernel dropped events (queue overflow), the whole tree is walked again and the
//!   desired state made equal to what is found.
//!
//! The filesystem work (walks, `lstat`, adding watches) runs on the blocking pool; the
//! event stream is read on the runtime.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use inotify::{EventMask, EventOwned, EventStream, Inotify, WatchDescriptor, WatchMask, Watches};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use super::state::{DesiredState, FileId};
use super::PluginManagerError;

/// Events handled in one go on the blocking pool.
const MAX_BATCH: usize = 256;
/// The pause after a failed read of the event stream.
const READ_ERROR_PAUSE: Duration = Duration::from_secs(1);
/// The inotify read buffer (an event takes at most 16 bytes and a 256-byte name).
const EVENT_BUFFER: usize = 16 * 1024;

/// What a watched directory reports.
fn watch_mask() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ONLYDIR
        | WatchMask::DONT_FOLLOW
}

/// Creates `dir` (mode 0750, with its parents), watches it and walks it into `desired`,
/// then follows it on a task of `tasks` until `shutdown`. Returns once the directory is
/// watched and walked: sockets there before are in `desired`, and later changes are seen.
pub(crate) async fn start(
    dir: &Path,
    desired: Arc<DesiredState>,
    shutdown: CancellationToken,
    tasks: &TaskTracker,
) -> Result<(), PluginManagerError> {
    info!(dir = %dir.display(), "Plugin watcher starting");
    let inotify = Inotify::init().map_err(|e| PluginManagerError::Inotify(e.to_string()))?;
    let stream = inotify
        .into_event_stream(vec![0u8; EVENT_BUFFER])
        .map_err(|e| PluginManagerError::Inotify(e.to_string()))?;
    let mut tree = Tree {
        root: dir.to_path_buf(),
        watches: stream.watches(),
        dirs: HashMap::new(),
        desired,
    };
    let directory_error = |message: String| PluginManagerError::Directory {
        path: dir.display().to_string(),
        message,
    };
    let tree = tokio::task::spawn_blocking(move || tree.init().map(|()| tree))
        .await
        .map_err(|e| directory_error(e.to_string()))?
        .map_err(|e| directory_error(e.to_string()))?;
    tasks.spawn(follow(tree, stream, shutdown));
    Ok(())
}

/// Reads the events until shutdown and hands them to the tree in batches.
async fn follow(mut tree: Tree, mut stream: EventStream<Vec<u8>>, shutdown: CancellationToken) {
    loop {
        let next = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            next = stream.next() => next,
        };
        let mut batch = match next {
            Some(Ok(event)) => vec![event],
            Some(Err(e)) => {
                error!(dir = %tree.root.display(), error = %e, "Reading plugin directory events failed");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(READ_ERROR_PAUSE) => continue,
                }
            }
            None => {
                error!(dir = %tree.root.display(), "Plugin directory events ended; no longer watching");
                break;
            }
        };
        while batch.len() < MAX_BATCH {
            match stream.next().now_or_never() {
                Some(Some(Ok(event))) => batch.push(event),
                Some(Some(Err(e))) => {
                    error!(dir = %tree.root.display(), error = %e, "Reading plugin directory events failed");
                    break;
                }
                Some(None) | None => break,
            }
        }
        let handled = tokio::task::spawn_blocking(move || {
            for event in batch {
                tree.handle(event);
            }
            tree
        })
        .await;
        tree = match handled {
            Ok(tree) => tree,
            Err(e) => {
                error!(error = %e, "Plugin watcher failed; no longer watching");
                return;
            }
        };
    }
    debug!(dir = %tree.root.display(), "Plugin watcher stopped");
}

/// The watched tree: the directories' watches and where the sockets go.
struct Tree {
    root: PathBuf,
    watches: Watches,
    /// Every watched directory, by watch descriptor number.
    dirs: HashMap<i32, (WatchDescriptor, PathBuf)>,
    desired: Arc<DesiredState>,
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_bytes().starts_with(b".")
}

fn file_id(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

impl Tree {
    /// Makes the root (Go's `init`), watches and walks it (Go's `traversePluginDir`).
    fn init(&mut self) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(&self.root)?;
        let root = self.root.clone();
        self.watch(&root)?;
        let mut found = BTreeMap::new();
        self.walk_below(&root, &mut found);
        self.add_all(found);
        Ok(())
    }

    fn watch(&mut self, dir: &Path) -> io::Result<()> {
        let wd = self.watches.add(dir, watch_mask())?;
        self.dirs
            .insert(wd.get_watch_descriptor_id(), (wd, dir.to_path_buf()));
        Ok(())
    }

    /// Watches every directory below `dir` and collects its sockets (not following links,
    /// skipping hidden names). Errors are logged; the rest of the tree is still walked.
    fn walk_below(&mut self, dir: &Path, found: &mut BTreeMap<PathBuf, FileId>) {
        let mut pending = vec![dir.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) => {
                    error!(path = %dir.display(), error = %e, "Failed to read plugin directory");
                    continue;
                }
            };
            for entry in entries {
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(e) => {
                        error!(path = %dir.display(), error = %e, "Failed to read plugin directory");
                        continue;
                    }
                };
                let path = entry.path();
                if is_hidden(&entry.file_name()) {
                    debug!(path = %path.display(), "Ignoring hidden file");
                    continue;
                }
                match std::fs::symlink_metadata(&path) {
                    Err(e) => debug!(path = %path.display(), error = %e, "Plugin file vanished"),
                    Ok(meta) if meta.is_dir() => match self.watch(&path) {
                        Ok(()) => pending.push(path),
                        Err(e) => {
                            error!(path = %path.display(), error = %e, "Failed to watch plugin directory")
                        }
                    },
                    Ok(meta) if meta.file_type().is_socket() => {
                        found.insert(path, file_id(&meta));
                    }
                    Ok(_) => debug!(path = %path.display(), "Ignoring non-socket file"),
                }
            }
        }
    }

    fn add_all(&self, found: BTreeMap<PathBuf, FileId>) {
        for (socket, file) in found {
            self.add(socket, file);
        }
    }

    fn add(&self, socket: PathBuf, file: FileId) {
        let shown = socket.display().to_string();
        if self.desired.add_or_update(socket, file) {
            info!(socket = %shown, "Adding socket path or updating timestamp to desired state cache");
        }
    }

    /// Applies one inotify event.
    fn handle(&mut self, event: EventOwned) {
        let mask = event.mask;
        if mask.contains(EventMask::Q_OVERFLOW) {
            warn!(dir = %self.root.display(), "Plugin directory events were lost; walking it again");
            self.rescan();
            return;
        }
        let id = event.wd.get_watch_descriptor_id();
        if mask.contains(EventMask::IGNORED) {
            if let Some((_, dir)) = self.dirs.remove(&id) {
                if dir == self.root {
                    error!(dir = %dir.display(), "Plugin registration directory is gone; no longer watching it");
                } else {
                    debug!(dir = %dir.display(), "Plugin directory no longer watched");
                }
            }
            return;
        }
        let (Some((_, dir)), Some(name)) = (self.dirs.get(&id), event.name) else {
            return;
        };
        let path = dir.join(&name);
        if is_hidden(&name) {
            debug!(path = %path.display(), "Ignoring hidden file");
            return;
        }
        if mask.intersects(EventMask::CREATE | EventMask::MOVED_TO) {
            self.created(path);
        } else if mask.intersects(EventMask::DELETE | EventMask::MOVED_FROM) {
            let moved_dir = mask.contains(EventMask::MOVED_FROM | EventMask::ISDIR);
            self.removed(&path, moved_dir);
        }
    }

    /// Go's `handleCreateEvent`.
    fn created(&mut self, path: PathBuf) {
        match std::fs::symlink_metadata(&path) {
            Err(e) => debug!(path = %path.display(), error = %e, "Plugin file vanished"),
            Ok(meta) if meta.is_dir() => match self.watch(&path) {
                Ok(()) => {
                    let mut found = BTreeMap::new();
                    self.walk_below(&path, &mut found);
                    self.add_all(found);
                }
                Err(e) => {
                    error!(path = %path.display(), error = %e, "Failed to watch plugin directory")
                }
            },
            Ok(meta) if meta.file_type().is_socket() => self.add(path, file_id(&meta)),
            Ok(_) => debug!(path = %path.display(), "Ignoring non-socket file"),
        }
    }

    /// Go's `handleDeleteEvent`, for a directory too.
    fn removed(&mut self, path: &Path, moved_dir: bool) {
        for socket in self.desired.remove_tree(path) {
            info!(socket = %socket.display(), "Removing socket path from desired state cache");
        }
        if moved_dir {
            // Its watches would report under the old path: drop them (moved within the
            // tree, it is watched again under the new one).
            let below: Vec<i32> = self
                .dirs
                .iter()
                .filter(|(_, (_, dir))| dir.starts_with(path))
                .map(|(&id, _)| id)
                .collect();
            for id in below {
                if let Some((wd, dir)) = self.dirs.remove(&id) {
                    if let Err(e) = self.watches.remove(wd) {
                        debug!(dir = %dir.display(), error = %e, "Failed to remove a watch");
                    }
                }
            }
        }
    }

    /// Walks the whole tree again and makes the desired state what is found.
    fn rescan(&mut self) {
        let root = self.root.clone();
        if let Err(e) = self.watch(&root) {
            error!(dir = %root.display(), error = %e, "Failed to watch plugin registration directory");
        }
        let mut found = BTreeMap::new();
        self.walk_below(&root, &mut found);
        self.desired.sync(&found);
    }
}
