//! cgroup v2 (unified) cgroupfs manager.

use std::path::{Path, PathBuf};

use procfs::{FromRead, Meminfo};

use super::{
    child_dirs, hugetlb_limits, mkdir_all, own_pids_of, pids_recursive, read_keyed, read_u64,
    remove_tree, working_set, write_file, CgroupError, CgroupManager, CgroupMode, CgroupName,
    ResourceConfig, Usage,
};

/// Controllers enabled for the kubelet's cgroups when the parent offers them.
const WANTED: [&str; 6] = ["cpuset", "cpu", "io", "memory", "hugetlb", "pids"];

/// Go/runc's conversion of cgroup v1 `cpu.shares` [2, 262144] to v2 `cpu.weight` [1, 10000].
pub fn shares_to_weight(shares: u64) -> u64 {
    let s = shares.clamp(2, 262_144);
    1 + ((s - 2) * 9999) / 262_142
}

/// cgroup v2 manager over the unified hierarchy mounted at `mount`.
#[derive(Debug, Clone)]
pub struct V2Manager {
    root: PathBuf,
    mount: PathBuf,
}

impl V2Manager {
    /// A manager for the unified hierarchy at `mount` (already resolved under `root`; `root`
    /// is where `/proc/meminfo` and `/sys/kernel/mm/hugepages` are read).
    pub fn new(root: &Path, mount: PathBuf) -> V2Manager {
        V2Manager {
            root: root.to_path_buf(),
            mount,
        }
    }

    /// Enables the wanted controllers in `cgroup.subtree_control` of every ancestor of `name`
    /// (from the hierarchy root down) so the cgroup gets its control files.
    fn enable_controllers(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let mut dir = self.mount.clone();
        for c in name.components() {
            let available = match std::fs::read_to_string(dir.join("cgroup.controllers")) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(CgroupError::io("read", &dir.join("cgroup.controllers"), e)),
            };
            let control = dir.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            let missing: Vec<String> = available
                .split_whitespace()
                .filter(|c| WANTED.contains(c))
                .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
                .map(|c| format!("+{c}"))
                .collect();
            if !missing.is_empty() {
                write_file(&control, &missing.join(" "))?;
            }
            dir.push(c);
        }
        Ok(())
    }

    fn set(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        let dir = name.dir_in(&self.mount);
        if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
            write_file(
                &dir.join("cpu.weight"),
                &shares_to_weight(shares).to_string(),
            )?;
        }
        let quota = config.cpu_quota.filter(|q| *q != 0);
        let period = config.cpu_period.filter(|p| *p != 0);
        if quota.is_some() || period.is_some() {
            let mut v = match quota {
                Some(q) if q > 0 => q.to_string(),
                _ => "max".to_string(),
            };
            if let Some(p) = period {
                v.push_str(&format!(" {p}"));
            }
            write_file(&dir.join("cpu.max"), &v)?;
        }
        if let Some(mem) = config.memory.filter(|m| *m != 0) {
            let v = if mem < 0 {
                "max".to_string()
            } else {
                mem.to_string()
            };
            write_file(&dir.join("memory.max"), &v)?;
        }
        if let Some(pids) = config.pids_limit.filter(|p| *p != 0) {
            let v = if pids > 0 {
                pids.to_string()
            } else {
                "max".to_string()
            };
            write_file(&dir.join("pids.max"), &v)?;
        }
        let offered = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if offered.split_whitespace().any(|c| c == "hugetlb") {
            for (unit, limit) in hugetlb_limits(&self.root, config) {
                let v = if limit < 0 {
                    "max".to_string()
                } else {
                    limit.to_string()
                };
                write_file(&dir.join(format!("hugetlb.{unit}.max")), &v)?;
            }
        }
        Ok(())
    }
}

impl CgroupManager for V2Manager {
    fn mode(&self) -> CgroupMode {
        CgroupMode::V2
    }

    fn exists(&self, name: &CgroupName) -> bool {
        name.dir_in(&self.mount).is_dir()
    }

    fn validate(&self, name: &CgroupName) -> Result<(), CgroupError> {
        if self.exists(name) {
            Ok(())
        } else {
            Err(CgroupError::Missing {
                name: name.to_cgroupfs(),
                missing: vec![name.dir_in(&self.mount)],
            })
        }
    }

    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        self.enable_controllers(name)?;
        mkdir_all(&name.dir_in(&self.mount))?;
        self.set(name, config)
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        self.validate(name)?;
        self.set(name, config)
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        remove_tree(&name.dir_in(&self.mount))
    }

    fn children(&self, name: &CgroupName) -> Result<Vec<String>, CgroupError> {
        child_dirs(&name.dir_in(&self.mount))
    }

    fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        pids_recursive(&name.dir_in(&self.mount))
    }

    fn attach(&self, name: &CgroupName, pid: u32) -> Result<(), CgroupError> {
        let dir = name.dir_in(&self.mount);
        if !dir.is_dir() {
            self.enable_controllers(name)?;
            mkdir_all(&dir)?;
        }
        write_file(&dir.join("cgroup.procs"), &pid.to_string())
    }

    fn own_pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        own_pids_of(&name.dir_in(&self.mount))
    }

    fn cgroupfs(&self) -> &dyn CgroupManager {
        self
    }

    fn usage(&self, name: &CgroupName) -> Result<Usage, CgroupError> {
        let timestamp = kubelet_core::clock::monotonic_now();
        let dir = name.dir_in(&self.mount);
        let cpu = read_keyed(&dir.join("cpu.stat"))?;
        let cpu_usage_ns = cpu
            .get("usage_usec")
            .copied()
            .unwrap_or(0)
            .saturating_mul(1000);
        let stat_path = dir.join("memory.stat");
        let stat = if stat_path.exists() {
            read_keyed(&stat_path)?
        } else {
            Default::default()
        };
        let current = dir.join("memory.current");
        let usage = if current.exists() {
            read_u64(&current)?
        } else {
            // The root cgroup has no memory.current: use MemTotal − MemFree as runc does.
            let path = crate::host_root::under(&self.root, "/proc/meminfo");
            let mi = Meminfo::from_file(&path).map_err(|e| CgroupError::Parse {
                path: path.clone(),
                message: e.to_string(),
            })?;
            mi.mem_total.saturating_sub(mi.mem_free)
        };
        let at = |key: &str| stat.get(key).copied().unwrap_or(0);
        let max = dir.join("memory.max");
        let memory_limit_bytes = if max.exists() {
            crate::cgroups::read_file(&max)?
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|l| !crate::cgroups::memory_unlimited(*l))
        } else {
            None
        };
        Ok(Usage {
            timestamp,
            cpu_usage_ns,
            memory_usage_bytes: usage,
            memory_working_set_bytes: working_set(usage, at("inactive_file")),
            memory_rss_bytes: at("anon"),
            memory_cache_bytes: at("file"),
            memory_page_faults: at("pgfault"),
            memory_major_page_faults: at("pgmajfault"),
            memory_limit_bytes,
        })
    }

    fn paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        vec![name.dir_in(&self.mount)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroups::{detect, tests::V2_MOUNTINFO};
    use crate::machine::tests::write;

    fn read_control(dir: &Path, file: &str) -> Result<String, CgroupError> {
        Ok(crate::cgroups::read_file(&dir.join(file))?
            .trim()
            .to_string())
    }

    #[test]
    fn weight_conversion() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(0), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
    }

    #[test]
    fn create_enables_controllers_and_writes_limits() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "/proc/self/mountinfo", V2_MOUNTINFO);
        write(
            dir.path(),
            "/sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory hugetlb pids rdma misc\n",
        );
        write(
            dir.path(),
            "/sys/fs/cgroup/cgroup.subtree_control",
            "cpu memory\n",
        );
        write(
            dir.path(),
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "0\n",
        );
        let m = detect(dir.path()).unwrap();
        let mgr = V2Manager::new(dir.path(), m.unified.unwrap());
        let name = CgroupName::from_cgroupfs("/kubepods");
        let cfg = ResourceConfig {
            cpu_shares: Some(2048),
            cpu_quota: Some(-1),
            cpu_period: Some(100_000),
            memory: Some(1 << 30),
            pids_limit: Some(-1),
            hugepage_limits: [(2u64 << 20, i64::MAX)].into_iter().collect(),
        };
        mgr.create(&name, &cfg).unwrap();
        let root = dir.path().join("sys/fs/cgroup");
        assert_eq!(
            read_control(&root, "cgroup.subtree_control").unwrap(),
            "+cpuset +io +hugetlb +pids",
            "only the missing wanted controllers are enabled"
        );
        let cg = root.join("kubepods");
        assert_eq!(read_control(&cg, "cpu.weight").unwrap(), "79");
        assert_eq!(read_control(&cg, "cpu.max").unwrap(), "max 100000");
        assert_eq!(read_control(&cg, "memory.max").unwrap(), "1073741824");
        assert_eq!(read_control(&cg, "pids.max").unwrap(), "max");
        assert!(mgr.exists(&name));

        // The root cgroup: memory from meminfo.
        crate::machine::tests::fixture_machine(dir.path());
        write(
            dir.path(),
            "/sys/fs/cgroup/cpu.stat",
            "usage_usec 42\nuser_usec 40\n",
        );
        write(
            dir.path(),
            "/sys/fs/cgroup/memory.stat",
            "anon 1024\ninactive_file 2048\n",
        );
        let u = mgr.usage(&CgroupName::root()).unwrap();
        assert_eq!(u.cpu_usage_ns, 42_000);
        let used = (24_684_084 - 24_104_676) * 1024;
        assert_eq!(u.memory_usage_bytes, used);
        assert_eq!(u.memory_working_set_bytes, used - 2048);
        assert_eq!(u.memory_rss_bytes, 1024);

        mgr.destroy(&name).unwrap();
        assert!(!mgr.exists(&name));
    }
}
