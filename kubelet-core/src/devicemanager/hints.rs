//! The device manager's topology hints (Go v1.20.2's `topology_hints.go`): for each device
//! resource a container (or pod) asks for, the sets of NUMA nodes whose devices could serve
//! it, the narrowest preferred.
//!
//! - A resource whose devices report no topology has no preference (`None`).
//! - A container (pod) that already holds the resource's devices gets hints for exactly
//!   those (or none at all when its request changed, which then fails admission).
//! - Otherwise the free healthy devices, plus those an init container leaves for reuse,
//!   must cover the request (no hint at all otherwise), and each NUMA set holding enough of
//!   them is a hint.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::state::DeviceState;
use crate::pod;
use crate::topologymanager::{NumaMask, ProviderHints, TopologyHint, MAX_NUMA_NODES};

impl DeviceState {
    /// Hints for a container's device resources (Go's `GetTopologyHints`).
    pub fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let uid = pod::uid(pod);
        let mut out = ProviderHints::new();
        for (resource, requested) in self.requests(container) {
            if !self
                .resources
                .get(&resource)
                .is_some_and(|r| r.has_topology())
            {
                out.insert(resource, None);
                continue;
            }
            if let Some(held) = self.container_devices(uid, &container.name, &resource) {
                let held = held.ids();
                let hints = if held.len() == requested {
                    self.generate(&resource, &held, &BTreeSet::new(), requested)
                } else {
                    Vec::new()
                };
                out.insert(resource, Some(hints));
                continue;
            }
            let available = self.available(&resource);
            let reusable = self.reuse_for(uid, &resource);
            let hints = if available.union(&reusable).count() < requested {
                Vec::new()
            } else {
                self.generate(&resource, &available, &reusable, requested)
            };
            out.insert(resource, Some(hints));
        }
        out
    }

    /// Hints for a pod's device resources (Go's `GetPodTopologyHints`).
    pub fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        let uid = pod::uid(pod);
        let mut out = ProviderHints::new();
        for (resource, requested) in pod_device_requests(pod, |r| self.is_device_resource(r)) {
            if !self
                .resources
                .get(&resource)
                .is_some_and(|r| r.has_topology())
            {
                out.insert(resource, None);
                continue;
            }
            let held: BTreeSet<String> = self
                .pods
                .get(uid)
                .into_iter()
                .flat_map(BTreeMap::values)
                .filter_map(|c| c.get(&resource))
                .flat_map(|d| d.ids())
                .collect();
            let hints = if !held.is_empty() {
                if held.len() == requested {
                    self.generate(&resource, &held, &BTreeSet::new(), requested)
                } else {
                    Vec::new()
                }
            } else {
                let available = self.available(&resource);
                if available.len() < requested {
                    Vec::new()
                } else {
                    self.generate(&resource, &available, &BTreeSet::new(), requested)
                }
            };
            out.insert(resource, Some(hints));
        }
        out
    }

    /// The free healthy devices of a resource.
    fn available(&self, resource: &str) -> BTreeSet<String> {
        let in_use = self.allocated(resource);
        self.resources
            .get(resource)
            .into_iter()
            .flat_map(|r| r.healthy())
            .filter(|d| !in_use.contains(*d))
            .cloned()
            .collect()
    }

    /// Go's `generateDeviceTopologyHints`.
    fn generate(
        &self,
        resource: &str,
        available: &BTreeSet<String>,
        reusable: &BTreeSet<String>,
        request: usize,
    ) -> Vec<TopologyHint> {
        let Some(r) = self.resources.get(resource) else {
            return Vec::new();
        };
        let nodes = &self.numa_nodes;
        if nodes.len() > MAX_NUMA_NODES {
            return Vec::new();
        }
        let on = |id: &String, mask: NumaMask| {
            r.devices.get(id).is_some_and(|d| {
                d.numa_nodes
                    .iter()
                    .any(|n| u32::try_from(*n).is_ok_and(|n| mask.contains(n)))
            })
        };
        let mut min_size = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
        let mut hints = Vec::new();
        for mask in NumaMask::subsets(nodes) {
            let in_mask = r.devices.keys().filter(|d| on(d, mask)).count();
            if in_mask >= request && mask.count() < min_size {
                min_size = mask.count();
            }
            let mut matching = 0;
            let mut fits = true;
            for d in reusable {
                if r.devices.get(d).is_none_or(|d| d.numa_nodes.is_empty()) {
                    continue;
                }
                if !on(d, mask) {
                    fits = false;
                    break;
                }
                matching += 1;
            }
            if !fits {
                continue;
            }
            matching += available.iter().filter(|d| on(d, mask)).count();
            if matching < request {
                continue;
            }
            hints.push(TopologyHint {
                affinity: Some(mask),
                preferred: false,
            });
        }
        for h in &mut hints {
            h.preferred = h.affinity.is_some_and(|m| m.count() == min_size);
        }
        hints
    }
}

/// A pod's device requests (Go's `getPodDeviceRequest`): per resource, the larger of the
/// largest init container's and the sum of the app containers'.
pub fn pod_device_requests(
    pod: &Pod,
    is_device_resource: impl Fn(&str) -> bool,
) -> BTreeMap<String, usize> {
    let spec = pod.spec.as_ref();
    let limits = |c: &Container| -> Vec<(String, usize)> {
        c.resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
            .filter(|(k, _)| is_device_resource(k))
            .map(|(k, v)| {
                let n = crate::resources::value(v)
                    .ok()
                    .and_then(|v| usize::try_from(v).ok())
                    .unwrap_or(0);
                (k.clone(), n)
            })
            .collect()
    };
    let mut init: BTreeMap<String, usize> = BTreeMap::new();
    for c in spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
    {
        for (k, n) in limits(c) {
            let e = init.entry(k).or_default();
            *e = (*e).max(n);
        }
    }
    let mut app: BTreeMap<String, usize> = BTreeMap::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        for (k, n) in limits(c) {
            *app.entry(k).or_default() += n;
        }
    }
    let mut out = app;
    for (k, n) in init {
        let e = out.entry(k).or_default();
        *e = (*e).max(n);
    }
    out
}
