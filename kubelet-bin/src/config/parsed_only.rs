//! `KubeletConfiguration` fields of the Go kubelet that kubelet-rs parses and type-checks
//! but does not act on (yet): the resource managers, iptables and kernel settings. They are part of
//! [`super::KubeletConfiguration`] (flattened into it), so a configuration file and the
//! flags that mirror them (`--cpu-manager-policy`, `--provider-id`, …) are read alike, and
//! each set to other than Go's default is reported once at start-up as not supported
//! ([`super::support`]). Defaults are Go's (`pkg/kubelet/apis/config/v1beta1/defaults.go`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The parsed-only fields (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParsedOnly {
    /// `--contention-profiling`.
    #[serde(rename = "enableContentionProfiling")]
    pub enable_contention_profiling: bool,
    /// `--qos-reserved` (resource → percentage).
    #[serde(rename = "qosReserved")]
    pub qos_reserved: BTreeMap<String, String>,
    /// `--hairpin-mode` (default `promiscuous-bridge`).
    #[serde(rename = "hairpinMode")]
    pub hairpin_mode: String,
    /// `--make-iptables-util-chains` (default true).
    #[serde(rename = "makeIPTablesUtilChains")]
    pub make_iptables_util_chains: bool,
    /// `--iptables-masquerade-bit` (default 14).
    #[serde(rename = "iptablesMasqueradeBit")]
    pub iptables_masquerade_bit: i32,
    /// `--iptables-drop-bit` (default 15).
    #[serde(rename = "iptablesDropBit")]
    pub iptables_drop_bit: i32,
    /// `--protect-kernel-defaults`.
    #[serde(rename = "protectKernelDefaults")]
    pub protect_kernel_defaults: bool,
    /// `--kernel-memcg-notification`.
    #[serde(rename = "kernelMemcgNotification")]
    pub kernel_memcg_notification: bool,
    /// `--volume-plugin-dir` (FlexVolume drivers).
    #[serde(rename = "volumePluginDir")]
    pub volume_plugin_dir: String,
    /// `--pod-cidr` (standalone mode).
    #[serde(rename = "podCIDR")]
    pub pod_cidr: String,
    /// `--pods-per-core` (default 0: no limit).
    #[serde(rename = "podsPerCore")]
    pub pods_per_core: i32,
    /// `--local-storage-capacity-isolation` (default true).
    #[serde(rename = "localStorageCapacityIsolation")]
    pub local_storage_capacity_isolation: bool,
    /// `--kube-api-content-type` (default protobuf).
    #[serde(rename = "contentType")]
    pub content_type: String,
    /// `--enable-controller-attach-detach` (default true).
    #[serde(rename = "enableControllerAttachDetach")]
    pub enable_controller_attach_detach: bool,
}

impl Default for ParsedOnly {
    fn default() -> Self {
        ParsedOnly {
            enable_contention_profiling: false,
            qos_reserved: BTreeMap::new(),
            hairpin_mode: "promiscuous-bridge".into(),
            make_iptables_util_chains: true,
            iptables_masquerade_bit: 14,
            iptables_drop_bit: 15,
            protect_kernel_defaults: false,
            kernel_memcg_notification: false,
            volume_plugin_dir: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/".into(),
            pod_cidr: String::new(),
            pods_per_core: 0,
            local_storage_capacity_isolation: true,
            content_type: "application/vnd.kubernetes.protobuf".into(),
            enable_controller_attach_detach: true,
        }
    }
}
