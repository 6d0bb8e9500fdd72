//! Service environment variables (Go's `envvars.FromServices` and `getServiceEnvVarMap`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};

use crate::objects::{ObjectError, ObjectStore};
use crate::runtime::EnvVar;

/// The namespace of the master (`kubernetes`) service.
pub const MASTER_SERVICE_NAMESPACE: &str = "default";

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
pub(super) async fn pod_services(p: &Pod, store: &dyn ObjectStore) -> Vec<Service> {
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
    // The two listings go together: each is a request to the API server, and a container
    // start waits for both.
    let own = async {
        match links {
            true => Some(store.services(ns).await),
            false => None,
        }
    };
    let default = async {
        match ns == MASTER_SERVICE_NAMESPACE {
            true => None,
            false => Some(store.services(MASTER_SERVICE_NAMESPACE).await),
        }
    };
    let (own, default) = futures::join!(own, default);
    if let Some(r) = own {
        for s in list(r, ns) {
            by_name.insert(s.metadata.name.clone().unwrap_or_default(), s);
        }
    }
    let master = match default {
        None => by_name.get("kubernetes").cloned().into_iter().collect(),
        Some(r) => list(r, MASTER_SERVICE_NAMESPACE),
    };
    for s in master {
        let name = s.metadata.name.clone().unwrap_or_default();
        if name == "kubernetes" {
            by_name.entry(name).or_insert(s);
        }
    }
    by_name.into_values().collect()
}
