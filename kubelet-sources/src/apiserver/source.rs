//! The API server pod source (Go's `config.NewSourceApiserver`): a kube-rs watcher on pods
//! with the field selector `spec.nodeName=<node>`.
//!
//! - The initial list (and every relist, e.g. after a watch answered 410 Gone because its
//!   resourceVersion was compacted away) is delivered as one [`PodOperation::Set`], so the
//!   source counts as *seen* only after the first complete list, and a relist neither loses
//!   nor duplicates pods: the engine's merge diffs it against what it had.
//! - Afterwards, watch events become incremental `Add` / `Update` / `Remove` updates.
//! - While the API server is unreachable nothing is sent: the pods stay as they were (the
//!   watcher retries with backoff).
//!
//! Every pod is stamped with the `kubernetes.io/config.source: api` annotation.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use kubelet_core::pod::{self as podutil, API_SOURCE, CONFIG_SOURCE_ANNOTATION};
use kubelet_core::source::{PodOperation, PodSource, PodUpdate, SourceError};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::reflector_backoff::ReflectorBackoff;

/// Default length of one watch request, in seconds.
pub const DEFAULT_WATCH_TIMEOUT_SECONDS: u32 = 290;

/// The pods the source currently knows, by uid; shared read-only with others (the mirror
/// pod manager reads the mirror pods from it).
pub type PodCache = Arc<RwLock<HashMap<String, Arc<Pod>>>>;

/// The API server pod source. See the module docs.
pub struct ApiSource {
    client: kube::Client,
    node_name: String,
    cache: PodCache,
    watch_timeout: u32,
}

impl std::fmt::Debug for ApiSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSource")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl ApiSource {
    /// A source of the pods bound to `node_name`.
    pub fn new(client: kube::Client, node_name: impl Into<String>) -> Self {
        ApiSource {
            client,
            node_name: node_name.into(),
            cache: PodCache::default(),
            watch_timeout: DEFAULT_WATCH_TIMEOUT_SECONDS,
        }
    }

    /// Sets how long one watch request lasts before it is renewed (seconds; default 290,
    /// under the apiserver's limit).
    pub fn with_watch_timeout(mut self, seconds: u32) -> Self {
        self.watch_timeout = seconds.max(1);
        self
    }

    /// The source's view of the API pods (kept up to date while it runs).
    pub fn cache(&self) -> PodCache {
        self.cache.clone()
    }

    /// The field selector used for the watch.
    pub fn field_selector(&self) -> String {
        format!("spec.nodeName={}", self.node_name)
    }
}

/// Turns watcher events into pod updates, keeping the known set. Pure, for testing.
#[derive(Debug, Default)]
pub struct WatchState {
    known: HashMap<String, Arc<Pod>>,
    listing: Option<HashMap<String, Arc<Pod>>>,
}

impl WatchState {
    /// Applies one watcher event; returns the update to send, if any.
    pub fn apply(&mut self, event: Event<Pod>) -> Option<PodUpdate> {
        match event {
            Event::Init => {
                self.listing = Some(HashMap::new());
                None
            }
            Event::InitApply(p) => {
                let p = stamp(p);
                let uid = podutil::uid(&p).to_string();
                self.listing.get_or_insert_with(HashMap::new).insert(uid, p);
                None
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                self.known = listed;
                let mut pods: Vec<Arc<Pod>> = self.known.values().cloned().collect();
                pods.sort_by_key(|p| podutil::full_name(p));
                Some(update(PodOperation::Set, pods))
            }
            Event::Apply(p) => {
                let p = stamp(p);
                let uid = podutil::uid(&p).to_string();
                let op = if self.known.contains_key(&uid) {
                    PodOperation::Update
                } else {
                    PodOperation::Add
                };
                self.known.insert(uid, p.clone());
                Some(update(op, vec![p]))
            }
            Event::Delete(p) => {
                let p = stamp(p);
                self.known.remove(podutil::uid(&p));
                Some(update(PodOperation::Remove, vec![p]))
            }
        }
    }

    /// The pods known now.
    pub fn known(&self) -> &HashMap<String, Arc<Pod>> {
        &self.known
    }
}

fn update(op: PodOperation, pods: Vec<Arc<Pod>>) -> PodUpdate {
    PodUpdate {
        op,
        pods,
        source: API_SOURCE.to_string(),
    }
}

fn stamp(mut p: Pod) -> Arc<Pod> {
    p.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(CONFIG_SOURCE_ANNOTATION.to_string(), API_SOURCE.to_string());
    Arc::new(p)
}

#[async_trait]
impl PodSource for ApiSource {
    fn name(&self) -> &str {
        API_SOURCE
    }

    async fn run(
        &self,
        updates: mpsc::Sender<PodUpdate>,
        shutdown: CancellationToken,
    ) -> Result<(), SourceError> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let cfg = watcher::Config::default()
            .fields(&self.field_selector())
            .timeout(self.watch_timeout);
        let mut stream = watcher::watcher(api, cfg)
            .backoff(ReflectorBackoff::new())
            .boxed();
        let mut state = WatchState::default();
        let mut failing = false;
        tracing::info!(node = %self.node_name, "watching pods bound to this node");
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                n = stream.try_next() => n,
            };
            let event = match next {
                Ok(Some(e)) => {
                    // `Init` opens a listing, which may yet fail.
                    if failing && !matches!(e, Event::Init) {
                        tracing::info!(node = %self.node_name, "pod watch recovered");
                        failing = false;
                    }
                    e
                }
                Ok(None) => {
                    return Err(SourceError::Failed {
                        source_name: API_SOURCE.into(),
                        message: "the pod watch ended".into(),
                    })
                }
                Err(e) => {
                    // The watcher restarts itself (with backoff); pods are kept meanwhile.
                    if !failing {
                        tracing::warn!(node = %self.node_name, error = %e, "pod watch failed; keeping the known pods and retrying");
                    } else {
                        tracing::debug!(node = %self.node_name, error = %e, "pod watch still failing");
                    }
                    failing = true;
                    continue;
                }
            };
            let Some(u) = state.apply(event) else {
                continue;
            };
            {
                let mut cache = self.cache.write().unwrap_or_else(|e| e.into_inner());
                *cache = state.known().clone();
            }
            tracing::debug!(op = ?u.op, pods = u.pods.len(), "api pod update");
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = updates.send(u) => if r.is_err() {
                    return Err(SourceError::ChannelClosed { source_name: API_SOURCE.into() });
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    type Summary = (PodOperation, Vec<String>);

    fn pod(name: &str, uid: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn summary(u: &Option<PodUpdate>) -> Option<(PodOperation, Vec<String>)> {
        u.as_ref().map(|u| {
            (
                u.op,
                u.pods.iter().map(|p| podutil::uid(p).to_string()).collect(),
            )
        })
    }

    #[test]
    fn list_then_incremental_then_relist() {
        let mut s = WatchState::default();
        // Nothing is sent before the list is complete.
        assert!(s.apply(Event::Init).is_none());
        assert!(s.apply(Event::InitApply(pod("b", "2", "1"))).is_none());
        assert!(s.apply(Event::InitApply(pod("a", "1", "1"))).is_none());
        let u = s.apply(Event::InitDone);
        assert_eq!(
            summary(&u),
            Some((PodOperation::Set, vec!["1".into(), "2".into()]))
        );
        let stamped = &u.as_ref().map(|u| u.pods[0].clone()).unwrap();
        assert_eq!(podutil::source(stamped), "api");
        // Incremental events.
        let cases: Vec<(Event<Pod>, Summary)> = vec![
            (
                Event::Apply(pod("c", "3", "2")),
                (PodOperation::Add, vec!["3".into()]),
            ),
            (
                Event::Apply(pod("a", "1", "3")),
                (PodOperation::Update, vec!["1".into()]),
            ),
            (
                Event::Delete(pod("b", "2", "4")),
                (PodOperation::Remove, vec!["2".into()]),
            ),
        ];
        for (ev, want) in cases {
            assert_eq!(summary(&s.apply(ev)), Some(want));
        }
        // A relist (410 Gone) while "a" was deleted and "d" created: one Set with exactly
        // the listed pods; no duplicates, nothing lost.
        s.apply(Event::Init);
        s.apply(Event::InitApply(pod("c", "3", "9")));
        s.apply(Event::InitApply(pod("d", "4", "9")));
        assert_eq!(
            s.known().len(),
            2,
            "known pods kept until the relist is complete"
        );
        let u = s.apply(Event::InitDone);
        assert_eq!(
            summary(&u),
            Some((PodOperation::Set, vec!["3".into(), "4".into()]))
        );
        assert_eq!(s.known().len(), 2);
    }
}
