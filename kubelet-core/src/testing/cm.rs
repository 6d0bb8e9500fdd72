//! A container manager with fixed capacity and no cgroups.

use std::collections::HashSet;
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::{CmError, ContainerManager, PodResources, ResourceList};
use crate::pod;

/// Reports the capacity it was given and remembers which pods it "set up".
#[derive(Debug)]
pub struct FakeContainerManager {
    capacity: ResourceList,
    pods: Mutex<HashSet<String>>,
}

impl Default for FakeContainerManager {
    /// 4 CPUs, 8Gi memory, 110 pods, 100Gi ephemeral storage.
    fn default() -> Self {
        Self::with_capacity(&[
            ("cpu", "4"),
            ("memory", "8Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "100Gi"),
        ])
    }
}

impl FakeContainerManager {
    /// A manager reporting this capacity (and the same allocatable).
    pub fn with_capacity(resources: &[(&str, &str)]) -> Self {
        FakeContainerManager {
            capacity: resources
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
            pods: Mutex::new(HashSet::new()),
        }
    }

    /// Uids with resources set up right now.
    pub fn pod_uids(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        v.sort();
        v
    }
}

#[async_trait]
impl ContainerManager for FakeContainerManager {
    fn capacity(&self) -> ResourceList {
        self.capacity.clone()
    }

    fn allocatable(&self) -> ResourceList {
        self.capacity.clone()
    }

    async fn ensure_pod_resources(&self, p: &Pod) -> Result<PodResources, CmError> {
        let uid = pod::uid(p).to_string();
        let parent = format!("/kubepods/pod{uid}");
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uid);
        Ok(PodResources {
            cgroup_parent: Some(parent),
        })
    }

    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(pod_uid);
        Ok(())
    }

    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError> {
        Ok(self.pod_uids())
    }
}
