//! The floor: the benchmark's pod started with plain CRI calls (`bench-cri`'s raw floor, with
//! the very messages the backend sends), one at a time and in a burst; the pod is made the
//! API pod as the runtime sees it first (`floor_pod`).

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use kubelet_core::runtime::ContainerRuntime;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::floor_pod::{as_an_api_pod, ClusterDns};
use super::ms;
use crate::bench_cri::backend::{cleanup_prefix, connect_backend};
use crate::bench_cri::cgroups::remove_cgroup_root;
use crate::bench_cri::raw::{prepare, raw_client, start_pod, CallTimes};
use crate::bench_cri::workload::{workload, BenchPod};
use crate::bench_cri::{BUSYBOX_IMAGE, RAW_CGROUP_ROOT};

/// Starts `samples` pods one after the other, then `burst` pods at once; each pod's time from
/// its `RunPodSandbox` until its `StartContainer` returned. Everything it made is removed.
pub(super) async fn run(
    endpoint: &str,
    samples: usize,
    burst: usize,
    dns: &ClusterDns,
) -> Result<Value> {
    let files = std::env::temp_dir().join(format!("startup-raw-{:x}", std::process::id()));
    let figures = floor(endpoint, samples, burst, dns, &files).await;
    let _ = tokio::fs::remove_dir_all(&files).await;
    figures
}

async fn floor(
    endpoint: &str,
    samples: usize,
    burst: usize,
    dns: &ClusterDns,
    files: &std::path::Path,
) -> Result<Value> {
    let pods = |prefix: &str, n: usize| {
        let mut pods: Vec<BenchPod> = workload(prefix, n);
        async move {
            as_an_api_pod(&mut pods, files, dns).await?;
            anyhow::Ok(pods)
        }
    };
    let backend = Arc::new(connect_backend(endpoint).await?);
    let image_ref = backend
        .image_status(BUSYBOX_IMAGE)
        .await?
        .map(|i| i.id)
        .ok_or_else(|| anyhow!("{BUSYBOX_IMAGE} is not present at {endpoint}"))?;
    let client = raw_client(endpoint).await?;
    let run = format!("{:x}", std::process::id());

    let prefix = format!("startup-raw-{run}-seq");
    let calls = CallTimes::default();
    let mut sequential = Vec::with_capacity(samples);
    let mut failure = None;
    for (sandbox, container) in prepare(&pods(&prefix, samples).await?, &image_ref).await? {
        let mut c = client.clone();
        let t = kubelet_core::clock::monotonic_now();
        match start_pod(&mut c, &calls, sandbox, container).await {
            Ok(_) => sequential.push(ms(kubelet_core::clock::elapsed(t))),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    cleanup_prefix(&backend, &prefix).await;
    if let Some(e) = failure {
        remove_cgroup_root(RAW_CGROUP_ROOT);
        bail!("raw CRI, one at a time: {e}");
    }
    let by_method: serde_json::Map<String, Value> = calls
        .take()
        .into_iter()
        .map(|(m, d)| (m, json!(d.into_iter().map(ms).collect::<Vec<_>>())))
        .collect();
    eprintln!("[startup-latency] raw CRI: {samples} pods one at a time");

    let prefix = format!("startup-raw-{run}-burst");
    let calls = CallTimes::default();
    let mut set = JoinSet::new();
    for (sandbox, container) in prepare(&pods(&prefix, burst).await?, &image_ref).await? {
        let mut c = client.clone();
        let calls = calls.clone();
        set.spawn(async move {
            let t = kubelet_core::clock::monotonic_now();
            start_pod(&mut c, &calls, sandbox, container)
                .await
                .map(|_| ms(kubelet_core::clock::elapsed(t)))
        });
    }
    let mut bursts = Vec::with_capacity(burst);
    let mut errors = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(v)) => bursts.push(v),
            Ok(Err(e)) => errors.push(e),
            Err(e) => errors.push(e.to_string()),
        }
    }
    cleanup_prefix(&backend, &prefix).await;
    remove_cgroup_root(RAW_CGROUP_ROOT);
    if let Some(e) = errors.first() {
        bail!(
            "raw CRI, a burst of {burst}: {} failed, the first: {e}",
            errors.len()
        );
    }
    eprintln!("[startup-latency] raw CRI: a burst of {burst} pods");
    Ok(json!({
        "endpoint": endpoint,
        "sequential_ms": sequential,
        "sequential_calls_ms": by_method,
        "burst_ms": bursts,
    }))
}
