//! Container environment and `$(VAR)` expansion, as Kubernetes defines them.
//!
//! Expansion (Kubernetes' `expansion.Expand`): `$(NAME)` is replaced by the value of `NAME`
//! when it is defined, and left as written when it is not; `$$` is an escaped `$`; any other
//! `$` is kept. In `env`, a variable sees the ones defined before it; `command` and `args`
//! see the whole environment.
//!
//! [`make_environment`] builds a container's environment as Go's `makeEnvironmentVariables`
//! does, reading config maps, secrets and services through an
//! [`ObjectStore`](crate::objects::ObjectStore).

mod expansion;
mod fields;
mod services;

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use crate::cm::ResourceList;
use crate::objects::{ObjectError, ObjectStore};
use crate::runtime::EnvVar;

pub use expansion::expand;
use fields::find_container;
pub use fields::{field_ref_value, resource_field_value, FieldValues, ResourceFieldError};
use services::pod_services;
pub use services::service_env;
/// Why the environment of a container could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A `fieldRef` path this kubelet does not know.
    #[error("env {var}: unsupported fieldRef path {path:?}")]
    FieldPath {
        /// The variable.
        var: String,
        /// The field path.
        path: String,
    },
    /// A `resourceFieldRef` that cannot be resolved.
    #[error("env {var}: resourceFieldRef {resource:?}: {error}")]
    ResourceField {
        /// The variable.
        var: String,
        /// The resource, e.g. "limits.memory".
        resource: String,
        /// Why.
        error: ResourceFieldError,
    },
    /// A referenced config map or secret could not be read.
    #[error("{what}: {error}")]
    Object {
        /// What referenced it ("env FOO", "envFrom configMap ns/name").
        what: String,
        /// The store's error.
        error: ObjectError,
    },
    /// A referenced key is not in the config map or secret.
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey {
        /// "ConfigMap" or "Secret".
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The key.
        key: String,
    },
}
/// Whether `name` is a valid environment variable name (`[-._a-zA-Z][-._a-zA-Z0-9]*`, the
/// rule `envFrom` keys are checked against).
pub fn is_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    (first.is_ascii_alphabetic() || matches!(first, '-' | '.' | '_')) && chars.all(ok)
}
/// Everything [`make_environment`] reads.
pub struct EnvInputs<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The container.
    pub container: &'a Container,
    /// Values not in the pod object.
    pub fields: &'a FieldValues,
    /// The node's allocatable resources (default limits of `resourceFieldRef`).
    pub allocatable: &'a ResourceList,
    /// Where config maps, secrets and services come from.
    pub store: &'a dyn ObjectStore,
}

/// The environment and what to warn about (as events).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EnvOutput {
    /// The variables, in definition order.
    pub env: Vec<EnvVar>,
    /// Messages for `InvalidEnvironmentVariableNames` warning events.
    pub invalid_keys: Vec<String>,
}

/// An ordered map that keeps the first position of a name and the last value.
#[derive(Default)]
struct OrderedEnv {
    list: Vec<EnvVar>,
    index: HashMap<String, usize>,
}

impl OrderedEnv {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.list[i].value = value,
            None => {
                self.index.insert(name.clone(), self.list.len());
                self.list.push(EnvVar { name, value });
            }
        }
    }
    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&i| self.list[i].value.as_str())
    }
}

fn secret_data(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

/// Builds a container's environment as Go's `makeEnvironmentVariables`: service variables,
/// then `envFrom` (keys with the prefix; invalid names skipped and reported), then `env` in
/// order (`value` expanded against what is defined so far and the service variables;
/// `valueFrom` fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef with `optional`),
/// then service variables not overridden.
pub async fn make_environment(i: &EnvInputs<'_>) -> Result<EnvOutput, EnvError> {
    let (p, c) = (i.pod, i.container);
    let ns = crate::pod::namespace(p);
    let services = service_env(&pod_services(p, i.store).await);
    let service_map: HashMap<&str, &str> = services
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    let mut env = OrderedEnv::default();
    let mut invalid_keys = Vec::new();
    let mut config_maps: HashMap<String, Option<BTreeMap<String, String>>> = HashMap::new();
    let mut secrets: HashMap<String, Option<BTreeMap<String, String>>> = HashMap::new();
    // `None`: not found and optional.
    async fn fetch(
        store: &dyn ObjectStore,
        secret: bool,
        ns: &str,
        name: &str,
        optional: bool,
        what: String,
    ) -> Result<Option<BTreeMap<String, String>>, EnvError> {
        let r = if secret {
            store.secret(ns, name).await.map(|s| secret_data(&s))
        } else {
            store
                .config_map(ns, name)
                .await
                .map(|m| m.data.unwrap_or_default())
        };
        match r {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.is_not_found() && optional => Ok(None),
            Err(error) => Err(EnvError::Object { what, error }),
        }
    }
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (secret, name, optional) = if let Some(r) = from.config_map_ref.as_ref() {
            (false, r.name.clone(), r.optional.unwrap_or(false))
        } else if let Some(r) = from.secret_ref.as_ref() {
            (true, r.name.clone(), r.optional.unwrap_or(false))
        } else {
            continue;
        };
        let kind = if secret { "secret" } else { "configMap" };
        let what = format!("envFrom {kind} {ns}/{name}");
        let data = fetch(i.store, secret, ns, &name, optional, what).await?;
        if secret {
            secrets.insert(name.clone(), data.clone());
        } else {
            config_maps.insert(name.clone(), data.clone());
        }
        let mut invalid = Vec::new();
        for (k, v) in data.into_iter().flatten() {
            let k = format!("{prefix}{k}");
            if !is_env_var_name(&k) {
                invalid.push(k);
                continue;
            }
            env.set(k, v);
        }
        if !invalid.is_empty() {
            invalid.sort();
            invalid_keys.push(format!(
                "Keys [{}] from the EnvFrom {kind} {ns}/{name} were skipped since they are considered invalid environment variable names.",
                invalid.join(", ")
            ));
        }
    }
    for e in c.env.iter().flatten() {
        let literal = e.value.clone().unwrap_or_default();
        let value = if !literal.is_empty() {
            let lookup = |n: &str| {
                env.get(n)
                    .or_else(|| service_map.get(n).copied())
                    .map(str::to_string)
            };
            expand(&literal, &lookup)
        } else if let Some(src) = e.value_from.as_ref() {
            if let Some(fr) = src.field_ref.as_ref() {
                field_ref_value(p, &fr.field_path, i.fields).ok_or_else(|| EnvError::FieldPath {
                    var: e.name.clone(),
                    path: fr.field_path.clone(),
                })?
            } else if let Some(rr) = src.resource_field_ref.as_ref() {
                let target = match rr.container_name.as_deref().filter(|n| !n.is_empty()) {
                    Some(n) => find_container(p, n).unwrap_or(c),
                    None => c,
                };
                resource_field_value(target, &rr.resource, rr.divisor.as_ref(), i.allocatable)
                    .map_err(|error| EnvError::ResourceField {
                        var: e.name.clone(),
                        resource: rr.resource.clone(),
                        error,
                    })?
            } else if let Some(r) = src.config_map_key_ref.as_ref() {
                let optional = r.optional.unwrap_or(false);
                if !config_maps.contains_key(&r.name) {
                    let what = format!("env {}", e.name);
                    let d = fetch(i.store, false, ns, &r.name, optional, what).await?;
                    config_maps.insert(r.name.clone(), d);
                }
                match config_maps.get(&r.name).and_then(|d| d.as_ref()) {
                    None => continue,
                    Some(d) => match d.get(&r.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::MissingKey {
                                kind: "ConfigMap",
                                namespace: ns.to_string(),
                                name: r.name.clone(),
                                key: r.key.clone(),
                            })
                        }
                    },
                }
            } else if let Some(r) = src.secret_key_ref.as_ref() {
                let optional = r.optional.unwrap_or(false);
                if !secrets.contains_key(&r.name) {
                    let what = format!("env {}", e.name);
                    let d = fetch(i.store, true, ns, &r.name, optional, what).await?;
                    secrets.insert(r.name.clone(), d);
                }
                match secrets.get(&r.name).and_then(|d| d.as_ref()) {
                    None => continue,
                    Some(d) => match d.get(&r.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => {
                            return Err(EnvError::MissingKey {
                                kind: "Secret",
                                namespace: ns.to_string(),
                                name: r.name.clone(),
                                key: r.key.clone(),
                            })
                        }
                    },
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        env.set(e.name.clone(), value);
    }
    for s in services {
        if env.get(&s.name).is_none() {
            env.set(s.name, s.value);
        }
    }
    Ok(EnvOutput {
        env: env.list,
        invalid_keys,
    })
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
#[path = "tests.rs"]
mod tests;
