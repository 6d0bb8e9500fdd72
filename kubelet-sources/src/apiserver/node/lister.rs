//! The Node object as the API server has it (Go's node informer): a watch on `nodes` with the
//! field selector `metadata.name=<node>` keeps the latest copy in a [`NodeCache`], which is
//! the engine's [`NodeLister`]: admission matches node selectors and affinity against the
//! Node's current labels (labels others add with kubectl count at once) and counts the
//! extended resources its status advertises.
//!
//! The cache is empty until the first list; a Node deleted (or missing from a relist) empties
//! it, and admission then falls back to the kubelet's own labels. While the API server is
//! unreachable the last copy stays (the watcher retries with backoff).

use std::sync::{Arc, RwLock};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use kubelet_core::NodeLister;
use tokio_util::sync::CancellationToken;

use crate::reflector_backoff::ReflectorBackoff;

/// The latest copy of this kubelet's Node. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct NodeCache {
    current: Arc<RwLock<Option<Arc<Node>>>>,
    /// Whether a list is in progress and whether it has seen the Node.
    listing: Arc<RwLock<Option<bool>>>,
}

impl NodeCache {
    fn set(&self, node: Option<Arc<Node>>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = node;
    }

    /// Applies one watcher event.
    pub fn apply(&self, event: Event<Node>) {
        let mut listing = self.listing.write().unwrap_or_else(|e| e.into_inner());
        match event {
            Event::Init => *listing = Some(false),
            Event::InitApply(n) => {
                *listing = Some(true);
                self.set(Some(Arc::new(n)));
            }
            Event::InitDone => {
                if *listing == Some(false) {
                    self.set(None);
                }
                *listing = None;
            }
            Event::Apply(n) => self.set(Some(Arc::new(n))),
            Event::Delete(_) => self.set(None),
        }
    }

    /// Watches the Node `node_name` over `client` until `shutdown`.
    pub async fn run(self, client: kube::Client, node_name: String, shutdown: CancellationToken) {
        let api: Api<Node> = Api::all(client);
        let cfg = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
        let mut stream = watcher::watcher(api, cfg)
            .backoff(ReflectorBackoff::new())
            .boxed();
        let mut failing = false;
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                n = stream.try_next() => n,
            };
            match next {
                Ok(Some(e)) => {
                    // `Init` opens a listing, which may yet fail.
                    if failing && !matches!(e, Event::Init) {
                        tracing::info!(node = %node_name, "node watch recovered");
                        failing = false;
                    }
                    self.apply(e);
                }
                Ok(None) => {
                    tracing::warn!(node = %node_name, "the node watch ended");
                    return;
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(node = %node_name, error = %e, "node watch failed; keeping the last copy and retrying");
                    }
                    failing = true;
                }
            }
        }
    }
}

impl NodeLister for NodeCache {
    fn node(&self) -> Option<Arc<Node>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(label: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                labels: Some([(label.to_string(), "1".to_string())].into_iter().collect()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn label(c: &NodeCache) -> Option<String> {
        c.node()
            .and_then(|n| n.metadata.labels.clone())
            .and_then(|l| l.keys().next().cloned())
    }

    #[test]
    fn follows_lists_updates_and_deletes() {
        let c = NodeCache::default();
        assert_eq!(label(&c), None, "empty before the first list");
        c.apply(Event::Init);
        c.apply(Event::InitApply(node("a")));
        c.apply(Event::InitDone);
        assert_eq!(label(&c).as_deref(), Some("a"));
        c.apply(Event::Apply(node("b")));
        assert_eq!(
            label(&c).as_deref(),
            Some("b"),
            "a label added by someone else"
        );
        c.apply(Event::Delete(node("b")));
        assert_eq!(label(&c), None);
        c.apply(Event::Apply(node("c")));
        // A relist that no longer finds the Node empties the cache; one that does keeps it.
        c.apply(Event::Init);
        assert_eq!(
            label(&c).as_deref(),
            Some("c"),
            "kept while the relist runs"
        );
        c.apply(Event::InitDone);
        assert_eq!(label(&c), None);
        c.apply(Event::Init);
        c.apply(Event::InitApply(node("d")));
        c.apply(Event::InitDone);
        assert_eq!(label(&c).as_deref(), Some("d"));
    }
}
