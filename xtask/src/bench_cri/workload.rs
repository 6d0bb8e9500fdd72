//! The benchmark's workload: N busybox pods with their CRI sandbox and container configs, and
//! the figures of one raw or backend run over them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_core::runtime::{ContainerConfig, ContainerKind, SandboxConfig};
use tokio::task::JoinSet;

use super::{BENCH_DIR, BUSYBOX_IMAGE, NAMESPACE, RAW_CGROUP_ROOT, SCRIPT};

/// One raw or backend run of N pods.
#[derive(Debug, Default)]
pub(super) struct WorkloadRun {
    pub(super) start: Duration,
    pub(super) stop: Duration,
    pub(super) latencies: Vec<Duration>,
    pub(super) errors: Vec<String>,
    /// Each CRI call's duration by method (`RunPodSandbox`, …; the raw run records them).
    pub(super) calls: BTreeMap<String, Vec<Duration>>,
    /// Cores of the whole machine busy during the start and the stop (all processes).
    pub(super) start_busy: Option<f64>,
    pub(super) stop_busy: Option<f64>,
}

/// What one pod's start task yields: its latency, sandbox id and container id.
pub(super) type Started = Result<(Duration, String, String), String>;

impl WorkloadRun {
    /// Waits for every start task; records latencies and errors, returns the started pods'
    /// (sandbox id, container id).
    pub(super) async fn collect_started(
        &mut self,
        set: &mut JoinSet<Started>,
    ) -> Vec<(String, String)> {
        let mut started = Vec::new();
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok((lat, sid, cid))) => {
                    self.latencies.push(lat);
                    started.push((sid, cid));
                }
                Ok(Err(e)) => self.errors.push(e),
                Err(e) => self.errors.push(e.to_string()),
            }
        }
        started
    }

    pub(super) fn percentile(&self, p: f64) -> Duration {
        percentile(&self.latencies, p)
    }
}

/// The `p`-th percentile (nearest rank) of `v`; zero when empty.
pub(super) fn percentile(v: &[Duration], p: f64) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    crate::percentile::nearest_rank(&v, p).unwrap_or_default()
}

/// One benchmark pod: the pod, its sandbox config and its container config.
pub(crate) struct BenchPod {
    pub(crate) sandbox: SandboxConfig,
    pub(crate) container: ContainerConfig,
}

pub(crate) fn busybox_container() -> Container {
    Container {
        name: "busybox".to_string(),
        image: Some(BUSYBOX_IMAGE.to_string()),
        image_pull_policy: Some("Never".to_string()),
        command: Some(vec!["sh".into(), "-c".into(), SCRIPT.into()]),
        ..Default::default()
    }
}

pub(crate) fn workload(prefix: &str, n: usize) -> Vec<BenchPod> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i:03}");
            let uid = format!("{prefix}-{i:03}-uid");
            let container = busybox_container();
            let pod = Arc::new(Pod {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(NAMESPACE.to_string()),
                    uid: Some(uid.clone()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    containers: vec![container.clone()],
                    ..Default::default()
                }),
                ..Default::default()
            });
            let sandbox = SandboxConfig {
                pod: pod.clone(),
                attempt: 0,
                hostname: name.clone(),
                log_directory: Path::new(BENCH_DIR)
                    .join("pod-logs")
                    .join(format!("{NAMESPACE}_{name}_{uid}")),
                cgroup_parent: Some(format!("{RAW_CGROUP_ROOT}/kubepods/besteffort/pod{uid}")),
                dns: None,
                runtime_handler: String::new(),
            };
            let container = ContainerConfig {
                pod,
                kind: ContainerKind::Regular,
                restart_count: 0,
                hash: kubelet_core::hash::container_hash(&container),
                image_ref: String::new(),
                command: container.command.clone().unwrap_or_default(),
                args: Vec::new(),
                env: Vec::new(),
                mounts: Vec::new(),
                log_path: PathBuf::from(&container.name).join("0.log"),
                cpuset_cpus: None,
                cpuset_mems: None,
                devices: Default::default(),
                container,
                extra_supplemental_groups: Vec::new(),
            };
            BenchPod { sandbox, container }
        })
        .collect()
}

pub(super) async fn collect_errors(
    set: &mut JoinSet<Result<(), String>>,
    errors: &mut Vec<String>,
) {
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_nearest_rank() {
        let run = WorkloadRun {
            latencies: (1..=100).rev().map(Duration::from_millis).collect(),
            ..WorkloadRun::default()
        };
        let cases = [(50.0, 50), (99.0, 99), (100.0, 100), (0.0, 1)];
        for (p, want) in cases {
            assert_eq!(run.percentile(p), Duration::from_millis(want), "p{p}");
        }
        assert_eq!(WorkloadRun::default().percentile(50.0), Duration::ZERO);
    }

    #[test]
    fn workload_pods_are_unique_and_consistent() {
        let pods = workload("bench-raw-x-0", 3);
        let names: Vec<_> = pods
            .iter()
            .map(|p| kubelet_core::pod::name(&p.sandbox.pod).to_string())
            .collect();
        assert_eq!(
            names,
            [
                "bench-raw-x-0-000",
                "bench-raw-x-0-001",
                "bench-raw-x-0-002"
            ]
        );
        for p in &pods {
            let uid = kubelet_core::pod::uid(&p.sandbox.pod);
            assert_eq!(
                p.sandbox.cgroup_parent.as_deref(),
                Some(format!("/kubelet-rs-bench/kubepods/besteffort/pod{uid}").as_str())
            );
            assert_eq!(
                p.container.hash,
                kubelet_core::hash::container_hash(&p.container.container)
            );
            assert_eq!(p.container.log_path, PathBuf::from("busybox/0.log"));
        }
    }
}
