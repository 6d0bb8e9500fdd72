//! The device manager: the [`DeviceState`] under a mutex, the plugin calls and checkpoint
//! writes around it, and its part in admission, container start and the node status.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::checkpoint::{CheckpointError, DeviceCheckpoint, CHECKPOINT_FILE};
use super::state::{DeviceRunOptions, DeviceState, Endpoint};
use crate::checkpoint_file::{ReadError, StateFile};
use crate::cm::ResourceList;
use crate::devices::DevicePluginEvent;
use crate::pod;
use crate::topologymanager::{AllocateError, HintProvider, ProviderHints, TopologyHint};

/// How often a resource whose plugin went away is checked against its grace period.
const EXPIRY_CHECK: Duration = Duration::from_secs(30);

/// Why the device manager could not read or write its checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum DeviceManagerError {
    /// Reading or writing the file failed.
    #[error("{action} the device manager checkpoint {path}: {source}")]
    Io {
        /// `reading` or `writing`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a checkpoint this kubelet can use.
    #[error("the device manager checkpoint {path}: {source}")]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// Why.
        source: CheckpointError,
    },
}

/// The device manager. See the module docs.
#[derive(Debug)]
pub struct DeviceManager {
    state: Mutex<Inner>,
    checkpoint: StateFile,
}

#[derive(Debug)]
struct Inner {
    state: DeviceState,
    /// Moves on with every change of what the checkpoint holds.
    generation: u64,
}

impl DeviceManager {
    /// A manager whose checkpoint lives in `plugin_dir` (`<root-dir>/device-plugins`; `None`:
    /// no checkpoint) on a machine with these NUMA nodes.
    pub fn new(plugin_dir: Option<&Path>, numa_nodes: Vec<u32>) -> DeviceManager {
        DeviceManager {
            state: Mutex::new(Inner {
                state: DeviceState::new(numa_nodes),
                generation: 0,
            }),
            // Generation 0, the empty state, needs no file.
            checkpoint: StateFile::new(plugin_dir.map(|d| d.join(CHECKPOINT_FILE))).written_at(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(inner: &mut Inner) {
        inner.generation += 1;
    }

    /// Restores the checkpoint (Go's `readCheckpoint`): allocations come back, registered
    /// resources come back at capacity 0 until their plugins register again. A checkpoint
    /// that cannot be read is logged and left (Go continues the same way).
    pub async fn start(&self) {
        let restored = self
            .checkpoint
            .read(DeviceCheckpoint::from_json)
            .await
            .map_err(|e| match e {
                ReadError::Io(source) => DeviceManagerError::Io {
                    action: "reading",
                    path: self.checkpoint.display_path(),
                    source,
                },
                ReadError::Parse(source) => DeviceManagerError::Checkpoint {
                    path: self.checkpoint.display_path(),
                    source,
                },
            });
        match restored {
            Ok(None) => {}
            Ok(Some(cp)) => {
                let mut inner = self.lock();
                inner.state.restore(cp, Instant::now());
            }
            Err(e) => {
                tracing::warn!(error = %e, "device manager: continuing without the checkpoint; device allocations may not be up to date")
            }
        }
    }

    /// Applies what the registry reports.
    pub fn apply(&self, event: DevicePluginEvent) {
        let mut inner = self.lock();
        let changed = match event {
            DevicePluginEvent::Registered {
                resource,
                endpoint,
                options,
                plugin,
            } => {
                tracing::info!(%resource, endpoint, ?options, "device manager: plugin registered");
                inner.state.registered(
                    &resource,
                    Endpoint {
                        id: endpoint,
                        options,
                        plugin,
                    },
                );
                true
            }
            DevicePluginEvent::Devices {
                resource,
                endpoint,
                devices,
            } => {
                let healthy = devices.iter().filter(|d| d.healthy).count();
                let total = devices.len();
                let applied = inner.state.devices_listed(&resource, endpoint, devices);
                tracing::info!(%resource, endpoint, healthy, total, applied, "device manager: devices listed");
                applied
            }
            DevicePluginEvent::Stopped { resource, endpoint } => {
                let applied = inner
                    .state
                    .endpoint_stopped(&resource, endpoint, Instant::now());
                tracing::info!(%resource, endpoint, applied, "device manager: plugin endpoint stopped, its devices are unhealthy");
                applied
            }
        };
        if changed {
            Self::changed(&mut inner);
        }
    }

    /// Applies the registry's events and removes resources whose grace period is over,
    /// writing the checkpoint after each change, until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        mut events: mpsc::Receiver<DevicePluginEvent>,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(EXPIRY_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                e = events.recv() => match e {
                    Some(e) => self.apply(e),
                    None => return,
                },
                _ = tick.tick() => self.expire(),
            }
            if let Err(e) = self.persist().await {
                tracing::warn!(error = %e, "device manager: writing the checkpoint failed");
            }
        }
    }

    fn expire(&self) {
        let mut inner = self.lock();
        if inner.state.expire(Instant::now()) {
            Self::changed(&mut inner);
        }
    }

    /// Writes the checkpoint when it changed since the last write.
    pub async fn persist(&self) -> Result<(), DeviceManagerError> {
        let snapshot = |written: Option<u64>| {
            let inner = self.lock();
            (written != Some(inner.generation))
                .then(|| (inner.generation, inner.state.to_checkpoint()))
        };
        self.checkpoint
            .write_if_newer(snapshot, DeviceCheckpoint::to_json)
            .await
            .map_err(|source| DeviceManagerError::Io {
                action: "writing",
                path: self.checkpoint.display_path(),
                source,
            })
    }

    /// The device resources' capacity and allocatable for the node status (resources whose
    /// plugin is gone longer than the grace period are removed first, and reported at 0).
    pub fn capacity(&self) -> (ResourceList, ResourceList) {
        self.expire();
        let (cap, alloc) = self.lock().state.capacity();
        (quantities(cap), quantities(alloc))
    }

    /// The device resources' allocatable as admission sees it for `pod`: for a pod already
    /// holding devices (re-admitted after a restart), at least what containers hold, so it
    /// is admitted again while its plugin is away (Go's `sanitizeNodeAllocatable`).
    pub fn admission_allocatable(&self, pod_uid: &str) -> ResourceList {
        self.expire();
        let inner = self.lock();
        let (_, mut alloc) = inner.state.capacity();
        if inner.state.has_pod(pod_uid) {
            for (k, held) in inner.state.allocated_counts() {
                let e = alloc.entry(k).or_default();
                *e = (*e).max(held);
            }
        }
        quantities(alloc)
    }

    /// Whether any container holds devices (admission reads the active pods only then).
    pub fn holds_devices(&self) -> bool {
        !self.lock().state.pods.is_empty()
    }

    /// Drops the devices of pods that are not active (`None`: not every source has been
    /// seen yet, nothing is dropped).
    pub fn release_stale(&self, active: Option<&[Arc<Pod>]>) {
        let Some(active) = active else {
            return;
        };
        let keep: BTreeSet<&str> = active.iter().map(|p| pod::uid(p)).collect();
        let mut inner = self.lock();
        if inner.state.release_stale(&keep) {
            Self::changed(&mut inner);
        }
    }

    /// Makes the `Allocate` calls admission left for `pod` (one per container and
    /// resource, init containers first as chosen), then writes the checkpoint. `Err` is the
    /// reason the pod cannot have its devices; the devices of the failed calls are free
    /// again.
    pub async fn allocate_pending(&self, pod: &Pod) -> Result<(), String> {
        let uid = pod::uid(pod);
        let pending = self.lock().state.pending(uid);
        let pending = match pending {
            Ok(p) => p,
            Err(e) => {
                self.lock().state.discard_pending(uid);
                return Err(e);
            }
        };
        if pending.is_empty() {
            return Ok(());
        }
        let metrics = crate::metrics::global();
        for p in pending {
            let mut device_ids = p.device_ids.clone();
            if let Some(q) = &p.preference {
                let preferred = p
                    .plugin
                    .preferred_allocation(&q.available, &q.must_include, q.size)
                    .await;
                match preferred {
                    Ok(answer) => {
                        device_ids = self.lock().state.apply_preference(
                            uid,
                            &p.container,
                            &p.resource,
                            &answer,
                        );
                    }
                    Err(e) => {
                        self.lock().state.discard_pending(uid);
                        return Err(format!(
                            "device plugin GetPreferredAllocation rpc failed with err: {e}"
                        ));
                    }
                }
            }
            let started = crate::clock::monotonic_now();
            let answer = p.plugin.allocate(&device_ids).await;
            metrics
                .device_plugin_alloc_duration
                .with(&p.resource)
                .observe(crate::clock::elapsed(started));
            match answer {
                Ok(a) => {
                    tracing::info!(pod = %pod::full_name(pod), uid, container = %p.container, resource = %p.resource, devices = ?device_ids, "device manager: devices allocated");
                    let mut inner = self.lock();
                    inner
                        .state
                        .allocated_response(uid, &p.container, &p.resource, a);
                    Self::changed(&mut inner);
                }
                Err(e) => {
                    tracing::warn!(pod = %pod::full_name(pod), uid, container = %p.container, resource = %p.resource, error = %e, "device manager: Allocate failed");
                    self.lock().state.discard_pending(uid);
                    return Err(e.to_string());
                }
            }
        }
        self.persist().await.map_err(|e| e.to_string())
    }

    /// What the container's devices add to it when it is created (Go's
    /// `GetDeviceRunContainerOptions`): `PreStartContainer` where the plugin asks for it,
    /// and, for a device resource the container holds nothing of (a race with a restart),
    /// a new allocation first. `Err` is why the container cannot start now.
    pub async fn run_options(
        &self,
        pod: &Pod,
        container: &Container,
    ) -> Result<DeviceRunOptions, String> {
        let uid = pod::uid(pod);
        let missing = {
            let inner = self.lock();
            inner.state.requests(container).iter().any(|(r, _)| {
                inner
                    .state
                    .container_devices(uid, &container.name, r)
                    .is_none()
            })
        };
        if missing {
            tracing::info!(pod = %pod::full_name(pod), uid, container = %container.name, "device manager: allocating device plugin resources again for the container");
            self.lock().state.allocate(pod, container, None)?;
            self.allocate_pending(pod).await?;
        }
        let calls = self.lock().state.pre_start_calls(uid, &container.name);
        for (resource, plugin, ids) in calls {
            plugin.pre_start_container(&ids).await.map_err(|e| {
                format!("device plugin PreStartContainer rpc failed with err: {e} (resource {resource})")
            })?;
        }
        Ok(self.lock().state.run_options(uid, &container.name))
    }

    /// The devices a container holds: resource → NUMA node → ids (what the pod resources
    /// API lists).
    pub fn container_devices(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, std::collections::BTreeMap<i64, Vec<String>>)> {
        self.lock()
            .state
            .pods
            .get(uid)
            .and_then(|c| c.get(container))
            .into_iter()
            .flatten()
            .map(|(r, d)| (r.clone(), d.devices.clone()))
            .collect()
    }

    /// What the checkpoint holds now (for tests and diagnostics).
    pub fn checkpoint(&self) -> DeviceCheckpoint {
        self.lock().state.to_checkpoint()
    }

    /// Every healthy device of every device plugin resource, as `(resource, device id, NUMA
    /// nodes)` sorted by resource then id; the NUMA nodes are empty when the plugin gave
    /// none. What the node can hand out at all, allocated or not (what the pod resources
    /// API's `GetAllocatableResources` lists; Go's `GetAllocatableDevices`).
    pub fn allocatable_devices(&self) -> Vec<(String, String, Vec<i64>)> {
        let inner = self.lock();
        inner
            .state
            .resources
            .iter()
            .flat_map(|(resource, r)| {
                r.devices
                    .values()
                    .filter(|d| d.healthy)
                    .map(move |d| (resource.clone(), d.id.clone(), d.numa_nodes.clone()))
            })
            .collect()
    }
}

fn quantities(m: std::collections::BTreeMap<String, i64>) -> ResourceList {
    m.into_iter()
        .map(|(k, v)| (k, Quantity(v.to_string())))
        .collect()
}

/// The device manager is the topology manager's hint provider for device resources (Go's
/// `GetTopologyHints`, `GetPodTopologyHints`, `Allocate` up to the plugin call, which
/// [`DeviceManager::allocate_pending`] makes once the pod is admitted).
impl HintProvider for DeviceManager {
    fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        self.lock().state.container_hints(pod, container)
    }

    fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        self.lock().state.pod_hints(pod)
    }

    fn allocate(
        &self,
        pod: &Pod,
        container: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError> {
        let mut inner = self.lock();
        let result = inner.state.allocate(pod, container, affinity.affinity);
        Self::changed(&mut inner);
        result.map_err(AllocateError::Unexpected)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::devices::{Device, DevicePluginOptions};
    use crate::testing::NoopDevicePlugin as NoPlugin;

    fn register(
        m: &DeviceManager,
        resource: &str,
        endpoint: u64,
        devices: &[(&str, bool, &[i64])],
    ) {
        m.apply(DevicePluginEvent::Registered {
            resource: resource.into(),
            endpoint,
            options: DevicePluginOptions::default(),
            plugin: Arc::new(NoPlugin),
        });
        m.apply(DevicePluginEvent::Devices {
            resource: resource.into(),
            endpoint,
            devices: devices
                .iter()
                .map(|(id, healthy, numa)| Device {
                    id: (*id).into(),
                    healthy: *healthy,
                    numa_nodes: numa.to_vec(),
                })
                .collect(),
        });
    }

    #[tokio::test]
    async fn allocatable_devices_are_the_healthy_ones_of_every_resource() {
        let m = DeviceManager::new(None, vec![0, 1]);
        assert!(m.allocatable_devices().is_empty());
        register(
            &m,
            "example.com/gpu",
            1,
            &[
                ("gpu-1", true, &[1]),
                ("gpu-0", true, &[0]),
                ("gpu-2", false, &[0]),
            ],
        );
        register(&m, "example.com/nic", 2, &[("nic-0", true, &[])]);
        let want = |list: &[(&str, &str, &[i64])]| -> Vec<(String, String, Vec<i64>)> {
            list.iter()
                .map(|(r, id, numa)| (r.to_string(), id.to_string(), numa.to_vec()))
                .collect()
        };
        assert_eq!(
            m.allocatable_devices(),
            want(&[
                ("example.com/gpu", "gpu-0", &[0]),
                ("example.com/gpu", "gpu-1", &[1]),
                ("example.com/nic", "nic-0", &[]),
            ])
        );
        // A plugin going away leaves its devices unhealthy: none of them is allocatable.
        m.apply(DevicePluginEvent::Stopped {
            resource: "example.com/nic".into(),
            endpoint: 2,
        });
        assert_eq!(
            m.allocatable_devices(),
            want(&[
                ("example.com/gpu", "gpu-0", &[0]),
                ("example.com/gpu", "gpu-1", &[1]),
            ])
        );
    }
}
