//! The reconcile loop and its operations (Go's `reconciler.Run` and `operationexecutor`):
//! every [`RECONCILE_PERIOD`](super::RECONCILE_PERIOD), and whenever the desired state
//! changes or a registration ends, the loop asks [`plan`] what to do, deregisters at once
//! and spawns registrations ([`register`], Go's `GenerateRegisterPluginFunc`). It alone
//! holds the actual state.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::client::RegistrationClient;
use super::reconciler::{plan, Operation, Operations};
use super::state::{ActualState, DesiredState, RegisteredPlugin};
use super::PluginHandler;

/// The handlers, by plugin type.
pub(crate) type Handlers = Arc<BTreeMap<String, Arc<dyn PluginHandler>>>;

/// The deadlines of a registration's steps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// Connecting to the registration socket.
    pub dial: Duration,
    /// `GetInfo`.
    pub get_info: Duration,
    /// `NotifyRegistrationStatus`.
    pub notify: Duration,
    /// The handler's `register_plugin`.
    pub register: Duration,
}

/// The loop's state.
pub(crate) struct Executor {
    desired: Arc<DesiredState>,
    handlers: Handlers,
    timeouts: Timeouts,
    period: Duration,
    actual: ActualState,
    operations: Operations,
    running: JoinSet<Result<RegisteredPlugin, String>>,
    /// The socket and generation of each running registration.
    running_sockets: HashMap<Id, (PathBuf, u64)>,
}

impl Executor {
    /// A loop over `desired` with nothing registered.
    pub fn new(
        desired: Arc<DesiredState>,
        handlers: Handlers,
        timeouts: Timeouts,
        period: Duration,
    ) -> Executor {
        Executor {
            desired,
            handlers,
            timeouts,
            period,
            actual: ActualState::default(),
            operations: Operations::default(),
            running: JoinSet::new(),
            running_sockets: HashMap::new(),
        }
    }

    /// Reconciles until `shutdown`; then the running registrations are dropped. Plugins
    /// stay registered with their handlers (as in Go, nothing is deregistered at shutdown).
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                Some(done) = self.running.join_next_with_id() => self.finished(done, kubelet_core::clock::monotonic_now()),
                () = self.desired.changed() => {}
                _ = tick.tick() => {}
            }
            self.reconcile(kubelet_core::clock::monotonic_now());
        }
        self.running.shutdown().await;
        debug!("Plugin manager reconciler stopped");
    }

    /// One pass: Go's `reconcile`.
    fn reconcile(&mut self, now: Instant) {
        let desired = self.desired.generations();
        self.operations.prune(&desired);
        for operation in plan(&desired, &self.actual.generations(), &self.operations, now) {
            match operation {
                Operation::Deregister { socket } => {
                    if let Some(plugin) = self.actual.remove(&socket) {
                        info!(
                            socket = %socket.display(),
                            plugin = %plugin.name,
                            plugin_type = %plugin.plugin_type,
                            "Deregistering plugin"
                        );
                        plugin.handler.deregister_plugin(&plugin.name);
                    }
                }
                Operation::Register { socket, generation } => {
                    debug!(socket = %socket.display(), generation, "Registering plugin");
                    self.operations.started(&socket, generation);
                    let task = self.running.spawn(register(
                        socket.clone(),
                        generation,
                        self.handlers.clone(),
                        self.timeouts,
                    ));
                    self.running_sockets.insert(task.id(), (socket, generation));
                }
            }
        }
    }

    /// A registration ended: record it, or start its back-off.
    fn finished(
        &mut self,
        done: Result<(Id, Result<RegisteredPlugin, String>), JoinError>,
        now: Instant,
    ) {
        let (id, outcome) = match done {
            Ok((id, outcome)) => (id, outcome),
            Err(e) => (e.id(), Err(format!("RegisterPlugin error -- {e}"))),
        };
        let Some((socket, generation)) = self.running_sockets.remove(&id) else {
            return;
        };
        match outcome {
            Ok(plugin) => {
                self.operations.finished(&socket, generation, true, now);
                info!(
                    socket = %socket.display(),
                    plugin = %plugin.name,
                    plugin_type = %plugin.plugin_type,
                    "Registered plugin"
                );
                self.actual.add(plugin);
            }
            Err(message) => {
                let retry = self.operations.finished(&socket, generation, false, now);
                error!(
                    socket = %socket.display(),
                    error = %message,
                    retry_after = ?retry,
                    "Plugin registration failed"
                );
            }
        }
    }
}

/// Registers the plugin on `socket` (Go's `GenerateRegisterPluginFunc`): asks it who it is,
/// has the handler of its type validate and register it, and tells it the outcome. The
/// plugin is registered (and must be deregistered) exactly when this returns `Ok`; the
/// error is the message logged (and, past `GetInfo`, sent to the plugin).
pub(crate) async fn register(
    socket: PathBuf,
    generation: u64,
    handlers: Handlers,
    timeouts: Timeouts,
) -> Result<RegisteredPlugin, String> {
    let path = socket.display().to_string();
    let dialled = RegistrationClient::dial(&socket, timeouts.dial).await;
    let mut client = dialled.map_err(|e| {
        let e = format!("failed to dial socket {path}, err: {e}");
        format!("RegisterPlugin error -- dial failed at socket {path}, err: {e}")
    })?;
    let info = client.get_info(timeouts.get_info).await.map_err(|e| {
        let what = "failed to get plugin info using RPC GetInfo";
        format!("RegisterPlugin error -- {what} at socket {path}, err: {e}")
    })?;
    let Some(handler) = handlers.get(&info.r#type).cloned() else {
        let plugin_type = &info.r#type;
        let message = format!(
            "RegisterPlugin error -- no handler registered for plugin type: {plugin_type} at socket {path}"
        );
        return Err(refuse(&mut client, &path, timeouts, message).await);
    };
    let endpoint = if info.endpoint.is_empty() {
        path.clone()
    } else {
        info.endpoint.clone()
    };
    let versions = &info.supported_versions;
    debug!(
        socket = %path,
        plugin_type = %info.r#type,
        plugin = %info.name,
        endpoint = %endpoint,
        ?versions,
        "Got plugin info"
    );
    if let Err(e) = handler.validate_plugin(&info.name, &endpoint, versions) {
        return Err(refuse(
            &mut client,
            &path,
            timeouts,
            format!("RegisterPlugin error -- plugin validation failed with err: {e}"),
        )
        .await);
    }
    let registered = tokio::time::timeout(
        timeouts.register,
        handler.register_plugin(&info.name, &endpoint, versions),
    )
    .await
    .unwrap_or_else(|_| {
        Err(format!(
            "no answer within {}s",
            timeouts.register.as_secs_f64()
        ))
    });
    if let Err(e) = registered {
        return Err(refuse(
            &mut client,
            &path,
            timeouts,
            format!("RegisterPlugin error -- plugin registration failed with err: {e}"),
        )
        .await);
    }
    if let Err(e) = client.notify(true, "", timeouts.notify).await {
        // Registered all the same: the handler has it (Go keeps it in the actual state).
        warn!(
            socket = %path,
            error = %e,
            "RegisterPlugin error -- failed to send registration status"
        );
    }
    Ok(RegisteredPlugin {
        socket,
        generation,
        name: info.name,
        plugin_type: info.r#type,
        handler,
    })
}

/// Tells the plugin it was not registered and why (Go's `notifyPlugin(client, false, …)`);
/// returns the error to log.
async fn refuse(
    client: &mut RegistrationClient,
    path: &str,
    timeouts: Timeouts,
    message: String,
) -> String {
    match client.notify(false, &message, timeouts.notify).await {
        Ok(()) => message,
        Err(e) => format!(
            "RegisterPlugin error -- failed to send error at socket {path}, err: {message}: {e}"
        ),
    }
}
