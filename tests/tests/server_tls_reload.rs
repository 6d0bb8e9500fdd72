//! The secure port's certificate and client CA files replaced on disk while the kubelet runs
//! (the listeners as `kubelet_bin::server` starts them, over the real engine): new
//! connections get the new serving certificate (its serial, read by a TLS client), a client
//! certificate signed by the new CA is accepted and one signed only by the old CA is refused
//! (401) after the reload, which comes within the file check interval (10s; Go's dynamic
//! certificate files are re-read on change and at least every minute).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use kubelet_tests::engine::EngineTest;
use tokio_util::sync::CancellationToken;

struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, name);
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A leaf signed by `ca` (PEM cert, PEM key) with this serial.
fn leaf(ca: &Ca, cn: &str, serial: u64, server: bool) -> (String, String) {
    let sans = if server {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        Vec::new()
    };
    let mut p = rcgen::CertificateParams::new(sans).unwrap();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.serial_number = Some(rcgen::SerialNumber::from(serial.to_be_bytes().to_vec()));
    p.extended_key_usages = vec![if server {
        rcgen::ExtendedKeyUsagePurpose::ServerAuth
    } else {
        rcgen::ExtendedKeyUsagePurpose::ClientAuth
    }];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.cert, &ca.key).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Replaces `path` through a rename, as configuration management tools do.
fn replace(path: &Path, data: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, data).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The serial (hex, upper case) of the certificate served on `127.0.0.1:port`, read on a new
/// connection by a TLS client (`openssl s_client`).
async fn served_serial(port: u16) -> Option<String> {
    let out = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .await
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .strip_prefix("serial=")
        .map(|s| s.trim_start_matches('0').to_ascii_uppercase())
}

/// The status of `GET /pods` with this client certificate, on a new connection.
async fn status_with(port: u16, identity: &(String, String)) -> u16 {
    let id =
        reqwest::Identity::from_pem(format!("{}{}", identity.0, identity.1).as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .identity(id)
        .danger_accept_invalid_certs(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    client
        .get(format!("https://127.0.0.1:{port}/pods"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

async fn within(timeout: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let t0 = kubelet_core::clock::monotonic_now();
    loop {
        if check().await {
            return kubelet_core::clock::elapsed(t0);
        }
        assert!(
            kubelet_core::clock::elapsed(t0) < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaced_certificate_and_client_ca_files_are_used_by_new_connections() {
    let Some(et) = EngineTest::new("tls-reload").await else {
        return;
    };
    let dir = et.dir.path().join("tls");
    std::fs::create_dir_all(&dir).unwrap();
    let (serving_ca, old_ca, new_ca) = (ca("serving"), ca("clients-old"), ca("clients-new"));
    let (cert, key, client_ca) = (
        dir.join("kubelet.crt"),
        dir.join("kubelet.key"),
        dir.join("client-ca.crt"),
    );
    let first = leaf(&serving_ca, "kubelet-first", 0x1111, true);
    std::fs::write(&cert, &first.0).unwrap();
    std::fs::write(&key, &first.1).unwrap();
    std::fs::write(&client_ca, old_ca.cert.pem()).unwrap();
    let old_client = leaf(&old_ca, "system:admin", 0x2222, false);
    let new_client = leaf(&new_ca, "system:admin", 0x3333, false);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let config = dir.join("kubelet-conf.yml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailSwapOn: false\n\
             healthzPort: 0\nreadOnlyPort: 0\naddress: 127.0.0.1\nport: {port}\n\
             tlsCertFile: {}\ntlsPrivateKeyFile: {}\n\
             authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    enabled: false\n  \
             x509:\n    clientCAFile: {}\nauthorization:\n  mode: AlwaysAllow\n",
            cert.display(),
            key.display(),
            client_ca.display()
        ),
    )
    .unwrap();
    let argv = [
        "kubelet".to_string(),
        format!("--config={}", config.display()),
        format!("--root-dir={}", et.dir.path().join("kubelet").display()),
    ]
    .map(OsString::from);
    let loaded = kubelet_bin::config::load_with_hostname(argv, || Ok("tls-reload".into()))
        .expect("the command line loads");
    let k = et.start(Vec::new());
    let shutdown = CancellationToken::new();
    kubelet_bin::server::start_servers_with(
        &loaded,
        &k.handle,
        None,
        kubelet_bin::server::ClusterServers::default(),
        &shutdown,
    )
    .await
    .expect("listeners start");

    // Before: the first certificate, the old CA's clients.
    within(
        Duration::from_secs(10),
        "the first certificate",
        async || served_serial(port).await.as_deref() == Some("1111"),
    )
    .await;
    assert_eq!(status_with(port, &old_client).await, 200);
    assert_eq!(status_with(port, &new_client).await, 401);

    // Replace all three files.
    let second = leaf(&serving_ca, "kubelet-second", 0x4444, true);
    replace(&key, &second.1);
    replace(&cert, &second.0);
    replace(&client_ca, &new_ca.cert.pem());
    let took = within(Duration::from_secs(15), "the new certificate", async || {
        served_serial(port).await.as_deref() == Some("4444")
    })
    .await;
    eprintln!(
        "new serving certificate served {:.1}s after the files changed",
        took.as_secs_f64()
    );
    let took = within(Duration::from_secs(15), "the new client CA", async || {
        status_with(port, &new_client).await == 200
    })
    .await;
    eprintln!(
        "new client CA in use {:.1}s after the certificate",
        took.as_secs_f64()
    );
    assert_eq!(status_with(port, &old_client).await, 401, "old CA only");
    // A file that does not parse leaves the current one in use.
    replace(&client_ca, "not a certificate");
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(status_with(port, &new_client).await, 200);
    assert_eq!(served_serial(port).await.as_deref(), Some("4444"));

    shutdown.cancel();
    k.stop().await;
}
