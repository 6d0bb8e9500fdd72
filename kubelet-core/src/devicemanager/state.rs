//! The device manager's state and decisions, without I/O: the registered resources and
//! their devices, which container holds which devices, and the choices Go's `ManagerImpl`
//! makes on them (v1.20.2 `manager.go`, `pod_devices.go`, `topology_hints.go`).
//!
//! The [`super::DeviceManager`] holds one `DeviceState` under a mutex and does the plugin
//! calls and the checkpoint writes around it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tokio::time::Instant;

use super::checkpoint::{DeviceCheckpoint, PodDevicesEntry};
use super::pick::{filter_by_affinity, take, PreferenceQuery};
use crate::devices::{ContainerAllocation, Device, DevicePlugin, DevicePluginOptions};
use crate::pod;
use crate::topologymanager::NumaMask;

/// How long a resource whose plugin went away stays on the node (capacity kept, allocatable
/// 0) before it is removed (Go's `endpointStopGracePeriod`).
pub const ENDPOINT_STOP_GRACE: Duration = Duration::from_secs(5 * 60);

/// A plugin endpoint serving a resource.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The registry's number for it.
    pub id: u64,
    /// Its options.
    pub options: DevicePluginOptions,
    /// Its calls.
    pub plugin: Arc<dyn DevicePlugin>,
}

/// One registered resource.
#[derive(Debug, Clone, Default)]
pub struct ResourceState {
    /// Every device the plugin listed last, by id.
    pub devices: BTreeMap<String, Device>,
    /// The endpoint serving it; `None` for a resource restored from the checkpoint whose
    /// plugin has not registered since.
    pub endpoint: Option<Endpoint>,
    /// When its endpoint stopped (or the resource was restored): it is removed
    /// [`ENDPOINT_STOP_GRACE`] later unless a plugin registers again.
    pub stopped_at: Option<Instant>,
}

impl ResourceState {
    pub(super) fn healthy(&self) -> impl Iterator<Item = &String> {
        self.devices.values().filter(|d| d.healthy).map(|d| &d.id)
    }

    pub(super) fn has_topology(&self) -> bool {
        self.devices.values().any(|d| !d.numa_nodes.is_empty())
    }
}

/// One container's devices of one resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerDevices {
    /// NUMA node → device ids (devices without topology on node 0, as Go records them).
    pub devices: BTreeMap<i64, Vec<String>>,
    /// The plugin's `Allocate` answer; `None` while the call is pending (chosen at
    /// admission, called right after).
    pub response: Option<ContainerAllocation>,
    /// The plugin's preference to ask before the `Allocate` call (only while pending, only
    /// for a plugin offering `GetPreferredAllocation`).
    pub preference: Option<PreferenceQuery>,
}

impl ContainerDevices {
    /// Every device id.
    pub fn ids(&self) -> BTreeSet<String> {
        self.devices.values().flatten().cloned().collect()
    }
}

/// An `Allocate` call admission left to make.
#[derive(Debug, Clone)]
pub struct PendingAllocation {
    /// The container.
    pub container: String,
    /// The resource.
    pub resource: String,
    /// The devices chosen.
    pub device_ids: Vec<String>,
    /// The endpoint to call.
    pub plugin: Arc<dyn DevicePlugin>,
    /// The preference to ask first, if any.
    pub preference: Option<PreferenceQuery>,
}

/// What the devices of a container add to it when it is created (Go's
/// `DeviceRunContainerOptions`): the answers of every resource merged, the first setting of
/// an env, annotation, mount or device path winning.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceRunOptions {
    /// Environment variables.
    pub envs: Vec<(String, String)>,
    /// Host paths to mount.
    pub mounts: Vec<crate::devices::DeviceMount>,
    /// Device nodes.
    pub devices: Vec<crate::devices::DeviceNode>,
    /// Runtime annotations.
    pub annotations: Vec<(String, String)>,
    /// CDI device names.
    pub cdi_devices: Vec<String>,
}

type PodDevices = BTreeMap<String, BTreeMap<String, BTreeMap<String, ContainerDevices>>>;

/// The state. See the module docs.
#[derive(Debug, Default)]
pub struct DeviceState {
    /// Registered resources.
    pub resources: BTreeMap<String, ResourceState>,
    /// Resources removed after their grace period: reported with capacity 0 (as Go sets a
    /// removed resource's capacity to 0 rather than dropping it) until registered again.
    pub removed: BTreeSet<String>,
    /// Pod uid → container → resource → devices.
    pub pods: PodDevices,
    /// The devices an init container of the pod being admitted leaves for its app
    /// containers (Go's `devicesToReuse`): pod uid, resource → ids.
    reuse: Option<(String, BTreeMap<String, BTreeSet<String>>)>,
    /// The machine's NUMA nodes.
    pub numa_nodes: Vec<u32>,
}

impl DeviceState {
    /// A state for a machine with these NUMA nodes.
    pub fn new(numa_nodes: Vec<u32>) -> DeviceState {
        DeviceState {
            numa_nodes,
            ..DeviceState::default()
        }
    }

    /// A plugin registered: its endpoint serves the resource from now on (the devices stay
    /// as they were until it lists them).
    pub fn registered(&mut self, resource: &str, endpoint: Endpoint) {
        let r = self.resources.entry(resource.to_string()).or_default();
        r.endpoint = Some(endpoint);
        r.stopped_at = None;
        self.removed.remove(resource);
    }

    /// The endpoint listed the resource's devices; false (ignored) when it is not the
    /// resource's current endpoint.
    pub fn devices_listed(&mut self, resource: &str, endpoint: u64, devices: Vec<Device>) -> bool {
        let Some(r) = self.current(resource, endpoint) else {
            return false;
        };
        r.devices = devices.into_iter().map(|d| (d.id.clone(), d)).collect();
        true
    }

    /// The endpoint stopped: every device of the resource is unhealthy from now on (Go's
    /// `markResourceUnhealthy`); false when it is not the current endpoint.
    pub fn endpoint_stopped(&mut self, resource: &str, endpoint: u64, now: Instant) -> bool {
        let Some(r) = self.current(resource, endpoint) else {
            return false;
        };
        for d in r.devices.values_mut() {
            d.healthy = false;
        }
        r.stopped_at = Some(now);
        true
    }

    fn current(&mut self, resource: &str, endpoint: u64) -> Option<&mut ResourceState> {
        self.resources
            .get_mut(resource)
            .filter(|r| r.endpoint.as_ref().is_some_and(|e| e.id == endpoint))
    }

    /// Removes the resources whose plugin has been gone longer than the grace period;
    /// true when any was.
    pub fn expire(&mut self, now: Instant) -> bool {
        let expired: Vec<String> = self
            .resources
            .iter()
            .filter(|(_, r)| {
                r.stopped_at
                    .is_some_and(|t| now.saturating_duration_since(t) >= ENDPOINT_STOP_GRACE)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in &expired {
            tracing::info!(resource = %k, "device manager: resource removed, its plugin is gone");
            self.resources.remove(k);
            self.removed.insert(k.clone());
        }
        !expired.is_empty()
    }

    /// Capacity (every device) and allocatable (healthy devices) per resource, removed
    /// resources at 0 (Go's `GetCapacity` as the node status applies it).
    pub fn capacity(&self) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
        let mut capacity = BTreeMap::new();
        let mut allocatable = BTreeMap::new();
        for (k, r) in &self.resources {
            capacity.insert(k.clone(), len_i64(r.devices.len()));
            allocatable.insert(k.clone(), len_i64(r.healthy().count()));
        }
        for k in &self.removed {
            capacity.insert(k.clone(), 0);
            allocatable.insert(k.clone(), 0);
        }
        (capacity, allocatable)
    }

    /// Whether a resource is the device manager's: registered, or held by a container
    /// (Go's `isDevicePluginResource`).
    pub fn is_device_resource(&self, resource: &str) -> bool {
        self.resources.contains_key(resource)
            || self
                .pods
                .values()
                .flat_map(BTreeMap::values)
                .any(|c| c.contains_key(resource))
    }

    /// The devices of a resource held by any container.
    pub fn allocated(&self, resource: &str) -> BTreeSet<String> {
        self.pods
            .values()
            .flat_map(BTreeMap::values)
            .filter_map(|c| c.get(resource))
            .flat_map(ContainerDevices::ids)
            .collect()
    }

    /// Per resource, how many devices containers hold (what Go's `sanitizeNodeAllocatable`
    /// raises the node's allocatable to for a pod already holding devices).
    pub fn allocated_counts(&self) -> BTreeMap<String, i64> {
        let resources: BTreeSet<&String> = self
            .pods
            .values()
            .flat_map(BTreeMap::values)
            .flat_map(BTreeMap::keys)
            .collect();
        resources
            .into_iter()
            .map(|r| (r.clone(), len_i64(self.allocated(r).len())))
            .collect()
    }

    /// Whether the pod holds any device.
    pub fn has_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Drops the devices of pods not in `active` (Go's `UpdateAllocatedDevices`); true when
    /// any was dropped.
    pub fn release_stale(&mut self, active: &BTreeSet<&str>) -> bool {
        let before = self.pods.len();
        self.pods.retain(|uid, _| {
            let keep = active.contains(uid.as_str());
            if !keep {
                tracing::info!(uid = %uid, "device manager: releasing the devices of a pod no longer active");
            }
            keep
        });
        self.pods.len() != before
    }

    /// The container's device requests: resource → count, for the device manager's
    /// resources among its limits (extended resources cannot be overcommitted, so the
    /// limit is the request).
    pub(super) fn requests(&self, container: &Container) -> Vec<(String, usize)> {
        container
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .into_iter()
            .flatten()
            .filter(|(k, _)| self.is_device_resource(k))
            .map(|(k, v)| (k.clone(), quantity_count(v)))
            .collect()
    }

    pub(super) fn reuse_for(&self, uid: &str, resource: &str) -> BTreeSet<String> {
        self.reuse
            .as_ref()
            .filter(|(u, _)| u == uid)
            .and_then(|(_, m)| m.get(resource))
            .cloned()
            .unwrap_or_default()
    }

    /// Chooses the container's devices within `affinity` and records them pending (Go's
    /// `Allocate` up to the plugin call): init containers first, each app container reusing
    /// what the init containers held. `Err` is Go's message.
    pub fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), String> {
        let uid = pod::uid(pod).to_string();
        if self.reuse.as_ref().is_none_or(|(u, _)| *u != uid) {
            self.reuse = Some((uid.clone(), BTreeMap::new()));
        }
        for (resource, needed) in self.requests(container) {
            let reusable = self.reuse_for(&uid, &resource);
            let Some((chosen, preference)) = self.devices_to_allocate(
                &uid,
                &container.name,
                &resource,
                needed,
                &reusable,
                affinity,
            )?
            else {
                continue;
            };
            let per_numa = self.per_numa(&resource, &chosen);
            self.pods
                .entry(uid.clone())
                .or_default()
                .entry(container.name.clone())
                .or_default()
                .insert(
                    resource,
                    ContainerDevices {
                        devices: per_numa,
                        response: None,
                        preference,
                    },
                );
        }
        let is_init = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|ics| ics.iter().any(|c| c.name == container.name));
        let held: Vec<(String, BTreeSet<String>)> = self
            .pods
            .get(&uid)
            .and_then(|cs| cs.get(&container.name))
            .into_iter()
            .flatten()
            .map(|(r, d)| (r.clone(), d.ids()))
            .collect();
        if let Some((_, reuse)) = self.reuse.as_mut() {
            for (resource, ids) in held {
                let set = reuse.entry(resource).or_default();
                if is_init {
                    set.extend(ids);
                } else {
                    set.retain(|d| !ids.contains(d));
                }
            }
        }
        Ok(())
    }

    /// Go's `devicesToAllocate`: the devices chosen, and the plugin's preference to ask
    /// when it offers `GetPreferredAllocation` (the choice is then revised with its answer);
    /// `None` when the container already holds its devices.
    #[allow(clippy::type_complexity)]
    fn devices_to_allocate(
        &self,
        uid: &str,
        container: &str,
        resource: &str,
        required: usize,
        reusable: &BTreeSet<String>,
        affinity: Option<NumaMask>,
    ) -> Result<Option<(BTreeSet<String>, Option<PreferenceQuery>)>, String> {
        let mut needed = required;
        if let Some(held) = self.container_devices(uid, container, resource) {
            let held = held.ids().len();
            if held != required {
                return Err(format!(
                    "pod {uid:?} container {container:?} changed request for resource {resource:?} from {held} to {required}"
                ));
            }
            needed = 0;
        }
        if needed == 0 {
            return Ok(None);
        }
        let Some(r) = self.resources.get(resource) else {
            return Err(format!("can't allocate unregistered device {resource}"));
        };
        let asks = r
            .endpoint
            .as_ref()
            .is_some_and(|e| e.options.get_preferred_allocation_available);
        let mut chosen = BTreeSet::new();
        if take(reusable.iter().cloned(), &mut chosen, &mut needed) {
            return Ok(Some((chosen, None)));
        }
        let in_use = self.allocated(resource);
        let available: BTreeSet<String> = r
            .healthy()
            .filter(|d| !in_use.contains(*d) && !chosen.contains(*d))
            .cloned()
            .collect();
        if available.len() < needed {
            return Err(format!(
                "requested number of devices unavailable for {resource}. Requested: {needed}, Available: {}",
                available.len()
            ));
        }
        let (aligned, unaligned, no_affinity) = filter_by_affinity(r, &available, affinity);
        let query = |chosen: &BTreeSet<String>, pool: &[String], fallback: Vec<String>| {
            let mut offered: Vec<String> = pool.to_vec();
            offered.extend(chosen.iter().filter(|d| !pool.contains(d)).cloned());
            PreferenceQuery {
                available: offered,
                must_include: chosen.iter().cloned().collect(),
                size: required,
                fixed: chosen.iter().cloned().collect(),
                pool: pool.to_vec(),
                fallback,
            }
        };
        let shortfall = |needed: usize| {
            Err(format!(
                "unexpectedly allocated less resources than required. Requested: {required}, Got: {}",
                required - needed
            ))
        };
        // Enough affinity devices to choose among: the plugin may choose among them.
        if needed < aligned.len() {
            let q = asks.then(|| query(&chosen, &aligned, aligned.clone()));
            if take(aligned.iter().cloned(), &mut chosen, &mut needed) {
                return Ok(Some((chosen, q)));
            }
            return shortfall(needed);
        }
        // Every affinity device first; then the plugin may choose among every free one.
        if take(aligned.iter().cloned(), &mut chosen, &mut needed) {
            return Ok(Some((chosen, None)));
        }
        let pool: Vec<String> = available.iter().cloned().collect();
        let fallback: Vec<String> = unaligned.iter().chain(&no_affinity).cloned().collect();
        let q = asks.then(|| query(&chosen, &pool, fallback.clone()));
        if take(fallback.into_iter(), &mut chosen, &mut needed) {
            return Ok(Some((chosen, q)));
        }
        shortfall(needed)
    }

    fn per_numa(&self, resource: &str, ids: &BTreeSet<String>) -> BTreeMap<i64, Vec<String>> {
        let mut out: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for id in ids {
            let nodes = self
                .resources
                .get(resource)
                .and_then(|r| r.devices.get(id))
                .map(|d| d.numa_nodes.clone())
                .unwrap_or_default();
            if nodes.is_empty() {
                out.entry(0).or_default().push(id.clone());
            }
            for n in nodes {
                out.entry(n).or_default().push(id.clone());
            }
        }
        out
    }

    /// The container's devices of a resource.
    pub fn container_devices(
        &self,
        uid: &str,
        container: &str,
        resource: &str,
    ) -> Option<&ContainerDevices> {
        self.pods.get(uid)?.get(container)?.get(resource)
    }

    /// The pod's `Allocate` calls still to make; `Err` (Go's message) when a resource has
    /// no plugin endpoint to call.
    pub fn pending(&self, uid: &str) -> Result<Vec<PendingAllocation>, String> {
        let mut out = Vec::new();
        for (container, resources) in self.pods.get(uid).into_iter().flatten() {
            for (resource, d) in resources {
                if d.response.is_some() {
                    continue;
                }
                let Some(e) = self
                    .resources
                    .get(resource)
                    .and_then(|r| r.endpoint.as_ref())
                else {
                    return Err(format!("unknown Device Plugin {resource}"));
                };
                out.push(PendingAllocation {
                    container: container.clone(),
                    resource: resource.clone(),
                    device_ids: d.ids().into_iter().collect(),
                    plugin: e.plugin.clone(),
                    preference: d.preference.clone(),
                });
            }
        }
        Ok(out)
    }

    /// Revises a pending allocation with the plugin's preferred devices (see
    /// [`PreferenceQuery::choose`]); the devices to `Allocate`.
    pub fn apply_preference(
        &mut self,
        uid: &str,
        container: &str,
        resource: &str,
        answer: &[String],
    ) -> Vec<String> {
        let Some(query) = self
            .container_devices(uid, container, resource)
            .and_then(|d| d.preference.clone())
        else {
            return Vec::new();
        };
        let chosen = query.choose(answer);
        let per_numa = self.per_numa(resource, &chosen);
        if let Some(d) = self
            .pods
            .get_mut(uid)
            .and_then(|c| c.get_mut(container))
            .and_then(|r| r.get_mut(resource))
        {
            d.devices = per_numa;
            d.preference = None;
        }
        chosen.into_iter().collect()
    }

    /// Records a plugin's answer for a pending allocation.
    pub fn allocated_response(
        &mut self,
        uid: &str,
        container: &str,
        resource: &str,
        response: ContainerAllocation,
    ) {
        if let Some(d) = self
            .pods
            .get_mut(uid)
            .and_then(|c| c.get_mut(container))
            .and_then(|r| r.get_mut(resource))
        {
            d.response = Some(response);
        }
    }

    /// Drops the pod's allocations that have no answer (a failed call frees the devices it
    /// was for, as Go rebuilds its allocated set from the answered ones).
    pub fn discard_pending(&mut self, uid: &str) {
        if let Some(containers) = self.pods.get_mut(uid) {
            for resources in containers.values_mut() {
                resources.retain(|_, d| d.response.is_some());
            }
            containers.retain(|_, r| !r.is_empty());
            if containers.is_empty() {
                self.pods.remove(uid);
            }
        }
    }

    /// Go's `deviceRunContainerOptions`: the container's answers merged.
    pub fn run_options(&self, uid: &str, container: &str) -> DeviceRunOptions {
        let mut out = DeviceRunOptions::default();
        let Some(resources) = self.pods.get(uid).and_then(|c| c.get(container)) else {
            return out;
        };
        let mut envs = BTreeSet::new();
        let mut annotations = BTreeSet::new();
        let mut mounts = BTreeSet::new();
        let mut devices = BTreeSet::new();
        for a in resources.values().filter_map(|d| d.response.as_ref()) {
            for (k, v) in &a.envs {
                if envs.insert(k.clone()) {
                    out.envs.push((k.clone(), v.clone()));
                }
            }
            for d in &a.devices {
                if devices.insert(d.container_path.clone()) {
                    out.devices.push(d.clone());
                }
            }
            for m in &a.mounts {
                if mounts.insert(m.container_path.clone()) {
                    out.mounts.push(m.clone());
                }
            }
            for (k, v) in &a.annotations {
                if annotations.insert(k.clone()) {
                    out.annotations.push((k.clone(), v.clone()));
                }
            }
            for c in &a.cdi_devices {
                if !out.cdi_devices.contains(c) {
                    out.cdi_devices.push(c.clone());
                }
            }
        }
        out
    }

    /// The endpoint and options to call `PreStartContainer` on for each of the container's
    /// resources whose plugin asks for it, with the devices.
    pub fn pre_start_calls(
        &self,
        uid: &str,
        container: &str,
    ) -> Vec<(String, Arc<dyn DevicePlugin>, Vec<String>)> {
        let mut out = Vec::new();
        for (resource, d) in self
            .pods
            .get(uid)
            .and_then(|c| c.get(container))
            .into_iter()
            .flatten()
        {
            let Some(e) = self
                .resources
                .get(resource)
                .and_then(|r| r.endpoint.as_ref())
            else {
                continue;
            };
            if e.options.pre_start_required && r_is_running(self.resources.get(resource)) {
                out.push((
                    resource.clone(),
                    e.plugin.clone(),
                    d.ids().into_iter().collect(),
                ));
            }
        }
        out
    }

    /// The checkpoint of this state: every answered allocation, and each resource's
    /// healthy devices.
    pub fn to_checkpoint(&self) -> DeviceCheckpoint {
        let mut entries = Vec::new();
        for (uid, containers) in &self.pods {
            for (container, resources) in containers {
                for (resource, d) in resources {
                    if d.response.is_none() {
                        continue;
                    }
                    entries.push(PodDevicesEntry {
                        pod_uid: uid.clone(),
                        container: container.clone(),
                        resource: resource.clone(),
                        devices: d.devices.clone(),
                        response: d.response.clone(),
                    });
                }
            }
        }
        let registered = self
            .resources
            .iter()
            .map(|(k, r)| (k.clone(), r.healthy().cloned().collect()))
            .collect();
        DeviceCheckpoint {
            entries,
            registered,
        }
    }

    /// Restores a checkpoint (Go's `readCheckpoint`): the allocations come back; each
    /// registered resource comes back with no devices and no endpoint, its grace period
    /// running from `now`, so its capacity is 0 until its plugin registers again.
    pub fn restore(&mut self, cp: DeviceCheckpoint, now: Instant) {
        for e in cp.entries {
            let Some(response) = e.response else {
                tracing::warn!(uid = %e.pod_uid, container = %e.container, resource = %e.resource, "device manager: checkpoint entry with an unreadable allocation response skipped");
                continue;
            };
            self.pods
                .entry(e.pod_uid)
                .or_default()
                .entry(e.container)
                .or_default()
                .insert(
                    e.resource,
                    ContainerDevices {
                        devices: e.devices,
                        response: Some(response),
                        preference: None,
                    },
                );
        }
        for resource in cp.registered.into_keys() {
            self.resources.insert(
                resource,
                ResourceState {
                    stopped_at: Some(now),
                    ..ResourceState::default()
                },
            );
        }
    }
}

fn r_is_running(r: Option<&ResourceState>) -> bool {
    r.is_some_and(|r| r.stopped_at.is_none())
}

/// A device-plugin quantity as a count (whole devices; a fraction or an error counts 0,
/// which the API server's validation of extended resources rules out).
fn quantity_count(q: &Quantity) -> usize {
    crate::resources::value(q)
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .unwrap_or(0)
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
