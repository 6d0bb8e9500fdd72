//! Container resource usage over CRI: `ContainerStats`, `ListContainerStats`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerStats, ListFilter, RuntimeError, RuntimeResult};

use crate::client::ctx;
use crate::sandbox::uid_selector;
use crate::{mapping, CriRuntime};

/// One container's CPU, memory and writable-layer usage.
pub(crate) async fn container(
    rt: &CriRuntime,
    container_id: &str,
) -> RuntimeResult<ContainerStats> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ContainerStatsRequest {
            container_id: container_id.to_string(),
        },
        rt.deadline(),
    );
    let resp = rt
        .call(
            ctx("ContainerStats", "container", container_id),
            rt.deadline(),
            client.container_stats(req),
        )
        .await?;
    resp.stats
        .as_ref()
        .map(mapping::container_stats)
        .ok_or_else(|| RuntimeError::NotFound {
            kind: "container",
            id: container_id.to_string(),
        })
}

/// The usage of the kubelet's containers `filter` selects (containers without the kubelet's
/// labels are left out, as in [`ContainerRuntime::list_containers`]).
///
/// [`ContainerRuntime::list_containers`]: kubelet_core::ContainerRuntime::list_containers
pub(crate) async fn list(
    rt: &CriRuntime,
    filter: &ListFilter,
) -> RuntimeResult<Vec<ContainerStats>> {
    let mut client = rt.runtime.clone();
    let req = rt.request(
        cri::ListContainerStatsRequest {
            filter: Some(cri::ContainerStatsFilter {
                label_selector: uid_selector(filter),
                ..Default::default()
            }),
        },
        rt.deadline(),
    );
    let resp = rt
        .call(
            ctx("ListContainerStats", "container", ""),
            rt.deadline(),
            client.list_container_stats(req),
        )
        .await?;
    Ok(resp
        .stats
        .iter()
        .map(mapping::container_stats)
        .filter(|s| !s.pod.uid.is_empty())
        .collect())
}
