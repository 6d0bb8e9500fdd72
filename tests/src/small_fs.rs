//! A small dedicated filesystem for disk-pressure tests: a tmpfs of a few MiB holding the
//! test's kubelet root dir (nodefs) and pod log root, so that the eviction manager's disk
//! signals measure something the test fills and empties — not the shared machine's disk.
//!
//! [`SmallFs::mount_for`] mounts the tmpfs at `<test dir>/smallfs` (a path unique to the
//! test) and bind-mounts its `root/` and `pods/` over the test's `root/` and `pods/`, where
//! the engine's root dir and the CRI pod log directory already point; the binds share the
//! tmpfs's superblock, so both report the same filesystem (one device id, one `statvfs`).
//! Dropping it detaches every mount (lazily, so a busy mount of a failed test goes too),
//! innermost first; the test's temporary directory is removed afterwards as usual.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::engine::EngineTest;

/// The mounted small filesystem. See the module docs.
pub struct SmallFs {
    base: PathBuf,
    /// Mount points, in the order they were mounted.
    mounts: Vec<PathBuf>,
}

impl SmallFs {
    /// Mounts a tmpfs of `size_mib` MiB under `t`'s directory and binds its `root/` and
    /// `pods/` over the test's. Call before any engine starts (and make a new container
    /// manager afterwards, so the node's capacity is the small filesystem's).
    pub fn mount_for(t: &EngineTest, size_mib: u64) -> SmallFs {
        let base = t.dir.path().join("smallfs");
        std::fs::create_dir_all(&base).unwrap();
        let mut fs = SmallFs {
            base: base.clone(),
            mounts: Vec::new(),
        };
        kubelet_core::mount::mount_tmpfs(&base, &format!("size={size_mib}m,mode=0755"))
            .unwrap_or_else(|e| panic!("mounting a tmpfs at {}: {e}", base.display()));
        fs.mounts.push(base.clone());
        for sub in ["root", "pods"] {
            let inner = base.join(sub);
            std::fs::create_dir_all(&inner).unwrap();
            let target = t.dir.path().join(sub);
            kubelet_core::mount::bind(&inner, &target).unwrap_or_else(|e| {
                panic!("binding {} onto {}: {e}", inner.display(), target.display())
            });
            fs.mounts.push(target);
        }
        fs
    }

    /// The tmpfs itself (a place for the test's own filler files).
    pub fn path(&self) -> &Path {
        &self.base
    }

    /// Bytes available on the filesystem (`statvfs`'s `f_bavail` × `f_frsize`).
    pub fn available(&self) -> u64 {
        let out = Command::new("stat")
            .args(["-f", "-c", "%a %S"])
            .arg(&self.base)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut f = text.split_whitespace().map(|v| v.parse::<u64>().unwrap());
        f.next().unwrap() * f.next().unwrap()
    }

    /// Writes a file of `bytes` zeros named `name` on the filesystem.
    pub fn fill(&self, name: &str, bytes: u64) -> PathBuf {
        let path = self.base.join(name);
        std::fs::write(&path, vec![0u8; usize::try_from(bytes).unwrap()]).unwrap();
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        for m in self.mounts.iter().rev() {
            // Mounts the engine made below it (deepest first) go before it.
            if let Ok(inner) = kubelet_core::mount::mount_points_under(m) {
                for i in inner.iter().filter(|i| *i != m) {
                    let _ = Command::new("umount").arg("-l").arg(i).output();
                }
            }
            match Command::new("umount").arg("-l").arg(m).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "umount {}: {}",
                    m.display(),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("umount {}: {e}", m.display()),
            }
        }
    }
}
