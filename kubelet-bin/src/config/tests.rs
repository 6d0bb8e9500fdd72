//! Tests of configuration loading, precedence and validation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use std::time::Duration;

/// A file of `tests/corpus` in the checkout being tested (cargo's run-time
/// `CARGO_MANIFEST_DIR`: a test binary may have been compiled by another checkout sharing the
/// build cache).
fn corpus(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("tests/corpus")
        .join(name)
}

fn args(list: &[&str]) -> Vec<OsString> {
    std::iter::once("kubelet")
        .chain(list.iter().copied())
        .map(OsString::from)
        .collect()
}

fn load_args(list: &[&str]) -> Result<LoadedConfig, ConfigError> {
    load_with_hostname(args(list), || Ok("  My-Host\n".to_string()))
}

#[test]
fn defaults_match_go() {
    let c = KubeletConfiguration::default();
    let s = Duration::from_secs;
    let durations = [
        ("syncFrequency", c.sync_frequency.0, s(60)),
        ("fileCheckFrequency", c.file_check_frequency.0, s(20)),
        ("httpCheckFrequency", c.http_check_frequency.0, s(20)),
        (
            "cpuCFSQuotaPeriod",
            c.cpu_cfs_quota_period.0,
            Duration::from_millis(100),
        ),
        ("runtimeRequestTimeout", c.runtime_request_timeout.0, s(120)),
        (
            "nodeStatusUpdateFrequency",
            c.node_status_update_frequency.0,
            s(10),
        ),
        (
            "nodeStatusReportFrequency",
            c.node_status_report_frequency.0,
            s(300),
        ),
    ];
    for (name, got, want) in durations {
        assert_eq!(got, want, "{name}");
    }
    let ints = [
        ("port", i64::from(c.port), 10250),
        ("readOnlyPort", c.read_only_port.into(), 0),
        ("healthzPort", c.healthz_port.into(), 10248),
        ("maxPods", c.max_pods.into(), 110),
        ("podPidsLimit", c.pod_pids_limit, -1),
        (
            "nodeLeaseDurationSeconds",
            c.node_lease_duration_seconds.into(),
            40,
        ),
        (
            "imageGCHighThresholdPercent",
            c.image_gc_high_threshold_percent.into(),
            85,
        ),
        (
            "imageGCLowThresholdPercent",
            c.image_gc_low_threshold_percent.into(),
            80,
        ),
        ("kubeAPIQPS", c.kube_api_qps.into(), 50),
        ("kubeAPIBurst", c.kube_api_burst.into(), 100),
    ];
    for (name, got, want) in ints {
        assert_eq!(got, want, "{name}");
    }
    assert_eq!(c.address, "0.0.0.0");
    assert_eq!(c.healthz_bind_address, "127.0.0.1");
    assert_eq!(c.resolv_conf, "/etc/resolv.conf");
    assert_eq!(c.cgroup_driver, "cgroupfs");
    assert!(c.cgroups_per_qos && c.cpu_cfs_quota && c.fail_swap_on);
    assert!(c.serialize_image_pulls && c.register_node);
    assert_eq!(c.enforce_node_allocatable, ["pods"]);
    assert_eq!(c.eviction_hard, types::default_eviction_hard());
    assert_eq!(c.eviction_hard["memory.available"], "100Mi");
    assert!(!c.authentication.anonymous.enabled);
    assert!(c.authentication.webhook.enabled);
    assert_eq!(c.authorization.mode, "Webhook");
    assert_eq!(
        c.container_runtime_endpoint,
        "unix:///run/containerd/containerd.sock"
    );
    assert!(validate::validate(&c).is_empty());
}

#[test]
fn empty_file_equals_defaults_and_serializes_go_durations() {
    let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let f = parse_config(text.as_bytes(), Path::new("/etc/k/config.yaml")).unwrap();
    assert_eq!(f.config, KubeletConfiguration::default());
    assert!(f.warnings.is_empty());
    let v = serde_json::to_value(&f.config).unwrap();
    assert_eq!(v["syncFrequency"], "1m0s");
    assert_eq!(v["cpuCFSQuotaPeriod"], "100ms");
    assert_eq!(v["runtimeRequestTimeout"], "2m0s");
}

#[test]
fn no_config_file_uses_flag_defaults_and_legacy_defaults() {
    let l = load_args(&[]).unwrap();
    assert_eq!(l.node_name, "my-host");
    assert_eq!(l.root_dir, PathBuf::from("/var/lib/kubelet"));
    assert_eq!(l.config.read_only_port, 10255);
    assert!(l.config.authentication.anonymous.enabled);
    assert_eq!(l.config.authorization.mode, "AlwaysAllow");
    assert_eq!(l.config.sync_frequency.0, Duration::from_secs(60));
    assert_eq!(
        l.runtime_endpoint(),
        "unix:///run/containerd/containerd.sock"
    );
    assert_eq!(l.image_endpoint(), l.runtime_endpoint());
    assert!(l.file_source_config().is_none() && l.http_source_config().is_none());
    assert_eq!(l.verbosity, 0);
    assert!(!l.runonce);
}

#[test]
fn yaml_file_loads_with_warnings_and_relative_paths() {
    let path = corpus("full.yaml");
    let l = load_args(&["--config", path.to_str().unwrap()]).unwrap();
    let c = &l.config;
    assert_eq!(c.sync_frequency.0, Duration::from_secs(30));
    assert_eq!(c.http_check_frequency.0, Duration::from_secs(90));
    assert_eq!(c.max_pods, 20);
    assert_eq!(c.cluster_dns, ["10.96.0.10"]);
    assert_eq!(c.kube_reserved["memory"], "256Mi");
    // A given evictionHard map replaces the defaults.
    assert_eq!(c.eviction_hard.len(), 1);
    assert_eq!(c.register_with_taints[0].effect, "NoSchedule");
    // Relative paths are relative to the file's directory.
    assert_eq!(
        PathBuf::from(&c.static_pod_path),
        path.parent().unwrap().join("manifests")
    );
    // A config file means no legacy defaults: readOnlyPort stays 0.
    assert_eq!(c.read_only_port, 0);
    assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
    // A Go field kubelet-rs parses but does not act on, set to other than Go's default; the
    // file's `logging: {format: json}`, `cpuManagerPolicy: static`,
    // `topologyManagerPolicy: best-effort`, `memoryManagerPolicy: Static` and its
    // `reservedMemory` are honoured.
    assert!(l.warnings[0].contains("field hairpinMode is not supported by kubelet-rs"));
    assert_eq!(c.logging.format, "json");
    let e = l.engine_config();
    assert_eq!(
        e.cpu_manager.policy,
        kubelet_core::cpumanager::CpuManagerPolicy::Static
    );
    assert_eq!(e.cpu_manager.reconcile_period, Duration::from_secs(10));
    assert_eq!(
        e.memory_manager.policy,
        kubelet_core::memorymanager::MemoryManagerPolicy::Static
    );
    assert_eq!(e.memory_manager.reserved_memory[&0]["memory"], 1 << 30);
    assert_eq!(
        e.topology_manager_policy,
        kubelet_core::topologymanager::TopologyPolicy::BestEffort
    );
    assert_eq!(e.max_pods, 20);
    assert_eq!(e.sync_frequency, Duration::from_secs(30));
    assert_eq!(e.node_name, "my-host");
    assert!(!e.serialize_image_pulls);
    assert_eq!(e.max_parallel_image_pulls, Some(3));
    assert_eq!(e.cluster_domain, "cluster.local");
    let fs = l.file_source_config().unwrap();
    assert_eq!(fs.check_frequency, Duration::from_secs(5));
    let hs = l.http_source_config().unwrap();
    assert_eq!(
        hs.headers,
        [("Authorization".to_string(), "Bearer x".to_string())]
    );
    assert_eq!(hs.check_frequency, Duration::from_secs(90));
}

#[test]
fn json_file_loads() {
    let path = corpus("minimal.json");
    let l = load_args(&["--config", path.to_str().unwrap()]).unwrap();
    assert_eq!(l.config.max_pods, 50);
    assert_eq!(l.config.sync_frequency.0, Duration::from_secs(10));
    assert_eq!(l.config.port, 10250);
}

#[test]
fn explicit_flags_override_the_file_and_others_do_not() {
    let path = corpus("full.yaml");
    let l = load_args(&[
        "--config",
        path.to_str().unwrap(),
        "--max-pods=7",
        "--sync-frequency",
        "5s",
        "--fail-swap-on=false",
        "--cluster-dns=1.1.1.1,8.8.8.8",
        "--kube-reserved",
        "cpu=1",
        "--eviction-hard=memory.available<1Gi,nodefs.available<5%",
        "--manifest-url-header=a:1,b:2",
        "--manifest-url-header",
        "a:3",
        "--register-node=false",
        "--hostname-override",
        "Edge-1",
        "--node-ip=192.168.1.5",
        "--node-labels=zone=a,tier=edge",
        "--root-dir=/var/lib/kubelet-rs",
        "--runonce",
        "-v",
        "4",
        "--container-runtime-endpoint=unix:///x.sock",
    ])
    .unwrap();
    let c = &l.config;
    assert_eq!(c.max_pods, 7);
    assert_eq!(c.sync_frequency.0, Duration::from_secs(5));
    assert!(!c.fail_swap_on);
    assert_eq!(c.cluster_dns, ["1.1.1.1", "8.8.8.8"]);
    assert_eq!(c.kube_reserved.len(), 1);
    assert_eq!(c.eviction_hard["nodefs.available"], "5%");
    assert_eq!(c.static_pod_url_header["a"], ["1", "3"]);
    assert!(!c.register_node);
    assert_eq!(c.container_runtime_endpoint, "unix:///x.sock");
    // Not given on the command line: the file's values stay (not the flag defaults).
    assert_eq!(c.http_check_frequency.0, Duration::from_secs(90));
    assert_eq!(c.port, 11250);
    assert_eq!(c.read_only_port, 0);
    assert!(c.authentication.anonymous.enabled);
    assert_eq!(l.node_name, "edge-1");
    assert_eq!(l.node_ips, ["192.168.1.5".parse::<IpAddr>().unwrap()]);
    assert_eq!(l.node_labels["tier"], "edge");
    assert_eq!(l.root_dir, PathBuf::from("/var/lib/kubelet-rs"));
    assert!(l.runonce);
    assert_eq!(l.verbosity, 4);
    let e = l.engine_config();
    assert_eq!(e.node_labels.len(), 2);
    assert_eq!(e.root_dir, PathBuf::from("/var/lib/kubelet-rs"));
}

#[test]
fn broken_files_table() {
    let head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let cases: &[(&str, String)] = &[
        (
            "kind: required value",
            "apiVersion: kubelet.config.k8s.io/v1beta1\n".into(),
        ),
        (
            "kind: must be \"KubeletConfiguration\"",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n".into(),
        ),
        (
            "apiVersion: must be \"kubelet.config.k8s.io/v1beta1\"",
            "apiVersion: v1\nkind: KubeletConfiguration\n".into(),
        ),
        ("cannot parse", format!("{head}maxPods: [1\n")),
        ("cannot parse", "just text".into()),
        (
            "syncFrequency: invalid duration \"1x\": unknown unit",
            format!("{head}syncFrequency: 1x\n"),
        ),
        (
            "syncFrequency: invalid duration \"60\": missing unit",
            format!("{head}syncFrequency: \"60\"\n"),
        ),
        ("maxPods: invalid type", format!("{head}maxPods: lots\n")),
        (
            "podLogsDir: \"logs\" must be an absolute path",
            format!("{head}podLogsDir: logs\n"),
        ),
        (
            "podLogsDir: \"/var/log/../pods\" must be a normalized path",
            format!("{head}podLogsDir: /var/log/../pods\n"),
        ),
        (
            "authentication.anonymous.enabled: invalid type",
            format!("{head}authentication: {{anonymous: {{enabled: maybe}}}}\n"),
        ),
        (
            "syncFrequency: must be greater than 0",
            format!("{head}syncFrequency: 0s\n"),
        ),
        (
            "fileCheckFrequency: must be greater than 0",
            format!("{head}fileCheckFrequency: \"0\"\n"),
        ),
        (
            "maxPods: must not be negative",
            format!("{head}maxPods: -1\n"),
        ),
        (
            "cgroupDriver: unsupported value \"openrc\" (supported: cgroupfs, systemd)",
            format!("{head}cgroupDriver: openrc\n"),
        ),
        (
            "configMapAndSecretChangeDetectionStrategy: unsupported value \"Informer\" (supported: Watch, Cache, Get)",
            format!("{head}configMapAndSecretChangeDetectionStrategy: Informer\n"),
        ),
        (
            "kubeReserved.memory: invalid quantity \"1Gb\"",
            format!("{head}kubeReserved: {{memory: 1Gb}}\n"),
        ),
        (
            "systemReserved.gpu: unsupported resource",
            format!("{head}systemReserved: {{gpu: \"1\"}}\n"),
        ),
        (
            "evictionHard.memory.available: invalid quantity",
            format!("{head}evictionHard: {{memory.available: lots}}\n"),
        ),
        (
            "evictionHard.nodefs.available: \"120%\" is not a percentage",
            format!("{head}evictionHard: {{nodefs.available: 120%}}\n"),
        ),
        (
            "evictionHard.disk.available: unknown eviction signal",
            format!("{head}evictionHard: {{disk.available: 1Gi}}\n"),
        ),
        (
            "port: 70000 must be between 1 and 65535",
            format!("{head}port: 70000\n"),
        ),
        (
            "healthzPort: -2 must be 0 (disabled)",
            format!("{head}healthzPort: -2\n"),
        ),
        (
            "address: \"localhost\" is not a valid IP address",
            format!("{head}address: localhost\n"),
        ),
        (
            "clusterDNS[1]: \"dns\" is not a valid IP address",
            format!("{head}clusterDNS: [10.0.0.10, dns]\n"),
        ),
        (
            "imageGCLowThresholdPercent: 90 must be less than",
            format!("{head}imageGCLowThresholdPercent: 90\n"),
        ),
        (
            "cpuCFSQuotaPeriod: 2s must be between 1ms and 1s",
            format!("{head}cpuCFSQuotaPeriod: 2s\n"),
        ),
        (
            "podPidsLimit: must be -1 (unlimited) or greater",
            format!("{head}podPidsLimit: -5\n"),
        ),
        (
            "reservedSystemCPUs: bad CPU",
            format!("{head}reservedSystemCPUs: \"0-x\"\n"),
        ),
        (
            "cpuManagerPolicy: unknown policy: \"Static\"",
            format!("{head}cpuManagerPolicy: Static\n"),
        ),
        (
            "cpuManagerReconcilePeriod: must be greater than 0",
            format!("{head}cpuManagerReconcilePeriod: 0s\n"),
        ),
        (
            "topologyManagerPolicy: unknown policy: \"numa\"",
            format!("{head}topologyManagerPolicy: numa\n"),
        ),
        (
            "topologyManagerScope: unknown scope: \"node\"",
            format!("{head}topologyManagerScope: node\n"),
        ),
        (
            "enforceNodeAllocatable: is not supported unless cgroupsPerQOS is true",
            format!("{head}cgroupsPerQOS: false\n"),
        ),
        (
            "enforceNodeAllocatable[0]: \"system-reserved\" requires systemReservedCgroup",
            format!("{head}enforceNodeAllocatable: [system-reserved]\n"),
        ),
        (
            "registerWithTaints[0].effect: unsupported value",
            format!("{head}registerWithTaints: [{{key: a, effect: Never}}]\n"),
        ),
        (
            "authorization.mode: unsupported value \"RBAC\"",
            format!("{head}authorization: {{mode: RBAC}}\n"),
        ),
        (
            "maxParallelImagePulls: must be 1 (or unset) when serializeImagePulls is true",
            format!("{head}maxParallelImagePulls: 4\n"),
        ),
        (
            "tlsPrivateKeyFile: tlsCertFile and tlsPrivateKeyFile must be set together",
            format!("{head}tlsCertFile: /a.crt\n"),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (expect, text)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("case{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let err = load_args(&["--config", path.to_str().unwrap()])
            .err()
            .unwrap_or_else(|| panic!("case {i} ({expect}) loaded"));
        let msg = err.to_string();
        assert!(msg.contains(expect), "case {i}: {msg:?} lacks {expect:?}");
        if !matches!(err, ConfigError::Invalid { .. }) {
            assert!(
                msg.contains(path.to_str().unwrap()),
                "case {i}: {msg} does not name the file"
            );
        }
    }
}

#[test]
fn broken_command_lines_table() {
    let cases: &[(&[&str], &str)] = &[
        (&["--max-pods=-3"], "maxPods: must not be negative"),
        (
            &["--sync-frequency=0s"],
            "syncFrequency: must be greater than 0",
        ),
        (&["--sync-frequency=soon"], "invalid duration \"soon\""),
        (
            &["--cgroup-driver=runit"],
            "cgroupDriver: unsupported value \"runit\"",
        ),
        (
            &["--kube-reserved=cpu"],
            "--kube-reserved: invalid value \"cpu\": expected key=value",
        ),
        (
            &["--kube-reserved=memory=lots"],
            "kubeReserved.memory: invalid quantity",
        ),
        (
            &["--eviction-hard=memory.available=1Gi"],
            "--eviction-hard: invalid value",
        ),
        (
            &["--manifest-url-header=nocolon"],
            "--manifest-url-header: invalid value",
        ),
        (
            &["--register-with-taints=a=b:Sometimes"],
            "--register-with-taints: invalid value",
        ),
        (&["--node-ip=not-an-ip"], "--node-ip: invalid value"),
        (&["--node-labels=novalue"], "--node-labels: invalid value"),
        (&["-v", "11"], "11"),
        (&["--no-such-flag"], "--no-such-flag"),
        (
            &["--config=/nonexistent/kubelet.yaml"],
            "reading config file /nonexistent/kubelet.yaml",
        ),
        (&["--cluster-dns=10.0.0.1,bad"], "clusterDNS[1]"),
        (&["--hostname-override= "], "empty hostname is invalid"),
    ];
    for (argv, expect) in cases {
        let err = load_with_hostname(args(argv), || Ok(" ".into()))
            .err()
            .unwrap_or_else(|| panic!("{argv:?} loaded"));
        assert!(
            err.to_string().contains(expect),
            "{argv:?}: {err} lacks {expect:?}"
        );
    }
}

#[test]
fn hostname_is_required_when_not_overridden() {
    let err = load_with_hostname(args(&[]), || Err("no host".into())).unwrap_err();
    assert!(matches!(err, ConfigError::NodeName { .. }), "{err}");
    let ok =
        load_with_hostname(args(&["--hostname-override=N1"]), || Err("unused".into())).unwrap();
    assert_eq!(ok.node_name, "n1");
}

#[test]
fn bool_flags_accept_pflag_forms() {
    for (argv, want) in [
        (&["--fail-swap-on=false"][..], false),
        (&["--fail-swap-on"][..], true),
        (&["--fail-swap-on=true"][..], true),
        (&[][..], true),
    ] {
        let l = load_args(argv).unwrap();
        assert_eq!(l.config.fail_swap_on, want, "{argv:?}");
    }
    let l = load_args(&["--v=3", "--runonce=false"]).unwrap();
    assert_eq!(l.verbosity, 3);
    assert!(!l.runonce);
}

#[test]
fn help_and_version_are_displayed_not_refused() {
    for flag in ["--help", "--version"] {
        match load_args(&[flag]) {
            Err(ConfigError::Help(text) | ConfigError::Version(text)) => {
                assert!(text.contains("kubelet"), "{text}")
            }
            other => panic!("{flag}: {other:?}"),
        }
    }
}

#[test]
fn alias_bombs_and_deep_nesting_are_refused() {
    let mut bomb = String::from("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\na0: &a0 [x,x,x,x,x,x,x,x,x,x]\n");
    for i in 1..9 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
        ));
    }
    let started = kubelet_core::clock::monotonic_now();
    let err = parse_config(bomb.as_bytes(), Path::new("/c.yaml")).unwrap_err();
    assert!(err.to_string().contains("alias"), "{err}");
    assert!(kubelet_core::clock::elapsed(started) < Duration::from_secs(2));
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    let err = parse_config(deep.as_bytes(), Path::new("/c.json")).unwrap_err();
    assert!(err.to_string().contains("nested deeper"), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

    /// Any bytes: a configuration or an error, never a panic.
    #[test]
    fn any_config_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
        let _ = parse_config(&bytes, Path::new("/c.yaml"));
    }

    /// Config-shaped YAML with random values for known fields.
    #[test]
    fn config_shaped(
        field in proptest::sample::select(vec!["syncFrequency", "maxPods", "staticPodPath", "port", "address", "authentication", "evictionHard", "kubeReserved", "registerWithTaints", "cpuCFSQuotaPeriod", "imageGCHighThresholdPercent"]),
        value in "(-?[0-9]{1,25}(\\.[0-9]{0,5})?(ns|s|m|h|Mi|e99)?|\\[\\]|\\{\\}|true|null|\"[a-z/ ]{0,8}\"|&a x|\\*a)",
    ) {
        let text = format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{field}: {value}\n");
        let _ = parse_config(text.as_bytes(), Path::new("/c.yaml"));
    }
}

#[test]
fn node_self_protection_settings_reach_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubelet.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         evictionSoft: {memory.available: 1Gi}\n\
         evictionSoftGracePeriod: {memory.available: 1m30s}\n\
         evictionMaxPodGracePeriod: 20\n\
         imageMaximumGCAge: 48h\n\
         containerLogMaxSize: 1Mi\n\
         containerLogMaxFiles: 3\n\
         containerLogMaxWorkers: 2\n\
         containerLogMonitorInterval: 5s\n\
         maxOpenFiles: 4096\n",
    )
    .unwrap();
    let l = load_args(&[
        "--config",
        file.to_str().unwrap(),
        "--eviction-hard=memory.available<500Mi",
        "--eviction-minimum-reclaim=memory.available=100Mi",
        "--eviction-pressure-transition-period=30s",
        "--minimum-image-ttl-duration=5m",
        "--image-gc-high-threshold=90",
        "--pod-infra-container-image=registry.local/pause:9",
        "--minimum-container-ttl-duration=1m",
        "--maximum-dead-containers-per-container=2",
        "--maximum-dead-containers=50",
    ])
    .unwrap();
    let e = l.engine_config();
    assert_eq!(e.eviction.hard["memory.available"], "500Mi");
    assert_eq!(e.eviction.soft["memory.available"], "1Gi");
    assert_eq!(
        e.eviction.soft_grace_period["memory.available"],
        Duration::from_secs(90)
    );
    assert_eq!(e.eviction.minimum_reclaim["memory.available"], "100Mi");
    assert_eq!(
        e.eviction.pressure_transition_period,
        Duration::from_secs(30)
    );
    assert_eq!(e.eviction.max_pod_grace_period_seconds, 20);
    assert!(e.eviction.enforce_pods_allocatable);
    assert_eq!(
        e.eviction.thresholds().unwrap().len(),
        3,
        "hard, soft, allocatable copy"
    );
    assert_eq!(e.image_gc.high_threshold_percent, 90);
    assert_eq!(e.image_gc.min_age, Duration::from_secs(300));
    assert_eq!(e.image_gc.max_age, Duration::from_secs(48 * 3600));
    assert_eq!(e.image_gc.pinned_images, ["registry.local/pause:9"]);
    assert_eq!(e.container_logs.max_size, 1 << 20);
    assert_eq!(e.container_logs.max_files, 3);
    assert_eq!(e.container_logs.max_workers, 2);
    assert_eq!(e.container_logs.monitor_interval, Duration::from_secs(5));
    assert_eq!(e.minimum_container_ttl, Duration::from_secs(60));
    assert_eq!(e.max_dead_containers_per_container, 2);
    assert_eq!(e.maximum_dead_containers, 50);
    // The setting kubelet-rs does not honour is named in one warning line.
    let named: Vec<&String> = l
        .warnings
        .iter()
        .filter(|w| w.contains("maxOpenFiles"))
        .collect();
    assert_eq!(named.len(), 1, "{:?}", l.warnings);
    assert!(named[0].contains("not supported by kubelet-rs"));

    // Go's defaults.
    let d = load_args(&[]).unwrap().engine_config();
    assert_eq!(d.eviction.hard.len(), 4);
    assert_eq!(d.image_gc.high_threshold_percent, 85);
    assert_eq!(d.image_gc.pinned_images, ["k8s.gcr.io/pause:3.2"]);
    assert_eq!(d.container_logs.max_size, 10 << 20);
    assert_eq!(d.max_dead_containers_per_container, 1);
    assert_eq!(d.maximum_dead_containers, -1);

    // Refused as Go refuses them.
    for (flags, want) in [
        (
            vec!["--eviction-soft=memory.available<1Gi"],
            "grace period must be specified",
        ),
        (
            vec!["--eviction-soft-grace-period=memory.available=soon"],
            "evictionSoftGracePeriod.memory.available",
        ),
        (
            vec!["--container-log-max-files=1"],
            "containerLogMaxFiles: 1 must be greater than 1",
        ),
        (vec!["--container-log-max-size=big"], "containerLogMaxSize"),
    ] {
        let err = load_args(&flags).unwrap_err().to_string();
        assert!(err.contains(want), "{flags:?}: {err}");
    }
}

#[test]
fn the_evented_pleg_gate_turns_the_evented_pleg_on() {
    let head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let dir = tempfile::tempdir().unwrap();
    for (gates, want) in [
        ("", false),
        ("featureGates:\n  EventedPLEG: false\n", false),
        ("featureGates:\n  EventedPLEG: true\n", true),
    ] {
        let path = dir.path().join("gates.yaml");
        std::fs::write(&path, format!("{head}{gates}")).unwrap();
        let l = load_args(&["--config", path.to_str().unwrap()]).unwrap();
        assert_eq!(l.engine_config().evented_pleg, want, "{gates:?}");
    }
}

#[test]
fn pod_logs_dir_reaches_the_engine() {
    let head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let dir = tempfile::tempdir().unwrap();
    for (line, want) in [
        ("", "/var/log/pods"),
        (
            "podLogsDir: /var/lib/kubelet-two/pod-logs\n",
            "/var/lib/kubelet-two/pod-logs",
        ),
    ] {
        let path = dir.path().join("logs.yaml");
        std::fs::write(&path, format!("{head}{line}")).unwrap();
        let l = load_args(&["--config", path.to_str().unwrap()]).unwrap();
        assert_eq!(
            l.engine_config().pod_logs_dir,
            PathBuf::from(want),
            "{line:?}"
        );
    }
}

#[test]
fn tracing_configuration_is_validated_as_component_base_does() {
    let head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    let dir = tempfile::tempdir().unwrap();
    let load = |body: &str| {
        let path = dir.path().join("tracing.yaml");
        std::fs::write(&path, format!("{head}{body}")).unwrap();
        load_args(&["--config", path.to_str().unwrap()])
    };
    // Valid: defaults, a host:port, dns and unix targets, the whole sampling range.
    for body in [
        "tracing: {}\n",
        "tracing:\n  endpoint: otel.monitoring:4317\n  samplingRatePerMillion: 1000000\n",
        "tracing:\n  endpoint: dns:///otel:4317\n  samplingRatePerMillion: 0\n",
        "tracing:\n  endpoint: unix:///run/otel.sock\n",
        "featureGates:\n  KubeletTracing: true\ntracing: {}\n",
    ] {
        let l = load(body).unwrap_or_else(|e| panic!("{body:?}: {e}"));
        assert!(l.config.tracing.is_some(), "{body:?}");
        assert!(
            !l.warnings
                .iter()
                .any(|w| (w.contains("tracing") || w.contains("KubeletTracing"))
                    && !w.starts_with("Setting GA feature gate KubeletTracing=true")),
            "{body:?}: {:?}",
            l.warnings
        );
    }
    let l = load("tracing:\n  samplingRatePerMillion: 250000\n").unwrap();
    assert_eq!(
        crate::telemetry::sampling_ratio(l.config.tracing.as_ref().unwrap()),
        0.25
    );
    assert_eq!(
        crate::telemetry::sampling_ratio(&types::TracingConfiguration::default()),
        0.0
    );
    // Invalid: the error names the field and says why.
    for (body, want) in [
        (
            "tracing:\n  samplingRatePerMillion: -1\n",
            "tracing.samplingRatePerMillion: -1: sampling rate must be positive",
        ),
        (
            "tracing:\n  samplingRatePerMillion: 1000001\n",
            "tracing.samplingRatePerMillion: 1000001: sampling rate per million must be less than or equal to one million",
        ),
        (
            "tracing:\n  endpoint: http://otel:4317\n",
            "tracing.endpoint: \"http://otel:4317\": unsupported scheme: http",
        ),
        (
            "tracing:\n  endpoint: otel\n",
            "tracing.endpoint: \"otel\": missing port",
        ),
        (
            "tracing:\n  endpoint: otel:99999\n",
            "tracing.endpoint: \"otel:99999\": invalid port",
        ),
        (
            // GA and locked on since 1.34: the gate cannot be turned off any more.
            "featureGates:\n  KubeletTracing: false\ntracing: {}\n",
            "failed to set feature gates from initial flags-based config: cannot set feature gate KubeletTracing to false, feature is locked to true",
        ),
    ] {
        let err = load(body).unwrap_err().to_string();
        assert!(err.contains(want), "{body:?}: {err}");
    }
}
