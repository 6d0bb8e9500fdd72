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
    /// The container runtime failed at start-up.
    #[error("container runtime: {error}")]
    Runtime {
        /// The runtime's error.
        error: RuntimeError,
    },
}

impl From<RuntimeError> for Error {
    fn from(error: RuntimeError) -> Self {
        Error::Runtime { error }
    }
}

/// Result alias for engine operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
