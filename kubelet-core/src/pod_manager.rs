//! The pod manager: the desired set of pods, as the merged sources describe it.
//!
//! Pods are indexed by UID and by `namespace/name`. Mirror pods (the API server's copy of a
//! static pod) are kept apart: they are never run, only matched to their static pod by full
//! name. The sync loop is the only writer; readers (the HTTP server, status publishing)
//! take snapshots.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::pod;

/// The desired pods. See the module docs.
#[derive(Debug, Default)]
pub struct PodManager {
    by_uid: HashMap<String, Arc<Pod>>,
    by_full_name: HashMap<String, String>,
    mirror_by_full_name: HashMap<String, Arc<Pod>>,
}

impl PodManager {
    /// An empty manager.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a pod (a mirror pod goes to the mirror index).
    pub fn upsert(&mut self, p: Arc<Pod>) {
        let full = pod::full_name(&p);
        if pod::is_mirror(&p) {
            self.mirror_by_full_name.insert(full, p);
            return;
        }
        let uid = pod::uid(&p).to_string();
        self.by_full_name.insert(full, uid.clone());
        self.by_uid.insert(uid, p);
    }

    /// Removes a pod; returns it if it was known.
    pub fn remove(&mut self, p: &Pod) -> Option<Arc<Pod>> {
        let full = pod::full_name(p);
        if pod::is_mirror(p) {
            return self.mirror_by_full_name.remove(&full);
        }
        let uid = pod::uid(p);
        let removed = self.by_uid.remove(uid)?;
        if self.by_full_name.get(&full).is_some_and(|u| u == uid) {
            self.by_full_name.remove(&full);
        }
        Some(removed)
    }

    /// The pod with this UID.
    pub fn get(&self, uid: &str) -> Option<Arc<Pod>> {
        self.by_uid.get(uid).cloned()
    }

    /// The pod with this `namespace/name`.
    pub fn get_by_full_name(&self, full_name: &str) -> Option<Arc<Pod>> {
        self.by_full_name
            .get(full_name)
            .and_then(|uid| self.by_uid.get(uid))
            .cloned()
    }

    /// The mirror pod of a static pod, if the API server has one.
    #[cfg(test)]
    pub fn mirror_of(&self, static_pod: &Pod) -> Option<Arc<Pod>> {
        self.mirror_by_full_name
            .get(&pod::full_name(static_pod))
            .cloned()
    }

    /// All desired pods (no mirror pods).
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.by_uid.values().cloned().collect()
    }

    /// Whether a UID is desired.
    pub fn contains(&self, uid: &str) -> bool {
        self.by_uid.contains_key(uid)
    }

    /// Number of desired pods.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod(name: &str, uid: &str, mirror: bool) -> Arc<Pod> {
        let mut meta = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..Default::default()
        };
        if mirror {
            meta.annotations = Some(
                [(pod::CONFIG_MIRROR_ANNOTATION.to_string(), "h".to_string())]
                    .into_iter()
                    .collect(),
            );
        }
        Arc::new(Pod {
            metadata: meta,
            ..Default::default()
        })
    }

    #[test]
    fn indexes_by_uid_name_and_mirror() {
        let mut m = PodManager::new();
        m.upsert(pod("a", "1", false));
        m.upsert(pod("a", "m1", true));
        assert_eq!(m.len(), 1);
        assert_eq!(
            m.get_by_full_name("ns/a").map(|p| pod::uid(&p).to_string()),
            Some("1".into())
        );
        assert!(m.mirror_of(&pod("a", "1", false)).is_some());
        // Re-created with a new uid under the same name.
        m.upsert(pod("a", "2", false));
        m.remove(&pod("a", "1", false));
        assert_eq!(
            m.get_by_full_name("ns/a").map(|p| pod::uid(&p).to_string()),
            Some("2".into())
        );
        assert!(!m.contains("1"));
    }
}
