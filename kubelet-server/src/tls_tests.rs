//! Tests of `tls`.

use super::*;

struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    fn new(cn: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        TestCa {
            cert: p.self_signed(&key).unwrap(),
            key,
        }
    }
    /// (cert PEM, key PEM)
    fn issue(&self, cn: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        let c = p.signed_by(&key, &self.cert, &self.key).unwrap();
        (c.pem(), key.serialize_pem())
    }
}

/// Writes through a temporary file and a rename, as tools replacing certificates do.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The CN of the certificate a handshake with `tls` gets; None when it fails.
async fn served_cn(tls: &ServerTls, ca: &TestCa) -> Option<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    tokio::spawn(async move {
        if let Ok((tcp, _)) = listener.accept().await {
            let _ = acceptor.accept(tcp).await;
        }
    });
    let mut roots = RootCertStore::empty();
    roots.add(ca.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = connector.connect(name, tcp).await.ok()?;
    let leaf = stream.get_ref().1.peer_certificates()?.first()?.clone();
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}

#[tokio::test]
async fn changed_files_are_served_to_new_connections() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("serving-ca");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (c, k) = ca.issue("first");
    std::fs::write(&crt, c).unwrap();
    std::fs::write(&key, k).unwrap();
    let clients = TestCa::new("clients-1");
    let other_clients = TestCa::new("clients-2");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, clients.cert.pem()).unwrap();
    let options = TlsOptions {
        cert_file: Some(crt.clone()),
        key_file: Some(key.clone()),
        client_ca_file: Some(ca_file.clone()),
        ..Default::default()
    };
    let tls = ServerTls::load(&options).unwrap();
    assert_eq!(served_cn(&tls, &ca).await.as_deref(), Some("first"));
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(
        tls.clone()
            .reload_files(options, Duration::from_millis(20), shutdown.clone()),
    );
    let client_of = |ca: &TestCa| {
        let (pem, _) = ca.issue("system:node:x");
        read_certs_pem(&pem)
    };
    let client_ca = tls.client_ca.clone().unwrap();
    assert!(matches!(
        client_ca.check(&client_of(&clients)),
        PeerCert::Verified(_)
    ));
    assert!(matches!(
        client_ca.check(&client_of(&other_clients)),
        PeerCert::Invalid(_)
    ));

    let (c, k) = ca.issue("second");
    replace(&key, &k);
    replace(&crt, &c);
    replace(&ca_file, &other_clients.cert.pem());
    let mut served = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        served = served_cn(&tls, &ca).await;
        if served.as_deref() == Some("second")
            && matches!(
                client_ca.check(&client_of(&other_clients)),
                PeerCert::Verified(_)
            )
        {
            break;
        }
    }
    assert_eq!(served.as_deref(), Some("second"));
    assert!(matches!(
        client_ca.check(&client_of(&other_clients)),
        PeerCert::Verified(_)
    ));
    assert!(matches!(
        client_ca.check(&client_of(&clients)),
        PeerCert::Invalid(_)
    ));

    // A broken file keeps the old pair.
    replace(&crt, "not a certificate");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(served_cn(&tls, &ca).await.as_deref(), Some("second"));
    shutdown.cancel();
}

fn read_certs_pem(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test]
async fn bootstrap_serves_nothing_until_a_certificate_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("serving-ca");
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: dir.path().into(),
        bootstrap: true,
        ..Default::default()
    })
    .unwrap();
    assert!(tls.serving.chain().is_none());
    assert!(
        !dir.path().join("kubelet.crt").exists(),
        "no self-signed pair"
    );
    assert_eq!(served_cn(&tls, &ca).await, None);
    let (c, k) = ca.issue("issued");
    tls.serving
        .set(
            read_certs_pem(&c),
            PrivateKeyDer::from_pem_slice(k.as_bytes()).unwrap(),
        )
        .unwrap();
    assert_eq!(served_cn(&tls, &ca).await.as_deref(), Some("issued"));
    // A key that is not the certificate's is refused.
    let (c2, _) = ca.issue("other");
    let (_, k2) = ca.issue("third");
    assert!(tls
        .serving
        .set(
            read_certs_pem(&c2),
            PrivateKeyDer::from_pem_slice(k2.as_bytes()).unwrap()
        )
        .is_err());
    assert_eq!(served_cn(&tls, &ca).await.as_deref(), Some("issued"));
}

#[test]
fn self_signed_pair_is_generated_once() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = ensure_self_signed(dir.path(), "node-a", &[]).unwrap();
    let first = std::fs::read(&crt).unwrap();
    let (crt2, _) = ensure_self_signed(dir.path(), "node-a", &[]).unwrap();
    assert_eq!(std::fs::read(crt2).unwrap(), first);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: dir.path().into(),
        host_name: "node-a".into(),
        ..Default::default()
    })
    .unwrap();
    assert!(tls.client_ca.is_none());
}

#[test]
fn versions_and_suites() {
    assert!(versions(Some("VersionTLS13")).unwrap().len() == 1);
    assert!(versions(None).unwrap().len() == 2);
    assert!(matches!(
        versions(Some("TLS9")),
        Err(TlsError::MinVersion(_))
    ));
    let p = provider(&TlsOptions {
        cipher_suites: vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into()],
        ..Default::default()
    })
    .unwrap();
    let tls12: Vec<String> = p
        .cipher_suites
        .iter()
        .filter(|s| s.tls13().is_none())
        .map(|s| format!("{:?}", s.suite()))
        .collect();
    assert_eq!(tls12, vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
    assert!(provider(&TlsOptions {
        cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305".into()],
        ..Default::default()
    })
    .is_ok());
    assert!(matches!(
        provider(&TlsOptions {
            cipher_suites: vec!["TLS_RSA_WITH_RC4_128_SHA".into()],
            ..Default::default()
        }),
        Err(TlsError::CipherSuite(_))
    ));
    assert!(matches!(
        ServerTls::load(&TlsOptions {
            cert_file: Some("/x".into()),
            ..Default::default()
        }),
        Err(TlsError::HalfPair)
    ));
}
