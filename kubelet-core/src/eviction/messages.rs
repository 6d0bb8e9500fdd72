//! The eviction manager's words, as Go writes them: the `Evicted` reason, the status and
//! event messages of an eviction (Go's `evictionMessage` and the local-storage messages), the
//! admission message, and quantities printed the way `resource.Quantity.String()` does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::signals::Observations;
use super::thresholds::{Resource, Threshold, ThresholdValue};
use super::PressureCondition;
use crate::summary::PodStats;

/// The reason of an evicted pod's status, of its event and of an admission rejection.
pub const REASON: &str = "Evicted";

/// How `resource.Quantity` prints a value (its format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// Powers of 1024 (`Ki`, `Mi`, …).
    BinarySi,
    /// Powers of 1000 (`k`, `M`, …).
    DecimalSi,
}

/// `v` as Go's canonical quantity string: the largest suffix that divides it exactly
/// (`104857600` → `100Mi` in binary, `2000` → `2k` in decimal), plain digits otherwise;
/// binary values between −1024 and 1024 print in decimal, as Go does.
pub fn format_quantity(v: i64, format: QuantityFormat) -> String {
    let (base, suffixes): (i128, [&str; 6]) = match format {
        QuantityFormat::BinarySi if v > -1024 && v < 1024 => {
            return format_quantity(v, QuantityFormat::DecimalSi)
        }
        QuantityFormat::BinarySi => (1024, ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
        QuantityFormat::DecimalSi => (1000, ["k", "M", "G", "T", "P", "E"]),
    };
    if v == 0 {
        return "0".into();
    }
    let mut mantissa = i128::from(v);
    let mut suffix = "";
    for s in suffixes {
        if mantissa % base != 0 {
            break;
        }
        mantissa /= base;
        suffix = s;
    }
    format!("{mantissa}{suffix}")
}

/// The format a quantity written as `text` has (binary when it ends in a binary suffix).
pub fn format_of(text: &str) -> QuantityFormat {
    if ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|s| text.trim().ends_with(s))
    {
        QuantityFormat::BinarySi
    } else {
        QuantityFormat::DecimalSi
    }
}

/// A quantity as written (canonicalised), e.g. a limit or a request from a pod spec.
pub fn canonical(text: &str) -> String {
    let q = k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_string());
    match crate::resources::value(&q) {
        Ok(v) => format_quantity(v, format_of(text)),
        Err(_) => text.to_string(),
    }
}

/// A threshold's quantity against a capacity, printed (percentages as binary quantities,
/// as Go's `GetThresholdQuantity` makes them).
pub fn threshold_quantity(t: &Threshold, capacity: i64) -> String {
    match &t.value {
        ThresholdValue::Quantity { value, text } => format_quantity(*value, format_of(text)),
        ThresholdValue::Percentage(_) => {
            format_quantity(t.value.amount(capacity), QuantityFormat::BinarySi)
        }
    }
}

/// How an available amount of `resource` prints (bytes binary, counts decimal).
fn available_format(resource: Resource) -> QuantityFormat {
    match resource {
        Resource::Memory | Resource::EphemeralStorage => QuantityFormat::BinarySi,
        Resource::Inodes | Resource::Pids => QuantityFormat::DecimalSi,
    }
}

/// The eviction event's annotation naming the starved resource (Go's `StarvedResourceKey`).
pub const STARVED_RESOURCE_KEY: &str = "starved_resource";
/// The annotation listing the containers over their request, comma-separated (Go's
/// `OffendingContainersKey`).
pub const OFFENDING_CONTAINERS_KEY: &str = "offending_containers";
/// The annotation listing those containers' usage, in the same order (Go's
/// `OffendingContainersUsageKey`).
pub const OFFENDING_CONTAINERS_USAGE_KEY: &str = "offending_containers_usage";

/// What an eviction for node pressure says: the status and event message, and the event's
/// annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EvictionMessage {
    /// "The node was low on resource: memory. Threshold quantity: 100Mi, available: 95504Ki.
    /// Container app was using 120Mi, request is 0, has larger consumption of memory. "
    pub message: String,
    /// [`STARVED_RESOURCE_KEY`], [`OFFENDING_CONTAINERS_KEY`] and
    /// [`OFFENDING_CONTAINERS_USAGE_KEY`] when the pod's stats are known (Go sets none
    /// without them).
    pub annotations: BTreeMap<String, String>,
}

/// The message and event annotations of an eviction for node pressure (Go's
/// `evictionMessage`).
pub fn eviction_message(
    resource: Resource,
    pod: &Pod,
    stats: Option<&PodStats>,
    thresholds: &[&Threshold],
    observations: &Observations,
) -> EvictionMessage {
    let mut message = format!("The node was low on resource: {}. ", resource.as_str());
    let met = thresholds
        .iter()
        .find(|t| t.signal.resource() == resource)
        .and_then(|t| observations.get(&t.signal).map(|o| (t, o)));
    if let Some((t, o)) = met {
        message.push_str(&format!(
            "Threshold quantity: {}, available: {}. ",
            threshold_quantity(t, o.capacity),
            format_quantity(o.available, available_format(resource))
        ));
    }
    let Some(stats) = stats else {
        return EvictionMessage {
            message,
            annotations: BTreeMap::new(),
        };
    };
    let (mut offenders, mut usages) = (Vec::new(), Vec::new());
    let specs = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let specs: Vec<_> = specs.collect();
    for cs in &stats.containers {
        let Some(c) = specs.iter().find(|c| c.name == cs.name) else {
            continue;
        };
        let request_text = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource.as_str()))
            .map(|q| q.0.clone());
        let request = request_text
            .as_deref()
            .map(|t| {
                crate::resources::value(&k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    t.to_string(),
                ))
                .unwrap_or(0)
            })
            .unwrap_or(0);
        let usage = match resource {
            Resource::EphemeralStorage => match (
                cs.rootfs.as_ref().and_then(|f| f.used_bytes),
                cs.logs.as_ref().and_then(|f| f.used_bytes),
            ) {
                (Some(r), Some(l)) => Some(r.saturating_add(l)),
                _ => None,
            },
            Resource::Memory => cs.memory.as_ref().map(|m| m.working_set_bytes),
            Resource::Inodes | Resource::Pids => None,
        };
        let Some(usage) = usage.map(|u| i64::try_from(u).unwrap_or(i64::MAX)) else {
            continue;
        };
        if usage > request {
            let usage = format_quantity(usage, QuantityFormat::BinarySi);
            message.push_str(&format!(
                "Container {} was using {}, request is {}, has larger consumption of {}. ",
                c.name,
                usage,
                request_text
                    .as_deref()
                    .map(canonical)
                    .unwrap_or_else(|| "0".into()),
                resource.as_str()
            ));
            offenders.push(c.name.clone());
            usages.push(usage);
        }
    }
    let annotations = [
        (OFFENDING_CONTAINERS_KEY, offenders.join(",")),
        (OFFENDING_CONTAINERS_USAGE_KEY, usages.join(",")),
        (STARVED_RESOURCE_KEY, resource.as_str().to_string()),
    ];
    EvictionMessage {
        message,
        annotations: annotations
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

/// An emptyDir over its `sizeLimit`.
pub fn empty_dir_message(volume: &str, limit: &str) -> String {
    format!(
        "Usage of EmptyDir volume {volume:?} exceeds the limit {:?}. ",
        canonical(limit)
    )
}

/// A pod over the sum of its containers' ephemeral-storage limits.
pub fn pod_ephemeral_storage_message(limit: i64) -> String {
    format!(
        "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
        format_quantity(limit, QuantityFormat::BinarySi)
    )
}

/// A container over its ephemeral-storage limit.
pub fn container_ephemeral_storage_message(container: &str, limit: &str) -> String {
    format!(
        "Container {container} exceeded its local ephemeral storage limit {:?}. ",
        canonical(limit)
    )
}

/// Why a pod is refused under pressure (Go's `nodeConditionMessageFmt` over the list).
pub fn admission_message(conditions: &[PressureCondition]) -> String {
    let names: Vec<&str> = conditions.iter().map(|c| c.as_str()).collect();
    format!("The node had condition: [{}]. ", names.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eviction::signals::Observation;
    use crate::eviction::thresholds::Signal;
    use crate::summary::{ContainerStats, FsStats, MemoryStats};
    use crate::testing::{ContainerBuilder, PodBuilder};
    use std::time::Duration;

    #[test]
    fn quantities_print_as_go() {
        use QuantityFormat::{BinarySi as B, DecimalSi as D};
        let cases = [
            (104_857_600, B, "100Mi"),
            (97_796_096, B, "95504Ki"),
            (1_536, B, "1536"),
            (1_000, B, "1k"),
            (500, B, "500"),
            (0, B, "0"),
            (1_610_612_736, B, "1536Mi"),
            (123_456_789, B, "123456789"),
            (2_000, D, "2k"),
            (5_000_000, D, "5M"),
            (1_234, D, "1234"),
            (-2_048, B, "-2Ki"),
        ];
        for (v, f, want) in cases {
            assert_eq!(format_quantity(v, f), want, "{v} {f:?}");
        }
        assert_eq!(canonical("1024Ki"), "1Mi");
        assert_eq!(canonical("500M"), "500M");
        assert_eq!(canonical("64Mi"), "64Mi");
    }

    #[test]
    fn eviction_message_names_threshold_available_and_containers_over_their_requests() {
        let pod = PodBuilder::new("web", "u1")
            .container(ContainerBuilder::new("app", "busybox").build())
            .container(
                ContainerBuilder::new("side", "busybox")
                    .requests(&[("memory", "64Mi")])
                    .build(),
            )
            .build();
        let mem = |ws: u64| {
            Some(MemoryStats {
                working_set_bytes: ws,
                ..Default::default()
            })
        };
        let stats = PodStats {
            containers: vec![
                ContainerStats {
                    name: "app".into(),
                    memory: mem(120 << 20),
                    ..Default::default()
                },
                ContainerStats {
                    name: "side".into(),
                    memory: mem(10 << 20),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let t = Threshold {
            signal: Signal::MemoryAvailable,
            value: ThresholdValue::Quantity {
                value: 100 << 20,
                text: "100Mi".into(),
            },
            grace_period: Duration::ZERO,
            min_reclaim: None,
        };
        let o: Observations = [(
            Signal::MemoryAvailable,
            Observation {
                available: 97_796_096,
                capacity: 1 << 30,
                time_nanos: None,
            },
        )]
        .into();
        let memory = eviction_message(Resource::Memory, &pod, Some(&stats), &[&t], &o);
        assert_eq!(
            memory.message,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 95504Ki. Container app was using 120Mi, request is 0, has larger consumption of memory. "
        );
        let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            memory.annotations,
            annotations(&[
                ("offending_containers", "app"),
                ("offending_containers_usage", "120Mi"),
                ("starved_resource", "memory"),
            ])
        );
        // Without the pod's stats: the message alone, no annotations (as Go).
        let unknown = eviction_message(Resource::Memory, &pod, None, &[&t], &o);
        assert_eq!(
            unknown.message,
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 95504Ki. "
        );
        assert!(unknown.annotations.is_empty());
        // Disk: rootfs + logs against the ephemeral-storage request.
        let disk = PodStats {
            containers: vec![ContainerStats {
                name: "app".into(),
                rootfs: Some(FsStats {
                    used_bytes: Some(1 << 20),
                    ..Default::default()
                }),
                logs: Some(FsStats {
                    used_bytes: Some(1 << 20),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let storage = eviction_message(Resource::EphemeralStorage, &pod, Some(&disk), &[], &o);
        assert_eq!(
            storage.message,
            "The node was low on resource: ephemeral-storage. Container app was using 2Mi, request is 0, has larger consumption of ephemeral-storage. "
        );
        assert_eq!(
            storage.annotations,
            annotations(&[
                ("offending_containers", "app"),
                ("offending_containers_usage", "2Mi"),
                ("starved_resource", "ephemeral-storage"),
            ])
        );
        assert_eq!(
            admission_message(&[
                PressureCondition::MemoryPressure,
                PressureCondition::DiskPressure
            ]),
            "The node had condition: [MemoryPressure DiskPressure]. "
        );
        assert_eq!(
            empty_dir_message("scratch", "1Mi"),
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
        );
        assert_eq!(
            container_ephemeral_storage_message("app", "2Gi"),
            "Container app exceeded its local ephemeral storage limit \"2Gi\". "
        );
        assert_eq!(
            pod_ephemeral_storage_message(3 << 30),
            "Pod ephemeral local storage usage exceeds the total limit of containers 3Gi. "
        );
    }
}
