//! The seed node of issue #33 (`kubelet-bin/testdata`): the 164 flags a real Go kubelet 1.25
//! printed at start-up and its `--config` file, adapted to this machine where the node's
//! paths are not ours.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// How many flags the seed node printed.
pub const FLAGS: usize = 164;

/// A file of `kubelet-bin/testdata` of the running checkout (cargo's run-time
/// `CARGO_MANIFEST_DIR`).
pub fn testdata(name: &str) -> String {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("../kubelet-bin/testdata");
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The seed node's config file with `cgroupDriver: cgroupfs` (no systemd here) and its
/// static pods in `manifests`.
pub fn config(manifests: &Path) -> String {
    testdata("seed-kubelet-conf.yml")
        .replace("cgroupDriver: systemd", "cgroupDriver: cgroupfs")
        .replace(
            "/etc/kubernetes/manifests",
            &manifests.display().to_string(),
        )
}

/// The seed node's command line: every flag it printed, with `ours(name)`'s value where it
/// gives one and the node's value otherwise.
pub fn command_line(ours: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let flags = kubelet_bin::go_flags::flags_from_go_log(&testdata("go-1.25-flags.txt"));
    assert_eq!(flags.len(), FLAGS);
    flags
        .iter()
        .map(|(name, value)| format!("--{name}={}", ours(name).unwrap_or_else(|| value.clone())))
        .collect()
}
