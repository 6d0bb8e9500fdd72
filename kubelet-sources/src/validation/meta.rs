//! Object meta of a pod (Go's `ValidateObjectMeta` with `ValidatePodName`, plus
//! `ValidatePodSpecificAnnotations`): name or generateName, namespace, labels, annotations and
//! their total size, owner references, finalizers.

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::names;
use super::{nonnegative, ErrorList, FieldError, Path};

/// Largest total size of a object's annotations, keys and values (Go's
/// `TotalAnnotationSizeLimitB`, 256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Go's `ValidateObjectMeta(meta, requiresNamespace=true, ValidatePodName, path)`.
pub fn validate_object_meta(meta: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    if let Some(g) = meta.generate_name.as_deref().filter(|g| !g.is_empty()) {
        for msg in names::name_is_dns_subdomain(g, true) {
            errs.push(FieldError::invalid(&path.child("generateName"), g, &msg));
        }
    }
    let name = meta.name.as_deref().unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(
            &path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in names::name_is_dns_subdomain(name, false) {
            errs.push(FieldError::invalid(&path.child("name"), name, &msg));
        }
    }
    let ns = meta.namespace.as_deref().unwrap_or("");
    if ns.is_empty() {
        errs.push(FieldError::required(&path.child("namespace"), ""));
    } else {
        for msg in names::dns1123_label(ns) {
            errs.push(FieldError::invalid(&path.child("namespace"), ns, &msg));
        }
    }
    if let Some(g) = meta.generation {
        nonnegative(g, &path.child("generation"), &mut errs);
    }
    if let Some(labels) = meta.labels.as_ref() {
        validate_labels(labels.iter(), &path.child("labels"), &mut errs);
    }
    if let Some(annotations) = meta.annotations.as_ref() {
        validate_annotations(annotations, &path.child("annotations"), &mut errs);
    }
    let owners = path.child("ownerReferences");
    for o in meta.owner_references.iter().flatten() {
        let version = o.api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &owners.child("apiVersion"),
                &o.api_version,
                "version must not be empty",
            ));
        }
        if o.kind.is_empty() {
            errs.push(FieldError::invalid(
                &owners.child("kind"),
                &o.kind,
                "kind must not be empty",
            ));
        }
        if o.name.is_empty() {
            errs.push(FieldError::invalid(
                &owners.child("name"),
                &o.name,
                "name must not be empty",
            ));
        }
        if o.uid.is_empty() {
            errs.push(FieldError::invalid(
                &owners.child("uid"),
                &o.uid,
                "uid must not be empty",
            ));
        }
    }
    let finalizers = path.child("finalizers");
    for f in meta.finalizers.iter().flatten() {
        for msg in names::qualified_name(f) {
            errs.push(FieldError::invalid(&finalizers, f, &msg));
        }
    }
    errs
}

/// Go's `ValidateLabels`: keys are qualified names, values label values; errors name the map
/// itself (Go does not key the path).
pub fn validate_labels<'a>(
    labels: impl Iterator<Item = (&'a String, &'a String)>,
    path: &Path,
    errs: &mut ErrorList,
) {
    for (k, v) in labels {
        for msg in names::qualified_name(k) {
            errs.push(FieldError::invalid(path, k, &msg));
        }
        for msg in names::label_value(v) {
            errs.push(FieldError::invalid(path, v, &msg));
        }
    }
}

/// Go's `ValidateAnnotations`: keys are qualified names (compared lower-cased), and keys plus
/// values total at most 256 KiB.
pub fn validate_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
    path: &Path,
    errs: &mut ErrorList,
) {
    let mut total = 0usize;
    for (k, v) in annotations {
        for msg in names::qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k, &msg));
        }
        total = total.saturating_add(k.len()).saturating_add(v.len());
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// Go's `ValidatePodSpecificAnnotations`: the mirror annotation needs a node name, the
/// deletion cost is an int32, seccomp and AppArmor annotations name valid profiles (and, for
/// AppArmor, existing containers).
pub fn validate_pod_annotations(meta: &ObjectMeta, spec: &PodSpec, path: &Path) -> ErrorList {
    let mut errs = ErrorList::new();
    let Some(annotations) = meta.annotations.as_ref() else {
        return errs;
    };
    if let Some(v) = annotations.get(kubelet_core::pod::CONFIG_MIRROR_ANNOTATION) {
        if spec.node_name.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::invalid(
                &path.key(kubelet_core::pod::CONFIG_MIRROR_ANNOTATION),
                v,
                "must set spec.nodeName if mirror pod annotation is set",
            ));
        }
    }
    if let Some(v) = annotations.get(DELETION_COST_ANNOTATION) {
        if v.parse::<i32>().is_err() {
            errs.push(FieldError::invalid(
                &path.key(DELETION_COST_ANNOTATION),
                v,
                "must be a 32bit integer",
            ));
        }
    }
    let container_names: Vec<&str> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    for (k, v) in annotations {
        if k == SECCOMP_POD_ANNOTATION || k.starts_with(SECCOMP_CONTAINER_PREFIX) {
            if !valid_seccomp_annotation(v) {
                errs.push(FieldError::invalid(
                    &path.key(k),
                    v,
                    "must be a valid seccomp profile",
                ));
            }
        } else if let Some(container) = k.strip_prefix(APPARMOR_PREFIX) {
            if !container_names.contains(&container) {
                errs.push(FieldError::invalid(
                    &path.key(k),
                    container,
                    "container not found",
                ));
            }
            if !valid_apparmor_annotation(v) {
                errs.push(FieldError::invalid(
                    &path.key(k),
                    v,
                    "invalid AppArmor profile name: must be runtime/default, unconfined or localhost/<profile>",
                ));
            }
        }
    }
    errs
}

fn valid_seccomp_annotation(v: &str) -> bool {
    match v {
        "runtime/default" | "docker/default" | "unconfined" => true,
        _ => v.strip_prefix("localhost/").is_some_and(|p| {
            !p.is_empty() && !p.starts_with('/') && !p.split('/').any(|s| s == "..")
        }),
    }
}

fn valid_apparmor_annotation(v: &str) -> bool {
    matches!(v, "runtime/default" | "unconfined")
        || v.strip_prefix("localhost/").is_some_and(|p| !p.is_empty())
}
