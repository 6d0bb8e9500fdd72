//! The pod spec's own fields (Go's `ValidatePodSpec`): volumes and containers (delegated),
//! restart and DNS policies, DNS config, node selector, the pod security context, host
//! network ports, affinity, tolerations, host aliases, topology spread constraints, readiness
//! gates, names (hostname, subdomain, service account, priority and runtime classes) and
//! numeric ranges.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorRequirement, NodeSelectorTerm, PodAffinityTerm, PodDNSConfig, PodSpec,
    Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::containers::{self, Kind};
use super::meta::{validate_labels, validate_pod_annotations};
use super::names;
use super::{nonnegative, ErrorList, FieldError, Path};

/// Go's `ValidatePodSpec` plus the create-only rules (no ephemeral containers) and the pod
/// specific annotations, which need the spec.
pub fn validate_pod_spec(spec: &PodSpec, meta: &ObjectMeta, path: &Path) -> ErrorList {
    let mut errs =
        validate_pod_annotations(meta, spec, &Path::new("metadata").child("annotations"));
    let volumes: &[_] = spec.volumes.as_deref().unwrap_or_default();
    let vols = super::volumes::validate_volumes(volumes, &path.child("volumes"), &mut errs);
    let mut names_seen = BTreeSet::new();
    containers::validate_containers(
        &spec.containers,
        Kind::App,
        &vols,
        &mut names_seen,
        &path.child("containers"),
        &mut errs,
    );
    containers::validate_containers(
        spec.init_containers.as_deref().unwrap_or_default(),
        Kind::Init,
        &vols,
        &mut names_seen,
        &path.child("initContainers"),
        &mut errs,
    );
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        errs.push(FieldError::forbidden(
            &path.child("ephemeralContainers"),
            "cannot be set on create",
        ));
    }
    match spec.restart_policy.as_deref().unwrap_or("") {
        "Always" | "OnFailure" | "Never" => {}
        "" => errs.push(FieldError::required(&path.child("restartPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("restartPolicy"),
            other,
            &["Always", "OnFailure", "Never"],
        )),
    }
    let dns_policy = spec.dns_policy.as_deref().unwrap_or("");
    match dns_policy {
        "ClusterFirst" | "ClusterFirstWithHostNet" | "Default" | "None" => {}
        "" => errs.push(FieldError::required(&path.child("dnsPolicy"), "")),
        other => errs.push(FieldError::not_supported(
            &path.child("dnsPolicy"),
            other,
            &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"],
        )),
    }
    if let Some(sel) = spec.node_selector.as_ref() {
        validate_labels(sel.iter(), &path.child("nodeSelector"), &mut errs);
    }
    pod_security_context(spec, path, &mut errs);
    host_network_ports(spec, path, &mut errs);
    if let Some(a) = spec.affinity.as_ref() {
        affinity(a, &path.child("affinity"), &mut errs);
    }
    dns_config(
        spec.dns_config.as_ref(),
        dns_policy,
        &path.child("dnsConfig"),
        &mut errs,
    );
    for (i, g) in spec.readiness_gates.iter().flatten().enumerate() {
        for msg in names::qualified_name(&g.condition_type) {
            errs.push(FieldError::invalid(
                &path.child("readinessGates").index(i).child("conditionType"),
                &g.condition_type,
                &msg,
            ));
        }
    }
    topology_spread(
        spec.topology_spread_constraints
            .as_deref()
            .unwrap_or_default(),
        &path.child("topologySpreadConstraints"),
        &mut errs,
    );
    // `spec.nodeName` is the kubelet's own node name (set by the defaults), not the manifest's:
    // it is not checked here.
    let subdomain_fields = [
        ("serviceAccountName", spec.service_account_name.as_deref()),
        ("priorityClassName", spec.priority_class_name.as_deref()),
        ("runtimeClassName", spec.runtime_class_name.as_deref()),
    ];
    for (field, value) in subdomain_fields {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            for msg in names::dns1123_subdomain(v) {
                errs.push(FieldError::invalid(&path.child(field), v, &msg));
            }
        }
    }
    for (field, value) in [
        ("hostname", spec.hostname.as_deref()),
        ("subdomain", spec.subdomain.as_deref()),
    ] {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            for msg in names::dns1123_label(v) {
                errs.push(FieldError::invalid(&path.child(field), v, &msg));
            }
        }
    }
    if let Some(d) = spec.active_deadline_seconds {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            errs.push(FieldError::invalid(
                &path.child("activeDeadlineSeconds"),
                d,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    if let Some(g) = spec.termination_grace_period_seconds {
        nonnegative(g, &path.child("terminationGracePeriodSeconds"), &mut errs);
    }
    tolerations(
        spec.tolerations.as_deref().unwrap_or_default(),
        &path.child("tolerations"),
        &mut errs,
    );
    for (i, h) in spec.host_aliases.iter().flatten().enumerate() {
        let idx = path.child("hostAliases").index(i);
        for msg in names::ip(&h.ip) {
            errs.push(FieldError::invalid(&idx.child("ip"), &h.ip, &msg));
        }
        for (j, host) in h.hostnames.iter().flatten().enumerate() {
            for msg in names::dns1123_subdomain(host) {
                errs.push(FieldError::invalid(
                    &idx.child("hostnames").index(j),
                    host,
                    &msg,
                ));
            }
        }
    }
    if let Some(p) = spec.preemption_policy.as_deref() {
        if !matches!(p, "Never" | "PreemptLowerPriority") {
            errs.push(FieldError::not_supported(
                &path.child("preemptionPolicy"),
                p,
                &["Never", "PreemptLowerPriority"],
            ));
        }
    }
    for (name, q) in spec.overhead.iter().flatten() {
        let at = path.child("overhead").key(name);
        for msg in names::qualified_name(name) {
            errs.push(FieldError::invalid(&at, name, &msg));
        }
        containers::quantity_value(name, q, &at, &mut errs);
    }
    if let Some(os) = spec.os.as_ref() {
        match os.name.as_str() {
            "linux" | "windows" => {}
            "" => errs.push(FieldError::required(&path.child("os").child("name"), "")),
            other => errs.push(FieldError::not_supported(
                &path.child("os").child("name"),
                other,
                &["linux", "windows"],
            )),
        }
    }
    errs
}

fn pod_security_context(spec: &PodSpec, spec_path: &Path, errs: &mut ErrorList) {
    let path = spec_path.child("securityContext");
    // Go keeps hostPID in its internal security context, so the error names it there.
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        errs.push(FieldError::invalid(
            &path.child("shareProcessNamespace"),
            true,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    let Some(sc) = spec.security_context.as_ref() else {
        return;
    };
    if let Some(g) = sc.fs_group {
        containers::id(g, &path.child("fsGroup"), errs);
    }
    if let Some(u) = sc.run_as_user {
        containers::id(u, &path.child("runAsUser"), errs);
    }
    if let Some(g) = sc.run_as_group {
        containers::id(g, &path.child("runAsGroup"), errs);
    }
    for (i, g) in sc.supplemental_groups.iter().flatten().enumerate() {
        containers::id(*g, &path.child("supplementalGroups").index(i), errs);
    }
    let mut sysctl_names = BTreeSet::new();
    for (i, s) in sc.sysctls.iter().flatten().enumerate() {
        let np = path.child("sysctls").index(i).child("name");
        if s.name.is_empty() {
            errs.push(FieldError::required(&np, ""));
        } else if !valid_sysctl_name(&s.name) {
            errs.push(FieldError::invalid(
                &np,
                &s.name,
                "must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            ));
        } else if !sysctl_names.insert(s.name.as_str()) {
            errs.push(FieldError::duplicate(&np, &s.name));
        }
    }
    if let Some(p) = sc.fs_group_change_policy.as_deref() {
        if !matches!(p, "OnRootMismatch" | "Always") {
            errs.push(FieldError::not_supported(
                &path.child("fsGroupChangePolicy"),
                p,
                &["OnRootMismatch", "Always"],
            ));
        }
    }
    if let Some(p) = sc.seccomp_profile.as_ref() {
        containers::seccomp_profile(p, &path.child("seccompProfile"), errs);
    }
}

fn valid_sysctl_name(name: &str) -> bool {
    let seg_ok = |s: &str| {
        let b = s.as_bytes();
        let an = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && an(b[0])
            && an(b[b.len() - 1])
            && b.iter().all(|&c| an(c) || c == b'-' || c == b'_')
    };
    name.len() <= 253 && name.split(['.', '/']).all(seg_ok)
}

fn host_network_ports(spec: &PodSpec, path: &Path, errs: &mut ErrorList) {
    if spec.host_network != Some(true) {
        return;
    }
    for (i, c) in spec.containers.iter().enumerate() {
        for (j, p) in c.ports.iter().flatten().enumerate() {
            // Defaulting makes a missing host port the container port on the host network.
            let hp = p.host_port.filter(|h| *h != 0).unwrap_or(p.container_port);
            if hp != p.container_port {
                let at = path.child("containers").index(i).child("ports").index(j);
                errs.push(FieldError::invalid(
                    &at.child("hostPort"),
                    hp,
                    "must match `containerPort` when `hostNetwork` is true",
                ));
            }
        }
    }
}

fn dns_config(c: Option<&PodDNSConfig>, policy: &str, path: &Path, errs: &mut ErrorList) {
    let Some(c) = c else {
        if policy == "None" {
            errs.push(FieldError::required(
                path,
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
        }
        return;
    };
    let servers = c.nameservers.as_deref().unwrap_or_default();
    if policy == "None" && servers.is_empty() {
        errs.push(FieldError::required(
            &path.child("nameservers"),
            "must provide at least one DNS nameserver when `dnsPolicy` is None",
        ));
    }
    if servers.len() > 3 {
        errs.push(FieldError::invalid(
            &path.child("nameservers"),
            format!("{servers:?}"),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, ns) in servers.iter().enumerate() {
        for msg in names::ip(ns) {
            errs.push(FieldError::invalid(
                &path.child("nameservers").index(i),
                ns,
                &msg,
            ));
        }
    }
    let searches = c.searches.as_deref().unwrap_or_default();
    if searches.len() > 32 {
        errs.push(FieldError::invalid(
            &path.child("searches"),
            format!("{searches:?}"),
            "must not have more than 32 search paths",
        ));
    }
    let total: usize = searches.iter().map(String::len).sum::<usize>() + searches.len();
    if total > 2048 {
        errs.push(FieldError::invalid(
            &path.child("searches"),
            format!("{} search paths", searches.len()),
            "must not have more than 2048 characters (including spaces) in the search list",
        ));
    }
    for (i, s) in searches.iter().enumerate() {
        let s = s.strip_suffix('.').unwrap_or(s);
        for msg in names::dns1123_subdomain(s) {
            errs.push(FieldError::invalid(
                &path.child("searches").index(i),
                s,
                &msg,
            ));
        }
    }
    for (i, o) in c.options.iter().flatten().enumerate() {
        if o.name.as_deref().unwrap_or("").is_empty() {
            errs.push(FieldError::required(
                &path.child("options").index(i),
                "must not be empty",
            ));
        }
    }
}

fn tolerations(list: &[Toleration], path: &Path, errs: &mut ErrorList) {
    for (i, t) in list.iter().enumerate() {
        let idx = path.index(i);
        let key = t.key.as_deref().unwrap_or("");
        let op = t.operator.as_deref().unwrap_or("");
        let effect = t.effect.as_deref().unwrap_or("");
        let value = t.value.as_deref().unwrap_or("");
        if !key.is_empty() {
            for msg in names::qualified_name(key) {
                errs.push(FieldError::invalid(&idx.child("key"), key, &msg));
            }
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                &idx.child("operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                &idx.child("effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        &idx.child("operator"),
                        value,
                        &msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        &idx.child("operator"),
                        value,
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(FieldError::not_supported(
                &idx.child("operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            errs.push(FieldError::not_supported(
                &idx.child("effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

fn weight(w: i32, path: &Path, errs: &mut ErrorList) {
    if !(1..=100).contains(&w) {
        errs.push(FieldError::invalid(
            &path.child("weight"),
            w,
            "must be in the range 1-100",
        ));
    }
}

fn affinity(a: &Affinity, path: &Path, errs: &mut ErrorList) {
    if let Some(na) = a.node_affinity.as_ref() {
        let np = path.child("nodeAffinity");
        if let Some(req) = na
            .required_during_scheduling_ignored_during_execution
            .as_ref()
        {
            let rp = np.child("requiredDuringSchedulingIgnoredDuringExecution");
            if req.node_selector_terms.is_empty() {
                errs.push(FieldError::required(
                    &rp.child("nodeSelectorTerms"),
                    "must have at least one node selector term",
                ));
            }
            for (i, t) in req.node_selector_terms.iter().enumerate() {
                node_selector_term(t, &rp.child("nodeSelectorTerms").index(i), errs);
            }
        }
        let pp = np.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            weight(t.weight, &pp.index(i), errs);
            node_selector_term(&t.preference, &pp.index(i).child("preference"), errs);
        }
    }
    let pod_affinities = [
        (
            "podAffinity",
            a.pod_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            a.pod_anti_affinity.as_ref().map(|p| {
                (
                    &p.required_during_scheduling_ignored_during_execution,
                    &p.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (name, terms) in pod_affinities {
        let Some((required, preferred)) = terms else {
            continue;
        };
        let ap = path.child(name);
        let rp = ap.child("requiredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in required.iter().flatten().enumerate() {
            pod_affinity_term(t, &rp.index(i), errs);
        }
        let pp = ap.child("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, t) in preferred.iter().flatten().enumerate() {
            weight(t.weight, &pp.index(i), errs);
            pod_affinity_term(
                &t.pod_affinity_term,
                &pp.index(i).child("podAffinityTerm"),
                errs,
            );
        }
    }
}

fn node_selector_term(t: &NodeSelectorTerm, path: &Path, errs: &mut ErrorList) {
    for (i, r) in t.match_expressions.iter().flatten().enumerate() {
        node_selector_requirement(r, &path.child("matchExpressions").index(i), errs);
    }
    for (i, r) in t.match_fields.iter().flatten().enumerate() {
        let rp = path.child("matchFields").index(i);
        if r.key != "metadata.name" {
            errs.push(FieldError::invalid(
                &rp.child("key"),
                &r.key,
                "not a valid field selector key",
            ));
        }
        if !matches!(r.operator.as_str(), "In" | "NotIn") {
            errs.push(FieldError::invalid(
                &rp.child("operator"),
                &r.operator,
                "not a valid selector operator",
            ));
        }
        if r.values.as_ref().is_none_or(|v| v.len() != 1) {
            errs.push(FieldError::required(
                &rp.child("values"),
                "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
            ));
        }
    }
}

fn node_selector_requirement(r: &NodeSelectorRequirement, path: &Path, errs: &mut ErrorList) {
    let values = r.values.as_deref().unwrap_or_default();
    let vp = path.child("values");
    match r.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() {
                errs.push(FieldError::required(
                    &vp,
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                errs.push(FieldError::forbidden(
                    &vp,
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
        }
        "Gt" | "Lt" => {
            if values.len() != 1 {
                errs.push(FieldError::required(
                    &vp,
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                ));
            }
        }
        other => errs.push(FieldError::invalid(
            &path.child("operator"),
            other,
            "not a valid selector operator",
        )),
    }
    for msg in names::qualified_name(&r.key) {
        errs.push(FieldError::invalid(&path.child("key"), &r.key, &msg));
    }
}

fn label_selector(s: &LabelSelector, path: &Path, errs: &mut ErrorList) {
    if let Some(m) = s.match_labels.as_ref() {
        validate_labels(m.iter(), &path.child("matchLabels"), errs);
    }
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let rp = path.child("matchExpressions").index(i);
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        &rp.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        &rp.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(FieldError::invalid(
                &rp.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for msg in names::qualified_name(&r.key) {
            errs.push(FieldError::invalid(&rp.child("key"), &r.key, &msg));
        }
    }
}

fn pod_affinity_term(t: &PodAffinityTerm, path: &Path, errs: &mut ErrorList) {
    if let Some(s) = t.label_selector.as_ref() {
        label_selector(s, &path.child("labelSelector"), errs);
    }
    if let Some(s) = t.namespace_selector.as_ref() {
        label_selector(s, &path.child("namespaceSelector"), errs);
    }
    for ns in t.namespaces.iter().flatten() {
        for msg in names::dns1123_label(ns) {
            errs.push(FieldError::invalid(&path.child("namespace"), ns, &msg));
        }
    }
    if t.topology_key.is_empty() {
        errs.push(FieldError::required(
            &path.child("topologyKey"),
            "can not be empty",
        ));
    } else {
        for msg in names::qualified_name(&t.topology_key) {
            errs.push(FieldError::invalid(
                &path.child("topologyKey"),
                &t.topology_key,
                &msg,
            ));
        }
    }
}

fn topology_spread(list: &[TopologySpreadConstraint], path: &Path, errs: &mut ErrorList) {
    let mut seen = BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let idx = path.index(i);
        if c.max_skew <= 0 {
            errs.push(FieldError::invalid(
                &idx.child("maxSkew"),
                c.max_skew,
                "must be greater than zero",
            ));
        }
        if c.topology_key.is_empty() {
            errs.push(FieldError::required(
                &idx.child("topologyKey"),
                "can not be empty",
            ));
        } else {
            for msg in names::qualified_name(&c.topology_key) {
                errs.push(FieldError::invalid(
                    &idx.child("topologyKey"),
                    &c.topology_key,
                    &msg,
                ));
            }
        }
        if !matches!(
            c.when_unsatisfiable.as_str(),
            "DoNotSchedule" | "ScheduleAnyway"
        ) {
            errs.push(FieldError::not_supported(
                &idx.child("whenUnsatisfiable"),
                &c.when_unsatisfiable,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if let Some(m) = c.min_domains {
            if m <= 0 {
                errs.push(FieldError::invalid(
                    &idx.child("minDomains"),
                    m,
                    "must be greater than 0",
                ));
            } else if c.when_unsatisfiable != "DoNotSchedule" {
                errs.push(FieldError::invalid(
                    &idx.child("minDomains"),
                    m,
                    "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
                ));
            }
        }
        if let Some(s) = c.label_selector.as_ref() {
            label_selector(s, &idx.child("labelSelector"), errs);
        }
        let key = (c.topology_key.as_str(), c.when_unsatisfiable.as_str());
        if !seen.insert(key) {
            errs.push(FieldError::duplicate(
                &idx.child("{topologyKey, whenUnsatisfiable}"),
                format!("{{{}, {}}}", c.topology_key, c.when_unsatisfiable),
            ));
        }
    }
}
