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
#[path = "static_pod_tests.rs"]
mod tests;
