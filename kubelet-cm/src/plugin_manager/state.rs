//! The plugin manager's two caches (Go's `pluginmanager/cache`): the desired state, the
//! sockets the watcher sees, and the actual state, the plugins registered with a handler.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::PluginHandler;

/// Which file a socket path names: its device and inode numbers.
pub(crate) type FileId = (u64, u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DesiredPlugin {
    generation: u64,
    file: FileId,
}

#[derive(Debug, Default)]
struct Desired {
    plugins: BTreeMap<PathBuf, DesiredPlugin>,
    last_generation: u64,
}

impl Desired {
    fn next_generation(&mut self) -> u64 {
        self.last_generation += 1;
        self.last_generation
    }
}

/// The sockets in the registration directory (Go's `desiredStateOfWorld`), each with a
/// generation (Go's timestamp): a number taken from a counter when the socket is first
/// seen and again when another file appears under the same path, so the reconciler can
/// tell a re-created socket from the one it registered. Written by the watcher, read by the
/// reconciler, which is woken on every change.
#[derive(Default)]
pub(crate) struct DesiredState {
    inner: Mutex<Desired>,
    changed: Notify,
}

impl fmt::Debug for DesiredState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DesiredState")
            .field("plugins", &self.lock().plugins)
            .finish()
    }
}

impl DesiredState {
    fn lock(&self) -> MutexGuard<'_, Desired> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the socket `file` at `socket` (Go's `AddOrUpdatePlugin`). A socket already
    /// known as the same file keeps its generation (the watcher may report one twice: the
    /// walk of a new directory and its create event); another file gets a new one. True
    /// when something changed.
    pub fn add_or_update(&self, socket: PathBuf, file: FileId) -> bool {
        let mut desired = self.lock();
        if desired
            .plugins
            .get(&socket)
            .is_some_and(|known| known.file == file)
        {
            return false;
        }
        let generation = desired.next_generation();
        desired
            .plugins
            .insert(socket, DesiredPlugin { generation, file });
        drop(desired);
        self.changed.notify_one();
        true
    }

    /// Forgets `path` and every socket below it (a removed socket, or a removed or moved
    /// directory; Go's `RemovePlugin`). Returns the sockets forgotten.
    pub fn remove_tree(&self, path: &Path) -> Vec<PathBuf> {
        let mut desired = self.lock();
        let gone: Vec<PathBuf> = desired
            .plugins
            .keys()
            .filter(|socket| socket.starts_with(path))
            .cloned()
            .collect();
        for socket in &gone {
            desired.plugins.remove(socket);
        }
        drop(desired);
        if !gone.is_empty() {
            self.changed.notify_one();
        }
        gone
    }

    /// Makes the sockets exactly `found` (after the watcher lost events): the missing ones
    /// are forgotten, the new or changed ones recorded.
    pub fn sync(&self, found: &BTreeMap<PathBuf, FileId>) {
        let mut desired = self.lock();
        let before = desired.plugins.len();
        desired
            .plugins
            .retain(|socket, _| found.contains_key(socket));
        let mut changed = desired.plugins.len() != before;
        for (socket, &file) in found {
            if desired.plugins.get(socket).is_some_and(|p| p.file == file) {
                continue;
            }
            let generation = desired.next_generation();
            desired
                .plugins
                .insert(socket.clone(), DesiredPlugin { generation, file });
            changed = true;
        }
        drop(desired);
        if changed {
            self.changed.notify_one();
        }
    }

    /// Every socket and its generation.
    pub fn generations(&self) -> BTreeMap<PathBuf, u64> {
        self.lock()
            .plugins
            .iter()
            .map(|(socket, p)| (socket.clone(), p.generation))
            .collect()
    }

    /// Resolves at the next change (or at once when one happened since the last call).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// A plugin registered with its handler (Go's `cache.PluginInfo` in the actual state).
#[derive(Clone)]
pub(crate) struct RegisteredPlugin {
    /// Its registration socket.
    pub socket: PathBuf,
    /// The socket's generation that was registered.
    pub generation: u64,
    /// The plugin's name, as its handler knows it.
    pub name: String,
    /// The plugin's type.
    pub plugin_type: String,
    /// Who registered it, and deregisters it.
    pub handler: Arc<dyn PluginHandler>,
}

impl fmt::Debug for RegisteredPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisteredPlugin")
            .field("socket", &self.socket)
            .field("generation", &self.generation)
            .field("name", &self.name)
            .field("plugin_type", &self.plugin_type)
            .finish_non_exhaustive()
    }
}

/// The plugins registered (Go's `actualStateOfWorld`), by socket. Only the reconcile loop
/// holds it.
#[derive(Debug, Default)]
pub(crate) struct ActualState {
    plugins: BTreeMap<PathBuf, RegisteredPlugin>,
}

impl ActualState {
    /// Records a registration (replacing one of the same socket).
    pub fn add(&mut self, plugin: RegisteredPlugin) {
        self.plugins.insert(plugin.socket.clone(), plugin);
    }

    /// Forgets the registration of `socket`.
    pub fn remove(&mut self, socket: &Path) -> Option<RegisteredPlugin> {
        self.plugins.remove(socket)
    }

    /// Every registered socket and the generation registered.
    pub fn generations(&self) -> BTreeMap<PathBuf, u64> {
        self.plugins
            .iter()
            .map(|(socket, p)| (socket.clone(), p.generation))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> PathBuf {
        PathBuf::from(p)
    }

    #[test]
    fn generations_change_only_with_the_file() {
        let desired = DesiredState::default();
        assert!(desired.add_or_update(path("/r/a.sock"), (1, 10)));
        assert!(desired.add_or_update(path("/r/b.sock"), (1, 11)));
        let first = desired.generations();
        assert_eq!(first.len(), 2);
        // Reported again: nothing changes.
        assert!(!desired.add_or_update(path("/r/a.sock"), (1, 10)));
        assert_eq!(desired.generations(), first);
        // Re-created: a newer generation.
        assert!(desired.add_or_update(path("/r/a.sock"), (1, 12)));
        let second = desired.generations();
        assert!(second[&path("/r/a.sock")] > first[&path("/r/b.sock")]);
        assert_eq!(second[&path("/r/b.sock")], first[&path("/r/b.sock")]);
    }

    #[test]
    fn removing_a_directory_forgets_what_is_below_it() {
        let desired = DesiredState::default();
        desired.add_or_update(path("/r/d/a.sock"), (1, 1));
        desired.add_or_update(path("/r/d/e/b.sock"), (1, 2));
        desired.add_or_update(path("/r/dd.sock"), (1, 3));
        let mut gone = desired.remove_tree(Path::new("/r/d"));
        gone.sort();
        assert_eq!(gone, vec![path("/r/d/a.sock"), path("/r/d/e/b.sock")]);
        assert_eq!(
            desired.generations().into_keys().collect::<Vec<_>>(),
            vec![path("/r/dd.sock")]
        );
        assert!(desired.remove_tree(Path::new("/r/nothing")).is_empty());
    }

    #[test]
    fn sync_keeps_what_is_unchanged() {
        let desired = DesiredState::default();
        desired.add_or_update(path("/r/keep.sock"), (1, 1));
        desired.add_or_update(path("/r/gone.sock"), (1, 2));
        desired.add_or_update(path("/r/changed.sock"), (1, 3));
        let before = desired.generations();
        let found = BTreeMap::from([
            (path("/r/keep.sock"), (1, 1)),
            (path("/r/changed.sock"), (1, 4)),
            (path("/r/new.sock"), (1, 5)),
        ]);
        desired.sync(&found);
        let after = desired.generations();
        assert_eq!(after.len(), 3);
        assert_eq!(after[&path("/r/keep.sock")], before[&path("/r/keep.sock")]);
        assert_ne!(
            after[&path("/r/changed.sock")],
            before[&path("/r/changed.sock")]
        );
        assert!(after.contains_key(&path("/r/new.sock")));
    }

    #[tokio::test]
    async fn changes_wake_the_reader() {
        let desired = DesiredState::default();
        desired.add_or_update(path("/r/a.sock"), (1, 1));
        // The change happened before anyone waited: the permit is kept.
        tokio::time::timeout(std::time::Duration::from_secs(5), desired.changed())
            .await
            .unwrap();
    }
}
