//! Labels and annotations on sandboxes and containers (Go `labels.go`): the pod identity
//! the kubelet finds its objects by, and the container facts it needs back (spec hash,
//! restart count, termination message settings, ports, grace periods).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use kubelet_core::runtime::{ContainerConfig, PodRef};

use super::{
    CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, CONTAINER_PORTS_ANNOTATION,
    CONTAINER_RESTART_COUNT_ANNOTATION, CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION,
    CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION, POD_DELETION_GRACE_PERIOD_ANNOTATION,
    POD_NAMESPACE_LABEL, POD_NAME_LABEL, POD_TERMINATION_GRACE_PERIOD_ANNOTATION, POD_UID_LABEL,
};

/// Sandbox labels: the pod's labels plus the three pod identity labels (Go `newPodLabels`).
pub fn sandbox_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let r = PodRef::of(pod);
    labels.insert(POD_NAME_LABEL.into(), r.name);
    labels.insert(POD_NAMESPACE_LABEL.into(), r.namespace);
    labels.insert(POD_UID_LABEL.into(), r.uid);
    labels
}

/// Container labels: container name plus the pod identity labels (Go `newContainerLabels`).
pub fn container_labels(pod: &Pod, container_name: &str) -> HashMap<String, String> {
    let r = PodRef::of(pod);
    HashMap::from([
        (CONTAINER_NAME_LABEL.to_string(), container_name.to_string()),
        (POD_NAME_LABEL.to_string(), r.name),
        (POD_NAMESPACE_LABEL.to_string(), r.namespace),
        (POD_UID_LABEL.to_string(), r.uid),
    ])
}

/// Container annotations (Go `newContainerAnnotations`): hash (hex), restart count,
/// termination message path/policy, ports (JSON) and the pod's grace periods.
pub fn container_annotations(config: &ContainerConfig) -> HashMap<String, String> {
    let c = &config.container;
    let mut a = HashMap::from([
        (
            CONTAINER_HASH_ANNOTATION.to_string(),
            format!("{:x}", config.hash),
        ),
        (
            CONTAINER_RESTART_COUNT_ANNOTATION.to_string(),
            config.restart_count.to_string(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_string(),
            c.termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".to_string()),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_string(),
            c.termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".to_string()),
        ),
    ]);
    if let Some(ports) = c.ports.as_ref().filter(|p| !p.is_empty()) {
        if let Ok(json) = serde_json::to_string(ports) {
            a.insert(CONTAINER_PORTS_ANNOTATION.to_string(), json);
        }
    }
    let pod = &config.pod;
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(
            POD_DELETION_GRACE_PERIOD_ANNOTATION.to_string(),
            g.to_string(),
        );
    }
    if let Some(g) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        a.insert(
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.to_string(),
            g.to_string(),
        );
    }
    // Device plugins' annotations go under the kubelet's own (Go sets them first).
    for (k, v) in &config.devices.annotations {
        a.entry(k.clone()).or_insert_with(|| v.clone());
    }
    a
}

/// The pod identity from kubelet labels; `None` when the object was not made by a kubelet.
pub fn pod_ref_from_labels(labels: &HashMap<String, String>) -> Option<PodRef> {
    Some(PodRef {
        uid: labels.get(POD_UID_LABEL)?.clone(),
        name: labels.get(POD_NAME_LABEL).cloned().unwrap_or_default(),
        namespace: labels.get(POD_NAMESPACE_LABEL).cloned().unwrap_or_default(),
    })
}

/// Parses the hash annotation (hex, as written by [`container_annotations`]); 0 when absent
/// or malformed (such a container never matches a spec and is re-created).
pub fn hash_from_annotations(annotations: &HashMap<String, String>) -> u64 {
    parse_hash(
        annotations
            .get(CONTAINER_HASH_ANNOTATION)
            .map(String::as_str),
    )
}

/// The hash annotation's value parsed (hex); 0 when absent or malformed.
pub(crate) fn parse_hash(value: Option<&str>) -> u64 {
    value
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}
