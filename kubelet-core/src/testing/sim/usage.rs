//! The simulator's measurements: per-container CPU, memory and writable-layer usage from
//! simulated rates, and its image filesystem.

use crate::runtime::{
    ContainerConfig, ContainerState, ContainerStats, CpuUsage, FilesystemUsage, ImageFsInfo,
    ImageInfo, MemoryUsage,
};

use super::SimContainer;

/// Size every simulated image has.
pub(super) const IMAGE_BYTES: u64 = 1 << 20;
/// Mount point of the simulated image filesystem.
pub(super) const IMAGE_FS: &str = "/var/lib/kubelet-rs-sim/images";
/// Mount point of the simulated container writable layers.
pub(super) const LAYER_FS: &str = "/var/lib/kubelet-rs-sim/containers";

/// What a simulated container uses while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Usage {
    /// CPU it burns, in millicores.
    pub milli_cpu: u64,
    /// Its working set, in bytes.
    pub memory_bytes: u64,
    /// What it wrote to its writable layer, in bytes.
    pub disk_bytes: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            milli_cpu: 10,
            memory_bytes: 8 << 20,
            disk_bytes: 4 << 10,
        }
    }
}

impl Usage {
    /// The defaults, overridden by `SIM_CPU_MILLICORES`, `SIM_MEMORY_BYTES` and
    /// `SIM_DISK_BYTES` in the container's environment.
    pub fn from_env(config: &ContainerConfig) -> Usage {
        let mut u = Usage::default();
        for e in &config.env {
            let slot = match e.name.as_str() {
                "SIM_CPU_MILLICORES" => &mut u.milli_cpu,
                "SIM_MEMORY_BYTES" => &mut u.memory_bytes,
                "SIM_DISK_BYTES" => &mut u.disk_bytes,
                _ => continue,
            };
            if let Ok(v) = e.value.parse() {
                *slot = v;
            }
        }
        u
    }
}

/// Stats of `c` at `now`: CPU time at its rate over the time it ran, its working set while
/// it runs (an exited container has no cgroup left to measure, as with containerd), and its
/// writable layer as long as it exists.
pub(super) fn container_stats(c: &SimContainer, now: i64) -> ContainerStats {
    let s = &c.status;
    let running = s.summary.state == ContainerState::Running;
    let ran_until = if running { now } else { s.finished_at };
    let ran_ns = if s.started_at > 0 {
        u64::try_from(ran_until.saturating_sub(s.started_at)).unwrap_or(0)
    } else {
        0
    };
    let cpu_ns = u64::try_from(u128::from(ran_ns) * u128::from(c.usage.milli_cpu) / 1000)
        .unwrap_or(u64::MAX);
    ContainerStats {
        container_id: s.summary.id.clone(),
        pod: s.summary.pod.clone(),
        name: s.summary.name.clone(),
        attempt: s.summary.attempt,
        cpu: running.then_some(CpuUsage {
            timestamp: now,
            usage_core_nano_seconds: Some(cpu_ns),
            usage_nano_cores: Some(c.usage.milli_cpu.saturating_mul(1_000_000)),
        }),
        memory: running.then_some(MemoryUsage {
            timestamp: now,
            working_set_bytes: Some(c.usage.memory_bytes),
            usage_bytes: Some(c.usage.memory_bytes),
            rss_bytes: Some(c.usage.memory_bytes),
            page_faults: Some(0),
            major_page_faults: Some(0),
            available_bytes: None,
        }),
        writable_layer: Some(FilesystemUsage {
            timestamp: now,
            mountpoint: LAYER_FS.to_string(),
            used_bytes: Some(c.usage.disk_bytes),
            inodes_used: Some(1),
        }),
    }
}

/// The image filesystem holding `images`.
pub(super) fn image_fs<'a>(images: impl Iterator<Item = &'a ImageInfo>, now: i64) -> ImageFsInfo {
    let (count, bytes) = images.fold((0u64, 0u64), |(n, b), i| {
        (n + 1, b.saturating_add(i.size_bytes))
    });
    ImageFsInfo {
        image_filesystems: vec![FilesystemUsage {
            timestamp: now,
            mountpoint: IMAGE_FS.to_string(),
            used_bytes: Some(bytes),
            inodes_used: Some(count),
        }],
        container_filesystems: Vec::new(),
    }
}
