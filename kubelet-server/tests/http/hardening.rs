//! The server under hostile or idle clients (a hung client, big bodies, idle and half-open
//! connections) and with handlers switched off.

use super::*;

#[tokio::test]
async fn a_hung_client_does_not_block_others_and_big_bodies_are_refused() {
    let n = node().await;
    let s = start_secure(&n, AuthConfig::allow_all(), None).await;
    // Connects and never says anything (not even the TLS hello).
    let _hung = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let _hung2 = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let c = client(&s, None);
    let (code, _) = get(&c, &url(&s, "/healthz"), None).await;
    assert_eq!(code, 200);
    let r = c
        .post(url(&s, "/run/default/web/app?cmd=ls"))
        .body(vec![0u8; 2 * 1024 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let _ = AlwaysAllow;
    n.shutdown.cancel();
}

async fn start_secure_with(
    n: &Node,
    auth: AuthConfig,
    client_ca: Option<&Ca>,
    limits: kubelet_server::ServerLimits,
    handlers: kubelet_server::HandlerOptions,
) -> Server {
    let certs = tempfile::tempdir().unwrap();
    let ca_file = client_ca.map(|ca| {
        let p = certs.path().join("client-ca.crt");
        std::fs::write(&p, ca.cert.pem()).unwrap();
        p
    });
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: certs.path().join("pki"),
        host_name: "node-1".into(),
        client_ca_file: ca_file,
        ..Default::default()
    })
    .unwrap();
    let server_ca = std::fs::read(certs.path().join("pki/kubelet.crt")).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let host = Arc::new(TestHost {
        handle: n.handle.clone(),
        node_logs: n.node_logs.path().into(),
    });
    let config = ServerConfig {
        tls: Some(tls),
        auth,
        limits,
        handlers,
        ..ServerConfig::plain(Endpoints::Full)
    };
    tokio::spawn(kubelet_server::serve_with(
        listener,
        host,
        config,
        n.shutdown.clone(),
    ));
    Server {
        addr,
        server_ca,
        _certs: certs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_open_connections_do_not_lock_out_authenticated_clients() {
    let n = node().await;
    let client_ca = ca("clients");
    let auth = AuthConfig {
        anonymous: false,
        ..AuthConfig::allow_all()
    };
    let limits = kubelet_server::ServerLimits {
        max_unauthenticated_per_address: 32,
        max_unauthenticated: 64,
        ..Default::default()
    };
    let s = start_secure_with(
        &n,
        auth,
        Some(&client_ca),
        limits,
        kubelet_server::HandlerOptions::default(),
    )
    .await;
    let alice = client_pem(&client_ca, "alice", &["admins"]);
    let mut idle = Vec::new();
    for round in 0..3 {
        // 150 connections that never speak, every round.
        for _ in 0..150 {
            idle.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
        }
        // A fresh authenticated client still gets in, quickly.
        let c = client(&s, Some(&alice));
        let started = kubelet_core::clock::monotonic_now();
        let (code, body) = get(&c, &url(&s, "/pods"), None).await;
        assert_eq!(code, 200, "round {round}: {body}");
        let (code, _) = get(&c, &url(&s, "/healthz"), None).await;
        assert_eq!(code, 200);
        assert!(
            kubelet_core::clock::elapsed(started) < Duration::from_secs(1),
            "round {round}: {:?}",
            kubelet_core::clock::elapsed(started)
        );
    }
    // An authenticated keep-alive connection is never evicted by later floods.
    let c = client(&s, Some(&alice));
    assert_eq!(get(&c, &url(&s, "/pods"), None).await.0, 200);
    for _ in 0..200 {
        idle.push(tokio::net::TcpStream::connect(s.addr).await.unwrap());
    }
    assert_eq!(get(&c, &url(&s, "/pods"), None).await.0, 200);
    // Unauthenticated clients get nothing.
    assert_eq!(get(&client(&s, None), &url(&s, "/pods"), None).await.0, 401);
    drop(idle);
    n.shutdown.cancel();
}

#[tokio::test]
async fn switched_off_handlers_answer_as_go() {
    let n = node().await;
    let handlers = kubelet_server::HandlerOptions {
        debugging_handlers: false,
        ..Default::default()
    };
    let s = start_secure_with(
        &n,
        AuthConfig::allow_all(),
        None,
        Default::default(),
        handlers,
    )
    .await;
    let c = client(&s, None);
    for path in [
        "/exec/default/web/app?command=ls",
        "/run/default/web/app",
        "/attach/default/web/app",
        "/portForward/default/web",
        "/containerLogs/default/web/app",
        "/runningpods/",
        "/logs/",
        "/debug/pprof/",
    ] {
        let (code, body) = get(&c, &url(&s, path), None).await;
        assert_eq!(
            (code, body.as_str()),
            (405, "Debug endpoints are disabled.\n"),
            "{path}"
        );
    }
    assert_eq!(get(&c, &url(&s, "/configz"), None).await.0, 404);
    assert_eq!(get(&c, &url(&s, "/pods"), None).await.0, 200);
    assert_eq!(get(&c, &url(&s, "/healthz"), None).await.0, 200);

    let handlers = kubelet_server::HandlerOptions {
        system_log_handler: false,
        profiling_handler: false,
        debug_flags_handler: false,
        ..Default::default()
    };
    let s = start_secure_with(
        &n,
        AuthConfig::allow_all(),
        None,
        Default::default(),
        handlers,
    )
    .await;
    let c = client(&s, None);
    let cases = [
        ("/logs/", "logs endpoint is disabled.\n"),
        ("/debug/pprof/", "profiling endpoint is disabled.\n"),
        ("/debug/flags/v", "flags endpoint is disabled.\n"),
    ];
    for (path, want) in cases {
        let (code, body) = get(&c, &url(&s, path), None).await;
        assert_eq!((code, body.as_str()), (405, want), "{path}");
    }
    assert_eq!(get(&c, &url(&s, "/configz"), None).await.0, 200);
    assert_eq!(
        get(&c, &url(&s, "/containerLogs/default/web/app"), None)
            .await
            .0,
        200
    );
    n.shutdown.cancel();
}
