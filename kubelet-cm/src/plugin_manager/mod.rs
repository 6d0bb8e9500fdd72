//! The kubelet's plugin manager (Go's `pkg/kubelet/pluginmanager`): plugins (device
//! plugins, CSI drivers, …) announce themselves by creating a unix socket under
//! `<root-dir>/plugins_registry` and serving `pluginregistration.Registration` on it
//! ([`api`]); the manager notices the socket, asks the plugin who it is (`GetInfo`), hands
//! it to the [`PluginHandler`] of its type, and tells the plugin the outcome
//! (`NotifyRegistrationStatus`). When the socket goes, the handler deregisters the plugin.
//!
//! | module | what | Go |
//! |---|---|---|
//! | `watcher` | walks and watches the directory (inotify), fills the desired state | `pluginwatcher` |
//! | `state` | the desired state (sockets) and the actual state (registered plugins) | `cache` |
//! | `reconciler` | what to (de)register, and the per-socket back-off, without I/O | `reconciler`, `goroutinemap` |
//! | `executor` | the reconcile loop and the registration of one socket | `reconciler.Run`, `operationexecutor` |
//! | `client` | `GetInfo` and `NotifyRegistrationStatus` on a plugin's socket | `operation_generator.go` |
//! | [`PluginHandler`] | what a component implements to take plugins of a type | `cache.PluginHandler` |
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use kubelet_cm::plugin_manager::{PluginHandler, PluginManager, DEVICE_PLUGIN};
//! # async fn example(handler: Arc<dyn PluginHandler>) -> Result<(), kubelet_cm::plugin_manager::PluginManagerError> {
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let dir = kubelet_cm::plugin_manager::plugins_registry_dir("/var/lib/kubelet".as_ref());
//! let manager = PluginManager::new(dir, BTreeMap::from([(DEVICE_PLUGIN.to_string(), handler)]));
//! manager.start(shutdown.clone()).await?;
//! // … later:
//! shutdown.cancel();
//! manager.stopped().await;
//! # Ok(())
//! # }
//! ```
//!
//! # The life of one socket
//!
//! Every socket path under the directory moves through these states. The desired state
//! holds the socket with a *generation*, a number that changes only when another file
//! appears under the path (Go's timestamp); the actual state holds the generation that was
//! registered.
//!
//! ```text
//!            socket created, moved in, or found by a walk
//!   Absent ───────────────────────────────────────────────► Desired(g)
//!     ▲  ◄──── removed or moved out (forgotten; nothing else) ──┘  │
//!     │                                                            │ a reconcile pass: no registration
//!     │                                                            │ of the socket running, no back-off
//!     │                                                            ▼ of generation g
//!     │                                                     Registering(g)   (a task of its own)
//!     │    dial (10 s), GetInfo (1 s), handler of info.type, validate_plugin, register_plugin
//!     │    ├─ no connection / GetInfo fails ──────────────────────────► BackingOff(g)
//!     │    ├─ no handler / refused / register fails: notified false ──► BackingOff(g)
//!     │    └─ registered: notified true (5 s) ──► Registered(g)  (actual state)
//!     │                                               │
//!     │   socket removed, or re-created as g' ≠ g:    │ next reconcile pass:
//!     └───────── deregister_plugin(name) ◄────────────┘ → Absent, or Desired(g') and
//!                                                         registered again in the same pass
//!
//!   BackingOff(g): waits 0.5 s after the first failure, doubling up to 2 min 2 s, then
//!   Registering(g) again. A new generation (re-created socket) starts over at once;
//!   a removed socket just leaves.
//! ```
//!
//! Who may do what:
//!
//! - Only the watcher writes the desired state, and every change wakes the reconcile loop
//!   (which also runs every second, as Go's does).
//! - Only the reconcile loop reads and writes the actual state and decides; it calls
//!   [`PluginHandler::deregister_plugin`] itself, at once, before any registration of the
//!   same pass. A registration it spawns is the only caller of `GetInfo`,
//!   [`PluginHandler::validate_plugin`], [`PluginHandler::register_plugin`] and
//!   `NotifyRegistrationStatus` for its socket; at most one runs per socket, and its
//!   outcome comes back to the loop, which records the plugin (success) or starts the
//!   back-off (failure). A socket removed while its registration runs is deregistered once
//!   the registration has succeeded.
//! - A handler sees `register_plugin` succeed at most once per generation of a socket, and
//!   `deregister_plugin` exactly once for each success (unless the kubelet stops first).
//! - Shutdown (the token given to [`PluginManager::start`]) ends the watcher and the loop
//!   and drops the running registrations; nothing is deregistered, as in Go.
//!
//! Differences from Go 1.20: a failing `register_plugin` leaves the plugin unregistered and
//! is retried (Go records it and never retries); a socket moved out of the directory is
//! forgotten like a removed one, as is everything below a removed or moved directory; lost
//! inotify events (queue overflow) trigger a new walk; hidden directories are skipped by
//! the first walk too; the same file reported twice keeps its generation; a new
//! generation clears the back-off; the `plugin_manager_total_plugins` metric is not kept.

pub mod api;
mod client;
mod executor;
mod handler;
mod reconciler;
mod state;
mod watcher;

#[cfg(test)]
pub(crate) mod fake_plugin;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

pub use handler::PluginHandler;
pub use reconciler::{BACKOFF_INITIAL, BACKOFF_MAX};

use executor::{Executor, Handlers, Timeouts};
use state::DesiredState;

/// The registration directory's name under the kubelet's root directory (Go's
/// `config.DefaultKubeletPluginsRegistrationDirName`).
pub const PLUGINS_REGISTRY_DIR: &str = "plugins_registry";

/// The plugin type of device plugins (Go's `pluginregistration.DevicePlugin`).
pub const DEVICE_PLUGIN: &str = "DevicePlugin";
/// The plugin type of CSI drivers (Go's `pluginregistration.CSIPlugin`).
pub const CSI_PLUGIN: &str = "CSIPlugin";

/// How often the reconciler runs when nothing wakes it (Go's `loopSleepDuration`).
pub const RECONCILE_PERIOD: Duration = Duration::from_secs(1);
/// How long a registration keeps trying to connect to a socket (Go's `dialTimeoutDuration`).
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline of `GetInfo` (Go's one-second context).
pub const GET_INFO_TIMEOUT: Duration = Duration::from_secs(1);
/// Deadline of `NotifyRegistrationStatus` (Go's `notifyTimeoutDuration`).
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of a handler's [`PluginHandler::register_plugin`] (Go sets none).
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(30);

/// `<root_dir>/plugins_registry` (Go's `kl.getPluginsRegistrationDir()`).
pub fn plugins_registry_dir(root_dir: &Path) -> PathBuf {
    root_dir.join(PLUGINS_REGISTRY_DIR)
}

/// Why the plugin manager could not start.
#[derive(Debug, thiserror::Error)]
pub enum PluginManagerError {
    /// [`PluginManager::start`] was called before.
    #[error("the plugin manager was already started")]
    AlreadyStarted,
    /// The registration directory could not be created or watched.
    #[error("plugin registration directory {path}: {message}")]
    Directory {
        /// The directory.
        path: String,
        /// What failed.
        message: String,
    },
    /// No inotify instance could be had.
    #[error("failed to start the plugin watcher: {0}")]
    Inotify(String),
}

/// The plugin manager (Go's `pluginManager`): the watcher and the reconcile loop over one
/// registration directory, with one handler per plugin type. See the module docs.
pub struct PluginManager {
    dir: PathBuf,
    handlers: Handlers,
    timeouts: Timeouts,
    period: Duration,
    started: AtomicBool,
    tasks: TaskTracker,
}

impl fmt::Debug for PluginManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginManager")
            .field("dir", &self.dir)
            .field("plugin_types", &self.handlers.keys().collect::<Vec<_>>())
            .field("started", &self.started.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl PluginManager {
    /// A manager of `dir` (usually [`plugins_registry_dir`]) handing plugins to `handlers`,
    /// by plugin type ([`DEVICE_PLUGIN`], [`CSI_PLUGIN`], …; Go's `AddHandler`). Nothing
    /// happens until [`start`](Self::start).
    pub fn new(dir: PathBuf, handlers: BTreeMap<String, Arc<dyn PluginHandler>>) -> PluginManager {
        PluginManager {
            dir,
            handlers: Arc::new(handlers),
            timeouts: Timeouts {
                dial: DIAL_TIMEOUT,
                get_info: GET_INFO_TIMEOUT,
                notify: NOTIFY_TIMEOUT,
                register: REGISTER_TIMEOUT,
            },
            period: RECONCILE_PERIOD,
            started: AtomicBool::new(false),
            tasks: TaskTracker::new(),
        }
    }

    /// Shortens the dial timeout (tests of sockets nobody serves).
    #[cfg(test)]
    fn with_dial_timeout(mut self, timeout: Duration) -> PluginManager {
        self.timeouts.dial = timeout;
        self
    }

    /// The registration directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts the watcher and the reconcile loop (Go's `Run`), which run until `shutdown`.
    /// Creates the directory (mode 0750) when missing, and returns once it is watched and
    /// walked: the sockets already there are found, and every later change is seen. May be
    /// called once.
    pub async fn start(&self, shutdown: CancellationToken) -> Result<(), PluginManagerError> {
        if self.started.swap(true, Ordering::SeqCst) {
            return Err(PluginManagerError::AlreadyStarted);
        }
        let desired = Arc::new(DesiredState::default());
        let watched =
            watcher::start(&self.dir, desired.clone(), shutdown.clone(), &self.tasks).await;
        if let Err(e) = watched {
            self.tasks.close();
            return Err(e);
        }
        let executor = Executor::new(desired, self.handlers.clone(), self.timeouts, self.period);
        self.tasks.spawn(executor.run(shutdown));
        self.tasks.close();
        info!(
            dir = %self.dir.display(),
            plugin_types = ?self.handlers.keys().collect::<Vec<_>>(),
            "Started kubelet plugin manager"
        );
        Ok(())
    }

    /// [`start`](Self::start), then [`stopped`](Self::stopped).
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), PluginManagerError> {
        self.start(shutdown).await?;
        self.stopped().await;
        Ok(())
    }

    /// Resolves once the manager is over: after shutdown, the watcher and the loop have
    /// ended. Resolves at once when `start` was never called or failed.
    pub async fn stopped(&self) {
        if self.started.load(Ordering::SeqCst) {
            self.tasks.wait().await;
        }
    }
}
