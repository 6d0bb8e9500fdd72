//! `cargo` run from inside a `cargo run` (or a test), building as a shell would.
//!
//! Cargo gives the process it runs the variables of that process's own package
//! (`CARGO_PKG_NAME=xtask`, `CARGO_MANIFEST_DIR`, …). A nested `cargo build` inherits them, and
//! build scripts that read them with `rerun-if-env-changed` (ring's reads `CARGO_PKG_NAME` and
//! `CARGO_MANIFEST_DIR`) then see other values than in a build from the shell: ring and
//! everything above it (rustls, kube, the kubelet) is rebuilt, and rebuilt again by the next
//! build from the shell. For the `ship` profile that is a 14-minute LTO build each way.
//!
//! [`rerun_in_release`] uses it for the benchmarks that must not measure a debug build.

use std::process::Command;

/// `cargo` (the one that ran us, when one did) without the variables Cargo set for our own
/// package; the user's own settings (`CARGO_TARGET_DIR`, `CARGO_HOME`, `CARGO_PROFILE_*`, …)
/// are kept.
pub fn command() -> Command {
    without_our_package(Command::new(
        std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
    ))
}

/// `process` (a script that runs cargo, say) without the variables Cargo set for our package.
pub fn without_our_package(mut process: Command) -> Command {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(set_for_our_package) {
            process.env_remove(name);
        }
    }
    process
}

/// Whether Cargo sets the variable `name` for the package of the process it runs.
fn set_for_our_package(name: &str) -> bool {
    [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_CRATE_",
        "CARGO_BIN_",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
        || matches!(
            name,
            "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR" | "CARGO_RUSTC_CURRENT_DIR" | "OUT_DIR"
        )
}

/// In a debug build of xtask (`cargo xtask` is one), runs the same command line again as
/// `cargo run --release -p xtask` and returns true once it has finished: a benchmark that runs
/// the kubelet engine in process would otherwise measure unoptimised code.
/// `KUBELET_RS_BENCH_DEBUG=1` keeps the debug build. False in a release build.
pub async fn rerun_in_release(what: &str) -> anyhow::Result<bool> {
    use anyhow::{bail, Context};
    if !cfg!(debug_assertions) || std::env::var_os("KUBELET_RS_BENCH_DEBUG").is_some() {
        return Ok(false);
    }
    eprintln!("[{what}] re-running as a release build (KUBELET_RS_BENCH_DEBUG=1 to skip)");
    let status = tokio::process::Command::from(command())
        .args(["run", "-q", "--release", "-p", "xtask", "--"])
        .args(std::env::args_os().skip(1))
        .current_dir(crate::repo_root())
        .status()
        .await
        .context("cargo run --release -p xtask")?;
    if !status.success() {
        bail!("{what} (release build) failed: {status}");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::set_for_our_package;

    #[test]
    fn only_the_packages_own_variables_are_dropped() {
        for dropped in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_BIN_EXE_kubelet",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
        ] {
            assert!(set_for_our_package(dropped), "{dropped}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_PROFILE_SHIP_LTO",
            "CARGO_BUILD_JOBS",
            "PATH",
        ] {
            assert!(!set_for_our_package(kept), "{kept}");
        }
    }
}
