//! The crate's error type.

use std::path::PathBuf;

use crate::cgroups::CgroupError;

/// Errors from reading machine info, validating configuration and setting up cgroups.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("reading {path} failed: {error}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A file was read but its contents made no sense.
    #[error("parsing {path} failed: {message}")]
    ParseFile {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// `statvfs` of the kubelet root dir failed.
    #[error("statvfs of {path} failed: {error}")]
    StatFs {
        /// The path whose filesystem was queried.
        path: PathBuf,
        /// The errno.
        error: std::io::Error,
    },
    /// Swap is on and `failSwapOn` is true (Go's message, verbatim).
    #[error("running with swap on is not supported, please disable swap! or set --fail-swap-on flag to false. /proc/swaps contained: [{}]", lines.join(" "))]
    SwapOn {
        /// The lines of /proc/swaps (header included), trimmed.
        lines: Vec<String>,
    },
    /// A resource quantity in the configuration does not parse.
    #[error("invalid quantity {value:?} for {field}: {reason}")]
    InvalidQuantity {
        /// Which setting, e.g. `kubeReserved[memory]`.
        field: String,
        /// The text given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A hard eviction threshold does not parse or is out of range.
    #[error("invalid eviction threshold {signal}={value:?}: {reason}")]
    InvalidEvictionThreshold {
        /// The signal, e.g. `memory.available`.
        signal: String,
        /// The value given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// `reservedSystemCPUs` is not a valid cpuset list or names CPUs the machine lacks.
    #[error("invalid reservedSystemCPUs {value:?}: {reason}")]
    InvalidCpuSet {
        /// The text given.
        value: String,
        /// Why it is invalid.
        reason: String,
    },
    /// Some other configuration value is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// `cgroupDriver: systemd` on a host where systemd cannot be reached.
    #[error("cgroupDriver \"systemd\" needs systemd as the host's init system: {reason}")]
    SystemdUnavailable {
        /// What is missing or failed.
        reason: String,
    },
    /// A cgroup operation failed.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}
