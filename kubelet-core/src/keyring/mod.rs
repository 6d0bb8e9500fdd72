//! Which registry credentials apply to an image (Go's `pkg/credentialprovider` keyring and
//! `kuberuntime_image.go`'s pull loop), decided here and nowhere else.
//!
//! A pod's credentials are, in order: those of its image pull secrets
//! ([`docker_config::from_secret`], read through the [`crate::objects::ObjectStore`]), then
//! those the [`CredentialProvider`]s (plugins) answer for the image. Each set is a
//! [`Keyring`] keyed by registry pattern; a lookup of the image's repository
//! ([`image_name::repository`]) returns every entry whose pattern matches
//! ([`url_match::urls_match`]), the most specific pattern first (the index is sorted in
//! reverse, so `host/team` comes before `host`). When nothing matches and the image is on
//! Docker Hub, credentials stored for `index.docker.io` apply. The puller tries the
//! credentials in that order until one pull succeeds; with none, it pulls anonymously.

pub mod docker_config;
pub mod image_name;
pub mod url_match;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::credentials::{CredentialProvider, DockerConfig, DockerConfigEntry};
use crate::objects::ObjectStore;
use crate::runtime::RegistryAuth;

pub use docker_config::DockerConfigError;
pub use image_name::ImageNameError;
pub use url_match::{urls_match, UrlError};

const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// Credentials indexed by registry pattern (Go's `BasicDockerKeyring`). See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    /// Patterns, reverse-sorted (most specific first), without duplicates.
    index: Vec<String>,
    creds: BTreeMap<String, Vec<DockerConfigEntry>>,
}

/// The key Go stores a docker config location under: scheme dropped, `/v1/` and `/v2/`
/// prefixes of the path dropped, a bare `/` path dropped.
fn location_key(location: &str) -> Result<String, UrlError> {
    let value = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let parsed = url_match::parse_schemeless(value)?;
    let mut path = parsed.path.as_str();
    if path.starts_with("/v2/") || path.starts_with("/v1/") {
        path = &path[3..];
    }
    Ok(if !path.is_empty() && path != "/" {
        format!("{}{path}", parsed.host)
    } else {
        parsed.host
    })
}

/// Go's `isDefaultRegistryMatch`: whether the image pulls from Docker Hub.
fn is_default_registry_match(image: &str) -> bool {
    let mut parts = image.splitn(2, '/');
    let first = parts.next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    if parts.next().is_none() {
        return true;
    }
    if first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

impl Keyring {
    /// An empty keyring.
    pub fn new() -> Keyring {
        Keyring::default()
    }

    /// Adds a docker config (Go's `Add`); locations that do not parse are skipped with a log
    /// line, as Go does.
    pub fn add(&mut self, config: &DockerConfig) {
        for (location, entry) in config {
            let key = match location_key(location) {
                Ok(k) => k,
                Err(e) => {
                    tracing::warn!(entry = %location, error = %e, "a docker config entry is invalid, ignoring it");
                    continue;
                }
            };
            self.creds
                .entry(key.clone())
                .or_default()
                .push(entry.clone());
            self.index.push(key);
        }
        self.index.sort();
        self.index.dedup();
        self.index.reverse();
    }

    /// Whether the keyring holds nothing.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Every credential whose pattern matches `image` (a repository), most specific first
    /// (Go's `Lookup`).
    pub fn lookup(&self, image: &str) -> Vec<DockerConfigEntry> {
        let found: Vec<DockerConfigEntry> = self
            .index
            .iter()
            .filter(|k| urls_match(k, image).unwrap_or(false))
            .flat_map(|k| self.creds.get(k).cloned().unwrap_or_default())
            .collect();
        if !found.is_empty() {
            return found;
        }
        if is_default_registry_match(image) {
            if let Some(c) = self.creds.get(DEFAULT_REGISTRY_HOST) {
                return c.clone();
            }
        }
        Vec::new()
    }
}

/// Why a pod's pull credentials cannot be assembled (the pull then fails with this message,
/// as Go's `MakeDockerKeyring` error does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    /// An image pull secret holds a broken docker config.
    #[error(transparent)]
    Secret(#[from] DockerConfigError),
}

/// What the pull secrets of a pod gave: the keyring and the secrets that could not be read.
#[derive(Debug, Clone, Default)]
pub struct PodSecrets {
    /// The secrets' credentials.
    pub keyring: Keyring,
    /// `name: error` of each referenced secret that could not be read.
    pub missing: Vec<String>,
}

/// Reads the pod's image pull secrets (Go's `getPullSecretsForPod`: a secret that cannot be
/// read is skipped, reported in [`PodSecrets::missing`]) into a keyring.
pub async fn pod_secrets(pod: &Pod, store: &dyn ObjectStore) -> Result<PodSecrets, KeyringError> {
    let namespace = crate::pod::namespace(pod);
    let refs = pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = PodSecrets::default();
    for r in refs {
        if r.name.is_empty() {
            continue;
        }
        match store.secret(namespace, &r.name).await {
            Ok(secret) => {
                if let Some(config) = docker_config::from_secret(&secret)? {
                    out.keyring.add(&config);
                }
            }
            Err(e) => out.missing.push(format!("{}: {e}", r.name)),
        }
    }
    Ok(out)
}

/// The credentials to try for `image`, in order: the pod's secrets', then the providers'
/// (see the module docs). Empty: pull without credentials.
pub async fn lookup(
    image: &str,
    secrets: &Keyring,
    providers: &[Arc<dyn CredentialProvider>],
) -> Vec<RegistryAuth> {
    let repo = match image_name::repository(image) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(image, error = %e, "not a normalizable image name; matching it as written");
            image.to_string()
        }
    };
    let mut entries = secrets.lookup(&repo);
    if !providers.is_empty() {
        let mut provided = Keyring::new();
        for p in providers {
            provided.add(&p.provide(&repo).await);
        }
        entries.extend(provided.lookup(&repo));
    }
    entries
        .into_iter()
        .map(|e| RegistryAuth {
            username: e.username,
            password: e.password,
            ..RegistryAuth::default()
        })
        .collect()
}

#[cfg(test)]
mod tests;
