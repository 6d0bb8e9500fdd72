//! `/metrics/cadvisor`: the `container_*` and `machine_*` series cAdvisor exports through the
//! Go kubelet (what kube-prometheus dashboards read), rendered from the core
//! [`Summary`] — the one collector's cgroup measurements —
//! plus the runtime's container listing (names, images, writable layers) and the pods'
//! specs (limits).
//!
//! Labels as the kubelet gives cAdvisor's series: `container` (the name in the pod spec;
//! empty for the pod sandbox, which carries the network series), `id` (the cgroup path),
//! `image`, `name` (the runtime's container id), `namespace`, `pod`.
//!
//! | family | from |
//! |---|---|
//! | `container_cpu_usage_seconds_total` | container cgroup cpu time |
//! | `container_memory_usage_bytes`, `_working_set_bytes`, `_rss`, `_cache` | container memory cgroup |
//! | `container_network_{receive,transmit}_{bytes,errors}_total{interface}` | the pod's network namespace |
//! | `container_fs_usage_bytes{device}`, `container_fs_inodes_usage{device}` | the writable layer (CRI container stats) |
//! | `container_spec_cpu_shares`, `_cpu_quota`, `_cpu_period`, `_memory_limit_bytes` | the container spec, as the CRI mapping sets them |
//! | `container_start_time_seconds`, `container_last_seen` | the running instance |
//! | `machine_cpu_cores`, `machine_memory_bytes` | machine info |

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use kubelet_core::cpu::{milli_cpu_to_quota, milli_cpu_to_shares, QUOTA_PERIOD};
use kubelet_core::resources::{milli_value, value as quantity_value};
use kubelet_core::runtime::{
    ContainerStats as RuntimeContainerStats, ContainerSummary, SandboxSummary,
};
use kubelet_core::summary::Summary;
use kubelet_core::MachineInfo;

/// What one render reads. See the module docs.
pub struct CadvisorInput<'a> {
    /// The summary (cpu, memory, network of running pods and containers).
    pub summary: &'a Summary,
    /// The pods the kubelet runs.
    pub pods: &'a [Arc<Pod>],
    /// The runtime's containers (running ones are rendered).
    pub containers: &'a [ContainerSummary],
    /// The runtime's sandboxes (the network series' `name`).
    pub sandboxes: &'a [SandboxSummary],
    /// The runtime's container stats (writable layers), by container id.
    pub runtime_stats: &'a [RuntimeContainerStats],
    /// The cgroup (cgroupfs path) of a container or sandbox by its id, when the container
    /// manager knows it ([`ContainerManager::container_cgroup`]); `/<id>` otherwise.
    ///
    /// [`ContainerManager::container_cgroup`]: kubelet_core::ContainerManager::container_cgroup
    pub container_cgroup: &'a dyn Fn(&str) -> Option<String>,
    /// The machine.
    pub machine: Option<&'a MachineInfo>,
}

fn esc(v: &str) -> String {
    kubelet_core::metrics::families::escape(v)
}

struct Labels {
    container: String,
    id: String,
    image: String,
    name: String,
    namespace: String,
    pod: String,
}

impl Labels {
    fn text(&self, extra: &[(&str, &str)]) -> String {
        let mut s = format!(
            "container=\"{}\",id=\"{}\",image=\"{}\",name=\"{}\",namespace=\"{}\",pod=\"{}\"",
            esc(&self.container),
            esc(&self.id),
            esc(&self.image),
            esc(&self.name),
            esc(&self.namespace),
            esc(&self.pod)
        );
        for (k, v) in extra {
            let _ = write!(s, ",{k}=\"{}\"", esc(v));
        }
        s
    }
}

fn limit(c: &Container, name: &str, milli: bool) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get(name))
        .and_then(|q| {
            if milli {
                milli_value(q).ok()
            } else {
                quantity_value(q).ok()
            }
        })
        .unwrap_or(0)
}

fn request(c: &Container, name: &str) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|l| l.get(name))
        .and_then(|q| milli_value(q).ok())
        .unwrap_or(0)
}

fn spec_container(p: &Pod, name: &str) -> Option<Container> {
    let s = p.spec.as_ref()?;
    s.containers
        .iter()
        .chain(s.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            kubelet_core::pod::ephemeral_containers(p)
                .into_iter()
                .find(|c| c.name == name)
        })
}

fn rfc3339_secs(t: &str) -> Option<f64> {
    t.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond() as f64 / 1e3)
}

/// Renders `/metrics/cadvisor`. See the module docs.
pub fn render(input: &CadvisorInput<'_>) -> String {
    let pods: HashMap<&str, &Arc<Pod>> = input
        .pods
        .iter()
        .map(|p| (kubelet_core::pod::uid(p), p))
        .collect();
    let fs: HashMap<&str, &RuntimeContainerStats> = input
        .runtime_stats
        .iter()
        .map(|s| (s.container_id.as_str(), s))
        .collect();
    // (family, type, help) → lines.
    let mut families: Vec<(&str, &str, &str, Vec<String>)> = vec![
        ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed in seconds.", vec![]),
        ("container_fs_inodes_usage", "gauge", "Number of inodes used by the container on this filesystem.", vec![]),
        ("container_fs_usage_bytes", "gauge", "Number of bytes that are consumed by the container on this filesystem.", vec![]),
        ("container_last_seen", "gauge", "Last time a container was seen by the exporter", vec![]),
        ("container_memory_cache", "gauge", "Number of bytes of page cache memory.", vec![]),
        ("container_memory_rss", "gauge", "Size of RSS in bytes.", vec![]),
        ("container_memory_usage_bytes", "gauge", "Current memory usage in bytes, including all memory regardless of when it was accessed", vec![]),
        ("container_memory_working_set_bytes", "gauge", "Current working set in bytes.", vec![]),
        ("container_network_receive_bytes_total", "counter", "Cumulative count of bytes received", vec![]),
        ("container_network_receive_errors_total", "counter", "Cumulative count of errors encountered while receiving", vec![]),
        ("container_network_transmit_bytes_total", "counter", "Cumulative count of bytes transmitted", vec![]),
        ("container_network_transmit_errors_total", "counter", "Cumulative count of errors encountered while transmitting", vec![]),
        ("container_spec_cpu_period", "gauge", "CPU period of the container.", vec![]),
        ("container_spec_cpu_quota", "gauge", "CPU quota of the container.", vec![]),
        ("container_spec_cpu_shares", "gauge", "CPU share of the container.", vec![]),
        ("container_spec_memory_limit_bytes", "gauge", "Memory limit for the container.", vec![]),
        ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds.", vec![]),
    ];
    let mut push = |name: &str, line: String| {
        if let Some(f) = families.iter_mut().find(|f| f.0 == name) {
            f.3.push(line);
        }
    };
    let now = kubelet_core::clock::now_unix_nanos() as f64 / 1e9;
    let cgroup_of = |id: &str| (input.container_cgroup)(id).unwrap_or_else(|| format!("/{id}"));
    for ps in &input.summary.pods {
        let uid = ps.pod_ref.uid.as_str();
        let pod = pods.get(uid).copied();
        // The pod's network, on its sandbox.
        if let Some(net) = &ps.network {
            let sandbox = input
                .sandboxes
                .iter()
                .filter(|s| s.pod.uid == uid)
                .max_by_key(|s| s.created_at)
                .map(|s| s.id.clone())
                .unwrap_or_default();
            let labels = Labels {
                container: String::new(),
                id: cgroup_of(&sandbox),
                image: String::new(),
                name: sandbox,
                namespace: ps.pod_ref.namespace.clone(),
                pod: ps.pod_ref.name.clone(),
            };
            for i in &net.interfaces {
                let l = labels.text(&[("interface", &i.name)]);
                push(
                    "container_network_receive_bytes_total",
                    format!("{{{l}}} {}", i.rx_bytes),
                );
                push(
                    "container_network_receive_errors_total",
                    format!("{{{l}}} {}", i.rx_errors),
                );
                push(
                    "container_network_transmit_bytes_total",
                    format!("{{{l}}} {}", i.tx_bytes),
                );
                push(
                    "container_network_transmit_errors_total",
                    format!("{{{l}}} {}", i.tx_errors),
                );
            }
        }
        for cs in &ps.containers {
            let running = input
                .containers
                .iter()
                .filter(|c| c.pod.uid == uid && c.name == cs.name)
                .filter(|c| c.state == kubelet_core::runtime::ContainerState::Running)
                .max_by_key(|c| c.created_at);
            let (id, image) = match running {
                Some(c) => (c.id.clone(), c.image.clone()),
                None => continue,
            };
            let labels = Labels {
                container: cs.name.clone(),
                id: cgroup_of(&id),
                image,
                name: id.clone(),
                namespace: ps.pod_ref.namespace.clone(),
                pod: ps.pod_ref.name.clone(),
            };
            let l = labels.text(&[]);
            if let Some(cpu) = &cs.cpu {
                push(
                    "container_cpu_usage_seconds_total",
                    format!("{{{l}}} {}", cpu.usage_core_nano_seconds as f64 / 1e9),
                );
            }
            if let Some(m) = &cs.memory {
                push(
                    "container_memory_usage_bytes",
                    format!("{{{l}}} {}", m.usage_bytes),
                );
                push(
                    "container_memory_working_set_bytes",
                    format!("{{{l}}} {}", m.working_set_bytes),
                );
                push("container_memory_rss", format!("{{{l}}} {}", m.rss_bytes));
                if let Some(cache) = m.cache_bytes {
                    push("container_memory_cache", format!("{{{l}}} {cache}"));
                }
            }
            if let Some(w) = fs.get(id.as_str()).and_then(|s| s.writable_layer.as_ref()) {
                let fl = labels.text(&[("device", &w.mountpoint)]);
                if let Some(b) = w.used_bytes {
                    push("container_fs_usage_bytes", format!("{{{fl}}} {b}"));
                }
                if let Some(i) = w.inodes_used {
                    push("container_fs_inodes_usage", format!("{{{fl}}} {i}"));
                }
            }
            if let Some(spec) = pod.and_then(|p| spec_container(p, &cs.name)) {
                let cpu_limit = limit(&spec, "cpu", true);
                let cpu_request = request(&spec, "cpu");
                let shares = milli_cpu_to_shares(if cpu_request == 0 {
                    cpu_limit
                } else {
                    cpu_request
                });
                push("container_spec_cpu_shares", format!("{{{l}}} {shares}"));
                push(
                    "container_spec_cpu_period",
                    format!("{{{l}}} {QUOTA_PERIOD}"),
                );
                if cpu_limit > 0 {
                    push(
                        "container_spec_cpu_quota",
                        format!("{{{l}}} {}", milli_cpu_to_quota(cpu_limit, QUOTA_PERIOD)),
                    );
                }
                push(
                    "container_spec_memory_limit_bytes",
                    format!("{{{l}}} {}", limit(&spec, "memory", false)),
                );
            }
            if let Some(t) = rfc3339_secs(&cs.start_time) {
                push("container_start_time_seconds", format!("{{{l}}} {t}"));
            }
            push("container_last_seen", format!("{{{l}}} {now}"));
        }
    }
    let mut out = String::new();
    for (name, kind, help, lines) in &families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for line in lines {
            let _ = writeln!(out, "{name}{line}");
        }
    }
    if let Some(m) = input.machine {
        let _ = writeln!(out, "# HELP machine_cpu_cores Number of logical CPU cores.\n# TYPE machine_cpu_cores gauge\nmachine_cpu_cores {}", m.num_cores);
        let _ = writeln!(out, "# HELP machine_memory_bytes Amount of memory installed on the machine.\n# TYPE machine_memory_bytes gauge\nmachine_memory_bytes {}", m.memory_capacity);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_core::runtime::{ContainerState, PodRef};
    use kubelet_core::summary::{
        ContainerStats, CpuStats, InterfaceStats, MemoryStats, NetworkStats, PodReference, PodStats,
    };
    use kubelet_core::testing::{ContainerBuilder, PodBuilder};

    #[test]
    fn series_carry_cadvisor_labels() {
        let pod = Arc::new(
            PodBuilder::new("web", "u1")
                .namespace("prod")
                .container(
                    ContainerBuilder::new("app", "busybox:1")
                        .requests(&[("cpu", "250m")])
                        .limits(&[("cpu", "500m"), ("memory", "64Mi")])
                        .build(),
                )
                .build(),
        );
        let t = "2026-01-01T00:00:00Z".to_string();
        let eth0 = InterfaceStats {
            name: "eth0".into(),
            rx_bytes: 10,
            tx_bytes: 20,
            ..Default::default()
        };
        let summary = Summary {
            pods: vec![PodStats {
                pod_ref: PodReference {
                    name: "web".into(),
                    namespace: "prod".into(),
                    uid: "u1".into(),
                },
                start_time: t.clone(),
                network: Some(NetworkStats {
                    time: t.clone(),
                    default: Some(eth0.clone()),
                    interfaces: vec![eth0],
                }),
                containers: vec![ContainerStats {
                    name: "app".into(),
                    start_time: t.clone(),
                    cpu: Some(CpuStats {
                        time: t.clone(),
                        usage_nano_cores: None,
                        usage_core_nano_seconds: 1_500_000_000,
                    }),
                    memory: Some(MemoryStats {
                        time: t.clone(),
                        usage_bytes: 300,
                        working_set_bytes: 200,
                        rss_bytes: 100,
                        cache_bytes: Some(150),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let pref = PodRef {
            uid: "u1".into(),
            name: "web".into(),
            namespace: "prod".into(),
        };
        let containers = vec![ContainerSummary {
            id: "c1".into(),
            sandbox_id: "s1".into(),
            pod: pref.clone(),
            name: "app".into(),
            attempt: 0,
            hash: 0,
            image: "busybox:1".into(),
            image_ref: "sha256:x".into(),
            state: ContainerState::Running,
            created_at: 1,
        }];
        let sandboxes = vec![SandboxSummary {
            id: "s1".into(),
            pod: pref,
            attempt: 0,
            state: kubelet_core::runtime::SandboxState::Ready,
            created_at: 1,
        }];
        let text = render(&CadvisorInput {
            summary: &summary,
            pods: &[pod],
            containers: &containers,
            sandboxes: &sandboxes,
            runtime_stats: &[],
            container_cgroup: &|id| Some(format!("/kubepods/burstable/podu1/{id}")),
            machine: None,
        });
        let l = "container=\"app\",id=\"/kubepods/burstable/podu1/c1\",image=\"busybox:1\",name=\"c1\",namespace=\"prod\",pod=\"web\"";
        for want in [
            format!("container_cpu_usage_seconds_total{{{l}}} 1.5"),
            format!("container_memory_working_set_bytes{{{l}}} 200"),
            format!("container_memory_rss{{{l}}} 100"),
            format!("container_memory_cache{{{l}}} 150"),
            format!("container_memory_usage_bytes{{{l}}} 300"),
            format!("container_spec_cpu_shares{{{l}}} 256"),
            format!("container_spec_cpu_quota{{{l}}} 50000"),
            format!("container_spec_cpu_period{{{l}}} 100000"),
            format!("container_spec_memory_limit_bytes{{{l}}} 67108864"),
            "container_network_receive_bytes_total{container=\"\",id=\"/kubepods/burstable/podu1/s1\",image=\"\",name=\"s1\",namespace=\"prod\",pod=\"web\",interface=\"eth0\"} 10".to_string(),
            "# TYPE container_network_transmit_bytes_total counter".to_string(),
        ] {
            assert!(text.contains(&want), "missing {want}\n{text}");
        }
    }
}
