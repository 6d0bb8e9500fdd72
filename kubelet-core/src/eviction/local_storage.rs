//! Local storage limits (Go's `localStorageEviction`): every monitoring period, each active
//! pod is checked in turn for
//!
//! 1. an emptyDir volume holding more than its `sizeLimit` (signal `emptydirfs.limit`),
//! 2. its local ephemeral storage (containers' writable layers and logs plus disk-backed
//!    emptyDirs) above the sum of its containers' `ephemeral-storage` limits
//!    (`ephemeralpodfs.limit`),
//! 3. a container whose logs (and, when images share the node's filesystem, writable layer)
//!    exceed its own `ephemeral-storage` limit (`ephemeralcontainerfs.limit`).
//!
//! The first violation of a pod evicts it at once (no grace period); every violating pod of
//! the cycle is evicted, and threshold-based eviction waits for the next cycle.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::messages;
use crate::resources;
use crate::summary::PodStats;

/// The metric label of an emptyDir over its limit.
pub const SIGNAL_EMPTY_DIR: &str = "emptydirfs.limit";
/// The metric label of a pod over its containers' limits.
pub const SIGNAL_POD: &str = "ephemeralpodfs.limit";
/// The metric label of a container over its limit.
pub const SIGNAL_CONTAINER: &str = "ephemeralcontainerfs.limit";

/// A pod to evict for its local storage.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The pod.
    pub pod: Arc<Pod>,
    /// Go's message.
    pub message: String,
    /// The `kubelet_evictions` label.
    pub signal: &'static str,
}

fn value(q: &Quantity) -> i64 {
    resources::value(q).unwrap_or(0)
}

fn limit(c: &Container) -> Option<&Quantity> {
    c.resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("ephemeral-storage"))
}

fn int(v: Option<u64>) -> i64 {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)).unwrap_or(0)
}

/// The pod's ephemeral-storage limit (Go's `PodLimits`: the sum over app containers, at
/// least each init container's), when any container sets one.
fn pod_limit(pod: &Pod) -> Option<i64> {
    let spec = pod.spec.as_ref()?;
    let inits = spec.init_containers.iter().flatten();
    if !spec
        .containers
        .iter()
        .chain(inits.clone())
        .any(|c| limit(c).is_some())
    {
        return None;
    }
    let sum: i64 = spec
        .containers
        .iter()
        .filter_map(limit)
        .map(value)
        .fold(0, i64::saturating_add);
    let init = inits.filter_map(limit).map(value).max().unwrap_or(0);
    Some(sum.max(init))
}

fn check(pod: &Arc<Pod>, s: &PodStats, dedicated_image_fs: bool) -> Option<Violation> {
    let spec = pod.spec.as_ref()?;
    let violation = |message, signal| {
        Some(Violation {
            pod: pod.clone(),
            message,
            signal,
        })
    };
    for v in spec.volumes.iter().flatten() {
        let Some(size) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) else {
            continue;
        };
        let Some(used) = s.volume.iter().find(|vs| vs.name == v.name) else {
            continue;
        };
        let size_bytes = value(size);
        if size_bytes > 0 && int(used.fs.used_bytes) > size_bytes {
            return violation(
                messages::empty_dir_message(&v.name, &size.0),
                SIGNAL_EMPTY_DIR,
            );
        }
    }
    if let Some(l) = pod_limit(pod) {
        let used = int(s.ephemeral_storage.as_ref().and_then(|e| e.used_bytes));
        if used > l {
            return violation(messages::pod_ephemeral_storage_message(l), SIGNAL_POD);
        }
    }
    for cs in &s.containers {
        let Some(c) = spec.containers.iter().find(|c| c.name == cs.name) else {
            continue;
        };
        let Some(l) = limit(c).filter(|q| value(q) != 0) else {
            continue;
        };
        let mut used = int(cs.logs.as_ref().and_then(|f| f.used_bytes));
        if !dedicated_image_fs {
            used = used.saturating_add(int(cs.rootfs.as_ref().and_then(|f| f.used_bytes)));
        }
        if used > value(l) {
            return violation(
                messages::container_ephemeral_storage_message(&c.name, &l.0),
                SIGNAL_CONTAINER,
            );
        }
    }
    None
}

/// Whether the pod sets a limit these checks enforce (an emptyDir `sizeLimit` or an
/// `ephemeral-storage` limit): the other pods cannot violate one, so only these are
/// measured every cycle.
pub fn has_limits(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.volumes
        .iter()
        .flatten()
        .any(|v| v.empty_dir.as_ref().is_some_and(|e| e.size_limit.is_some()))
        || pod_limit(pod).is_some()
}

/// The pods of `pods` over a local storage limit, with why. See the module docs.
pub fn violations(
    pods: &[Arc<Pod>],
    stats: &HashMap<&str, &PodStats>,
    dedicated_image_fs: bool,
) -> Vec<Violation> {
    pods.iter()
        .filter_map(|p| {
            let s = stats.get(crate::pod::uid(p))?;
            check(p, s, dedicated_image_fs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{ContainerStats, FsStats, PodReference, VolumeStats};
    use crate::testing::{ContainerBuilder, PodBuilder};
    use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};

    fn used(b: u64) -> Option<FsStats> {
        Some(FsStats {
            used_bytes: Some(b),
            ..Default::default()
        })
    }

    #[test]
    fn each_limit_in_turn() {
        let sized = Arc::new(
            PodBuilder::new("sized", "u1")
                .container(ContainerBuilder::new("c", "busybox").build())
                .volume(Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource {
                        size_limit: Some(Quantity("1Mi".into())),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .build(),
        );
        let limited = |name: &str, uid: &str| {
            Arc::new(
                PodBuilder::new(name, uid)
                    .container(
                        ContainerBuilder::new("c", "busybox")
                            .limits(&[("ephemeral-storage", "2Mi")])
                            .build(),
                    )
                    .container(ContainerBuilder::new("d", "busybox").build())
                    .build(),
            )
        };
        let pod_over = limited("pod-over", "u2");
        let container_over = limited("container-over", "u3");
        let fine = limited("fine", "u4");
        let stats = |uid: &str, volume: u64, total: u64, c: (u64, u64)| PodStats {
            pod_ref: PodReference {
                uid: uid.into(),
                ..Default::default()
            },
            volume: vec![VolumeStats {
                fs: used(volume).unwrap_or_default(),
                name: "scratch".into(),
                pvc_ref: None,
            }],
            ephemeral_storage: used(total),
            containers: vec![ContainerStats {
                name: "c".into(),
                rootfs: used(c.0),
                logs: used(c.1),
                ..Default::default()
            }],
            ..Default::default()
        };
        let all = [
            stats("u1", 2 << 20, 0, (0, 0)),
            stats("u2", 0, 3 << 20, (0, 0)),
            stats("u3", 0, 0, (1 << 20, (1 << 20) + 1)),
            stats("u4", 0, 1 << 20, (1 << 20, 1 << 19)),
        ];
        let by_uid: HashMap<&str, &PodStats> =
            all.iter().map(|s| (s.pod_ref.uid.as_str(), s)).collect();
        let pods = [sized, pod_over, container_over.clone(), fine];
        let v = violations(&pods, &by_uid, false);
        let got: Vec<(&str, &str)> = v
            .iter()
            .map(|v| (crate::pod::name(&v.pod), v.signal))
            .collect();
        assert_eq!(
            got,
            [
                ("sized", SIGNAL_EMPTY_DIR),
                ("pod-over", SIGNAL_POD),
                ("container-over", SIGNAL_CONTAINER),
            ]
        );
        assert_eq!(
            v[0].message,
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
        );
        // With a dedicated image filesystem only logs count against a container's limit.
        let v = violations(&[container_over], &by_uid, true);
        assert!(v.is_empty());
    }
}
