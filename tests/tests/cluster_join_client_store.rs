//! Issue #32: the client certificate a kubelet with `rotateCertificates` starts from, chosen
//! as Go's client certificate store chooses it (`kubelet-client-current.pem`, else the
//! kubeconfig's certificate *files*, else embedded data taken as bootstrap data), in the
//! four cases of Go's `buildKubeletClientConfig` comment, with file-referenced and embedded
//! credentials, on the real control plane, counted in CSRs:
//!
//! | case | credentials | node CSRs | bootstrap CSRs |
//! |---|---|---|---|
//! | only a kubeconfig | files | 0 | – |
//! | only a kubeconfig | embedded | 1 (rotated at once) | – |
//! | only a bootstrap kubeconfig | – | 0 | 1 |
//! | both, kubeconfig valid | files | 0 | 0 |
//! | both, kubeconfig valid | embedded | 1 | 0 |
//! | both, kubeconfig expired | files | 0 | 1 |
//! | both, kubeconfig expired | embedded | 0 | 1 |
//!
//! The node certificate is the control plane's own (`node.crt`/`node.key`, signed by the
//! cluster CA, not through a CSR); the expired one is self-signed. A CSR of the node comes
//! within a second of a forced rotation; each case without one waits 5 s.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use join_common::{csrs_of, eventually, join_setup, token_id, JoinSetup, CLIENT_SIGNER};
use kubelet_sources::apiserver::certificate::bootstrap::Outcome;
use kubelet_sources::apiserver::certificate::{ClientCertConfig, ClientCertificates, FileStore};
use kubelet_sources::apiserver::client::ClientConfig;
use kubelet_tests::cluster::ControlPlane;
use tokio_util::sync::CancellationToken;

/// How many client CSRs `user` has made.
async fn client_csrs(admin: &kube::Client, user: &str) -> usize {
    csrs_of(admin, CLIENT_SIGNER, user).await.len()
}

/// How a case's kubeconfig carries its client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Creds {
    Files,
    Embedded,
}

/// Writes `path`: the cluster, and a user with `cert`/`key` (PEM files) as files or
/// embedded.
fn write_kubeconfig(path: &Path, cp: &ControlPlane, cert: &Path, key: &Path, creds: Creds) {
    let b64 =
        |p: &Path| base64::engine::general_purpose::STANDARD.encode(std::fs::read(p).unwrap());
    let user = match creds {
        Creds::Files => format!(
            "client-certificate: {}\n    client-key: {}",
            cert.display(),
            key.display()
        ),
        Creds::Embedded => format!(
            "client-certificate-data: {}\n    client-key-data: {}",
            b64(cert),
            b64(key)
        ),
    };
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: node\n  user:\n    {user}\ncontexts:\n- name: node\n  context: {{cluster: c, user: node}}\ncurrent-context: node\n",
            cp.apiserver_url(),
            cp.ca_cert_path().display()
        ),
    )
    .unwrap();
}

/// A self-signed `system:node:<node>` certificate that expired in 2020: (cert, key) files.
fn expired_pair(dir: &Path, node: &str) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2020, 1, 2);
    let cert = params.self_signed(&key).unwrap();
    let (c, k) = (dir.join("expired.crt"), dir.join("expired.key"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (c, k)
}

struct Case {
    name: &'static str,
    /// The kubeconfig: (valid, how); `None`: none.
    kubeconfig: Option<(bool, Creds)>,
    bootstrap: bool,
    /// Bootstrap's outcome (`None`: no bootstrap kubeconfig).
    outcome: Option<Outcome>,
    /// CSRs by the node and by the bootstrap token.
    node_csrs: usize,
    bootstrap_csrs: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_store_falls_back_to_the_kubeconfigs_files_as_go_does() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        ..
    }) = join_setup("join-client-store", false, "").await
    else {
        return;
    };
    let identity = cp.node_identity(&node).await.unwrap();
    let (expired_cert, expired_key) = expired_pair(et.dir.path(), &node);
    let bootstrap = cp.bootstrap_kubeconfig("1h").await.unwrap();
    let token_id = token_id(&bootstrap);
    let node_user = format!("system:node:{node}");
    let bootstrap_user = format!("system:bootstrap:{token_id}");
    use Creds::{Embedded, Files};
    let cases = [
        Case {
            name: "only a kubeconfig, files",
            kubeconfig: Some((true, Files)),
            bootstrap: false,
            outcome: None,
            node_csrs: 0,
            bootstrap_csrs: 0,
        },
        Case {
            name: "only a kubeconfig, embedded",
            kubeconfig: Some((true, Embedded)),
            bootstrap: false,
            outcome: None,
            node_csrs: 1,
            bootstrap_csrs: 0,
        },
        Case {
            name: "only a bootstrap kubeconfig",
            kubeconfig: None,
            bootstrap: true,
            outcome: Some(Outcome::Bootstrapped),
            node_csrs: 0,
            bootstrap_csrs: 1,
        },
        Case {
            name: "both, the kubeconfig valid, files",
            kubeconfig: Some((true, Files)),
            bootstrap: true,
            outcome: Some(Outcome::KubeconfigValid),
            node_csrs: 0,
            bootstrap_csrs: 0,
        },
        Case {
            name: "both, the kubeconfig valid, embedded",
            kubeconfig: Some((true, Embedded)),
            bootstrap: true,
            outcome: Some(Outcome::KubeconfigValid),
            node_csrs: 1,
            bootstrap_csrs: 0,
        },
        Case {
            name: "both, the kubeconfig expired, files",
            kubeconfig: Some((false, Files)),
            bootstrap: true,
            outcome: Some(Outcome::Bootstrapped),
            node_csrs: 0,
            bootstrap_csrs: 1,
        },
        Case {
            name: "both, the kubeconfig expired, embedded",
            kubeconfig: Some((false, Embedded)),
            bootstrap: true,
            outcome: Some(Outcome::Bootstrapped),
            node_csrs: 0,
            bootstrap_csrs: 1,
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let dir = et.dir.path().join(format!("case-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubelet.kubeconfig");
        if let Some((valid, creds)) = case.kubeconfig {
            let (cert, key) = if valid {
                (
                    identity.client_cert.as_path(),
                    identity.client_key.as_path(),
                )
            } else {
                (expired_cert.as_path(), expired_key.as_path())
            };
            write_kubeconfig(&kubeconfig, &cp, cert, key, creds);
        }
        let cert_dir = dir.join("pki");
        let before = (
            client_csrs(&admin, &node_user).await,
            client_csrs(&admin, &bootstrap_user).await,
        );
        let certs = ClientCertificates::load(&ClientCertConfig {
            client: ClientConfig::new(&kubeconfig),
            bootstrap_kubeconfig: case.bootstrap.then(|| bootstrap.clone()),
            cert_dir: cert_dir.clone(),
            node_name: node.clone(),
            rotate: true,
            bootstrap_timeout: Duration::from_secs(120),
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(certs.bootstrap, case.outcome, "{}", case.name);
        let manager = certs.manager.clone().expect("rotation is on");
        let initial = manager.current().expect("a certificate to start from");
        let shutdown = CancellationToken::new();
        let tasks = certs.start(&shutdown);
        let counts = || async {
            (
                client_csrs(&admin, &node_user).await - before.0,
                client_csrs(&admin, &bootstrap_user).await - before.1,
            )
        };
        if case.node_csrs > 0 {
            eventually(
                Duration::from_secs(30),
                "the forced rotation's CSR",
                || async { (counts().await.0 >= case.node_csrs).then_some(()) },
            )
            .await;
            eventually(
                Duration::from_secs(30),
                "the rotated certificate",
                || async {
                    manager
                        .current()
                        .filter(|c| c.cert_pem != initial.cert_pem)
                        .map(|_| ())
                },
            )
            .await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            counts().await,
            (case.node_csrs, case.bootstrap_csrs),
            "{}: (node CSRs, bootstrap CSRs)",
            case.name
        );
        let store = FileStore::new("kubelet-client", &cert_dir);
        let written = store.current_path().exists();
        // The kubeconfig's files are the current certificate as they are: nothing is
        // written into the cert dir; every other case has its certificate there.
        let files_current = case.kubeconfig.is_some_and(|k| k == (true, Files));
        assert_eq!(written, !files_current, "{}: cert dir written", case.name);
        if files_current {
            let on_disk = std::fs::read_to_string(&identity.client_cert).unwrap();
            assert_eq!(
                initial.cert_pem.trim(),
                on_disk.trim(),
                "{}: the kubeconfig's certificate is current",
                case.name
            );
        }
        shutdown.cancel();
        for t in tasks {
            let _ = t.await;
        }
    }
    join_common::cleanup(&cp, &node, &et.namespace);
}
