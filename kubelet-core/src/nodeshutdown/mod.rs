//! Graceful node shutdown (Go's `pkg/kubelet/nodeshutdown`): when the host begins to shut
//! down, stop the pods in priority order within their share of `shutdownGracePeriod`,
//! before the host kills them.
//!
//! The host side is a [`ShutdownInhibitor`] (logind's delay inhibitor lock and its
//! `PrepareForShutdown` signal, in `kubelet-cm`); the decisions are here.
//!
//! ```text
//!            start(period) ok, lock held
//!   ┌──────────┐ ──────────────────────────► ┌─────────┐  next_event = true   ┌──────────────┐
//!   │ Starting │                              │ Waiting │ ───────────────────► │ ShuttingDown │
//!   └──────────┘                              └─────────┘ ◄─────────────────── └──────────────┘
//!        │ start failed: logged, the manager     ▲    next_event = false: lock taken again
//!        ▼ stays off (Go: not fatal)             └─ (a cancelled shutdown)
//! ```
//! - **Starting**: the manager is off unless `shutdownGracePeriod` (or
//!   `shutdownGracePeriodByPodPriority`) gives it groups ([`ShutdownConfig::groups`]). The
//!   inhibitor makes logind allow the whole period, takes the lock and starts watching.
//! - **ShuttingDown**: [`ShutdownState`] says so: the node's Ready condition turns false
//!   ("node is shutting down") and new pods are refused (`NodeShutdown`). Each non-empty
//!   group, lowest priority first, is stopped at once: every pod killed with its group's
//!   period (or its own shorter `terminationGracePeriodSeconds`) and failed with reason
//!   `Terminated`, then the manager waits until they are stopped or the group's period is
//!   over. Then the lock is released and the host goes down.
//! - A `false` signal (shutdown cancelled) clears the state and takes the lock again.
//!
//! Only the manager's task calls the inhibitor; the state is read by anyone.

pub mod groups;
pub(crate) mod manager;

use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::contracts::shutdown::{ShutdownError, ShutdownInhibitor};
pub use groups::{PriorityGracePeriod, ShutdownConfig};

/// The status reason of a pod stopped for the shutdown (Go's `nodeShutdownReason`).
pub const REASON: &str = "Terminated";
/// Its status message (Go's `nodeShutdownMessage`).
pub const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// The reason a pod is refused while the node shuts down (Go's
/// `nodeShutdownNotAdmittedReason`).
pub const NOT_ADMITTED_REASON: &str = "NodeShutdown";
/// Its message (Go's `nodeShutdownNotAdmittedMessage`).
pub const NOT_ADMITTED_MESSAGE: &str = "Pod was rejected as the node is shutting down.";
/// What the node's Ready condition says meanwhile (Go's `ShutdownStatus` error).
pub const NOT_READY_MESSAGE: &str = "node is shutting down";

/// Whether the node is shutting down, shared by the manager (which sets it), admission and
/// the node status.
#[derive(Debug, Default)]
pub struct ShutdownState {
    shutting_down: AtomicBool,
}

impl ShutdownState {
    /// True between a shutdown signal and its cancellation.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, shutting_down: bool) {
        self.shutting_down.store(shutting_down, Ordering::Relaxed);
    }
}

/// Refuses pods while the node shuts down (Go's shutdown manager `Admit`).
#[derive(Debug)]
pub struct ShutdownAdmitHandler {
    state: std::sync::Arc<ShutdownState>,
}

impl ShutdownAdmitHandler {
    /// A handler reading `state`.
    pub fn new(state: std::sync::Arc<ShutdownState>) -> Self {
        ShutdownAdmitHandler { state }
    }
}

impl crate::admission::AdmitHandler for ShutdownAdmitHandler {
    fn admit(&self, _attrs: &crate::admission::AdmitAttributes<'_>) -> crate::AdmitResult {
        if self.state.is_shutting_down() {
            crate::AdmitResult::Reject {
                reason: NOT_ADMITTED_REASON.into(),
                message: NOT_ADMITTED_MESSAGE.into(),
            }
        } else {
            crate::AdmitResult::Admit
        }
    }
}
