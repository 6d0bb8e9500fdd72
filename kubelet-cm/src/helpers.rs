//! The pod cgroup resource config (Go's `helpers_linux.go`); the CPU shares/quota
//! conversions are [`kubelet_core::cpu`]'s.

use k8s_openapi::api::core::v1::{Container, Pod};
use kubelet_core::cpu::{milli_cpu_to_quota, milli_cpu_to_shares, MIN_SHARES};
use kubelet_core::qos::{pod_qos, QosClass};
use kubelet_core::resources::{amount, pod_request, QuantityError};

use crate::cgroups::ResourceConfig;

fn container_limit(c: &Container, name: &str) -> Result<Option<i64>, QuantityError> {
    match c.resources.as_ref().and_then(|r| r.limits.as_ref()) {
        Some(l) if l.contains_key(name) => amount(l, name).map(Some),
        _ => Ok(None),
    }
}

/// The pod's limit of a resource as Go's `PodLimits`: max(sum over app containers that set
/// it, max over init containers), plus pod overhead when a limit exists. `None`: no
/// container sets it.
pub fn pod_limit(pod: &Pod, name: &str) -> Result<Option<i64>, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(None);
    };
    let mut sum: Option<i64> = None;
    for c in &spec.containers {
        if let Some(v) = container_limit(c, name)? {
            sum = Some(sum.unwrap_or(0).saturating_add(v));
        }
    }
    for c in spec.init_containers.iter().flatten() {
        if let Some(v) = container_limit(c, name)? {
            sum = Some(sum.unwrap_or(0).max(v));
        }
    }
    if let (Some(s), Some(overhead)) = (sum, spec.overhead.as_ref()) {
        if overhead.contains_key(name) {
            sum = Some(s.saturating_add(amount(overhead, name)?));
        }
    }
    Ok(sum)
}

/// Whether every app container sets a non-zero limit for `name`.
fn all_containers_limit(pod: &Pod, name: &str) -> Result<bool, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(false);
    };
    for c in &spec.containers {
        if container_limit(c, name)?.unwrap_or(0) == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The pod cgroup's resource config, as Go's `ResourceConfigForPod`:
/// - Guaranteed: shares from cpu requests, quota from cpu limits, memory = memory limits;
/// - Burstable: shares from requests; quota only if every container limits cpu; memory only
///   if every container limits memory;
/// - BestEffort: 2 shares.
///
/// `enforce_cpu_limits` false (`cpuCFSQuota=false`) sets quota -1 (unlimited). Hugepage
/// limits come from the `hugepages-<size>` requests. The pid limit is left to the caller.
pub fn resource_config_for_pod(
    pod: &Pod,
    enforce_cpu_limits: bool,
    period_us: u64,
) -> Result<ResourceConfig, QuantityError> {
    let cpu_requests = pod_request(pod, "cpu")?;
    let cpu_limits = pod_limit(pod, "cpu")?.unwrap_or(0);
    let memory_limits = pod_limit(pod, "memory")?.unwrap_or(0);
    let shares = milli_cpu_to_shares(cpu_requests);
    let mut quota = milli_cpu_to_quota(cpu_limits, i64::try_from(period_us).unwrap_or(i64::MAX));
    if !enforce_cpu_limits {
        quota = -1;
    }
    let mut rc = ResourceConfig::default();
    match pod_qos(pod) {
        QosClass::Guaranteed => {
            rc.cpu_shares = Some(shares);
            rc.cpu_quota = Some(quota);
            rc.cpu_period = Some(period_us);
            rc.memory = Some(memory_limits);
        }
        QosClass::Burstable => {
            rc.cpu_shares = Some(shares);
            if all_containers_limit(pod, "cpu")? {
                rc.cpu_quota = Some(quota);
                rc.cpu_period = Some(period_us);
            }
            if all_containers_limit(pod, "memory")? {
                rc.memory = Some(memory_limits);
            }
        }
        QosClass::BestEffort => {
            rc.cpu_shares = Some(MIN_SHARES);
        }
    }
    for name in hugepage_resource_names(pod) {
        let bytes = pod_request(pod, &name)?;
        if let Some(size) = hugepage_size_bytes(&name) {
            rc.hugepage_limits.insert(size, bytes);
        }
    }
    Ok(rc)
}

/// `hugepages-*` resource names any container of the pod requests or limits.
fn hugepage_resource_names(pod: &Pod) -> Vec<String> {
    let mut names: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| r.requests.iter().chain(r.limits.iter()))
        .flat_map(|m| m.keys())
        .filter(|k| k.starts_with("hugepages-"))
        .cloned()
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `hugepages-2Mi` → 2097152.
pub fn hugepage_size_bytes(resource_name: &str) -> Option<u64> {
    let q = resource_name.strip_prefix("hugepages-")?;
    let v = kubelet_core::resources::value(
        &k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.to_string()),
    )
    .ok()?;
    u64::try_from(v).ok().filter(|v| *v > 0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::collections::BTreeMap;

    /// The default CFS period as the config carries it.
    const QUOTA_PERIOD_US: u64 = kubelet_core::cpu::QUOTA_PERIOD.unsigned_abs();

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn list(pairs: Pairs<'_>) -> Option<BTreeMap<String, Quantity>> {
        if pairs.is_empty() {
            return None;
        }
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    /// A pod whose containers have the given (requests, limits).
    pub(crate) fn pod(uid: &str, containers: &[(Pairs<'_>, Pairs<'_>)]) -> Pod {
        Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(format!("pod-{uid}")),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: containers
                    .iter()
                    .enumerate()
                    .map(|(i, (req, lim))| Container {
                        name: format!("c{i}"),
                        resources: Some(ResourceRequirements {
                            requests: list(req),
                            limits: list(lim),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn pod_config_table() {
        let full: Pairs<'_> = &[("cpu", "500m"), ("memory", "128Mi")];
        let cases: Vec<(&str, Pod, bool, ResourceConfig)> = vec![
            (
                "guaranteed",
                pod("g", &[(full, full)]),
                true,
                ResourceConfig {
                    cpu_shares: Some(512),
                    cpu_quota: Some(50_000),
                    cpu_period: Some(100_000),
                    memory: Some(128 << 20),
                    ..Default::default()
                },
            ),
            (
                "guaranteed without cfs quota",
                pod("g", &[(full, full)]),
                false,
                ResourceConfig {
                    cpu_shares: Some(512),
                    cpu_quota: Some(-1),
                    cpu_period: Some(100_000),
                    memory: Some(128 << 20),
                    ..Default::default()
                },
            ),
            (
                "burstable with all limits",
                pod(
                    "b",
                    &[(
                        &[("cpu", "100m"), ("memory", "64Mi")],
                        &[("cpu", "1"), ("memory", "256Mi")],
                    )],
                ),
                true,
                ResourceConfig {
                    cpu_shares: Some(102),
                    cpu_quota: Some(100_000),
                    cpu_period: Some(100_000),
                    memory: Some(256 << 20),
                    ..Default::default()
                },
            ),
            (
                "burstable, one container without limits",
                pod(
                    "b2",
                    &[
                        (&[("cpu", "100m")], &[("cpu", "1"), ("memory", "256Mi")]),
                        (&[("cpu", "200m")], &[]),
                    ],
                ),
                true,
                ResourceConfig {
                    cpu_shares: Some(307),
                    ..Default::default()
                },
            ),
            (
                "besteffort",
                pod("e", &[(&[], &[])]),
                true,
                ResourceConfig {
                    cpu_shares: Some(2),
                    ..Default::default()
                },
            ),
        ];
        for (name, p, enforce, want) in cases {
            assert_eq!(
                resource_config_for_pod(&p, enforce, QUOTA_PERIOD_US).unwrap(),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn hugepages_and_init_limits() {
        let mut p = pod(
            "h",
            &[(
                &[("cpu", "1"), ("memory", "1Gi"), ("hugepages-2Mi", "4Mi")],
                &[("cpu", "1"), ("memory", "1Gi"), ("hugepages-2Mi", "4Mi")],
            )],
        );
        if let Some(spec) = p.spec.as_mut() {
            spec.init_containers = Some(vec![Container {
                name: "init".into(),
                resources: Some(ResourceRequirements {
                    limits: list(&[("memory", "2Gi")]),
                    ..Default::default()
                }),
                ..Default::default()
            }]);
        }
        assert_eq!(pod_limit(&p, "memory").unwrap(), Some(2 << 30));
        let rc = resource_config_for_pod(&p, true, QUOTA_PERIOD_US).unwrap();
        assert_eq!(rc.hugepage_limits.get(&(2 << 20)), Some(&(4 << 20)));
        assert_eq!(hugepage_size_bytes("hugepages-1Gi"), Some(1 << 30));
        assert_eq!(hugepage_size_bytes("memory"), None);
    }
}
