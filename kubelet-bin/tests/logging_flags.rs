//! The binary's log output under klog's flags and component-base's logging options (issue
//! #33): `--logtostderr=false --log-file`, `--alsologtostderr`, `--stderrthreshold`,
//! `--vmodule`, `--skip-headers`, `--logging-format=json` with split streams, and the
//! combinations Go refuses.
//!
//! The kubelet runs until it fails to reach a container runtime that does not exist: by then
//! it has written its start-up lines (warnings, info, and the CRI client's debug line), which
//! is what each case inspects.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the kubelet with `args` after a standalone set-up that fails at the runtime.
fn run(dir: &Path, args: &[&str]) -> Output {
    let root = dir.join("root");
    let endpoint = format!("unix://{}", dir.join("no-runtime.sock").display());
    Command::new(env!("CARGO_BIN_EXE_kubelet"))
        .arg(format!("--root-dir={}", root.display()))
        .arg(format!("--container-runtime-endpoint={endpoint}"))
        .args([
            "--cgroups-per-qos=false",
            "--enforce-node-allocatable=",
            "--fail-swap-on=false",
        ])
        .args(args)
        .output()
        .expect("running the kubelet binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const INFO_LINE: &str = "standalone mode: no --kubeconfig";
const WARN_LINE: &str = "Flag --cgroups-per-qos has been deprecated";
const DEBUG_LINE: &str = "CRI call failed";
const FAILURE: &str = "kubelet: connecting to the container runtime";

#[test]
fn a_log_file_takes_every_line_and_stderr_what_reaches_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kubelet.log");
    let file_arg = format!("--log-file={}", log.display());
    // --vmodule: the CRI client's module at 4 shows its debug line at -v=0.
    let out = run(
        dir.path(),
        &["--logtostderr=false", &file_arg, "--vmodule=client=4"],
    );
    assert!(!out.status.success());
    let file = std::fs::read_to_string(&log).unwrap();
    for want in [INFO_LINE, WARN_LINE, DEBUG_LINE] {
        assert!(file.contains(want), "{want} in the file: {file}");
    }
    let stderr = text(&out.stderr);
    assert!(stderr.contains(FAILURE), "{stderr}");
    for not in [INFO_LINE, WARN_LINE, DEBUG_LINE] {
        assert!(
            !stderr.contains(not),
            "{not} below ERROR on stderr: {stderr}"
        );
    }
    // Appended to, not replaced; WARNING and up on stderr with --stderrthreshold.
    let before = file.lines().count();
    let out = run(
        dir.path(),
        &[
            "--logtostderr=false",
            &file_arg,
            "--stderrthreshold=WARNING",
        ],
    );
    let after = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(after > before, "{before} then {after} lines");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(WARN_LINE) && !stderr.contains(INFO_LINE),
        "{stderr}"
    );
    // --alsologtostderr: everything on stderr too; a vmodule that matches nothing changes
    // nothing.
    let out = run(
        dir.path(),
        &[
            "--logtostderr=false",
            &file_arg,
            "--alsologtostderr",
            "--vmodule=manager=4",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(INFO_LINE) && stderr.contains(WARN_LINE),
        "{stderr}"
    );
    assert!(!stderr.contains(DEBUG_LINE), "{stderr}");
}

#[test]
fn with_logtostderr_the_log_file_has_no_effect_as_in_klog() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kubelet.log");
    let out = run(dir.path(), &[&format!("--log-file={}", log.display())]);
    assert!(!log.exists());
    let stderr = text(&out.stderr);
    assert!(stderr.contains(INFO_LINE), "{stderr}");
    assert!(
        stderr.contains("--log-file has no effect with --logtostderr=true"),
        "{stderr}"
    );
}

#[test]
fn skip_headers_leaves_the_message_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--skip-headers"]);
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains(INFO_LINE))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.starts_with(INFO_LINE), "{line}");
}

#[test]
fn json_lines_split_between_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &[
            "--logging-format=json",
            "--log-json-split-stream=true",
            "--feature-gates=LoggingAlphaOptions=true",
            "--v=4",
        ],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let json = |s: &str| -> Vec<serde_json::Value> {
        s.lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    };
    // The info stream: info and debug lines, and warnings (info lines at v=0 in Go's JSON).
    let info = json(&stdout);
    for want in [INFO_LINE, WARN_LINE, DEBUG_LINE] {
        assert!(
            info.iter()
                .any(|l| l["msg"].as_str().is_some_and(|m| m.starts_with(want))),
            "{want}: {stdout}"
        );
    }
    assert!(
        info.iter().all(|l| l["v"].is_u64()),
        "info lines only: {stdout}"
    );
    // The error stream: error lines only (none logged here) and the exit message.
    assert!(
        json(&stderr).iter().all(|l| l.get("v").is_none()),
        "{stderr}"
    );
    assert!(stderr.contains(FAILURE), "{stderr}");
}

#[test]
fn go_refusals_of_logging_settings() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            &["--logging-format=json", "--vmodule=client=4"][..],
            "logging.vmodule: Forbidden: Only supported for text log format",
        ),
        (
            &["--vmodule=client"][..],
            "\"client\" does not have the pattern=N format",
        ),
        (
            &["--vmodule=client=-1"][..],
            "parsing verbosity in \"client=-1\": strconv.ParseUint",
        ),
        (
            &["--log-json-split-stream=true", "--logging-format=json"][..],
            "logging.options.json.splitStream: Forbidden: Feature LoggingAlphaOptions is disabled",
        ),
        (&["--stderrthreshold=LOUD"][..], "--stderrthreshold"),
    ] {
        let out = run(dir.path(), args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(
            !stderr.contains(INFO_LINE),
            "refused before starting: {stderr}"
        );
    }
}
