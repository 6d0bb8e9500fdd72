//! The CPU manager (Go's `cpumanager.Manager`): the policy, its state and the state file,
//! and what the engine asks of them.
//!
//! # Lifecycle
//! - **Built** by the kubelet builder from [`CpuManagerConfig`], the machine's topology and
//!   the node's CPU reservation; a `static` policy without a reservation, or with a
//!   `reservedSystemCPUs` the machine lacks, fails the build.
//! - **Started** once by `Kubelet::run` before any pod is admitted: the state file
//!   (`<root-dir>/cpu_manager_state`) is read, or written fresh when missing. A file of the
//!   other policy, a corrupt one, or (static) one that does not fit the machine or the
//!   reservation stops the kubelet with Go's message: drain the node and delete the file.
//! - **Admission** (by the sync loop, one pod at a time, once every admission handler
//!   admitted it): once every pod source has been seen, the assignments of pods no longer
//!   active are released first ([`release_stale`](CpuManager::release_stale), Go's
//!   `removeStaleState`, which also waits for the sources: before that a restarted kubelet
//!   does not know every pod yet); then the topology manager has every init and app
//!   container of the pod allocated in order (this manager is its `cpu`
//!   [`HintProvider`]). A pod that cannot get its CPUs is rejected
//!   (`UnexpectedAdmissionError`, Go's message).
//! - **Container creation**: the pod worker persists the state
//!   ([`persist`](CpuManager::persist)) and creates the container with
//!   [`container_cpus`](CpuManager::container_cpus): its exclusive CPUs, or the shared
//!   pool as it is at that moment.
//! - **Reconcile** (every `cpuManagerReconcilePeriod`, the engine's task): stale assignments
//!   released, and every running container of an active pod whose CPUs differ from what was
//!   last applied to it is updated through the runtime
//!   ([`reconcile_plan`](CpuManager::reconcile_plan), then
//!   [`applied`](CpuManager::applied)). Go re-applies every container every period; here a
//!   container is updated when its set changes or it was not updated yet by this kubelet
//!   (a restart re-applies every container once).
//!
//! The `none` policy keeps a state file too (Go writes `{"policyName":"none",...}`), and
//! does nothing else.
//!
//! One `std` mutex guards the policy and state, never held across an `.await`; file writes
//! are serialised by a tokio mutex and skip states already written.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::checkpoint::{CheckpointError, CpuManagerCheckpoint, STATE_FILE};
use super::cpuset::CpuSet;
use super::policy::{PolicyError, StaticPolicy, StaticPolicyOptions};
use super::topology::CpuTopology;
use crate::checkpoint_file::{ReadError, StateFile};
use crate::pod;
use crate::runtime::{ContainerState, ContainerSummary};
use crate::topologymanager::{AllocateError, HintProvider, ProviderHints, TopologyHint};

/// `cpuManagerPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CpuManagerPolicy {
    /// No exclusive CPUs (the default).
    #[default]
    None,
    /// Exclusive CPUs for Guaranteed containers with whole CPU requests.
    Static,
}

impl CpuManagerPolicy {
    /// Parses `none` / `static` (Go: anything else is `unknown policy: "<name>"`).
    pub fn parse(name: &str) -> Result<CpuManagerPolicy, CpuManagerError> {
        match name {
            "none" | "" => Ok(CpuManagerPolicy::None),
            "static" => Ok(CpuManagerPolicy::Static),
            other => Err(CpuManagerError::UnknownPolicy(other.to_string())),
        }
    }

    /// The name in the state file.
    pub fn as_str(self) -> &'static str {
        match self {
            CpuManagerPolicy::None => "none",
            CpuManagerPolicy::Static => "static",
        }
    }
}

/// The CPU manager's part of the kubelet configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuManagerConfig {
    /// `cpuManagerPolicy`.
    pub policy: CpuManagerPolicy,
    /// `cpuManagerReconcilePeriod` (Go's default 10 s).
    pub reconcile_period: Duration,
    /// `reservedSystemCPUs`: the reserved CPUs themselves (else counted from the node's
    /// cpu reservation and taken by topology).
    pub reserved_system_cpus: Option<CpuSet>,
    /// `cpuManagerPolicyOptions` the static policy honours.
    pub policy_options: StaticPolicyOptions,
}

impl Default for CpuManagerConfig {
    fn default() -> Self {
        CpuManagerConfig {
            policy: CpuManagerPolicy::None,
            reconcile_period: Duration::from_secs(10),
            reserved_system_cpus: None,
            policy_options: StaticPolicyOptions::default(),
        }
    }
}

/// Why the CPU manager cannot be built or started, or its state not written.
#[derive(Debug, thiserror::Error)]
pub enum CpuManagerError {
    /// `cpuManagerPolicy` is neither `none` nor `static`.
    #[error("unknown policy: \"{0}\"")]
    UnknownPolicy(String),
    /// The static policy cannot start (reservation, or a state that does not fit).
    #[error("static policy: {0}")]
    Policy(#[from] PolicyError),
    /// The state file cannot be used (Go's message).
    #[error("could not restore state from checkpoint: {source}, please drain this node and delete the CPU manager checkpoint file {path:?} before restarting Kubelet")]
    Restore {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<CheckpointError>,
    },
    /// Reading or writing the state file failed.
    #[error("{action} the CPU manager checkpoint file {path:?}: {source}")]
    Io {
        /// `reading` / `writing`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the mutex guards.
#[derive(Debug)]
struct Inner {
    policy: Option<StaticPolicy>,
    state: CpuManagerCheckpoint,
    /// Bumped on every change of `state`.
    generation: u64,
    /// Container id → the CPUs last applied to it by reconcile.
    applied: HashMap<String, CpuSet>,
}

/// The CPU manager. See the module docs.
#[derive(Debug)]
pub struct CpuManager {
    config: CpuManagerConfig,
    /// `<root-dir>/cpu_manager_state`; `None` without a root dir (no files at all).
    state_file: StateFile,
    inner: Mutex<Inner>,
}

impl CpuManager {
    /// Builds the manager (Go's `NewManager`): `reserved_cpu_milli` is the node's cpu
    /// reservation (kube- + system-reserved), `root_dir` where the state file lives.
    pub fn new(
        config: CpuManagerConfig,
        topology: CpuTopology,
        reserved_cpu_milli: i64,
        root_dir: &Path,
    ) -> Result<CpuManager, CpuManagerError> {
        let policy = match config.policy {
            CpuManagerPolicy::None => None,
            CpuManagerPolicy::Static => {
                let count = usize::try_from((reserved_cpu_milli.max(0) + 999) / 1000).unwrap_or(0);
                Some(
                    StaticPolicy::new(topology, count, config.reserved_system_cpus.clone())?
                        .with_options(config.policy_options),
                )
            }
        };
        Ok(CpuManager::with_policy(config, policy, root_dir))
    }

    /// A manager of the `none` policy (what the engine has until the builder sets one up).
    pub fn none(root_dir: &Path) -> CpuManager {
        CpuManager::with_policy(CpuManagerConfig::default(), None, root_dir)
    }

    fn with_policy(
        config: CpuManagerConfig,
        policy: Option<StaticPolicy>,
        root_dir: &Path,
    ) -> CpuManager {
        CpuManager {
            state_file: StateFile::new(state_file(root_dir)),
            inner: Mutex::new(Inner {
                policy,
                state: CpuManagerCheckpoint {
                    policy_name: config.policy.as_str().to_string(),
                    ..Default::default()
                },
                generation: 0,
                applied: HashMap::new(),
            }),
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CpuManagerConfig {
        &self.config
    }

    /// The state file's path (`None` without a root dir).
    pub fn state_file(&self) -> Option<&Path> {
        self.state_file.path()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Restores the state from the state file (or starts empty without one), checks it
    /// against the policy, and writes it. See the module docs.
    pub async fn start(&self) -> Result<(), CpuManagerError> {
        let policy_name = self.config.policy.as_str();
        let restored = self
            .state_file
            .read(|bytes| CpuManagerCheckpoint::from_json(bytes, policy_name))
            .await
            .map_err(|e| match e {
                ReadError::Io(source) => CpuManagerError::Io {
                    action: "reading",
                    path: self.state_file.display_path(),
                    source,
                },
                ReadError::Parse(source) => CpuManagerError::Restore {
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
            tracing::info!(policy = policy_name, shared = %inner.state.default_cpu_set, assignments = inner.state.entries.len(), "cpu manager started");
        }
        self.persist().await
    }

    /// Releases the assignments of pods not in `active` but `pod` (Go's `removeStaleState`
    /// before an allocation); `None`: the active pods are not known yet (the sources are not
    /// all seen), nothing is released.
    pub fn release_stale(&self, pod: &Pod, active: Option<&[Arc<Pod>]>) {
        let Some(active) = active else {
            return;
        };
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(policy) = inner.policy.as_ref() else {
            return;
        };
        let mut keep = pod::container_names_by_uid(active.iter().map(|p| &**p));
        keep.extend(pod::container_names_by_uid(std::iter::once(pod)));
        if release_stale(policy, &mut inner.state, &keep) {
            inner.generation += 1;
        }
    }

    /// The CPUs a container of pod `uid` is created with: its exclusive set, else the
    /// shared pool (`None` under the `none` policy).
    pub fn container_cpus(&self, uid: &str, container: &str) -> Option<CpuSet> {
        let inner = self.lock();
        inner.policy.as_ref()?;
        let cpus = inner.state.cpus_or_default(uid, container);
        (!cpus.is_empty()).then(|| cpus.clone())
    }

    /// The CPUs this manager may hand out to containers (Go's `GetAllocatableCPUs`): under
    /// the `static` policy every CPU of the machine but the reserved ones, under `none` no
    /// CPU at all (it assigns nothing). What the pod resources API's
    /// `GetAllocatableResources` lists.
    pub fn allocatable_cpus(&self) -> CpuSet {
        let inner = self.lock();
        match inner.policy.as_ref() {
            Some(policy) => policy.topology().cpus().difference(policy.reserved()),
            None => CpuSet::new(),
        }
    }

    /// The current state (what the state file holds once persisted).
    pub fn state(&self) -> CpuManagerCheckpoint {
        self.lock().state.clone()
    }

    /// Writes the state file if the state changed since it was last written.
    pub async fn persist(&self) -> Result<(), CpuManagerError> {
        let snapshot = |written: Option<u64>| {
            let inner = self.lock();
            (written != Some(inner.generation)).then(|| (inner.generation, inner.state.clone()))
        };
        self.state_file
            .write_if_newer(snapshot, CpuManagerCheckpoint::to_json)
            .await
            .map_err(|source| CpuManagerError::Io {
                action: "writing",
                path: self.state_file.display_path(),
                source,
            })
    }

    /// The containers whose CPUs are to be updated: every running container of an active
    /// pod (from the runtime's `listed` containers) whose set differs from what reconcile
    /// last applied. Releases stale assignments first when `sources_ready`. Empty under the
    /// `none` policy.
    pub fn reconcile_plan(
        &self,
        active: &[Arc<Pod>],
        sources_ready: bool,
        listed: &[ContainerSummary],
    ) -> Vec<(String, CpuSet)> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let Some(policy) = inner.policy.as_ref() else {
            return Vec::new();
        };
        let keep = pod::container_names_by_uid(active.iter().map(|p| &**p));
        if sources_ready && release_stale(policy, &mut inner.state, &keep) {
            inner.generation += 1;
        }
        let live: HashSet<&str> = listed.iter().map(|c| c.id.as_str()).collect();
        inner.applied.retain(|id, _| live.contains(id.as_str()));
        let mut plan = Vec::new();
        for c in listed {
            if c.state != ContainerState::Running
                || !keep
                    .get(c.pod.uid.as_str())
                    .is_some_and(|names| names.contains(c.name.as_str()))
            {
                continue;
            }
            let want = inner.state.cpus_or_default(&c.pod.uid, &c.name);
            if want.is_empty() || inner.applied.get(&c.id) == Some(want) {
                continue;
            }
            plan.push((c.id.clone(), want.clone()));
        }
        plan
    }

    /// Records that reconcile set `container_id`'s CPUs to `cpus`.
    pub fn applied(&self, container_id: &str, cpus: CpuSet) {
        self.lock().applied.insert(container_id.to_string(), cpus);
    }
}

fn state_file(root_dir: &Path) -> Option<PathBuf> {
    (!root_dir.as_os_str().is_empty()).then(|| root_dir.join(STATE_FILE))
}

/// The CPU manager is the topology manager's `cpu` hint provider (Go's `GetTopologyHints`,
/// `GetPodTopologyHints`, `Allocate`); under the `none` policy it has no preference and
/// allocates nothing.
impl HintProvider for CpuManager {
    fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let inner = self.lock();
        let hints = inner
            .policy
            .as_ref()
            .and_then(|p| p.container_hints(&inner.state, pod, container));
        cpu_hints(hints)
    }

    fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        let inner = self.lock();
        let hints = inner
            .policy
            .as_ref()
            .and_then(|p| p.pod_hints(&inner.state, pod));
        cpu_hints(hints)
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
        let before = inner.state.clone();
        let nodes = affinity.affinity.map(|m| m.nodes());
        let result = policy.allocate(&mut inner.state, pod, container, nodes.as_deref());
        if inner.state != before {
            inner.generation += 1;
        }
        result.map_err(|e| {
            tracing::warn!(pod = %pod::full_name(pod), uid = pod::uid(pod), container = %container.name, error = %e, "cpu manager: allocation failed");
            match e {
                PolicyError::SmtAlignment { .. } => AllocateError::Admission {
                    reason: "SMTAlignmentError".into(),
                    message: e.to_string(),
                },
                e => AllocateError::Unexpected(e.to_string()),
            }
        })
    }
}

fn cpu_hints(hints: Option<Vec<TopologyHint>>) -> ProviderHints {
    hints
        .map(|h| [("cpu".to_string(), Some(h))].into_iter().collect())
        .unwrap_or_default()
}

/// Releases the assignments of containers not in `keep` (Go's `removeStaleState`); true if
/// any was released.
fn release_stale(
    policy: &StaticPolicy,
    state: &mut CpuManagerCheckpoint,
    keep: &HashMap<&str, HashSet<&str>>,
) -> bool {
    let stale = pod::stale_entries(&state.entries, keep);
    for (uid, c) in &stale {
        tracing::info!(
            uid,
            container = c,
            "cpu manager: releasing the CPUs of a container no longer active"
        );
        policy.remove_container(state, uid, c);
    }
    !stale.is_empty()
}

/// The stale-state bookkeeping's view for tests: pod uid → container → CPUs.
#[cfg(test)]
pub(crate) fn entries(
    m: &CpuManager,
) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>> {
    m.state()
        .entries
        .into_iter()
        .map(|(uid, cs)| {
            (
                uid,
                cs.into_iter().map(|(c, s)| (c, s.to_string())).collect(),
            )
        })
        .collect()
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
