//! Container environment and `$(VAR)` expansion, as Kubernetes defines them.
//!
//! Expansion (Kubernetes' `expansion.Expand`): `$(NAME)` is replaced by the value of `NAME`
//! when it is defined, and left as written when it is not; `$$` is an escaped `$`; any other
//! `$` is kept. In `env`, a variable sees the ones defined before it; `command` and `args`
//! see the whole environment.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::runtime::EnvVar;

/// Expands `$(VAR)` references in `input` with `lookup`.
pub fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    let mut literal_start = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            match bytes[i + 1] {
                b'$' => {
                    out.push_str(&input[literal_start..i]);
                    out.push('$');
                    i += 2;
                    literal_start = i;
                    continue;
                }
                b'(' => {
                    if let Some(close) = input[i + 2..].find(')') {
                        let name = &input[i + 2..i + 2 + close];
                        out.push_str(&input[literal_start..i]);
                        match lookup(name) {
                            Some(v) => out.push_str(&v),
                            None => out.push_str(&input[i..i + 3 + close]),
                        }
                        i += 3 + close;
                        literal_start = i;
                        continue;
                    }
                }
                _ => {}
            }
        }
        i += 1;
    }
    out.push_str(&input[literal_start..]);
    out
}

/// Values `fieldRef` may read, resolved by the caller.
#[derive(Debug, Clone, Default)]
pub struct FieldValues {
    /// status.podIP
    pub pod_ip: String,
    /// status.hostIP
    pub host_ip: String,
    /// spec.nodeName (the node this kubelet runs)
    pub node_name: String,
}

fn field_ref(p: &Pod, path: &str, f: &FieldValues) -> Option<String> {
    let meta = &p.metadata;
    let spec = p.spec.as_ref();
    let map_key = |prefix: &str, map: &Option<std::collections::BTreeMap<String, String>>| {
        let key = path
            .strip_prefix(prefix)?
            .strip_prefix("['")?
            .strip_suffix("']")?;
        map.as_ref().and_then(|m| m.get(key)).cloned()
    };
    Some(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => crate::pod::namespace(p).to_string(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec
            .and_then(|s| s.node_name.clone())
            .unwrap_or_else(|| f.node_name.clone()),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => f.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => f.host_ip.clone(),
        _ if path.starts_with("metadata.labels[") => map_key("metadata.labels", &meta.labels)?,
        _ if path.starts_with("metadata.annotations[") => {
            map_key("metadata.annotations", &meta.annotations)?
        }
        _ => return None,
    })
}

/// The container's environment: `env` entries with literal values or field references,
/// expanded in order. References this engine cannot resolve yet (config maps, secrets,
/// resource fields) come back as errors naming the variable.
pub fn container_env(p: &Pod, c: &Container, f: &FieldValues) -> Result<Vec<EnvVar>, String> {
    let mut out: Vec<EnvVar> = Vec::new();
    let mut defined: HashMap<String, String> = HashMap::new();
    for e in c.env.iter().flatten() {
        let value = if let Some(v) = e.value.as_ref() {
            let lookup = |n: &str| defined.get(n).cloned();
            expand(v, &lookup)
        } else if let Some(src) = e.value_from.as_ref() {
            if let Some(fr) = src.field_ref.as_ref() {
                field_ref(p, &fr.field_path, f).ok_or_else(|| {
                    format!(
                        "env {}: unsupported fieldRef path {:?}",
                        e.name, fr.field_path
                    )
                })?
            } else {
                return Err(format!(
                    "env {}: valueFrom sources other than fieldRef are not supported yet",
                    e.name
                ));
            }
        } else {
            String::new()
        };
        defined.insert(e.name.clone(), value.clone());
        out.retain(|x: &EnvVar| x.name != e.name);
        out.push(EnvVar {
            name: e.name.clone(),
            value,
        });
    }
    Ok(out)
}

/// Expands `command` and `args` with the container's environment.
pub fn expand_command(c: &Container, env: &[EnvVar]) -> (Vec<String>, Vec<String>) {
    let map: HashMap<&str, &str> = env
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    let lookup = |n: &str| map.get(n).map(|v| v.to_string());
    let exp = |v: &Option<Vec<String>>| {
        v.iter()
            .flatten()
            .map(|s| expand(s, &lookup))
            .collect::<Vec<_>>()
    };
    (exp(&c.command), exp(&c.args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_table() {
        let vars: HashMap<&str, &str> = [("VAR_A", "A"), ("VAR_B", "B"), ("EMPTY", "")]
            .into_iter()
            .collect();
        let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
        // Cases from the Kubernetes documentation and expansion tests.
        for (input, want) in [
            ("$(VAR_A)", "A"),
            ("___$(VAR_A)___", "___A___"),
            ("$(VAR_A)-$(VAR_B)", "A-B"),
            ("$(UNKNOWN)", "$(UNKNOWN)"),
            ("$$(VAR_A)", "$(VAR_A)"),
            ("$$$(VAR_A)", "$A"),
            ("$$$$(VAR_A)", "$$(VAR_A)"),
            ("$(EMPTY)x", "x"),
            ("$VAR_A", "$VAR_A"),
            ("$(VAR_A", "$(VAR_A"),
            ("tail$", "tail$"),
            ("$()", "$()"),
            ("no refs", "no refs"),
        ] {
            assert_eq!(expand(input, &lookup), want, "{input}");
        }
    }
}
