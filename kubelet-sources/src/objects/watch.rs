//! The watch behind [`ChangeDetection::Watch`](super::ChangeDetection::Watch) (Go's
//! `watchBasedManager`): one watch per referenced config map or secret, `fieldSelector
//! metadata.name=NAME` in its namespace (what the Node authorizer lets a node watch), shared by
//! every pod that references the object.
//!
//! # States of one watched object
//!
//! | state | left when |
//! |---|---|
//! | **Syncing** (reads go to the API server) | the first listing ends → **Present** or **Missing** |
//! | **Present** (the object) | changed → **Present**; deleted → **Missing**; a relisting ends without it → **Missing** |
//! | **Missing** (reads answer not found) | created, or a relisting ends with it → **Present** |
//!
//! A watch that fails keeps its last value while kube-runtime's watcher retries with back-off
//! (as Go's reflector keeps its store): changes made meanwhile arrive when it reconnects.
//!
//! # Who may call
//! [`super::ApiObjectStore::register_pod`] starts a watch for an object no watched pod
//! referenced before; [`super::ApiObjectStore::unregister_pod`] cancels the watches of objects
//! no pod references any more, and dropping the store cancels them all. The task only writes
//! its own object's value, under the store's lock, and only while its entry (by id) is there.

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

/// What a watch knows of its object.
#[derive(Clone)]
pub(super) enum Value {
    /// The first listing has not ended.
    Syncing,
    /// The object does not exist.
    Missing,
    /// The object as last seen (boxed: most watches hold one, small beside the object).
    Present(Box<Cached>),
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
    let mut stream = watcher::watcher(api, cfg).default_backoff().boxed();
    let mut listing = None;
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            n = stream.try_next() => n,
        };
        let event = match next {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(namespace = %ns, name = %name, error = %e, "object watch failed; retrying");
                continue;
            }
        };
        let Some(seen) = apply(&mut listing, event) else {
            continue;
        };
        let value = seen.map_or(Value::Missing, |o| Value::Present(Box::new(wrap(o))));
        let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
        match st.watches.get_mut(&key) {
            Some(w) if w.id == id => w.value = value,
            _ => return,
        }
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
