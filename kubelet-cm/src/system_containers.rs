//! The node's system containers in the summary (`node.systemContainers`: `kubelet`,
//! `runtime`, `misc`), as the Go kubelet finds them.
//!
//! - `kubelet`: `--kubelet-cgroups` (`kubeletCgroups`); when unset, the cgroup the kubelet
//!   process runs in (Go's `getContainer(os.Getpid())`: on cgroup v1, when cpu and memory
//!   agree, the `name=systemd` hierarchy's path on a systemd host, else theirs; cgroup v2's
//!   single path).
//! - `runtime`: `--runtime-cgroups`; not reported when unset.
//! - `misc`: `--system-cgroups` (`systemCgroups`); not reported when unset.
//!
//! A cgroup that does not exist or cannot be read is left out of the sample (Go logs and
//! skips it). The start time of `kubelet` is when the stats provider was made (Go: its
//! summary provider's creation); of the others cAdvisor's creation time of a raw cgroup: the
//! earliest modification time of its directories and of their `cgroup.clone_children` (v1)
//! or `cgroup.events` (v2), never before boot.

use std::path::{Path, PathBuf};

use kubelet_core::stats::system_container;

use crate::cgroups::{CgroupManager, CgroupMode, CgroupName};
use crate::host_root::under;

/// The system containers asked for by the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemCgroups {
    /// `kubeletCgroups` (`--kubelet-cgroups`): empty means the kubelet's own cgroup.
    pub kubelet: String,
    /// `--runtime-cgroups`: empty means none.
    pub runtime: String,
    /// `systemCgroups` (`--system-cgroups`): empty means none.
    pub system: String,
}

/// Most bytes read of `/proc/self/cgroup`.
const MAX_PROC_CGROUP_BYTES: u64 = 64 * 1024;

impl SystemCgroups {
    /// The `(summary name, cgroup)` pairs to measure; the kubelet's own cgroup is read from
    /// `<root>/proc/self/cgroup` when `kubelet` is empty.
    pub fn resolve(&self, root: &Path, mode: CgroupMode) -> Vec<(&'static str, CgroupName)> {
        let kubelet = if self.kubelet.is_empty() {
            read_bounded(&under(root, "/proc/self/cgroup"))
                .and_then(|text| process_cgroup(&text, mode))
        } else {
            Some(self.kubelet.clone())
        };
        [
            (system_container::KUBELET, kubelet),
            (
                system_container::RUNTIME,
                Some(self.runtime.clone()).filter(|s| !s.is_empty()),
            ),
            (
                system_container::MISC,
                Some(self.system.clone()).filter(|s| !s.is_empty()),
            ),
        ]
        .into_iter()
        .filter_map(|(name, path)| path.map(|p| (name, CgroupName::from_cgroupfs(&p))))
        .collect()
    }
}

fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_PROC_CGROUP_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// A process's cgroup from its `/proc/<pid>/cgroup` (Go's `getContainer`): on cgroup v2 the
/// single path; on v1, when the `cpu` and `memory` controllers have the same path, the
/// `name=systemd` path if there is one, else that path (none when they differ).
pub fn process_cgroup(proc_cgroup: &str, mode: CgroupMode) -> Option<String> {
    let mut unified = None;
    let mut cpu = None;
    let mut memory = None;
    let mut systemd = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            unified = Some(path);
        }
        for c in controllers.split(',') {
            match c {
                "cpu" => cpu = Some(path),
                "memory" => memory = Some(path),
                "name=systemd" => systemd = Some(path),
                _ => {}
            }
        }
    }
    let chosen = match mode {
        CgroupMode::V2 => unified,
        // Go accounts the kubelet only in a cgroup where cpu and memory are the same.
        CgroupMode::V1 | CgroupMode::Hybrid => match (cpu, memory) {
            (Some(c), Some(m)) if c == m => systemd.or(Some(c)),
            _ => None,
        },
    };
    chosen.map(str::to_string)
}

/// cAdvisor's creation time of a raw cgroup, in Unix nanoseconds: the earliest modification
/// time among its directories and their `cgroup.clone_children` / `cgroup.events`, not
/// before `boot_nanos`; `None` when none of them exists.
pub fn created_at(cgroups: &dyn CgroupManager, name: &CgroupName, boot_nanos: i64) -> Option<i64> {
    let marker = match cgroups.mode() {
        CgroupMode::V2 => "cgroup.events",
        CgroupMode::V1 | CgroupMode::Hybrid => "cgroup.clone_children",
    };
    let dirs: Vec<PathBuf> = cgroups.paths(name);
    dirs.iter()
        .flat_map(|d| [d.clone(), d.join(marker)])
        .filter_map(|p| std::fs::metadata(p).ok()?.modified().ok())
        .filter_map(|t| {
            let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
            i64::try_from(d.as_nanos()).ok()
        })
        .min()
        .map(|t| t.max(boot_nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "12:pids:/user.slice/user-0.slice/session-1.scope\n\
        11:memory:/user.slice\n\
        4:cpu,cpuacct:/user.slice\n\
        1:name=systemd:/user.slice/user-0.slice/session-1.scope\n\
        0::/user.slice/user-0.slice/session-1.scope\n";

    #[test]
    fn the_process_cgroup_is_chosen_as_go_chooses_it() {
        let cases = [
            ("4:cpu,cpuacct:/a\n3:memory:/b\n", CgroupMode::V1, None),
            ("4:cpu,cpuacct:/a\n", CgroupMode::V1, None),
            (
                V1,
                CgroupMode::Hybrid,
                Some("/user.slice/user-0.slice/session-1.scope"),
            ),
            (
                "4:cpu,cpuacct:/kubelet\n3:memory:/kubelet\n",
                CgroupMode::V1,
                Some("/kubelet"),
            ),
            (
                "0::/system.slice/kubelet.service\n",
                CgroupMode::V2,
                Some("/system.slice/kubelet.service"),
            ),
            ("0::/\n", CgroupMode::V2, Some("/")),
            ("garbage\n", CgroupMode::V1, None),
            ("", CgroupMode::V2, None),
        ];
        for (text, mode, want) in cases {
            assert_eq!(
                process_cgroup(text, mode).as_deref(),
                want,
                "{text:?} {mode:?}"
            );
        }
    }

    #[test]
    fn configured_cgroups_are_used_and_unset_ones_left_out() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("proc/self")).expect("mkdir");
        std::fs::write(
            root.path().join("proc/self/cgroup"),
            "0::/kubelet.slice/own\n",
        )
        .expect("write");
        let names = |s: &SystemCgroups| -> Vec<(&str, String)> {
            s.resolve(root.path(), CgroupMode::V2)
                .into_iter()
                .map(|(n, c)| (n, c.to_cgroupfs()))
                .collect()
        };
        assert_eq!(
            names(&SystemCgroups::default()),
            [("kubelet", "/kubelet.slice/own".to_string())]
        );
        let all = SystemCgroups {
            kubelet: "/kube/kubelet".into(),
            runtime: "/kube/runtime".into(),
            system: "/system".into(),
        };
        assert_eq!(
            names(&all),
            [
                ("kubelet", "/kube/kubelet".to_string()),
                ("runtime", "/kube/runtime".to_string()),
                ("misc", "/system".to_string()),
            ]
        );
    }
}
