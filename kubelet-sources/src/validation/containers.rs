//! Containers, init containers and ephemeral containers (Go's `validateContainers`,
//! `validateInitContainers`): names unique across all of them, image, ports and host port
//! conflicts, env and envFrom, volume mounts naming existing volumes with relative sub paths,
//! probes and lifecycle handlers, resources (requests ≤ limits), the security context.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvFromSource, EnvVar, LifecycleHandler, Probe,
    ResourceFieldSelector, ResourceRequirements, SecurityContext, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubelet_core::resources;

use super::names;
use super::volumes::{field_selector, local_descending};
use super::{nonnegative, BadValue, ErrorList, FieldError, Path};

/// Which list a container is in (the rules differ a little).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `spec.containers`
    App,
    /// `spec.initContainers`
    Init,
}

const ENV_FIELDS: [&str; 11] = [
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Validates one list of containers; `names` holds the names already used (app containers
/// before init containers, as Go checks them).
pub fn validate_containers(
    containers: &[Container],
    kind: Kind,
    volumes: &BTreeMap<&str, &Volume>,
    names_seen: &mut BTreeSet<String>,
    path: &Path,
    errs: &mut ErrorList,
) {
    if kind == Kind::App && containers.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    for (i, c) in containers.iter().enumerate() {
        let idx = path.index(i);
        let name_path = idx.child("name");
        if c.name.is_empty() {
            errs.push(FieldError::required(&name_path, ""));
        } else {
            for msg in names::dns1123_label(&c.name) {
                errs.push(FieldError::invalid(&name_path, &c.name, &msg));
            }
        }
        if !names_seen.insert(c.name.clone()) {
            errs.push(FieldError::duplicate(&name_path, &c.name));
        }
        let image = c.image.as_deref().unwrap_or("");
        if image.is_empty() {
            errs.push(FieldError::required(&idx.child("image"), ""));
        } else if image.trim() != image {
            errs.push(FieldError::invalid(
                &idx.child("image"),
                image,
                "must not have leading or trailing whitespace",
            ));
        }
        let sidecar = kind == Kind::Init && c.restart_policy.as_deref() == Some("Always");
        if kind == Kind::Init {
            if let Some(p) = c.restart_policy.as_deref().filter(|p| *p != "Always") {
                errs.push(FieldError::not_supported(
                    &idx.child("restartPolicy"),
                    p,
                    &["Always"],
                ));
            }
        } else if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                &idx.child("restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
        let probes = [
            ("livenessProbe", &c.liveness_probe),
            ("readinessProbe", &c.readiness_probe),
            ("startupProbe", &c.startup_probe),
        ];
        if kind == Kind::Init && !sidecar {
            if c.lifecycle.is_some() {
                errs.push(FieldError::forbidden(
                    &idx.child("lifecycle"),
                    "may not be set for init containers without restartPolicy=Always",
                ));
            }
            for (name, p) in probes {
                if p.is_some() {
                    errs.push(FieldError::forbidden(
                        &idx.child(name),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        } else {
            if let Some(l) = c.lifecycle.as_ref() {
                let lp = idx.child("lifecycle");
                if let Some(h) = l.post_start.as_ref() {
                    lifecycle_handler(h, &lp.child("postStart"), errs);
                }
                if let Some(h) = l.pre_stop.as_ref() {
                    lifecycle_handler(h, &lp.child("preStop"), errs);
                }
            }
            for (name, p) in probes {
                if let Some(p) = p {
                    probe(p, name, &idx.child(name), errs);
                }
            }
        }
        match c.termination_message_policy.as_deref().unwrap_or("") {
            "File" | "FallbackToLogsOnError" => {}
            "" => errs.push(FieldError::required(
                &idx.child("terminationMessagePolicy"),
                "must be 'File' or 'FallbackToLogsOnError'",
            )),
            other => errs.push(FieldError::invalid(
                &idx.child("terminationMessagePolicy"),
                other,
                "must be 'File' or 'FallbackToLogsOnError'",
            )),
        }
        ports(c.ports.iter().flatten(), &idx.child("ports"), errs);
        env(c.env.iter().flatten(), &idx.child("env"), errs);
        env_from(c.env_from.iter().flatten(), &idx.child("envFrom"), errs);
        volume_mounts(c, volumes, &idx.child("volumeMounts"), errs);
        match c.image_pull_policy.as_deref().unwrap_or("") {
            "Always" | "IfNotPresent" | "Never" => {}
            "" => errs.push(FieldError::required(&idx.child("imagePullPolicy"), "")),
            other => errs.push(FieldError::not_supported(
                &idx.child("imagePullPolicy"),
                other,
                &["Always", "IfNotPresent", "Never"],
            )),
        }
        if let Some(r) = c.resources.as_ref() {
            resource_requirements(r, &idx.child("resources"), errs);
        }
        if let Some(sc) = c.security_context.as_ref() {
            security_context(sc, &idx.child("securityContext"), errs);
        }
    }
    // Host ports may not collide: across app containers, or within one init container (init
    // containers run one at a time).
    let mut seen = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        if kind == Kind::Init {
            seen.clear();
        }
        for (j, p) in c.ports.iter().flatten().enumerate() {
            let host_port = p.host_port.unwrap_or(0);
            if host_port == 0 {
                continue;
            }
            let key = format!(
                "{}/{}/{host_port}",
                p.host_ip.as_deref().unwrap_or(""),
                p.protocol.as_deref().unwrap_or("TCP")
            );
            if !seen.insert(key.clone()) {
                let at = path.index(i).child("ports").index(j).child("hostPort");
                errs.push(FieldError::duplicate(&at, key));
            }
        }
    }
}

fn ports<'a>(ports: impl Iterator<Item = &'a ContainerPort>, path: &Path, errs: &mut ErrorList) {
    let mut names_seen = BTreeSet::new();
    for (i, p) in ports.enumerate() {
        let idx = path.index(i);
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                for msg in msgs {
                    errs.push(FieldError::invalid(&idx.child("name"), name, &msg));
                }
            } else if !names_seen.insert(name) {
                errs.push(FieldError::duplicate(&idx.child("name"), name));
            }
        }
        if p.container_port == 0 {
            errs.push(FieldError::required(&idx.child("containerPort"), ""));
        } else {
            for msg in names::port_num(p.container_port) {
                errs.push(FieldError::invalid(
                    &idx.child("containerPort"),
                    p.container_port,
                    &msg,
                ));
            }
        }
        if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
            for msg in names::port_num(hp) {
                errs.push(FieldError::invalid(&idx.child("hostPort"), hp, &msg));
            }
        }
        match p.protocol.as_deref().unwrap_or("") {
            "TCP" | "UDP" | "SCTP" => {}
            "" => errs.push(FieldError::required(&idx.child("protocol"), "")),
            other => errs.push(FieldError::not_supported(
                &idx.child("protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

fn env<'a>(vars: impl Iterator<Item = &'a EnvVar>, path: &Path, errs: &mut ErrorList) {
    for (i, ev) in vars.enumerate() {
        let idx = path.index(i);
        if ev.name.is_empty() {
            errs.push(FieldError::required(&idx.child("name"), ""));
        } else {
            for msg in names::env_var_name(&ev.name) {
                errs.push(FieldError::invalid(&idx.child("name"), &ev.name, &msg));
            }
        }
        let Some(from) = ev.value_from.as_ref() else {
            continue;
        };
        let vf = idx.child("valueFrom");
        let mut n = 0;
        if let Some(r) = from.field_ref.as_ref() {
            n += 1;
            field_selector(r, &ENV_FIELDS, &vf.child("fieldRef"), errs);
        }
        if let Some(r) = from.resource_field_ref.as_ref() {
            n += 1;
            resource_field_selector(r, &vf.child("resourceFieldRef"), errs);
        }
        if let Some(r) = from.config_map_key_ref.as_ref() {
            n += 1;
            key_selector(&r.name, &r.key, &vf.child("configMapKeyRef"), errs);
        }
        if let Some(r) = from.secret_key_ref.as_ref() {
            n += 1;
            key_selector(&r.name, &r.key, &vf.child("secretKeyRef"), errs);
        }
        if from.file_key_ref.is_some() {
            n += 1;
        }
        if n == 0 {
            errs.push(FieldError::invalid(
                &vf,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if n > 1 {
            errs.push(FieldError::invalid(
                &vf,
                "",
                "may not have more than one field specified at a time",
            ));
        } else if ev.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                &vf,
                "",
                "may not be specified when `value` is not empty",
            ));
        }
    }
}

fn key_selector(name: &str, key: &str, path: &Path, errs: &mut ErrorList) {
    if name.is_empty() {
        errs.push(FieldError::required(&path.child("name"), ""));
    }
    if key.is_empty() {
        errs.push(FieldError::required(&path.child("key"), ""));
    } else {
        for msg in names::config_map_key(key) {
            errs.push(FieldError::invalid(&path.child("key"), key, &msg));
        }
    }
}

/// Go's `validateContainerResourceFieldSelector`.
pub fn resource_field_selector(r: &ResourceFieldSelector, path: &Path, errs: &mut ErrorList) {
    const SUPPORTED: [&str; 6] = [
        "limits.cpu",
        "limits.ephemeral-storage",
        "limits.memory",
        "requests.cpu",
        "requests.ephemeral-storage",
        "requests.memory",
    ];
    let rp = path.child("resource");
    if r.resource.is_empty() {
        errs.push(FieldError::required(&rp, ""));
    } else if !SUPPORTED.contains(&r.resource.as_str())
        && !r.resource.starts_with("limits.hugepages-")
        && !r.resource.starts_with("requests.hugepages-")
    {
        errs.push(FieldError::not_supported(&rp, &r.resource, &SUPPORTED));
    }
    if let Some(d) = r.divisor.as_ref() {
        if resources::value(d).is_err() && resources::milli_value(d).is_err() {
            errs.push(FieldError::invalid(
                &path.child("divisor"),
                &d.0,
                "invalid quantity",
            ));
        }
    }
}

fn env_from<'a>(
    sources: impl Iterator<Item = &'a EnvFromSource>,
    path: &Path,
    errs: &mut ErrorList,
) {
    for (i, ev) in sources.enumerate() {
        let idx = path.index(i);
        if let Some(prefix) = ev.prefix.as_deref().filter(|p| !p.is_empty()) {
            for msg in names::env_var_name(prefix) {
                errs.push(FieldError::invalid(&idx.child("prefix"), prefix, &msg));
            }
        }
        let refs = [
            (
                "configMapRef",
                ev.config_map_ref.as_ref().map(|r| r.name.as_str()),
            ),
            ("secretRef", ev.secret_ref.as_ref().map(|r| r.name.as_str())),
        ];
        let n = refs.iter().filter(|(_, r)| r.is_some()).count();
        if n == 0 {
            errs.push(FieldError::invalid(
                &idx,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if n > 1 {
            errs.push(FieldError::invalid(
                &idx,
                "",
                "may not have more than one field specified at a time",
            ));
        }
        for (field, name) in refs {
            if let Some(name) = name {
                for msg in names::dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(
                        &idx.child(field).child("name"),
                        name,
                        &msg,
                    ));
                }
            }
        }
    }
}

fn volume_mounts(
    c: &Container,
    volumes: &BTreeMap<&str, &Volume>,
    path: &Path,
    errs: &mut ErrorList,
) {
    let mut mount_points = BTreeSet::new();
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let idx = path.index(i);
        if m.name.is_empty() {
            errs.push(FieldError::required(&idx.child("name"), ""));
        }
        if !volumes.contains_key(m.name.as_str()) {
            errs.push(FieldError::not_found(&idx.child("name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(&idx.child("mountPath"), ""));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                &idx.child("mountPath"),
                &m.mount_path,
                "must be unique",
            ));
        }
        // Go names the list, not the item, for the sub path fields.
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            local_descending(sub_path, &path.child("subPath"), errs);
        }
        if let Some(expr) = m.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
            if !sub_path.is_empty() {
                errs.push(FieldError::invalid(
                    &idx.child("subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            local_descending(expr, &path.child("subPathExpr"), errs);
        }
        if let Some(p) = m.mount_propagation.as_deref() {
            let pp = path.child("mountPropagation");
            match p {
                "None" | "HostToContainer" => {}
                "Bidirectional" if privileged => {}
                "Bidirectional" => errs.push(FieldError::forbidden(
                    &pp,
                    "Bidirectional mount propagation is available only to privileged containers",
                )),
                other => errs.push(FieldError::not_supported(
                    &pp,
                    other,
                    &["Bidirectional", "HostToContainer", "None"],
                )),
            }
        }
    }
}

fn int_or_string_port(port: &IntOrString, path: &Path, errs: &mut ErrorList) {
    match port {
        IntOrString::Int(n) => {
            for msg in names::port_num(*n) {
                errs.push(FieldError::invalid(path, *n, &msg));
            }
        }
        IntOrString::String(s) => {
            for msg in names::port_name(s) {
                errs.push(FieldError::invalid(path, s, &msg));
            }
        }
    }
}

/// The handler of a probe or lifecycle hook: exactly one type, each valid.
struct Handler<'a> {
    exec: Option<&'a k8s_openapi::api::core::v1::ExecAction>,
    http_get: Option<&'a k8s_openapi::api::core::v1::HTTPGetAction>,
    tcp_socket: Option<&'a k8s_openapi::api::core::v1::TCPSocketAction>,
    grpc: Option<&'a k8s_openapi::api::core::v1::GRPCAction>,
    sleep: bool,
}

fn handler(h: &Handler<'_>, path: &Path, errs: &mut ErrorList) {
    let mut n = 0;
    let mut one = |name: &str, present: bool, errs: &mut ErrorList| -> bool {
        if !present {
            return false;
        }
        if n > 0 {
            errs.push(FieldError::forbidden(
                &path.child(name),
                "may not specify more than 1 handler type",
            ));
            return false;
        }
        n += 1;
        true
    };
    if one("exec", h.exec.is_some(), errs) {
        if let Some(e) = h.exec {
            if e.command.as_ref().is_none_or(Vec::is_empty) {
                errs.push(FieldError::required(
                    &path.child("exec").child("command"),
                    "",
                ));
            }
        }
    }
    if one("httpGet", h.http_get.is_some(), errs) {
        if let Some(g) = h.http_get {
            let gp = path.child("httpGet");
            int_or_string_port(&g.port, &gp.child("port"), errs);
            if let Some(s) = g.scheme.as_deref() {
                if !matches!(s, "HTTP" | "HTTPS") {
                    errs.push(FieldError::not_supported(
                        &gp.child("scheme"),
                        s,
                        &["HTTP", "HTTPS"],
                    ));
                }
            }
            for hdr in g.http_headers.iter().flatten() {
                let ok = !hdr.name.is_empty()
                    && hdr
                        .name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-');
                if !ok {
                    errs.push(FieldError::invalid(
                        &gp.child("httpHeaders"),
                        &hdr.name,
                        "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
                    ));
                }
            }
        }
    }
    if one("tcpSocket", h.tcp_socket.is_some(), errs) {
        if let Some(t) = h.tcp_socket {
            int_or_string_port(&t.port, &path.child("tcpSocket").child("port"), errs);
        }
    }
    if one("grpc", h.grpc.is_some(), errs) {
        if let Some(g) = h.grpc {
            for msg in names::port_num(g.port) {
                errs.push(FieldError::invalid(
                    &path.child("grpc").child("port"),
                    g.port,
                    &msg,
                ));
            }
        }
    }
    one("sleep", h.sleep, errs);
    if n == 0 {
        errs.push(FieldError::required(path, "must specify a handler type"));
    }
}

fn lifecycle_handler(h: &LifecycleHandler, path: &Path, errs: &mut ErrorList) {
    let hd = Handler {
        exec: h.exec.as_ref(),
        http_get: h.http_get.as_ref(),
        tcp_socket: h.tcp_socket.as_ref(),
        grpc: None,
        sleep: h.sleep.is_some(),
    };
    handler(&hd, path, errs);
}

fn probe(p: &Probe, kind: &str, path: &Path, errs: &mut ErrorList) {
    let hd = Handler {
        exec: p.exec.as_ref(),
        http_get: p.http_get.as_ref(),
        tcp_socket: p.tcp_socket.as_ref(),
        grpc: p.grpc.as_ref(),
        sleep: false,
    };
    handler(&hd, path, errs);
    let fields = [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ];
    for (name, v) in fields {
        if let Some(v) = v {
            nonnegative(i64::from(v), &path.child(name), errs);
        }
    }
    if let Some(t) = p.termination_grace_period_seconds {
        if kind == "readinessProbe" {
            errs.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                t,
                "must not be set for readinessProbes",
            ));
        } else if t <= 0 {
            errs.push(FieldError::invalid(
                &path.child("terminationGracePeriodSeconds"),
                t,
                "must be greater than 0",
            ));
        }
    }
    if kind != "readinessProbe" {
        if let Some(s) = p.success_threshold.filter(|s| *s != 1) {
            errs.push(FieldError::invalid(
                &path.child("successThreshold"),
                s,
                "must be 1",
            ));
        }
    }
}

fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// Go's `ValidateResourceRequirements` for a container: standard or extended resource names,
/// non-negative quantities, integers for extended resources, requests ≤ limits (= for
/// resources that may not be overcommitted: extended resources and huge pages).
pub fn resource_requirements(r: &ResourceRequirements, path: &Path, errs: &mut ErrorList) {
    let lim_path = path.child("limits");
    let req_path = path.child("requests");
    let mut limits = BTreeMap::new();
    for (name, q) in r.limits.iter().flatten() {
        let at = lim_path.key(name);
        resource_name(name, &at, errs);
        if let Some(v) = quantity_value(name, q, &at, errs) {
            limits.insert(name.as_str(), v);
        }
    }
    for (name, q) in r.requests.iter().flatten() {
        let at = req_path.key(name);
        resource_name(name, &at, errs);
        let Some(request) = quantity_value(name, q, &at, errs) else {
            continue;
        };
        let overcommit = is_native(name) && !name.starts_with("hugepages-");
        match limits.get(name.as_str()) {
            Some(limit) if !overcommit && request != *limit => errs.push(FieldError::invalid(
                &req_path,
                &q.0,
                &format!("must be equal to {name} limit"),
            )),
            Some(limit) if request > *limit => errs.push(FieldError::invalid(
                &req_path,
                &q.0,
                &format!("must be less than or equal to {name} limit"),
            )),
            Some(_) => {}
            None if !overcommit => errs.push(FieldError::required(
                &lim_path,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
}

fn resource_name(name: &str, path: &Path, errs: &mut ErrorList) {
    for msg in names::qualified_name(name) {
        errs.push(FieldError::invalid(path, name, &msg));
    }
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            errs.push(FieldError::invalid(
                path,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !is_native(name) && !names::qualified_name(&format!("requests.{name}")).is_empty() {
        errs.push(FieldError::invalid(
            path,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
}

/// A quantity in the resource's unit (millicores for cpu), or an error; `None` on error.
pub fn quantity_value(name: &str, q: &Quantity, path: &Path, errs: &mut ErrorList) -> Option<i64> {
    let milli = match resources::milli_value(q) {
        Ok(m) => m,
        Err(e) => {
            errs.push(FieldError::invalid(path, &q.0, e.detail()));
            return None;
        }
    };
    if milli < 0 {
        errs.push(FieldError::invalid(
            path,
            &q.0,
            "must be greater than or equal to 0",
        ));
        return None;
    }
    if !is_native(name) && milli % 1000 != 0 {
        errs.push(FieldError::invalid(path, &q.0, "must be an integer"));
    }
    Some(milli)
}

const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";

/// Go's `IsValidUserID`/`IsValidGroupID`.
pub fn id(v: i64, path: &Path, errs: &mut ErrorList) {
    if !(0..=i64::from(i32::MAX)).contains(&v) {
        errs.push(FieldError::invalid(path, v, ID_RANGE));
    }
}

/// Go's `validateSeccompProfileField`.
pub fn seccomp_profile(
    p: &k8s_openapi::api::core::v1::SeccompProfile,
    path: &Path,
    errs: &mut ErrorList,
) {
    let local = p.localhost_profile.as_deref();
    match p.type_.as_str() {
        "Localhost" => match local {
            None | Some("") => errs.push(FieldError::required(
                &path.child("localhostProfile"),
                "must be set when seccomp type is Localhost",
            )),
            Some(l) => local_descending(l, &path.child("localhostProfile"), errs),
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(l) = local {
                errs.push(FieldError::invalid(
                    &path.child("localhostProfile"),
                    l,
                    "can only be set when seccomp type is Localhost",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            &path.child("type"),
            other,
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
}

fn security_context(sc: &SecurityContext, path: &Path, errs: &mut ErrorList) {
    if let Some(u) = sc.run_as_user {
        id(u, &path.child("runAsUser"), errs);
    }
    if let Some(g) = sc.run_as_group {
        id(g, &path.child("runAsGroup"), errs);
    }
    if let Some(pm) = sc.proc_mount.as_deref() {
        if !matches!(pm, "Default" | "Unmasked") {
            errs.push(FieldError::not_supported(
                &path.child("procMount"),
                pm,
                &["Default", "Unmasked"],
            ));
        }
    }
    if let Some(p) = sc.seccomp_profile.as_ref() {
        seccomp_profile(p, &path.child("seccompProfile"), errs);
    }
    if sc.allow_privilege_escalation == Some(false) {
        let shown = || BadValue::Other(serde_json::to_string(sc).unwrap_or_default());
        if sc.privileged == Some(true) {
            errs.push(FieldError::invalid(
                path,
                shown(),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc.capabilities.as_ref().and_then(|c| c.add.as_ref());
        if adds.is_some_and(|a| a.iter().any(|c| c == "CAP_SYS_ADMIN")) {
            errs.push(FieldError::invalid(
                path,
                shown(),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
}
