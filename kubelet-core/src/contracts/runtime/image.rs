//! Images: pulls, lookups and listings.

use super::SandboxConfig;

/// Registry credentials for one pull (from image pull secrets).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegistryAuth {
    /// User name.
    pub username: String,
    /// Password.
    pub password: String,
    /// base64(user:password), as in docker config files.
    pub auth: String,
    /// Registry host the credentials are for.
    pub server_address: String,
    /// Identity token.
    pub identity_token: String,
    /// Registry token.
    pub registry_token: String,
}

/// An image known to the runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageInfo {
    /// Image id.
    pub id: String,
    /// Tags, e.g. "docker.io/library/busybox:latest".
    pub repo_tags: Vec<String>,
    /// Digests.
    pub repo_digests: Vec<String>,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The runtime needs it (its sandbox image; CRI's `pinned`): image garbage collection
    /// never removes it.
    pub pinned: bool,
}

/// An image pull.
#[derive(Debug, Clone)]
pub struct PullImageRequest {
    /// The image reference as written in the pod spec.
    pub image: String,
    /// Credentials from the pod's image pull secrets, if any matched the registry.
    pub auth: Option<RegistryAuth>,
    /// The sandbox the image is pulled for, if known.
    pub sandbox: Option<SandboxConfig>,
}
