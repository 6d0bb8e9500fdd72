//! The secure port's TLS: the serving certificate (from files, or self-signed into the cert
//! dir as the Go kubelet does), `tlsMinVersion`, `tlsCipherSuites`, and client certificates
//! checked against `clientCAFile`.
//!
//! Client certificates are *requested*, never required, and any certificate passes the
//! handshake (its signature over the handshake is still checked); whether it chains to the
//! client CA is decided per connection by [`ClientCa::check`], so that a bad certificate
//! gets a 401 from the authentication layer, as with Go's `RequestClientCert`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
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

/// The client CA: checks a connection's client certificate chain.
#[derive(Debug, Clone)]
pub struct ClientCa {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl ClientCa {
    /// Loads the CA bundle (blocking file IO).
    pub fn load(path: &Path, provider: Arc<CryptoProvider>) -> Result<ClientCa, TlsError> {
        let mut roots = RootCertStore::empty();
        for c in read_certs(path)? {
            roots.add(c).map_err(|e| file_err(path, e))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| file_err(path, e))?;
        Ok(ClientCa { verifier })
    }

    /// Whether the presented chain (leaf first) verifies; the user it names when it does.
    pub fn check(&self, chain: &[CertificateDer<'_>]) -> PeerCert {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return PeerCert::None;
        };
        let user = user_of(leaf);
        match self
            .verifier
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
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
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
        self.inner.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The secure port's TLS setup: the rustls configuration and the client CA, if any.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// For `tokio_rustls::TlsAcceptor`.
    pub config: Arc<rustls::ServerConfig>,
    /// Checks client certificates; None when no `clientCAFile` is configured.
    pub client_ca: Option<ClientCa>,
}

impl ServerTls {
    /// Builds the TLS setup from `options` (blocking file IO; may write the self-signed
    /// pair into the cert dir).
    pub fn load(options: &TlsOptions) -> Result<ServerTls, TlsError> {
        let (crt, key) = match (&options.cert_file, &options.key_file) {
            (Some(c), Some(k)) => (c.clone(), k.clone()),
            (None, None) => {
                ensure_self_signed(&options.cert_dir, &options.host_name, &options.host_ips)?
            }
            _ => return Err(TlsError::HalfPair),
        };
        let chain = read_certs(&crt)?;
        let key = read_key(&key)?;
        let provider = Arc::new(provider(options)?);
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions(options.min_version.as_deref())?)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let client_ca = match &options.client_ca_file {
            Some(path) => Some(ClientCa::load(path, provider)?),
            None => None,
        };
        let builder = match &client_ca {
            Some(ca) => builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                inner: ca.verifier.clone(),
            })),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ServerTls {
            config: Arc::new(config),
            client_ca,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
