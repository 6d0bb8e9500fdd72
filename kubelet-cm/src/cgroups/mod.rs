//! Cgroup detection and the cgroupfs-driver [`CgroupManager`] for cgroup v1, v2 and hybrid
//! hosts.
//!
//! The mode is detected from `/proc/self/mountinfo`: a `cgroup2` mount at `/sys/fs/cgroup` is
//! v2 (unified); `cgroup` (v1) mounts with an extra `cgroup2` mount elsewhere (typically
//! `/sys/fs/cgroup/unified`) is hybrid; v1 mounts only is v1. In hybrid mode, as in Go's
//! kubelet (runc's `IsCgroup2UnifiedMode` is false there), resources are managed in the v1
//! hierarchies only; the unified mount is only cleaned up (runc creates container cgroups
//! there too).
//!
//! Cgroup names are cgroupfs paths relative to each hierarchy's mount point
//! (`/kubepods/burstable/pod<uid>`); every mount point is resolved under a `root` directory,
//! so the managers run against a plain temporary directory tree in tests.

pub mod systemd;
mod v1;
mod v2;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use procfs::process::MountInfos;
use procfs::FromRead;

pub use systemd::SystemdCgroupManager;
pub use v1::V1Manager;
pub use v2::{shares_to_weight, V2Manager};

/// Errors from cgroup detection and cgroup file IO.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `/proc/self/mountinfo` could not be read or parsed.
    #[error("reading mount table {path} failed: {message}")]
    MountInfo {
        /// The mountinfo file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// No cgroup filesystem is mounted.
    #[error("no cgroup filesystems are mounted (looked in {path})")]
    NoCgroupMounts {
        /// The mountinfo file.
        path: PathBuf,
    },
    /// A cgroup directory or control file could not be created, read or written.
    #[error("{op} {path} failed: {error}")]
    Io {
        /// What was attempted ("mkdir", "write", "read", "rmdir", …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A control file held something unexpected.
    #[error("parsing {path} failed: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The cgroup does not exist in (some of) the hierarchies that are required.
    #[error("cgroup {name} does not exist: missing {missing:?}")]
    Missing {
        /// The cgroupfs name.
        name: String,
        /// The missing directories.
        missing: Vec<PathBuf>,
    },
    /// The cgroup could not be removed because it still holds processes.
    #[error("cgroup {path} could not be removed, it still holds processes {pids:?}: {error}")]
    Busy {
        /// The directory.
        path: PathBuf,
        /// Processes found in it (and its descendants).
        pids: Vec<u32>,
        /// The last rmdir error.
        error: std::io::Error,
    },
    /// systemd refused or did not finish a call about the cgroup's unit.
    #[error("systemd unit {unit}: {error}")]
    Systemd {
        /// The unit, e.g. `kubepods-burstable.slice`.
        unit: String,
        /// What systemd said.
        error: systemd::bus::BusError,
    },
}

impl CgroupError {
    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> CgroupError {
        CgroupError::Io {
            op,
            path: path.to_path_buf(),
            error: source,
        }
    }
}

/// Which cgroup layout the host uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Only cgroup v1 hierarchies.
    V1,
    /// cgroup v1 hierarchies plus a cgroup2 mount that is not `/sys/fs/cgroup`.
    Hybrid,
    /// A single cgroup2 hierarchy at `/sys/fs/cgroup`.
    V2,
}

/// The cgroup mounts found on the host, with mount points resolved under the root path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMounts {
    /// The layout.
    pub mode: CgroupMode,
    /// v1 controller (or `name=systemd`) → mount point.
    pub v1: BTreeMap<String, PathBuf>,
    /// The cgroup2 mount point, if any (the hierarchy itself in V2 mode).
    pub unified: Option<PathBuf>,
}

/// Mount options of a v1 cgroup mount that are not controllers.
const NON_CONTROLLER_OPTIONS: [&str; 8] = [
    "rw",
    "ro",
    "noprefix",
    "clone_children",
    "xattr",
    "release_agent",
    "cpuset_v2_mode",
    "favordynmods",
];

/// Detects the cgroup layout from `<root>/proc/self/mountinfo`.
pub fn detect(root: &Path) -> Result<CgroupMounts, CgroupError> {
    let path = crate::host_root::under(root, "/proc/self/mountinfo");
    let infos = MountInfos::from_file(&path).map_err(|e| CgroupError::MountInfo {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let mut v1 = BTreeMap::new();
    let mut unified = None;
    let mut unified_is_main = false;
    for m in infos.0 {
        let mount_point = m.mount_point.to_string_lossy().into_owned();
        let resolved = crate::host_root::under(root, &mount_point);
        match m.fs_type.as_str() {
            "cgroup2" => {
                if mount_point == "/sys/fs/cgroup" {
                    unified_is_main = true;
                }
                if unified.is_none() || mount_point == "/sys/fs/cgroup" {
                    unified = Some(resolved);
                }
            }
            "cgroup" => {
                for (opt, val) in &m.super_options {
                    if opt == "name" {
                        if let Some(v) = val {
                            v1.entry(format!("name={v}")).or_insert(resolved.clone());
                        }
                        continue;
                    }
                    if NON_CONTROLLER_OPTIONS.contains(&opt.as_str()) || val.is_some() {
                        continue;
                    }
                    v1.entry(opt.clone()).or_insert(resolved.clone());
                }
            }
            _ => {}
        }
    }
    let mode = if unified_is_main {
        CgroupMode::V2
    } else if !v1.is_empty() && unified.is_some() {
        CgroupMode::Hybrid
    } else if !v1.is_empty() {
        CgroupMode::V1
    } else if unified.is_some() {
        // A lone cgroup2 mount somewhere else: treat it as the unified hierarchy.
        CgroupMode::V2
    } else {
        return Err(CgroupError::NoCgroupMounts { path });
    };
    if mode == CgroupMode::V2 {
        v1.clear();
    }
    Ok(CgroupMounts { mode, v1, unified })
}

/// A cgroup name: path components below the hierarchy root. The root cgroup has none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CgroupName(Vec<String>);

impl CgroupName {
    /// The root cgroup (`/`).
    pub fn root() -> CgroupName {
        CgroupName(Vec::new())
    }

    /// Parses a cgroupfs path (`"/kubepods/burstable"`, `"/"`, `""`).
    pub fn from_cgroupfs(path: &str) -> CgroupName {
        CgroupName(
            path.split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .map(str::to_string)
                .collect(),
        )
    }

    /// This name with one more component.
    pub fn child(&self, component: &str) -> CgroupName {
        let mut v = self.0.clone();
        v.push(component.to_string());
        CgroupName(v)
    }

    /// The components.
    pub fn components(&self) -> &[String] {
        &self.0
    }

    /// The cgroupfs path (`"/kubepods/burstable"`; `"/"` for the root).
    pub fn to_cgroupfs(&self) -> String {
        format!("/{}", self.0.join("/"))
    }

    /// The directory of this cgroup in a hierarchy mounted at `mount`.
    pub fn dir_in(&self, mount: &Path) -> PathBuf {
        let mut p = mount.to_path_buf();
        for c in &self.0 {
            p.push(c);
        }
        p
    }
}

impl fmt::Display for CgroupName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cgroupfs())
    }
}

/// Resource settings for a cgroup (Go's `ResourceConfig`); `None` leaves a setting untouched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// `cpu.shares` (v1) / converted to `cpu.weight` (v2).
    pub cpu_shares: Option<u64>,
    /// CFS quota in µs; `-1` is unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in µs.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes (`0` leaves the limit untouched, as runc; `-1` is unlimited).
    pub memory: Option<i64>,
    /// Process limit (`-1` is unlimited, `0` leaves it untouched, as runc).
    pub pids_limit: Option<i64>,
    /// Huge page limits: page size in bytes → limit in bytes.
    pub hugepage_limits: BTreeMap<u64, i64>,
}

/// Resource usage of a cgroup at one point in time (the core stats sample type).
pub use kubelet_core::stats::ResourceUsage as Usage;

/// cAdvisor's `isMemoryUnlimited`: a limit above 2^62 bytes (the kernel's "no limit",
/// rounded to pages) is none.
pub fn memory_unlimited(limit_bytes: u64) -> bool {
    limit_bytes > 1 << 62
}

/// Working set as cAdvisor computes it: usage minus inactive file pages, floored at zero.
pub(crate) fn working_set(usage: u64, inactive_file: u64) -> u64 {
    usage.saturating_sub(inactive_file)
}

/// Creates, updates, removes and reads cgroups by name: the cgroupfs driver ([`V1Manager`],
/// [`V2Manager`]) or the systemd driver ([`SystemdCgroupManager`]).
pub trait CgroupManager: Send + Sync + fmt::Debug {
    /// The layout this manager drives.
    fn mode(&self) -> CgroupMode;
    /// Whether the cgroup exists in every hierarchy the kubelet relies on.
    fn exists(&self, name: &CgroupName) -> bool;
    /// Like [`exists`](CgroupManager::exists), but says which directories are missing.
    fn validate(&self, name: &CgroupName) -> Result<(), CgroupError>;
    /// Creates the cgroup (and missing ancestors) in every hierarchy and applies `config`.
    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError>;
    /// Applies `config` to an existing cgroup.
    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError>;
    /// Removes the cgroup and every descendant (deepest first) in every hierarchy, retrying
    /// a few times while the kernel still reports it busy. Absent cgroups are not an error.
    fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError>;
    /// Names of the direct child cgroups (union over hierarchies), sorted.
    fn children(&self, name: &CgroupName) -> Result<Vec<String>, CgroupError>;
    /// Processes in the cgroup and its descendants.
    fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError>;
    /// CPU and memory usage of the cgroup.
    fn usage(&self, name: &CgroupName) -> Result<Usage, CgroupError>;
    /// The directories the cgroup has (or would have) in each hierarchy.
    fn paths(&self, name: &CgroupName) -> Vec<PathBuf>;
    /// Moves process `pid` into the cgroup in every hierarchy, creating the cgroup (with no
    /// limits) where it is missing (Go's cgroupfs `Manager.Apply(pid)`).
    fn attach(&self, name: &CgroupName, pid: u32) -> Result<(), CgroupError>;
    /// Processes directly in the cgroup, not in its descendants (on v1, the cpu hierarchy's
    /// `cgroup.procs`, as Go's `GetPids`).
    fn own_pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError>;
    /// A cgroup an operator configured (`systemReservedCgroup`, …) as a name of this
    /// driver (Go's `CgroupName(string)`): a cgroupfs path here, a slice for systemd.
    fn cgroup_name(&self, configured: &str) -> CgroupName {
        CgroupName::from_cgroupfs(configured)
    }
    /// The name the runtime is given as cgroup parent (Go's `Name`): the cgroupfs path
    /// here, the slice's expanded path for systemd.
    fn runtime_name(&self, name: &CgroupName) -> String {
        name.to_cgroupfs()
    }
    /// The cgroup's directory below the hierarchy root, as [`cgroupfs`](Self::cgroupfs)
    /// takes it (the name itself here; the slice path for systemd).
    fn literal(&self, name: &CgroupName) -> CgroupName {
        name.clone()
    }
    /// Where the runtime puts a container of the pod cgroup `pod`, as literal cgroups (the
    /// first that exists is it): `<pod>/<id>` here; runc's scopes for systemd.
    fn container_cgroups(&self, pod: &CgroupName, container_id: &str) -> Vec<CgroupName> {
        vec![self.literal(pod).child(container_id)]
    }
    /// The cgroupfs manager of the same hierarchy, taking literal paths: for cgroups the
    /// kubelet does not name (the runtime's, the kubelet's own, containers').
    fn cgroupfs(&self) -> &dyn CgroupManager;
}

/// Whether a runtime's container id can name a cgroup below the pod's: runtime ids are plain
/// (hex) names; an empty one, one with `/` or one starting with `.` (`.`, `..`) could leave
/// the pod cgroup or name no child of it.
pub(crate) fn is_plain_container_id(id: &str) -> bool {
    !(id.is_empty() || id.contains('/') || id.starts_with('.'))
}

/// Builds the manager for the detected layout (v1 for V1 and Hybrid, v2 for V2).
pub fn manager_for(root: &Path, mounts: &CgroupMounts) -> Box<dyn CgroupManager> {
    match mounts.mode {
        CgroupMode::V1 | CgroupMode::Hybrid => {
            let unified = (mounts.mode == CgroupMode::Hybrid)
                .then(|| mounts.unified.clone())
                .flatten();
            Box::new(V1Manager::new(root, mounts.v1.clone(), mounts.mode).with_unified(unified))
        }
        CgroupMode::V2 => Box::new(V2Manager::new(
            root,
            mounts
                .unified
                .clone()
                .unwrap_or_else(|| crate::host_root::under(root, "/sys/fs/cgroup")),
        )),
    }
}

// ---- shared file helpers ----

pub(crate) fn write_file(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|e| CgroupError::io("write", path, e))
}

pub(crate) fn read_file(path: &Path) -> Result<String, CgroupError> {
    std::fs::read_to_string(path).map_err(|e| CgroupError::io("read", path, e))
}

pub(crate) fn read_u64(path: &Path) -> Result<u64, CgroupError> {
    let text = read_file(path)?;
    text.trim().parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        message: format!("{:?} is not an unsigned integer", text.trim()),
    })
}

/// Reads a flat-keyed file (`memory.stat`, `cpu.stat`): "key value" lines.
pub(crate) fn read_keyed(path: &Path) -> Result<BTreeMap<String, u64>, CgroupError> {
    let text = read_file(path)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let k = it.next()?;
            let v = it.next()?.parse().ok()?;
            Some((k.to_string(), v))
        })
        .collect())
}

pub(crate) fn mkdir_all(path: &Path) -> Result<(), CgroupError> {
    std::fs::create_dir_all(path).map_err(|e| CgroupError::io("mkdir", path, e))
}

/// Child directory names of `dir` (empty if it does not exist).
pub(crate) fn child_dirs(dir: &Path) -> Result<Vec<String>, CgroupError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CgroupError::io("list", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CgroupError::io("list", dir, e))?;
        let is_dir = entry
            .file_type()
            .map_err(|e| CgroupError::io("stat", &entry.path(), e))?
            .is_dir();
        if is_dir {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// Processes listed in `cgroup.procs` of `dir` (none when it does not exist).
pub(crate) fn own_pids_of(dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let procs = dir.join("cgroup.procs");
    match std::fs::read_to_string(&procs) {
        Ok(text) => Ok(text
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(CgroupError::io("read", &procs, e)),
    }
}

/// Processes listed in `cgroup.procs` of `dir` and all its descendants.
pub(crate) fn pids_recursive(dir: &Path) -> Result<Vec<u32>, CgroupError> {
    let mut out = Vec::new();
    if !dir.exists() {
        return Ok(out);
    }
    let procs = dir.join("cgroup.procs");
    match std::fs::read_to_string(&procs) {
        Ok(text) => out.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(CgroupError::io("read", &procs, e)),
    }
    for child in child_dirs(dir)? {
        out.extend(pids_recursive(&dir.join(child))?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

const CGROUP_SUPER_MAGIC: u64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;

/// Whether `dir` lives on a cgroup filesystem (v1 or v2). On any other filesystem (a test
/// fixture) control files are ordinary files that must be deleted before `rmdir`.
fn on_cgroupfs(dir: &Path) -> bool {
    match rustix::fs::statfs(dir) {
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        Ok(st) => {
            let t = st.f_type as u64;
            t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
        }
        Err(_) => true,
    }
}

/// Removes `dir` and all descendant directories, deepest first. Missing is fine. Busy
/// cgroups are retried 5 times with a doubling delay from 10ms (as runc's `RemovePaths`).
pub(crate) fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    if !dir.exists() {
        return Ok(());
    }
    let plain_fs = !on_cgroupfs(dir);
    let mut delay = Duration::from_millis(10);
    let mut attempt = 0;
    loop {
        attempt += 1;
        match remove_tree_once(dir, plain_fs) {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= 5 => {
                let pids = pids_recursive(dir).unwrap_or_default();
                return Err(CgroupError::Busy {
                    path: dir.to_path_buf(),
                    pids,
                    error: e,
                });
            }
            Err(e) => {
                tracing::debug!(path = %dir.display(), attempt, error = %e, "cgroup removal failed, retrying");
                std::thread::sleep(delay);
                delay *= 2;
            }
        }
    }
}

fn remove_tree_once(dir: &Path, plain_fs: bool) -> Result<(), std::io::Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let ft = entry.file_type()?;
        if ft.is_dir() {
            remove_tree_once(&entry.path(), plain_fs)?;
        } else if plain_fs {
            std::fs::remove_file(entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Go's `HugePageUnitSizeFromByteSize`: 2097152 → `"2MB"`, 1073741824 → `"1GB"`.
pub(crate) fn hugepage_unit(size: u64) -> Option<String> {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut s = size;
    let mut i = 0;
    while s >= 1024 && s % 1024 == 0 && i < UNITS.len() - 1 {
        s /= 1024;
        i += 1;
    }
    if s == 0 {
        return None;
    }
    Some(format!("{s}{}", UNITS[i]))
}

/// Page sizes (bytes) of the huge page pools under `<root>/sys/kernel/mm/hugepages`.
pub(crate) fn host_hugepage_sizes(root: &Path) -> Vec<u64> {
    let dir = crate::host_root::under(root, "/sys/kernel/mm/hugepages");
    let mut out: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse::<u64>()
                .ok()
        })
        .map(|kb| kb * 1024)
        .collect();
    out.sort_unstable();
    out
}

/// Go's `maybeSetHugetlb`: the requested limits plus, for every other host page size, 0.
pub(crate) fn hugetlb_limits(root: &Path, config: &ResourceConfig) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (size, limit) in &config.hugepage_limits {
        if let Some(unit) = hugepage_unit(*size) {
            out.push((unit, *limit));
        }
    }
    for size in host_hugepage_sizes(root) {
        if !config.hugepage_limits.contains_key(&size) {
            if let Some(unit) = hugepage_unit(size) {
                out.push((unit, 0));
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::machine::tests::write;

    pub(crate) const V1_MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
42 31 0:39 / /sys/fs/cgroup/hugetlb rw,relatime - cgroup cgroup rw,hugetlb
";

    pub(crate) const HYBRID_MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    pub(crate) const V2_MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime - ext4 /dev/vda rw
30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    /// mountinfo, mode, v1 controller → mount, unified mount.
    type DetectCase<'a> = (
        &'a str,
        CgroupMode,
        &'a [(&'a str, &'a str)],
        Option<&'a str>,
    );

    #[test]
    fn detect_table() {
        let cases: &[DetectCase<'_>] = &[
            (
                V1_MOUNTINFO,
                CgroupMode::V1,
                &[
                    ("cpu", "sys/fs/cgroup/cpu,cpuacct"),
                    ("cpuacct", "sys/fs/cgroup/cpu,cpuacct"),
                    ("cpuset", "sys/fs/cgroup/cpuset"),
                    ("hugetlb", "sys/fs/cgroup/hugetlb"),
                    ("memory", "sys/fs/cgroup/memory"),
                    ("name=systemd", "sys/fs/cgroup/systemd"),
                    ("pids", "sys/fs/cgroup/pids"),
                ],
                None,
            ),
            (
                HYBRID_MOUNTINFO,
                CgroupMode::Hybrid,
                &[
                    ("cpu", "sys/fs/cgroup/cpu"),
                    ("cpuacct", "sys/fs/cgroup/cpuacct"),
                    ("cpuset", "sys/fs/cgroup/cpuset"),
                    ("memory", "sys/fs/cgroup/memory"),
                    ("name=systemd", "sys/fs/cgroup/systemd"),
                    ("pids", "sys/fs/cgroup/pids"),
                ],
                Some("sys/fs/cgroup/unified"),
            ),
            (V2_MOUNTINFO, CgroupMode::V2, &[], Some("sys/fs/cgroup")),
        ];
        for (mountinfo, mode, v1, unified) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), "/proc/self/mountinfo", mountinfo);
            let m = detect(dir.path()).unwrap();
            assert_eq!(m.mode, *mode);
            let want: BTreeMap<String, PathBuf> = v1
                .iter()
                .map(|(k, v)| (k.to_string(), dir.path().join(v)))
                .collect();
            assert_eq!(m.v1, want, "{mode:?}");
            assert_eq!(m.unified, unified.map(|u| dir.path().join(u)), "{mode:?}");
        }
    }

    #[test]
    fn detect_without_cgroups_fails() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "/proc/self/mountinfo",
            "22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n",
        );
        assert!(matches!(
            detect(dir.path()),
            Err(CgroupError::NoCgroupMounts { .. })
        ));
    }

    #[test]
    fn names() {
        let n = CgroupName::from_cgroupfs("/kubepods//burstable/");
        assert_eq!(n.to_cgroupfs(), "/kubepods/burstable");
        assert_eq!(n.child("pod1").to_cgroupfs(), "/kubepods/burstable/pod1");
        assert_eq!(CgroupName::from_cgroupfs("/").to_cgroupfs(), "/");
        assert_eq!(CgroupName::root(), CgroupName::from_cgroupfs(""));
        assert_eq!(
            n.dir_in(Path::new("/sys/fs/cgroup/memory")),
            PathBuf::from("/sys/fs/cgroup/memory/kubepods/burstable")
        );
    }

    #[test]
    fn hugepage_units() {
        assert_eq!(hugepage_unit(2 << 20).as_deref(), Some("2MB"));
        assert_eq!(hugepage_unit(1 << 30).as_deref(), Some("1GB"));
        assert_eq!(hugepage_unit(64 << 10).as_deref(), Some("64KB"));
        assert_eq!(hugepage_unit(0), None);
    }

    #[test]
    fn remove_tree_on_plain_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let pod = dir.path().join("pod1");
        std::fs::create_dir_all(pod.join("c1/inner")).unwrap();
        std::fs::write(pod.join("cpu.shares"), "2").unwrap();
        std::fs::write(pod.join("c1/inner/cgroup.procs"), "").unwrap();
        remove_tree(&pod).unwrap();
        assert!(!pod.exists());
        remove_tree(&pod).unwrap();
    }
}
