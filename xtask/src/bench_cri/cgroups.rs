//! The cgroup parents the benchmark's pods and kubelets use, in every v1 hierarchy and the v2
//! one: created before a run, removed (children first) after it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The cgroup parent directory in every v1 hierarchy and in the v2 (unified) one.
fn cgroup_dirs(root: &str) -> Vec<PathBuf> {
    let rel = root.trim_start_matches('/');
    let mut dirs = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        for e in entries.flatten() {
            let p = e.path();
            // Skip the controller aliases (cpu -> cpu,cpuacct).
            if p.is_dir() && !e.file_type().map(|t| t.is_symlink()).unwrap_or(false) {
                dirs.push(p.join(rel));
            }
        }
    }
    dirs
}

pub(super) fn create_cgroup_root(root: &str) -> Result<()> {
    for d in cgroup_dirs(root) {
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    }
    Ok(())
}

/// Removes a cgroup tree, children first (best effort).
pub(crate) fn remove_cgroup_root(root: &str) {
    fn rm(dir: &Path) {
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    rm(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
    for d in cgroup_dirs(root) {
        rm(&d);
    }
}
