//! The secure port's TLS: the serving certificate (from files, or self-signed into the cert
//! dir as the Go kubelet does, or set by a certificate manager with `serverTLSBootstrap`),
//! `tlsMinVersion`, `tlsCipherSuites`, and client certificates checked against
//! `clientCAFile`.
//!
//! The serving certificate ([`ServingCert`]) and the client CA ([`ClientCa`]) can change
//! while the server runs: [`ServerTls::reload_files`] re-reads `tlsCertFile`/
//! `tlsPrivateKeyFile` and `clientCAFile` when they change on disk, and a certificate
//! manager calls [`ServingCert::set`]; new connections use the new ones, open connections
//! keep theirs. A file that does not parse leaves the old one in use. Without a serving
//! certificate (bootstrap, before the first one is issued) every handshake fails, as in Go
//! ("no serving certificate available for the kubelet"). The CA names hinted to clients in
//! the handshake are those of the first client CA loaded.
//!
//! Client certificates are *requested*, never required, and any certificate passes the
//! handshake (its signature over the handshake is still checked); whether it chains to the
//! client CA is decided per connection by [`ClientCa::check`], so that a bad certificate
//! gets a 401 from the authentication layer, as with Go's `RequestClientCert`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use crate::auth::{PeerCert, UserInfo};

/// Errors setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate, key or CA file could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Only one of tlsCertFile and tlsPrivateKeyFile is set.
    #[error("tlsCertFile and tlsPrivateKeyFile must be set together")]
    HalfPair,
    /// `tlsMinVersion` names no known version.
    #[error(
        "tlsMinVersion {0:?} is not one of VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"
    )]
    MinVersion(String),
    /// A `tlsCipherSuites` entry names no suite this server supports.
    #[error("tlsCipherSuites: unsupported cipher suite {0:?}")]
    CipherSuite(String),
    /// Generating the self-signed certificate failed.
    #[error("generating a self-signed certificate for {host}: {message}")]
    SelfSigned {
        /// The host name it was for.
        host: String,
        /// Why.
        message: String,
    },
    /// rustls rejected the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// How the secure port does TLS.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// `tlsCertFile` (with `key_file`); None: self-signed in `cert_dir`.
    pub cert_file: Option<PathBuf>,
    /// `tlsPrivateKeyFile`.
    pub key_file: Option<PathBuf>,
    /// `--cert-dir` (default `<root-dir>/pki`): where the self-signed pair is kept.
    pub cert_dir: PathBuf,
    /// Host name for the self-signed certificate.
    pub host_name: String,
    /// Extra IPs for the self-signed certificate's SANs.
    pub host_ips: Vec<IpAddr>,
    /// `authentication.x509.clientCAFile`; None: client certificates are not asked for.
    pub client_ca_file: Option<PathBuf>,
    /// `tlsMinVersion` (Go names, e.g. `VersionTLS12`); None: TLS 1.2.
    pub min_version: Option<String>,
    /// `tlsCipherSuites` (Go/IANA names) for TLS 1.2; empty: rustls' defaults. TLS 1.3
    /// suites are always enabled, as in Go.
    pub cipher_suites: Vec<String>,
    /// `serverTLSBootstrap`: the serving certificate comes from a certificate manager
    /// ([`ServingCert::set`]); none is loaded or generated here.
    pub bootstrap: bool,
}

fn file_err(path: &Path, message: impl ToString) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_err(path, e))?;
    if certs.is_empty() {
        return Err(file_err(path, "no certificate in the file"));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_err(path, e))
}

/// Go's self-signed serving pair: `<cert-dir>/kubelet.crt` and `kubelet.key`, generated
/// when missing (blocking file IO). Returns the two paths.
pub fn ensure_self_signed(
    cert_dir: &Path,
    host: &str,
    ips: &[IpAddr],
) -> Result<(PathBuf, PathBuf), TlsError> {
    let crt = cert_dir.join("kubelet.crt");
    let key = cert_dir.join("kubelet.key");
    if crt.exists() && key.exists() {
        return Ok((crt, key));
    }
    let fail = |message: String| TlsError::SelfSigned {
        host: host.to_string(),
        message,
    };
    let mut sans = vec![host.to_string(), "localhost".to_string()];
    sans.extend(["127.0.0.1".to_string()]);
    sans.extend(ips.iter().map(IpAddr::to_string));
    sans.dedup();
    let mut params = rcgen::CertificateParams::new(sans).map_err(|e| fail(e.to_string()))?;
    let now = kubelet_core::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{host}-ca@{now}"));
    params.not_before = rcgen::date_time_ymd(2000, 1, 1);
    // About a year from now (Go: one year), to the start of that year's next January.
    let year = 1970 + i32::try_from(now / 31_556_952).unwrap_or(0);
    params.not_after = rcgen::date_time_ymd(year + 2, 1, 1);
    let key_pair = rcgen::KeyPair::generate().map_err(|e| fail(e.to_string()))?;
    let cert = params
        .self_signed(&key_pair)
        .map_err(|e| fail(e.to_string()))?;
    std::fs::create_dir_all(cert_dir).map_err(|e| file_err(cert_dir, e))?;
    std::fs::write(&crt, cert.pem()).map_err(|e| file_err(&crt, e))?;
    write_private(&key, key_pair.serialize_pem().as_bytes())?;
    tracing::info!(cert = %crt.display(), "generated a self-signed serving certificate");
    Ok((crt, key))
}

fn write_private(path: &Path, data: &[u8]) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| file_err(path, e))?;
    f.write_all(data).map_err(|e| file_err(path, e))
}

fn provider(options: &TlsOptions) -> Result<CryptoProvider, TlsError> {
    let mut p = rustls::crypto::ring::default_provider();
    if !options.cipher_suites.is_empty() {
        let mut keep: Vec<rustls::SupportedCipherSuite> = p
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some())
            .copied()
            .collect();
        for name in &options.cipher_suites {
            let found = p.cipher_suites.iter().find(|s| {
                let rustls_name = format!("{:?}", s.suite());
                // Go also accepts the ChaCha suites without the _SHA256 suffix.
                rustls_name == *name || rustls_name == format!("{name}_SHA256")
            });
            match found {
                Some(s) if s.tls13().is_none() => keep.push(*s),
                Some(_) => {}
                None => return Err(TlsError::CipherSuite(name.clone())),
            }
        }
        p.cipher_suites = keep;
    }
    Ok(p)
}

fn versions(
    min: Option<&str>,
) -> Result<&'static [&'static rustls::SupportedProtocolVersion], TlsError> {
    static BOTH: [&rustls::SupportedProtocolVersion; 2] =
        [&rustls::version::TLS13, &rustls::version::TLS12];
    static V13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
    match min.unwrap_or("") {
        "" | "VersionTLS12" => Ok(&BOTH),
        "VersionTLS10" | "VersionTLS11" => {
            tracing::warn!(min = ?min, "TLS 1.0 and 1.1 are not supported; the minimum is TLS 1.2");
            Ok(&BOTH)
        }
        "VersionTLS13" => Ok(&V13),
        other => Err(TlsError::MinVersion(other.to_string())),
    }
}

/// The client CA: checks a connection's client certificate chain. Clones share one CA,
/// which [`ClientCa::reload`] replaces.
#[derive(Debug, Clone)]
pub struct ClientCa {
    verifier: Arc<RwLock<Arc<dyn ClientCertVerifier>>>,
    provider: Arc<CryptoProvider>,
}

fn ca_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in read_certs(path)? {
        roots.add(c).map_err(|e| file_err(path, e))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| file_err(path, e))
}

impl ClientCa {
    /// Loads the CA bundle (blocking file IO).
    pub fn load(path: &Path, provider: Arc<CryptoProvider>) -> Result<ClientCa, TlsError> {
        let verifier = ca_verifier(path, provider.clone())?;
        Ok(ClientCa {
            verifier: Arc::new(RwLock::new(verifier)),
            provider,
        })
    }

    /// Replaces the CA with the bundle at `path` (blocking file IO); on an error the old
    /// one stays.
    pub fn reload(&self, path: &Path) -> Result<(), TlsError> {
        let verifier = ca_verifier(path, self.provider.clone())?;
        *self.verifier.write().unwrap_or_else(|e| e.into_inner()) = verifier;
        Ok(())
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.verifier
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the presented chain (leaf first) verifies; the user it names when it does.
    pub fn check(&self, chain: &[CertificateDer<'_>]) -> PeerCert {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return PeerCert::None;
        };
        let user = user_of(leaf);
        match self
            .current()
            .verify_client_cert(leaf, intermediates, UnixTime::now())
        {
            // Go's CommonNameUserConversion: a verified certificate without a common name
            // names no user (not an error: a token or anonymous access may still apply).
            Ok(_) => match user {
                Some(u) if !u.name.is_empty() => PeerCert::Verified(u),
                _ => PeerCert::None,
            },
            Err(e) => PeerCert::Invalid(format!(
                "{} ({e})",
                user.map(|u| u.name).unwrap_or_default()
            )),
        }
    }
}

/// The user a client certificate names as Go's x509 authenticator does: the subject's
/// common name (the last CN attribute, as Go's `pkix.Name` keeps it), groups from the O
/// values in order.
fn user_of(leaf: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .last()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(UserInfo {
        name,
        uid: String::new(),
        groups,
        extra: Default::default(),
    })
}

/// Accepts any client certificate in the handshake (signatures checked by `inner`); the
/// chain is judged later by [`ClientCa::check`].
#[derive(Debug)]
struct RequestClientCert {
    inner: ClientCa,
    hints: Vec<DistinguishedName>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner
            .current()
            .verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner
            .current()
            .verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.current().supported_verify_schemes()
    }
}

/// The serving certificate in use. Clones share it; [`ServingCert::set`] replaces it for
/// new connections.
#[derive(Debug, Clone)]
pub struct ServingCert {
    key: Arc<RwLock<Option<Arc<CertifiedKey>>>>,
    provider: Arc<CryptoProvider>,
}

impl ServingCert {
    fn new(provider: Arc<CryptoProvider>) -> ServingCert {
        ServingCert {
            key: Arc::new(RwLock::new(None)),
            provider,
        }
    }

    /// Serves `chain` (leaf first) with `key` from now on.
    pub fn set(
        &self,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<(), TlsError> {
        let signing = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let certified = CertifiedKey::new(chain, signing);
        certified
            .keys_match()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        *self.key.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(certified));
        Ok(())
    }

    /// Serves the pair in these PEM files from now on (blocking file IO).
    pub fn load_files(&self, cert: &Path, key: &Path) -> Result<(), TlsError> {
        self.set(read_certs(cert)?, read_key(key)?)
    }

    /// The certificate chain served now, if any.
    pub fn chain(&self) -> Option<Vec<CertificateDer<'static>>> {
        self.key
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|k| k.cert.clone())
    }
}

#[derive(Debug)]
struct ServingResolver(ServingCert);

impl ResolvesServerCert for ServingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.0.key.read().unwrap_or_else(|e| e.into_inner()).clone();
        if key.is_none() {
            tracing::debug!("no serving certificate available for the kubelet");
        }
        key
    }
}

/// The secure port's TLS setup: the rustls configuration, the serving certificate and the
/// client CA, if any.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// For `tokio_rustls::TlsAcceptor`.
    pub config: Arc<rustls::ServerConfig>,
    /// Checks client certificates; None when no `clientCAFile` is configured.
    pub client_ca: Option<ClientCa>,
    /// The serving certificate (shared with `config`).
    pub serving: ServingCert,
}

/// How often [`ServerTls::reload_files`] looks at the files.
pub const FILE_CHECK_INTERVAL: Duration = Duration::from_secs(10);

/// What identifies a file's content for change detection: modification time, size, inode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint(Option<(SystemTime, u64, u64)>);

fn fingerprint_of(m: Option<std::fs::Metadata>) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    Fingerprint(m.and_then(|m| Some((m.modified().ok()?, m.len(), m.ino()))))
}

async fn fingerprint(paths: &[&Path]) -> Vec<Fingerprint> {
    let mut out = Vec::new();
    for p in paths {
        out.push(fingerprint_of(tokio::fs::metadata(p).await.ok()));
    }
    out
}

/// [`fingerprint`] now, on the caller's thread (a `stat` per file).
fn fingerprint_now(paths: &[&Path]) -> Vec<Fingerprint> {
    paths
        .iter()
        .map(|p| fingerprint_of(std::fs::metadata(p).ok()))
        .collect()
}

impl ServerTls {
    /// Builds the TLS setup from `options` (blocking file IO; may write the self-signed
    /// pair into the cert dir).
    pub fn load(options: &TlsOptions) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(provider(options)?);
        let serving = ServingCert::new(provider.clone());
        match (&options.cert_file, &options.key_file) {
            (_, _) if options.bootstrap => {}
            (Some(c), Some(k)) => serving.load_files(c, k)?,
            (None, None) => {
                let (c, k) =
                    ensure_self_signed(&options.cert_dir, &options.host_name, &options.host_ips)?;
                serving.load_files(&c, &k)?;
            }
            _ => return Err(TlsError::HalfPair),
        }
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions(options.min_version.as_deref())?)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let client_ca = match &options.client_ca_file {
            Some(path) => Some(ClientCa::load(path, provider)?),
            None => None,
        };
        let builder = match &client_ca {
            Some(ca) => builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                hints: ca.current().root_hint_subjects().to_vec(),
                inner: ca.clone(),
            })),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(ServingResolver(serving.clone())));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls {
            config: Arc::new(config),
            client_ca,
            serving,
        })
    }

    /// Re-reads the serving certificate files (`tlsCertFile`/`tlsPrivateKeyFile`, when
    /// configured and not bootstrapping) and the client CA file whenever they change on
    /// disk, every `interval`, until `shutdown`. A change that does not load is logged and
    /// tried again at the next change. The files are looked at once on the caller's thread
    /// (the state the server starts from), then by the returned future.
    pub fn reload_files(
        self,
        options: TlsOptions,
        interval: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let pair = match (&options.cert_file, &options.key_file) {
            (Some(c), Some(k)) if !options.bootstrap => Some((c.clone(), k.clone())),
            _ => None,
        };
        let ca = options
            .client_ca_file
            .clone()
            .filter(|_| self.client_ca.is_some());
        let seen_pair = match &pair {
            Some(p) => fingerprint_now(&[&p.0, &p.1]),
            None => Vec::new(),
        };
        let seen_ca = match &ca {
            Some(c) => fingerprint_now(&[c]),
            None => Vec::new(),
        };
        self.watch_files(pair, ca, seen_pair, seen_ca, interval, shutdown)
    }

    async fn watch_files(
        self,
        pair: Option<(PathBuf, PathBuf)>,
        ca: Option<PathBuf>,
        mut seen_pair: Vec<Fingerprint>,
        mut seen_ca: Vec<Fingerprint>,
        interval: Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        if pair.is_none() && ca.is_none() {
            return;
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            if let Some(p) = &pair {
                let now = fingerprint(&[&p.0, &p.1]).await;
                if now != seen_pair {
                    seen_pair = now;
                    let (c, k) = p.clone();
                    let serving = self.serving.clone();
                    match tokio::task::spawn_blocking(move || serving.load_files(&c, &k)).await {
                        Ok(Ok(())) => {
                            tracing::info!(cert = %p.0.display(), "reloaded the serving certificate")
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "the changed serving certificate does not load; keeping the old one")
                        }
                        Err(e) => tracing::warn!(error = %e, "serving certificate reload task"),
                    }
                }
            }
            if let (Some(path), Some(client_ca)) = (&ca, &self.client_ca) {
                let now = fingerprint(&[path]).await;
                if now != seen_ca {
                    seen_ca = now;
                    let (path2, ca2) = (path.clone(), client_ca.clone());
                    match tokio::task::spawn_blocking(move || ca2.reload(&path2)).await {
                        Ok(Ok(())) => {
                            tracing::info!(file = %path.display(), "reloaded the client CA")
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "the changed client CA does not load; keeping the old one")
                        }
                        Err(e) => tracing::warn!(error = %e, "client CA reload task"),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
