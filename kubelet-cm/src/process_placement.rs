//! Putting processes in the configured system cgroups, as the Go kubelet's container manager
//! does at start and every five minutes after (`setupNode`'s system containers):
//!
//! - `kubeletCgroups`: the kubelet moves itself in (Go's `ensureProcessInContainerWithOOMScore`),
//!   unless it runs in a mount namespace other than the host's (pid 1's): a kubelet in a
//!   container leaves its cgroup alone. Where pid 1's namespace cannot be read, Go stops with
//!   an error; kubelet-rs moves itself as configured. The stock binary also does this first of
//!   all ([`place_kubelet_now`]) and starts over in the cgroup, so that its start-up is
//!   accounted there.
//! - `systemCgroups`: every process directly in the root cgroup is moved in (Go's
//!   `ensureSystemCgroups`), but pid 1 and kernel threads (no `/proc/<pid>/exe`); up to eleven
//!   passes, as processes fork while others move.
//!
//! A failure is reported (the caller logs it) and retried at the next round; it never stops
//! the kubelet.

use std::path::Path;

use crate::cgroups::{CgroupManager, CgroupName};
use crate::host_root::under;
use crate::system_containers::SystemCgroups;

/// How often Go re-applies the placement.
pub const PLACEMENT_PERIOD: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// Go's attempts at emptying the root cgroup.
const SYSTEM_PASSES: usize = 11;

/// The processes `ensureSystemCgroups` moves out of the root cgroup: all but pid 1 and
/// kernel threads.
pub fn movable(pids: &[u32], is_kernel_thread: impl Fn(u32) -> bool) -> Vec<u32> {
    pids.iter()
        .copied()
        .filter(|&p| p != 1 && !is_kernel_thread(p))
        .collect()
}

/// Whether `pid` runs in the host's mount namespace (pid 1's), as Go's
/// `isProcessRunningInHost`. When pid 1's namespace cannot be read (no ptrace access to it),
/// Go gives up with an error and never moves the kubelet; here the configuration is honoured.
fn in_host_mount_namespace(root: &Path, pid: u32) -> bool {
    let ns = |p: &str| std::fs::read_link(under(root, &format!("/proc/{p}/ns/mnt"))).ok();
    match (ns("1"), ns(&pid.to_string())) {
        (Some(host), Some(own)) => host == own,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

fn is_kernel_thread(root: &Path, pid: u32) -> bool {
    std::fs::read_link(under(root, &format!("/proc/{pid}/exe"))).is_err()
}

/// Places the kubelet (`self_pid`) and the root cgroup's processes as `wanted` asks; returns
/// what failed, one message each. Blocking file I/O: call it off the async runtime.
pub fn place_processes(
    cgroups: &dyn CgroupManager,
    wanted: &SystemCgroups,
    root: &Path,
    self_pid: u32,
) -> Vec<String> {
    let mut errors = Vec::new();
    if !wanted.system.is_empty() {
        let system = CgroupName::from_cgroupfs(&wanted.system);
        let top = CgroupName::from_cgroupfs("/");
        let mut last = Vec::new();
        for _ in 0..SYSTEM_PASSES {
            let pids = match cgroups.own_pids(&top) {
                Ok(p) => movable(&p, |pid| is_kernel_thread(root, pid)),
                Err(e) => {
                    last = vec![format!("listing the processes of the root cgroup: {e}")];
                    break;
                }
            };
            if pids.is_empty() {
                last.clear();
                break;
            }
            tracing::debug!(?pids, cgroup = %wanted.system, "moving non-kernel processes into the system cgroup");
            last = pids
                .iter()
                .filter_map(|&pid| cgroups.attach(&system, pid).err().map(|e| (pid, e)))
                // A process that exited meanwhile is not a failure.
                .filter(|(pid, _)| under(root, &format!("/proc/{pid}")).exists())
                .map(|(pid, e)| {
                    format!(
                        "failed to move PID {pid} into the system container {:?}: {e}",
                        wanted.system
                    )
                })
                .collect();
        }
        errors.extend(last);
    }
    if !wanted.kubelet.is_empty() {
        errors.extend(attach_kubelet(cgroups, &wanted.kubelet, root, self_pid));
    }
    errors
}

fn attach_kubelet(
    cgroups: &dyn CgroupManager,
    cgroup: &str,
    root: &Path,
    self_pid: u32,
) -> Option<String> {
    if !in_host_mount_namespace(root, self_pid) {
        tracing::debug!(
            pid = self_pid,
            "the kubelet is not in the host's mount namespace: its cgroup is left alone"
        );
        return None;
    }
    let name = CgroupName::from_cgroupfs(cgroup);
    cgroups
        .attach(&name, self_pid)
        .err()
        .map(|e| format!("failed to move the kubelet (PID {self_pid}) into {cgroup:?}: {e}"))
}

/// Moves the kubelet into `kubeletCgroups` at once, before it allocates most of its memory
/// and faults in most of its pages, so that the cgroup accounts for them (on cgroup v1 what
/// was charged before a move stays with the old cgroup). The container manager repeats it with
/// the rest of the placement. Whether it moved (not from a mount namespace other than the
/// host's). Blocking file I/O.
pub fn place_kubelet_now(root: &Path, kubelet_cgroup: &str) -> Result<bool, String> {
    let pid = std::process::id();
    if !in_host_mount_namespace(root, pid) {
        return Ok(false);
    }
    let mounts = crate::cgroups::detect(root).map_err(|e| e.to_string())?;
    let cgroups = crate::cgroups::manager_for(root, &mounts);
    match attach_kubelet(cgroups.as_ref(), kubelet_cgroup, root, pid) {
        Some(e) => Err(e),
        None => Ok(true),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::cgroups::V2Manager;

    #[test]
    fn pid_1_and_kernel_threads_stay() {
        assert_eq!(
            movable(&[1, 2, 40, 41, 50], |p| p == 2 || p == 41),
            [40, 50]
        );
        assert!(movable(&[], |_| false).is_empty());
    }

    /// A cgroup v2 tree and a /proc in a temporary directory: 1 (init), 2 (a kernel thread),
    /// 30 and 31 (user processes) in the root cgroup; the kubelet is 31.
    fn fixture(kubelet_mnt: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("tempdir");
        let cg = root.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("cgroup.procs"), "1\n2\n30\n31\n").unwrap();
        for (pid, exe, mnt) in [
            (1, true, "mnt:[1]"),
            (2, false, "mnt:[1]"),
            (30, true, "mnt:[1]"),
            (31, true, kubelet_mnt),
        ] {
            let dir = root.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(dir.join("ns")).unwrap();
            if exe {
                std::os::unix::fs::symlink("/bin/true", dir.join("exe")).unwrap();
            }
            std::os::unix::fs::symlink(mnt, dir.join("ns/mnt")).unwrap();
        }
        root
    }

    /// Places the fixture's processes as `wanted` asks (the kubelet is 31, in mount
    /// namespace `kubelet_mnt`; `host_readable`: whether pid 1's namespace can be read);
    /// returns the fixture, what failed, and what each cgroup's `cgroup.procs` last got.
    fn place(
        kubelet_mnt: &str,
        host_readable: bool,
        wanted: SystemCgroups,
    ) -> (Vec<String>, Option<String>, Option<String>) {
        let root = fixture(kubelet_mnt);
        if !host_readable {
            std::fs::remove_file(root.path().join("proc/1/ns/mnt")).unwrap();
        }
        let cg = root.path().join("sys/fs/cgroup");
        let manager = V2Manager::new(root.path(), cg.clone());
        let errors = place_processes(&manager, &wanted, root.path(), 31);
        let procs = |c: &str| std::fs::read_to_string(cg.join(c).join("cgroup.procs")).ok();
        (errors, procs("kubelet"), procs("system"))
    }

    fn kubelet_only() -> SystemCgroups {
        SystemCgroups {
            kubelet: "/kubelet".into(),
            ..SystemCgroups::default()
        }
    }

    #[test]
    fn the_kubelet_and_the_root_cgroups_processes_are_placed() {
        let wanted = SystemCgroups {
            kubelet: "/kubelet".into(),
            runtime: String::new(),
            system: "/system".into(),
        };
        // The fixture's root cgroup.procs is a plain file: it keeps its list, so every pass
        // moves the same processes again, and each cgroup.procs keeps the last write (the
        // last process moved).
        let (errors, kubelet, system) = place("mnt:[1]", true, wanted);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(system.as_deref(), Some("31"));
        assert_eq!(kubelet.as_deref(), Some("31"));
    }

    #[test]
    fn an_unreadable_host_namespace_does_not_stop_the_move() {
        let (errors, kubelet, _) = place("mnt:[1]", false, kubelet_only());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kubelet.as_deref(), Some("31"));
    }

    #[test]
    fn a_kubelet_in_another_mount_namespace_stays_where_it_is() {
        let (errors, kubelet, _) = place("mnt:[2]", true, kubelet_only());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kubelet, None);
    }
}
