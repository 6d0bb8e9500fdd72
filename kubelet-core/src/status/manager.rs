//! The status manager: the latest generated status of every pod, and the task that publishes
//! changes to the [`StatusSink`].
//!
//! Pod workers call [`StatusManager::set`] after every sync. A status equal to the cached one
//! is dropped; a pod whose phase is terminal never goes back to a non-terminal phase (as in
//! Go's status manager). Changed pods are marked dirty and the publisher task
//! ([`StatusManager::run`]) sends the *latest* status of each dirty pod, so a burst of changes
//! costs one call per pod; a failed call leaves the pod dirty and is retried with backoff.
//! [`StatusManager::terminated`] queues the "pod terminated" notice behind the pod's final
//! status.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::pod;
use crate::sink::StatusSink;
use crate::status::generate::is_terminal;

#[derive(Debug, Clone)]
struct Entry {
    pod: Arc<Pod>,
    status: PodStatus,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Entry>,
    dirty: HashSet<String>,
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
            if old.status == status {
                old.pod = p.clone();
                return false;
            }
            old.status = status;
            old.pod = p.clone();
        } else {
            st.entries.insert(
                uid.clone(),
                Entry {
                    pod: p.clone(),
                    status,
                },
            );
        }
        st.dirty.insert(uid);
        drop(st);
        self.notify.notify_one();
        true
    }

    /// The latest status of a pod.
    pub fn get(&self, uid: &str) -> Option<PodStatus> {
        self.lock().entries.get(uid).map(|e| e.status.clone())
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
        let mut failed = false;
        for e in batch {
            if let Err(err) = self.sink.set_pod_status(&e.pod, &e.status).await {
                tracing::warn!(pod = %pod::full_name(&e.pod), uid = pod::uid(&e.pod), error = %err, "publishing pod status failed; will retry");
                self.lock().dirty.insert(pod::uid(&e.pod).to_string());
                failed = true;
            }
        }
        for p in terminated {
            if let Err(err) = self.sink.pod_terminated(&p).await {
                tracing::warn!(pod = %pod::full_name(&p), uid = pod::uid(&p), error = %err, "reporting pod termination failed; will retry");
                self.lock().terminated.push_back(p);
                failed = true;
            }
        }
        failed
    }
}
