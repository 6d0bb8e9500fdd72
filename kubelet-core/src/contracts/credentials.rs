//! The contract for registry credentials that come from outside the pod (Go's
//! `DockerConfigProvider`): credential provider plugins, node-wide docker config files.
//!
//! A provider answers, for an image's repository (normalized, without tag or digest, e.g.
//! `registry.example:5000/team/app`), a [`DockerConfig`]: credentials keyed by the registry
//! patterns they are for (`*.example`, `registry.example:5000/team`, ...). The engine adds
//! every provider's answer to a keyring, after the pod's own image pull secrets, and matches
//! the image against it as Go does (`kubelet_core::credentials`); the matching credentials
//! are tried in order.

use std::collections::BTreeMap;

use async_trait::async_trait;

/// One registry's credentials in a docker config (Go's `DockerConfigEntry`; `auth` already
/// decoded into `username`/`password`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DockerConfigEntry {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// E-mail (deprecated by docker, kept as Go does).
    pub email: String,
}

/// Credentials keyed by registry pattern (Go's `DockerConfig`): a host with an optional
/// scheme, port and path (`https://registry.example:5000/v2/`, `*.example/team`).
pub type DockerConfig = BTreeMap<String, DockerConfigEntry>;

/// Registry credentials from outside the pod. See the module docs.
#[async_trait]
pub trait CredentialProvider: Send + Sync {
    /// A name for logs (e.g. the plugin's name).
    fn name(&self) -> &str;
    /// Credentials for `image` (a repository without tag or digest). Failures are the
    /// provider's to log: it answers an empty config then, and the pull goes on without it.
    async fn provide(&self, image: &str) -> DockerConfig;
}
