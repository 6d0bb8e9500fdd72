//! The memory manager (Go's `memorymanager.Manager`): the policy, its state and the state
//! file, and what the engine asks of them.
//!
//! # Lifecycle
//! - **Built** by the kubelet builder from [`MemoryManagerConfig`], the machine's NUMA nodes
//!   and node allocatable's reservation; `Static` without reserved memory, with a node the
//!   machine lacks, or with a `reservedMemory` that does not add up to the reservation fails
//!   the build (Go's messages).
//! - **Started** once by `Kubelet::run` before any pod is admitted: the state file
//!   (`<root-dir>/memory_manager_state`) is read, or written fresh when missing. A file of
//!   the other policy, a corrupt one, or (static) one that does not add up to this machine
//!   and reservation stops the kubelet with Go's message: drain the node, delete the file.
//! - **Admission** (the sync loop, one pod at a time, after every admission handler): the
//!   blocks of containers of pods no longer active are released first
//!   ([`release_stale`](MemoryManager::release_stale), once every source was seen); then
//!   the topology manager asks this manager (its `memory` [`HintProvider`]) for hints and
//!   has every init and app container allocated in order. A failed allocation rejects the
//!   pod (`UnexpectedAdmissionError`).
//! - **Container creation**: the pod worker persists the state and creates the container
//!   with [`container_numa_nodes`](MemoryManager::container_numa_nodes) as its
//!   `cpuset.mems`; starting any container releases the blocks of the regular init
//!   containers before it ([`container_started`](MemoryManager::container_started), Go's
//!   `AddContainer`). Memory of stopped containers comes back lazily, at the next
//!   admission, as in Go. The state is written after each admission and release, and before
//!   a container is created (Go writes on every change; the start also rewrites a valid
//!   file, which Go does not).
//!
//! Under `None` the state file holds `{"policyName":"None","machineState":{}}` and nothing
//! else happens. One `std` mutex guards the policy and state, never held across an
//! `.await`; file writes are serialised and skip states already written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::checkpoint::{CheckpointError, STATE_FILE};
use super::hints::MemoryHints;
use super::policy::{PolicyError, ReservedMemory, StaticPolicy};
use super::state::{Block, MemoryManagerState};
use crate::checkpoint_file::{ReadError, StateFile};
use crate::pod;
use crate::stats::NumaMemory;
use crate::topologymanager::{AllocateError, HintProvider, ProviderHints, TopologyHint};

/// `memoryManagerPolicy` (Go's names, case-sensitive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MemoryManagerPolicy {
    /// Nothing pinned (the default).
    #[default]
    None,
    /// Guaranteed pods' memory pinned to NUMA nodes.
    Static,
}

impl MemoryManagerPolicy {
    /// Parses `None` / `Static` (Go: anything else, `static` too, is `unknown policy`).
    pub fn parse(name: &str) -> Result<MemoryManagerPolicy, MemoryManagerError> {
        match name {
            "None" | "" => Ok(MemoryManagerPolicy::None),
            "Static" => Ok(MemoryManagerPolicy::Static),
            other => Err(MemoryManagerError::UnknownPolicy(other.to_string())),
        }
    }

    /// The name in the state file.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryManagerPolicy::None => "None",
            MemoryManagerPolicy::Static => "Static",
        }
    }
}

/// The memory manager's part of the kubelet configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryManagerConfig {
    /// `memoryManagerPolicy`.
    pub policy: MemoryManagerPolicy,
    /// `reservedMemory`: NUMA node → resource → bytes.
    pub reserved_memory: ReservedMemory,
}

/// Why the memory manager cannot be built or started, or its state not written.
#[derive(Debug, thiserror::Error)]
pub enum MemoryManagerError {
    /// `memoryManagerPolicy` is neither `None` nor `Static`.
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    /// `reservedMemory` names a node the machine lacks (Go's message).
    #[error("the reserved memory configuration references a NUMA node {0} that does not exist on this machine")]
    UnknownNode(u32),
    /// `reservedMemory` does not add up to the node's allocatable reservation
    /// (kube-reserved + system-reserved + the hard eviction threshold; Go's message).
    #[error("the total amount {total:?} of type {resource:?} is not equal to the value {reservation:?} determined by Node Allocatable feature")]
    ReservationMismatch {
        /// The resource.
        resource: String,
        /// What `reservedMemory` adds up to.
        total: String,
        /// What node allocatable reserves.
        reservation: String,
    },
    /// The static policy cannot start.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The state file cannot be used (Go's message).
    #[error("could not restore state from checkpoint: {source}, please drain this node and delete the memory manager checkpoint file {path:?} before restarting Kubelet")]
    Restore {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<CheckpointError>,
    },
    /// Reading or writing the state file failed.
    #[error("{action} the memory manager checkpoint file {path:?}: {source}")]
    Io {
        /// `reading` / `writing`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

#[derive(Debug)]
struct Inner {
    policy: Option<StaticPolicy>,
    state: MemoryManagerState,
    generation: u64,
}

/// The memory manager. See the module docs.
#[derive(Debug)]
pub struct MemoryManager {
    config: MemoryManagerConfig,
    state_file: StateFile,
    inner: Mutex<Inner>,
}

impl MemoryManager {
    /// Builds the manager (Go's `NewManager`) for a machine whose NUMA nodes' memory is
    /// `machine`; `reservation` is what node allocatable reserves of `memory` and huge
    /// pages (bytes), which `Static`'s `reservedMemory` must add up to; the state file
    /// lives in `root_dir`.
    pub fn new(
        config: MemoryManagerConfig,
        machine: Vec<NumaMemory>,
        reservation: &BTreeMap<String, u64>,
        root_dir: &Path,
    ) -> Result<MemoryManager, MemoryManagerError> {
        let policy = match config.policy {
            MemoryManagerPolicy::None => None,
            MemoryManagerPolicy::Static => {
                if let Some(n) = config
                    .reserved_memory
                    .keys()
                    .find(|n| !machine.iter().any(|m| m.node == **n))
                {
                    return Err(MemoryManagerError::UnknownNode(*n));
                }
                check_reservation(&config.reserved_memory, reservation)?;
                Some(StaticPolicy::new(machine, config.reserved_memory.clone())?)
            }
        };
        Ok(MemoryManager::with_policy(config, policy, root_dir))
    }

    /// A manager of the `None` policy.
    pub fn none(root_dir: &Path) -> MemoryManager {
        MemoryManager::with_policy(MemoryManagerConfig::default(), None, root_dir)
    }

    fn with_policy(
        config: MemoryManagerConfig,
        policy: Option<StaticPolicy>,
        root_dir: &Path,
    ) -> MemoryManager {
        MemoryManager {
            state_file: StateFile::new(
                (!root_dir.as_os_str().is_empty()).then(|| root_dir.join(STATE_FILE)),
            ),
            inner: Mutex::new(Inner {
                policy,
                state: MemoryManagerState {
                    policy_name: config.policy.as_str().to_string(),
                    ..Default::default()
                },
                generation: 0,
            }),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryManagerConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Restores the state from the state file (or starts empty), checks it against the
    /// machine, and writes it. See the module docs.
    pub async fn start(&self) -> Result<(), MemoryManagerError> {
        let policy_name = self.config.policy.as_str();
        let restored = self
            .state_file
            .read(|bytes| MemoryManagerState::from_json(bytes, policy_name))
            .await
            .map_err(|e| match e {
                ReadError::Io(source) => MemoryManagerError::Io {
                    action: "reading",
                    path: self.state_file.display_path(),
                    source,
                },
                ReadError::Parse(source) => MemoryManagerError::Restore {
                    path: self.state_file.display_path(),
                    source: Box::new(source),
                },
            })?;
        {
            let mut inner = self.lock();
            let inner = &mut *inner;
            if let Some(state) = restored {
                inner.state = state;
            }
            if let Some(policy) = &inner.policy {
                policy.start(&mut inner.state)?;
            }
            inner.generation += 1;
            tracing::info!(
                policy = policy_name,
                nodes = inner.state.machine_state.len(),
                pods = inner.state.entries.len(),
                "memory manager started"
            );
        }
        self.persist().await
    }

    /// Releases the blocks of containers not of `active` or `pod` (Go's
    /// `removeStaleState`); `None`: the active pods are not known yet, nothing released.
    pub fn release_stale(&self, pod: &Pod, active: Option<&[Arc<Pod>]>) {
        let Some(active) = active else {
            return;
        };
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(policy) = inner.policy.as_ref() else {
            return;
        };
        let keep = pod::container_names_by_uid(active.iter().map(|p| &**p).chain([pod]));
        let stale = pod::stale_entries(&inner.state.entries, &keep);
        for (uid, c) in &stale {
            tracing::info!(
                uid,
                container = c,
                "memory manager: releasing the memory of a container no longer active"
            );
            policy.remove_container(&mut inner.state, uid, c);
        }
        if !stale.is_empty() {
            inner.generation += 1;
        }
    }

    /// A container of `pod` was started: the init containers before it give their blocks
    /// back, but sidecars, which keep running (Go's `AddContainer`).
    pub fn container_started(&self, pod: &Pod, container: &str) {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(policy) = inner.policy.as_ref() else {
            return;
        };
        let inits = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .into_iter()
            .flatten()
            .take_while(|c| c.name != container)
            .filter(|c| !pod::is_restartable_init(c))
            .map(|c| c.name.as_str());
        let uid = pod::uid(pod);
        let mut changed = false;
        for init in inits {
            if inner.state.blocks(uid, init).is_some() {
                policy.remove_container(&mut inner.state, uid, init);
                changed = true;
            }
        }
        if changed {
            inner.generation += 1;
        }
    }

    /// The NUMA nodes a container's memory is pinned to, as its `cpuset.mems` (Go's
    /// `GetMemoryNUMANodes`, joined by commas as Go's `PreCreateContainer`); `None`
    /// without blocks.
    pub fn container_numa_nodes(&self, uid: &str, container: &str) -> Option<String> {
        let inner = self.lock();
        let nodes: std::collections::BTreeSet<u32> = inner
            .state
            .blocks(uid, container)?
            .iter()
            .flat_map(|b| b.numa_affinity.iter().copied())
            .collect();
        (!nodes.is_empty()).then(|| {
            nodes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// A container's blocks (the pod resources API's `memory`).
    pub fn container_memory(&self, uid: &str, container: &str) -> Vec<Block> {
        self.lock()
            .state
            .blocks(uid, container)
            .cloned()
            .unwrap_or_default()
    }

    /// What containers may get (Go's `GetAllocatableMemory`); empty under `None`.
    pub fn allocatable_memory(&self) -> Vec<Block> {
        let inner = self.lock();
        if inner.policy.is_none() {
            return Vec::new();
        }
        StaticPolicy::allocatable_memory(&inner.state)
    }

    /// The current state.
    pub fn state(&self) -> MemoryManagerState {
        self.lock().state.clone()
    }

    /// Writes the state file if the state changed since it was last written.
    pub async fn persist(&self) -> Result<(), MemoryManagerError> {
        let snapshot = |written: Option<u64>| {
            let inner = self.lock();
            (written != Some(inner.generation)).then(|| (inner.generation, inner.state.clone()))
        };
        self.state_file
            .write_if_newer(snapshot, MemoryManagerState::to_json)
            .await
            .map_err(|source| MemoryManagerError::Io {
                action: "writing",
                path: self.state_file.display_path(),
                source,
            })
    }
}

/// What node allocatable reserves of `memory` and each huge page size (Go's
/// `GetNodeAllocatableReservation`: kube-reserved + system-reserved + the hard eviction
/// threshold), from the node's capacity and allocatable. Allocatable memory also lacks the
/// huge page pools (as Go's node status reports it), which Go's reservation does not count:
/// they are added back.
pub fn node_allocatable_reservation(
    capacity: &crate::cm::ResourceList,
    allocatable: &crate::cm::ResourceList,
) -> BTreeMap<String, u64> {
    let amount = |list: &crate::cm::ResourceList, name: &str| {
        crate::resources::amount(list, name).unwrap_or(0)
    };
    let hugepages: i64 = capacity
        .keys()
        .filter(|r| r.starts_with("hugepages-"))
        .map(|r| amount(capacity, r))
        .fold(0, i64::saturating_add);
    capacity
        .keys()
        .filter(|r| super::hints::is_memory_resource(r))
        .filter_map(|name| {
            let mut reserved = amount(capacity, name).saturating_sub(amount(allocatable, name));
            if name == super::state::MEMORY {
                reserved = reserved.saturating_sub(hugepages);
            }
            let reserved = u64::try_from(reserved).ok().filter(|r| *r > 0)?;
            Some((name.clone(), reserved))
        })
        .collect()
}

/// Go's `validateReservedMemory`: per resource, `reservedMemory` over every node equals
/// node allocatable's reservation.
fn check_reservation(
    reserved: &ReservedMemory,
    reservation: &BTreeMap<String, u64>,
) -> Result<(), MemoryManagerError> {
    let mut totals: BTreeMap<&str, u64> = reservation
        .keys()
        .filter(|r| super::hints::is_memory_resource(r))
        .map(|r| (r.as_str(), 0))
        .collect();
    for per_node in reserved.values() {
        for (r, v) in per_node {
            let t = totals.entry(r.as_str()).or_insert(0);
            *t = t.saturating_add(*v);
        }
    }
    for (resource, total) in totals {
        let want = reservation.get(resource).copied().unwrap_or(0);
        if total != want {
            return Err(MemoryManagerError::ReservationMismatch {
                resource: resource.to_string(),
                total: binary_quantity(total),
                reservation: binary_quantity(want),
            });
        }
    }
    Ok(())
}

/// Bytes as a binary quantity (`100Mi`), as the operator wrote them.
fn binary_quantity(bytes: u64) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (mut m, mut i) = (bytes, 0);
    while m != 0 && i < SUFFIXES.len() - 1 && m % 1024 == 0 {
        m /= 1024;
        i += 1;
    }
    format!("{m}{}", SUFFIXES[i])
}

/// The memory manager is the topology manager's `memory` hint provider.
impl HintProvider for MemoryManager {
    fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let inner = self.lock();
        let Some(policy) = inner.policy.as_ref() else {
            return ProviderHints::new();
        };
        provider_hints(pod, policy.container_hints(&inner.state, pod, container))
    }

    fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        let inner = self.lock();
        let Some(policy) = inner.policy.as_ref() else {
            return ProviderHints::new();
        };
        provider_hints(pod, policy.pod_hints(&inner.state, pod))
    }

    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(policy) = inner.policy.as_mut() else {
            return Ok(());
        };
        let before = inner.state.entries.clone();
        let result = policy.allocate(&mut inner.state, pod, container, affinity);
        if inner.state.entries != before {
            inner.generation += 1;
        }
        result.map_err(|e| {
            tracing::warn!(pod = %pod::full_name(pod), uid = pod::uid(pod), container = %container.name, error = %e, "memory manager: allocation failed");
            AllocateError::Unexpected(e.to_string())
        })
    }
}

fn provider_hints(pod: &Pod, hints: Result<Option<MemoryHints>, PolicyError>) -> ProviderHints {
    match hints {
        Ok(Some(h)) => h
            .into_iter()
            .map(|(r, v)| (r, Some(v)))
            .collect::<BTreeMap<_, _>>(),
        Ok(None) => ProviderHints::new(),
        Err(e) => {
            tracing::warn!(pod = %pod::full_name(pod), uid = pod::uid(pod), error = %e, "memory manager: no topology hints");
            ProviderHints::new()
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
