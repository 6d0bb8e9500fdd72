//! `/stats/summary` (the `stats.k8s.io/v1alpha1` Summary that metrics-server reads),
//! `/metrics/resource` and `/spec/`, all from the core stats contract: the summary comes from
//! [`kubelet_core::summary::SummaryCollector`] (the one collector, over the node's
//! [`NodeStatsProvider`](kubelet_core::NodeStatsProvider) and the runtime), the machine
//! description from the provider's [`MachineInfo`]. This module only renders them.

pub use kubelet_core::stats::{MachineInfo, StatsError};
pub use kubelet_core::summary::{
    ContainerStats, CpuStats, FsStats, InterfaceStats, MemoryStats, NetworkStats, NodeStats,
    PodEntry, PodReference, PodStats, RuntimeStats, Summary, SummaryCollector, SummaryConfig,
};

/// The cAdvisor-style machine description `/spec/` serves.
pub fn machine_spec(m: &MachineInfo) -> serde_json::Value {
    serde_json::json!({
        "num_cores": m.num_cores,
        "num_physical_cores": m.num_physical_cores,
        "num_sockets": m.num_sockets,
        "memory_capacity": m.memory_capacity,
        "machine_id": m.machine_id,
        "system_uuid": m.system_uuid,
        "boot_id": m.boot_id,
        "hugepages": m.hugepages.iter().map(|h| serde_json::json!({
            "page_size": h.page_size_kb, "num_pages": h.num_pages,
        })).collect::<Vec<_>>(),
        "kernel_version": m.kernel_version,
        "os_image": m.os_image,
    })
}

/// `/metrics/resource` (Go's resource metrics collector) from a summary.
pub fn resource_metrics(s: &Summary) -> String {
    use std::fmt::Write as _;
    let ms = |t: &str| {
        t.parse::<k8s_openapi::jiff::Timestamp>()
            .map(|t| t.as_millisecond())
            .unwrap_or_default()
    };
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut out = String::new();
    let head = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}");
    };
    head(
        &mut out,
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
    );
    for p in &s.pods {
        for c in &p.containers {
            if let Some(cpu) = &c.cpu {
                let _ = writeln!(out, "container_cpu_usage_seconds_total{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {} {}", c.name, p.pod_ref.namespace, p.pod_ref.name, secs(cpu.usage_core_nano_seconds), ms(&cpu.time));
            }
        }
    }
    head(
        &mut out,
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
    );
    for p in &s.pods {
        for c in &p.containers {
            if let Some(m) = &c.memory {
                let _ = writeln!(out, "container_memory_working_set_bytes{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {} {}", c.name, p.pod_ref.namespace, p.pod_ref.name, m.working_set_bytes, ms(&m.time));
            }
        }
    }
    head(
        &mut out,
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds",
    );
    for p in &s.pods {
        for c in &p.containers {
            let t = ms(&c.start_time);
            let _ = writeln!(
                out,
                "container_start_time_seconds{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}} {}",
                c.name,
                p.pod_ref.namespace,
                p.pod_ref.name,
                t as f64 / 1e3
            );
        }
    }
    head(
        &mut out,
        "node_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the node in core-seconds",
    );
    if let Some(cpu) = &s.node.cpu {
        let _ = writeln!(
            out,
            "node_cpu_usage_seconds_total {} {}",
            secs(cpu.usage_core_nano_seconds),
            ms(&cpu.time)
        );
    }
    head(
        &mut out,
        "node_memory_working_set_bytes",
        "gauge",
        "Current working set of the node in bytes",
    );
    if let Some(m) = &s.node.memory {
        let _ = writeln!(
            out,
            "node_memory_working_set_bytes {} {}",
            m.working_set_bytes,
            ms(&m.time)
        );
    }
    head(
        &mut out,
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
    );
    for p in &s.pods {
        if let Some(cpu) = &p.cpu {
            let _ = writeln!(
                out,
                "pod_cpu_usage_seconds_total{{namespace=\"{}\",pod=\"{}\"}} {} {}",
                p.pod_ref.namespace,
                p.pod_ref.name,
                secs(cpu.usage_core_nano_seconds),
                ms(&cpu.time)
            );
        }
    }
    head(
        &mut out,
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
    );
    for p in &s.pods {
        if let Some(m) = &p.memory {
            let _ = writeln!(
                out,
                "pod_memory_working_set_bytes{{namespace=\"{}\",pod=\"{}\"}} {} {}",
                p.pod_ref.namespace,
                p.pod_ref.name,
                m.working_set_bytes,
                ms(&m.time)
            );
        }
    }
    head(
        &mut out,
        "scrape_error",
        "gauge",
        "1 if there was an error while getting container metrics, 0 otherwise",
    );
    let _ = writeln!(out, "scrape_error 0");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_json_shape_and_resource_metrics() {
        let t = "2024-05-01T10:00:00Z".to_string();
        let s = Summary {
            node: NodeStats {
                node_name: "n".into(),
                start_time: t.clone(),
                cpu: Some(CpuStats {
                    time: t.clone(),
                    usage_nano_cores: Some(5),
                    usage_core_nano_seconds: 2_500_000_000,
                }),
                ..Default::default()
            },
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "p".into(),
                    namespace: "ns".into(),
                    uid: "u".into(),
                },
                start_time: t.clone(),
                containers: vec![ContainerStats {
                    name: "c".into(),
                    start_time: t.clone(),
                    memory: Some(MemoryStats {
                        time: t.clone(),
                        working_set_bytes: 42,
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["node"]["nodeName"], "n");
        assert_eq!(v["node"]["cpu"]["usageNanoCores"], 5);
        assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 2_500_000_000u64);
        assert_eq!(v["pods"][0]["podRef"]["namespace"], "ns");
        assert_eq!(
            v["pods"][0]["containers"][0]["memory"]["workingSetBytes"],
            42
        );
        let m = resource_metrics(&s);
        assert!(
            m.contains("node_cpu_usage_seconds_total 2.5 1714557600000\n"),
            "{m}"
        );
        assert!(m.contains("container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 42 1714557600000\n"), "{m}");
        assert!(m.contains("scrape_error 0\n"));
    }

    #[test]
    fn machine_spec_fields() {
        let m = MachineInfo {
            num_cores: 2,
            num_physical_cores: 1,
            num_sockets: 1,
            memory_capacity: 1 << 30,
            machine_id: "m".into(),
            system_uuid: "u".into(),
            boot_id: "b".into(),
            kernel_version: "6.1".into(),
            os_image: "Debian".into(),
            hugepages: vec![kubelet_core::stats::HugePages {
                page_size_kb: 2048,
                num_pages: 4,
            }],
            ..MachineInfo::default()
        };
        assert_eq!(
            machine_spec(&m),
            serde_json::json!({
                "num_cores": 2, "num_physical_cores": 1, "num_sockets": 1,
                "memory_capacity": 1u64 << 30, "machine_id": "m", "system_uuid": "u",
                "boot_id": "b", "hugepages": [{"page_size": 2048, "num_pages": 4}],
                "kernel_version": "6.1", "os_image": "Debian",
            })
        );
    }
}
