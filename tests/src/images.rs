//! Images of a test's own on the shared containerd: busybox re-labelled (a new image id, so
//! removing it by id, as image garbage collection does, never takes busybox's tag with it),
//! imported under a repository unique to the test and removed again when dropped.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

/// The node environment's containerd socket (for `ctr`).
pub const CONTAINERD_SOCK: &str = "/run/kubelet-rs/containerd/containerd.sock";
/// The node environment's busybox OCI layout.
pub const BUSYBOX_LAYOUT: &str = "/var/lib/kubelet-rs/node/images/busybox/oci";

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
        if Command::new("umoci").arg("--version").output().is_err()
            || !Path::new(BUSYBOX_LAYOUT).exists()
        {
            panic!("umoci and the node environment's busybox layout ({BUSYBOX_LAYOUT}) are needed");
        }
        let image = OwnImage {
            reference: format!("{repo}:gc"),
        };
        let oci = dir.join("oci");
        run(Command::new("cp").arg("-r").arg(BUSYBOX_LAYOUT).arg(&oci));
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
                CONTAINERD_SOCK,
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
                CONTAINERD_SOCK,
                "-n",
                "k8s.io",
                "images",
                "rm",
                &self.reference,
            ])
            .output();
    }
}
