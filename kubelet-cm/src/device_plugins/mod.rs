//! Device plugins over gRPC (`deviceplugin/v1beta1`): the registration server that device
//! plugins call, and the client the kubelet uses to call each registered plugin. This is the
//! I/O half of Go's `pkg/kubelet/cm/devicemanager` (`ManagerImpl.Start`, `ManagerImpl.Register`,
//! `endpointImpl`) and implements [`DevicePluginRegistry`] and
//! [`DevicePlugin`](kubelet_core::devices::DevicePlugin). It decides
//! nothing about pods: which devices a container gets, what happens when a plugin is replaced
//! or gone, and what the node reports belong to the device manager in kubelet-core, which
//! consumes the [`DevicePluginEvent`]s reported here.
//!
//! | module | what |
//! |---|---|
//! | [`api`] | the generated v1beta1 messages, clients and servers |
//! | `registration` | the `Register` handler: Go's version and resource-name checks |
//! | `endpoint` | dialling a plugin back and reading its `ListAndWatch` stream |
//! | [`GrpcDevicePlugin`] | the calls on a registered plugin (`Allocate`, …) |
//! | [`DevicePluginHandler`] | the plugin watcher's way in (`plugins_registry`, Go's `GetWatcherHandler`) |
//!
//! # The registry
//!
//! [`GrpcDevicePluginRegistry::start`] (Go's `ManagerImpl.Start`) creates the socket directory
//! (`<root-dir>/device-plugins`, mode 0750), removes every file in it but the device manager's
//! checkpoint ([`CHECKPOINT_FILE`]) so that plugins watching the directory notice the kubelet
//! restarted and register again, binds [`KUBELET_SOCKET`] and serves the `Registration`
//! service on it until the shutdown token is cancelled; then it removes the socket.
//! `start` may be called once per registry; it returns once the socket listens.
//!
//! # Registering through the plugin watcher
//!
//! Plugins may also register through the kubelet's plugin manager
//! ([`crate::plugin_manager`], a socket in `<root-dir>/plugins_registry`) instead of the
//! `Register` call. Once the registry is started, [`GrpcDevicePluginRegistry::watcher_handler`]
//! hands out the manager's handler for the `DevicePlugin` type ([`DevicePluginHandler`]) and
//! writes `<socket_dir>/DEPRECATION`, which tells plugins that look for it to register that
//! way. An accepted plugin is dialled at the endpoint it gave (its registration socket when
//! it gave none), asked for its options (`GetDevicePluginOptions`) and then lives exactly as
//! a `Register`ed one from **Watching** on (below), on the same event channel and shutdown
//! token. One more way out exists for it: the plugin manager deregistering the resource
//! (its socket is gone) stops the resource's newest watcher-registered endpoint, which then
//! reports `Stopped` (Go's `DeRegisterPlugin` → `endpointImpl.stop()`).
//!
//! # The life of a registration
//!
//! Each `Register` call is handled the way Go handles it, and every accepted one gets its
//! own task (Go's `addEndpoint` and `runEndpoint` goroutines), which moves through these
//! states:
//!
//! ```text
//!   Register call ──(bad version / not an extended resource name)──► Rejected
//!        │                 gRPC error with Go's message; nothing reported
//!        │ accepted: Empty answered at once, task spawned
//!        ▼
//!    Dialing ──(no connection to <dir>/<endpoint> within 10 s)──► Abandoned
//!        │                 error logged; nothing reported
//!        │ connected: a fresh endpoint number is taken
//!        ▼
//!    Watching ── reported first: Registered{endpoint, options, plugin}
//!        │       then, for every ListAndWatch snapshot: Devices{endpoint, devices}
//!        │ the stream ends or fails (or ListAndWatch is refused)
//!        ▼
//!    Stopped ─── the plugin client is marked stopped, then reported: Stopped{endpoint}
//!
//!   shutdown, in any state ──► the task ends at once and reports nothing more
//! ```
//!
//! Who may do what:
//!
//! - Only the registration's own task reports events for its endpoint, so an endpoint's
//!   events always arrive in the order `Registered`, `Devices`…, `Stopped`, and `Stopped`
//!   is the last one. Two endpoints' events interleave freely.
//! - The [`DevicePlugin`](kubelet_core::devices::DevicePlugin) handed out in `Registered` belongs to the device manager, which
//!   may call it from any task, concurrently. The registration task only marks it stopped
//!   (before reporting `Stopped`); from then on every call fails at once with Go's
//!   `endpoint … has been stopped` error, as Go's `endpointImpl` does after `stop()`.
//! - Endpoint numbers come from one process-wide counter and are never reused, so a plugin
//!   registering again for the same resource (newest registration wins, as in Go) gets a
//!   higher number. The registry runs the old and the new endpoint independently; telling
//!   them apart (Go's `old.e == e` check) is the device manager's job.
//! - Shutdown (the token given to `start`) is the only way to end the server and the tasks
//!   from outside. Every event send also waits on the token, so no task hangs on a full
//!   channel, and nothing is reported once the token is cancelled. A task also ends when
//!   the event receiver is dropped. [`GrpcDevicePluginRegistry::stopped`] waits for all of
//!   it to be over.

pub mod api;
mod client;
mod endpoint;
mod registration;
mod watcher_handler;

#[cfg(test)]
mod fake_plugin;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod watcher_tests;

use std::fmt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::devices::{DevicePluginError, DevicePluginEvent, DevicePluginRegistry};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

pub use client::GrpcDevicePlugin;
pub use watcher_handler::{DevicePluginHandler, DEPRECATION_FILE};

use crate::plugin_manager::PluginHandler;
use api::registration_server::RegistrationServer;
use registration::{Context, RegistrationHandler};

/// The kubelet's registration socket, in the socket directory (Go's `KubeletSocket`).
pub const KUBELET_SOCKET: &str = "kubelet.sock";

/// The device manager's checkpoint, the one file in the socket directory that `start` keeps
/// (Go's `kubeletDeviceManagerCheckpoint`).
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";

/// How long the kubelet keeps trying to connect to a plugin that registered (Go's `dial`).
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server may take to finish its open calls after shutdown before they are
/// abandoned.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

static NEXT_ENDPOINT: AtomicU64 = AtomicU64::new(1);

/// A fresh endpoint number: process-wide, never reused.
fn next_endpoint() -> u64 {
    NEXT_ENDPOINT.fetch_add(1, Ordering::Relaxed)
}

/// The `deviceplugin/v1beta1` registration server ([`DevicePluginRegistry`]) on
/// `<socket_dir>/kubelet.sock`. See the module docs for the life of a registration.
pub struct GrpcDevicePluginRegistry {
    socket_dir: PathBuf,
    dial_timeout: Duration,
    started: AtomicBool,
    tasks: TaskTracker,
    serving: watch::Sender<Serving>,
}

/// How far `start` got, for [`GrpcDevicePluginRegistry::watcher_handler`].
#[derive(Clone)]
enum Serving {
    /// `start` was not called or has not finished.
    NotYet,
    /// Serving: what the plugin watcher's handler needs (weak: the registry does not keep
    /// the event sender alive once its tasks are over).
    Up(Weak<Context>),
    /// `start` failed: never serving.
    Failed,
}

impl fmt::Debug for GrpcDevicePluginRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcDevicePluginRegistry")
            .field("socket_dir", &self.socket_dir)
            .field("started", &self.started.load(Ordering::Relaxed))
            .field("tasks", &self.tasks.len())
            .finish()
    }
}

impl GrpcDevicePluginRegistry {
    /// A registry serving in `socket_dir` (`<root-dir>/device-plugins`); nothing happens
    /// until [`start`](DevicePluginRegistry::start).
    pub fn new(socket_dir: PathBuf) -> GrpcDevicePluginRegistry {
        GrpcDevicePluginRegistry {
            socket_dir,
            dial_timeout: DIAL_TIMEOUT,
            started: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            serving: watch::Sender::new(Serving::NotYet),
        }
    }

    /// Shortens the dial timeout (tests of plugins that never answer).
    #[cfg(test)]
    fn with_dial_timeout(mut self, timeout: Duration) -> GrpcDevicePluginRegistry {
        self.dial_timeout = timeout;
        self
    }

    /// The socket directory; plugins' sockets are named relative to it.
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The registration socket, `<socket_dir>/kubelet.sock`.
    pub fn socket_path(&self) -> PathBuf {
        self.socket_dir.join(KUBELET_SOCKET)
    }

    /// The plugin manager's handler for `DevicePlugin` plugins (Go's `GetWatcherHandler`),
    /// registering on this registry's event channel and shutdown token; `None` until
    /// [`start`](DevicePluginRegistry::start) has succeeded, and again once the registry is
    /// over. Each call writes the empty `<socket_dir>/DEPRECATION` file (a failure to write
    /// it is only logged, as in Go); every handler handed out shares the registry's state.
    pub async fn watcher_handler(&self) -> Option<Arc<dyn PluginHandler>> {
        let context = match &*self.serving.borrow() {
            Serving::Up(context) => context.upgrade()?,
            Serving::NotYet | Serving::Failed => return None,
        };
        watcher_handler::write_deprecation_file(&self.socket_dir).await;
        Some(Arc::new(DevicePluginHandler::new(context)))
    }

    /// Resolves once [`start`](DevicePluginRegistry::start) has finished: true when it
    /// succeeded (then [`watcher_handler`](Self::watcher_handler) answers), false when it
    /// failed. Never resolves while `start` is not called.
    pub async fn wait_started(&self) -> bool {
        let mut serving = self.serving.subscribe();
        match serving
            .wait_for(|s| !matches!(s, Serving::NotYet))
            .await
            .map(|s| s.clone())
        {
            Ok(Serving::Up(_)) => true,
            // The sender lives as long as `self`: this is only `Failed`.
            Ok(Serving::NotYet | Serving::Failed) | Err(_) => false,
        }
    }

    /// Resolves once the registry is over: after shutdown, the server has stopped, its socket
    /// is removed and every registration task has ended. Resolves at once when `start` was
    /// never called or failed.
    pub async fn stopped(&self) {
        if self.started.load(Ordering::SeqCst) {
            self.tasks.wait().await;
        }
    }

    fn serve_error(&self, path: &Path, message: impl fmt::Display) -> DevicePluginError {
        DevicePluginError::Serve {
            path: path.display().to_string(),
            message: message.to_string(),
        }
    }

    /// Makes the directory, clears it and binds the socket.
    async fn listen(&self) -> Result<UnixListener, DevicePluginError> {
        let dir = self.socket_dir.clone();
        tokio::task::spawn_blocking(move || prepare_dir(&dir))
            .await
            .map_err(|e| self.serve_error(&self.socket_dir, e))?
            .map_err(|e| self.serve_error(&self.socket_dir, e))?;
        let socket = self.socket_path();
        match UnixListener::bind(&socket) {
            // Another kubelet on the same directory (tests on the default root) bound it
            // between the clearing and here: the newest kubelet takes the socket, as the
            // clearing would have given it to a kubelet starting a moment later.
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let _ = tokio::fs::remove_file(&socket).await;
                UnixListener::bind(&socket).map_err(|e| self.serve_error(&socket, e))
            }
            other => other.map_err(|e| self.serve_error(&socket, e)),
        }
    }
}

#[async_trait]
impl DevicePluginRegistry for GrpcDevicePluginRegistry {
    async fn start(
        &self,
        events: mpsc::Sender<DevicePluginEvent>,
        shutdown: CancellationToken,
    ) -> Result<(), DevicePluginError> {
        if self.started.swap(true, Ordering::SeqCst) {
            return Err(self.serve_error(&self.socket_path(), "already started"));
        }
        debug!(dir = %self.socket_dir.display(), "Starting device plugin registry");
        let listener = match self.listen().await {
            Ok(listener) => listener,
            Err(e) => {
                self.tasks.close();
                self.serving.send_replace(Serving::Failed);
                return Err(e);
            }
        };
        let context = Arc::new(Context {
            socket_dir: self.socket_dir.clone(),
            dial_timeout: self.dial_timeout,
            events,
            shutdown: shutdown.clone(),
            tasks: self.tasks.clone(),
            watcher_endpoints: Default::default(),
        });
        let socket = self.socket_path();
        info!(socket = %socket.display(), "Serving device plugin registration server");
        self.serving
            .send_replace(Serving::Up(Arc::downgrade(&context)));
        self.tasks.spawn(serve(context, listener, socket));
        Ok(())
    }
}

/// Go's `MkdirAll(dir, 0750)` then `removeContents`: every entry that is not a directory
/// (following symlinks) is removed, except the checkpoint. Failures to remove are logged, as
/// Go does; only a directory that cannot be made or read is an error.
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == CHECKPOINT_FILE {
            continue;
        }
        let path = entry.path();
        match std::fs::metadata(&path) {
            Err(e) => error!(path = %path.display(), error = %e, "Failed to stat file"),
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => match std::fs::remove_file(&path) {
                Ok(()) => debug!(path = %path.display(), "Removed stale device plugin file"),
                Err(e) => error!(path = %path.display(), error = %e, "Failed to remove file"),
            },
        }
    }
    Ok(())
}

/// Serves `Registration` until shutdown, removes the socket, then lets
/// [`GrpcDevicePluginRegistry::stopped`] resolve once the registration tasks are over.
async fn serve(context: Arc<Context>, listener: UnixListener, socket: PathBuf) {
    let shutdown = context.shutdown.clone();
    let tasks = context.tasks.clone();
    let server = tonic::transport::Server::builder()
        .add_service(RegistrationServer::new(RegistrationHandler::new(context)))
        .serve_with_incoming_shutdown(
            kubelet_core::grpc_uds::incoming(listener, shutdown.clone(), tasks.clone()),
            shutdown.clone().cancelled_owned(),
        );
    let grace = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        result = server => match result {
            Ok(()) => debug!(socket = %socket.display(), "Device plugin registration server stopped"),
            Err(e) => error!(socket = %socket.display(), error = %e, "Device plugin registration server failed"),
        },
        () = grace => warn!(
            socket = %socket.display(),
            grace_seconds = SHUTDOWN_GRACE.as_secs(),
            "Device plugin registration server did not stop in time; abandoning its connections"
        ),
    }
    match tokio::fs::remove_file(&socket).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            warn!(socket = %socket.display(), error = %e, "Failed to remove the kubelet's device plugin socket")
        }
    }
    tasks.close();
}
