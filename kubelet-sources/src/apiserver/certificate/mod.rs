//! Node certificates (Go's `pkg/kubelet/certificate` and client-go's `util/certificate`): TLS
//! bootstrap of the client certificate, its rotation, and the serving certificate.
//!
//! - [`bootstrap`]: `--bootstrap-kubeconfig` → a CSR → `--kubeconfig` pointing at the cert
//!   dir (skipped when `--kubeconfig` is valid);
//! - [`manager`]: one [`manager::CertificateManager`] per certificate renews it at 70–90% of
//!   its lifetime, with backoff, keeping the old one until the new one is issued;
//! - [`transport`]: the API clients' changeable TLS identity ([`ClientIdentity`]): new
//!   connections use the new certificate, connections in flight finish on the old one;
//! - [`csr`], [`store`], [`pair`]: CSRs through `certificates.k8s.io/v1`, the cert dir
//!   (`kubelet-client-current.pem`, `kubelet-server-current.pem`), PEM pairs.
//!
//! [`ClientCertificates::start`] composes them for a kubelet's client certificate.

pub mod bootstrap;
pub mod csr;
pub mod manager;
pub mod pair;
pub mod store;
pub mod transport;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use csr::{CsrTemplate, Signer};
pub use manager::{CertificateManager, ManagerConfig, Signers};
pub use pair::CertPair;
pub use store::FileStore;
pub use transport::ClientIdentity;

use super::client::{ApiClients, ClientConfig};

/// Errors of certificate bootstrap and rotation.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig {
        /// The kubeconfig.
        path: String,
        /// What failed.
        message: String,
    },
    /// A certificate or key is unusable.
    #[error("{what}: {message}")]
    InvalidPair {
        /// What it was (a file, "the issued certificate").
        what: String,
        /// Why.
        message: String,
    },
    /// The cert dir could not be read or written.
    #[error("certificate store {path}: {message}")]
    Store {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// A CSR could not be made.
    #[error("making a certificate signing request: {0}")]
    Csr(String),
    /// An API request failed.
    #[error("{what}: {}", kubelet_core::display_chain(.error))]
    Request {
        /// What was requested.
        what: String,
        /// The cause.
        error: kube::Error,
    },
    /// A CSR of the bootstrap name exists but is not this kubelet's.
    #[error("certificate signing request {name} exists and is not compatible with this request")]
    Incompatible {
        /// The CSR.
        name: String,
    },
    /// The CSR was denied.
    #[error("certificate signing request {name} is denied, {why}")]
    Denied {
        /// The CSR.
        name: String,
        /// Reason and message.
        why: String,
    },
    /// The signer failed the CSR.
    #[error("certificate signing request {name} failed, {why}")]
    Failed {
        /// The CSR.
        name: String,
        /// Reason and message.
        why: String,
    },
    /// The CSR was deleted (or replaced) while waited for.
    #[error("certificate signing request {name} was deleted while waiting for it")]
    Deleted {
        /// The CSR.
        name: String,
    },
    /// The certificate was not issued in time.
    #[error("timed out after {timeout:?} waiting for certificate signing request {name} to be approved and issued")]
    Timeout {
        /// The CSR.
        name: String,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// A background task failed.
    #[error("certificate task: {0}")]
    Task(String),
    /// The API client could not be built.
    #[error("API client: {0}")]
    Client(String),
}

/// How a kubelet gets and keeps its client certificate.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCertConfig {
    /// The API clients (`--kubeconfig` and its limits).
    pub client: ClientConfig,
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: Option<PathBuf>,
    /// `--cert-dir`.
    pub cert_dir: PathBuf,
    /// The node name.
    pub node_name: String,
    /// `rotateCertificates`.
    pub rotate: bool,
    /// How long bootstrap waits for the certificate.
    pub bootstrap_timeout: Duration,
}

/// A kubelet's API clients with the certificate machinery behind them.
pub struct ClientCertificates {
    /// The API clients.
    pub clients: ApiClients,
    /// What bootstrap did (`None` without a bootstrap kubeconfig).
    pub bootstrap: Option<bootstrap::Outcome>,
    /// The rotating manager (`rotateCertificates`).
    pub manager: Option<Arc<CertificateManager>>,
    identity: Option<ClientIdentity>,
}

impl std::fmt::Debug for ClientCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificates")
            .field("bootstrap", &self.bootstrap)
            .field("rotating", &self.manager.is_some())
            .finish_non_exhaustive()
    }
}

/// The client certificate manager's starting point: the pair, and whether to rotate it at
/// once.
#[derive(Debug, Clone)]
pub struct Initial {
    /// The pair to start from (`None`: none yet; the manager requests one).
    pub pair: Option<CertPair>,
    /// Rotate at once (Go's `forceRotation`).
    pub force: bool,
}

/// Go's `getCurrentCertificateOrBootstrap` over the client store (blocking file IO):
/// 1. the store's current pair — `<cert dir>/kubelet-client-current.pem`, else the
///    kubeconfig's `client-certificate`/`client-key` files the store was built with, else
///    `kubelet-client.crt`/`.key` — while unexpired at `now`: kept, rotated at 70–90% of
///    its lifetime;
/// 2. else the kubeconfig's embedded `client-certificate-data`/`client-key-data`
///    (`embedded`), taken as bootstrap data: written to the store and rotated at once
///    (kubeadm's high-powered initial kubeconfig is meant to be replaced);
/// 3. else nothing: a certificate is requested at once.
pub fn initial_pair(
    store: &FileStore,
    embedded: Option<(String, String)>,
    now: i64,
) -> Result<Initial, CertError> {
    if let Some(p) = store.current()? {
        if now < p.not_after {
            return Ok(Initial {
                pair: Some(p),
                force: false,
            });
        }
        tracing::info!(
            expired = p.not_after,
            "the current client certificate has expired"
        );
    }
    let Some((cert, key)) = embedded else {
        return Ok(Initial {
            pair: None,
            force: true,
        });
    };
    let pair = CertPair::from_pem(&cert, &key, "the kubeconfig's client certificate data")?;
    if let Err(e) = store.update(&pair, &store::stamp_now()) {
        tracing::warn!(error = %e, "unable to set the cert/key pair to the bootstrap certificate");
    }
    Ok(Initial {
        pair: Some(pair),
        force: true,
    })
}

impl ClientCertificates {
    /// Bootstraps when asked (see [`bootstrap`]), then builds the API clients; with
    /// rotation, over a [`ClientIdentity`] fed by a [`CertificateManager`] whose initial pair
    /// is chosen as [`initial_pair`] chooses it.
    pub async fn load(cfg: &ClientCertConfig) -> Result<ClientCertificates, CertError> {
        let bootstrap = match &cfg.bootstrap_kubeconfig {
            Some(b) => Some(
                bootstrap::load_client_cert(&bootstrap::BootstrapConfig {
                    kubeconfig: cfg.client.kubeconfig.clone(),
                    bootstrap_kubeconfig: b.clone(),
                    cert_dir: cfg.cert_dir.clone(),
                    node_name: cfg.node_name.clone(),
                    timeout: cfg.bootstrap_timeout,
                })
                .await?,
            ),
            None => None,
        };
        if !cfg.rotate {
            let clients = ApiClients::from_kubeconfig(&cfg.client)
                .await
                .map_err(|e| CertError::Client(e.to_string()))?;
            return Ok(ClientCertificates {
                clients,
                bootstrap,
                manager: None,
                identity: None,
            });
        }
        let (kubeconfig, cert_dir) = (cfg.client.kubeconfig.clone(), cfg.cert_dir.clone());
        let now = kubelet_core::clock::now_unix_nanos() / 1_000_000_000;
        let (
            store,
            Initial {
                pair: initial,
                force,
            },
        ) = bootstrap::blocking(move || {
            let credentials = bootstrap::client_credentials(&kubeconfig)?;
            let store = FileStore::new("kubelet-client", &cert_dir)
                .with_files(credentials.cert_file, credentials.key_file);
            let initial = initial_pair(&store, credentials.embedded, now)?;
            Ok((store, initial))
        })
        .await?;
        let identity = ClientIdentity::new(initial.as_ref())?;
        let clients = ApiClients::from_kubeconfig_with_identity(&cfg.client, &identity)
            .await
            .map_err(|e| CertError::Client(e.to_string()))?;
        let bootstrap_signer: Option<Arc<dyn Signer>> = match &cfg.bootstrap_kubeconfig {
            Some(b) => Some(Arc::new(csr::ApiSigner::new(
                bootstrap::bootstrap_client(b).await?,
            ))),
            None => None,
        };
        let config = ManagerConfig {
            name: "client",
            template: CsrTemplate::node_client(&cfg.node_name),
            signer_name: csr::CLIENT_SIGNER.into(),
            usages: csr::CLIENT_USAGES.iter().map(|s| s.to_string()).collect(),
            store,
            wait_timeout: manager::CERTIFICATE_WAIT_TIMEOUT,
            metrics: &kubelet_core::metrics::global().client_certificate,
            jitter: Arc::new(manager::random_unit),
        };
        let manager = Arc::new(CertificateManager::new(
            config,
            Signers {
                current: Arc::new(csr::ApiSigner::new(clients.api.clone())),
                bootstrap: bootstrap_signer,
            },
            initial,
        ));
        if force {
            manager.force_rotation();
        }
        Ok(ClientCertificates {
            clients,
            bootstrap,
            manager: Some(manager),
            identity: Some(identity),
        })
    }

    /// The identity the API clients present (with rotation).
    pub fn identity(&self) -> Option<&ClientIdentity> {
        self.identity.as_ref()
    }

    /// Starts rotation (when on): the manager's task and the task that switches the API
    /// clients' identity on every new pair. Both stop on `shutdown`.
    pub fn start(&self, shutdown: &CancellationToken) -> Vec<tokio::task::JoinHandle<()>> {
        let (Some(manager), Some(identity)) = (&self.manager, &self.identity) else {
            return Vec::new();
        };
        let mut rx = manager.subscribe();
        let identity = identity.clone();
        let stop = shutdown.clone();
        let follow = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    r = rx.changed() => if r.is_err() { return; },
                }
                let pair = rx.borrow_and_update().clone();
                if let Some(p) = pair {
                    if let Err(e) = identity.set(&p) {
                        tracing::error!(error = %e, "cannot use the rotated client certificate");
                    }
                }
            }
        });
        vec![follow, tokio::spawn(manager.clone().run(shutdown.clone()))]
    }
}

#[cfg(test)]
mod initial_tests {
    use super::bootstrap::client_credentials;
    use super::pair::tests::issue;
    use super::*;

    const NOW: i64 = 2_000_000_000;

    /// A kubeconfig whose user has `user` (YAML lines, indented for `user:`).
    fn kubeconfig(dir: &std::path::Path, user: &str) -> PathBuf {
        let path = dir.join("kubelet.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:6443\"}}\n\
             users:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn b64(s: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn files_are_the_fallback_and_only_embedded_data_is_bootstrap_data() {
        let (_, valid) = issue(
            "system:node:n",
            &["system:nodes"],
            &[],
            NOW - 60,
            30 * 86400,
        );
        let (_, expired) = issue("system:node:old", &["system:nodes"], &[], NOW - 600, 60);
        let (_, stored) = issue("system:node:stored", &["system:nodes"], &[], NOW - 60, 600);
        struct Case<'a> {
            name: &'static str,
            /// The cert dir's current link holds this.
            current: Option<&'a CertPair>,
            /// The kubeconfig references this pair's files.
            files: Option<&'a CertPair>,
            /// The kubeconfig embeds this pair.
            embedded: Option<&'a CertPair>,
            /// The common name started from (None: nothing), whether rotated at once, and
            /// whether the store's current link is there afterwards.
            want: (Option<&'static str>, bool, bool),
        }
        let (valid, expired, stored) = (&valid, &expired, &stored);
        let cases = [
            Case {
                name: "files, empty cert dir: the kubeconfig's certificate is current",
                current: None,
                files: Some(valid),
                embedded: None,
                want: (Some("system:node:n"), false, false),
            },
            Case {
                name: "embedded, empty cert dir: bootstrap data, stored and rotated",
                current: None,
                files: None,
                embedded: Some(valid),
                want: (Some("system:node:n"), true, true),
            },
            Case {
                name: "the cert dir's pair wins over the kubeconfig's files",
                current: Some(stored),
                files: Some(valid),
                embedded: None,
                want: (Some("system:node:stored"), false, true),
            },
            Case {
                name: "the cert dir's pair wins over embedded data",
                current: Some(stored),
                files: None,
                embedded: Some(valid),
                want: (Some("system:node:stored"), false, true),
            },
            Case {
                name: "expired files, nothing embedded: nothing, rotated",
                current: None,
                files: Some(expired),
                embedded: None,
                want: (None, true, false),
            },
            Case {
                name: "expired current, embedded data: the embedded pair replaces it",
                current: Some(expired),
                files: None,
                embedded: Some(valid),
                want: (Some("system:node:n"), true, true),
            },
            Case {
                name: "nothing at all",
                current: None,
                files: None,
                embedded: None,
                want: (None, true, false),
            },
        ];
        for c in cases {
            let dir = tempfile::tempdir().unwrap();
            let cert_dir = dir.path().join("pki");
            let mut user = String::new();
            if let Some(p) = c.files {
                std::fs::write(dir.path().join("node.crt"), &p.cert_pem).unwrap();
                std::fs::write(dir.path().join("node.key"), &p.key_pem).unwrap();
                // Relative paths are the kubeconfig directory's, as client-go resolves them.
                user.push_str("    client-certificate: node.crt\n    client-key: node.key\n");
            }
            if let Some(p) = c.embedded {
                user.push_str(&format!(
                    "    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(&p.cert_pem),
                    b64(&p.key_pem)
                ));
            }
            if user.is_empty() {
                user.push_str("    token: abc\n");
            }
            let creds = client_credentials(&kubeconfig(dir.path(), &user)).unwrap();
            assert_eq!(
                creds.cert_file.is_some(),
                c.files.is_some(),
                "{}: {creds:?}",
                c.name
            );
            let store = FileStore::new("kubelet-client", &cert_dir)
                .with_files(creds.cert_file, creds.key_file);
            if let Some(p) = c.current {
                store.update(p, "2033-01-01-00-00-00").unwrap();
            }
            let got = initial_pair(&store, creds.embedded, NOW).unwrap();
            let cn = got.pair.as_ref().map(|p| p.common_name.as_str());
            let linked = store.current_path().exists();
            assert_eq!((cn, got.force, linked), c.want, "{}", c.name);
        }
    }

    #[test]
    fn missing_certificate_files_leave_nothing_to_start_from() {
        let dir = tempfile::tempdir().unwrap();
        let creds = client_credentials(&kubeconfig(
            dir.path(),
            "    client-certificate: /nonexistent/node.crt\n    client-key: /nonexistent/node.key\n",
        ))
        .unwrap();
        assert_eq!(
            creds.cert_file.as_deref(),
            Some(std::path::Path::new("/nonexistent/node.crt"))
        );
        // Neither file exists: the store has nothing; a certificate is requested.
        let store = FileStore::new("kubelet-client", dir.path().join("pki"))
            .with_files(creds.cert_file, creds.key_file);
        let got = initial_pair(&store, None, NOW).unwrap();
        assert!(got.pair.is_none() && got.force);
    }
}
