//! Shared helpers for the integration tests.

pub mod cri;
pub mod engine;
