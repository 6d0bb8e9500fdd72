//! Shared helpers for the integration tests.

pub mod cluster;
pub mod cri;
pub mod engine;
pub mod images;
pub mod registry;
pub mod scoped_runtime;
pub mod scripts;
pub mod seed_node;
pub mod small_fs;
pub mod standalone;
