//! What a kubelet component implements to take plugins of one type from the plugin manager
//! (Go's `cache.PluginHandler`).

use async_trait::async_trait;

/// A component that takes the plugins of one type (`DevicePlugin`, `CSIPlugin`, …) found
/// in the registration directory. The plugin manager calls it from its reconcile loop and
/// its registration tasks:
///
/// - [`validate_plugin`](Self::validate_plugin), then
///   [`register_plugin`](Self::register_plugin), once per registration attempt of a socket,
///   never concurrently for the same socket (but concurrently for different sockets);
/// - [`deregister_plugin`](Self::deregister_plugin) once for every registration that
///   succeeded, when its socket is gone or was re-created.
///
/// The name, endpoint and versions are the plugin's own answer to `GetInfo`; the endpoint is
/// the registration socket's path when the plugin gave none. Errors are plain messages: the
/// manager sends them to the plugin (`NotifyRegistrationStatus`) behind Go's prefixes.
#[async_trait]
pub trait PluginHandler: Send + Sync {
    /// Whether the plugin may register (Go's `ValidatePlugin`). A refusal is sent to the
    /// plugin, and the socket is tried again after the manager's back-off. Must not block:
    /// no I/O.
    fn validate_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String>;

    /// Registers a validated plugin (Go's `RegisterPlugin`). The manager bounds the call
    /// with [`REGISTER_TIMEOUT`](super::REGISTER_TIMEOUT) and drops the future at that
    /// deadline or at shutdown, so an implementation should either finish its work or leave
    /// nothing behind at every await. On success the plugin is registered until
    /// [`deregister_plugin`](Self::deregister_plugin); on failure it is as if never called,
    /// and the manager tries again later.
    async fn register_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String>;

    /// Forgets a registered plugin (Go's `DeRegisterPlugin`): its socket is gone. Called on
    /// the manager's reconcile loop: must return at once (spawn anything slow).
    fn deregister_plugin(&self, name: &str);
}
