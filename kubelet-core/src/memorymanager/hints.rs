//! What a Guaranteed container (or pod) asks of the memory manager and where it could be
//! placed (Go's `getRequestedResources`, `getPodRequestedResources`, `calculateHints`,
//! `regenerateHints`, `findBestHint`). Pure functions of the machine state.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::state::{Block, MachineState, MEMORY};
use crate::qos::{pod_qos, QosClass};
use crate::topologymanager::{NumaMask, TopologyHint};

/// Resource name → bytes.
pub type Request = BTreeMap<String, u64>;

/// Resource name → where it could go.
pub type MemoryHints = BTreeMap<String, Vec<TopologyHint>>;

/// Memory the pod's init containers hold on a set of nodes and its app containers may
/// reuse: node set → resource → bytes (Go's `initContainersReusableMemory` of one pod).
pub type Reusable = BTreeMap<NumaMask, BTreeMap<String, u64>>;

/// Why a request cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[memorymanager] failed to represent quantity as int64: {resource} of container {container:?}"
)]
pub struct RequestError {
    /// The container.
    pub container: String,
    /// The resource.
    pub resource: String,
}

/// Whether the memory manager handles `resource`: `memory` and huge pages.
pub fn is_memory_resource(resource: &str) -> bool {
    resource == MEMORY || resource.starts_with("hugepages-")
}

/// What the memory manager pins for `container`: its `memory` and `hugepages-*` requests
/// (`None`: not a Guaranteed pod, nothing to pin).
pub fn container_request(
    pod: &Pod,
    container: &Container,
) -> Result<Option<Request>, RequestError> {
    if pod_qos(pod) != QosClass::Guaranteed {
        return Ok(None);
    }
    requests_of(container).map(Some)
}

fn requests_of(container: &Container) -> Result<Request, RequestError> {
    let mut out = Request::new();
    let Some(requests) = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
    else {
        return Ok(out);
    };
    for (name, q) in requests {
        if !is_memory_resource(name) {
            continue;
        }
        let bytes = crate::resources::value(q)
            .ok()
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| RequestError {
                container: container.name.clone(),
                resource: name.clone(),
            })?;
        out.insert(name.clone(), bytes);
    }
    Ok(out)
}

/// What the whole pod pins (Go's `getPodRequestedResources`, with sidecars): per resource
/// of the app containers, the larger of what runs for the pod's life (the app containers and
/// the sidecars) and the most at any one time during initialisation (a regular init
/// container beside the sidecars started before it).
pub fn pod_request(pod: &Pod) -> Result<Option<Request>, RequestError> {
    if pod_qos(pod) != QosClass::Guaranteed {
        return Ok(None);
    }
    let spec = pod.spec.as_ref();
    let mut init = Request::new();
    let mut sidecars = Request::new();
    let inits = spec.and_then(|s| s.init_containers.as_ref());
    for c in inits.into_iter().flatten() {
        for (r, v) in requests_of(c)? {
            let running = sidecars.get(&r).copied().unwrap_or(0);
            let peak = init.entry(r.clone()).or_insert(0);
            if crate::pod::is_restartable_init(c) {
                sidecars.insert(r, running.saturating_add(v));
            } else if running.saturating_add(v) > *peak {
                *peak = running.saturating_add(v);
            }
        }
    }
    let mut app = Request::new();
    for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        for (r, v) in requests_of(c)? {
            let e = app.entry(r).or_insert(0);
            *e = e.saturating_add(v);
        }
    }
    for (r, v) in app.iter_mut() {
        *v = v.saturating_add(sidecars.get(r).copied().unwrap_or(0));
        *v = (*v).max(init.get(r).copied().unwrap_or(0));
    }
    Ok(Some(app))
}

/// Every set of NUMA nodes that could hold `request` (Go's `calculateHints`): enough
/// allocatable memory in total; a single node not part of a multi-node group; a group
/// only if its nodes are unused or used by exactly this group; enough free memory
/// (counting what the pod's init containers hold there). Preferred: the smallest sets
/// whose allocatable memory suffices. Empty when nothing fits.
pub fn calculate_hints(
    machine: &MachineState,
    request: &Request,
    reusable: Option<&Reusable>,
) -> MemoryHints {
    let nodes: Vec<u32> = machine.keys().copied().collect();
    let mut min_size = nodes.len();
    let mut fitting: Vec<NumaMask> = Vec::new();
    let table = |n: u32, r: &str| machine.get(&n).and_then(|s| s.memory_map.get(r));
    'masks: for mask in NumaMask::subsets(&nodes) {
        let bits = mask.nodes();
        let sum = |r: &str, f: fn(&super::state::MemoryTable) -> u64| -> u64 {
            bits.iter()
                .filter_map(|n| table(*n, r))
                .fold(0u64, |acc, t| acc.saturating_add(f(t)))
        };
        if request
            .iter()
            .any(|(r, want)| sum(r, |t| t.allocatable) < *want)
        {
            continue;
        }
        min_size = min_size.min(bits.len());
        let single = bits.len() == 1;
        if single && machine.get(&bits[0]).is_some_and(|s| s.cells.len() > 1) {
            continue;
        }
        if !single {
            for n in &bits {
                let Some(s) = machine.get(n) else {
                    continue 'masks;
                };
                if s.number_of_assignments > 0 {
                    let mut cells = s.cells.clone();
                    cells.sort_unstable();
                    if cells.len() == 1 || cells != bits {
                        continue 'masks;
                    }
                }
            }
        }
        for (r, want) in request {
            let reuse = reusable
                .and_then(|m| m.get(&mask))
                .and_then(|m| m.get(r))
                .copied()
                .unwrap_or(0);
            if sum(r, |t| t.free).saturating_add(reuse) < *want {
                continue 'masks;
            }
        }
        fitting.push(mask);
    }
    request
        .keys()
        .filter(|_| !fitting.is_empty())
        .map(|r| {
            let hints = fitting
                .iter()
                .map(|m| TopologyHint {
                    affinity: Some(*m),
                    preferred: usize::try_from(m.count()).unwrap_or(usize::MAX) == min_size,
                })
                .collect();
            (r.clone(), hints)
        })
        .collect()
}

/// The hints of a container that already has its blocks (Go's `regenerateHints`): each
/// block's nodes, preferred; `None` when the blocks no longer match the request.
pub fn regenerate_hints(blocks: &[Block], request: &Request) -> Option<MemoryHints> {
    if blocks.len() != request.len() {
        return None;
    }
    let mut out = MemoryHints::new();
    for b in blocks {
        if request.get(&b.resource) != Some(&b.size) || b.numa_affinity.is_empty() {
            return None;
        }
        out.insert(
            b.resource.clone(),
            vec![TopologyHint::on(&b.numa_affinity, true)],
        );
    }
    Some(out)
}

/// The best of `hints` (Go's `findBestHint`): preferred over not, then the narrowest.
pub fn best_hint(hints: &[TopologyHint]) -> Option<TopologyHint> {
    let mut best = *hints.first()?;
    for h in &hints[1..] {
        let narrower = match (h.affinity, best.affinity) {
            (Some(a), Some(b)) => a.is_narrower_than(b),
            _ => false,
        };
        if (h.preferred && !best.preferred) || (h.preferred == best.preferred && narrower) {
            best = *h;
        }
    }
    Some(best)
}
