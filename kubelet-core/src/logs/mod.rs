//! Container logs on the node (Go's `pkg/kubelet/logs` and the log half of
//! `kuberuntime_gc.go`): `rotation` keeps every running container's log within
//! `containerLogMaxSize` × `containerLogMaxFiles` by rotating it through the runtime's
//! `ReopenContainerLog`, and `cleanup` removes the log directories of pods that are gone
//! and the dangling `/var/log/containers` symlinks.
//!
//! Both leave the node's files alone when the kubelet has no root dir (simulations).

pub(crate) mod cleanup;
pub(crate) mod rotation;

use std::time::Duration;

/// Container log rotation settings, with Go's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLogConfig {
    /// `containerLogMaxSize` in bytes (10Mi): a log at least this big is rotated; negative
    /// turns rotation off (as Go).
    pub max_size: i64,
    /// `containerLogMaxFiles` (5): the most log files of a container, the current one
    /// included; at least 2.
    pub max_files: usize,
    /// `containerLogMaxWorkers` (1): containers whose logs are rotated at once.
    pub max_workers: usize,
    /// `containerLogMonitorInterval` (10s): how often logs are checked.
    pub monitor_interval: Duration,
}

impl Default for ContainerLogConfig {
    fn default() -> Self {
        ContainerLogConfig {
            max_size: 10 << 20,
            max_files: 5,
            max_workers: 1,
            monitor_interval: Duration::from_secs(10),
        }
    }
}
