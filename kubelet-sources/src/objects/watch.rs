//! The watch behind [`ChangeDetection::Watch`](super::ChangeDetection::Watch) (Go's
//! `watchBasedManager`): one watch per referenced config map or secret, `fieldSelector
//! metadata.name=NAME` in its namespace (what the Node authorizer lets a node watch), shared by
//! every pod that references the object.
//!
//! # States of one watched object
//!
//! | state | left when |
//! |---|---|
//! | **Syncing** (reads go to the API server) | the first listing ends → **Present** or **Missing**; [`GIVE_UP_AFTER`] failures in a row first → **Unwatchable** |
//! | **Present** (the object) | changed → **Present**; deleted → **Missing**; a relisting ends without it → **Missing**; the stream ends → **Unwatchable** |
//! | **Missing** (reads answer not found) | created, or a relisting ends with it → **Present**; the stream ends → **Unwatchable** |
//! | **Unwatchable** (reads use the TTL cache) | — (the task has ended) |
//!
//! A watch that fails after it listed keeps its last value while kube-runtime's watcher
//! retries, with client-go's reflector back-off (`crate::reflector_backoff`), as Go's
//! reflector keeps its store: changes made meanwhile arrive when it reconnects (a deletion as
//! an event, or through the relisting a 410 starts).
//!
//! # Who may call
//! `ApiObjectStore::register_pod` ([`kubelet_core::objects::ObjectStore::register_pod`])
//! starts a watch for an object no registered pod referenced before; registering and unregistering pods cancel the watches of objects no pod
//! references any more, and dropping the store cancels them all. The task only writes its own
//! object's value, under the store's lock, and only while its entry (by id) is there.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Cached, Key, Kind, State};
use crate::reflector_backoff::ReflectorBackoff;

/// Failures in a row before a watch that never listed is given up.
pub(super) const GIVE_UP_AFTER: u32 = 3;

/// What a watch knows of its object.
#[derive(Clone)]
pub(super) enum Value {
    /// The first listing has not ended.
    Syncing,
    /// The object does not exist.
    Missing,
    /// The object as last seen (boxed: most watches hold one, small beside the object).
    Present(Box<Cached>),
    /// The watch ended or never worked: the object is read through the TTL cache.
    Unwatchable,
}

/// A running watch.
pub(super) struct Watched {
    /// Tells this watch from a later one of the same object.
    pub id: u64,
    pub cancel: CancellationToken,
    pub value: Value,
}

/// The value after `event`, if it sets one; `listing` carries a relisting's object until the
/// relisting ends.
pub(super) fn apply<K>(listing: &mut Option<Option<K>>, event: Event<K>) -> Option<Option<K>> {
    match event {
        Event::Init => {
            *listing = Some(None);
            None
        }
        Event::InitApply(o) => {
            *listing = Some(Some(o));
            None
        }
        Event::InitDone => Some(listing.take().flatten()),
        Event::Apply(o) => Some(Some(o)),
        Event::Delete(_) => Some(None),
    }
}

/// Starts the watch of `key` (id `id`) on the current tokio runtime; false when there is none
/// (the object is then read from the API server).
pub(super) fn spawn(
    client: Client,
    key: &Key,
    id: u64,
    state: &Arc<Mutex<State>>,
    cancel: CancellationToken,
) -> bool {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let (kind, ns, _) = key;
    match kind {
        Kind::Secret => handle.spawn(run(
            Api::<Secret>::namespaced(client, ns),
            key.clone(),
            id,
            state.clone(),
            cancel,
            Cached::Secret,
        )),
        Kind::ConfigMap => handle.spawn(run(
            Api::<ConfigMap>::namespaced(client, ns),
            key.clone(),
            id,
            state.clone(),
            cancel,
            Cached::ConfigMap,
        )),
    };
    true
}

async fn run<K>(
    api: Api<K>,
    key: Key,
    id: u64,
    state: Arc<Mutex<State>>,
    cancel: CancellationToken,
    wrap: fn(K) -> Cached,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (_, ns, name) = &key;
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher::watcher(api, cfg)
        .backoff(ReflectorBackoff::new())
        .boxed();
    let mut listing = None;
    let (mut listed, mut failures) = (false, 0u32);
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            n = stream.try_next() => n,
        };
        let event = match next {
            Ok(Some(e)) => {
                // `Init` opens a listing, which may yet fail: only what a listing or the
                // watch delivers is success.
                if !matches!(e, Event::Init) {
                    failures = 0;
                }
                e
            }
            Ok(None) => {
                tracing::warn!(namespace = %ns, name = %name, "object watch ended; reading it every minute instead");
                set(&state, &key, id, Value::Unwatchable);
                return;
            }
            Err(e) if !listed && failures + 1 >= GIVE_UP_AFTER => {
                tracing::warn!(namespace = %ns, name = %name, error = %e, "cannot watch this object; reading it every minute instead");
                set(&state, &key, id, Value::Unwatchable);
                return;
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                tracing::debug!(namespace = %ns, name = %name, error = %e, "object watch failed; retrying");
                continue;
            }
        };
        let Some(seen) = apply(&mut listing, event) else {
            continue;
        };
        listed = true;
        let value = seen.map_or(Value::Missing, |o| Value::Present(Box::new(wrap(o))));
        if !set(&state, &key, id, value) {
            return;
        }
    }
}

/// Sets the value of watch `id` of `key`; false when that watch is gone.
fn set(state: &Mutex<State>, key: &Key, id: u64, value: Value) -> bool {
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    match st.watches.get_mut(key) {
        Some(w) if w.id == id => {
            w.value = value;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_set_the_value_a_relisting_at_its_end() {
        let mut listing = None;
        // (event, value it sets: None = none, Some(None) = missing, Some(Some(v)) = present)
        let steps: Vec<(Event<String>, Option<Option<&str>>)> = vec![
            (Event::Init, None),
            (Event::InitApply("v1".into()), None),
            (Event::InitDone, Some(Some("v1"))),
            (Event::Apply("v2".into()), Some(Some("v2"))),
            (Event::Delete("v2".into()), Some(None)),
            (Event::Apply("v3".into()), Some(Some("v3"))),
            // A relisting that no longer finds the object.
            (Event::Init, None),
            (Event::InitDone, Some(None)),
            // One that finds it again.
            (Event::Init, None),
            (Event::InitApply("v4".into()), None),
            (Event::InitDone, Some(Some("v4"))),
        ];
        for (i, (event, want)) in steps.into_iter().enumerate() {
            let got = apply(&mut listing, event);
            assert_eq!(got.as_ref().map(|o| o.as_deref()), want, "step {i}");
        }
    }
}
