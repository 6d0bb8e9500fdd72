//! The [`StatusSink`] of a cluster member: pod status to `pods/status`, pod deletion once a
//! deleted pod's containers are gone, events through the [`EventRecorder`], and the mirror
//! pods of static pods ([`MirrorPods`]).
//!
//! # Pod status
//! The engine's status manager calls [`StatusSink::set_pod_status`] when a pod's status
//! changed. The sink merges it with what the API server has (conditions the kubelet does
//! not generate, such as readiness gates, and `nominatedNodeName` are kept), skips the
//! request when the server already has exactly that, and otherwise sends a JSON merge patch
//! of the status with the pod's uid as precondition (a re-created pod of the same name is
//! never written to). Each pod's requests are serialised and versioned: a status handed
//! over earlier is never written after a later one. A failure is returned to the status
//! manager, which retries with backoff; a pod that no longer exists is done.
//!
//! A static pod's status goes to its mirror pod (when the API server has one).
//!
//! # Deletion
//! [`StatusSink::pod_terminated`] deletes an API pod that was being deleted, with grace
//! period 0 and a uid precondition, as Go's status manager does once the containers are
//! gone.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::Api;
use kubelet_core::pod::{self as podutil, CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION};
use kubelet_core::sink::{Event, SinkError, StatusSink};
use kubelet_core::KubeletHandle;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::events::EventRecorder;
use super::source::PodCache;

/// Status fields owned by other components, kept when the kubelet's status has none.
const FOREIGN_STATUS_FIELDS: [&str; 4] = [
    "nominatedNodeName",
    "resourceClaimStatuses",
    "extendedResourceClaimStatus",
    "resize",
];

#[derive(Debug, Default)]
struct Slot {
    lock: tokio::sync::Mutex<()>,
    next: AtomicU64,
    sent: AtomicU64,
    last_json: Mutex<Option<Value>>,
}

/// The cluster [`StatusSink`]. See the module docs.
pub struct ApiStatusSink {
    client: kube::Client,
    cache: PodCache,
    events: EventRecorder,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl std::fmt::Debug for ApiStatusSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiStatusSink").finish_non_exhaustive()
    }
}

/// The status to write: `new`, plus the conditions of `old` whose type `new` does not have,
/// plus the fields other components own.
pub fn merge_status(old: Option<&PodStatus>, new: &PodStatus) -> PodStatus {
    let mut merged = new.clone();
    if let Some(old) = old {
        let mut conds = merged.conditions.take().unwrap_or_default();
        for c in old.conditions.iter().flatten() {
            if !conds.iter().any(|n| n.type_ == c.type_) {
                conds.push(c.clone());
            }
        }
        merged.conditions = (!conds.is_empty()).then_some(conds);
        if merged.nominated_node_name.is_none() {
            merged
                .nominated_node_name
                .clone_from(&old.nominated_node_name);
        }
    }
    merged
}

/// The merge patch that turns `old` into `new` (fields `new` lacks are cleared) with `uid` as
/// precondition; `None` when the server already has `new`.
pub fn status_patch(uid: &str, old: Option<&PodStatus>, new: &PodStatus) -> Option<Value> {
    let old_v = old.map(serde_json::to_value).and_then(Result::ok);
    let mut new_v = serde_json::to_value(new).ok()?;
    if old_v.as_ref() == Some(&new_v) {
        return None;
    }
    if let (Some(Value::Object(o)), Value::Object(n)) = (&old_v, &mut new_v) {
        for k in o.keys() {
            if !n.contains_key(k) && !FOREIGN_STATUS_FIELDS.contains(&k.as_str()) {
                n.insert(k.clone(), Value::Null);
            }
        }
    }
    let meta = serde_json::to_value(ObjectMeta {
        uid: Some(uid.to_string()),
        ..Default::default()
    })
    .ok()?;
    let mut patch = serde_json::Map::new();
    patch.insert("metadata".into(), meta);
    patch.insert("status".into(), new_v);
    Some(Value::Object(patch))
}

fn unavailable(e: impl std::fmt::Display) -> SinkError {
    SinkError::Unavailable(e.to_string())
}

impl ApiStatusSink {
    /// A sink writing through `client`; `cache` is the API source's pod cache (mirror pods
    /// are looked up there).
    pub fn new(client: kube::Client, cache: PodCache, events: EventRecorder) -> Self {
        ApiStatusSink {
            client,
            cache,
            events,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, uid: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() > 10_000 {
            slots.retain(|_, s| Arc::strong_count(s) > 1);
        }
        slots.entry(uid.to_string()).or_default().clone()
    }

    /// The mirror pod of a static pod, as the API source last saw it.
    pub fn mirror_of(&self, static_pod: &Pod) -> Option<Arc<Pod>> {
        let full = podutil::full_name(static_pod);
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        cache
            .values()
            .find(|p| podutil::is_mirror(p) && podutil::full_name(p) == full)
            .cloned()
    }

    /// Writes `status` to the API pod `target` (by uid precondition), unless it has it.
    pub async fn write_status(&self, target: &Pod, status: &PodStatus) -> Result<(), SinkError> {
        let uid = podutil::uid(target).to_string();
        let full = podutil::full_name(target);
        let slot = self.slot(&uid);
        let version = slot.next.fetch_add(1, Ordering::SeqCst) + 1;
        let _guard = slot.lock.lock().await;
        if slot.sent.load(Ordering::SeqCst) > version {
            return Ok(());
        }
        let merged = merge_status(target.status.as_ref(), status);
        let Some(patch) = status_patch(&uid, target.status.as_ref(), &merged) else {
            slot.sent.store(version, Ordering::SeqCst);
            return Ok(());
        };
        {
            let last = slot.last_json.lock().unwrap_or_else(|e| e.into_inner());
            if last.as_ref() == Some(&patch) {
                slot.sent.store(version, Ordering::SeqCst);
                return Ok(());
            }
        }
        let api: Api<Pod> = Api::namespaced(self.client.clone(), podutil::namespace(target));
        match api
            .patch_status(
                podutil::name(target),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(pod = %full, uid, "pod status patched");
                *slot.last_json.lock().unwrap_or_else(|e| e.into_inner()) = Some(patch);
                slot.sent.store(version, Ordering::SeqCst);
                Ok(())
            }
            // Gone, or replaced by another pod of the same name: nothing to write to.
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => {
                tracing::debug!(pod = %full, uid, code = s.code, message = %s.message, "pod status not written: the pod is gone or was replaced");
                slot.sent.store(version, Ordering::SeqCst);
                Ok(())
            }
            Err(e) => Err(unavailable(format!("patch status of pod {full}: {e}"))),
        }
    }
}

#[async_trait]
impl StatusSink for ApiStatusSink {
    async fn set_pod_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), SinkError> {
        if podutil::is_static(pod) {
            // The mirror pod gets it; without one, the mirror pod manager writes it once
            // the mirror pod exists.
            return match self.mirror_of(pod) {
                Some(m) if is_mirror_of(&m, pod) && !podutil::is_deleted(&m) => {
                    self.write_status(&m, status).await
                }
                _ => Ok(()),
            };
        }
        self.write_status(pod, status).await
    }

    async fn pod_terminated(&self, pod: &Pod) -> Result<(), SinkError> {
        if podutil::source(pod) != podutil::API_SOURCE || !podutil::is_deleted(pod) {
            return Ok(());
        }
        let full = podutil::full_name(pod);
        let uid = podutil::uid(pod).to_string();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), podutil::namespace(pod));
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(podutil::name(pod), &dp).await {
            Ok(_) => {
                tracing::info!(pod = %full, uid, "pod object deleted");
                Ok(())
            }
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Ok(()),
            Err(e) => Err(unavailable(format!("delete pod {full}: {e}"))),
        }
    }

    fn record_event(&self, event: Event) {
        self.events.record(event);
    }
}

/// The hash a static pod's mirror pod must carry (its config.hash, else its uid).
pub fn static_pod_hash(static_pod: &Pod) -> String {
    podutil::annotation(static_pod, CONFIG_HASH_ANNOTATION)
        .unwrap_or_else(|| podutil::uid(static_pod))
        .to_string()
}

/// Whether `mirror` is the mirror pod of the current version of `static_pod`.
pub fn is_mirror_of(mirror: &Pod, static_pod: &Pod) -> bool {
    podutil::annotation(mirror, CONFIG_MIRROR_ANNOTATION)
        == Some(static_pod_hash(static_pod).as_str())
}

/// The mirror pod for a static pod: its name, namespace, labels, annotations (plus the
/// mirror annotation) and spec, owned by the node.
pub fn mirror_pod(static_pod: &Pod, node_uid: Option<&str>, node_name: &str) -> Pod {
    let mut annotations: BTreeMap<String, String> =
        static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), static_pod_hash(static_pod));
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: Some(podutil::namespace(static_pod).to_string()),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: node_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: node_name.to_string(),
                    uid: uid.to_string(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

/// What the mirror pod manager should do for the current static and mirror pods.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    /// Create the mirror pod of this static pod.
    Create(Arc<Pod>),
    /// Delete this mirror pod (stale version, being deleted, or its static pod is gone).
    Delete(Arc<Pod>),
    /// Write the static pod's status to this mirror pod.
    SyncStatus {
        /// The static pod.
        static_pod: Arc<Pod>,
        /// Its mirror pod.
        mirror: Arc<Pod>,
    },
}

/// Plans the mirror pod changes (Go: `syncPod`'s mirror pod step and the orphaned mirror
/// pod clean-up of `HandlePodCleanups`). A mirror pod whose static pod is gone from the
/// sources stays while `terminating` says that static pod is still being stopped (within
/// its grace period). Pure, for testing.
pub fn plan_mirrors(
    statics: &[Arc<Pod>],
    mirrors: &[Arc<Pod>],
    terminating: &dyn Fn(&str) -> bool,
) -> Vec<MirrorAction> {
    let mut actions = Vec::new();
    let by_name: HashMap<String, &Arc<Pod>> =
        mirrors.iter().map(|m| (podutil::full_name(m), m)).collect();
    for s in statics {
        match by_name.get(&podutil::full_name(s)) {
            Some(m) if is_mirror_of(m, s) && !podutil::is_deleted(m) => {
                actions.push(MirrorAction::SyncStatus {
                    static_pod: s.clone(),
                    mirror: (*m).clone(),
                });
            }
            Some(m) => {
                actions.push(MirrorAction::Delete((*m).clone()));
                actions.push(MirrorAction::Create(s.clone()));
            }
            None => actions.push(MirrorAction::Create(s.clone())),
        }
    }
    let static_names: std::collections::HashSet<String> =
        statics.iter().map(|s| podutil::full_name(s)).collect();
    for m in mirrors {
        let name = podutil::full_name(m);
        if !static_names.contains(&name) && !terminating(&name) {
            actions.push(MirrorAction::Delete(m.clone()));
        }
    }
    actions
}

/// Keeps a mirror pod for every static pod (see [`plan_mirrors`]), every `period`.
pub struct MirrorPods {
    /// API client (rate limited).
    pub client: kube::Client,
    /// The node.
    pub node_name: String,
    /// The running kubelet (its static pods and their statuses).
    pub handle: KubeletHandle,
    /// The sink (writes mirror pod statuses).
    pub sink: Arc<ApiStatusSink>,
    /// How often to reconcile.
    pub period: Duration,
}

impl std::fmt::Debug for MirrorPods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorPods")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl MirrorPods {
    /// Reconciles until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut node_uid: Option<String> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if !self.handle.sources_ready() {
                continue;
            }
            let statics: Vec<Arc<Pod>> = self
                .handle
                .pods()
                .into_iter()
                .filter(|p| podutil::is_static(p))
                .collect();
            let mirrors: Vec<Arc<Pod>> = {
                let cache = self.sink.cache.read().unwrap_or_else(|e| e.into_inner());
                cache
                    .values()
                    .filter(|p| podutil::is_mirror(p))
                    .cloned()
                    .collect()
            };
            if statics.is_empty() && mirrors.is_empty() {
                continue;
            }
            if node_uid.is_none() {
                let nodes: Api<Node> = Api::all(self.client.clone());
                node_uid = nodes
                    .get_opt(&self.node_name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|n| n.metadata.uid);
                if node_uid.is_none() {
                    // Go creates mirror pods only once the node exists.
                    continue;
                }
            }
            let terminating = |name: &str| self.handle.static_pod_terminating(name);
            for action in plan_mirrors(&statics, &mirrors, &terminating) {
                self.apply(action, node_uid.as_deref()).await;
            }
        }
    }

    async fn apply(&self, action: MirrorAction, node_uid: Option<&str>) {
        match action {
            MirrorAction::Create(s) => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), podutil::namespace(&s));
                let m = mirror_pod(&s, node_uid, &self.node_name);
                match api.create(&PostParams::default(), &m).await {
                    Ok(_) => {
                        tracing::info!(pod = %podutil::full_name(&s), uid = podutil::uid(&s), "mirror pod created")
                    }
                    Err(kube::Error::Api(st)) if st.code == 409 => {}
                    Err(e) => {
                        tracing::warn!(pod = %podutil::full_name(&s), error = %e, "creating the mirror pod failed")
                    }
                }
            }
            MirrorAction::Delete(m) => {
                let api: Api<Pod> = Api::namespaced(self.client.clone(), podutil::namespace(&m));
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    preconditions: Some(Preconditions {
                        uid: Some(podutil::uid(&m).to_string()),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match api.delete(podutil::name(&m), &dp).await {
                    Ok(_) => {
                        tracing::info!(pod = %podutil::full_name(&m), uid = podutil::uid(&m), "mirror pod deleted")
                    }
                    Err(kube::Error::Api(st)) if matches!(st.code, 404 | 409) => {}
                    Err(e) => {
                        tracing::warn!(pod = %podutil::full_name(&m), error = %e, "deleting the mirror pod failed")
                    }
                }
            }
            MirrorAction::SyncStatus { static_pod, mirror } => {
                let Some(status) = self.handle.pod_status(podutil::uid(&static_pod)) else {
                    return;
                };
                if let Err(e) = self.sink.write_status(&mirror, &status).await {
                    tracing::debug!(pod = %podutil::full_name(&mirror), error = %e, "writing the mirror pod status failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodCondition;
    use kubelet_core::pod::CONFIG_SOURCE_ANNOTATION;

    type MirrorCase = (
        &'static str,
        Vec<Arc<Pod>>,
        Vec<Arc<Pod>>,
        Vec<&'static str>,
    );

    fn cond(t: &str, s: &str) -> PodCondition {
        PodCondition {
            type_: t.into(),
            status: s.into(),
            ..Default::default()
        }
    }

    #[test]
    fn merge_keeps_foreign_conditions_and_nominated_node() {
        let old = PodStatus {
            conditions: Some(vec![
                cond("PodScheduled", "True"),
                cond("example.com/gate", "True"),
            ]),
            nominated_node_name: Some("n".into()),
            phase: Some("Pending".into()),
            ..Default::default()
        };
        let new = PodStatus {
            conditions: Some(vec![cond("PodScheduled", "True"), cond("Ready", "False")]),
            phase: Some("Running".into()),
            ..Default::default()
        };
        let m = merge_status(Some(&old), &new);
        let types: Vec<&str> = m
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, vec!["PodScheduled", "Ready", "example.com/gate"]);
        assert_eq!(m.nominated_node_name.as_deref(), Some("n"));
        assert_eq!(m.phase.as_deref(), Some("Running"));
    }

    #[test]
    fn patch_clears_dropped_fields_and_skips_no_change() {
        let old = PodStatus {
            phase: Some("Pending".into()),
            message: Some("waiting".into()),
            nominated_node_name: Some("n".into()),
            ..Default::default()
        };
        let new = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        let p = status_patch("u1", Some(&old), &new).unwrap();
        assert_eq!(p["metadata"]["uid"], "u1");
        assert_eq!(p["status"]["phase"], "Running");
        assert!(p["status"]["message"].is_null() && p["status"].get("message").is_some());
        assert!(p["status"].get("nominatedNodeName").is_none());
        assert!(status_patch("u1", Some(&new), &new).is_none());
        assert!(status_patch("u1", None, &new).is_some());
    }

    fn static_pod(name: &str, hash: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some(hash.into());
        p.metadata.annotations = Some(
            [
                (CONFIG_SOURCE_ANNOTATION.to_string(), "file".to_string()),
                (CONFIG_HASH_ANNOTATION.to_string(), hash.to_string()),
            ]
            .into_iter()
            .collect(),
        );
        Arc::new(p)
    }

    fn mirror(name: &str, hash: &str, deleted: bool) -> Arc<Pod> {
        let mut m = mirror_pod(&static_pod(name, hash), Some("node-uid"), "n1");
        m.metadata.uid = Some(format!("m-{name}-{hash}"));
        if deleted {
            m.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        Arc::new(m)
    }

    fn kinds(actions: &[MirrorAction]) -> Vec<String> {
        actions
            .iter()
            .map(|a| match a {
                MirrorAction::Create(p) => format!("create {}", podutil::name(p)),
                MirrorAction::Delete(p) => format!("delete {}", podutil::uid(p)),
                MirrorAction::SyncStatus { mirror, .. } => {
                    format!("status {}", podutil::uid(mirror))
                }
            })
            .collect()
    }

    #[test]
    fn mirror_plan_cases() {
        let cases: Vec<MirrorCase> = vec![
            (
                "new static pod",
                vec![static_pod("a", "h1")],
                vec![],
                vec!["create a"],
            ),
            (
                "up to date",
                vec![static_pod("a", "h1")],
                vec![mirror("a", "h1", false)],
                vec!["status m-a-h1"],
            ),
            (
                "edited manifest",
                vec![static_pod("a", "h2")],
                vec![mirror("a", "h1", false)],
                vec!["delete m-a-h1", "create a"],
            ),
            (
                "mirror being deleted",
                vec![static_pod("a", "h1")],
                vec![mirror("a", "h1", true)],
                vec!["delete m-a-h1", "create a"],
            ),
            (
                "static pod gone",
                vec![],
                vec![mirror("a", "h1", false)],
                vec!["delete m-a-h1"],
            ),
        ];
        let none = |_: &str| false;
        for (name, statics, mirrors, want) in cases {
            assert_eq!(
                kinds(&plan_mirrors(&statics, &mirrors, &none)),
                want,
                "{name}"
            );
        }
        // The static pod left the sources but is still stopping within its grace period:
        // its mirror pod stays (Go's IsPodForMirrorPodTerminatingByFullName), then goes.
        let orphan = vec![mirror("a", "h1", false)];
        let name = podutil::full_name(&orphan[0]);
        let stopping = |n: &str| n == name;
        assert!(plan_mirrors(&[], &orphan, &stopping).is_empty());
        assert_eq!(kinds(&plan_mirrors(&[], &orphan, &none)), ["delete m-a-h1"]);
    }

    #[test]
    fn mirror_pod_carries_annotation_owner_and_spec() {
        let s = static_pod("a", "h1");
        let m = mirror_pod(&s, Some("node-uid"), "n1");
        assert_eq!(
            podutil::annotation(&m, CONFIG_MIRROR_ANNOTATION),
            Some("h1")
        );
        assert!(podutil::is_mirror(&m));
        assert!(m.metadata.uid.is_none());
        let o = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.name.as_str(), o.uid.as_str()),
            ("Node", "n1", "node-uid")
        );
        assert!(is_mirror_of(&m, &s));
    }
}
