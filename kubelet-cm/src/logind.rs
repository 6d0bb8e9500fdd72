//! The host side of graceful node shutdown: systemd-logind over D-Bus (Go's
//! `nodeshutdown/systemd`), a [`ShutdownInhibitor`].
//!
//! - [`start`](ShutdownInhibitor::start): reads logind's `InhibitDelayMaxUSec`; when it is
//!   below the period the kubelet needs, writes `<logind.conf.d>/99-kubelet.conf` with
//!   `InhibitDelayMaxSec=<period>` and makes logind reload (systemd's `KillUnit` of
//!   `systemd-logind.service` with `SIGHUP`), then checks the new value (Go's error when it
//!   is still lower). Then it subscribes to `PrepareForShutdown` and takes a `delay`
//!   inhibitor lock for `shutdown` (`Inhibit`, which hands back a file descriptor).
//! - [`release`](ShutdownInhibitor::release) closes that descriptor: logind goes on with the
//!   shutdown. [`acquire`](ShutdownInhibitor::acquire) takes a new one.
//! - When the bus connection ends (D-Bus restarted), [`next_event`](ShutdownInhibitor::next_event)
//!   connects again every second, as Go does, and watches and takes the lock anew.
//!
//! Every call is bounded by the timeout given; the signal watch is not (it waits for the
//! host).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use kubelet_core::nodeshutdown::{ShutdownError, ShutdownInhibitor};
use zbus::zvariant::{OwnedFd, OwnedValue};
use zbus::{Connection, MatchRule, MessageStream};

const LOGIND: &str = "org.freedesktop.login1";
const LOGIND_PATH: &str = "/org/freedesktop/login1";
const LOGIND_MANAGER: &str = "org.freedesktop.login1.Manager";

/// Where Go writes its logind override.
pub const LOGIND_CONF_DIR: &str = "/etc/systemd/logind.conf.d";
/// The override's file name (Go's).
pub const LOGIND_CONF_FILE: &str = "99-kubelet.conf";

/// How long [`LogindInhibitor::start`] waits for logind to take a raised delay after the
/// reload (logind rereads its configuration asynchronously).
const RELOAD_WAIT: Duration = Duration::from_secs(3);

/// How often a lost connection to logind is tried again (Go's `dbusReconnectPeriod`).
const RECONNECT_PERIOD: Duration = Duration::from_secs(1);

/// systemd-logind on a D-Bus bus.
pub struct LogindInhibitor {
    address: String,
    timeout: Duration,
    conf_dir: PathBuf,
    conn: tokio::sync::Mutex<Option<Connection>>,
    signals: tokio::sync::Mutex<Option<MessageStream>>,
    lock: std::sync::Mutex<Option<OwnedFd>>,
    started: AtomicBool,
}

impl std::fmt::Debug for LogindInhibitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogindInhibitor")
            .field("address", &self.address)
            .field("conf_dir", &self.conf_dir)
            .finish_non_exhaustive()
    }
}

impl LogindInhibitor {
    /// An inhibitor talking to the bus at `address` (normally the system bus, see
    /// [`crate::cgroups::systemd::dbus_client::DbusSystemd::system_bus_address`]) with each
    /// call bounded by `timeout`, writing its override into `conf_dir` (normally
    /// [`LOGIND_CONF_DIR`]). Nothing is connected until [`start`](ShutdownInhibitor::start).
    pub fn new(address: &str, timeout: Duration, conf_dir: PathBuf) -> Self {
        LogindInhibitor {
            address: address.to_string(),
            timeout,
            conf_dir,
            conn: tokio::sync::Mutex::new(None),
            signals: tokio::sync::Mutex::new(None),
            lock: std::sync::Mutex::new(None),
            started: AtomicBool::new(false),
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = zbus::Result<T>>,
    ) -> Result<T, ShutdownError> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(ShutdownError::Failed(format!("{what}: {e}"))),
            Err(_) => Err(ShutdownError::Failed(format!(
                "{what}: no answer within {} s",
                self.timeout.as_secs()
            ))),
        }
    }

    async fn connection(&self) -> Result<Connection, ShutdownError> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let address = self.address.clone();
        let timeout = self.timeout;
        let conn = tokio::time::timeout(timeout, async move {
            zbus::connection::Builder::address(address.as_str())?
                .method_timeout(timeout)
                .build()
                .await
        })
        .await
        .map_err(|_| {
            ShutdownError::Unavailable(format!(
                "connecting to the system bus ({}) timed out",
                self.address
            ))
        })?
        .map_err(|e| {
            ShutdownError::Unavailable(format!(
                "connecting to the system bus ({}) failed: {e}",
                self.address
            ))
        })?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    /// logind's `InhibitDelayMaxUSec`.
    async fn current_delay(&self, conn: &Connection) -> Result<Duration, ShutdownError> {
        let reply = self
            .bounded(
                "failed reading InhibitDelayMaxUSec property from logind",
                conn.call_method(
                    Some(LOGIND),
                    LOGIND_PATH,
                    Some("org.freedesktop.DBus.Properties"),
                    "Get",
                    &(LOGIND_MANAGER, "InhibitDelayMaxUSec"),
                ),
            )
            .await?;
        let value: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| ShutdownError::Failed(format!("InhibitDelayMaxUSec from logind: {e}")))?;
        let usec = u64::try_from(value).map_err(|_| {
            ShutdownError::Failed(
                "InhibitDelayMaxUSec from logind is not a uint64 as expected".into(),
            )
        })?;
        Ok(Duration::from_micros(usec))
    }

    /// Go's `OverrideInhibitDelay` and `ReloadLogindConf`.
    async fn raise_delay(&self, conn: &Connection, period: Duration) -> Result<(), ShutdownError> {
        let dir = self.conf_dir.clone();
        let text = format!(
            "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec={}\n",
            period.as_secs()
        );
        let path = dir.join(LOGIND_CONF_FILE);
        let written = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&path, text)
        })
        .await
        .map_err(|e| ShutdownError::Failed(format!("writing the logind override: {e}")))?;
        written.map_err(|e| {
            ShutdownError::Failed(format!(
                "unable to override inhibit delay by shutdown manager: failed writing logind shutdown inhibit override file {}: {e}",
                self.conf_dir.join(LOGIND_CONF_FILE).display()
            ))
        })?;
        self.bounded(
            "unable to reload logind conf",
            conn.call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.systemd1.Manager"),
                "KillUnit",
                &("systemd-logind.service", "all", 1i32),
            ),
        )
        .await?;
        Ok(())
    }

    /// Subscribes to `PrepareForShutdown`, then takes the delay lock.
    async fn watch_and_lock(&self, conn: &Connection) -> Result<(), ShutdownError> {
        let rule = MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .interface(LOGIND_MANAGER)
            .and_then(|b| b.member("PrepareForShutdown"))
            .and_then(|b| b.path(LOGIND_PATH))
            .map_err(|e| ShutdownError::Failed(format!("watching PrepareForShutdown: {e}")))?
            .build();
        let stream = self
            .bounded(
                "watching PrepareForShutdown",
                MessageStream::for_match_rule(rule, conn, Some(16)),
            )
            .await?;
        *self.signals.lock().await = Some(stream);
        self.inhibit(conn).await
    }

    async fn inhibit(&self, conn: &Connection) -> Result<(), ShutdownError> {
        let reply = self
            .bounded(
                "failed creating systemd inhibitor",
                conn.call_method(
                    Some(LOGIND),
                    LOGIND_PATH,
                    Some(LOGIND_MANAGER),
                    "Inhibit",
                    &(
                        "shutdown",
                        "kubelet",
                        "Kubelet needs time to handle node shutdown",
                        "delay",
                    ),
                ),
            )
            .await?;
        let fd: OwnedFd = reply.body().deserialize().map_err(|e| {
            ShutdownError::Failed(format!("failed storing inhibit lock file descriptor: {e}"))
        })?;
        if let Ok(mut slot) = self.lock.lock() {
            *slot = Some(fd);
        }
        Ok(())
    }
}

#[async_trait]
impl ShutdownInhibitor for LogindInhibitor {
    async fn start(&self, period: Duration) -> Result<(), ShutdownError> {
        let conn = self.connection().await?;
        let current = self.current_delay(&conn).await?;
        if period > current {
            self.raise_delay(&conn, period).await?;
            let deadline = tokio::time::Instant::now() + RELOAD_WAIT;
            let mut updated = self.current_delay(&conn).await?;
            while updated < period && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                updated = self.current_delay(&conn).await?;
            }
            if updated < period {
                return Err(ShutdownError::InhibitDelay {
                    requested: period,
                    current: updated,
                });
            }
            tracing::info!(
                seconds = period.as_secs(),
                "raised logind's InhibitDelayMaxSec"
            );
        }
        self.watch_and_lock(&conn).await?;
        self.started.store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn next_event(&self) -> Option<bool> {
        if !self.started.load(Ordering::Relaxed) {
            return None;
        }
        loop {
            {
                let mut guard = self.signals.lock().await;
                if let Some(stream) = guard.as_mut() {
                    while let Some(msg) = stream.next().await {
                        let msg = match msg {
                            Ok(m) => m,
                            Err(e) => {
                                tracing::warn!(error = %e, "reading logind's signals failed");
                                continue;
                            }
                        };
                        match msg.body().deserialize::<bool>() {
                            Ok(active) => return Some(active),
                            Err(e) => {
                                tracing::error!(error = %e, "Failed obtaining shutdown event, PrepareForShutdown event was not bool type as expected")
                            }
                        }
                    }
                }
                *guard = None;
            }
            // The bus went away (D-Bus restarted): as Go, connect again every second, then
            // watch and take the lock again.
            *self.conn.lock().await = None;
            tracing::warn!("the connection to logind ended; reconnecting");
            loop {
                tokio::time::sleep(RECONNECT_PERIOD).await;
                let reconnected = match self.connection().await {
                    Ok(conn) => self.watch_and_lock(&conn).await,
                    Err(e) => Err(e),
                };
                match reconnected {
                    Ok(()) => {
                        tracing::info!("reconnected to logind; inhibitor lock taken again");
                        break;
                    }
                    Err(e) => {
                        *self.conn.lock().await = None;
                        tracing::debug!(error = %e, "reconnecting to logind failed");
                    }
                }
            }
        }
    }

    async fn acquire(&self) -> Result<(), ShutdownError> {
        let conn = self.connection().await?;
        self.inhibit(&conn).await
    }

    async fn release(&self) -> Result<(), ShutdownError> {
        let fd = self
            .lock
            .lock()
            .map_err(|_| ShutdownError::Failed("inhibitor lock slot poisoned".into()))?
            .take();
        // Closing the descriptor releases logind's lock.
        drop(fd);
        Ok(())
    }
}
