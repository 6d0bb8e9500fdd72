//! Container environment and `$(VAR)` expansion, as Kubernetes defines them.
//!
//! Expansion (Kubernetes' `expansion.Expand`): `$(NAME)` is replaced by the value of `NAME`
//! when it is defined, and left as written when it is not; `$$` is an escaped `$`; any other
//! `$` is kept. In `env`, a variable sees the ones defined before it; `command` and `args`
//! see the whole environment.
//!
//! [`make_environment`] builds a container's environment as Go's `makeEnvironmentVariables`
//! does, reading config maps, secrets and services through an
//! [`ObjectStore`](crate::volume::objects::ObjectStore).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::ResourceList;
use crate::resources::{milli_value, value};
use crate::runtime::EnvVar;
use crate::volume::objects::{ObjectError, ObjectStore};

fn find_container<'a>(p: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = p.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

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
    #[error("env {var}: resourceFieldRef {resource:?}: {message}")]
    ResourceField {
        /// The variable.
        var: String,
        /// The resource, e.g. "limits.memory".
        resource: String,
        /// Why.
        message: String,
    },
    /// A referenced config map or secret could not be read.
    #[error("{what}: {source}")]
    Object {
        /// What referenced it ("env FOO", "envFrom configMap ns/name").
        what: String,
        /// The store's error.
        source: ObjectError,
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
) -> Result<String, String> {
    let (kind, name) = resource
        .split_once('.')
        .ok_or_else(|| "unsupported resource".to_string())?;
    let supported =
        matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !supported || !matches!(kind, "limits" | "requests") {
        return Err("unsupported resource".into());
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
        Some(q) => amount(q).map_err(|e| format!("{e}"))?,
        None => 0,
    };
    // A zero divisor is an unset one: the API server defaults an unset divisor to "0" (Go
    // `ExtractContainerResourceValue` takes zero as "1").
    let d = match divisor
        .map(amount)
        .transpose()
        .map_err(|e| format!("divisor: {e}"))?
    {
        Some(d) if d != 0 => d,
        _ if cpu => 1000,
        _ => 1,
    };
    if d <= 0 {
        return Err("divisor must be greater than 0".into());
    }
    Ok(ceil_div(v, d).to_string())
}

/// The Docker-link style variables of services (Go `envvars.FromServices`).
pub fn service_env(services: &[Service]) -> Vec<EnvVar> {
    let var = |s: &str| s.to_ascii_uppercase().replace('-', "_");
    let mut out = Vec::new();
    for svc in services {
        let Some(spec) = svc.spec.as_ref() else {
            continue;
        };
        let ip = spec.cluster_ip.clone().unwrap_or_default();
        if ip.is_empty() || ip == "None" {
            continue;
        }
        let ports = spec.ports.as_deref().unwrap_or_default();
        let Some(first) = ports.first() else {
            continue;
        };
        let prefix = var(svc.metadata.name.as_deref().unwrap_or_default());
        let mut push = |name: String, value: String| out.push(EnvVar { name, value });
        push(format!("{prefix}_SERVICE_HOST"), ip.clone());
        push(format!("{prefix}_SERVICE_PORT"), first.port.to_string());
        for sp in ports {
            if let Some(n) = sp.name.as_deref().filter(|n| !n.is_empty()) {
                push(
                    format!("{prefix}_SERVICE_PORT_{}", var(n)),
                    sp.port.to_string(),
                );
            }
        }
        let host = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip.clone()
        };
        for (i, sp) in ports.iter().enumerate() {
            let proto = sp.protocol.as_deref().unwrap_or("TCP");
            let lower = proto.to_ascii_lowercase();
            let url = format!("{lower}://{host}:{}", sp.port);
            if i == 0 {
                push(format!("{prefix}_PORT"), url.clone());
            }
            let pp = format!("{prefix}_PORT_{}_{}", sp.port, proto.to_ascii_uppercase());
            push(pp.clone(), url);
            push(format!("{pp}_PROTO"), lower);
            push(format!("{pp}_PORT"), sp.port.to_string());
            push(format!("{pp}_ADDR"), ip.clone());
        }
    }
    out
}

/// The services whose variables a pod gets (Go `getServiceEnvVarMap`): the `kubernetes`
/// service of the `default` namespace always, the pod namespace's services when
/// `enableServiceLinks` (default true); a pod-namespace service wins over the master one of
/// the same name. Standalone (no store): none.
async fn pod_services(p: &Pod, store: &dyn ObjectStore) -> Vec<Service> {
    let ns = crate::pod::namespace(p);
    let links = p
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let mut by_name: BTreeMap<String, Service> = BTreeMap::new();
    let list = |r: Result<Vec<Service>, ObjectError>, ns: &str| match r {
        Ok(v) => v,
        Err(ObjectError::NotAvailable { .. }) => Vec::new(),
        Err(e) => {
            tracing::warn!(namespace = ns, error = %e, "listing services for environment variables failed");
            Vec::new()
        }
    };
    if links {
        for s in list(store.services(ns).await, ns) {
            by_name.insert(s.metadata.name.clone().unwrap_or_default(), s);
        }
    }
    let master = if ns == MASTER_SERVICE_NAMESPACE {
        by_name.get("kubernetes").cloned().into_iter().collect()
    } else {
        list(
            store.services(MASTER_SERVICE_NAMESPACE).await,
            MASTER_SERVICE_NAMESPACE,
        )
    };
    for s in master {
        let name = s.metadata.name.clone().unwrap_or_default();
        if name == "kubernetes" {
            by_name.entry(name).or_insert(s);
        }
    }
    by_name.into_values().collect()
}

/// The namespace of the master (`kubernetes`) service.
pub const MASTER_SERVICE_NAMESPACE: &str = "default";

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
            Err(source) => Err(EnvError::Object { what, source }),
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
                    .map_err(|message| EnvError::ResourceField {
                        var: e.name.clone(),
                        resource: rr.resource.clone(),
                        message,
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
mod tests {
    use super::*;

    use crate::volume::objects::MemoryObjectStore;
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar as ApiEnvVar,
        EnvVarSource, ObjectFieldSelector, PodSpec, ResourceFieldSelector, ResourceRequirements,
        SecretKeySelector, ServicePort, ServiceSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::ByteString;

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        }
    }

    fn literal(name: &str, value: &str) -> ApiEnvVar {
        ApiEnvVar {
            name: name.into(),
            value: Some(value.into()),
            value_from: None,
        }
    }

    fn from(name: &str, src: EnvVarSource) -> ApiEnvVar {
        ApiEnvVar {
            name: name.into(),
            value: None,
            value_from: Some(src),
        }
    }

    fn store() -> MemoryObjectStore {
        let s = MemoryObjectStore::new();
        s.put_config_map(ConfigMap {
            metadata: meta("ns", "cfg"),
            data: Some(
                [
                    ("GOOD", "g"),
                    ("1BAD", "b"),
                    ("also bad", "b"),
                    ("key", "from-cm"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            ..Default::default()
        });
        s.put_secret(Secret {
            metadata: meta("ns", "sec"),
            data: Some([("pw".to_string(), ByteString(b"hunter2".to_vec()))].into()),
            ..Default::default()
        });
        s.put_service(Service {
            metadata: meta("ns", "my-db"),
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.0.0.7".into()),
                ports: Some(vec![ServicePort {
                    port: 5432,
                    name: Some("sql".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.put_service(Service {
            metadata: meta("default", "kubernetes"),
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.0.0.1".into()),
                ports: Some(vec![ServicePort {
                    port: 443,
                    name: Some("https".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        s.put_service(Service {
            metadata: meta("default", "other"),
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.0.0.2".into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        s
    }

    fn pod_with(c: Container, links: Option<bool>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..meta("ns", "p")
            },
            spec: Some(PodSpec {
                containers: vec![c],
                enable_service_links: links,
                service_account_name: Some("sa".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    async fn env_of(c: Container, links: Option<bool>) -> Result<EnvOutput, EnvError> {
        let p = pod_with(c, links);
        let store = store();
        let alloc: ResourceList = [
            ("cpu".to_string(), Quantity("4".into())),
            ("memory".to_string(), Quantity("8Gi".into())),
        ]
        .into();
        let fields = FieldValues {
            pod_ip: "10.1.0.9".into(),
            host_ip: "192.168.1.2".into(),
            node_name: "node-a".into(),
            host_ips: vec!["192.168.1.2".into(), "fd00::2".into()],
        };
        make_environment(&EnvInputs {
            pod: &p,
            container: &p.spec.as_ref().unwrap().containers[0],
            fields: &fields,
            allocatable: &alloc,
            store: &store,
        })
        .await
    }

    fn get<'a>(out: &'a EnvOutput, name: &str) -> Option<&'a str> {
        out.env
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value.as_str())
    }

    fn field(path: &str) -> EnvVarSource {
        EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn resource(res: &str, divisor: Option<&str>) -> EnvVarSource {
        EnvVarSource {
            resource_field_ref: Some(ResourceFieldSelector {
                resource: res.into(),
                divisor: divisor.map(|d| Quantity(d.into())),
                container_name: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_zero_divisor_is_an_unset_one() {
        let c = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
                requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let allocatable: ResourceList = [("cpu".to_string(), Quantity("2".into()))].into();
        for (resource, divisor, want) in [
            ("limits.memory", Some("0"), Ok("67108864")),
            ("limits.memory", None, Ok("67108864")),
            ("limits.memory", Some("1Mi"), Ok("64")),
            ("requests.cpu", Some("0"), Ok("1")),
            ("requests.cpu", None, Ok("1")),
            ("requests.cpu", Some("1m"), Ok("250")),
            // No CPU limit: the node's allocatable.
            ("limits.cpu", Some("0"), Ok("2")),
            (
                "limits.memory",
                Some("-1"),
                Err("divisor must be greater than 0"),
            ),
        ] {
            let d = divisor.map(|d| Quantity(d.into()));
            let got = resource_field_value(&c, resource, d.as_ref(), &allocatable);
            let got = got.as_ref().map(String::as_str).map_err(String::as_str);
            assert_eq!(got, want, "{resource} divisor {divisor:?}");
        }
    }

    #[tokio::test]
    async fn sources_of_values() {
        let c = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
                requests: Some([("cpu".to_string(), Quantity("250m".into()))].into()),
                ..Default::default()
            }),
            env_from: Some(vec![EnvFromSource {
                config_map_ref: Some(ConfigMapEnvSource {
                    name: "cfg".into(),
                    optional: None,
                }),
                prefix: Some("P_".into()),
                secret_ref: None,
            }]),
            env: Some(vec![
                from("NAME", field("metadata.name")),
                from("NS", field("metadata.namespace")),
                from("APP", field("metadata.labels['app']")),
                from("NODE", field("spec.nodeName")),
                from("SA", field("spec.serviceAccountName")),
                from("POD_IP", field("status.podIP")),
                from("HOST_IPS", field("status.hostIPs")),
                from("MEM_MI", resource("limits.memory", Some("1Mi"))),
                from("CPU_LIMIT", resource("limits.cpu", None)),
                from("CPU_REQ_M", resource("requests.cpu", Some("1m"))),
                from("CPU_REQ", resource("requests.cpu", None)),
                from(
                    "CM",
                    EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: "cfg".into(),
                            key: "key".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ),
                from(
                    "PW",
                    EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: "sec".into(),
                            key: "pw".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                ),
                from(
                    "OPT",
                    EnvVarSource {
                        config_map_key_ref: Some(ConfigMapKeySelector {
                            name: "absent".into(),
                            key: "k".into(),
                            optional: Some(true),
                        }),
                        ..Default::default()
                    },
                ),
                literal("URL", "$(P_GOOD)-$(NAME):$(MY_DB_SERVICE_PORT)/$(UNSET)"),
            ]),
            ..Default::default()
        };
        let out = env_of(c, None).await.unwrap();
        for (name, want) in [
            ("P_GOOD", "g"),
            ("NAME", "p"),
            ("NS", "ns"),
            ("APP", "web"),
            ("NODE", "node-a"),
            ("SA", "sa"),
            ("POD_IP", "10.1.0.9"),
            ("HOST_IPS", "192.168.1.2,fd00::2"),
            ("MEM_MI", "64"),
            ("CPU_LIMIT", "4"),
            ("CPU_REQ_M", "250"),
            ("CPU_REQ", "1"),
            ("CM", "from-cm"),
            ("PW", "hunter2"),
            ("URL", "g-p:5432/$(UNSET)"),
            ("MY_DB_SERVICE_HOST", "10.0.0.7"),
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
        ] {
            assert_eq!(get(&out, name), Some(want), "{name}");
        }
        assert_eq!(get(&out, "OPT"), None, "optional and missing: skipped");
        assert_eq!(
            get(&out, "OTHER_SERVICE_HOST"),
            None,
            "only the master service of default"
        );
        assert_eq!(
            out.invalid_keys,
            vec!["Keys [P_also bad] from the EnvFrom configMap ns/cfg were skipped since they are considered invalid environment variable names."]
        );
    }

    #[tokio::test]
    async fn service_links_off_keeps_the_master_service() {
        let out = env_of(
            Container {
                name: "c".into(),
                ..Default::default()
            },
            Some(false),
        )
        .await
        .unwrap();
        assert_eq!(get(&out, "MY_DB_SERVICE_HOST"), None);
        assert_eq!(
            get(&out, "KUBERNETES_PORT_443_TCP"),
            Some("tcp://10.0.0.1:443")
        );
    }

    #[tokio::test]
    async fn missing_references_fail() {
        let key = |name: &str, key: &str| {
            from(
                "X",
                EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name: name.into(),
                        key: key.into(),
                        optional: None,
                    }),
                    ..Default::default()
                },
            )
        };
        for (env, want) in [
            (key("absent", "k"), "not found"),
            (
                key("cfg", "nokey"),
                "couldn't find key nokey in ConfigMap ns/cfg",
            ),
            (from("X", field("status.bogus")), "unsupported fieldRef"),
            (
                from("X", resource("limits.gpu", None)),
                "unsupported resource",
            ),
        ] {
            let c = Container {
                name: "c".into(),
                env: Some(vec![env]),
                ..Default::default()
            };
            let e = env_of(c, None).await.unwrap_err().to_string();
            assert!(e.contains(want), "{e} should contain {want}");
        }
    }

    #[test]
    fn service_variables_as_go_names_them() {
        let svc = Service {
            metadata: meta("ns", "web-front"),
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.0.0.9".into()),
                ports: Some(vec![
                    ServicePort {
                        port: 80,
                        ..Default::default()
                    },
                    ServicePort {
                        port: 53,
                        name: Some("dns-udp".into()),
                        protocol: Some("UDP".into()),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let headless = Service {
            metadata: meta("ns", "headless"),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let got: Vec<(String, String)> = service_env(&[svc, headless])
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect();
        let want: Vec<(&str, &str)> = vec![
            ("WEB_FRONT_SERVICE_HOST", "10.0.0.9"),
            ("WEB_FRONT_SERVICE_PORT", "80"),
            ("WEB_FRONT_SERVICE_PORT_DNS_UDP", "53"),
            ("WEB_FRONT_PORT", "tcp://10.0.0.9:80"),
            ("WEB_FRONT_PORT_80_TCP", "tcp://10.0.0.9:80"),
            ("WEB_FRONT_PORT_80_TCP_PROTO", "tcp"),
            ("WEB_FRONT_PORT_80_TCP_PORT", "80"),
            ("WEB_FRONT_PORT_80_TCP_ADDR", "10.0.0.9"),
            ("WEB_FRONT_PORT_53_UDP", "udp://10.0.0.9:53"),
            ("WEB_FRONT_PORT_53_UDP_PROTO", "udp"),
            ("WEB_FRONT_PORT_53_UDP_PORT", "53"),
            ("WEB_FRONT_PORT_53_UDP_ADDR", "10.0.0.9"),
        ];
        let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn env_var_names() {
        for ok in ["A", "_a", "a.b-c", "-x", ".x", "A1"] {
            assert!(is_env_var_name(ok), "{ok}");
        }
        for bad in ["", "1A", "a b", "a=b", "ä"] {
            assert!(!is_env_var_name(bad), "{bad}");
        }
    }

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
