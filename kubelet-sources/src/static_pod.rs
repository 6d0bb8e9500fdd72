//! Static pod processing shared by the file and HTTP sources: decoding manifests (YAML, multi-
//! document YAML, JSON, `PodList`) within bounds ([`crate::decode`]), the defaults the Go
//! kubelet applies to static pods (`applyDefaults` in `pkg/kubelet/config/common.go` plus the
//! API defaulting the engine relies on) and then the API server's validation of a pod create
//! ([`crate::validation`]), as Go validates the defaulted pod.
//!
//! Fields the Pod API does not know (a typo such as `imagee`) are dropped, as Go's decoder
//! drops them; each pod that had some comes with a [`ManifestWarning`] naming their paths, for
//! the log and an event.
//!
//! The generated UID is a hash of the decoded pod object, the node name and the pod's origin
//! (the manifest's path, or the URL), so an unchanged manifest keeps its UID across restarts and
//! an edited one gets a new UID — exactly the property the kubelet uses to replace a pod whose
//! manifest changed.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Toleration};
use kubelet_core::pod::{
    self as podutil, CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION, CONFIG_SOURCE_ANNOTATION,
};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::decode::{self, MANIFEST_LIMITS};
use crate::validation::{self, FieldError};

pub use crate::validation::names::{is_dns1123_label, is_dns1123_subdomain};

/// Source name of the manifest file/directory source.
pub const FILE_SOURCE: &str = "file";
/// Source name of the manifest URL source.
pub const HTTP_SOURCE: &str = "http";

/// Why a manifest (or one pod in it) was rejected. Every variant names where the pod came from
/// (`origin`: a file path or URL) and, where it applies, the document and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The bytes are not valid YAML/JSON (for example a partially written file), or exceed a
    /// limit of [`crate::decode`] (size, depth, alias expansion).
    #[error("{origin}: cannot parse manifest: {reason}")]
    Parse {
        /// File path or URL.
        origin: String,
        /// The parser's message.
        reason: String,
    },
    /// The document is not a `v1` `Pod` (or `PodList`).
    #[error("{origin}: document {doc}: {field}: {reason}")]
    Kind {
        /// File path or URL.
        origin: String,
        /// Index of the document (0-based) in the manifest.
        doc: usize,
        /// `kind` or `apiVersion`.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The document matches the schema's shape but a value has the wrong type.
    #[error("{origin}: document {doc}: cannot decode pod: {reason}")]
    Decode {
        /// File path or URL.
        origin: String,
        /// Index of the document (0-based) in the manifest.
        doc: usize,
        /// The decoder's message.
        reason: String,
    },
    /// The pod fails validation: every problem found, in Go's format.
    #[error("{origin}: pod {pod:?}: invalid pod: [{}]", join(errors))]
    Invalid {
        /// File path or URL.
        origin: String,
        /// The pod's name as written in the manifest ("" when missing).
        pod: String,
        /// The problems (never empty).
        errors: Vec<FieldError>,
    },
    /// Another pod of the same source already has this full name (`namespace/name`).
    #[error("{origin}: pod {pod:?}: duplicate pod full name {full_name:?} in source {source_name}; ignoring it")]
    Duplicate {
        /// File path or URL.
        origin: String,
        /// The pod's name as written in the manifest.
        pod: String,
        /// The generated `namespace/name`.
        full_name: String,
        /// Source name.
        source_name: String,
    },
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pod that was accepted with fields the Pod API does not know (they were dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestWarning {
    /// File path or URL.
    pub origin: String,
    /// The accepted pod's `namespace/name` (as generated).
    pub pod: String,
    /// The accepted pod's UID.
    pub uid: String,
    /// The dropped fields' paths, like `spec.containers[0].imagee`, in document order.
    pub unknown_fields: Vec<String>,
}

impl std::fmt::Display for ManifestWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: pod {}: unknown fields dropped: {}",
            self.origin,
            self.pod,
            self.unknown_fields.join(", ")
        )
    }
}

/// Where a manifest comes from and for which node it is processed.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The source name ("file" or "http"), stamped into the config.source annotation.
    pub source: &'a str,
    /// The file path or URL the bytes came from (part of the UID hash, named in errors).
    pub origin: &'a str,
    /// The node name (lower-cased into the pod name; `spec.nodeName`).
    pub node_name: &'a str,
}

/// The outcome of processing one manifest: the pods that passed, and the errors of the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    /// Valid pods with defaults applied, in document order.
    pub pods: Vec<Pod>,
    /// Problems found (an empty list means every document was a valid pod).
    pub errors: Vec<ManifestError>,
    /// Accepted pods whose manifest had unknown fields (dropped).
    pub warnings: Vec<ManifestWarning>,
}

/// Decodes a manifest (a JSON object/stream, or a YAML stream with one or more documents; each
/// document a `Pod`, or a `PodList`/`List` of pods), applies the static-pod defaults and
/// validates every pod. A parse error of the whole stream (or a limit of [`crate::decode`]
/// exceeded) yields no pods and one [`ManifestError::Parse`].
pub fn parse_manifest(bytes: &[u8], ctx: &Context<'_>) -> Manifest {
    let mut out = Manifest::default();
    let docs = match decode::decode_documents(bytes, &MANIFEST_LIMITS) {
        Ok(d) => d,
        Err(e) => {
            out.errors.push(ManifestError::Parse {
                origin: ctx.origin.to_string(),
                reason: e.to_string(),
            });
            return out;
        }
    };
    for (doc_index, doc) in docs.into_iter().enumerate() {
        let mut list_unknown = Vec::new();
        for item in expand_lists(doc, doc_index, ctx, &mut list_unknown) {
            match item.and_then(|(prefix, v)| decode_pod(v, &prefix, doc_index, ctx)) {
                Ok((pod, mut unknown)) => {
                    if !list_unknown.is_empty() {
                        let mut all = list_unknown.clone();
                        all.append(&mut unknown);
                        unknown = all;
                    }
                    if !unknown.is_empty() {
                        out.warnings.push(ManifestWarning {
                            origin: ctx.origin.to_string(),
                            pod: podutil::full_name(&pod),
                            uid: podutil::uid(&pod).to_string(),
                            unknown_fields: unknown,
                        });
                    }
                    out.pods.push(pod);
                }
                Err(e) => out.errors.push(e),
            }
        }
    }
    out
}

/// Checks `kind`/`apiVersion` and turns a list into its items, each with the path prefix of
/// its fields (`items[2].`). Unknown keys of a list go to `unknown`.
fn expand_lists(
    doc: Value,
    doc_index: usize,
    ctx: &Context<'_>,
    unknown: &mut Vec<String>,
) -> Vec<Result<(String, Value), ManifestError>> {
    let kind_err = |field: &'static str, reason: String| ManifestError::Kind {
        origin: ctx.origin.to_string(),
        doc: doc_index,
        field,
        reason,
    };
    let Value::Object(mut map) = doc else {
        return vec![Err(kind_err(
            "kind",
            "the document is not an object".to_string(),
        ))];
    };
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    match kind {
        "Pod" | "PodList" | "List" => {}
        "" => return vec![Err(kind_err("kind", "required value".to_string()))],
        other => {
            return vec![Err(kind_err(
                "kind",
                format!("must be Pod (or PodList), got {other:?}"),
            ))]
        }
    }
    if api_version != "v1" {
        return vec![Err(kind_err(
            "apiVersion",
            format!("must be \"v1\", got {api_version:?}"),
        ))];
    }
    if kind == "Pod" {
        return vec![Ok((String::new(), Value::Object(map)))];
    }
    for (key, value) in &map {
        if !matches!(key.as_str(), "kind" | "apiVersion" | "metadata" | "items") && !value.is_null()
        {
            unknown.push(key.clone());
        }
    }
    match map.remove("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Object(mut m) => {
                    let item_kind = m.get("kind").and_then(Value::as_str).unwrap_or("Pod");
                    let item_api = m.get("apiVersion").and_then(Value::as_str).unwrap_or("v1");
                    if item_kind != "Pod" || item_api != "v1" {
                        return Err(kind_err(
                            "kind",
                            format!("items[{i}] must be a v1 Pod, got {item_api}/{item_kind}"),
                        ));
                    }
                    m.insert("kind".into(), Value::String("Pod".into()));
                    m.insert("apiVersion".into(), Value::String("v1".into()));
                    Ok((format!("items[{i}]"), Value::Object(m)))
                }
                _ => Err(kind_err("kind", format!("items[{i}] is not an object"))),
            })
            .collect(),
        Some(_) => vec![Err(kind_err("kind", "items must be a list".to_string()))],
    }
}

/// Decodes, defaults and validates one pod; returns it with the paths of the unknown fields
/// that were dropped.
fn decode_pod(
    value: Value,
    prefix: &str,
    doc: usize,
    ctx: &Context<'_>,
) -> Result<(Pod, Vec<String>), ManifestError> {
    let decode_err = |e: serde_json::Error| ManifestError::Decode {
        origin: ctx.origin.to_string(),
        doc,
        reason: e.to_string(),
    };
    let pod: Pod = serde_path_to_error::deserialize(&value).map_err(|e| ManifestError::Decode {
        origin: ctx.origin.to_string(),
        doc,
        reason: format!("{}: {}", e.path(), e.inner()),
    })?;
    let reencoded = serde_json::to_value(&pod).map_err(decode_err)?;
    let mut unknown = Vec::new();
    unknown_fields(&value, &reencoded, prefix, &mut unknown);
    drop(value);
    let manifest_name = pod.metadata.name.clone().unwrap_or_default();
    let invalid = |errors: Vec<FieldError>| ManifestError::Invalid {
        origin: ctx.origin.to_string(),
        pod: manifest_name.clone(),
        errors,
    };
    if manifest_name.is_empty() {
        let path = validation::Path::new("metadata").child("name");
        return Err(invalid(vec![FieldError::required(&path, "")]));
    }
    let hash_input = serde_json::to_vec(&pod).map_err(decode_err)?;
    let pod = apply_defaults(pod, &hash_input, ctx);
    let errors = validation::validate_pod_create(&pod);
    if !errors.is_empty() {
        return Err(invalid(errors));
    }
    Ok((pod, unknown))
}

/// Finds the first key of `input` (recursively) that does not survive a decode/encode round
/// trip, i.e. a field the typed model does not know. Null values are ignored (they decode to
/// "absent"). Returns the field's path, like `spec.containers[0].imagee`.
pub fn first_unknown_field(input: &Value, reencoded: &Value, path: &str) -> Option<String> {
    let mut found = Vec::new();
    unknown_fields(input, reencoded, path, &mut found);
    found.into_iter().next()
}

/// Collects every key of `input` (recursively, in document order) that does not survive a
/// decode/encode round trip into `out`, as paths like `spec.containers[0].imagee`. Null
/// values are ignored.
pub fn unknown_fields(input: &Value, reencoded: &Value, path: &str, out: &mut Vec<String>) {
    match (input, reencoded) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match b.get(key) {
                    None if value.is_null() => {}
                    None => out.push(child),
                    Some(other) => unknown_fields(value, other, &child, out),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                unknown_fields(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The static pod's name: `<name>-<lower-cased node name>` (Go's `generatePodName`).
pub fn generate_pod_name(name: &str, node_name: &str) -> String {
    format!("{name}-{}", node_name.to_lowercase())
}

/// The UID of a static pod: a hex hash of the encoded pod object, the node name and the
/// origin (Go hashes the object plus `host:<node>`/`file:<path>`, or `url:<url>` for HTTP).
pub fn static_pod_uid(encoded_pod: &[u8], ctx: &Context<'_>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(encoded_pod);
    if ctx.source == HTTP_SOURCE {
        hasher.update(format!("url:{}", ctx.origin).as_bytes());
    } else {
        hasher.update(format!("host:{}", ctx.node_name).as_bytes());
        hasher.update(format!("{}:{}", ctx.source, ctx.origin).as_bytes());
    }
    let digest = hasher.finalize();
    // 16 bytes, 32 hex digits: the length of the Go kubelet's md5-based static pod UIDs.
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn default_container(c: &mut Container) {
    if c.termination_message_path
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        c.termination_message_path = Some("/dev/termination-log".into());
    }
    if c.termination_message_policy
        .as_deref()
        .unwrap_or("")
        .is_empty()
    {
        c.termination_message_policy = Some("File".into());
    }
    if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        let image = c.image.as_deref().unwrap_or("");
        c.image_pull_policy = Some(kubelet_core::images::default_pull_policy(image).into());
    }
    for port in c.ports.iter_mut().flatten() {
        if port.protocol.as_deref().unwrap_or("").is_empty() {
            port.protocol = Some("TCP".into());
        }
    }
    if let Some(res) = c.resources.as_mut() {
        if let Some(limits) = res.limits.clone() {
            let requests = res.requests.get_or_insert_with(BTreeMap::new);
            for (name, q) in limits {
                requests.entry(name).or_insert(q);
            }
        }
    }
}

/// Applies the static-pod defaults (see the module docs) to a validated pod; `encoded` is the
/// pod as decoded, the input of the UID hash. A UID already in the manifest is kept (as Go does).
fn apply_defaults(mut pod: Pod, encoded: &[u8], ctx: &Context<'_>) -> Pod {
    let uid = match pod.metadata.uid.as_deref() {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => static_pod_uid(encoded, ctx),
    };
    pod.metadata.uid = Some(uid.clone());
    let name = pod.metadata.name.clone().unwrap_or_default();
    pod.metadata.name = Some(generate_pod_name(&name, ctx.node_name));
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some("default".into());
    }
    let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), uid);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.into(), ctx.source.into());

    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(ctx.node_name.to_string());
    if ctx.source == FILE_SOURCE {
        // Go applies this toleration to file-sourced static pods only, so node problems
        // (NoExecute taints) never evict them.
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        let wanted = Toleration {
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Default::default()
        };
        if !tolerations.contains(&wanted) {
            tolerations.push(wanted);
        }
    }
    if spec.restart_policy.as_deref().unwrap_or("").is_empty() {
        spec.restart_policy = Some("Always".into());
    }
    if spec.dns_policy.as_deref().unwrap_or("").is_empty() {
        spec.dns_policy = Some("ClusterFirst".into());
    }
    if spec.termination_grace_period_seconds.is_none() {
        spec.termination_grace_period_seconds =
            Some(podutil::DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS);
    }
    if spec.scheduler_name.as_deref().unwrap_or("").is_empty() {
        spec.scheduler_name = Some("default-scheduler".into());
    }
    if spec.enable_service_links.is_none() {
        spec.enable_service_links = Some(true);
    }
    for c in spec.init_containers.iter_mut().flatten() {
        default_container(c);
    }
    for c in spec.containers.iter_mut() {
        default_container(c);
    }
    let status = pod.status.get_or_insert_with(PodStatus::default);
    status.phase = Some("Pending".into());
    pod
}

/// Drops pods whose full name (`namespace/name`) an earlier pod of the same source already
/// uses (Go's `filterInvalidPods`), returning the survivors and one error per dropped pod.
/// `origins[i]` names where `pods[i]` came from.
pub fn reject_duplicates(
    pods: Vec<(String, Pod)>,
    source: &str,
) -> (Vec<(String, Pod)>, Vec<ManifestError>) {
    let (keep, refused) = reject_duplicates_with_pods(pods, source);
    (keep, refused.into_iter().map(|(e, _)| e).collect())
}

/// A pod with its origin (file path or URL).
pub type OriginPod = (String, Pod);

/// [`reject_duplicates`], returning each refused pod with its error (for an event).
pub fn reject_duplicates_with_pods(
    pods: Vec<OriginPod>,
    source: &str,
) -> (Vec<OriginPod>, Vec<(ManifestError, Pod)>) {
    let mut seen = BTreeSet::new();
    let mut keep = Vec::with_capacity(pods.len());
    let mut refused = Vec::new();
    for (origin, pod) in pods {
        let full = podutil::full_name(&pod);
        if seen.insert(full.clone()) {
            keep.push((origin, pod));
        } else {
            let e = ManifestError::Duplicate {
                origin,
                pod: pod.metadata.name.clone().unwrap_or_default(),
                full_name: full,
                source_name: source.to_string(),
            };
            refused.push((e, pod));
        }
    }
    (keep, refused)
}

/// Remembers when each static pod (by UID) was first seen, for the config.seen annotation, so
/// the timestamp is stable across snapshots.
#[derive(Debug, Default)]
pub struct SeenTracker {
    first_seen: BTreeMap<String, String>,
}

impl SeenTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stamps `kubernetes.io/config.seen` on every pod (the RFC 3339 time its UID was first
    /// seen), and forgets UIDs that are no longer present.
    pub fn stamp(&mut self, pods: &mut [Pod]) {
        let now = jiff::Timestamp::now().to_string();
        let mut current = BTreeSet::new();
        for pod in pods.iter_mut() {
            let uid = podutil::uid(pod).to_string();
            let seen = self
                .first_seen
                .entry(uid.clone())
                .or_insert_with(|| now.clone())
                .clone();
            pod.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(CONFIG_SEEN_ANNOTATION.into(), seen);
            current.insert(uid);
        }
        self.first_seen.retain(|uid, _| current.contains(uid));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const NODE: &str = "Node-1";

    fn ctx(origin: &str) -> Context<'_> {
        Context {
            source: FILE_SOURCE,
            origin,
            node_name: NODE,
        }
    }

    const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: kubelet-rs.local/busybox:1.0
    resources:
      limits:
        cpu: 100m
        memory: 64Mi
"#;

    #[test]
    fn defaults_are_applied() {
        let m = parse_manifest(WEB.as_bytes(), &ctx("/etc/m/web.yaml"));
        assert!(m.errors.is_empty(), "{:?}", m.errors);
        assert_eq!(m.pods.len(), 1);
        let pod = &m.pods[0];
        assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        assert_eq!(uid.len(), 32);
        assert_eq!(
            podutil::annotation(pod, CONFIG_HASH_ANNOTATION),
            Some(&*uid)
        );
        assert_eq!(
            podutil::annotation(pod, CONFIG_SOURCE_ANNOTATION),
            Some("file")
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        let tol = spec.tolerations.as_ref().unwrap();
        assert_eq!(tol.len(), 1);
        assert_eq!(tol[0].operator.as_deref(), Some("Exists"));
        assert_eq!(tol[0].effect.as_deref(), Some("NoExecute"));
        let c = &spec.containers[0];
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(req.get("cpu").map(|q| q.0.as_str()), Some("100m"));
        assert_eq!(req.get("memory").map(|q| q.0.as_str()), Some("64Mi"));
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
    }

    #[test]
    fn uid_is_stable_and_changes_with_content_node_and_origin() {
        let uid = |text: &str, origin: &str, node: &str| {
            let c = Context {
                source: FILE_SOURCE,
                origin,
                node_name: node,
            };
            let m = parse_manifest(text.as_bytes(), &c);
            assert!(m.errors.is_empty(), "{:?}", m.errors);
            m.pods[0].metadata.uid.clone().unwrap()
        };
        let base = uid(WEB, "/m/web.yaml", "n1");
        // Same object, different formatting and comments: same UID.
        let reformatted = format!("# a comment\n{}", WEB.replace("cpu: 100m", "cpu: \"100m\""));
        assert_eq!(uid(&reformatted, "/m/web.yaml", "n1"), base);
        assert_eq!(uid(WEB, "/m/web.yaml", "n1"), base);
        assert_ne!(uid(&WEB.replace("64Mi", "65Mi"), "/m/web.yaml", "n1"), base);
        assert_ne!(uid(WEB, "/m/web.yaml", "n2"), base);
        assert_ne!(uid(WEB, "/m/other.yaml", "n1"), base);
        // A UID written in the manifest is kept.
        let with_uid = WEB.replace("name: web\nspec", "name: web\n  uid: abc\nspec");
        assert_eq!(uid(&with_uid, "/m/web.yaml", "n1"), "abc");
    }

    #[test]
    fn dns_names() {
        let cases = [
            ("a", true, true),
            ("a-b", true, true),
            ("a.b", false, true),
            ("-a", false, false),
            ("A", false, false),
            ("a_b", false, false),
            ("", false, false),
        ];
        for (s, label, sub) in cases {
            assert_eq!(is_dns1123_label(s), label, "label {s}");
            assert_eq!(is_dns1123_subdomain(s), sub, "subdomain {s}");
        }
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }

    #[test]
    fn duplicates_are_rejected_after_the_first() {
        let m = parse_manifest(format!("{WEB}---\n{WEB}").as_bytes(), &ctx("/m/web.yaml"));
        assert_eq!(m.pods.len(), 2);
        let pods = m.pods.into_iter().map(|p| ("/m/web.yaml".to_string(), p));
        let (keep, errs) = reject_duplicates(pods.collect(), FILE_SOURCE);
        assert_eq!(keep.len(), 1);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().contains("default/web-node-1"));
    }

    #[test]
    fn seen_is_stable_per_uid() {
        let mut tracker = SeenTracker::new();
        let mut pods = parse_manifest(WEB.as_bytes(), &ctx("/m/web.yaml")).pods;
        tracker.stamp(&mut pods);
        let first = podutil::annotation(&pods[0], CONFIG_SEEN_ANNOTATION)
            .unwrap()
            .to_string();
        assert!(first.parse::<jiff::Timestamp>().is_ok(), "{first}");
        let mut again = parse_manifest(WEB.as_bytes(), &ctx("/m/web.yaml")).pods;
        tracker.stamp(&mut again);
        assert_eq!(again, pods);
    }

    #[test]
    fn http_pods_get_no_toleration_and_url_hash() {
        let c = Context {
            source: HTTP_SOURCE,
            origin: "http://x/pods",
            node_name: "n",
        };
        let m = parse_manifest(WEB.as_bytes(), &c);
        let pod = &m.pods[0];
        assert!(pod.spec.as_ref().unwrap().tolerations.is_none());
        assert_eq!(
            podutil::annotation(pod, CONFIG_SOURCE_ANNOTATION),
            Some("http")
        );
    }

    fn corpus(kind: &str) -> Vec<(std::path::PathBuf, String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/corpus")
            .join(kind);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "expect") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let sidecar = path.with_file_name(format!(
                "{}.expect",
                path.file_name().unwrap().to_string_lossy()
            ));
            let expect = if sidecar.exists() {
                std::fs::read_to_string(&sidecar)
                    .unwrap()
                    .trim()
                    .to_string()
            } else {
                let first = text.lines().next().unwrap();
                first
                    .strip_prefix("# expect: ")
                    .or_else(|| first.strip_prefix("# expect-pods: "))
                    .unwrap_or_else(|| panic!("{} has no expectation line", path.display()))
                    .to_string()
            };
            out.push((path, text, expect));
        }
        out.sort();
        assert!(!out.is_empty());
        out
    }

    #[test]
    fn bad_corpus_is_rejected_with_the_expected_error() {
        for (path, text, expect) in corpus("bad") {
            let origin = path.display().to_string();
            let m = parse_manifest(text.as_bytes(), &ctx(&origin));
            assert!(m.pods.is_empty(), "{origin}: unexpected pods");
            assert_eq!(m.errors.len(), 1, "{origin}: {:?}", m.errors);
            let msg = m.errors[0].to_string();
            assert!(msg.contains(&expect), "{origin}: {msg:?} lacks {expect:?}");
            assert!(
                msg.starts_with(&origin),
                "{origin}: error does not name the file: {msg}"
            );
        }
    }

    #[test]
    fn good_corpus_is_accepted() {
        for (path, text, expect) in corpus("good") {
            let origin = path.display().to_string();
            let m = parse_manifest(text.as_bytes(), &ctx(&origin));
            assert!(m.errors.is_empty(), "{origin}: {:?}", m.errors);
            let names: Vec<String> = m
                .pods
                .iter()
                .map(|p| p.metadata.name.clone().unwrap())
                .collect();
            let want: Vec<String> = expect.split(',').map(|n| format!("{n}-node-1")).collect();
            assert_eq!(names, want, "{origin}");
            for pod in &m.pods {
                assert_eq!(
                    podutil::annotation(pod, CONFIG_HASH_ANNOTATION),
                    pod.metadata.uid.as_deref()
                );
            }
        }
    }

    #[test]
    fn full_manifest_keeps_fields_and_explicit_values() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/good/full.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let m = parse_manifest(text.as_bytes(), &ctx("full.yaml"));
        let pod = &m.pods[0];
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
        assert_eq!(spec.termination_grace_period_seconds, Some(5));
        assert_eq!(spec.host_network, Some(true));
        let main = &spec.containers[0];
        assert_eq!(main.image_pull_policy.as_deref(), Some("Never"));
        let res = main.resources.as_ref().unwrap();
        assert_eq!(res.requests.as_ref().unwrap()["cpu"].0, "100m");
        assert_eq!(res.limits.as_ref().unwrap()["memory"].0, "1Gi");
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
    }

    #[test]
    fn unknown_fields_are_dropped_with_a_warning() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/corpus/good/unknown-fields.yaml"),
        )
        .unwrap();
        let m = parse_manifest(text.as_bytes(), &ctx("u.yaml"));
        assert!(m.errors.is_empty(), "{:?}", m.errors);
        assert_eq!(m.warnings.len(), 1);
        let w = &m.warnings[0];
        assert_eq!(
            w.unknown_fields,
            ["metadata.lables", "spec.containers[0].imagePullPolicyy"]
        );
        assert_eq!(w.pod, "default/web-node-1");
        assert_eq!(Some(w.uid.as_str()), m.pods[0].metadata.uid.as_deref());
        assert!(w
            .to_string()
            .starts_with("u.yaml: pod default/web-node-1: unknown fields dropped"));
        // The UID is the one of the same manifest without the unknown fields.
        let clean = text
            .replace(", lables: {a: b}", "")
            .replace(", imagePullPolicyy: Always", "");
        let c = parse_manifest(clean.as_bytes(), &ctx("u.yaml"));
        assert_eq!(c.pods[0].metadata.uid, m.pods[0].metadata.uid);
        assert!(c.warnings.is_empty());
        // In a list, the paths name the item.
        let list = "apiVersion: v1\nkind: PodList\nextra: 1\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: i, x: 1}]}\n";
        let l = parse_manifest(list.as_bytes(), &ctx("l.yaml"));
        assert!(l.errors.is_empty(), "{:?}", l.errors);
        assert_eq!(
            l.warnings[0].unknown_fields,
            ["extra", "items[0].spec.containers[0].x"]
        );
    }

    #[test]
    fn example_manifests_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/manifests");
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let origin = path.display().to_string();
            let m = parse_manifest(text.as_bytes(), &ctx(&origin));
            assert!(m.errors.is_empty(), "{origin}: {:?}", m.errors);
            assert_eq!(m.pods.len(), 1, "{origin}");
            let c = &m.pods[0].spec.as_ref().unwrap().containers[0];
            assert_eq!(c.image.as_deref(), Some("kubelet-rs.local/busybox:1.0"));
            assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
            count += 1;
        }
        assert!(count >= 2);
    }
}
