//! [`ShutdownInhibitor`]: how the kubelet learns that the host is shutting down and holds the
//! shutdown back while it stops pods (Go's `nodeshutdown/systemd`: a logind delay inhibitor
//! lock and the `PrepareForShutdown` signal). `kubelet-cm` implements it over D-Bus; the
//! graceful node shutdown manager ([`crate::nodeshutdown`]) decides what happens.

use std::time::Duration;

use async_trait::async_trait;

/// Why the inhibitor could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShutdownError {
    /// The host's login manager cannot be reached (no system bus, no logind).
    #[error("{0}")]
    Unavailable(String),
    /// logind's `InhibitDelayMaxUSec` stays below the requested period after the override
    /// (Go's message).
    #[error("node shutdown manager was unable to update logind InhibitDelayMaxSec to {}s (ShutdownGracePeriod), current value of InhibitDelayMaxSec ({}s) is less than requested ShutdownGracePeriod", requested.as_secs(), current.as_secs())]
    InhibitDelay {
        /// The period the kubelet needs.
        requested: Duration,
        /// What logind allows.
        current: Duration,
    },
    /// Taking or releasing the inhibitor lock, or overriding logind's configuration, failed.
    #[error("{0}")]
    Failed(String),
}

/// The host side of graceful node shutdown. Calls come from one task, in this order:
/// [`start`](Self::start) once, then [`next_event`](Self::next_event) in a loop, with
/// [`release`](Self::release) after a shutdown was handled and [`acquire`](Self::acquire)
/// after one was cancelled.
#[async_trait]
pub trait ShutdownInhibitor: Send + Sync {
    /// Makes sure the host lets the kubelet delay shutdown by `period` (raising logind's
    /// `InhibitDelayMaxSec` the way Go does when it is lower), takes the delay lock and starts
    /// watching for shutdown.
    async fn start(&self, period: Duration) -> Result<(), ShutdownError>;
    /// The next shutdown signal: `true` when shutdown begins, `false` when a pending one was
    /// cancelled; `None` when no more can come (the watch ended).
    async fn next_event(&self) -> Option<bool>;
    /// Takes the delay lock again (after a cancelled shutdown).
    async fn acquire(&self) -> Result<(), ShutdownError>;
    /// Releases the delay lock: the shutdown proceeds.
    async fn release(&self) -> Result<(), ShutdownError>;
}
