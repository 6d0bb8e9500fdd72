#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsString;

use clap::CommandFactory;

use super::*;
use crate::config::{load_with_hostname, ConfigError, LoadedConfig};
use crate::flags::Flags;

/// The 164 `FLAG: --name="value"` lines the Go kubelet 1.25.4 printed on a real node.
const SEED_FLAGS: &str = include_str!("../testdata/go-1.25-flags.txt");

fn load(args: &[String]) -> Result<LoadedConfig, ConfigError> {
    let argv = std::iter::once("kubelet".to_string())
        .chain(args.iter().cloned())
        .map(OsString::from);
    load_with_hostname(argv, || Ok("node-a".into()))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The seed's flags as an operator's unit file has them ([`flags_from_go_log`]), with that
/// node's config file; its kubeconfigs are not here (standalone).
fn seed_command_line(dir: &std::path::Path) -> Vec<String> {
    let config = dir.join("kubelet-conf.yml");
    std::fs::write(
        &config,
        include_str!("../testdata/seed-kubelet-conf.yml")
            .replace("cgroupDriver: systemd", "cgroupDriver: cgroupfs"),
    )
    .unwrap();
    flags_from_go_log(SEED_FLAGS)
        .into_iter()
        .filter_map(|(name, value)| match name.as_str() {
            "config" => Some(format!("--config={}", config.display())),
            "kubeconfig" | "bootstrap-kubeconfig" => None,
            _ => Some(format!("--{name}={value}")),
        })
        .collect()
}

#[test]
fn go_flag_lines_become_a_command_line() {
    let text = "I1205 10:00:00.000000    1234 flags.go:64] FLAG: --cluster-dns=\"[10.96.0.10 10.96.0.11]\"\nFLAG: --v=\"8\"\n\
                --tls-cipher-suites=\"[]\"\nnot a flag\n--node-labels=\"a=b\"\n";
    let got = flags_from_go_log(text);
    let want: Vec<(String, String)> = [
        ("cluster-dns", "10.96.0.10,10.96.0.11"),
        ("v", "8"),
        ("tls-cipher-suites", ""),
        ("node-labels", "a=b"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(flags_from_go_log(SEED_FLAGS).len(), 164);
}

#[test]
fn the_seed_nodes_164_flags_are_all_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let line = seed_command_line(dir.path());
    assert_eq!(line.len(), 162, "164 flags less the two kubeconfigs");
    let loaded = load(&line).unwrap_or_else(|e| panic!("refused: {e}"));
    // Values of the command line and of the file arrive.
    assert_eq!(loaded.verbosity, 8);
    assert_eq!(loaded.config.cpu_manager_policy, "none");
    assert_eq!(loaded.config.oom_score_adj, -999);
    assert!(
        loaded.config.allowed_unsafe_sysctls.is_empty(),
        "pflag's empty string slice (printed \"[]\") is no sysctl, not one named \"\""
    );
    assert_eq!(
        loaded
            .node_labels
            .get("node.kubernetes.io/node")
            .map(String::as_str),
        Some("")
    );
    // Go's own deprecation lines for what that node passed at Go's defaults.
    let w = loaded.warnings.join("\n");
    assert!(
        w.contains("Flag --container-runtime has been deprecated, will be removed in 1.27 as the only valid value is 'remote'"),
        "{w}"
    );
    assert!(
        w.contains(&format!(
            "Flag --storage-driver-db has been deprecated, {CADVISOR}"
        )),
        "{w}"
    );
    assert!(w.contains("Flag --logtostderr has been deprecated"), "{w}");
    // Go deprecates every configuration flag in favour of the file.
    assert!(
        w.contains(&format!(
            "Flag --max-pods has been deprecated, {CONFIG_FILE}"
        )),
        "{w}"
    );
    // Flags at Go's defaults are not reported as unsupported settings, nor are the file's
    // fields at Go's defaults; the fields that node's file sets (eventRecordQPS 5 and
    // eventBurst 10 among them) are all acted on.
    let unsupported: Vec<&str> = loaded
        .warnings
        .iter()
        .filter(|w| w.contains("not supported by kubelet-rs"))
        .map(String::as_str)
        .collect();
    assert_eq!(unsupported, Vec::<&str>::new(), "{w}");
}

#[test]
fn every_flag_of_the_table_parses_its_default_and_none_is_declared_twice() {
    let declared: Vec<String> = Flags::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    // Go's deprecations of declared flags are looked up by the id `name` with `_` for `-`.
    for (name, _) in DECLARED_DEPRECATED {
        let arg = Flags::command()
            .get_arguments()
            .find(|a| a.get_long() == Some(name))
            .unwrap_or_else(|| panic!("--{name} is not declared"))
            .get_id()
            .to_string();
        assert_eq!(arg, name.replace('-', "_"), "--{name}'s id");
    }
    let every = serde_json::to_value(KubeletConfiguration::default()).unwrap();
    let mut seen = std::collections::HashSet::new();
    for f in TABLE {
        assert!(seen.insert(f.name), "--{} twice in the table", f.name);
        assert!(
            !declared.iter().any(|d| d == f.name),
            "--{} also in Flags",
            f.name
        );
        to_json(f, &[f.default.to_string()])
            .unwrap_or_else(|e| panic!("--{}'s default: {e}", f.name));
        if let Effect::Config(path) = f.effect {
            let found = path.split('.').try_fold(&every, |v, p| v.get(p));
            assert!(found.is_some(), "--{}: no field {path}", f.name);
        }
    }
}

#[test]
fn values_parse_as_go_parses_them() {
    let f = |name: &str| TABLE.iter().find(|f| f.name == name).unwrap();
    let v = |name: &str, values: &[&str]| to_json(f(name), &args(values));
    for (name, values, want) in [
        ("enable-server", &["True"][..], serde_json::json!(true)),
        ("enable-server", &["0"][..], serde_json::json!(false)),
        ("oom-score-adj", &["-999"][..], serde_json::json!(-999)),
        (
            "tls-cipher-suites",
            &["A,B", "C"][..],
            serde_json::json!(["A", "B", "C"]),
        ),
        ("tls-cipher-suites", &[""][..], serde_json::json!([])),
        (
            "feature-gates",
            &["A=true, B=False"][..],
            serde_json::json!({"A": true, "B": false}),
        ),
        (
            "qos-reserved",
            &["memory=50%"][..],
            serde_json::json!({"memory": "50%"}),
        ),
        (
            "cpu-manager-reconcile-period",
            &["1m30s"][..],
            serde_json::json!("1m30s"),
        ),
        (
            "reserved-memory",
            &[
                "0:memory=1Gi,hugepages-1Gi=2Gi;1:memory=512Mi",
                "2:memory=1e9",
            ][..],
            serde_json::json!([
                {"numaNode": 0, "limits": {"memory": "1Gi", "hugepages-1Gi": "2Gi"}},
                {"numaNode": 1, "limits": {"memory": "512Mi"}},
                {"numaNode": 2, "limits": {"memory": "1e9"}},
            ]),
        ),
        ("log-file-max-size", &["1800"][..], serde_json::json!(1800)),
    ] {
        assert_eq!(v(name, values).unwrap(), want, "--{name} {values:?}");
    }
    for (name, bad) in [
        ("enable-server", "yes"),
        ("oom-score-adj", "x"),
        ("iptables-drop-bit", "99999999999"),
        ("cpu-manager-reconcile-period", "10"),
        ("feature-gates", "A=maybe"),
        ("feature-gates", "A"),
        ("reserved-memory", "0:cpu=1"),
        ("reserved-memory", "memory=1Gi"),
        ("reserved-memory", "0:memory=lots"),
        ("log-file-max-size", "-1"),
    ] {
        let e = v(name, &[bad]).unwrap_err();
        assert_eq!(e.flag, f(name).name, "{bad}");
        assert!(
            e.to_string()
                .starts_with(&format!("--{name}: invalid value")),
            "{e}"
        );
    }
}

#[test]
fn configuration_flags_override_the_file_and_feature_gates_merge() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         memoryManagerPolicy: None\nstreamingConnectionIdleTimeout: 1h\nenableServer: true\n\
         featureGates: {EventedPLEG: true, MemoryQoS: true}\nauthentication: {webhook: {cacheTTL: 1m}}\n",
    )
    .unwrap();
    let c = format!("--config={}", config.display());
    let loaded = load(&args(&[
        &c,
        "--memory-manager-policy=Static",
        "--hairpin-mode=hairpin-veth",
        "--streaming-connection-idle-timeout=5m",
        "--feature-gates=MemoryQoS=false,CPUManagerPolicyAlphaOptions=true",
        "--authentication-token-webhook-cache-ttl=3m",
        "--enable-server=false",
    ]))
    .unwrap();
    let k = &loaded.config;
    assert_eq!(k.memory_manager_policy, "Static");
    assert_eq!(k.streaming_connection_idle_timeout.0.as_secs(), 300);
    assert!(!k.enable_server);
    assert_eq!(k.authentication.webhook.cache_ttl.0.as_secs(), 180);
    let gates: Vec<(&str, bool)> = k
        .feature_gates
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .collect();
    assert_eq!(
        gates,
        [
            ("CPUManagerPolicyAlphaOptions", true),
            ("EventedPLEG", true),
            ("MemoryQoS", false)
        ]
    );
    // A configuration flag kubelet-rs does not act on is reported as the file's field is.
    let w = loaded.warnings.join("\n");
    assert!(
        w.contains("KubeletConfiguration field hairpinMode is not supported by kubelet-rs; its value \"hairpin-veth\" is ignored"),
        "{w}"
    );
    // Not given on the command line: the file's value stays.
    let loaded = load(&args(&[&c])).unwrap();
    assert_eq!(
        loaded.config.streaming_connection_idle_timeout.0.as_secs(),
        3600
    );
}

#[test]
fn warnings_name_the_flag_with_gos_text() {
    for (flag, want) in [
        (
            "--cloud-provider=aws",
            "--cloud-provider=\"aws\": in-tree cloud providers are not supported by kubelet-rs",
        ),
        (
            "--housekeeping-interval=20s",
            "flag --housekeeping-interval=\"20s\" is not supported by kubelet-rs; it is ignored",
        ),
        (
            "--container-runtime=remote",
            "Flag --container-runtime has been deprecated, will be removed in 1.27 as the only valid value is 'remote' (the Go kubelet no longer has it since 1.27)",
        ),
        (
            "--containerd=/run/other/containerd.sock",
            "Flag --containerd has been deprecated, This is a cadvisor flag",
        ),
        (
            "--max-pods=50",
            "Flag --max-pods has been deprecated, This parameter should be set via the config file",
        ),
        (
            "--cpu-manager-policy=none",
            "Flag --cpu-manager-policy has been deprecated, This parameter should be set via the config file",
        ),
    ] {
        let loaded = load(&args(&[flag])).unwrap();
        assert!(
            loaded.warnings.iter().any(|w| w.starts_with(want)),
            "{flag}: {:?}",
            loaded.warnings
        );
    }
    // At Go's default, an unsupported flag warns of nothing; nor do flags Go keeps.
    let loaded = load(&args(&[
        "--cloud-provider=external",
        "--lock-file=",
        "--provider-id=",
        "--hostname-override=n",
        "--root-dir=/var/lib/kubelet",
    ]))
    .unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.lock_file, None, "--lock-file= is unset");
    let loaded = load(&args(&[
        "--lock-file=/run/kubelet.lock",
        "--exit-on-lock-contention",
    ]))
    .unwrap();
    assert_eq!(
        loaded.lock_file.as_deref(),
        Some(std::path::Path::new("/run/kubelet.lock"))
    );
    assert!(loaded.exit_on_lock_contention);
}

#[test]
fn help_and_version_are_go_boolean_flags() {
    assert!(load(&args(&["--help=false", "--version=false"])).is_ok());
    for arg in ["--help", "-h", "--help=true", "--help=1"] {
        match load(&args(&[arg])) {
            Err(ConfigError::Help(text)) => {
                assert!(
                    text.starts_with("kubelet-rs: the Kubernetes node agent"),
                    "{text}"
                );
                assert!(text.contains("--cpu-manager-policy") && text.contains("--root-dir"));
            }
            other => panic!("{arg}: {:?}", other.map(|l| l.warnings)),
        }
    }
    for arg in ["--version", "--version=true", "--version=raw"] {
        match load(&args(&[arg])) {
            Err(ConfigError::Version(text)) => assert!(text.starts_with("kubelet "), "{text}"),
            other => panic!("{arg}: {:?}", other.map(|l| l.warnings)),
        }
    }
}

#[test]
fn a_malformed_value_is_refused_naming_the_flag() {
    match load(&args(&["--feature-gates=EventedPLEG"])) {
        Err(ConfigError::FlagValue(e)) => {
            assert_eq!(
                e.to_string(),
                "--feature-gates: invalid value \"EventedPLEG\": expected key=value"
            )
        }
        other => panic!("{:?}", other.map(|l| l.warnings)),
    }
    assert!(load(&args(&["--oom-score-adj=lots"])).is_err());
}

#[test]
fn the_logging_format_flag_is_honoured_and_validated() {
    let loaded = load(&args(&["--logging-format=json"])).unwrap();
    assert_eq!(loaded.config.logging.format, "json");
    assert!(
        !loaded.warnings.iter().any(|w| w.contains("not supported")),
        "{:?}",
        loaded.warnings
    );
    match load(&args(&["--logging-format=yaml"])) {
        Err(ConfigError::Invalid { errors }) => {
            let text = format!("{errors:?}");
            assert!(text.contains("logging.format"), "{text}");
        }
        other => panic!("{:?}", other.map(|l| l.warnings)),
    }
}

#[test]
fn the_verbosity_flag_wins_over_the_file_and_vmodule_flags_add_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         logging:\n  verbosity: 3\n  vmodule:\n  - {filePattern: pod_workers, verbosity: 5}\n",
    )
    .unwrap();
    let c = format!("--config={}", config.display());
    let loaded = load(&args(&[&c])).unwrap();
    assert_eq!((loaded.verbosity, loaded.log.verbosity), (3, 3));
    assert_eq!(loaded.log.vmodule[0].file_pattern, "pod_workers");
    let loaded = load(&args(&[&c, "--v=6", "--vmodule=prober*=2,client=4"])).unwrap();
    assert_eq!((loaded.verbosity, loaded.config.logging.verbosity), (6, 6));
    let vmodule: Vec<(&str, u32)> = loaded
        .log
        .vmodule
        .iter()
        .map(|i| (i.file_pattern.as_str(), i.verbosity))
        .collect();
    assert_eq!(
        vmodule,
        [("pod_workers", 5), ("prober*", 2), ("client", 4)],
        "the flag's entries follow the file's"
    );
    assert!(
        !loaded.warnings.iter().any(|w| w.contains("vmodule")),
        "--vmodule is not deprecated: {:?}",
        loaded.warnings
    );
}

#[test]
fn the_pre_1_24_dockershim_and_dynamic_config_flags_are_accepted_and_ignored() {
    // What the v1.20 node e2e suite (test/e2e_node/services/kubelet.go) passes besides --config.
    let loaded = load(&args(&[
        "--root-dir",
        "/var/lib/kubelet",
        "--v",
        "4",
        "--logtostderr",
        "--dynamic-config-dir",
        "/w/dynamic-kubelet-config",
        "--network-plugin=kubenet",
        "--cni-bin-dir",
        "/w/cni/bin",
        "--cni-conf-dir",
        "/w/cni/net.d",
        "--cni-cache-dir",
        "/w/cni/cache",
        "--container-runtime",
        "remote",
        "--runtime-cgroups=/docker-daemon",
    ]))
    .unwrap();
    let w = loaded.warnings.join("\n");
    for flag in [
        "network-plugin",
        "cni-bin-dir",
        "cni-conf-dir",
        "cni-cache-dir",
    ] {
        assert!(
            w.contains(&format!(
                "Flag --{flag} has been deprecated, will be removed along with dockershim. (the Go kubelet no longer has it since 1.24)"
            )),
            "{w}"
        );
    }
    assert!(w.contains("Flag --dynamic-config-dir has been deprecated, Feature DynamicKubeletConfig is deprecated in 1.22"), "{w}");
    assert!(
        w.contains("flag --dynamic-config-dir=\"/w/dynamic-kubelet-config\" is not supported by kubelet-rs; it is ignored"),
        "{w}"
    );
    assert_eq!(loaded.runtime_cgroups, "/docker-daemon");
    // A malformed value is still refused, naming the flag.
    assert!(load(&args(&["--network-plugin-mtu=big"])).is_err());
}

#[test]
fn a_flag_given_twice_takes_its_last_value_and_list_flags_add_up() {
    // The node e2e suite appends its runner's --kubelet-flags after its own flags.
    let loaded = load(&args(&[
        "--runtime-cgroups=/docker-daemon",
        "--runtime-cgroups=/runtime",
        "--node-labels=a=1",
        "--node-labels=b=2",
        "--max-pods=10",
        "--max-pods=20",
    ]))
    .unwrap();
    assert_eq!(loaded.runtime_cgroups, "/runtime");
    assert_eq!(loaded.config.max_pods, 20);
    assert_eq!(loaded.node_labels.len(), 2, "{:?}", loaded.node_labels);
}
