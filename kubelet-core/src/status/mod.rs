//! Pod status: generating it ([`generate`]) and publishing changes ([`manager`]).

pub mod generate;
pub mod manager;
pub mod readiness;

pub use generate::{generate, is_terminal, StatusInputs, WaitingReason};
pub use manager::StatusManager;
