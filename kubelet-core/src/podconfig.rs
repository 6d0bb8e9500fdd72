//! Merging the pod sources into one incremental stream (Go's `config.PodConfig`).
//!
//! Every source keeps its own desired set, keyed by pod UID. A source's update is applied to
//! its set and the differences come out as incremental updates, in the order Go emits them:
//! `Remove`, `Add`, `Update`, `Delete`, `Reconcile`.
//!
//! - A pod is *updated* when its spec, labels, annotations, deletion timestamp or deletion
//!   grace period changed; when only its status changed it is *reconciled*; when its deletion
//!   timestamp became set it is *deleted* (graceful termination).
//! - A pod without a UID or name, a second pod with the same UID in one update, and a pod
//!   whose `namespace/name` is already owned by a different UID (in any source) are rejected
//!   with a warning; the first one keeps running. Mirror pods (config.mirror annotation) are
//!   exempt: they carry their static pod's name and are never run.
//! - Every pod carries `kubernetes.io/config.seen`, the time the kubelet first saw its UID (Go's
//!   `recordFirstSeenTime`): the file and HTTP sources stamp it themselves; a pod without it
//!   (the API server's) gets it here when it is added, and keeps it across its updates.
//!   `kubelet_pod_start_duration_seconds` is measured from it.
//! - A source counts as *seen* once it delivered its first `Set`. Until every registered
//!   source is seen, the sync loop must not delete pods it does not know about
//!   ([`PodConfigMerger::seen_all_sources`]).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::pod;
use crate::source::{PodOperation, PodUpdate};

#[derive(Debug, Default)]
struct SourcePods {
    pods: HashMap<String, Arc<Pod>>,
}

/// One incremental change out of the merge. Pods are shared, not copied, with the merge's
/// own state.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedUpdate {
    /// Add, Update, Delete, Remove or Reconcile (never Set).
    pub op: PodOperation,
    /// The pods concerned.
    pub pods: Vec<Arc<Pod>>,
    /// The source they came from.
    pub source: String,
}

/// The merge state. See the module docs.
#[derive(Debug, Default)]
pub struct PodConfigMerger {
    sources: HashMap<String, SourcePods>,
    expected: HashSet<String>,
    seen: HashSet<String>,
    /// full name → (source, uid) of the pod that owns it.
    owners: HashMap<String, (String, String)>,
}

#[derive(Default)]
struct Changes {
    removes: Vec<Arc<Pod>>,
    adds: Vec<Arc<Pod>>,
    updates: Vec<Arc<Pod>>,
    deletes: Vec<Arc<Pod>>,
    reconciles: Vec<Arc<Pod>>,
}

/// `p` with `kubernetes.io/config.seen` set: its own when it has one, else `seen` (the time the
/// kubelet first saw the pod), else now.
fn with_first_seen(p: Arc<Pod>, seen: Option<&str>) -> Arc<Pod> {
    if pod::annotation(&p, pod::CONFIG_SEEN_ANNOTATION).is_some() {
        return p;
    }
    let seen = match seen {
        Some(s) => s.to_string(),
        None => k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(
            crate::clock::now_unix_nanos(),
        ))
        .map(|t| t.to_string())
        .unwrap_or_default(),
    };
    let mut p = Arc::unwrap_or_clone(p);
    p.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(pod::CONFIG_SEEN_ANNOTATION.to_string(), seen);
    Arc::new(p)
}

/// The first-seen time `p` carries.
fn first_seen(p: &Pod) -> Option<&str> {
    pod::annotation(p, pod::CONFIG_SEEN_ANNOTATION)
}

fn differ_semantically(a: &Pod, b: &Pod) -> bool {
    a.spec != b.spec
        || a.metadata.labels != b.metadata.labels
        || a.metadata.annotations != b.metadata.annotations
        || a.metadata.deletion_timestamp != b.metadata.deletion_timestamp
        || a.metadata.deletion_grace_period_seconds != b.metadata.deletion_grace_period_seconds
}

impl PodConfigMerger {
    /// A merger expecting updates from the named sources.
    pub fn new<I, S>(expected_sources: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PodConfigMerger {
            expected: expected_sources.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// Whether every expected source has delivered its first snapshot.
    pub fn seen_all_sources(&self) -> bool {
        self.expected.iter().all(|s| self.seen.contains(s))
    }

    /// Whether `source` has delivered its first snapshot.
    #[cfg(test)]
    pub fn seen(&self, source: &str) -> bool {
        self.seen.contains(source)
    }

    /// Applies one source update; returns the incremental updates it causes.
    pub fn merge(&mut self, update: PodUpdate) -> Vec<MergedUpdate> {
        let source = update.source.clone();
        let mut changes = Changes::default();
        let incoming = self.filter_invalid(&source, update.pods);
        match update.op {
            PodOperation::Set => {
                self.seen.insert(source.clone());
                let new_uids: HashSet<String> =
                    incoming.iter().map(|p| pod::uid(p).to_string()).collect();
                let old: Vec<String> = self
                    .sources
                    .get(&source)
                    .map(|s| s.pods.keys().cloned().collect())
                    .unwrap_or_default();
                for uid in old.iter().filter(|u| !new_uids.contains(*u)) {
                    if let Some(p) = self.remove_pod(&source, uid) {
                        changes.removes.push(p);
                    }
                }
                for p in incoming {
                    self.upsert(&source, p, &mut changes);
                }
            }
            PodOperation::Add | PodOperation::Update | PodOperation::Delete => {
                for p in incoming {
                    self.upsert(&source, p, &mut changes);
                }
            }
            PodOperation::Remove => {
                for p in incoming {
                    if let Some(p) = self.remove_pod(&source, pod::uid(&p)) {
                        changes.removes.push(p);
                    }
                }
            }
            PodOperation::Reconcile => {
                for p in incoming {
                    let uid = pod::uid(&p).to_string();
                    if let Some(existing) = self
                        .sources
                        .get_mut(&source)
                        .and_then(|s| s.pods.get_mut(&uid))
                    {
                        if existing.status != p.status {
                            let p = with_first_seen(p, first_seen(existing));
                            *existing = p.clone();
                            changes.reconciles.push(p);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (op, pods) in [
            (PodOperation::Remove, changes.removes),
            (PodOperation::Add, changes.adds),
            (PodOperation::Update, changes.updates),
            (PodOperation::Delete, changes.deletes),
            (PodOperation::Reconcile, changes.reconciles),
        ] {
            if !pods.is_empty() {
                out.push(MergedUpdate {
                    op,
                    pods,
                    source: source.clone(),
                });
            }
        }
        out
    }

    /// Drops pods without identity, duplicate UIDs and names owned by another pod.
    fn filter_invalid(&self, source: &str, pods: Vec<Arc<Pod>>) -> Vec<Arc<Pod>> {
        let mut uids = HashSet::new();
        let mut names = HashSet::new();
        let mut valid = Vec::with_capacity(pods.len());
        for p in pods {
            let uid = pod::uid(&p).to_string();
            let full = pod::full_name(&p);
            if uid.is_empty() || pod::name(&p).is_empty() {
                tracing::warn!(source, pod = %full, "pod without uid or name rejected");
                continue;
            }
            if !uids.insert(uid.clone()) {
                tracing::warn!(source, pod = %full, uid, "duplicate pod in one update rejected");
                continue;
            }
            // A mirror pod shares its static pod's name by design; it is never run, so it
            // neither owns a name nor conflicts with one.
            if pod::is_mirror(&p) {
                valid.push(p);
                continue;
            }
            if !names.insert(full.clone()) {
                tracing::warn!(source, pod = %full, uid, "duplicate pod in one update rejected");
                continue;
            }
            if let Some((owner_source, owner_uid)) = self.owners.get(&full) {
                let replaced_in_same_source = owner_source == source;
                if *owner_uid != uid && !replaced_in_same_source {
                    tracing::warn!(
                        source, pod = %full, uid, owner_source, owner_uid,
                        "pod name already used by a pod of another source; rejected"
                    );
                    continue;
                }
            }
            valid.push(p);
        }
        valid
    }

    fn remove_pod(&mut self, source: &str, uid: &str) -> Option<Arc<Pod>> {
        let p = self.sources.get_mut(source)?.pods.remove(uid)?;
        let full = pod::full_name(&p);
        if self.owners.get(&full).is_some_and(|(_, u)| u == uid) {
            self.owners.remove(&full);
        }
        Some(p)
    }

    fn upsert(&mut self, source: &str, p: Arc<Pod>, changes: &mut Changes) {
        let uid = pod::uid(&p).to_string();
        let full = pod::full_name(&p);
        let pods = &mut self.sources.entry(source.to_string()).or_default().pods;
        match pods.get_mut(&uid) {
            None => {
                let p = with_first_seen(p, None);
                if !pod::is_mirror(&p) {
                    self.owners.insert(full, (source.to_string(), uid.clone()));
                }
                pods.insert(uid, p.clone());
                if pod::is_deleted(&p) {
                    changes.deletes.push(p);
                } else {
                    changes.adds.push(p);
                }
            }
            Some(existing) => {
                let p = with_first_seen(p, first_seen(existing));
                if differ_semantically(existing, &p) {
                    let newly_deleted = existing.metadata.deletion_timestamp.is_none()
                        && p.metadata.deletion_timestamp.is_some();
                    *existing = p.clone();
                    if newly_deleted {
                        changes.deletes.push(p);
                    } else {
                        changes.updates.push(p);
                    }
                } else if existing.status != p.status {
                    *existing = p.clone();
                    changes.reconciles.push(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn pod(name: &str, uid: &str, image: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn set(source: &str, pods: Vec<Pod>) -> PodUpdate {
        PodUpdate {
            op: PodOperation::Set,
            pods: pods.into_iter().map(Arc::new).collect(),
            source: source.into(),
        }
    }

    fn summary(out: &[MergedUpdate]) -> Vec<(PodOperation, Vec<String>)> {
        out.iter()
            .map(|u| {
                (
                    u.op,
                    u.pods.iter().map(|p| pod::uid(p).to_string()).collect(),
                )
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn pods_keep_the_time_they_were_first_seen() {
        let mut m = PodConfigMerger::new(["api"]);
        let seen = |out: &[MergedUpdate]| {
            out.iter()
                .flat_map(|u| u.pods.iter())
                .map(|p| first_seen(p).unwrap_or_default().to_string())
                .collect::<Vec<_>>()
        };
        let out = m.merge(set("api", vec![pod("a", "1", "x")]));
        let first = seen(&out);
        assert!(
            first[0].ends_with('Z') && first[0].contains('T'),
            "{first:?}"
        );
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        // The API server's pod never carries the annotation: a status change is a reconcile
        // (not an update), an edit an update, both with the first time.
        let mut running = pod("a", "1", "x");
        running.status = Some(Default::default());
        let out = m.merge(set("api", vec![running.clone()]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Reconcile, vec!["1".into()])]
        );
        assert_eq!(seen(&out), first);
        let mut edited = running;
        edited.metadata.labels = Some([("k".to_string(), "v".to_string())].into());
        let out = m.merge(set("api", vec![edited]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Update, vec!["1".into()])]
        );
        assert_eq!(seen(&out), first);
        // A source's own stamp is kept.
        let mut stamped = pod("b", "2", "x");
        stamped.metadata.annotations = Some(
            [(
                pod::CONFIG_SEEN_ANNOTATION.to_string(),
                "2020-01-01T00:00:00Z".to_string(),
            )]
            .into(),
        );
        let out = m.merge(PodUpdate {
            op: PodOperation::Add,
            pods: vec![Arc::new(stamped)],
            source: "api".into(),
        });
        assert_eq!(seen(&out), ["2020-01-01T00:00:00Z"]);
    }

    #[test]
    fn set_snapshots_become_incremental_updates() {
        let mut m = PodConfigMerger::new(["file", "http"]);
        assert!(!m.seen_all_sources());
        let out = m.merge(set("file", vec![pod("a", "1", "x"), pod("b", "2", "x")]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Add, vec!["1".into(), "2".into()])]
        );
        assert!(m.seen("file") && !m.seen_all_sources());
        // Same snapshot again: nothing.
        assert!(m
            .merge(set("file", vec![pod("a", "1", "x"), pod("b", "2", "x")]))
            .is_empty());
        // b changes spec, a disappears, c appears.
        let out = m.merge(set("file", vec![pod("b", "2", "y"), pod("c", "3", "x")]));
        assert_eq!(
            summary(&out),
            vec![
                (PodOperation::Remove, vec!["1".into()]),
                (PodOperation::Add, vec!["3".into()]),
                (PodOperation::Update, vec!["2".into()]),
            ]
        );
        m.merge(set("http", vec![]));
        assert!(m.seen_all_sources());
    }

    #[test]
    fn deletion_status_and_duplicates() {
        let mut m = PodConfigMerger::new(["api", "file"]);
        m.merge(set("api", vec![pod("a", "1", "x")]));
        let mut deleted = pod("a", "1", "x");
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let out = m.merge(PodUpdate {
            op: PodOperation::Update,
            pods: vec![Arc::new(deleted)],
            source: "api".into(),
        });
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Delete, vec!["1".into()])]
        );

        let mut with_status = pod("b", "2", "x");
        m.merge(set("api", vec![pod("a", "1", "x"), with_status.clone()]));
        with_status.status = Some(Default::default());
        let out = m.merge(set("api", vec![pod("a", "1", "x"), with_status]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Reconcile, vec!["2".into()])]
        );

        // Another source claiming default/b with another uid is rejected; same uid twice too.
        let out = m.merge(set(
            "file",
            vec![pod("b", "9", "x"), pod("c", "3", "x"), pod("d", "3", "x")],
        ));
        assert_eq!(summary(&out), vec![(PodOperation::Add, vec!["3".into()])]);
        // A pod without uid is rejected.
        let out = m.merge(set("file", vec![pod("c", "3", "x"), pod("e", "", "x")]));
        assert!(out.is_empty());
    }

    #[test]
    fn mirror_pods_do_not_conflict_with_their_static_pod() {
        let mut m = PodConfigMerger::new(["api", "file"]);
        m.merge(set("file", vec![pod("web-node", "static", "x")]));
        let mut mirror = pod("web-node", "mirror", "x");
        mirror.metadata.annotations = Some(
            [(pod::CONFIG_MIRROR_ANNOTATION.to_string(), "h".to_string())]
                .into_iter()
                .collect(),
        );
        let out = m.merge(set("api", vec![mirror.clone()]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Add, vec!["mirror".into()])]
        );
        // The mirror pod going away removes only the mirror pod; the static pod keeps its name.
        let out = m.merge(set("api", vec![]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Remove, vec!["mirror".into()])]
        );
        let out = m.merge(set("file", vec![pod("web-node", "static", "y")]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Update, vec!["static".into()])]
        );
        // A mirror pod arriving before its static pod does not block the static pod either.
        let mut m = PodConfigMerger::new(["api", "file"]);
        m.merge(set("api", vec![mirror]));
        let out = m.merge(set("file", vec![pod("web-node", "static", "x")]));
        assert_eq!(
            summary(&out),
            vec![(PodOperation::Add, vec!["static".into()])]
        );
    }

    #[test]
    fn edited_static_pod_replaces_uid_in_same_source() {
        let mut m = PodConfigMerger::new(["file"]);
        m.merge(set("file", vec![pod("web", "old", "x")]));
        let out = m.merge(set("file", vec![pod("web", "new", "y")]));
        assert_eq!(
            summary(&out),
            vec![
                (PodOperation::Remove, vec!["old".into()]),
                (PodOperation::Add, vec!["new".into()]),
            ]
        );
    }
}
