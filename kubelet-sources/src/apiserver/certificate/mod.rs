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

impl ClientCertificates {
    /// Bootstraps when asked (see [`bootstrap`]), then builds the API clients; with
    /// rotation, over a [`ClientIdentity`] fed by a [`CertificateManager`] whose initial pair
    /// is the cert dir's (else the kubeconfig's own, rotated at once, as Go does with an
    /// initial certificate from the kubeconfig).
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
        let store = FileStore::new("kubelet-client", &cfg.cert_dir);
        let (s, kubeconfig) = (store.clone(), cfg.client.kubeconfig.clone());
        let (initial, from_kubeconfig) = tokio::task::spawn_blocking(move || {
            if let Some(p) = s.current()? {
                return Ok((Some(p), false));
            }
            match bootstrap::kubeconfig_identity(&kubeconfig)? {
                Some((c, k)) => Ok((
                    Some(CertPair::from_pem(
                        &c,
                        &k,
                        "the kubeconfig's client certificate",
                    )?),
                    true,
                )),
                None => Ok((None, false)),
            }
        })
        .await
        .map_err(|e| CertError::Task(e.to_string()))??;
        if from_kubeconfig {
            if let Some(p) = &initial {
                // Go writes the kubeconfig's certificate into the store and rotates it.
                let (s, p) = (store.clone(), p.clone());
                tokio::task::spawn_blocking(move || s.update(&p, &store::stamp_now()))
                    .await
                    .map_err(|e| CertError::Task(e.to_string()))??;
            }
        }
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
        if from_kubeconfig {
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
