//! The store against a fake API server (a tower service that counts requests): how often each
//! strategy reads an object from the API server, and a watch the API server refuses.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;

/// Answers GETs of secret `ns/s` (a new resourceVersion each time) and refuses every list or
/// watch (what an API server whose authorizer does not let the node watch would do).
#[derive(Default)]
struct RefusesWatches {
    gets: AtomicUsize,
    lists: AtomicUsize,
}

fn client(api: Arc<RefusesWatches>) -> Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let api = api.clone();
        async move {
            let listing = req.uri().query().unwrap_or("").contains("fieldSelector");
            let (code, body) = if listing {
                api.lists.fetch_add(1, Ordering::SeqCst);
                let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "Forbidden", "code": 403, "message": "watching is forbidden"});
                (403, status)
            } else {
                let version = api.gets.fetch_add(1, Ordering::SeqCst) + 1;
                let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {
                    "name": "s", "namespace": "ns", "resourceVersion": version.to_string()}});
                (200, secret)
            };
            let body = kube::client::Body::from(serde_json::to_vec(&body).expect("JSON"));
            let response = http::Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(body);
            Ok::<_, Infallible>(response.expect("a response"))
        }
    });
    Client::new(svc, "default")
}

fn pod_with_secret() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"volumes": [{"name": "v", "secret": {"secretName": "s"}}],
                 "containers": [{"name": "c"}]}
    }))
    .expect("pod")
}

/// Per strategy: the API server's GETs after a read, a second read at once, and a third a
/// minute later. `Watch` here is a watch the API server refuses: given up after
/// [`watch::GIVE_UP_AFTER`] tries, its object is read through Go's default TTL cache.
#[tokio::test(start_paused = true)]
async fn reads_reach_the_api_server_as_the_strategy_says() {
    let table = [
        (ChangeDetection::Get, [1, 2, 3]),
        (ChangeDetection::Cache(Duration::from_secs(60)), [1, 1, 2]),
        (ChangeDetection::Cache(Duration::from_secs(120)), [1, 1, 1]),
        (ChangeDetection::Watch, [1, 1, 2]),
    ];
    for (strategy, want) in table {
        let api = Arc::new(RefusesWatches::default());
        let store = ApiObjectStore::with_strategy(client(api.clone()), strategy);
        store.register_pod(&pod_with_secret());
        // Long enough for the watcher's back-off (0.8 s doubling) to try three times.
        tokio::time::sleep(Duration::from_secs(30)).await;
        let mut gets = Vec::new();
        for wait in [0, 0, 61] {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            let secret = store.secret("ns", "s").await.expect("secret");
            assert_eq!(secret.metadata.name.as_deref(), Some("s"));
            gets.push(api.gets.load(Ordering::SeqCst));
        }
        assert_eq!(
            gets,
            want,
            "{strategy:?} lists {}",
            api.lists.load(Ordering::SeqCst)
        );
        let (lists, watched) = match strategy {
            ChangeDetection::Watch => (watch::GIVE_UP_AFTER as usize, 1),
            _ => (0, 0),
        };
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(api.lists.load(Ordering::SeqCst), lists, "{strategy:?}");
        assert_eq!(store.watched_objects(), watched, "{strategy:?}");
        let unwatchable = store
            .lock()
            .watches
            .values()
            .all(|w| matches!(w.value, watch::Value::Unwatchable));
        assert!(unwatchable, "{strategy:?}: a refused watch is given up");
        store.unregister_pod("u");
        assert_eq!(store.watched_objects(), 0, "{strategy:?}");
    }
}
