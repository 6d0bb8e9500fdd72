//! The status manager: the latest generated status of every pod, and the task that publishes
//! changes to the [`StatusSink`].
//!
//! Pod workers call [`StatusManager::set`] after every sync. A status equal to the cached one
//! is dropped; a pod whose phase is terminal never goes back to a non-terminal phase (as in
//! Go's status manager). Changed pods are marked dirty and the publisher task
//! ([`StatusManager::run`]) sends the *latest* status of each dirty pod, so a burst of changes
//! costs one call per pod; a failed call leaves the pod dirty and is retried with backoff.
//! Up to [`PUBLISH_AT_ONCE`] pods' calls are in flight together (a burst of pods starting is
//! not published one round trip after the other; the API server and etcd take concurrent
//! writes together); one pod's calls never overlap, as a round publishes each dirty pod once
//! and the next round begins when it has ended.
//! [`StatusManager::terminated`] queues the "pod terminated" notice behind the pod's final
//! status.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::pod;
use crate::sink::StatusSink;
use crate::status::generate::is_terminal;

/// How many pods' statuses are published at once.
pub const PUBLISH_AT_ONCE: usize = 8;

#[derive(Debug, Clone)]
struct Entry {
    pod: Arc<Pod>,
    /// Shared: the table stays small (a status is over 600 bytes before its lists) and the
    /// publisher's batch copies pointers, not statuses.
    status: Arc<PodStatus>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Entry>,
    dirty: HashSet<String>,
    /// When each dirty status first changed (`kubelet_pod_status_sync_duration_seconds`).
    changed_since: HashMap<String, tokio::time::Instant>,
    terminated: VecDeque<Arc<Pod>>,
}

/// Latest pod statuses and their publication. See the module docs.
pub struct StatusManager {
    state: Mutex<State>,
    notify: Notify,
    sink: Arc<dyn StatusSink>,
}

impl std::fmt::Debug for StatusManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusManager").finish_non_exhaustive()
    }
}

impl StatusManager {
    /// A manager publishing to `sink`.
    pub fn new(sink: Arc<dyn StatusSink>) -> Self {
        StatusManager {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            sink,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a pod's status; returns whether it changed (and will be published).
    pub fn set(&self, p: &Arc<Pod>, status: PodStatus) -> bool {
        let uid = pod::uid(p).to_string();
        let mut st = self.lock();
        if let Some(old) = st.entries.get_mut(&uid) {
            if is_terminal(&old.status) && !is_terminal(&status) {
                tracing::debug!(pod = %pod::full_name(p), uid, "ignoring non-terminal status after terminal phase");
                return false;
            }
            if *old.status == status {
                old.pod = p.clone();
                return false;
            }
            old.status = Arc::new(status);
            old.pod = p.clone();
        } else {
            st.entries.insert(
                uid.clone(),
                Entry {
                    pod: p.clone(),
                    status: Arc::new(status),
                },
            );
        }
        st.changed_since
            .entry(uid.clone())
            .or_insert_with(tokio::time::Instant::now);
        st.dirty.insert(uid);
        drop(st);
        self.notify.notify_one();
        true
    }

    /// Marks a pod's status for publishing again when the copy the source carries (the API
    /// object's) disagrees with the kubelet's on the phase or a condition's status. The sink
    /// decides whether a write is actually needed.
    pub fn resync_if_drifted(&self, p: &Arc<Pod>) {
        let Some(theirs) = p.status.as_ref() else {
            return;
        };
        let uid = pod::uid(p);
        let mut st = self.lock();
        let Some(ours) = st.entries.get(uid).map(|e| &e.status) else {
            return;
        };
        let conditions = |s: &PodStatus| {
            let mut v: Vec<(String, String)> = s
                .conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect();
            v.sort();
            v
        };
        let ours_conds = conditions(ours);
        let drifted = theirs.phase != ours.phase
            || conditions(theirs)
                .iter()
                .any(|c| ours_conds.iter().any(|o| o.0 == c.0 && o.1 != c.1));
        if drifted && st.dirty.insert(uid.to_string()) {
            drop(st);
            tracing::debug!(pod = %pod::full_name(p), uid, "pod status on the source differs; publishing again");
            self.notify.notify_one();
        }
    }

    /// The latest status of a pod.
    pub fn get(&self, uid: &str) -> Option<PodStatus> {
        self.lock()
            .entries
            .get(uid)
            .map(|e| PodStatus::clone(&e.status))
    }

    /// The pod's `status.startTime` (without copying the whole status).
    pub fn start_time(
        &self,
        uid: &str,
    ) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
        self.lock()
            .entries
            .get(uid)
            .and_then(|e| e.status.start_time.clone())
    }

    /// Whether the pod's latest status has a terminal phase.
    pub fn is_terminal(&self, uid: &str) -> bool {
        self.lock()
            .entries
            .get(uid)
            .is_some_and(|e| is_terminal(&e.status))
    }

    /// Queues the notice that a pod finished terminating (after its final status).
    pub fn terminated(&self, p: Arc<Pod>) {
        self.lock().terminated.push_back(p);
        self.notify.notify_one();
    }

    /// Forgets a pod (after it left the desired set and its worker finished).
    pub fn remove(&self, uid: &str) {
        let mut st = self.lock();
        st.entries.remove(uid);
        st.dirty.remove(uid);
        st.changed_since.remove(uid);
    }

    /// Uids with a cached status.
    pub fn uids(&self) -> Vec<String> {
        self.lock().entries.keys().cloned().collect()
    }

    /// Publishes dirty statuses until `shutdown` fires.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut retry = Duration::from_millis(200);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.notify.notified() => {}
            }
            let failed = self.publish_once().await;
            if failed {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(Duration::from_secs(10));
                self.notify.notify_one();
            } else {
                retry = Duration::from_millis(200);
            }
        }
    }

    /// Publishes everything dirty once; returns whether some call failed.
    async fn publish_once(&self) -> bool {
        let (batch, terminated) = {
            let mut st = self.lock();
            let dirty: Vec<String> = st.dirty.drain().collect();
            let batch: Vec<Entry> = dirty
                .iter()
                .filter_map(|u| st.entries.get(u).cloned())
                .collect();
            let terminated: Vec<Arc<Pod>> = st.terminated.drain(..).collect();
            (batch, terminated)
        };
        let mut calls = Vec::with_capacity(batch.len());
        for e in batch {
            calls.push(async move {
                let result = self.sink.set_pod_status(&e.pod, &e.status).await;
                (e, result)
            });
        }
        let results: Vec<_> = futures::stream::iter(calls)
            .buffer_unordered(PUBLISH_AT_ONCE)
            .collect()
            .await;
        let mut failed = false;
        for (e, result) in results {
            if let Err(err) = result {
                tracing::warn!(pod = %pod::full_name(&e.pod), uid = pod::uid(&e.pod), error = %err, "publishing pod status failed; will retry");
                self.lock().dirty.insert(pod::uid(&e.pod).to_string());
                failed = true;
            } else {
                let mut st = self.lock();
                let uid = pod::uid(&e.pod);
                if !st.dirty.contains(uid) {
                    if let Some(since) = st.changed_since.remove(uid) {
                        crate::metrics::global()
                            .pod_status_sync_duration
                            .observe(since.elapsed());
                    }
                }
            }
        }
        for p in terminated {
            // As Go's canBeDeleted: a pod whose final status has not been published yet is
            // not reported terminated (in cluster mode that deletes the object).
            if self.lock().dirty.contains(pod::uid(&p)) {
                self.lock().terminated.push_back(p);
                failed = true;
                continue;
            }
            if let Err(err) = self.sink.pod_terminated(&p).await {
                tracing::warn!(pod = %pod::full_name(&p), uid = pod::uid(&p), error = %err, "reporting pod termination failed; will retry");
                self.lock().terminated.push_back(p);
                failed = true;
            }
        }
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::{Event, SinkError};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Fails the first `fail` status writes; records terminations.
    #[derive(Default)]
    struct FlakySink {
        fail: AtomicUsize,
        statuses: AtomicUsize,
        terminated: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl StatusSink for FlakySink {
        async fn set_pod_status(&self, _p: &Pod, _s: &PodStatus) -> Result<(), SinkError> {
            if self.fail.load(Ordering::SeqCst) > 0 {
                self.fail.fetch_sub(1, Ordering::SeqCst);
                return Err(SinkError::Unavailable("down".into()));
            }
            self.statuses.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn pod_terminated(&self, p: &Pod) -> Result<(), SinkError> {
            self.terminated
                .lock()
                .unwrap()
                .push(pod::uid(p).to_string());
            Ok(())
        }
        fn record_event(&self, _e: Event) {}
    }

    /// Answers a status write only once `n` of them are in flight together.
    struct AnswersTogether(tokio::sync::Barrier);

    #[async_trait::async_trait]
    impl StatusSink for AnswersTogether {
        async fn set_pod_status(&self, _p: &Pod, _s: &PodStatus) -> Result<(), SinkError> {
            self.0.wait().await;
            Ok(())
        }
        async fn pod_terminated(&self, _p: &Pod) -> Result<(), SinkError> {
            Ok(())
        }
        fn record_event(&self, _e: Event) {}
    }

    #[tokio::test]
    async fn pods_statuses_are_published_together() {
        let m = StatusManager::new(Arc::new(AnswersTogether(tokio::sync::Barrier::new(3))));
        for i in 0..3 {
            let p = Arc::new(crate::testing::pod(
                &format!("p{i}"),
                &format!("u{i}"),
                vec![],
            ));
            m.set(
                &p,
                PodStatus {
                    phase: Some("Pending".into()),
                    ..Default::default()
                },
            );
        }
        // One after the other, the first write would wait for the others for ever.
        let published = tokio::time::timeout(Duration::from_secs(20), m.publish_once())
            .await
            .expect("the three writes in flight together");
        assert!(!published, "no write failed");
        assert!(m.lock().dirty.is_empty());
    }

    #[tokio::test]
    async fn termination_waits_for_the_final_status() {
        let sink = Arc::new(FlakySink::default());
        sink.fail.store(1, Ordering::SeqCst);
        let m = StatusManager::new(sink.clone());
        let p = Arc::new(crate::testing::pod("p", "u1", vec![]));
        m.set(
            &p,
            PodStatus {
                phase: Some("Succeeded".into()),
                ..Default::default()
            },
        );
        m.terminated(p.clone());
        // The final status fails to publish: the termination is held back.
        assert!(m.publish_once().await);
        assert!(sink.terminated.lock().unwrap().is_empty());
        // Next round: status first, then the termination.
        assert!(!m.publish_once().await);
        assert_eq!(sink.statuses.load(Ordering::SeqCst), 1);
        assert_eq!(*sink.terminated.lock().unwrap(), vec!["u1".to_string()]);
    }

    #[tokio::test]
    async fn a_drifted_source_copy_is_published_again() {
        let sink = Arc::new(FlakySink::default());
        let m = StatusManager::new(sink.clone());
        let ready = |st: &str| PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: st.into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let p = Arc::new(crate::testing::pod("p", "u1", vec![]));
        m.set(&p, ready("True"));
        assert!(!m.publish_once().await);
        assert_eq!(sink.statuses.load(Ordering::SeqCst), 1);
        // The API copy agrees: nothing to do.
        let mut same = (*p).clone();
        same.status = Some(ready("True"));
        m.resync_if_drifted(&Arc::new(same));
        assert!(!m.publish_once().await);
        assert_eq!(sink.statuses.load(Ordering::SeqCst), 1);
        // The node controller set Ready=False: published again.
        let mut drifted = (*p).clone();
        drifted.status = Some(ready("False"));
        m.resync_if_drifted(&Arc::new(drifted));
        assert!(!m.publish_once().await);
        assert_eq!(sink.statuses.load(Ordering::SeqCst), 2);
    }
}
