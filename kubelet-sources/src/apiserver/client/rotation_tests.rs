//! The rotating API client against a local TLS server that requires client certificates and
//! answers with the certificate's CN and the connection's number: after the identity changes,
//! a stream begun before keeps going on its connection, and every later request goes over a
//! connection presenting the new certificate.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::{AsyncBufReadExt, StreamExt};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt, BufReader};

use super::*;
use crate::apiserver::certificate::CertPair;

/// A CA that issues test certificates (also used by `connection_tests`).
pub(super) struct Pki {
    pub(super) ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    pub(super) fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "rotation-test-ca");
        let ca = p.self_signed(&ca_key).unwrap();
        Pki { ca, ca_key }
    }

    pub(super) fn issue(&self, cn: &str, sans: &[&str]) -> CertPair {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        CertPair::from_pem(&cert.pem(), &key.serialize_pem(), cn).unwrap()
    }
}

impl Pki {
    /// A TLS acceptor whose certificate is for `name` only, offering `alpn`, asking for client
    /// certificates of this CA: required, or (`optional`) a client may come without one.
    pub(super) fn acceptor(
        &self,
        name: &str,
        optional: bool,
        alpn: &[&[u8]],
    ) -> tokio_rustls::TlsAcceptor {
        let server = self.issue(name, &[name]);
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        );
        let verifier = if optional {
            verifier.allow_unauthenticated()
        } else {
            verifier
        }
        .build()
        .unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(server.chain.clone(), server.key_der().unwrap())
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }
}

/// A TLS server on a free port of `127.0.0.1` (returned): each connection's stream goes to
/// `handle` on a task of its own, with the client certificate's CN and the connection's number
/// (from 1).
pub(super) async fn accept_tls<F, Fut>(acceptor: tokio_rustls::TlsAcceptor, handle: F) -> u16
where
    F: Fn(tokio_rustls::server::TlsStream<tokio::net::TcpStream>, String, usize) -> Fut
        + Send
        + Sync
        + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = Arc::new(handle);
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let handle = handle.clone();
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let cn = peer_cn(tls.get_ref().1);
                handle(tls, cn, n).await;
            });
        }
    });
    port
}

/// Serves `/whoami` (one line) and `/stream` (six lines, 100ms apart) with
/// `<client CN> <connection number>`, HTTP/1.1 keep-alive.
async fn serve(pki: &Pki) -> u16 {
    let acceptor = pki.acceptor("127.0.0.1", false, &[]);
    accept_tls(acceptor, |tls, cn, n| async move {
        let (r, mut w) = tokio::io::split(tls);
        let mut r = BufReader::new(r);
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).await.unwrap_or(0) == 0 {
                    return;
                }
                if h == "\r\n" {
                    break;
                }
            }
            let me = format!("{cn} {n}\n");
            if path == "/stream" {
                let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
                if w.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..6 {
                    let chunk = format!("{:x}\r\n{me}\r\n", me.len());
                    if w.write_all(chunk.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = w.flush().await;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                let _ = w.write_all(b"0\r\n\r\n").await;
            } else {
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{me}",
                    me.len()
                );
                if w.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
            let _ = w.flush().await;
        }
    })
    .await
}

/// The common name of the client certificate a TLS connection was opened with ("" without one).
fn peer_cn(conn: &rustls::ServerConnection) -> String {
    conn.peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| {
            let (_, cert) = x509_parser::parse_x509_certificate(c.as_ref()).ok()?;
            let cn = cert
                .subject()
                .iter_common_name()
                .next()?
                .as_str()
                .ok()?
                .to_string();
            Some(cn)
        })
        .unwrap_or_default()
}

async fn whoami(client: &kube::Client) -> String {
    let req = http::Request::get("/whoami").body(Vec::new()).unwrap();
    client.request_text(req).await.unwrap().trim().to_string()
}

#[tokio::test]
async fn rotation_switches_new_connections_and_lets_streams_finish() {
    let pki = Pki::new();
    let port = serve(&pki).await;
    let a = pki.issue("node-a", &[]);
    let b = pki.issue("node-b", &[]);
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(vec![pki.ca.der().to_vec()]);
    let identity = ClientIdentity::new(Some(&a)).unwrap();
    let client = connection::Stack {
        config: &config,
        identity: Some(&identity),
        limiter: None,
        protocols: connection::Protocols::Multiplexed,
    }
    .build()
    .unwrap();

    assert_eq!(whoami(&client).await, "node-a 1");
    assert_eq!(
        whoami(&client).await,
        "node-a 1",
        "the connection is reused"
    );

    // An idle connection is retired by the change.
    identity.set(&b).unwrap();
    assert_eq!(whoami(&client).await, "node-b 2");

    // A stream begun before the next change keeps its connection to the end.
    let req = http::Request::get("/stream").body(Vec::new()).unwrap();
    let mut lines = client.request_stream(req).await.unwrap().lines();
    let first = lines.next().await.unwrap().unwrap();
    assert_eq!(first, "node-b 2");
    identity.set(&a).unwrap();
    assert_eq!(
        whoami(&client).await,
        "node-a 3",
        "a new connection, the new identity"
    );
    let mut rest = Vec::new();
    while let Some(l) = lines.next().await {
        rest.push(l.unwrap());
    }
    assert_eq!(rest.len(), 5);
    assert!(rest.iter().all(|l| l == "node-b 2"), "{rest:?}");
    // The stream's connection went back retired: the current one serves.
    for _ in 0..3 {
        assert_eq!(whoami(&client).await, "node-a 3");
    }
    assert_eq!(identity.generation(), 2);
}
