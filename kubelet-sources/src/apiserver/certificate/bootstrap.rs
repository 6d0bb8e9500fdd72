//! TLS bootstrap (Go's `pkg/kubelet/certificate/bootstrap`): make `--kubeconfig` usable
//! before the kubelet starts.
//!
//! 1. `--kubeconfig` exists and every certificate of its user is unexpired: use it, no
//!    bootstrap (Go's `isClientConfigStillValid`).
//! 2. Otherwise, when the cert dir's `kubelet-client-current.pem` is still valid (a
//!    kubeconfig lost since): write the kubeconfig pointing at it; no CSR.
//! 3. Otherwise, with the `--bootstrap-kubeconfig` credentials: a key (the stored pair's,
//!    else `kubelet-client.key.tmp`, kept until the certificate arrives so a restart
//!    reuses it and finds its CSR again), a `node-csr-<digest>` CSR for
//!    `CN=system:node:<node>`, `O=system:nodes` to the
//!    `kubernetes.io/kube-apiserver-client-kubelet` signer, the wait for it to be approved
//!    and issued (an hour at most), the pair written to the store, and a kubeconfig
//!    (`default-cluster` from the bootstrap kubeconfig, `default-auth` with
//!    `client-certificate` and `client-key` both the store's current link).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use super::csr::{self, ApiSigner, CsrTemplate, SignRequest, Signer};
use super::pair::{certs_of, CertPair};
use super::store::{stamp_now, FileStore};
use super::CertError;

/// How long bootstrap waits for its certificate (Go: 3600s), after which the kubelet exits
/// with the error (Go: `failed to run Kubelet: timed out waiting for the condition`, status 1).
pub const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long bootstrap waits with `rotateCertificates` on. Go bootstraps in the background
/// then, and its rotating transport exits the process once it has had no client certificate
/// for five minutes (`exitAfter` of `UpdateTransport`: "It has been 5m0s since a valid
/// client cert was found and the server is responsive, exiting"); kubelet-rs bootstraps
/// before it starts in both modes, so the wait ends, and the kubelet exits, at the same
/// point.
pub const ROTATING_BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Where the bootstrap key waits for its certificate.
pub const TMP_KEY_FILE: &str = "kubelet-client.key.tmp";
/// How often an unreachable API server is tried again while bootstrapping.
const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// What bootstrap works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapConfig {
    /// `--kubeconfig`: checked, and written when bootstrapping.
    pub kubeconfig: PathBuf,
    /// `--bootstrap-kubeconfig`.
    pub bootstrap_kubeconfig: PathBuf,
    /// `--cert-dir`.
    pub cert_dir: PathBuf,
    /// The node name.
    pub node_name: String,
    /// How long to wait for the certificate.
    pub timeout: Duration,
}

/// How `--kubeconfig` became usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It was valid already.
    KubeconfigValid,
    /// The stored certificate was valid; the kubeconfig was written for it.
    StoredCertificate,
    /// A certificate was requested and issued.
    Bootstrapped,
}

fn kubeconfig_err(path: &Path, message: impl ToString) -> CertError {
    CertError::Kubeconfig {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, CertError> {
    Kubeconfig::read_from(path).map_err(|e| kubeconfig_err(path, e))
}

/// The current context's cluster and user of a kubeconfig.
fn current(
    kc: &Kubeconfig,
    path: &Path,
) -> Result<(kube::config::Cluster, Option<kube::config::AuthInfo>), CertError> {
    let name = kc
        .current_context
        .clone()
        .or_else(|| kc.contexts.first().map(|c| c.name.clone()))
        .ok_or_else(|| kubeconfig_err(path, "no current context"))?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| kubeconfig_err(path, format!("no context {name:?}")))?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| kubeconfig_err(path, format!("no cluster {:?}", ctx.cluster)))?;
    let user = ctx.user.as_ref().and_then(|u| {
        kc.auth_infos
            .iter()
            .find(|a| &a.name == u)
            .and_then(|a| a.auth_info.clone())
    });
    Ok((cluster, user))
}

/// A file a kubeconfig names, relative paths taken from the kubeconfig's directory (as
/// client-go's `ResolveLocalPaths`).
fn resolve(kubeconfig: &Path, file: Option<&str>) -> Option<PathBuf> {
    let f = Path::new(file.filter(|f| !f.is_empty())?);
    Some(match kubeconfig.parent() {
        Some(dir) if f.is_relative() => dir.join(f),
        _ => f.to_path_buf(),
    })
}

fn decode(data: Option<&str>, what: &str, path: &Path) -> Result<Option<Vec<u8>>, CertError> {
    data.filter(|d| !d.is_empty())
        .map(|d| {
            base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .map_err(|e| kubeconfig_err(path, format!("{what}: {e}")))
        })
        .transpose()
}

fn data_or_file(
    data: Option<&str>,
    file: Option<&str>,
    what: &str,
    path: &Path,
) -> Result<Option<Vec<u8>>, CertError> {
    if let Some(d) = decode(data, what, path)? {
        return Ok(Some(d));
    }
    match resolve(path, file) {
        Some(f) => std::fs::read(&f)
            .map(Some)
            .map_err(|e| kubeconfig_err(path, format!("{what} {}: {e}", f.display()))),
        None => Ok(None),
    }
}

/// A kubeconfig user's client credentials as written, the way client-go's `rest.Config`
/// keeps them apart: files (`CertFile`/`KeyFile`) and embedded data (`CertData`/`KeyData`).
/// The client certificate store falls back to the files; only embedded data is bootstrap
/// data, stored and rotated at once (Go's `buildClientCertificateManager`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCredentials {
    /// `client-certificate`, resolved against the kubeconfig's directory.
    pub cert_file: Option<PathBuf>,
    /// `client-key`, resolved against the kubeconfig's directory.
    pub key_file: Option<PathBuf>,
    /// `client-certificate-data` and `client-key-data` (PEM), when both are there.
    pub embedded: Option<(String, String)>,
}

/// The client credentials of a kubeconfig's current user (blocking file IO); no user: the
/// default (none).
pub fn client_credentials(path: &Path) -> Result<ClientCredentials, CertError> {
    let kc = read_kubeconfig(path)?;
    let (_, user) = current(&kc, path)?;
    let Some(user) = user else {
        return Ok(ClientCredentials::default());
    };
    use secrecy::ExposeSecret;
    let key_data = user
        .client_key_data
        .as_ref()
        .map(|k| k.expose_secret().to_string());
    let cert = decode(
        user.client_certificate_data.as_deref(),
        "client certificate",
        path,
    )?;
    let key = decode(key_data.as_deref(), "client key", path)?;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    Ok(ClientCredentials {
        cert_file: resolve(path, user.client_certificate.as_deref()),
        key_file: resolve(path, user.client_key.as_deref()),
        embedded: cert.zip(key).map(|(c, k)| (text(c), text(k))),
    })
}

/// The client certificate and key (PEM) of a kubeconfig's current user, if it has them
/// (blocking file IO).
pub fn kubeconfig_identity(path: &Path) -> Result<Option<(String, String)>, CertError> {
    let kc = read_kubeconfig(path)?;
    let (_, user) = current(&kc, path)?;
    let Some(user) = user else {
        return Ok(None);
    };
    let cert = data_or_file(
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
        "client certificate",
        path,
    )?;
    use secrecy::ExposeSecret;
    let key_data = user
        .client_key_data
        .as_ref()
        .map(|k| k.expose_secret().to_string());
    let key = data_or_file(
        key_data.as_deref(),
        user.client_key.as_deref(),
        "client key",
        path,
    )?;
    Ok(match (cert, key) {
        (Some(c), Some(k)) => Some((
            String::from_utf8_lossy(&c).into_owned(),
            String::from_utf8_lossy(&k).into_owned(),
        )),
        _ => None,
    })
}

/// Go's `isClientConfigStillValid`: the kubeconfig exists and all its client certificates
/// are unexpired at `now` (Unix seconds). Unreadable or certificate-less: not valid (logged).
pub fn kubeconfig_still_valid(path: &Path, now: i64) -> bool {
    if !path.exists() {
        return false;
    }
    let certs = match kubeconfig_identity(path) {
        Ok(Some((cert, _))) => certs_of(cert.as_bytes(), "client certificate"),
        Ok(None) => {
            tracing::info!(kubeconfig = %path.display(), "the kubeconfig has no client certificate; bootstrapping");
            return false;
        }
        Err(e) => Err(e),
    };
    let certs = match certs {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(kubeconfig = %path.display(), error = %e, "unable to read the client certificate of the existing kubeconfig");
            return false;
        }
    };
    for c in &certs {
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(c.as_ref()) else {
            return false;
        };
        if now > cert.validity().not_after.timestamp() {
            tracing::info!(kubeconfig = %path.display(), "part of the existing client certificate is expired");
            return false;
        }
    }
    true
}

/// Writes the kubeconfig Go's bootstrap writes (see the module docs), atomically, 0600.
pub fn write_kubeconfig(
    path: &Path,
    bootstrap_kubeconfig: &Path,
    pem_path: &Path,
) -> Result<(), CertError> {
    let kc = read_kubeconfig(bootstrap_kubeconfig)?;
    let (cluster, _) = current(&kc, bootstrap_kubeconfig)?;
    let server = cluster
        .server
        .clone()
        .ok_or_else(|| kubeconfig_err(bootstrap_kubeconfig, "the cluster has no server"))?;
    let mut c = serde_json::Map::new();
    c.insert("server".into(), server.into());
    if let Some(ca) = cluster.certificate_authority.filter(|s| !s.is_empty()) {
        c.insert("certificate-authority".into(), ca.into());
    } else if let Some(data) = cluster.certificate_authority_data.filter(|s| !s.is_empty()) {
        c.insert("certificate-authority-data".into(), data.into());
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        c.insert("insecure-skip-tls-verify".into(), true.into());
    }
    let pem = pem_path.display().to_string();
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": c}],
        "users": [{"name": "default-auth", "user": {"client-certificate": pem, "client-key": pem}}],
        "contexts": [{"name": "default-context", "context": {
            "cluster": "default-cluster", "user": "default-auth", "namespace": "default"}}],
        "current-context": "default-context",
        "preferences": {},
    });
    let text = serde_yaml_ng::to_string(&doc).map_err(|e| kubeconfig_err(path, e))?;
    write_private(path, text.as_bytes())
}

/// Writes `data` to `path` (mode 0600) through a temporary file and a rename.
pub(crate) fn write_private(path: &Path, data: &[u8]) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| CertError::Store {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let tmp = path.with_extension("tmp-write");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(fail)?;
    f.write_all(data)
        .and_then(|()| f.sync_all())
        .map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// The key to request with: the stored pair's (its certificate expired), else the
/// temporary key file's, else a new one written there.
fn bootstrap_key(store: &FileStore, stored: Option<&CertPair>) -> Result<String, CertError> {
    if let Some(p) = stored {
        if rcgen::KeyPair::from_pem(&p.key_pem).is_ok() {
            return Ok(p.key_pem.clone());
        }
    }
    let tmp = store.dir().join(TMP_KEY_FILE);
    if let Ok(pem) = std::fs::read_to_string(&tmp) {
        if rcgen::KeyPair::from_pem(&pem).is_ok() {
            return Ok(pem);
        }
    }
    tracing::info!("no valid private key and/or certificate found; creating a new private key");
    let key = rcgen::KeyPair::generate()
        .map_err(|e| CertError::Csr(e.to_string()))?
        .serialize_pem();
    write_private(&tmp, key.as_bytes())?;
    Ok(key)
}

/// Runs blocking file IO on tokio's blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, CertError> + Send + 'static,
) -> Result<T, CertError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| CertError::Task(e.to_string()))?
}

/// A client from the bootstrap kubeconfig.
pub async fn bootstrap_client(path: &Path) -> Result<kube::Client, CertError> {
    let owned = path.to_path_buf();
    let kc = blocking(move || read_kubeconfig(&owned)).await?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| kubeconfig_err(path, e))?;
    kube::Client::try_from(config).map_err(|e| kubeconfig_err(path, e))
}

/// Makes `--kubeconfig` usable (see the module docs).
pub async fn load_client_cert(cfg: &BootstrapConfig) -> Result<Outcome, CertError> {
    let now = kubelet_core::clock::now_unix_nanos() / 1_000_000_000;
    let kubeconfig = cfg.kubeconfig.clone();
    if blocking(move || Ok(kubeconfig_still_valid(&kubeconfig, now))).await? {
        tracing::info!(kubeconfig = %cfg.kubeconfig.display(), "the kubeconfig exists and is valid; skipping bootstrap");
        return Ok(Outcome::KubeconfigValid);
    }
    let store = FileStore::new("kubelet-client", &cfg.cert_dir);
    let s = store.clone();
    let stored = blocking(move || match s.current() {
        Ok(p) => Ok(p),
        Err(e) => {
            tracing::warn!(error = %e, "the stored client certificate cannot be read; requesting a new one");
            Ok(None)
        }
    })
    .await?;
    if let Some(p) = stored.as_ref().filter(|p| p.valid_at(now)) {
        tracing::info!(certificate = %store.current_path().display(), expires = p.not_after, "the stored client certificate is valid; writing the kubeconfig for it");
        let (k, b, pem) = (
            cfg.kubeconfig.clone(),
            cfg.bootstrap_kubeconfig.clone(),
            store.current_path(),
        );
        blocking(move || write_kubeconfig(&k, &b, &pem)).await?;
        return Ok(Outcome::StoredCertificate);
    }
    tracing::info!(bootstrap_kubeconfig = %cfg.bootstrap_kubeconfig.display(), "using the bootstrap kubeconfig to request a client certificate");
    let s = store.clone();
    let key_pem = blocking(move || bootstrap_key(&s, stored.as_ref())).await?;
    let template = CsrTemplate::node_client(&cfg.node_name);
    let request = csr::make_csr(&template, Some(&key_pem))?;
    let name = csr::digested_name(&request.public_key_der, &template, csr::CLIENT_USAGES);
    let sign = SignRequest {
        name: Some(name),
        csr_pem: request.csr_pem,
        public_key_der: request.public_key_der,
        signer_name: csr::CLIENT_SIGNER.into(),
        usages: csr::CLIENT_USAGES.iter().map(|s| s.to_string()).collect(),
        timeout: cfg.timeout,
    };
    let signer = ApiSigner::new(bootstrap_client(&cfg.bootstrap_kubeconfig).await?);
    let deadline = tokio::time::Instant::now() + cfg.timeout;
    let cert_pem = loop {
        match signer.sign(&sign).await {
            Ok(c) => break c,
            // The API server is not reachable (yet): Go waits for it, so do we.
            Err(CertError::Request {
                what,
                error: source,
            }) if !matches!(source, kube::Error::Api(_))
                && tokio::time::Instant::now() + RETRY_INTERVAL < deadline =>
            {
                tracing::warn!(what = %what, error = %source, "the API server is not reachable; retrying the certificate request");
                tokio::time::sleep(RETRY_INTERVAL).await;
            }
            Err(e) => return Err(e),
        }
    };
    let pair = CertPair::from_pem(&cert_pem, &key_pem, "the issued client certificate")?;
    let (s, k, b) = (
        store.clone(),
        cfg.kubeconfig.clone(),
        cfg.bootstrap_kubeconfig.clone(),
    );
    blocking(move || {
        let stored = s.update(&pair, &stamp_now())?;
        let tmp = s.dir().join(TMP_KEY_FILE);
        if let Err(e) = std::fs::remove_file(&tmp) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %tmp.display(), error = %e, "failed to remove the temporary key");
            }
        }
        write_kubeconfig(&k, &b, &s.current_path())?;
        tracing::info!(certificate = %s.current_path().display(), expires = stored.not_after, kubeconfig = %k.display(), "client certificate issued; kubeconfig written");
        Ok(())
    })
    .await?;
    Ok(Outcome::Bootstrapped)
}

#[cfg(test)]
mod tests {
    use super::super::pair::tests::issue;
    use super::*;

    fn write_bootstrap(dir: &Path) -> PathBuf {
        let path = dir.join("bootstrap.kubeconfig");
        std::fs::write(dir.join("ca.crt"), "CA").unwrap();
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
        )
        .unwrap();
        path
    }

    #[test]
    fn written_kubeconfigs_point_at_the_store_and_validity_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = write_bootstrap(dir.path());
        let store = FileStore::new("kubelet-client", dir.path().join("pki"));
        let now = 2_000_000_000;
        let (_, pair) = issue("system:node:n1", &["system:nodes"], &[], now - 100, 600);
        store.update(&pair, "s").unwrap();
        let kubeconfig = dir.path().join("kubelet.kubeconfig");
        assert!(!kubeconfig_still_valid(&kubeconfig, now), "missing");
        write_kubeconfig(&kubeconfig, &bootstrap, &store.current_path()).unwrap();
        let text = std::fs::read_to_string(&kubeconfig).unwrap();
        assert!(
            text.contains("default-cluster") && text.contains("default-auth"),
            "{text}"
        );
        assert!(
            text.contains(&dir.path().join("ca.crt").display().to_string()),
            "absolute CA: {text}"
        );
        assert!(text.contains("kubelet-client-current.pem"), "{text}");
        let (cert, key) = kubeconfig_identity(&kubeconfig).unwrap().unwrap();
        assert_eq!(cert.trim(), pair.combined_pem().trim());
        assert_eq!(key.trim(), pair.combined_pem().trim());
        assert!(kubeconfig_still_valid(&kubeconfig, now));
        assert!(!kubeconfig_still_valid(&kubeconfig, now + 1000), "expired");
        // A token kubeconfig has no certificate: not valid for a node.
        assert!(!kubeconfig_still_valid(&bootstrap, now));
        assert_eq!(kubeconfig_identity(&bootstrap).unwrap(), None);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn the_bootstrap_key_is_kept_until_the_certificate_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new("kubelet-client", dir.path());
        let first = bootstrap_key(&store, None).unwrap();
        assert!(dir.path().join(TMP_KEY_FILE).exists());
        assert_eq!(bootstrap_key(&store, None).unwrap(), first, "reused");
        let (_, expired) = issue("a", &[], &[], 1_000_000, 10);
        assert_eq!(
            bootstrap_key(&store, Some(&expired)).unwrap(),
            expired.key_pem
        );
    }

    #[tokio::test]
    async fn a_valid_kubeconfig_or_stored_certificate_skips_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = write_bootstrap(dir.path());
        let now = kubelet_core::clock::now_unix_nanos() / 1_000_000_000;
        let (_, pair) = issue("system:node:n1", &["system:nodes"], &[], now - 10, 600);
        let cfg = BootstrapConfig {
            kubeconfig: dir.path().join("kubelet.kubeconfig"),
            bootstrap_kubeconfig: bootstrap,
            cert_dir: dir.path().join("pki"),
            node_name: "n1".into(),
            timeout: Duration::from_secs(1),
        };
        FileStore::new("kubelet-client", &cfg.cert_dir)
            .update(&pair, "s")
            .unwrap();
        assert_eq!(
            load_client_cert(&cfg).await.unwrap(),
            Outcome::StoredCertificate
        );
        assert_eq!(
            load_client_cert(&cfg).await.unwrap(),
            Outcome::KubeconfigValid
        );
    }
}
