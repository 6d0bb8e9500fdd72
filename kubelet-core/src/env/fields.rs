//! `fieldRef` and `resourceFieldRef` values (env and downward API volumes).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::ResourceList;
use crate::resources::{milli_value, value, QuantityError};

/// Why a `resourceFieldRef` cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceFieldError {
    /// Not one of `limits.*`/`requests.*` of cpu, memory, ephemeral-storage or hugepages.
    #[error("unsupported resource")]
    Unsupported,
    /// The container's (or the node's) quantity does not parse.
    #[error("{0}")]
    Quantity(QuantityError),
    /// The divisor does not parse.
    #[error("divisor: {0}")]
    Divisor(QuantityError),
    /// The divisor is zero or negative.
    #[error("divisor must be greater than 0")]
    NonPositiveDivisor,
}

/// Values `fieldRef` may read that are not in the pod object.
#[derive(Debug, Clone, Default)]
pub struct FieldValues {
    /// status.podIP
    pub pod_ip: String,
    /// status.hostIP
    pub host_ip: String,
    /// spec.nodeName (the node this kubelet runs)
    pub node_name: String,
    /// status.hostIPs (the node's IPs; empty: `host_ip` alone)
    pub host_ips: Vec<String>,
}

pub(super) fn find_container<'a>(p: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = p.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// Go's `%q` quoting, as the downward API formats label and annotation values.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A whole label or annotation map as the downward API writes it: `key="value"` lines,
/// sorted by key, without a trailing newline.
pub fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Resolves a `fieldRef` path (env and downward API volumes). `None`: unsupported path.
pub fn field_ref_value(p: &Pod, path: &str, f: &FieldValues) -> Option<String> {
    let meta = &p.metadata;
    let spec = p.spec.as_ref();
    let map_key = |prefix: &str, map: &Option<BTreeMap<String, String>>| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    let host_ips = if f.host_ips.is_empty() {
        f.host_ip.clone()
    } else {
        f.host_ips.join(",")
    };
    Some(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => crate::pod::namespace(p).to_string(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "spec.nodeName" => spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| f.node_name.clone()),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => f.pod_ip.clone(),
        "status.hostIP" => f.host_ip.clone(),
        "status.hostIPs" => host_ips,
        _ if path.starts_with("metadata.labels[") => map_key("metadata.labels", &meta.labels)?,
        _ if path.starts_with("metadata.annotations[") => {
            map_key("metadata.annotations", &meta.annotations)?
        }
        _ => return None,
    })
}

fn ceil_div(a: i64, b: i64) -> i64 {
    if a <= 0 {
        a / b
    } else {
        (a + b - 1) / b
    }
}

/// Resolves a `resourceFieldRef` for `c` (Go `ExtractContainerResourceValue` over limits
/// merged with node allocatable): `limits.*` fall back to the node's allocatable, `requests.*`
/// to the limit (as API defaulting), then 0; CPU is rounded up in units of the divisor's
/// millicores, everything else in units of the divisor (default "1").
pub fn resource_field_value(
    c: &Container,
    resource: &str,
    divisor: Option<&Quantity>,
    allocatable: &ResourceList,
) -> Result<String, ResourceFieldError> {
    let (kind, name) = resource
        .split_once('.')
        .ok_or(ResourceFieldError::Unsupported)?;
    let supported =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !supported || !matches!(kind, "limits" | "requests") {
        return Err(ResourceFieldError::Unsupported);
    }
    let res = c.resources.as_ref();
    let limit = res
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get(name));
    let request = res
        .and_then(|r| r.requests.as_ref())
        .and_then(|l| l.get(name));
    let q = match kind {
        "limits" => limit.or_else(|| allocatable.get(name)),
        _ => request.or(limit),
    };
    let cpu = name == "cpu";
    let amount = |q: &Quantity| {
        if cpu {
            milli_value(q)
        } else {
            value(q)
        }
    };
    let v = match q {
        Some(q) => amount(q).map_err(ResourceFieldError::Quantity)?,
        None => 0,
    };
    // A zero divisor is an unset one: the API server defaults an unset divisor to "0" (Go
    // `ExtractContainerResourceValue` takes zero as "1").
    let d = match divisor
        .map(amount)
        .transpose()
        .map_err(ResourceFieldError::Divisor)?
    {
        Some(d) if d != 0 => d,
        _ if cpu => 1000,
        _ => 1,
    };
    if d <= 0 {
        return Err(ResourceFieldError::NonPositiveDivisor);
    }
    Ok(ceil_div(v, d).to_string())
}
