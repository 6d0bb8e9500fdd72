//! The kubelet server under load and abuse, over the real engine on containerd: hundreds of
//! idle and half-open connections to the secure port while authenticated requests and
//! healthz answer within a second, and 256 concurrent `logs -f` streams that do not lock out
//! exec.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_server::auth::AuthConfig;
use kubelet_server::tls::{ServerTls, TlsOptions};
use kubelet_server::{Endpoints, KubeletHost, ServerConfig};
use kubelet_tests::engine::{busybox, wait_running, EngineTest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

fn ca() -> Ca {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "abuse-clients");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

fn client_identity(ca: &Ca, cn: &str) -> reqwest::Identity {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    reqwest::Identity::from_pem(format!("{}{}", cert.pem(), key.serialize_pem()).as_bytes())
        .unwrap()
}

/// Opens a `v4.channel.k8s.io` WebSocket exec stream; returns the status line and stream.
async fn ws_upgrade(addr: SocketAddr, path_and_query: &str) -> (String, tokio::net::TcpStream) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        if s.read(&mut b).await.unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

/// The stdout channel of a WebSocket exec stream until the server closes it.
async fn ws_stdout(stream: &mut tokio::net::TcpStream) -> String {
    let mut out = Vec::new();
    loop {
        let mut head = [0u8; 2];
        if stream.read_exact(&mut head).await.is_err() {
            break;
        }
        let mut len = u64::from(head[1] & 0x7f);
        if len == 126 {
            let mut b = [0u8; 2];
            stream.read_exact(&mut b).await.unwrap();
            len = u64::from(u16::from_be_bytes(b));
        } else if len == 127 {
            let mut b = [0u8; 8];
            stream.read_exact(&mut b).await.unwrap();
            len = u64::from_be_bytes(b);
        }
        let mut payload = vec![0u8; usize::try_from(len).unwrap()];
        stream.read_exact(&mut payload).await.unwrap();
        if head[0] & 0x0f == 0x8 {
            break;
        }
        if payload.first() == Some(&1) {
            out.extend_from_slice(&payload[1..]);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_many_log_streams_do_not_lock_out_the_api() {
    let Some(t) = EngineTest::new("abuse").await else {
        return;
    };
    let uid = t.uid("chatty");
    let pod = t.pod(
        "chatty",
        &uid,
        vec![busybox(
            "app",
            "i=0; while true; do i=$((i+1)); echo line $i; sleep 0.2; done",
        )],
    );
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;
    let ns = t.namespace.clone();
    let host = Arc::new(KubeletHost::new(k.handle.clone()));

    // The secure port: client certificates only, no anonymous access.
    let certs = tempfile::tempdir().unwrap();
    let clients = ca();
    let ca_file = certs.path().join("clients.crt");
    std::fs::write(&ca_file, clients.cert.pem()).unwrap();
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: certs.path().join("pki"),
        host_name: "localhost".into(),
        client_ca_file: Some(ca_file),
        ..Default::default()
    })
    .unwrap();
    let server_ca = std::fs::read(certs.path().join("pki/kubelet.crt")).unwrap();
    let secure = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let secure_addr = secure.local_addr().unwrap();
    tokio::spawn(kubelet_server::serve_with(
        secure,
        host.clone(),
        ServerConfig {
            tls: Some(tls),
            auth: AuthConfig {
                anonymous: false,
                ..AuthConfig::allow_all()
            },
            ..ServerConfig::plain(Endpoints::Full)
        },
        k.shutdown.clone(),
    ));
    let identity = client_identity(&clients, "admin");
    let new_client = || {
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&server_ca).unwrap())
            .identity(identity.clone())
            .build()
            .unwrap()
    };
    let secure_url = |p: &str| format!("https://localhost:{}{p}", secure_addr.port());

    // Hundreds of idle connections, and half-open ones that sent a few bytes of a TLS hello.
    let mut idle = Vec::new();
    let mut worst = Duration::ZERO;
    for round in 0..4 {
        for i in 0..100 {
            let mut s = tokio::net::TcpStream::connect(secure_addr).await.unwrap();
            if i % 4 == 0 {
                let _ = s.write_all(&[0x16, 0x03, 0x01]).await;
            }
            idle.push(s);
        }
        for path in ["/pods", "/healthz"] {
            let started = kubelet_core::clock::monotonic_now();
            let r = new_client().get(secure_url(path)).send().await.unwrap();
            let took = kubelet_core::clock::elapsed(started);
            assert_eq!(r.status().as_u16(), 200, "round {round} {path}");
            assert!(
                took < Duration::from_secs(1),
                "round {round} {path}: {took:?}"
            );
            worst = worst.max(took);
        }
    }
    let idle_count = idle.len();
    drop(idle);

    // 256 concurrent `logs -f` streams on one listener, then exec on the same listener.
    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = plain.local_addr().unwrap();
    tokio::spawn(kubelet_server::serve_with(
        plain,
        host.clone(),
        ServerConfig::plain(Endpoints::Full),
        k.shutdown.clone(),
    ));
    let streams = 256;
    let started_streams = Arc::new(AtomicUsize::new(0));
    let chunks = Arc::new(AtomicUsize::new(0));
    let http = reqwest::Client::new();
    let mut followers = Vec::new();
    // Opened in waves, each started before the next: all 256 stay open together, while no
    // more than a wave is ever waiting for its first request (a burst of unauthenticated
    // connections from one address beyond the per-address limit would close the oldest).
    let wave = 32;
    let deadline = kubelet_core::clock::monotonic_now() + Duration::from_secs(60);
    for opened in (wave..=streams).step_by(wave) {
        for _ in 0..wave {
            let (http, started_streams, chunks) =
                (http.clone(), started_streams.clone(), chunks.clone());
            let url =
                format!("http://{addr}/containerLogs/{ns}/chatty/app?follow=true&tailLines=1");
            followers.push(tokio::spawn(async move {
                let mut resp = http.get(url).send().await.unwrap();
                assert_eq!(resp.status().as_u16(), 200);
                let mut first = true;
                while let Ok(Some(_)) = resp.chunk().await {
                    if first {
                        started_streams.fetch_add(1, Ordering::SeqCst);
                        first = false;
                    }
                    chunks.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        while started_streams.load(Ordering::SeqCst) < opened {
            assert!(
                kubelet_core::clock::monotonic_now() < deadline,
                "only {} streams started",
                started_streams.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let before = chunks.load(Ordering::SeqCst);
    let exec_started = kubelet_core::clock::monotonic_now();
    let (status, mut ws) = ws_upgrade(
        addr,
        &format!("/exec/{ns}/chatty/app?command=echo&command=hi&stdout=1"),
    )
    .await;
    assert!(status.starts_with("HTTP/1.1 101"), "{status}");
    let out = tokio::time::timeout(Duration::from_secs(20), ws_stdout(&mut ws))
        .await
        .expect("exec finishes while 256 log streams are open");
    let exec_took = kubelet_core::clock::elapsed(exec_started);
    assert_eq!(out, "hi\n");
    let started = kubelet_core::clock::monotonic_now();
    let (code, took) = {
        let r = http
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), kubelet_core::clock::elapsed(started))
    };
    assert_eq!(code, 200);
    assert!(took < Duration::from_secs(1), "healthz took {took:?}");
    // The streams are still flowing.
    let flowing = kubelet_core::clock::monotonic_now() + Duration::from_secs(10);
    while chunks.load(Ordering::SeqCst) < before + streams {
        assert!(
            kubelet_core::clock::monotonic_now() < flowing,
            "log streams stalled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "abuse: {idle_count} idle/half-open connections, slowest authenticated answer {worst:?}; \
         exec with {streams} log streams open took {exec_took:?}, healthz {took:?}"
    );
    for f in followers {
        f.abort();
    }
    k.stop().await;
}
