//! [`MachineInfo`]: what the node is made of, as cAdvisor reports it to the Go kubelet. Read
//! once at start by the stats provider; node status (`nodeInfo`, capacity), `/spec/` and the
//! summary's node start time read it from there.

/// One logical CPU and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    /// Logical CPU id.
    pub cpu: u32,
    /// Core id within the socket.
    pub core: u32,
    /// Socket (physical package) id.
    pub socket: u32,
    /// NUMA node id (0 on machines without NUMA information).
    pub numa_node: u32,
}

/// Huge pages of one size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugePages {
    /// Page size in KiB (2048 for 2Mi pages).
    pub page_size_kb: u64,
    /// Number of pages reserved (`nr_hugepages`).
    pub num_pages: u64,
}

impl HugePages {
    /// Total bytes reserved in pages of this size.
    pub fn total_bytes(&self) -> u64 {
        self.page_size_kb
            .saturating_mul(1024)
            .saturating_mul(self.num_pages)
    }
}

/// What the node is made of. [`Default`] is an empty description (nothing known).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MachineInfo {
    /// Number of online logical CPUs.
    pub num_cores: u32,
    /// Number of distinct physical cores.
    pub num_physical_cores: u32,
    /// Number of sockets.
    pub num_sockets: u32,
    /// Per-CPU topology, sorted by CPU id.
    pub topology: Vec<CpuTopology>,
    /// Total memory in bytes (`MemTotal`).
    pub memory_capacity: u64,
    /// Huge pages per page size, sorted by size.
    pub hugepages: Vec<HugePages>,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot_id: String,
    /// `/etc/machine-id` (or `/var/lib/dbus/machine-id`); empty when neither exists.
    pub machine_id: String,
    /// `/sys/class/dmi/id/product_uuid`; empty when absent or unreadable.
    pub system_uuid: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_version: String,
    /// `PRETTY_NAME` from `/etc/os-release` (`"Linux"` if absent, as cAdvisor).
    pub os_image: String,
    /// `/proc/sys/kernel/pid_max`.
    pub max_pids: u64,
    /// Size in bytes of the filesystem holding the kubelet root dir.
    pub ephemeral_storage_capacity: u64,
    /// Inodes of the filesystem holding the kubelet root dir.
    pub ephemeral_storage_inodes: u64,
    /// When the machine booted, seconds since the Unix epoch (`btime` of `/proc/stat`; 0
    /// when unknown). The summary's node `startTime`.
    pub boot_time_seconds: i64,
}
