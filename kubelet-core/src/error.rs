//! The engine's error type.

use crate::runtime::RuntimeError;

/// Errors from building or running the kubelet engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required part was not given to the builder.
    #[error("kubelet builder: {0} is required")]
    MissingComponent(&'static str),
    /// The configuration is invalid.
    #[error("invalid kubelet configuration: {field}: {message}")]
    InvalidConfig {
        /// The field that is wrong.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The CPU manager cannot start (its state file, Go's message).
    #[error("start cpu manager error: {0}")]
    CpuManager(Box<crate::cpumanager::CpuManagerError>),
    /// The memory manager cannot start (its state file, Go's message).
    #[error("start memory manager error: {0}")]
    MemoryManager(Box<crate::memorymanager::MemoryManagerError>),
    /// The device plugin registry cannot serve (Go: "failed to start device plugin manager").
    #[error("failed to start device plugin manager: {0}")]
    DevicePlugins(#[from] crate::devices::DevicePluginError),
    /// The container runtime failed at start-up.
    #[error("container runtime: {error}")]
    Runtime {
        /// The runtime's error.
        error: RuntimeError,
    },
}

impl From<crate::cpumanager::CpuManagerError> for Error {
    fn from(error: crate::cpumanager::CpuManagerError) -> Self {
        Error::CpuManager(Box::new(error))
    }
}

impl From<crate::memorymanager::MemoryManagerError> for Error {
    fn from(error: crate::memorymanager::MemoryManagerError) -> Self {
        Error::MemoryManager(Box::new(error))
    }
}

impl From<RuntimeError> for Error {
    fn from(error: RuntimeError) -> Self {
        Error::Runtime { error }
    }
}

/// Result alias for engine operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An error and its causes on one line, `outer: cause: root`, each text once (a cause whose
/// text the line already holds is left out; at most 16 causes). For the third-party errors
/// (kube, reqwest, hyper) whose `Display` leaves their cause out, so that a message printing
/// one names the root cause ("Connection refused", "UnknownIssuer") without a source chain.
pub fn display_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    for _ in 0..16 {
        let Some(c) = cause else { break };
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::display_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Leaf(&'static str);

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Wrap {
        text: &'static str,
        #[source]
        inner: Box<dyn std::error::Error + Send + Sync>,
    }

    #[test]
    fn every_cause_once() {
        let root = Leaf("Connection refused");
        let mid = Wrap {
            text: "client error (Connect)",
            inner: Box::new(root),
        };
        let top = Wrap {
            text: "error sending request",
            inner: Box::new(mid),
        };
        assert_eq!(
            display_chain(&top),
            "error sending request: client error (Connect): Connection refused"
        );
        // A cause the outer text already shows is not repeated.
        let shown = Wrap {
            text: "reading x: Connection refused",
            inner: Box::new(Leaf("Connection refused")),
        };
        assert_eq!(display_chain(&shown), "reading x: Connection refused");
    }
}
