//! What the D-Bus tests share: a private `dbus-daemon`.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs
)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A private `dbus-daemon`, killed on drop.
pub struct Daemon {
    child: Child,
    pub address: String,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn daemon() -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let mut d = daemon_at(dir.path());
    d._dir = Some(dir);
    d
}

/// A daemon listening on `dir/bus` (a second one there after the first is gone: a bus restart).
pub fn daemon_at(dir: &std::path::Path) -> Daemon {
    let _ = std::fs::remove_file(dir.join("bus"));
    let mut child = Command::new("dbus-daemon")
        .args([
            "--session",
            "--nofork",
            "--print-address",
            &format!("--address=unix:path={}", dir.join("bus").display()),
        ])
        .stdout(Stdio::piped())
        // It cannot raise its fd limit without CAP_SYS_RESOURCE, and says so.
        .stderr(Stdio::null())
        .spawn()
        .expect("dbus-daemon (Debian's dbus-daemon; scripts/node-env.sh installs it)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Daemon {
        child,
        address: line.trim().to_string(),
        _dir: None,
    }
}
