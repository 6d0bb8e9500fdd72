//! Credential provider plugins (`--image-credential-provider-config`,
//! `--image-credential-provider-bin-dir`; Go's `pkg/credentialprovider/plugin`): executables
//! the kubelet asks for registry credentials, one [`PluginProvider`] each, behind the
//! [`kubelet_core::credentials::CredentialProvider`] contract.
//!
//! For an image's repository a provider answers nothing unless one of its `matchImages`
//! patterns matches (Go's URL matching); otherwise it answers from its [`cache::Cache`] or
//! runs the plugin ([`exec::run`]: the request on stdin, the response on stdout) and caches
//! the response as it asks (`cacheKeyType`, `cacheDuration`). Concurrent requests for one
//! image wait for one run. A failed run is logged and answers nothing: the pull goes on with
//! the other credentials (or none), and fails on its own if the registry wants them.

pub mod cache;
pub mod config;
pub mod exec;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::credentials::{CredentialProvider, DockerConfig};
use tokio::time::Instant;

pub use config::ProviderConfig;

/// Errors of the credential provider plugins.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The configuration file could not be read or parsed.
    #[error("credential provider config {path}: {message}")]
    Config {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The configuration file is not valid.
    #[error("credential provider config {path}: {errors}")]
    InvalidConfig {
        /// The file.
        path: String,
        /// Every problem, `; `-separated.
        errors: String,
    },
    /// A configured plugin has no executable in the plugin directory.
    #[error(
        "credential provider plugin {plugin}: error inspecting binary executable {path}: {message}"
    )]
    Binary {
        /// The plugin.
        plugin: String,
        /// Where its executable should be.
        path: String,
        /// Why it cannot be used.
        message: String,
    },
    /// A plugin run failed.
    #[error("credential provider plugin {plugin} for image {image}: {message}")]
    Exec {
        /// The plugin.
        plugin: String,
        /// The image asked about.
        image: String,
        /// What failed.
        message: String,
    },
    /// A plugin's response is not acceptable.
    #[error("credential provider plugin {plugin}: {message}")]
    Response {
        /// The plugin.
        plugin: String,
        /// What is wrong with it.
        message: String,
    },
}

/// One configured plugin as a credential provider. See the module docs.
pub struct PluginProvider {
    config: ProviderConfig,
    bin: PathBuf,
    timeout: Duration,
    cache: Mutex<cache::Cache>,
    /// One lock per image being asked about, so concurrent pulls wait for one run.
    in_flight: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for PluginProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginProvider")
            .field("name", &self.config.name)
            .field("bin", &self.bin)
            .finish_non_exhaustive()
    }
}

impl PluginProvider {
    /// A provider running `bin` as `config` says.
    pub fn new(config: ProviderConfig, bin: PathBuf) -> PluginProvider {
        PluginProvider {
            config,
            bin,
            timeout: exec::EXEC_TIMEOUT,
            cache: Mutex::new(cache::Cache::new(Instant::now())),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// With another timeout for one run (default [`exec::EXEC_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> PluginProvider {
        self.timeout = timeout;
        self
    }

    /// Whether `image` is one the plugin is asked about.
    pub fn matches(&self, image: &str) -> bool {
        self.config
            .match_images
            .iter()
            .any(|m| kubelet_core::keyring::urls_match(m, image).unwrap_or(false))
    }

    fn cached(&self, image: &str) -> Option<DockerConfig> {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(image, Instant::now())
    }

    /// The answer for `image`: cached, or from a run (see the module docs).
    pub async fn credentials(&self, image: &str) -> Result<DockerConfig, PluginError> {
        if !self.matches(image) {
            return Ok(DockerConfig::new());
        }
        if let Some(c) = self.cached(image) {
            return Ok(c);
        }
        let lock = {
            let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(image.to_string()).or_default().clone()
        };
        let result = {
            let _guard = lock.lock().await;
            match self.cached(image) {
                Some(c) => Ok(c),
                None => self.run(image).await,
            }
        };
        let mut map = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(image).is_some_and(|l| Arc::strong_count(l) <= 2) {
            map.remove(image);
        }
        result
    }

    async fn run(&self, image: &str) -> Result<DockerConfig, PluginError> {
        let response = exec::run(&self.config, &self.bin, image, self.timeout).await?;
        let duration = response
            .cache_duration
            .unwrap_or(self.config.default_cache_duration);
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).put(
            image,
            response.cache_key_type,
            response.auth.clone(),
            duration,
            Instant::now(),
        );
        Ok(response.auth)
    }
}

#[async_trait]
impl CredentialProvider for PluginProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    async fn provide(&self, image: &str) -> DockerConfig {
        match self.credentials(image).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(plugin = %self.config.name, image, error = %e, "failed to get credentials from the credential provider plugin");
                DockerConfig::new()
            }
        }
    }
}

/// Reads the configuration file and finds every plugin's executable in `bin_dir` (blocking
/// file IO: call it at start-up or from `spawn_blocking`).
pub fn load(config_path: &Path, bin_dir: &Path) -> Result<Vec<PluginProvider>, PluginError> {
    let bytes = std::fs::read(config_path).map_err(|e| PluginError::Config {
        path: config_path.display().to_string(),
        message: e.to_string(),
    })?;
    let configs = config::parse(&bytes, config_path)?;
    let mut out = Vec::new();
    for c in configs {
        let bin = bin_dir.join(&c.name);
        let bad = |message: String| PluginError::Binary {
            plugin: c.name.clone(),
            path: bin.display().to_string(),
            message,
        };
        let meta = std::fs::metadata(&bin).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a file".into()));
        }
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(bad("not executable".into()));
        }
        out.push(PluginProvider::new(c, bin));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
