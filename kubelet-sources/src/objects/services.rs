//! The node's informer of services (Go's service lister, the kubelet's
//! `kubeInformers.Core().V1().Services()`): one watch of every service in the cluster, from
//! which a container start takes its Docker-link environment variables without a request to
//! the API server. Each service is kept trimmed to what those variables need (its name,
//! namespace, cluster IP and ports).
//!
//! # States
//!
//! | state | left when |
//! |---|---|
//! | **Listing** (reads list the namespace from the API server) | the first listing ends → **Synced**; the stream ends → **Ended** |
//! | **Synced** (reads answered from the cache) | an event changes a service, a relisting ends (the cache becomes what it listed) → **Synced**; the stream ends → **Ended** |
//! | **Ended** (reads list from the API server again) | — (the task has ended) |
//!
//! A watch that fails keeps the cache while kube-runtime's watcher retries with client-go's
//! reflector back-off, as Go's informer keeps its store; what changed meanwhile arrives when it
//! reconnects. A service created just before a pod may still be missing from the pod's
//! variables when the watch lags the pod's own watch: the race Go's kubelet documents in
//! `makeEnvironmentVariables` (users are told to use DNS instead).
//!
//! # Who may call
//! [`ServiceInformer::start`] once per store; reads from any task (one short lock, never held
//! across an `.await`); the watch task alone applies events. Dropping the informer cancels the
//! task.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::reflector_backoff::ReflectorBackoff;

/// Services by namespace, then by name.
type ByNamespace = HashMap<String, BTreeMap<String, Service>>;

/// What the watch knows of the cluster's services.
#[derive(Default)]
pub(super) struct ServiceCache {
    /// Whether a listing has ended and the stream has not (reads are answered from `by_namespace`).
    synced: bool,
    by_namespace: ByNamespace,
    /// A listing in progress: what it has delivered so far.
    listing: Option<ByNamespace>,
}

/// The parts of `s` the environment variables use; `None` without a name or namespace.
fn trimmed(s: Service) -> Option<(String, String, Service)> {
    let ns = s.metadata.namespace?;
    let name = s.metadata.name?;
    let spec = s.spec.map(|spec| ServiceSpec {
        cluster_ip: spec.cluster_ip,
        ports: spec.ports,
        ..Default::default()
    });
    let kept = Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            ..Default::default()
        },
        spec,
        ..Default::default()
    };
    Some((ns, name, kept))
}

fn insert(into: &mut ByNamespace, s: Service) {
    if let Some((ns, name, kept)) = trimmed(s) {
        into.entry(ns).or_default().insert(name, kept);
    }
}

impl ServiceCache {
    /// Takes in one event of the watch.
    pub(super) fn apply(&mut self, event: Event<Service>) {
        match event {
            Event::Init => self.listing = Some(ByNamespace::new()),
            Event::InitApply(s) => insert(self.listing.get_or_insert_with(Default::default), s),
            Event::InitDone => {
                self.by_namespace = self.listing.take().unwrap_or_default();
                self.synced = true;
            }
            Event::Apply(s) => insert(&mut self.by_namespace, s),
            Event::Delete(s) => {
                let (Some(ns), Some(name)) = (s.metadata.namespace, s.metadata.name) else {
                    return;
                };
                if let Some(services) = self.by_namespace.get_mut(&ns) {
                    services.remove(&name);
                    if services.is_empty() {
                        self.by_namespace.remove(&ns);
                    }
                }
            }
        }
    }

    /// The watch has ended: reads go to the API server again.
    fn end(&mut self) {
        *self = ServiceCache::default();
    }

    /// The services of `namespace`, by name; `None` until a listing has ended.
    pub(super) fn namespace(&self, namespace: &str) -> Option<Vec<Service>> {
        self.synced.then(|| {
            self.by_namespace
                .get(namespace)
                .map(|s| s.values().cloned().collect())
                .unwrap_or_default()
        })
    }
}

/// A running watch of every service (see the module docs).
pub(super) struct ServiceInformer {
    cache: Arc<Mutex<ServiceCache>>,
    cancel: CancellationToken,
}

fn lock(cache: &Mutex<ServiceCache>) -> MutexGuard<'_, ServiceCache> {
    cache.lock().unwrap_or_else(|e| e.into_inner())
}

impl ServiceInformer {
    /// Starts the watch on the current tokio runtime; `None` outside one (reads then list
    /// from the API server).
    pub(super) fn start(client: Client) -> Option<Self> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let cache = Arc::new(Mutex::new(ServiceCache::default()));
        let cancel = CancellationToken::new();
        handle.spawn(run(Api::all(client), cache.clone(), cancel.clone()));
        Some(ServiceInformer { cache, cancel })
    }

    /// The services of `namespace` from the cache; `None` while it has not listed.
    pub(super) fn namespace(&self, namespace: &str) -> Option<Vec<Service>> {
        lock(&self.cache).namespace(namespace)
    }

    /// Whether reads are answered from the cache: a listing has ended and the watch has not.
    pub(super) fn listed(&self) -> bool {
        lock(&self.cache).synced
    }
}

impl Drop for ServiceInformer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

async fn run(api: Api<Service>, cache: Arc<Mutex<ServiceCache>>, cancel: CancellationToken) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .backoff(ReflectorBackoff::new())
        .boxed();
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return,
            n = stream.try_next() => n,
        };
        match next {
            Ok(Some(event)) => {
                let done = matches!(event, Event::InitDone);
                let mut c = lock(&cache);
                c.apply(event);
                if done {
                    let count: usize = c.by_namespace.values().map(BTreeMap::len).sum();
                    tracing::debug!(services = count, "services listed");
                }
            }
            Ok(None) => {
                tracing::warn!(
                    "the watch of services ended; listing them at each container start instead"
                );
                lock(&cache).end();
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "the watch of services failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServicePort;

    use super::*;

    fn svc(ns: &str, name: &str, ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: Some([("app".to_string(), "x".to_string())].into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(vec![ServicePort {
                    port: 80,
                    ..Default::default()
                }]),
                selector: Some([("app".to_string(), "x".to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// (namespace, name, cluster IP) of a read.
    fn seen(c: &ServiceCache, ns: &str) -> Option<Vec<(String, String, String)>> {
        c.namespace(ns).map(|v| {
            v.into_iter()
                .map(|s| {
                    (
                        s.metadata.namespace.unwrap_or_default(),
                        s.metadata.name.unwrap_or_default(),
                        s.spec.and_then(|s| s.cluster_ip).unwrap_or_default(),
                    )
                })
                .collect()
        })
    }

    fn row(ns: &str, name: &str, ip: &str) -> (String, String, String) {
        (ns.into(), name.into(), ip.into())
    }

    #[test]
    fn reads_follow_the_listings_and_events() {
        let mut c = ServiceCache::default();
        // (event, if any; namespace read after it; what the read answers: None = list from
        // the API server)
        type Step = (
            Option<Event<Service>>,
            &'static str,
            Option<Vec<(String, String, String)>>,
        );
        let steps: Vec<Step> = vec![
            (Some(Event::Init), "a", None),
            (
                Some(Event::InitApply(svc("a", "s1", "10.0.0.1"))),
                "a",
                None,
            ),
            (
                Some(Event::InitApply(svc("b", "s2", "10.0.0.2"))),
                "a",
                None,
            ),
            (
                Some(Event::InitDone),
                "a",
                Some(vec![row("a", "s1", "10.0.0.1")]),
            ),
            (None, "none", Some(vec![])),
            (
                Some(Event::Apply(svc("a", "s0", "10.0.0.3"))),
                "a",
                Some(vec![row("a", "s0", "10.0.0.3"), row("a", "s1", "10.0.0.1")]),
            ),
            (
                Some(Event::Apply(svc("a", "s1", "10.0.0.9"))),
                "a",
                Some(vec![row("a", "s0", "10.0.0.3"), row("a", "s1", "10.0.0.9")]),
            ),
            (
                Some(Event::Delete(svc("a", "s0", ""))),
                "a",
                Some(vec![row("a", "s1", "10.0.0.9")]),
            ),
            // A relisting: the old cache answers until it ends, then what it listed.
            (
                Some(Event::Init),
                "b",
                Some(vec![row("b", "s2", "10.0.0.2")]),
            ),
            (
                Some(Event::InitApply(svc("a", "s1", "10.0.0.9"))),
                "b",
                Some(vec![row("b", "s2", "10.0.0.2")]),
            ),
            (Some(Event::InitDone), "b", Some(vec![])),
            (None, "a", Some(vec![row("a", "s1", "10.0.0.9")])),
        ];
        for (i, (event, ns, want)) in steps.into_iter().enumerate() {
            if let Some(event) = event {
                c.apply(event);
            }
            assert_eq!(seen(&c, ns), want, "step {i}");
        }
        c.end();
        assert_eq!(seen(&c, "a"), None, "after the watch ended");
    }

    #[test]
    fn a_service_is_kept_trimmed() {
        let (ns, name, kept) = trimmed(svc("a", "s", "10.0.0.1")).expect("named");
        assert_eq!((ns.as_str(), name.as_str()), ("a", "s"));
        assert_eq!(kept.metadata.labels, None);
        let spec = kept.spec.expect("spec");
        assert_eq!(spec.selector, None);
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.0.0.1"));
        assert_eq!(spec.ports.map(|p| p.len()), Some(1));
        let mut nameless = svc("a", "s", "10.0.0.1");
        nameless.metadata.name = None;
        assert!(trimmed(nameless).is_none());
    }
}
