//! Registration (Go's `registerWithAPIServer`, `initialNode`, `reconcileExistingNode`): the
//! Node with the kubelet's labels, taints and status, created or — when it exists —
//! adopted with a metadata merge patch.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::setters::{set_node_status, SetterContext};
use super::{
    go_arch, NodeConfig, CONTROLLER_MANAGED_ATTACH_DETACH, EXTERNAL_CLOUD_PROVIDER_TAINT,
    PROVIDED_NODE_IP,
};
use crate::apiserver::{req_err, ApiError};

/// The Node the kubelet registers (Go's `initialNode`), status filled by the setters.
pub fn initial_node(ctx: &SetterContext<'_>) -> Node {
    let cfg = ctx.config;
    let mut labels = default_labels(cfg);
    for (k, v) in &cfg.labels {
        labels.insert(k.clone(), v.clone());
    }
    let mut annotations: BTreeMap<String, String> = [(
        CONTROLLER_MANAGED_ATTACH_DETACH.to_string(),
        "true".to_string(),
    )]
    .into_iter()
    .collect();
    let mut taints = cfg.taints.clone();
    if cfg.external_cloud_provider {
        taints.push(Taint {
            key: EXTERNAL_CLOUD_PROVIDER_TAINT.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        });
        if cfg.node_ip_specified && !cfg.node_ips.is_empty() {
            annotations.insert(PROVIDED_NODE_IP.into(), cfg.node_ips.join(","));
        }
    }
    let mut node = Node {
        metadata: ObjectMeta {
            name: Some(cfg.node_name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: (!taints.is_empty()).then_some(taints),
            provider_id: (!cfg.provider_id.is_empty()).then(|| cfg.provider_id.clone()),
            ..Default::default()
        }),
        status: None,
    };
    set_node_status(&mut node, ctx);
    node
}

/// The labels the kubelet sets on its node.
pub fn default_labels(cfg: &NodeConfig) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", cfg.hostname.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", go_arch()),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", go_arch()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Labels in the `kubernetes.io`/`k8s.io` namespaces a kubelet may set on its node (what
/// the NodeRestriction admission plugin lets a node set on itself).
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
];
/// Label namespaces a kubelet may use freely.
const KUBELET_LABEL_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// Whether the kubelet may set this label on its own node (Go's `IsKubeletLabel`): labels
/// outside the `kubernetes.io` and `k8s.io` namespaces, the well-known ones, and those under
/// `kubelet.kubernetes.io/` and `node.kubernetes.io/`.
pub fn is_kubelet_label(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return true;
    };
    let k8s_namespace = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if !k8s_namespace("kubernetes.io") && !k8s_namespace("k8s.io") {
        return true;
    }
    KUBELET_LABELS.contains(&key)
        || KUBELET_LABEL_NAMESPACES
            .iter()
            .any(|ns| prefix == *ns || prefix.ends_with(&format!(".{ns}")))
}

/// The `--node-labels` a node may not set on itself (Go refuses to start with them).
pub fn disallowed_node_labels(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .keys()
        .filter(|k| !is_kubelet_label(k))
        .cloned()
        .collect()
}

/// The metadata patch that makes an existing node carry the labels and annotations the
/// kubelet owns; `None` when it already does (Go's `reconcileExistingNode`).
pub fn adoption_patch(existing: &Node, wanted: &Node) -> Option<Node> {
    let have_l = existing.metadata.labels.clone().unwrap_or_default();
    let have_a = existing.metadata.annotations.clone().unwrap_or_default();
    let want_l = wanted.metadata.labels.clone().unwrap_or_default();
    let want_a = wanted.metadata.annotations.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = want_l
        .into_iter()
        .filter(|(k, v)| have_l.get(k) != Some(v))
        .collect();
    let annotations: BTreeMap<String, String> = want_a
        .into_iter()
        .filter(|(k, v)| have_a.get(k) != Some(v))
        .collect();
    if labels.is_empty() && annotations.is_empty() {
        return None;
    }
    Some(Node {
        metadata: ObjectMeta {
            labels: (!labels.is_empty()).then_some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// Registers the node (create, or adopt an existing one), retrying with backoff until it
/// succeeds or `shutdown` fires. Returns the node as the API server has it.
pub async fn register(api: &Api<Node>, node: &Node, shutdown: &CancellationToken) -> Option<Node> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut delay = Duration::from_millis(100);
    kubelet_core::metrics::global()
        .node_startup
        .record_registration_attempt();
    loop {
        match try_register(api, node).await {
            Ok(n) => return Some(n),
            Err(e) => {
                tracing::warn!(node = %name, error = %e, retry_in = ?delay, "registering the node failed")
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(7));
    }
}

async fn try_register(api: &Api<Node>, node: &Node) -> Result<Node, ApiError> {
    let name = node.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), node).await {
        Ok(n) => {
            tracing::info!(node = %name, "node registered");
            kubelet_core::metrics::global()
                .node_startup
                .record_registered_new_node();
            return Ok(n);
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(req_err(format!("create node {name}"))(e)),
    }
    let existing = api
        .get(&name)
        .await
        .map_err(req_err(format!("get node {name}")))?;
    tracing::info!(node = %name, "node already exists; adopting it");
    match adoption_patch(&existing, node) {
        None => Ok(existing),
        Some(patch) => api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(req_err(format!("patch node {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::node::fixtures::{cond, observed, t};

    #[test]
    fn an_external_cloud_provider_taints_and_annotates_the_initial_node() {
        let o = observed();
        let now = t(0);
        for (external, specified, provider_id) in [
            (false, true, ""),
            (true, false, "aws:///eu-west-1a/i-0abc"),
            (true, true, "aws:///eu-west-1a/i-0abc"),
        ] {
            let mut cfg = NodeConfig::new("n1");
            cfg.external_cloud_provider = external;
            cfg.node_ip_specified = specified;
            cfg.node_ips = vec!["10.0.0.5".into()];
            cfg.provider_id = provider_id.into();
            let node = initial_node(&SetterContext {
                config: &cfg,
                observed: &o,
                now: &now,
            });
            let spec = node.spec.as_ref().unwrap();
            let taints: Vec<(&str, Option<&str>, &str)> = spec
                .taints
                .iter()
                .flatten()
                .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
                .collect();
            let want_taints = if external {
                vec![(EXTERNAL_CLOUD_PROVIDER_TAINT, Some("true"), "NoSchedule")]
            } else {
                vec![]
            };
            assert_eq!(taints, want_taints, "external {external}");
            assert_eq!(
                spec.provider_id.as_deref(),
                (!provider_id.is_empty()).then_some(provider_id)
            );
            let annotation = node
                .metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(PROVIDED_NODE_IP);
            assert_eq!(
                annotation.map(String::as_str),
                (external && specified).then_some("10.0.0.5")
            );
            // The cloud controller manager's addresses stay under an external provider;
            // without one the kubelet's own come back.
            let mut node = node;
            let ccm = vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: "192.168.1.9".into(),
            }];
            crate::apiserver::node::setters::status(&mut node).addresses = Some(ccm.clone());
            set_node_status(
                &mut node,
                &SetterContext {
                    config: &cfg,
                    observed: &o,
                    now: &now,
                },
            );
            let kept = node.status.as_ref().unwrap().addresses.as_ref() == Some(&ccm);
            assert_eq!(kept, external, "external {external}");
        }
    }

    #[test]
    fn initial_node_has_labels_taints_status() {
        let mut cfg = NodeConfig::new("n1");
        cfg.labels.insert("tier".into(), "edge".into());
        cfg.taints.push(Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        });
        cfg.node_ips = vec!["10.0.0.5".into()];
        let o = observed();
        let now = t(0);
        let node = initial_node(&SetterContext {
            config: &cfg,
            observed: &o,
            now: &now,
        });
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "n1");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["kubernetes.io/arch"], go_arch());
        assert_eq!(labels["tier"], "edge");
        assert_eq!(
            node.spec.as_ref().unwrap().taints.as_ref().unwrap().len(),
            1
        );
        let st = node.status.as_ref().unwrap();
        assert_eq!(st.capacity.as_ref().unwrap()["pods"].0, "110");
        assert_eq!(st.allocatable.as_ref().unwrap()["cpu"].0, "1900m");
        let addrs = st.addresses.as_ref().unwrap();
        assert_eq!(
            (addrs[0].type_.as_str(), addrs[0].address.as_str()),
            ("InternalIP", "10.0.0.5")
        );
        assert_eq!(addrs[1].type_, "Hostname");
        let info = st.node_info.as_ref().unwrap();
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(
            st.daemon_endpoints
                .as_ref()
                .unwrap()
                .kubelet_endpoint
                .as_ref()
                .unwrap()
                .port,
            10250
        );
        assert_eq!(cond(&node, "Ready").status, "True");
        assert_eq!(cond(&node, "MemoryPressure").status, "False");
        assert_eq!(
            cond(&node, "DiskPressure").reason.as_deref(),
            Some("KubeletHasNoDiskPressure")
        );
        assert_eq!(cond(&node, "PIDPressure").status, "False");
    }

    #[test]
    fn adoption_patches_only_missing_owned_metadata() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let now = t(0);
        let wanted = initial_node(&SetterContext {
            config: &cfg,
            observed: &o,
            now: &now,
        });
        let mut existing = Node::default();
        existing.metadata.labels = Some(
            [
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                ("other".to_string(), "x".to_string()),
            ]
            .into_iter()
            .collect(),
        );
        let p = adoption_patch(&existing, &wanted).unwrap();
        let l = p.metadata.labels.unwrap();
        assert!(!l.contains_key("kubernetes.io/os") && !l.contains_key("other"));
        assert_eq!(l["kubernetes.io/hostname"], "n1");
        assert!(adoption_patch(&wanted, &wanted).is_none());
    }

    #[test]
    fn kubelet_labels() {
        let cases = [
            ("tier", true),
            ("example.com/team", true),
            ("kubernetes.io/hostname", true),
            ("topology.kubernetes.io/zone", true),
            (
                "node.kubernetes.io/exclude-from-external-load-balancers",
                true,
            ),
            ("kubelet.kubernetes.io/x", true),
            ("node-role.kubernetes.io/master", false),
            ("kubernetes.io/role", false),
            ("example.k8s.io/x", false),
        ];
        for (key, want) in cases {
            assert_eq!(is_kubelet_label(key), want, "{key}");
        }
    }
}
