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
    /// The Kubernetes resource name of this page size, as Go's `BinarySI` quantity prints
    /// it: `hugepages-2Mi`, `hugepages-1Gi`.
    pub fn resource_name(&self) -> String {
        const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        let mut m = self.page_size_kb;
        let mut i = 1;
        if m == 0 {
            return "hugepages-0".to_string();
        }
        while i < SUFFIXES.len() - 1 && m % 1024 == 0 {
            m /= 1024;
            i += 1;
        }
        format!("hugepages-{m}{}", SUFFIXES[i])
    }

    /// Total bytes reserved in pages of this size.
    pub fn total_bytes(&self) -> u64 {
        self.page_size_kb
            .saturating_mul(1024)
            .saturating_mul(self.num_pages)
    }
}

/// The memory of one NUMA node (cAdvisor's `Node.Memory` and `Node.HugePages`), what the
/// memory manager divides.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NumaMemory {
    /// The NUMA node id.
    pub node: u32,
    /// Its memory in bytes (`MemTotal` of `/sys/devices/system/node/node<N>/meminfo`).
    pub memory_bytes: u64,
    /// Its huge page pools, sorted by size.
    pub hugepages: Vec<HugePages>,
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
    /// Memory per NUMA node, sorted by node (empty on kernels without NUMA information).
    pub numa_memory: Vec<NumaMemory>,
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
