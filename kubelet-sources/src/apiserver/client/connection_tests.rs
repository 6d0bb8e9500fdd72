//! The clients' connections against a local TLS server that offers `h2` and `http/1.1` in
//! ALPN, as kube-apiserver does, and answers every request with
//! `<client CN> <connection number> <HTTP version>` (trimmed: no CN, no leading space): requests share one HTTP/2 connection,
//! each watch takes an HTTP/1.1 connection of its own, the heartbeat's client speaks HTTP/1.1
//! only, and a rotated identity reaches the HTTP/2 connection's requests.

use std::convert::Infallible;
use std::time::Duration;

use futures::{AsyncBufReadExt, StreamExt};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};

use super::connection::{is_watch, Protocols, Stack};
use super::rotation_tests::{accept_tls, Pki};
use super::*;

type TestBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `/whoami` (one line) and `/stream` (six lines, 100 ms apart); client certificates
/// are asked for but not required.
async fn serve(pki: &Pki) -> u16 {
    serve_as(pki, "127.0.0.1").await
}

/// [`serve`] with a certificate for `name` only.
async fn serve_as(pki: &Pki, name: &str) -> u16 {
    let acceptor = pki.acceptor(name, true, &[b"h2", b"http/1.1"]);
    accept_tls(acceptor, |tls, cn, n| async move {
        let answer = hyper::service::service_fn(move |req: http::Request<_>| {
            let me = format!("{cn} {n} {:?}\n", req.version());
            async move {
                let body: TestBody = if req.uri().path() == "/stream" {
                    let lines = futures::stream::iter(0..6).then(move |i| {
                        let me = me.clone();
                        async move {
                            if i > 0 {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            Ok::<_, Infallible>(Frame::data(Bytes::from(me)))
                        }
                    });
                    BodyExt::boxed(StreamBody::new(lines))
                } else {
                    BodyExt::boxed(Full::new(Bytes::from(me)))
                };
                Ok::<_, Infallible>(http::Response::new(body))
            }
        });
        let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(hyper_util::rt::TokioIo::new(tls), answer)
            .await;
    })
    .await
}

fn config(pki: &Pki, port: u16) -> kube::Config {
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(vec![pki.ca.der().to_vec()]);
    config
}

fn client(
    config: &kube::Config,
    identity: Option<&ClientIdentity>,
    protocols: Protocols,
) -> kube::Client {
    Stack {
        config,
        identity,
        limiter: Some(RateLimitLayer::new(50.0, 100)),
        protocols,
    }
    .build()
    .unwrap()
}

async fn get(client: &kube::Client, path: &str) -> String {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request_text(req).await.unwrap().trim().to_string()
}

#[tokio::test]
async fn requests_share_one_http2_connection_and_each_watch_has_its_own() {
    let pki = Pki::new();
    let port = serve(&pki).await;
    let client = client(&config(&pki, port), None, Protocols::Multiplexed);

    assert_eq!(get(&client, "/whoami").await, "1 HTTP/2.0");
    // Twenty at once: one connection, no new handshake.
    let answers =
        futures::future::join_all((0..20).map(|_| get(&client, "/api/v1/pods?limit=1"))).await;
    assert!(answers.iter().all(|a| a == "1 HTTP/2.0"), "{answers:?}");

    // Two watches at once, each on an HTTP/1.1 connection of its own; requests stay on the
    // HTTP/2 connection meanwhile.
    let watch = |path: &'static str| {
        let client = client.clone();
        async move {
            let req = http::Request::get(path).body(Vec::new()).unwrap();
            client.request_stream(req).await.unwrap().lines()
        }
    };
    let mut first = watch("/stream?watch=true").await;
    let mut second = watch("/stream?resourceVersion=5&watch=1").await;
    let a = first.next().await.unwrap().unwrap();
    let b = second.next().await.unwrap().unwrap();
    assert!(
        a.ends_with(" HTTP/1.1") && b.ends_with(" HTTP/1.1"),
        "{a} / {b}"
    );
    assert_ne!(a, b, "two watches, two connections");
    assert_eq!(get(&client, "/whoami").await, "1 HTTP/2.0");
    assert_eq!(first.count().await, 5);
    assert_eq!(second.count().await, 5);
}

#[tokio::test]
async fn the_heartbeat_client_speaks_http1_only() {
    let pki = Pki::new();
    let port = serve(&pki).await;
    let client = client(&config(&pki, port), None, Protocols::Http1);
    assert_eq!(get(&client, "/whoami").await, "1 HTTP/1.1");
    assert_eq!(get(&client, "/whoami").await, "1 HTTP/1.1", "kept alive");
}

#[tokio::test]
async fn a_rotated_identity_moves_requests_to_a_new_http2_connection() {
    let pki = Pki::new();
    let port = serve(&pki).await;
    let (a, b) = (pki.issue("node-a", &[]), pki.issue("node-b", &[]));
    let identity = ClientIdentity::new(Some(&a)).unwrap();
    let client = client(&config(&pki, port), Some(&identity), Protocols::Multiplexed);

    assert_eq!(get(&client, "/whoami").await, "node-a 1 HTTP/2.0");
    let req = http::Request::get("/stream?watch=true")
        .body(Vec::new())
        .unwrap();
    let mut watch = client.request_stream(req).await.unwrap().lines();
    assert_eq!(watch.next().await.unwrap().unwrap(), "node-a 2 HTTP/1.1");

    identity.set(&b).unwrap();
    assert_eq!(get(&client, "/whoami").await, "node-b 3 HTTP/2.0");
    assert_eq!(get(&client, "/whoami").await, "node-b 3 HTTP/2.0");
    // The watch begun before goes on on its connection to its end.
    let rest: Vec<String> = watch.map(|l| l.unwrap()).collect().await;
    assert_eq!(rest, vec!["node-a 2 HTTP/1.1"; 5]);
}

#[tokio::test]
async fn the_kubeconfigs_tls_server_name_is_checked_in_place_of_the_hosts() {
    let pki = Pki::new();
    let port = serve_as(&pki, "apiserver.test").await;
    let a = pki.issue("node-a", &[]);
    let identity = ClientIdentity::new(Some(&a)).unwrap();
    let mut named = config(&pki, port);
    named.tls_server_name = Some("apiserver.test".to_string());
    for (config, identity, answer) in [
        (&named, None, "1 HTTP/2.0"),
        (&named, Some(&identity), "node-a 2 HTTP/2.0"),
    ] {
        let client = client(config, identity, Protocols::Multiplexed);
        assert_eq!(get(&client, "/whoami").await, answer);
    }
    // Without it the certificate is checked against 127.0.0.1, and refused.
    let client = client(&config(&pki, port), None, Protocols::Multiplexed);
    let req = http::Request::get("/whoami").body(Vec::new()).unwrap();
    assert!(client.request_text(req).await.is_err());
}

#[test]
fn watches_are_told_from_other_requests_by_their_query() {
    for (uri, watch) in [
        ("/api/v1/pods?watch=true", true),
        (
            "/api/v1/pods?fieldSelector=spec.nodeName%3Dn&watch=1&resourceVersion=7",
            true,
        ),
        (
            "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dx&watch=true",
            true,
        ),
        ("/api/v1/pods", false),
        ("/api/v1/pods?watch=false", false),
        ("/api/v1/pods?allowWatchBookmarks=true", false),
        ("/api/v1/namespaces/watch=true/pods", false),
        ("/api/v1/pods?labelSelector=watch%3Dtrue", false),
    ] {
        let uri: http::Uri = uri.parse().unwrap();
        assert_eq!(is_watch(&uri), watch, "{uri}");
    }
}
