//! Helpers over Kubernetes [`Pod`] objects: identity, annotations the kubelet uses, and
//! small accessors with the API's defaults applied.

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::core::v1::Pod;

/// Annotation naming the source a pod came from ("file", "http", "api").
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation with the hash of a static pod's manifest.
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Annotation with the time the kubelet first saw a static pod.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// Annotation marking a mirror pod (its value is the static pod's hash).
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Source name of the API server source.
pub const API_SOURCE: &str = "api";

/// Default pod termination grace period when the spec does not set one (30s).
pub const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;

/// metadata.uid, or "" when missing.
pub fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

/// metadata.name, or "".
pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("")
}

/// metadata.namespace, or "default".
pub fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// `namespace/name`, the form used in logs and errors.
pub fn full_name(pod: &Pod) -> String {
    format!("{}/{}", namespace(pod), name(pod))
}

/// The value of an annotation.
pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The source the pod came from (config.source annotation), "" when unknown.
pub fn source(pod: &Pod) -> &str {
    annotation(pod, CONFIG_SOURCE_ANNOTATION).unwrap_or("")
}

/// A static pod: one from a file or URL source rather than the API server.
pub fn is_static(pod: &Pod) -> bool {
    let s = source(pod);
    !s.is_empty() && s != API_SOURCE
}

/// A mirror pod: the API server's reflection of a static pod.
pub fn is_mirror(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

/// Go's `SystemCriticalPriority` (2·10⁹): the priority of `system-cluster-critical`; pods at
/// or above it are critical.
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Go's `IsCriticalPod`: a static or mirror pod, or one whose priority is at least
/// [`SYSTEM_CRITICAL_PRIORITY`] (`system-cluster-critical`, `system-node-critical`). The
/// eviction manager never evicts one and admits one under pressure.
pub fn is_critical(pod: &Pod) -> bool {
    is_static(pod)
        || is_mirror(pod)
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.priority)
            .is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// The pod shares the host's network namespace.
pub fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// Whether a pod uid can name a directory under `<root-dir>/pods`: not empty, not `.` or
/// `..`, no `/` and no NUL. Uids come from sources and from runtime labels; one that is not
/// safe never becomes a path (a uid of `/` joined to a path would *be* `/`).
pub fn is_safe_uid(uid: &str) -> bool {
    !uid.is_empty() && uid != "." && uid != ".." && !uid.contains('/') && !uid.contains('\0')
}

/// A restartable init container (a sidecar): an init container with `restartPolicy: Always`.
pub fn is_restartable_init(c: &k8s_openapi::api::core::v1::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's init containers, then its app containers.
pub fn all_containers(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::Container> {
    pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

/// Pod uid → the names of its init and app containers: the containers whose state the
/// resource managers keep for active pods (Go's `removeStaleState`).
pub fn container_names_by_uid<'a>(
    pods: impl Iterator<Item = &'a Pod>,
) -> HashMap<&'a str, HashSet<&'a str>> {
    pods.map(|p| (uid(p), all_containers(p).map(|c| c.name.as_str()).collect()))
        .collect()
}

/// The `(pod uid, container)` keys of a resource manager's state (pod uid → container →
/// its share) whose container is not in `keep` ([`container_names_by_uid`]).
pub fn stale_entries<T>(
    entries: &BTreeMap<String, BTreeMap<String, T>>,
    keep: &HashMap<&str, HashSet<&str>>,
) -> Vec<(String, String)> {
    entries
        .iter()
        .flat_map(|(uid, containers)| containers.keys().map(move |c| (uid.clone(), c.clone())))
        .filter(|(uid, c)| {
            !keep
                .get(uid.as_str())
                .is_some_and(|names| names.contains(c.as_str()))
        })
        .collect()
}

/// An ephemeral container as the [`Container`](k8s_openapi::api::core::v1::Container) it is
/// run as (Go converts `EphemeralContainerCommon` the same way); `targetContainerName` is
/// the one field that has no place there (see [`ephemeral_target`]).
pub fn ephemeral_as_container(
    e: &k8s_openapi::api::core::v1::EphemeralContainer,
) -> k8s_openapi::api::core::v1::Container {
    let e = e.clone();
    k8s_openapi::api::core::v1::Container {
        args: e.args,
        command: e.command,
        env: e.env,
        env_from: e.env_from,
        image: e.image,
        image_pull_policy: e.image_pull_policy,
        lifecycle: e.lifecycle,
        liveness_probe: e.liveness_probe,
        name: e.name,
        ports: e.ports,
        readiness_probe: e.readiness_probe,
        resize_policy: e.resize_policy,
        resources: e.resources,
        restart_policy: e.restart_policy,
        restart_policy_rules: e.restart_policy_rules,
        security_context: e.security_context,
        startup_probe: e.startup_probe,
        stdin: e.stdin,
        stdin_once: e.stdin_once,
        termination_message_path: e.termination_message_path,
        termination_message_policy: e.termination_message_policy,
        tty: e.tty,
        volume_devices: e.volume_devices,
        volume_mounts: e.volume_mounts,
        working_dir: e.working_dir,
    }
}

/// The pod's ephemeral containers (`kubectl debug`), as containers.
pub fn ephemeral_containers(pod: &Pod) -> Vec<k8s_openapi::api::core::v1::Container> {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .map(ephemeral_as_container)
        .collect()
}

/// The `targetContainerName` of the ephemeral container `name`, when it has one.
pub fn ephemeral_target<'a>(pod: &'a Pod, name: &str) -> Option<&'a str> {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .find(|e| e.name == name)
        .and_then(|e| e.target_container_name.as_deref())
        .filter(|t| !t.is_empty())
}

/// Whether `name` is one of the pod's ephemeral containers.
pub fn is_ephemeral(pod: &Pod, name: &str) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .any(|e| e.name == name)
}

/// spec.restartPolicy with the API default ("Always").
pub fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// The grace period to use when stopping the pod: the deletion grace period when the pod is
/// being deleted, else spec.terminationGracePeriodSeconds, else 30s; never negative.
pub fn termination_grace_period_seconds(pod: &Pod) -> i64 {
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    pod.metadata
        .deletion_grace_period_seconds
        .unwrap_or(spec)
        .max(0)
}

/// The pod has a deletion timestamp (graceful deletion in progress).
pub fn is_deleted(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn grace_period_prefers_deletion_grace_and_defaults_to_30s() {
        let mut pod = Pod::default();
        assert_eq!(termination_grace_period_seconds(&pod), 30);
        pod.spec = Some(PodSpec {
            termination_grace_period_seconds: Some(5),
            ..Default::default()
        });
        assert_eq!(termination_grace_period_seconds(&pod), 5);
        pod.metadata = ObjectMeta {
            deletion_grace_period_seconds: Some(1),
            ..Default::default()
        };
        assert_eq!(termination_grace_period_seconds(&pod), 1);
    }

    #[test]
    fn static_and_mirror_detection() {
        let mut pod = Pod::default();
        assert!(!is_static(&pod));
        pod.metadata.annotations = Some(
            [(CONFIG_SOURCE_ANNOTATION.to_string(), "file".to_string())]
                .into_iter()
                .collect(),
        );
        assert!(is_static(&pod));
        assert!(!is_mirror(&pod));
    }

    #[test]
    fn only_safe_uids_name_directories() {
        for (uid, ok) in [
            ("6f1c-42", true),
            ("static-abc", true),
            ("", false),
            (".", false),
            ("..", false),
            ("/", false),
            ("a/b", false),
            ("a\0b", false),
        ] {
            assert_eq!(is_safe_uid(uid), ok, "{uid:?}");
        }
    }
}
