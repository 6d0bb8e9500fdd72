//! A certificate and its private key as the kubelet keeps them (PEM), with what the
//! certificate manager reads from the leaf: validity, subject and SANs.

use std::net::IpAddr;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::CertError;

/// A certificate chain (leaf first) with its key. See the module docs.
#[derive(Clone)]
pub struct CertPair {
    /// The certificates, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
    /// The certificates, DER, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's `notBefore` (Unix seconds).
    pub not_before: i64,
    /// The leaf's `notAfter` (Unix seconds).
    pub not_after: i64,
    /// The leaf's subject common name.
    pub common_name: String,
    /// The leaf's subject organizations.
    pub organizations: Vec<String>,
    /// The leaf's DNS SANs.
    pub dns_names: Vec<String>,
    /// The leaf's IP SANs.
    pub ips: Vec<IpAddr>,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("CertPair")
            .field("common_name", &self.common_name)
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn invalid(what: &str, message: impl ToString) -> CertError {
    CertError::InvalidPair {
        what: what.to_string(),
        message: message.to_string(),
    }
}

/// The certificates (DER) of a PEM text; an error when there is none.
pub(crate) fn certs_of(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(what, e))?;
    if certs.is_empty() {
        return Err(invalid(what, "no certificate in it"));
    }
    Ok(certs)
}

/// What is read from a leaf certificate.
struct LeafInfo {
    not_before: i64,
    not_after: i64,
    common_name: String,
    organizations: Vec<String>,
    dns_names: Vec<String>,
    ips: Vec<IpAddr>,
}

impl LeafInfo {
    fn of(leaf: &x509_parser::certificate::X509Certificate<'_>) -> LeafInfo {
        let subject = leaf.subject();
        let mut dns_names = Vec::new();
        let mut ips = Vec::new();
        if let Ok(Some(san)) = leaf.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        dns_names.push((*d).to_string())
                    }
                    x509_parser::extensions::GeneralName::IPAddress(b) => {
                        if let Ok(a) = <[u8; 4]>::try_from(*b) {
                            ips.push(IpAddr::from(a));
                        } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                            ips.push(IpAddr::from(a));
                        }
                    }
                    _ => {}
                }
            }
        }
        LeafInfo {
            not_before: leaf.validity().not_before.timestamp(),
            not_after: leaf.validity().not_after.timestamp(),
            common_name: subject
                .iter_common_name()
                .next()
                .and_then(|a| a.as_str().ok())
                .unwrap_or_default()
                .to_string(),
            organizations: subject
                .iter_organization()
                .filter_map(|o| o.as_str().ok().map(str::to_string))
                .collect(),
            dns_names,
            ips,
        }
    }
}

impl CertPair {
    /// A pair from a certificate PEM (leaf first) and a key PEM; the key must be the leaf's.
    pub fn from_pem(cert_pem: &str, key_pem: &str, what: &str) -> Result<CertPair, CertError> {
        let chain = certs_of(cert_pem.as_bytes(), what)?;
        let key =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| invalid(what, e))?;
        let leaf_info = {
            let (_, leaf) = x509_parser::parse_x509_certificate(chain[0].as_ref())
                .map_err(|e| invalid(what, e))?;
            // The key must sign for the leaf: compare public keys through rustls' signer.
            let signer = rustls::crypto::ring::sign::any_supported_type(&key)
                .map_err(|e| invalid(what, format!("private key: {e}")))?;
            if let Some(spki) = signer.public_key() {
                if spki.as_ref() != leaf.public_key().raw {
                    return Err(invalid(
                        what,
                        "the private key does not match the certificate",
                    ));
                }
            }
            LeafInfo::of(&leaf)
        };
        let LeafInfo {
            not_before,
            not_after,
            common_name,
            organizations,
            dns_names,
            ips,
        } = leaf_info;
        Ok(CertPair {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            not_before,
            not_after,
            common_name,
            organizations,
            dns_names,
            ips,
            chain,
        })
    }

    /// A pair from one PEM text holding the certificates and the key (the store's files),
    /// in any order.
    pub fn from_combined_pem(pem: &str, what: &str) -> Result<CertPair, CertError> {
        let mut certs = String::new();
        let mut key = String::new();
        let mut block: Option<(bool, String)> = None;
        for line in pem.lines() {
            let t = line.trim();
            if let Some(label) = t.strip_prefix("-----BEGIN ") {
                block = Some((label.contains("PRIVATE KEY"), String::new()));
            }
            if let Some((is_key, text)) = block.as_mut() {
                text.push_str(t);
                text.push('\n');
                if t.starts_with("-----END ") {
                    let out = if *is_key { &mut key } else { &mut certs };
                    out.push_str(text);
                    block = None;
                }
            }
        }
        if key.is_empty() {
            return Err(invalid(what, "no private key in it"));
        }
        CertPair::from_pem(&certs, &key, what)
    }

    /// The certificates and the key in one PEM text (the store's file format).
    pub fn combined_pem(&self) -> String {
        let mut out = self.cert_pem.trim_end().to_string();
        out.push('\n');
        out.push_str(self.key_pem.trim_end());
        out.push('\n');
        out
    }

    /// The private key, DER.
    pub fn key_der(&self) -> Result<PrivateKeyDer<'static>, CertError> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).map_err(|e| invalid("key", e))
    }

    /// The pair for rustls (as a client or server identity).
    pub fn certified_key(&self) -> Result<rustls::sign::CertifiedKey, CertError> {
        let key = rustls::crypto::ring::sign::any_supported_type(&self.key_der()?)
            .map_err(|e| invalid("key", e))?;
        Ok(rustls::sign::CertifiedKey::new(self.chain.clone(), key))
    }

    /// Whether the leaf is valid at `now` (Unix seconds).
    pub fn valid_at(&self, now: i64) -> bool {
        self.not_before <= now && now <= self.not_after
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA and a pair it signs: `(ca_pem, pair)`; validity from `not_before` for
    /// `lifetime` seconds (Unix seconds).
    pub(crate) fn issue(
        cn: &str,
        orgs: &[&str],
        sans: &[&str],
        not_before: i64,
        lifetime: i64,
    ) -> (String, CertPair) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-ca");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for o in orgs {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        params.not_before = time::OffsetDateTime::from_unix_timestamp(not_before).unwrap();
        params.not_after =
            time::OffsetDateTime::from_unix_timestamp(not_before + lifetime).unwrap();
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        let pair = CertPair::from_pem(&cert.pem(), &key.serialize_pem(), "test").unwrap();
        (ca.pem(), pair)
    }

    #[test]
    fn reads_the_leaf_and_round_trips_the_combined_file() {
        let (_, p) = issue(
            "system:node:n1",
            &["system:nodes"],
            &["n1", "127.0.0.1"],
            1_000_000,
            600,
        );
        assert_eq!(p.common_name, "system:node:n1");
        assert_eq!(p.organizations, vec!["system:nodes".to_string()]);
        assert_eq!(p.dns_names, vec!["n1".to_string()]);
        assert_eq!(p.ips, vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!((p.not_before, p.not_after), (1_000_000, 1_000_600));
        assert!(p.valid_at(1_000_300) && !p.valid_at(1_000_601) && !p.valid_at(999_999));
        let again = CertPair::from_combined_pem(&p.combined_pem(), "file").unwrap();
        assert_eq!(again.chain, p.chain);
        assert!(again.certified_key().is_ok());
        // Key first works too.
        let swapped = format!("{}{}", p.key_pem, p.cert_pem);
        assert!(CertPair::from_combined_pem(&swapped, "file").is_ok());
    }

    #[test]
    fn mismatched_or_missing_parts_are_refused() {
        let (_, a) = issue("a", &[], &[], 1_000_000, 600);
        let (_, b) = issue("b", &[], &[], 1_000_000, 600);
        let err = CertPair::from_pem(&a.cert_pem, &b.key_pem, "x").unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        assert!(CertPair::from_combined_pem(&a.cert_pem, "x").is_err());
        assert!(CertPair::from_pem("", &a.key_pem, "x").is_err());
    }
}
