//! Where the project's scripts (`scripts/node-env.sh`, `scripts/control-plane.sh`) are, found
//! at run time.
//!
//! Not `env!("CARGO_MANIFEST_DIR")`: that bakes the path of the checkout that *compiled* this
//! library into it, and cargo reuses the artifact for every checkout sharing a
//! `CARGO_TARGET_DIR` (as the README recommends), so one checkout's tests would run another
//! checkout's scripts (or a deleted clone's). In order:
//!
//! 1. `KUBELET_RS_SCRIPTS_DIR`, when set and not empty (`scripts/test.sh` sets it);
//! 2. `scripts/` beside or above `CARGO_MANIFEST_DIR` as cargo sets it in the environment of
//!    the test process it runs (the running checkout's package dir);
//! 3. `scripts/` in the current directory or one above it (cargo runs tests in the package dir).
//!
//! A directory counts when it holds both `node-env.sh` and `control-plane.sh`. When none is
//! found the relative path `scripts` is returned, so that running a script fails with a message
//! that names it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variable that names the scripts directory explicitly.
pub const SCRIPTS_DIR_ENV: &str = "KUBELET_RS_SCRIPTS_DIR";

/// The scripts directory of the running checkout (see the module docs for the order).
pub fn scripts_dir() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    find_scripts_dir(
        std::env::var_os(SCRIPTS_DIR_ENV),
        std::env::var_os("CARGO_MANIFEST_DIR"),
        &cwd,
    )
    .unwrap_or_else(|| PathBuf::from("scripts"))
}

/// The path of script `name` (e.g. `node-env.sh`) in [`scripts_dir`].
pub fn script(name: &str) -> PathBuf {
    scripts_dir().join(name)
}

/// The lookup behind [`scripts_dir`], with its inputs explicit.
pub fn find_scripts_dir(
    explicit: Option<OsString>,
    manifest_dir: Option<OsString>,
    cwd: &Path,
) -> Option<PathBuf> {
    if let Some(dir) = explicit.filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let starts = manifest_dir
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(std::iter::once(cwd.to_path_buf()));
    for start in starts {
        for dir in start.ancestors() {
            let candidate = dir.join("scripts");
            if is_scripts_dir(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

fn is_scripts_dir(dir: &Path) -> bool {
    dir.join("node-env.sh").is_file() && dir.join("control-plane.sh").is_file()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn checkout(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::create_dir_all(dir.join("tests/src")).unwrap();
        for s in ["node-env.sh", "control-plane.sh"] {
            std::fs::write(dir.join("scripts").join(s), "#!/bin/sh\n").unwrap();
        }
        dir
    }

    #[test]
    fn the_running_checkout_wins_over_the_one_that_compiled_the_library() {
        let tmp = tempfile::tempdir().unwrap();
        let _compiled = checkout(tmp.path(), "a");
        let running = checkout(tmp.path(), "b");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        type Case = (
            Option<&'static str>,
            Option<PathBuf>,
            PathBuf,
            Option<PathBuf>,
        );
        let cases: [Case; 6] = [
            // The explicit variable is taken as it is.
            (
                Some("/x/scripts"),
                Some(running.join("tests")),
                running.clone(),
                Some("/x/scripts".into()),
            ),
            // cargo's run-time CARGO_MANIFEST_DIR (the running checkout's tests/ dir).
            (
                None,
                Some(running.join("tests")),
                elsewhere.clone(),
                Some(running.join("scripts")),
            ),
            // An empty variable counts as unset.
            (
                Some(""),
                None,
                running.join("tests/src"),
                Some(running.join("scripts")),
            ),
            // The current directory, or one above it.
            (
                None,
                None,
                running.join("tests"),
                Some(running.join("scripts")),
            ),
            (None, None, running.clone(), Some(running.join("scripts"))),
            // Nothing found: no guess at another checkout.
            (None, None, elsewhere.clone(), None),
        ];
        for (explicit, manifest, cwd, want) in cases {
            let got = find_scripts_dir(
                explicit.map(OsString::from),
                manifest.map(OsString::from),
                &cwd,
            );
            assert_eq!(got, want, "explicit {explicit:?}, cwd {}", cwd.display());
        }
    }

    #[test]
    fn a_dir_without_both_scripts_is_not_taken() {
        let tmp = tempfile::tempdir().unwrap();
        let half = tmp.path().join("half");
        std::fs::create_dir_all(half.join("scripts")).unwrap();
        std::fs::write(half.join("scripts/node-env.sh"), "").unwrap();
        assert_eq!(find_scripts_dir(None, None, &half), None);
    }
}
