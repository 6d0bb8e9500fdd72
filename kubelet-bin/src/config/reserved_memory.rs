//! `reservedMemory` (`--reserved-memory`) as the memory manager takes it: NUMA node →
//! resource → bytes, checked as Go's `validateReservedMemoryConfiguration` checks it (every
//! problem reported, with Go's messages).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubelet_core::memorymanager::ReservedMemory;

use super::types::MemoryReservation;

/// The reservations by node and resource, or every problem found (`reservedMemory[i]`
/// and what is wrong with it).
pub fn reserved_memory(
    list: &[MemoryReservation],
) -> Result<ReservedMemory, Vec<(String, String)>> {
    let mut out = ReservedMemory::new();
    let mut errs = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let field = format!("reservedMemory[{i}]");
        let Ok(node) = u32::try_from(r.numa_node) else {
            errs.push((
                field,
                format!(
                    "invalid configuration: NUMA node {} is negative",
                    r.numa_node
                ),
            ));
            continue;
        };
        for (resource, quantity) in &r.limits {
            if resource != "memory" && !resource.starts_with("hugepages-") {
                errs.push((field.clone(), format!("invalid configuration: the limit type {resource:?} for NUMA node {node} is not supported, only [memory hugepages-<HugePageSize>] is accepted")));
                continue;
            }
            let bytes = match kubelet_core::resources::value(&Quantity(quantity.clone())) {
                Ok(v) => v,
                Err(e) => {
                    errs.push((
                        field.clone(),
                        format!("invalid quantity {quantity:?} of {resource:?}: {e}"),
                    ));
                    continue;
                }
            };
            let Ok(bytes) = u64::try_from(bytes) else {
                errs.push((field.clone(), format!("invalid configuration: reserved memory may not be negative for NUMA node {node} and resource {resource:?}")));
                continue;
            };
            if bytes == 0 {
                errs.push((field.clone(), format!("invalid configuration: reserved memory may not be zero for NUMA node {node} and resource {resource:?}")));
                continue;
            }
            let per_node = out.entry(node).or_default();
            if per_node.insert(resource.clone(), bytes).is_some() {
                errs.push((field.clone(), format!("invalid configuration: the reserved memory has a duplicate value for NUMA node {node} and resource {resource:?}")));
            }
        }
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(node: i32, limits: &[(&str, &str)]) -> MemoryReservation {
        MemoryReservation {
            numa_node: node,
            limits: limits
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn reservations_by_node_and_gos_messages() {
        let ok = reserved_memory(&[
            r(0, &[("memory", "1Gi"), ("hugepages-2Mi", "4Mi")]),
            r(1, &[("memory", "100Mi")]),
        ])
        .unwrap();
        assert_eq!(ok[&0]["memory"], 1 << 30);
        assert_eq!(ok[&0]["hugepages-2Mi"], 4 << 20);
        assert_eq!(ok[&1]["memory"], 100 << 20);

        let errs = reserved_memory(&[
            r(0, &[("cpu", "1")]),
            r(0, &[("memory", "0")]),
            r(1, &[("memory", "1Gi")]),
            r(1, &[("memory", "2Gi")]),
            r(-1, &[("memory", "1Gi")]),
            r(2, &[("memory", "lots")]),
        ])
        .unwrap_err();
        let messages: Vec<&str> = errs.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            messages[0],
            r#"invalid configuration: the limit type "cpu" for NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted"#
        );
        assert_eq!(
            messages[1],
            r#"invalid configuration: reserved memory may not be zero for NUMA node 0 and resource "memory""#
        );
        assert_eq!(
            messages[2],
            r#"invalid configuration: the reserved memory has a duplicate value for NUMA node 1 and resource "memory""#
        );
        assert!(messages[3].contains("negative"), "{messages:?}");
        assert!(messages[4].contains(r#""lots""#), "{messages:?}");
        assert_eq!(errs[2].0, "reservedMemory[3]");
    }
}
