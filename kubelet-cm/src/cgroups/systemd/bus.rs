//! The part of systemd's manager API (`org.freedesktop.systemd1.Manager`) the systemd cgroup
//! driver calls, as a trait so the driver's decisions are tested without a bus.

use std::fmt;

use super::properties::UnitProperty;

/// Errors from calls to systemd.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BusError {
    /// No connection to systemd could be made.
    #[error("connecting to systemd over D-Bus ({address}) failed: {message}")]
    Connect {
        /// The bus address tried.
        address: String,
        /// Why it failed.
        message: String,
    },
    /// systemd answered a call with an error.
    #[error("systemd {method}({unit}) failed: {name}: {message}")]
    Call {
        /// The method, e.g. `StartTransientUnit`.
        method: &'static str,
        /// The unit it was about.
        unit: String,
        /// The D-Bus error name, e.g. `org.freedesktop.systemd1.NoSuchUnit`.
        name: String,
        /// systemd's message.
        message: String,
    },
    /// A call or the job it started did not finish in time.
    #[error("systemd {method}({unit}) did not finish within {seconds} s")]
    Timeout {
        /// The method.
        method: &'static str,
        /// The unit.
        unit: String,
        /// The limit.
        seconds: u64,
    },
    /// The job a call queued finished with a result other than `done`.
    #[error("systemd job for {unit} ended {result:?}")]
    Job {
        /// The unit.
        unit: String,
        /// systemd's job result (`failed`, `canceled`, `timeout`, `dependency`, …).
        result: String,
    },
}

/// D-Bus error name of `StartTransientUnit` for a unit that is already loaded.
pub const UNIT_EXISTS: &str = "org.freedesktop.systemd1.UnitExists";
/// D-Bus error name for a unit systemd does not know.
pub const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";

impl BusError {
    /// The D-Bus error name, if systemd answered with one.
    pub fn error_name(&self) -> Option<&str> {
        match self {
            BusError::Call { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Calls on systemd's manager. Blocking: the cgroup manager runs on blocking threads.
pub trait SystemdBus: Send + Sync + fmt::Debug {
    /// systemd's `Version` property (e.g. `252.30-1~deb12u2`).
    fn version(&self) -> Result<String, BusError>;
    /// `StartTransientUnit(unit, "replace", properties)` and waits for its job.
    fn start_transient_unit(&self, unit: &str, properties: &[UnitProperty])
        -> Result<(), BusError>;
    /// `SetUnitProperties(unit, runtime = true, properties)`.
    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), BusError>;
    /// `StopUnit(unit, "replace")` and waits for its job.
    fn stop_unit(&self, unit: &str) -> Result<(), BusError>;
    /// `ResetFailedUnit(unit)`.
    fn reset_failed_unit(&self, unit: &str) -> Result<(), BusError>;
}
