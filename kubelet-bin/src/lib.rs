//! # kubelet-bin (library part)
//!
//! The command line ([`flags`]) and the `KubeletConfiguration` file ([`config`]) of the
//! kubelet-rs binary, merged with the Go kubelet's precedence: flags given on the command line
//! override the `--config` file and its drop-in directory, which override the defaults;
//! feature gates checked as Go checks them ([`feature_gates`]); and the composition of the
//! stock kubelet ([`app`]) from the library crates, with its certificates and registry
//! credentials ([`certificates`]). [`heap_trim`] keeps the process's own heap small (glibc's
//! free pages given back, one arena), and [`async_runtime`] its idle threads few.
//!
//! ```no_run
//! # fn main() -> Result<(), kubelet_bin::config::ConfigError> {
//! let loaded = kubelet_bin::config::load(std::env::args_os())?;
//! for warning in &loaded.warnings {
//!     eprintln!("warning: {warning}");
//! }
//! let engine = loaded.engine_config();
//! println!("node {} syncs every {:?}", engine.node_name, engine.sync_frequency);
//! # Ok(())
//! # }
//! ```

pub mod app;
pub mod async_runtime;
pub mod certificates;
pub mod config;
pub mod feature_gates;
pub mod flags;
pub mod go_flags;
pub mod heap_trim;
pub mod json_log;
pub mod lock_file;
pub mod logging;
pub mod node_address;
pub mod server;
pub mod telemetry;
