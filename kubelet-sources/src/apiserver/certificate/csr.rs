//! Certificate signing requests (client-go's `util/certificate/csr` and the kubelet's
//! bootstrap CSR): a PKCS#10 request for a [`CsrTemplate`] over a new ECDSA P-256 key,
//! created as a `certificates.k8s.io/v1` `CertificateSigningRequest`, then watched until it
//! is issued (approved and `status.certificate` set), denied or failed, or the wait times out.
//! The wait logs where it stands every 30s.
//!
//! Bootstrap CSRs are named from a digest of the key, subject and usages (Go's
//! `digestedName`, `node-csr-...`): a kubelet restarted with the same key finds the CSR it
//! made before. Rotation CSRs get a generated name (`csr-...`).

use std::net::IpAddr;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::ByteString;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use sha2::Digest;

use super::CertError;

/// `kubernetes.io/kube-apiserver-client-kubelet`: kubelet client certificates.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// `kubernetes.io/kubelet-serving`: kubelet serving certificates.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The usages of a kubelet client certificate (what the v1.20 approver requires).
pub const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];
/// The usages of a kubelet serving certificate.
pub const SERVING_USAGES: &[&str] = &["digital signature", "key encipherment", "server auth"];
/// How often a wait says where it stands.
const WAIT_LOG_INTERVAL: Duration = Duration::from_secs(30);

/// What a certificate is requested for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CsrTemplate {
    /// Subject common name (`system:node:<name>`).
    pub common_name: String,
    /// Subject organizations (`system:nodes`).
    pub organizations: Vec<String>,
    /// DNS SANs (serving certificates).
    pub dns_names: Vec<String>,
    /// IP SANs (serving certificates).
    pub ips: Vec<IpAddr>,
}

impl CsrTemplate {
    /// A node's client certificate: `CN=system:node:<node>`, `O=system:nodes`.
    pub fn node_client(node_name: &str) -> CsrTemplate {
        CsrTemplate {
            common_name: format!("system:node:{node_name}"),
            organizations: vec!["system:nodes".into()],
            ..CsrTemplate::default()
        }
    }

    /// A node's serving certificate for its host names and IPs (sorted, deduplicated, as
    /// Go's `addressesToHostnamesAndIPs`).
    pub fn node_serving(node_name: &str, mut dns_names: Vec<String>, mut ips: Vec<IpAddr>) -> Self {
        dns_names.sort();
        dns_names.dedup();
        ips.sort_by_key(|ip| ip.to_string());
        ips.dedup();
        CsrTemplate {
            dns_names,
            ips,
            ..CsrTemplate::node_client(node_name)
        }
    }

    /// Whether a certificate has this subject and these SANs (Go's
    /// `certSatisfiesTemplate`): otherwise it is replaced at once.
    pub fn satisfied_by(&self, pair: &super::CertPair) -> bool {
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        let mut ips = pair.ips.clone();
        ips.sort_by_key(|ip| ip.to_string());
        pair.common_name == self.common_name
            && sorted(&pair.organizations) == sorted(&self.organizations)
            && sorted(&pair.dns_names) == sorted(&self.dns_names)
            && ips == self.ips
    }
}

/// A private key and the PEM request made with it.
pub struct Csr {
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    /// The request, PEM.
    pub csr_pem: String,
    /// The public key, DER (SubjectPublicKeyInfo).
    pub public_key_der: Vec<u8>,
}

impl std::fmt::Debug for Csr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Csr").finish_non_exhaustive()
    }
}

/// A request for `template` with `key_pem` (a PKCS#8 PEM key), or a new ECDSA P-256 key.
pub fn make_csr(template: &CsrTemplate, key_pem: Option<&str>) -> Result<Csr, CertError> {
    let fail = |e: rcgen::Error| CertError::Csr(e.to_string());
    let key = match key_pem {
        Some(pem) => rcgen::KeyPair::from_pem(pem).map_err(fail)?,
        None => rcgen::KeyPair::generate().map_err(fail)?,
    };
    let mut sans: Vec<String> = template.dns_names.clone();
    sans.extend(template.ips.iter().map(IpAddr::to_string));
    let mut params = rcgen::CertificateParams::new(sans).map_err(fail)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    for o in &template.organizations {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, o.as_str());
    }
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, template.common_name.as_str());
    let csr = params.serialize_request(&key).map_err(fail)?;
    Ok(Csr {
        key_pem: key.serialize_pem(),
        csr_pem: csr.pem().map_err(fail)?,
        public_key_der: key.public_key_der(),
    })
}

/// Go's `digestedName`: `node-csr-` and the unpadded URL-safe base64 of a SHA-512/256 over
/// the public key, the subject and the usages, each base64-encoded and `|`-terminated.
pub fn digested_name(public_key_der: &[u8], template: &CsrTemplate, usages: &[&str]) -> String {
    let encode = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let mut hash = sha2::Sha512_256::new();
    let mut write = |data: &[u8]| {
        hash.update(encode(data).as_bytes());
        hash.update(b"|");
    };
    write(public_key_der);
    write(template.common_name.as_bytes());
    for o in &template.organizations {
        write(o.as_bytes());
    }
    for u in usages {
        write(u.as_bytes());
    }
    format!("node-csr-{}", encode(&hash.finalize()))
}

/// One certificate request to sign.
#[derive(Debug, Clone)]
pub struct SignRequest {
    /// The CSR's name (`None`: generated, `csr-...`).
    pub name: Option<String>,
    /// The PEM request.
    pub csr_pem: String,
    /// The request's public key (DER), to recognise an existing CSR of the same name.
    pub public_key_der: Vec<u8>,
    /// The signer.
    pub signer_name: String,
    /// The usages.
    pub usages: Vec<String>,
    /// How long to wait for the certificate.
    pub timeout: Duration,
}

/// Gets requests signed: the cluster's CSR API ([`ApiSigner`]), or a fake in tests.
#[async_trait]
pub trait Signer: Send + Sync {
    /// Submits the request and waits for the certificate (PEM).
    async fn sign(&self, request: &SignRequest) -> Result<String, CertError>;
}

/// The cluster's CSR API through a client.
#[derive(Clone)]
pub struct ApiSigner {
    client: kube::Client,
}

impl std::fmt::Debug for ApiSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSigner").finish_non_exhaustive()
    }
}

impl ApiSigner {
    /// Signs through `client`.
    pub fn new(client: kube::Client) -> ApiSigner {
        ApiSigner { client }
    }
}

fn request_err(what: String) -> impl FnOnce(kube::Error) -> CertError {
    move |source| CertError::Request {
        what,
        error: source,
    }
}

/// The public key of an existing CSR (to check that a CSR of our name is ours).
fn csr_public_key(csr: &CertificateSigningRequest) -> Option<Vec<u8>> {
    use x509_parser::prelude::FromDer;
    let pem = x509_parser::pem::parse_x509_pem(&csr.spec.request.0)
        .ok()?
        .1;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .ok()?;
    Some(req.certification_request_info.subject_pki.raw.to_vec())
}

/// Where a CSR stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CsrState {
    Pending,
    ApprovedNotIssued,
    Issued(String),
    Denied(String),
    Failed(String),
}

fn state_of(csr: &CertificateSigningRequest) -> CsrState {
    let Some(status) = &csr.status else {
        return CsrState::Pending;
    };
    let conditions = status.conditions.as_deref().unwrap_or_default();
    let why = |c: &k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition| {
        format!(
            "reason: {}, message: {}",
            c.reason.as_deref().unwrap_or_default(),
            c.message.as_deref().unwrap_or_default()
        )
    };
    if let Some(c) = conditions.iter().find(|c| c.type_ == "Denied") {
        return CsrState::Denied(why(c));
    }
    if let Some(c) = conditions.iter().find(|c| c.type_ == "Failed") {
        return CsrState::Failed(why(c));
    }
    if conditions.iter().any(|c| c.type_ == "Approved") {
        return match status.certificate.as_ref().filter(|c| !c.0.is_empty()) {
            Some(c) => CsrState::Issued(String::from_utf8_lossy(&c.0).into_owned()),
            None => CsrState::ApprovedNotIssued,
        };
    }
    CsrState::Pending
}

#[async_trait]
impl Signer for ApiSigner {
    async fn sign(&self, r: &SignRequest) -> Result<String, CertError> {
        let api: Api<CertificateSigningRequest> = Api::all(self.client.clone());
        let csr = CertificateSigningRequest {
            metadata: ObjectMeta {
                name: r.name.clone(),
                generate_name: r.name.is_none().then(|| "csr-".to_string()),
                ..ObjectMeta::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(r.csr_pem.clone().into_bytes()),
                signer_name: r.signer_name.clone(),
                usages: Some(r.usages.clone()),
                ..CertificateSigningRequestSpec::default()
            },
            status: None,
        };
        let created = match api.create(&PostParams::default(), &csr).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 409 && r.name.is_some() => {
                let name = r.name.clone().unwrap_or_default();
                let existing = api
                    .get(&name)
                    .await
                    .map_err(request_err(format!("get certificatesigningrequest {name}")))?;
                let ours = csr_public_key(&existing).as_deref()
                    == Some(r.public_key_der.as_slice())
                    && existing.spec.signer_name == r.signer_name
                    && existing.spec.usages.as_deref() == Some(r.usages.as_slice());
                if !ours {
                    return Err(CertError::Incompatible { name });
                }
                tracing::info!(csr = %name, "found the certificate signing request made earlier with this key");
                existing
            }
            Err(e) => return Err(request_err("create certificatesigningrequest".into())(e)),
        };
        let name = created.metadata.name.clone().unwrap_or_default();
        let uid = created.metadata.uid.clone();
        tracing::info!(csr = %name, signer = %r.signer_name, "certificate signing request created; waiting for it to be approved and issued");
        wait_for_certificate(&api, &name, uid.as_deref(), r.timeout).await
    }
}

/// Watches CSR `name` until it is issued (its certificate), denied or failed (an error), or
/// `timeout` passes.
async fn wait_for_certificate(
    api: &Api<CertificateSigningRequest>,
    name: &str,
    uid: Option<&str>,
    timeout: Duration,
) -> Result<String, CertError> {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = watcher::watcher(api.clone(), cfg).boxed();
    let started = tokio::time::Instant::now();
    let deadline = started + timeout;
    let mut last = CsrState::Pending;
    let mut next_log = started + WAIT_LOG_INTERVAL;
    loop {
        let wake = deadline.min(next_log);
        let event = tokio::select! {
            e = stream.next() => e,
            _ = tokio::time::sleep_until(wake) => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(CertError::Timeout { name: name.to_string(), timeout });
                }
                let state = match last {
                    CsrState::ApprovedNotIssued => "approved, waiting to be issued",
                    _ => "not approved yet",
                };
                let waited = started.elapsed().as_secs();
                let left = deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs();
                tracing::info!(csr = %name, waited_seconds = waited, gives_up_in_seconds = left, "certificate signing request is {state} (kubectl certificate approve {name})");
                next_log = tokio::time::Instant::now() + WAIT_LOG_INTERVAL;
                continue;
            }
        };
        let csr = match event {
            Some(Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c))) => c,
            Some(Ok(watcher::Event::Delete(_))) => {
                return Err(CertError::Deleted {
                    name: name.to_string(),
                })
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                tracing::warn!(csr = %name, error = %e, "watching the certificate signing request (retrying)");
                continue;
            }
            None => {
                return Err(CertError::Timeout {
                    name: name.to_string(),
                    timeout,
                })
            }
        };
        if let (Some(want), Some(got)) = (uid, csr.metadata.uid.as_deref()) {
            if want != got {
                return Err(CertError::Deleted {
                    name: name.to_string(),
                });
            }
        }
        let state = state_of(&csr);
        match &state {
            CsrState::Issued(cert) => {
                tracing::info!(csr = %name, "certificate signing request approved and issued");
                return Ok(cert.clone());
            }
            CsrState::Denied(why) => {
                return Err(CertError::Denied {
                    name: name.to_string(),
                    why: why.clone(),
                })
            }
            CsrState::Failed(why) => {
                return Err(CertError::Failed {
                    name: name.to_string(),
                    why: why.clone(),
                })
            }
            CsrState::ApprovedNotIssued if last != state => {
                tracing::info!(csr = %name, "certificate signing request is approved, waiting to be issued");
            }
            _ => {}
        }
        last = state;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    #[test]
    fn requests_carry_the_template_and_names_are_digests() {
        let t = CsrTemplate::node_serving(
            "n1",
            vec!["n1".into(), "n1".into(), "a-host".into()],
            vec!["127.0.0.1".parse().unwrap()],
        );
        assert_eq!(t.dns_names, vec!["a-host".to_string(), "n1".to_string()]);
        let csr = make_csr(&t, None).unwrap();
        use x509_parser::prelude::FromDer;
        let pem = x509_parser::pem::parse_x509_pem(csr.csr_pem.as_bytes())
            .unwrap()
            .1;
        let (_, req) =
            x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
                .unwrap();
        let subject = req.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=system:node:n1"), "{subject}");
        assert!(subject.contains("O=system:nodes"), "{subject}");
        assert_eq!(
            req.certification_request_info.subject_pki.raw,
            csr.public_key_der.as_slice()
        );
        // Same key, same name; another key, another name.
        let client = CsrTemplate::node_client("n1");
        let again = make_csr(&client, Some(&csr.key_pem)).unwrap();
        assert_eq!(again.public_key_der, csr.public_key_der);
        let a = digested_name(&csr.public_key_der, &client, CLIENT_USAGES);
        let b = digested_name(&again.public_key_der, &client, CLIENT_USAGES);
        assert_eq!(a, b);
        assert!(
            a.starts_with("node-csr-") && a.len() == "node-csr-".len() + 43,
            "{a}"
        );
        let other = make_csr(&client, None).unwrap();
        assert_ne!(
            digested_name(&other.public_key_der, &client, CLIENT_USAGES),
            a
        );
        assert_ne!(
            digested_name(&csr.public_key_der, &client, SERVING_USAGES),
            a,
            "usages are part of it"
        );
    }

    #[test]
    fn csr_states() {
        let csr = |types: &[&str], cert: Option<&str>| CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                conditions: Some(
                    types
                        .iter()
                        .map(|t| CertificateSigningRequestCondition {
                            type_: t.to_string(),
                            status: "True".into(),
                            reason: Some("R".into()),
                            message: Some("M".into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                certificate: cert.map(|c| ByteString(c.as_bytes().to_vec())),
            }),
            ..Default::default()
        };
        assert_eq!(
            state_of(&CertificateSigningRequest::default()),
            CsrState::Pending
        );
        assert_eq!(state_of(&csr(&[], None)), CsrState::Pending);
        assert_eq!(
            state_of(&csr(&["Approved"], None)),
            CsrState::ApprovedNotIssued
        );
        assert_eq!(
            state_of(&csr(&["Approved"], Some("PEM"))),
            CsrState::Issued("PEM".into())
        );
        assert_eq!(
            state_of(&csr(&["Denied"], None)),
            CsrState::Denied("reason: R, message: M".into())
        );
        assert!(matches!(
            state_of(&csr(&["Approved", "Failed"], None)),
            CsrState::Failed(_)
        ));
    }

    #[test]
    fn templates_and_certificates() {
        let (_, p) = super::super::pair::tests::issue(
            "system:node:n1",
            &["system:nodes"],
            &["n1", "127.0.0.1"],
            1_000_000,
            600,
        );
        let t =
            CsrTemplate::node_serving("n1", vec!["n1".into()], vec!["127.0.0.1".parse().unwrap()]);
        assert!(t.satisfied_by(&p));
        let moved =
            CsrTemplate::node_serving("n1", vec!["n1".into()], vec!["10.0.0.1".parse().unwrap()]);
        assert!(!moved.satisfied_by(&p));
        assert!(!CsrTemplate::node_client("n1").satisfied_by(&p));
    }
}
