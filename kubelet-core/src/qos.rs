//! Pod QoS class, computed exactly as Kubernetes does (`GetPodQOS`).
//!
//! - **BestEffort**: no container (init or app) sets a cpu or memory request or limit.
//! - **Guaranteed**: every container sets cpu and memory limits, and for both resources the
//!   summed requests equal the summed limits (a limit without a request counts as a request
//!   of the same size, as API defaulting makes it).
//! - **Burstable**: everything else.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::resources::milli_value;

/// A pod's quality-of-service class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// Requests equal limits for cpu and memory in every container.
    Guaranteed,
    /// Some requests or limits, but not Guaranteed.
    Burstable,
    /// No requests or limits at all.
    BestEffort,
}

impl QosClass {
    /// The API string ("Guaranteed", "Burstable", "BestEffort").
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Computes the pod's QoS class. Unparseable quantities count as absent (the API server
/// rejects them; a static pod with one is caught by validation before it gets here).
pub fn pod_qos(pod: &Pod) -> QosClass {
    let Some(spec) = pod.spec.as_ref() else {
        return QosClass::BestEffort;
    };
    let mut requests: BTreeMap<&str, i64> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i64> = BTreeMap::new();
    let mut guaranteed = true;
    let all: Vec<&Container> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .collect();
    for c in all {
        let res = c.resources.as_ref();
        let lim = res.and_then(|r| r.limits.as_ref());
        let req = res.and_then(|r| r.requests.as_ref());
        let mut limits_found = 0;
        for name in QOS_RESOURCES {
            let l = lim
                .and_then(|l| l.get(name))
                .and_then(|q| milli_value(q).ok())
                .filter(|v| *v != 0);
            let r = req
                .and_then(|r| r.get(name))
                .and_then(|q| milli_value(q).ok())
                .filter(|v| *v != 0)
                .or(l);
            if let Some(r) = r {
                *requests.entry(name).or_default() += r;
            }
            if let Some(l) = l {
                *limits.entry(name).or_default() += l;
                limits_found += 1;
            }
        }
        if limits_found != QOS_RESOURCES.len() {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return QosClass::BestEffort;
    }
    if guaranteed && requests == limits {
        return QosClass::Guaranteed;
    }
    QosClass::Burstable
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn res(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
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

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn pod(containers: &[(Pairs, Pairs)]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: containers
                    .iter()
                    .enumerate()
                    .map(|(i, (req, lim))| Container {
                        name: format!("c{i}"),
                        resources: Some(ResourceRequirements {
                            requests: res(req),
                            limits: res(lim),
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
    fn qos_table() {
        let full = [("cpu", "100m"), ("memory", "64Mi")];
        let cases: Vec<(Pod, QosClass)> = vec![
            (pod(&[(&[], &[])]), QosClass::BestEffort),
            (pod(&[(&full, &full)]), QosClass::Guaranteed),
            (pod(&[(&[], &full)]), QosClass::Guaranteed),
            (pod(&[(&[("cpu", "50m")], &full)]), QosClass::Burstable),
            (pod(&[(&[("cpu", "100m")], &[])]), QosClass::Burstable),
            (pod(&[(&full, &full), (&[], &[])]), QosClass::Burstable),
            (pod(&[(&[], &[("cpu", "1")])]), QosClass::Burstable),
            (pod(&[(&full, &full), (&full, &full)]), QosClass::Guaranteed),
        ];
        for (i, (p, want)) in cases.iter().enumerate() {
            assert_eq!(pod_qos(p), *want, "case {i}");
        }
    }
}
