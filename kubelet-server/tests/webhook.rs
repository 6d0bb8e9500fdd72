//! TokenReview and SubjectAccessReview webhooks against a fake API server: request bodies,
//! credentials, answers, and the TTL caches.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use kubelet_server::auth::{
    request_attributes, ApiServerClient, Authorizer, Decision, TokenAuthenticator, UserInfo,
    WebhookAuthorizer, WebhookTokenAuthenticator,
};

/// (path, authorization header, body) of every request.
type Seen = Arc<Mutex<Vec<(String, String, serde_json::Value)>>>;

async fn fake_apiserver() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let s2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = l.accept().await.unwrap();
            let seen = s2.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let auth = req
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_string())
                            .unwrap_or_default();
                        let body: serde_json::Value = serde_json::from_slice(
                            &req.into_body().collect().await.unwrap().to_bytes(),
                        )
                        .unwrap();
                        seen.lock()
                            .unwrap()
                            .push((path.clone(), auth, body.clone()));
                        let answer = if path.ends_with("/tokenreviews") {
                            let ok = body["spec"]["token"] == "good";
                            serde_json::json!({"status": {"authenticated": ok, "user": {
                                "username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"],
                                "extra": {"authentication.kubernetes.io/pod-name": ["web-1"]}}}})
                        } else {
                            let ok = body["spec"]["user"] == "alice";
                            serde_json::json!({"status": {"allowed": ok, "reason": if ok { "" } else { "nope" }}})
                        };
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(
                            answer.to_string(),
                        ))))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (url, seen)
}

fn count(seen: &Seen, suffix: &str) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p.ends_with(suffix))
        .count()
}

#[tokio::test]
async fn token_reviews_are_sent_with_credentials_and_cached() {
    let (url, seen) = fake_apiserver().await;
    let client = ApiServerClient::new(&url, None, None, Some("kubelet-token".into())).unwrap();
    let authn = WebhookTokenAuthenticator::new(client.clone(), Duration::from_secs(120));
    for _ in 0..2 {
        let u = authn.authenticate_token("good").await.unwrap().unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.uid, "u-1");
        assert_eq!(u.groups, vec!["devs", "system:authenticated"]);
        // Go keeps the user's extra attributes for authorization.
        assert_eq!(
            u.extra.get("authentication.kubernetes.io/pod-name"),
            Some(&vec!["web-1".to_string()])
        );
        assert!(authn.authenticate_token("bad").await.unwrap().is_none());
    }
    assert_eq!(
        count(&seen, "/apis/authentication.k8s.io/v1/tokenreviews"),
        2
    );
    let first = seen.lock().unwrap()[0].clone();
    assert_eq!(first.1, "Bearer kubelet-token");
    assert_eq!(first.2["kind"], "TokenReview");
    // Without a cache every check asks.
    let uncached = WebhookTokenAuthenticator::new(client, Duration::ZERO);
    uncached.authenticate_token("good").await.unwrap();
    uncached.authenticate_token("good").await.unwrap();
    assert_eq!(count(&seen, "/tokenreviews"), 4);
}

#[tokio::test]
async fn access_reviews_are_cached_per_decision() {
    let (url, seen) = fake_apiserver().await;
    let client = ApiServerClient::new(&url, None, None, None).unwrap();
    // Allowed answers cached, denied ones not (zero TTL).
    let authz = WebhookAuthorizer::new(client, Duration::from_secs(300), Duration::ZERO);
    let user = |n: &str| UserInfo {
        name: n.into(),
        ..Default::default()
    };
    let alice = request_attributes(user("alice"), "node-1", "GET", "/stats/summary", false);
    let bob = request_attributes(user("bob"), "node-1", "GET", "/stats/summary", false);
    for _ in 0..2 {
        assert_eq!(authz.authorize(&alice).await.unwrap(), Decision::Allow);
        assert_eq!(
            authz.authorize(&bob).await.unwrap(),
            Decision::Deny("nope".into())
        );
    }
    assert_eq!(
        count(&seen, "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
        3
    );
    let body = seen.lock().unwrap()[0].2.clone();
    assert_eq!(body["spec"]["resourceAttributes"]["subresource"], "stats");
    assert_eq!(body["spec"]["resourceAttributes"]["verb"], "get");
    assert!(
        seen.lock().unwrap()[0].1.is_empty(),
        "no credentials configured"
    );
}

#[tokio::test]
async fn client_from_kubeconfig() {
    let (url, seen) = fake_apiserver().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tok"), "file-token\n").unwrap();
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: {url}\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\nusers:\n- name: u\n  user:\n    tokenFile: tok\n"
        ),
    )
    .unwrap();
    let client = ApiServerClient::from_kubeconfig(&kc).await.unwrap();
    let authn = WebhookTokenAuthenticator::new(client, Duration::ZERO);
    authn.authenticate_token("good").await.unwrap();
    assert_eq!(seen.lock().unwrap()[0].1, "Bearer file-token");
    assert!(
        ApiServerClient::from_kubeconfig(&dir.path().join("missing"))
            .await
            .is_err()
    );
}
