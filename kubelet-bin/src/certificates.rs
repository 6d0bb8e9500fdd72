//! The node's certificates and registry credentials composed from the library parts: the
//! client certificate (TLS bootstrap with `--bootstrap-kubeconfig`, rotation with
//! `rotateCertificates`), the serving certificate (`serverTLSBootstrap`), and the
//! credential provider plugins (`--image-credential-provider-config`).

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use kubelet_server::auth::ApiServerClient;
use kubelet_server::tls::ServingCert;
use kubelet_sources::apiserver::certificate::{
    self, csr, manager, CertificateManager, ClientCertConfig, ClientCertificates, CsrTemplate,
    FileStore, ManagerConfig, Signers,
};
use kubelet_sources::apiserver::ClientConfig;
use kubelet_sources::credential_plugin::{self, PluginProvider};
use tokio_util::sync::CancellationToken;

use crate::config::LoadedConfig;

/// The client certificate set-up of the configuration (`None`: standalone).
pub fn client_cert_config(loaded: &LoadedConfig) -> Option<ClientCertConfig> {
    let kubeconfig = loaded.kubeconfig.as_ref()?;
    let c = &loaded.config;
    Some(ClientCertConfig {
        client: ClientConfig {
            kubeconfig: kubeconfig.clone(),
            qps: f64::from(c.kube_api_qps),
            burst: u32::try_from(c.kube_api_burst).unwrap_or(0),
            event_qps: f64::from(c.event_record_qps),
            event_burst: u32::try_from(c.event_burst).unwrap_or(0),
            heartbeat_timeout: c.node_status_update_frequency.0,
        },
        bootstrap_kubeconfig: loaded.bootstrap_kubeconfig.clone(),
        cert_dir: loaded.cert_dir.clone(),
        node_name: loaded.node_name.clone(),
        rotate: c.rotate_certificates,
        bootstrap_timeout: bootstrap_timeout(c.rotate_certificates),
    })
}

/// How long TLS bootstrap waits for its CSR to be issued before the kubelet gives up and
/// exits (see [`certificate::bootstrap::ROTATING_BOOTSTRAP_TIMEOUT`]).
pub fn bootstrap_timeout(rotate_certificates: bool) -> std::time::Duration {
    if rotate_certificates {
        certificate::bootstrap::ROTATING_BOOTSTRAP_TIMEOUT
    } else {
        certificate::bootstrap::BOOTSTRAP_TIMEOUT
    }
}

/// Bootstraps (when asked) and builds the API clients (see [`ClientCertificates::load`]).
pub async fn client_certificates(loaded: &LoadedConfig) -> Result<Option<ClientCertificates>> {
    let Some(cfg) = client_cert_config(loaded) else {
        if loaded.bootstrap_kubeconfig.is_some() {
            bail!("--bootstrap-kubeconfig needs --kubeconfig: the kubeconfig bootstrapping writes");
        }
        return Ok(None);
    };
    let started = tokio::time::Instant::now();
    let certs = ClientCertificates::load(&cfg)
        .await
        .with_context(|| format!("--kubeconfig {}", cfg.client.kubeconfig.display()))?;
    if certs.bootstrap == Some(certificate::bootstrap::Outcome::Bootstrapped) {
        tracing::info!(node = %loaded.node_name, seconds = started.elapsed().as_secs_f64(), "TLS bootstrap done: client certificate issued");
    }
    Ok(Some(certs))
}

/// Keeps the webhook client's identity on the rotated client certificate.
pub fn follow_client_certificate(
    manager: &CertificateManager,
    api: ApiServerClient,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut rx = manager.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = rx.changed() => if r.is_err() { return; },
            }
            let pair = rx.borrow_and_update().clone();
            if let Some(p) = pair {
                if let Err(e) = api.set_identity(p.combined_pem().as_bytes()) {
                    tracing::error!(error = %e, "the webhook client cannot use the rotated client certificate");
                }
            }
        }
    })
}

/// The serving certificate's template: `system:node:<name>` for the node's host name and
/// IPs (Go takes them from the node's addresses: InternalIP and Hostname).
pub fn serving_template(node_name: &str, node_ips: &[String]) -> CsrTemplate {
    let mut dns = Vec::new();
    let mut ips: Vec<IpAddr> = node_ips.iter().filter_map(|s| s.parse().ok()).collect();
    match node_name.parse::<IpAddr>() {
        Ok(ip) => ips.push(ip),
        Err(_) => dns.push(node_name.to_string()),
    }
    CsrTemplate::node_serving(node_name, dns, ips)
}

/// The serving certificate manager (`serverTLSBootstrap`): CSRs to the
/// `kubernetes.io/kubelet-serving` signer through `client` (the node's identity), the pairs
/// in `<cert-dir>/kubelet-server-*.pem` (initially the stored one, else the
/// `tlsCertFile`/`tlsPrivateKeyFile` pair).
pub async fn serving_manager(
    loaded: &LoadedConfig,
    client: kube::Client,
    node_ips: &[String],
) -> Result<Arc<CertificateManager>> {
    let c = &loaded.config;
    let non_empty = |s: &str| (!s.is_empty()).then(|| std::path::PathBuf::from(s));
    let store = FileStore::new("kubelet-server", &loaded.cert_dir).with_files(
        non_empty(&c.tls_cert_file),
        non_empty(&c.tls_private_key_file),
    );
    let s = store.clone();
    let initial = tokio::task::spawn_blocking(move || s.current())
        .await
        .context("serving certificate store task")?
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the stored serving certificate cannot be read; requesting a new one");
            None
        });
    let config = ManagerConfig {
        name: "serving",
        template: serving_template(&loaded.node_name, node_ips),
        signer_name: csr::SERVING_SIGNER.into(),
        usages: csr::SERVING_USAGES.iter().map(|s| s.to_string()).collect(),
        store,
        wait_timeout: manager::CERTIFICATE_WAIT_TIMEOUT,
        metrics: &kubelet_core::metrics::global().server_certificate,
        jitter: Arc::new(manager::random_unit),
    };
    Ok(Arc::new(CertificateManager::new(
        config,
        Signers {
            current: Arc::new(csr::ApiSigner::new(client)),
            bootstrap: None,
        },
        initial,
    )))
}

/// Serves the manager's pairs (the current one now, each new one when issued) and runs
/// the manager, until `shutdown`.
pub fn serve_managed_certificate(
    manager: Arc<CertificateManager>,
    serving: ServingCert,
    shutdown: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut rx = manager.subscribe();
    let stop = shutdown.clone();
    let follow = tokio::spawn(async move {
        loop {
            let pair = rx.borrow_and_update().clone();
            if let Some(p) = pair {
                let set = p
                    .key_der()
                    .map_err(anyhow::Error::from)
                    .and_then(|k| Ok(serving.set(p.chain.clone(), k)?));
                match set {
                    Ok(()) => tracing::info!(
                        expires = p.not_after,
                        "serving the issued kubelet serving certificate"
                    ),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot serve the issued serving certificate")
                    }
                }
            } else {
                tracing::info!("no serving certificate yet: waiting for the kubelet-serving CSR to be approved (kubectl certificate approve)");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                r = rx.changed() => if r.is_err() { return; },
            }
        }
    });
    vec![follow, tokio::spawn(manager.run(shutdown))]
}

/// The credential provider plugins of `--image-credential-provider-config` (with
/// `--image-credential-provider-bin-dir`); none when not configured.
pub async fn credential_providers(loaded: &LoadedConfig) -> Result<Vec<PluginProvider>> {
    let (config, bin_dir) = match (
        &loaded.image_credential_provider_config,
        &loaded.image_credential_provider_bin_dir,
    ) {
        (None, None) => return Ok(Vec::new()),
        (Some(c), Some(b)) => (c.clone(), b.clone()),
        (Some(_), None) => {
            bail!("--image-credential-provider-bin-dir is required with --image-credential-provider-config")
        }
        (None, Some(_)) => {
            bail!("--image-credential-provider-config is required with --image-credential-provider-bin-dir")
        }
    };
    let providers = tokio::task::spawn_blocking(move || credential_plugin::load(&config, &bin_dir))
        .await
        .context("credential provider start-up task")??;
    for p in &providers {
        tracing::info!(plugin = %kubelet_core::credentials::CredentialProvider::name(p), "registered a credential provider plugin");
    }
    Ok(providers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_template_from_the_node() {
        let t = serving_template("node-a", &["127.0.0.1".into(), "10.0.0.2".into()]);
        assert_eq!(t.common_name, "system:node:node-a");
        assert_eq!(t.dns_names, vec!["node-a".to_string()]);
        assert_eq!(t.ips.len(), 2);
        let by_ip = serving_template("10.0.0.9", &[]);
        assert!(by_ip.dns_names.is_empty());
        assert_eq!(by_ip.ips, vec!["10.0.0.9".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn event_writes_get_the_configured_limits() {
        let at_defaults = crate::config::load_for_test(&["--kubeconfig=/k"], "n");
        let c = client_cert_config(&at_defaults).unwrap().client;
        assert_eq!((c.event_qps, c.event_burst), (50.0, 100));
        let set = crate::config::load_for_test(
            &["--kubeconfig=/k", "--event-qps=5", "--event-burst=10"],
            "n",
        );
        let c = client_cert_config(&set).unwrap().client;
        assert_eq!((c.event_qps, c.event_burst), (5.0, 10));
    }

    #[test]
    fn bootstrap_waits_as_long_as_go_keeps_running_without_a_certificate() {
        let plain =
            crate::config::load_for_test(&["--kubeconfig=/k", "--bootstrap-kubeconfig=/b"], "n");
        assert_eq!(
            client_cert_config(&plain).unwrap().bootstrap_timeout,
            std::time::Duration::from_secs(3600)
        );
        let rotating = crate::config::load_for_test(
            &[
                "--kubeconfig=/k",
                "--bootstrap-kubeconfig=/b",
                "--rotate-certificates",
            ],
            "n",
        );
        assert!(rotating.config.rotate_certificates);
        assert_eq!(
            client_cert_config(&rotating).unwrap().bootstrap_timeout,
            std::time::Duration::from_secs(300)
        );
    }

    #[tokio::test]
    async fn plugin_flags_go_together() {
        let l = crate::config::load_for_test(
            &["--image-credential-provider-config=/nonexistent.yaml"],
            "n",
        );
        let e = credential_providers(&l).await.unwrap_err().to_string();
        assert!(e.contains("bin-dir is required"), "{e}");
        let l = crate::config::load_for_test(&[], "n");
        assert!(credential_providers(&l).await.unwrap().is_empty());
        let l = crate::config::load_for_test(
            &[
                "--image-credential-provider-config=/nonexistent.yaml",
                "--image-credential-provider-bin-dir=/nonexistent",
            ],
            "n",
        );
        let e = format!("{:#}", credential_providers(&l).await.unwrap_err());
        assert!(e.contains("/nonexistent.yaml"), "{e}");
    }
}
