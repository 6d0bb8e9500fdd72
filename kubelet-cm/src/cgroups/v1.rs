//! cgroup v1 (and hybrid) cgroupfs manager: one directory per mounted hierarchy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{
    child_dirs, hugetlb_limits, mkdir_all, own_pids_of, pids_recursive, read_keyed, read_u64,
    remove_tree, working_set, write_file, CgroupError, CgroupManager, CgroupMode, CgroupName,
    ResourceConfig, Usage,
};

/// Controllers whose directories must exist for a cgroup to count as existing (Go's
/// allow-list; only the mounted ones are checked).
const REQUIRED: [&str; 6] = ["cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb"];

/// cgroup v1 manager over the hierarchies of `mounts` (controller → mount point).
#[derive(Debug, Clone)]
pub struct V1Manager {
    root: PathBuf,
    mounts: BTreeMap<String, PathBuf>,
    mode: CgroupMode,
    unified: Option<PathBuf>,
}

impl V1Manager {
    /// A manager for the given v1 hierarchies. `root` is where `/sys/kernel/mm/hugepages`
    /// is looked up (`/` in production); `mode` is V1 or Hybrid (reported by
    /// [`CgroupManager::mode`]).
    pub fn new(root: &Path, mounts: BTreeMap<String, PathBuf>, mode: CgroupMode) -> V1Manager {
        V1Manager {
            root: root.to_path_buf(),
            mounts,
            mode,
            unified: None,
        }
    }

    /// In hybrid mode, the cgroup2 mount (e.g. `/sys/fs/cgroup/unified`). The kubelet sets no
    /// resources there, but runc creates container cgroups in it too, so `destroy` removes
    /// the cgroup there as well and `children` lists it (orphans are found and cleaned).
    pub fn with_unified(mut self, unified: Option<PathBuf>) -> V1Manager {
        self.unified = unified;
        self
    }

    /// Hierarchies to clean: the v1 ones plus the hybrid unified mount.
    fn cleanup_hierarchies(&self) -> Vec<&PathBuf> {
        let mut all = self.hierarchies();
        if let Some(u) = &self.unified {
            all.push(u);
        }
        all
    }

    /// Distinct mount points (co-mounted controllers share one).
    fn hierarchies(&self) -> Vec<&PathBuf> {
        let set: BTreeSet<&PathBuf> = self.mounts.values().collect();
        set.into_iter().collect()
    }

    fn dir(&self, controller: &str, name: &CgroupName) -> Option<PathBuf> {
        self.mounts.get(controller).map(|m| name.dir_in(m))
    }

    /// cpuset cgroups start with empty `cpuset.cpus`/`cpuset.mems`, which makes them unusable;
    /// copy the parent's values down every level below the mount point (as runc does).
    fn init_cpuset(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let Some(mount) = self.mounts.get("cpuset") else {
            return Ok(());
        };
        let mut parent = mount.clone();
        for c in name.components() {
            let dir = parent.join(c);
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let own = dir.join(file);
                let current = match std::fs::read_to_string(&own) {
                    Ok(v) => v,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                    Err(e) => return Err(CgroupError::io("read", &own, e)),
                };
                if !current.trim().is_empty() {
                    continue;
                }
                let from = parent.join(file);
                let value = match std::fs::read_to_string(&from) {
                    Ok(v) => v,
                    // Nothing to inherit (e.g. a fixture without the file): leave it.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(CgroupError::io("read", &from, e)),
                };
                if !value.trim().is_empty() {
                    write_file(&own, value.trim())?;
                }
            }
            parent = dir;
        }
        Ok(())
    }

    fn set(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        if let Some(dir) = self.dir("cpu", name) {
            if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
                write_file(&dir.join("cpu.shares"), &shares.to_string())?;
            }
            let quota = config.cpu_quota.filter(|q| *q != 0);
            let mut pending_period = None;
            if let Some(period) = config.cpu_period.filter(|p| *p != 0) {
                let path = dir.join("cpu.cfs_period_us");
                if let Err(e) = std::fs::write(&path, period.to_string()) {
                    // A smaller period can be rejected until the quota is lowered: retry after.
                    if e.raw_os_error() != Some(rustix::io::Errno::INVAL.raw_os_error())
                        || quota.is_none()
                    {
                        return Err(CgroupError::io("write", &path, e));
                    }
                    pending_period = Some(period);
                }
            }
            if let Some(q) = quota {
                write_file(&dir.join("cpu.cfs_quota_us"), &q.to_string())?;
                if let Some(p) = pending_period {
                    write_file(&dir.join("cpu.cfs_period_us"), &p.to_string())?;
                }
            }
        }
        if let (Some(dir), Some(mem)) = (self.dir("memory", name), config.memory) {
            if mem != 0 {
                write_file(&dir.join("memory.limit_in_bytes"), &mem.to_string())?;
            }
        }
        if let (Some(dir), Some(pids)) = (self.dir("pids", name), config.pids_limit) {
            if pids != 0 {
                let v = if pids > 0 {
                    pids.to_string()
                } else {
                    "max".to_string()
                };
                write_file(&dir.join("pids.max"), &v)?;
            }
        }
        if let Some(dir) = self.dir("hugetlb", name) {
            for (unit, limit) in hugetlb_limits(&self.root, config) {
                let v = if limit < 0 {
                    "-1".to_string()
                } else {
                    limit.to_string()
                };
                write_file(&dir.join(format!("hugetlb.{unit}.limit_in_bytes")), &v)?;
            }
        }
        Ok(())
    }

    fn missing(&self, name: &CgroupName) -> Vec<PathBuf> {
        REQUIRED
            .iter()
            .filter_map(|c| self.dir(c, name))
            .filter(|d| !d.is_dir())
            .collect()
    }
}

impl CgroupManager for V1Manager {
    fn mode(&self) -> CgroupMode {
        self.mode
    }

    fn exists(&self, name: &CgroupName) -> bool {
        self.missing(name).is_empty()
    }

    fn validate(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let missing = self.missing(name);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(CgroupError::Missing {
                name: name.to_cgroupfs(),
                missing,
            })
        }
    }

    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        for mount in self.hierarchies() {
            mkdir_all(&name.dir_in(mount))?;
        }
        self.init_cpuset(name)?;
        self.set(name, config)
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        self.validate(name)?;
        self.set(name, config)
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let mut first_err = None;
        for mount in self.cleanup_hierarchies() {
            if let Err(e) = remove_tree(&name.dir_in(mount)) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn children(&self, name: &CgroupName) -> Result<Vec<String>, CgroupError> {
        let mut all = BTreeSet::new();
        for mount in self.cleanup_hierarchies() {
            all.extend(child_dirs(&name.dir_in(mount))?);
        }
        Ok(all.into_iter().collect())
    }

    fn attach(&self, name: &CgroupName, pid: u32) -> Result<(), CgroupError> {
        for mount in self.cleanup_hierarchies() {
            mkdir_all(&name.dir_in(mount))?;
        }
        self.init_cpuset(name)?;
        for mount in self.cleanup_hierarchies() {
            write_file(&name.dir_in(mount).join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    fn own_pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        match ["cpu", "memory", "pids"]
            .iter()
            .find_map(|c| self.dir(c, name))
        {
            Some(d) => own_pids_of(&d),
            None => Ok(Vec::new()),
        }
    }

    fn cgroupfs(&self) -> &dyn CgroupManager {
        self
    }

    fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        let dir = ["memory", "pids", "cpu"]
            .iter()
            .find_map(|c| self.dir(c, name))
            .or_else(|| self.hierarchies().first().map(|m| name.dir_in(m)));
        match dir {
            Some(d) => pids_recursive(&d),
            None => Ok(Vec::new()),
        }
    }

    fn usage(&self, name: &CgroupName) -> Result<Usage, CgroupError> {
        let timestamp = kubelet_core::clock::monotonic_now();
        let cpu_usage_ns = match self.dir("cpuacct", name) {
            Some(d) => read_u64(&d.join("cpuacct.usage"))?,
            None => 0,
        };
        let mut u = Usage {
            cpu_usage_ns,
            ..Usage::zero(timestamp)
        };
        if let Some(d) = self.dir("memory", name) {
            let usage = read_u64(&d.join("memory.usage_in_bytes"))?;
            let stat = read_keyed(&d.join("memory.stat"))?;
            let at = |key: &str| stat.get(key).copied().unwrap_or(0);
            u.memory_usage_bytes = usage;
            u.memory_working_set_bytes = working_set(usage, at("total_inactive_file"));
            u.memory_rss_bytes = at("total_rss");
            u.memory_cache_bytes = at("total_cache");
            // cAdvisor's container data: the cgroup's own counters, not total_*.
            u.memory_page_faults = at("pgfault");
            u.memory_major_page_faults = at("pgmajfault");
            u.memory_limit_bytes = read_u64(&d.join("memory.limit_in_bytes"))
                .ok()
                .filter(|l| !crate::cgroups::memory_unlimited(*l));
        }
        Ok(u)
    }

    fn paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        self.hierarchies()
            .into_iter()
            .map(|m| name.dir_in(m))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::{detect, tests::V1_MOUNTINFO};
    use crate::machine::tests::write;

    fn read_control(dir: &Path, file: &str) -> Result<String, CgroupError> {
        Ok(crate::cgroups::read_file(&dir.join(file))?
            .trim()
            .to_string())
    }

    fn fixture() -> (tempfile::TempDir, V1Manager) {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "/proc/self/mountinfo", V1_MOUNTINFO);
        write(dir.path(), "/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n");
        write(dir.path(), "/sys/fs/cgroup/cpuset/cpuset.mems", "0\n");
        write(
            dir.path(),
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "0\n",
        );
        let m = detect(dir.path()).unwrap();
        let mgr = V1Manager::new(dir.path(), m.v1, m.mode);
        (dir, mgr)
    }

    #[test]
    fn create_update_destroy() {
        let (dir, mgr) = fixture();
        let name = CgroupName::from_cgroupfs("/kubepods/burstable/podabc");
        assert!(!mgr.exists(&name));
        assert!(matches!(
            mgr.validate(&name),
            Err(CgroupError::Missing { .. })
        ));
        let cfg = ResourceConfig {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory: Some(128 << 20),
            pids_limit: Some(100),
            hugepage_limits: BTreeMap::new(),
        };
        mgr.create(&name, &cfg).unwrap();
        assert!(mgr.exists(&name));
        let cg = |c: &str| {
            dir.path()
                .join("sys/fs/cgroup")
                .join(c)
                .join("kubepods/burstable/podabc")
        };
        let read = |c: &str, f: &str| read_control(&cg(c), f).unwrap();
        assert_eq!(read("cpu,cpuacct", "cpu.shares"), "512");
        assert_eq!(read("cpu,cpuacct", "cpu.cfs_quota_us"), "50000");
        assert_eq!(read("cpu,cpuacct", "cpu.cfs_period_us"), "100000");
        assert_eq!(read("memory", "memory.limit_in_bytes"), "134217728");
        assert_eq!(read("pids", "pids.max"), "100");
        assert_eq!(read("cpuset", "cpuset.cpus"), "0-3", "inherited from root");
        assert_eq!(read("cpuset", "cpuset.mems"), "0");
        assert_eq!(
            read("hugetlb", "hugetlb.2MB.limit_in_bytes"),
            "0",
            "unrequested page sizes are limited to 0"
        );
        assert!(cg("systemd").is_dir(), "created in every hierarchy");

        mgr.update(
            &name,
            &ResourceConfig {
                cpu_shares: Some(2),
                pids_limit: Some(-1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(read("cpu,cpuacct", "cpu.shares"), "2");
        assert_eq!(read("pids", "pids.max"), "max");
        assert_eq!(
            read("cpu,cpuacct", "cpu.cfs_quota_us"),
            "50000",
            "untouched"
        );

        let parent = CgroupName::from_cgroupfs("/kubepods/burstable");
        assert_eq!(mgr.children(&parent).unwrap(), vec!["podabc".to_string()]);
        // A leftover container cgroup below the pod is removed too.
        std::fs::create_dir_all(cg("memory").join("ctr1")).unwrap();
        mgr.destroy(&name).unwrap();
        assert!(!mgr.exists(&name));
        for p in mgr.paths(&name) {
            assert!(!p.exists(), "{}", p.display());
        }
        assert!(mgr.children(&parent).unwrap().is_empty());
        mgr.destroy(&name).unwrap();
        assert!(mgr.update(&name, &ResourceConfig::default()).is_err());
    }

    #[test]
    fn hybrid_destroy_cleans_unified_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "/proc/self/mountinfo",
            crate::cgroups::tests::HYBRID_MOUNTINFO,
        );
        let m = detect(dir.path()).unwrap();
        let mgr = V1Manager::new(dir.path(), m.v1, m.mode).with_unified(m.unified.clone());
        let name = CgroupName::from_cgroupfs("/kubepods/besteffort/podz");
        mgr.create(&name, &ResourceConfig::default()).unwrap();
        let unified_pod = name.dir_in(m.unified.as_ref().unwrap());
        assert!(
            !unified_pod.exists(),
            "nothing is created in the unified hierarchy"
        );
        std::fs::create_dir_all(unified_pod.join("ctr")).unwrap();
        let parent = CgroupName::from_cgroupfs("/kubepods/besteffort");
        assert_eq!(mgr.children(&parent).unwrap(), vec!["podz".to_string()]);
        mgr.destroy(&name).unwrap();
        assert!(!unified_pod.exists());
        assert!(mgr.children(&parent).unwrap().is_empty());
    }

    #[test]
    fn usage_from_files() {
        let (dir, mgr) = fixture();
        let name = CgroupName::from_cgroupfs("/kubepods/podx");
        mgr.create(&name, &ResourceConfig::default()).unwrap();
        let base = dir.path().join("sys/fs/cgroup");
        std::fs::write(
            base.join("cpu,cpuacct/kubepods/podx/cpuacct.usage"),
            "123456789\n",
        )
        .unwrap();
        std::fs::write(
            base.join("memory/kubepods/podx/memory.usage_in_bytes"),
            "10000\n",
        )
        .unwrap();
        std::fs::write(
            base.join("memory/kubepods/podx/memory.stat"),
            "cache 1\nrss 2\ntotal_rss 4000\ntotal_inactive_file 3000\n",
        )
        .unwrap();
        std::fs::write(base.join("memory/kubepods/podx/cgroup.procs"), "12\n7\n").unwrap();
        let u = mgr.usage(&name).unwrap();
        assert_eq!(u.cpu_usage_ns, 123_456_789);
        assert_eq!(u.memory_usage_bytes, 10_000);
        assert_eq!(u.memory_working_set_bytes, 7_000);
        assert_eq!(u.memory_rss_bytes, 4_000);
        assert_eq!(mgr.pids(&name).unwrap(), vec![7, 12]);
    }
}
