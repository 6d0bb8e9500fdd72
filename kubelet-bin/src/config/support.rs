//! No silent settings: which `KubeletConfiguration` fields kubelet-rs honours, and the one
//! warning line for each field an operator set that it does not.
//!
//! Every field of [`KubeletConfiguration`] is in [`FIELDS`] (a test checks the list against
//! the type). A field marked [`Support::Ignored`] whose value differs from its default is
//! reported at start-up ([`unsupported_settings`]); unknown fields of a configuration file
//! are reported when it is parsed; flags the Go kubelet does not have are refused (every flag
//! it has is accepted: [`crate::go_flags`]). The README's table is this list.

use serde_json::Value;

use super::types::KubeletConfiguration;

/// Whether kubelet-rs honours a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Honoured as the Go kubelet does.
    Honoured,
    /// Parsed and validated, but without effect in kubelet-rs (reported when set).
    Ignored,
}

/// Every `KubeletConfiguration` field kubelet-rs parses, by its name in the file, and whether
/// it is honoured.
pub const FIELDS: &[(&str, Support)] = {
    use Support::{Honoured as H, Ignored as I};
    &[
        ("apiVersion", H),
        ("kind", H),
        ("enableServer", H),
        ("staticPodPath", H),
        ("podLogsDir", H),
        ("staticPodURL", H),
        ("staticPodURLHeader", H),
        ("syncFrequency", H),
        ("fileCheckFrequency", H),
        ("httpCheckFrequency", H),
        ("address", H),
        ("port", H),
        ("readOnlyPort", H),
        ("tlsCertFile", H),
        ("tlsPrivateKeyFile", H),
        ("tlsMinVersion", H),
        ("tlsCipherSuites", H),
        ("authentication", H),
        ("authorization", H),
        ("registryPullQPS", I),
        ("registryBurst", I),
        ("eventRecordQPS", H),
        ("eventBurst", H),
        ("enableDebuggingHandlers", H),
        ("healthzPort", H),
        ("healthzBindAddress", H),
        ("oomScoreAdj", H),
        ("clusterDomain", H),
        ("clusterDNS", H),
        ("streamingConnectionIdleTimeout", H),
        ("nodeStatusUpdateFrequency", H),
        ("nodeStatusReportFrequency", H),
        ("nodeLeaseDurationSeconds", H),
        ("imageMinimumGCAge", H),
        ("imageGCHighThresholdPercent", H),
        ("imageGCLowThresholdPercent", H),
        ("imageMaximumGCAge", H),
        ("volumeStatsAggPeriod", H),
        ("cgroupsPerQOS", H),
        ("configMapAndSecretChangeDetectionStrategy", H),
        ("cgroupDriver", H),
        ("cgroupRoot", H),
        ("runtimeRequestTimeout", H),
        ("maxPods", H),
        ("podPidsLimit", H),
        ("resolvConf", H),
        ("cpuCFSQuota", H),
        ("cpuCFSQuotaPeriod", H),
        ("maxOpenFiles", I),
        ("kubeAPIQPS", H),
        ("kubeAPIBurst", H),
        ("serializeImagePulls", H),
        ("maxParallelImagePulls", H),
        ("evictionHard", H),
        ("evictionSoft", H),
        ("evictionSoftGracePeriod", H),
        ("evictionPressureTransitionPeriod", H),
        ("evictionMaxPodGracePeriod", H),
        ("evictionMinimumReclaim", H),
        ("failSwapOn", H),
        ("containerLogMaxSize", H),
        ("containerLogMaxFiles", H),
        ("containerLogMaxWorkers", H),
        ("containerLogMonitorInterval", H),
        ("systemReserved", H),
        ("kubeReserved", H),
        ("systemReservedCgroup", H),
        ("kubeReservedCgroup", H),
        ("reservedSystemCPUs", H),
        ("enforceNodeAllocatable", H),
        ("registerNode", H),
        ("registerWithTaints", H),
        ("containerRuntimeEndpoint", H),
        ("imageServiceEndpoint", H),
        ("shutdownGracePeriod", H),
        ("shutdownGracePeriodCriticalPods", H),
        ("shutdownGracePeriodByPodPriority", H),
        ("featureGates", H),
        ("allowedUnsafeSysctls", H),
        ("enableSystemLogHandler", H),
        ("enableProfilingHandler", H),
        ("enableDebugFlagsHandler", H),
        ("seccompDefault", H),
        ("rotateCertificates", H),
        ("serverTLSBootstrap", H),
        ("tracing", H),
        ("providerID", H),
        ("nodeStatusMaxImages", H),
        ("logging", H),
        ("kubeletCgroups", H),
        ("systemCgroups", H),
        ("cpuManagerPolicy", H),
        ("cpuManagerPolicyOptions", H),
        ("cpuManagerReconcilePeriod", H),
        ("memoryManagerPolicy", H),
        ("reservedMemory", H),
        ("topologyManagerPolicy", H),
        ("topologyManagerScope", H),
        ("topologyManagerPolicyOptions", H),
        // `parsed_only`: Go's fields kubelet-rs parses but does not act on (yet).
        ("enableContentionProfiling", I),
        ("qosReserved", I),
        ("hairpinMode", I),
        ("makeIPTablesUtilChains", I),
        ("iptablesMasqueradeBit", I),
        ("iptablesDropBit", I),
        ("protectKernelDefaults", I),
        ("kernelMemcgNotification", I),
        ("volumePluginDir", I),
        ("podCIDR", I),
        ("podsPerCore", I),
        ("localStorageCapacityIsolation", I),
        ("contentType", I),
        ("enableControllerAttachDetach", I),
    ]
};

/// One warning line per field kubelet-rs does not honour that differs from its default.
pub fn unsupported_settings(c: &KubeletConfiguration) -> Vec<String> {
    let (Ok(Value::Object(set)), Ok(Value::Object(default))) = (
        serde_json::to_value(c),
        serde_json::to_value(KubeletConfiguration::default()),
    ) else {
        return Vec::new();
    };
    let buffers = [("json", &c.logging.options.json), ("text", &c.logging.options.text)]
        .into_iter()
        .filter(|(_, o)| o.info_buffer_size != "0")
        .map(|(format, o)| {
            format!(
                "KubeletConfiguration field logging.options.{format}.infoBufferSize is not supported by kubelet-rs; its value {:?} is ignored (lines are written unbuffered)",
                o.info_buffer_size
            )
        });
    FIELDS
        .iter()
        .filter(|(_, s)| *s == Support::Ignored)
        .filter(|(name, _)| set.get(*name) != default.get(*name))
        .map(|(name, _)| {
            let value = set.get(*name).map(Value::to_string).unwrap_or_default();
            format!("KubeletConfiguration field {name} is not supported by kubelet-rs; its value {value} is ignored")
        })
        .chain(buffers)
        .chain(
            super::cpu_manager_options::policy_options(
                &c.cpu_manager_policy_options,
                &crate::feature_gates::FeatureGates::new(&c.feature_gates),
            )
            .map(|(_, warnings)| warnings)
            .unwrap_or_default()
            .into_iter()
            .filter(|_| c.cpu_manager_policy == "static"),
        )
        .chain(
            super::topology_manager_options::policy_options(&c.topology_manager_policy_options)
                .map(|(_, warnings)| warnings)
                .unwrap_or_default(),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_field_is_listed_once() {
        // `tracing` is left out of the file when unset: list it set.
        let every = KubeletConfiguration {
            tracing: Some(Default::default()),
            ..KubeletConfiguration::default()
        };
        let Value::Object(fields) = serde_json::to_value(every).unwrap() else {
            panic!("an object");
        };
        let listed: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
        for name in fields.keys() {
            assert!(listed.contains(&name.as_str()), "{name} is not in FIELDS");
        }
        for name in &listed {
            assert!(fields.contains_key(*name), "{name} is not a field");
            assert_eq!(
                listed.iter().filter(|n| *n == name).count(),
                1,
                "{name} twice"
            );
        }
    }

    #[test]
    fn logging_is_honoured_but_for_the_info_buffers() {
        let mut c = KubeletConfiguration::default();
        c.logging.format = "json".into();
        c.logging.verbosity = 4;
        c.logging.options.json.split_stream = true;
        assert!(unsupported_settings(&c).is_empty());
        c.logging.options.json.info_buffer_size = "64Ki".into();
        assert_eq!(
            unsupported_settings(&c),
            ["KubeletConfiguration field logging.options.json.infoBufferSize is not supported by kubelet-rs; its value \"64Ki\" is ignored (lines are written unbuffered)"]
        );
    }

    #[test]
    fn set_unsupported_fields_are_reported_once_each() {
        assert!(unsupported_settings(&KubeletConfiguration::default()).is_empty());
        let c = KubeletConfiguration {
            max_open_files: 4096,
            feature_gates: BTreeMap::from([("GracefulNodeShutdown".to_string(), false)]),
            eviction_soft: BTreeMap::from([("memory.available".to_string(), "1Gi".to_string())]),
            ..KubeletConfiguration::default()
        };
        assert_eq!(
            unsupported_settings(&c),
            [
                "KubeletConfiguration field maxOpenFiles is not supported by kubelet-rs; its value 4096 is ignored",
            ]
        );
    }
}
