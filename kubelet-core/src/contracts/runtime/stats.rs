//! Resource usage a runtime measures: per-container CPU, memory and writable layer (CRI
//! `ContainerStats`/`ListContainerStats`) and the image filesystem (CRI `ImageFsInfo`).
//!
//! Values the runtime did not report are `None` (CRI's unset `UInt64Value`), distinct from a
//! measured 0. Timestamps are nanoseconds since the Unix epoch, as the runtime took them.

use super::PodRef;

/// CPU usage of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuUsage {
    /// When it was measured.
    pub timestamp: i64,
    /// Cumulative CPU time over all cores since the container was created, in ns.
    pub usage_core_nano_seconds: Option<u64>,
    /// Usage averaged over the runtime's sample window, in core-nanoseconds per second.
    pub usage_nano_cores: Option<u64>,
}

/// Memory usage of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryUsage {
    /// When it was measured.
    pub timestamp: i64,
    /// Working set: usage minus inactive file pages (what eviction and OOM look at).
    pub working_set_bytes: Option<u64>,
    /// Memory limit minus the working set.
    pub available_bytes: Option<u64>,
    /// All memory in use, whenever it was last accessed.
    pub usage_bytes: Option<u64>,
    /// Anonymous and swap cache memory.
    pub rss_bytes: Option<u64>,
    /// Cumulative minor page faults.
    pub page_faults: Option<u64>,
    /// Cumulative major page faults.
    pub major_page_faults: Option<u64>,
}

/// Usage of one filesystem (a container's writable layer, or the image filesystem).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilesystemUsage {
    /// When it was measured.
    pub timestamp: i64,
    /// Mount point of the filesystem, e.g.
    /// `/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs`.
    pub mountpoint: String,
    /// Bytes used by what is measured (may be less than the filesystem's total use).
    pub used_bytes: Option<u64>,
    /// Inodes used by what is measured.
    pub inodes_used: Option<u64>,
}

/// Resource usage of one container, from [`ContainerRuntime::container_stats`](super::ContainerRuntime::container_stats).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerStats {
    /// Runtime id of the container.
    pub container_id: String,
    /// The pod it belongs to (empty when the container carries no kubelet labels).
    pub pod: PodRef,
    /// The container's name in the pod spec.
    pub name: String,
    /// Restart count at creation.
    pub attempt: u32,
    /// CPU usage, when measured.
    pub cpu: Option<CpuUsage>,
    /// Memory usage, when measured.
    pub memory: Option<MemoryUsage>,
    /// Usage of the container's writable layer, when measured.
    pub writable_layer: Option<FilesystemUsage>,
}

/// The filesystems a runtime stores images (and, when separate, container layers) on, from
/// [`ContainerRuntime::image_fs_info`](super::ContainerRuntime::image_fs_info).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageFsInfo {
    /// Where images live, with the bytes and inodes they use.
    pub image_filesystems: Vec<FilesystemUsage>,
    /// Where container writable layers live, when not on the image filesystem (empty
    /// otherwise, and from runtimes that predate the field).
    pub container_filesystems: Vec<FilesystemUsage>,
}
