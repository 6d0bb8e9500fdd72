//! `--config-dir` through the whole loader: precedence against `--config` and the flags,
//! errors and warnings naming the drop-in file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;

use crate::config::{load_with_hostname, ConfigError, LoadedConfig};

const HEAD: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

fn write(dir: &Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

fn load(args: &[String]) -> Result<LoadedConfig, ConfigError> {
    let argv = std::iter::once("kubelet".to_string())
        .chain(args.iter().cloned())
        .map(OsString::from);
    load_with_hostname(argv, || Ok("node".to_string()))
}

#[test]
fn drop_ins_merge_over_the_file_in_order_and_flags_win() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    write(
        d,
        "kubelet.yaml",
        &format!(
            "{HEAD}maxPods: 50\nclusterDNS: [10.0.0.10]\nevictionHard:\n  memory.available: 100Mi\n  \
             nodefs.available: 10%\nfeatureGates:\n  EventedPLEG: false\nstaticPodPath: manifests\n\
             podPidsLimit: 100\n"
        ),
    );
    // 10: a scalar, one map key, a list replaced whole; 20: a later file wins, `null`
    // removes a field (back to its default); sub/ sorts after 20-*.
    write(
        d,
        "conf.d/10-base.conf",
        &format!(
            "{HEAD}maxPods: 60\nclusterDNS: [10.0.0.53, 10.0.0.54]\nevictionHard:\n  \
             memory.available: 200Mi\nfeatureGates:\n  EventedPLEG: true\nsyncFrequency: 30s\n"
        ),
    );
    write(
        d,
        "conf.d/20-site.conf",
        &format!("{HEAD}maxPods: 70\npodPidsLimit: null\n"),
    );
    write(
        d,
        "conf.d/sub/30-last.conf",
        &format!("{HEAD}maxPods: 80\n"),
    );
    write(d, "conf.d/99-ignored.yaml", &format!("{HEAD}maxPods: 1\n"));
    let file = d.join("kubelet.yaml").display().to_string();
    let dir = d.join("conf.d").display().to_string();
    let loaded = load(&[format!("--config={file}"), format!("--config-dir={dir}")]).unwrap();
    let c = &loaded.config;
    assert_eq!(c.max_pods, 80);
    assert_eq!(c.cluster_dns, ["10.0.0.53", "10.0.0.54"]);
    assert_eq!(
        c.eviction_hard,
        BTreeMap::from([
            ("memory.available".to_string(), "200Mi".to_string()),
            ("nodefs.available".to_string(), "10%".to_string()),
        ])
    );
    assert_eq!(c.feature_gates.get("EventedPLEG"), Some(&true));
    assert_eq!(c.sync_frequency.0, std::time::Duration::from_secs(30));
    assert_eq!(c.pod_pids_limit, -1, "null: back to the default");
    assert_eq!(
        c.static_pod_path,
        d.join("manifests").display().to_string(),
        "the main file's relative path stays resolved against its directory"
    );
    // The command line beats every file.
    let loaded = load(&[
        format!("--config={file}"),
        format!("--config-dir={dir}"),
        "--max-pods=90".into(),
    ])
    .unwrap();
    assert_eq!(loaded.config.max_pods, 90);
}

#[test]
fn drop_ins_without_a_config_file_apply_over_the_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "a.conf", &format!("{HEAD}maxPods: 42\n"));
    let loaded = load(&[format!("--config-dir={}", tmp.path().display())]).unwrap();
    assert_eq!(loaded.config.max_pods, 42);
    let empty = tempfile::tempdir().unwrap();
    let defaults = load(&[]).unwrap();
    let loaded = load(&[format!("--config-dir={}", empty.path().display())]).unwrap();
    assert_eq!(
        loaded.config, defaults.config,
        "an empty directory changes nothing"
    );
    let loaded = load(&["--config-dir=".to_string()]).unwrap();
    assert_eq!(loaded.config, defaults.config, "an empty flag is unset");
}

#[test]
fn a_bad_drop_in_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let dir_arg = format!("--config-dir={}", d.display());
    let cases = [
        ("maxPods: 5\n", "kind: required value"),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n",
            "kind: must be \"KubeletConfiguration\", got \"Pod\"",
        ),
        ("{HEAD}maxPods: many\n", "maxPods: invalid type"),
        ("{HEAD}maxPods: [\n", "cannot parse"),
    ];
    for (body, want) in cases {
        write(d, "10-bad.conf", &body.replace("{HEAD}", HEAD));
        let err = load(std::slice::from_ref(&dir_arg))
            .expect_err(body)
            .to_string();
        let file = d.join("10-bad.conf").display().to_string();
        assert!(err.contains(&file) && err.contains(want), "{body:?}: {err}");
    }
    let missing = format!("--config-dir={}", d.join("absent").display());
    let err = load(&[missing]).expect_err("missing dir").to_string();
    assert!(
        err.starts_with("failed to walk through kubelet dropin directory"),
        "{err}"
    );
}

#[test]
fn unknown_fields_of_a_drop_in_are_reported_with_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "a.conf",
        &format!("{HEAD}maxPods: 42\nnoSuchField: 1\n"),
    );
    let loaded = load(&[format!("--config-dir={}", tmp.path().display())]).unwrap();
    let file = tmp.path().join("a.conf").display().to_string();
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains(&file) && w.contains("noSuchField")),
        "{:?}",
        loaded.warnings
    );
}
