//! Images of a test's own on the shared containerd: busybox re-labelled (a new image id, so
//! removing it by id, as image garbage collection does, never takes busybox's tag with it),
//! imported under a repository unique to the test and removed again when dropped.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

/// The containerd socket of the node environment under test (for `ctr`).
fn containerd_sock() -> String {
    crate::cri::socket_path()
}

/// The busybox OCI layout `scripts/node-env.sh up` built for the node environment under test.
pub fn busybox_layout() -> std::path::PathBuf {
    crate::cri::node_dir().join("images/busybox/oci")
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An image the test imported; removed (if still there) when dropped.
pub struct OwnImage {
    /// `<repo>:gc`.
    pub reference: String,
}

impl OwnImage {
    /// Imports `<repo>:gc`, busybox with the label `kubelet-rs.test=<label>`, working in
    /// `dir`. Panics when `umoci` or the busybox layout are missing.
    pub fn import(dir: &Path, repo: &str, label: &str) -> OwnImage {
        if Command::new("umoci").arg("--version").output().is_err() || !busybox_layout().exists() {
            panic!(
                "umoci and the node environment's busybox layout ({}) are needed",
                busybox_layout().display()
            );
        }
        let image = OwnImage {
            reference: format!("{repo}:gc"),
        };
        let oci = dir.join("oci");
        run(Command::new("cp").arg("-r").arg(busybox_layout()).arg(&oci));
        let tagged = |tag: &str| format!("{}:{tag}", oci.display());
        run(Command::new("umoci")
            .args(["config", "--image", &tagged("1.0"), "--tag", "gc"])
            .arg(format!("--config.label=kubelet-rs.test={label}")));
        run(Command::new("umoci").args(["rm", "--image", &tagged("1.0")]));
        let tar = dir.join("image.tar");
        run(Command::new("tar")
            .arg("-C")
            .arg(&oci)
            .arg("-cf")
            .arg(&tar)
            .arg("."));
        run(Command::new("ctr")
            .args([
                "-a",
                &containerd_sock(),
                "-n",
                "k8s.io",
                "images",
                "import",
                "--base-name",
                repo,
            ])
            .arg(&tar));
        image
    }
}

impl Drop for OwnImage {
    fn drop(&mut self) {
        let _ = Command::new("ctr")
            .args([
                "-a",
                &containerd_sock(),
                "-n",
                "k8s.io",
                "images",
                "rm",
                &self.reference,
            ])
            .output();
    }
}
