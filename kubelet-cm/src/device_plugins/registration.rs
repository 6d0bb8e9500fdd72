//! The `Registration` service (Go's `ManagerImpl.Register`): counts every request, refuses
//! an unsupported version or a resource name that is not an extended resource name with Go's
//! messages, and otherwise answers at once and hands the request to a registration task
//! ([`super::endpoint::run`]), which dials the plugin back.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_core::admission::is_extended_resource_name;
use kubelet_core::devices::{DevicePluginEvent, DEVICE_PLUGIN_API_VERSION};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use tracing::info;

use super::api::registration_server::Registration;
use super::api::{Empty, RegisterRequest};
use super::endpoint;

/// The API versions the kubelet accepts from plugins (Go's `SupportedVersions`).
const SUPPORTED_VERSIONS: [&str; 1] = [DEVICE_PLUGIN_API_VERSION];

/// What the server and every registration task share.
pub(super) struct Context {
    /// Where plugins' sockets are.
    pub socket_dir: PathBuf,
    /// How long to keep trying to connect to a plugin.
    pub dial_timeout: Duration,
    /// Where events go.
    pub events: mpsc::Sender<DevicePluginEvent>,
    /// Ends everything.
    pub shutdown: CancellationToken,
    /// The registration tasks (and the server's own task).
    pub tasks: TaskTracker,
    /// The newest endpoint that the plugin watcher registered for each resource, and what
    /// stops it (Go's `m.endpoints[name]`, as far as `DeRegisterPlugin` is concerned).
    pub watcher_endpoints: Mutex<HashMap<String, WatcherEndpoint>>,
}

/// An endpoint started through the plugin watcher ([`super::watcher_handler`]).
pub(super) struct WatcherEndpoint {
    /// Its number.
    pub endpoint: u64,
    /// Cancelled to stop it: its task reports `Stopped`.
    pub stop: CancellationToken,
}

impl Context {
    /// Sends `event` unless shutdown comes first; false when it was not sent (shutdown, or
    /// nobody receives any more), which ends the sending task.
    pub async fn report(&self, event: DevicePluginEvent) -> bool {
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => false,
            sent = self.events.send(event) => sent.is_ok(),
        }
    }
}

/// The `Registration` service.
pub(super) struct RegistrationHandler {
    context: Arc<Context>,
}

impl RegistrationHandler {
    pub fn new(context: Arc<Context>) -> RegistrationHandler {
        RegistrationHandler { context }
    }
}

#[tonic::async_trait]
impl Registration for RegistrationHandler {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let request = request.into_inner();
        let resource = request.resource_name.as_str();
        info!(
            resource,
            version = %request.version,
            endpoint = %request.endpoint,
            "Got registration request from device plugin"
        );
        kubelet_core::metrics::global()
            .device_plugin_registrations
            .inc(resource);
        if let Err(message) = check_request(&request) {
            info!(resource, error = %message, "Bad registration request from device plugin");
            // Go returns a plain error, which gRPC sends as Unknown.
            return Err(Status::unknown(message));
        }
        self.context
            .tasks
            .spawn(endpoint::run(self.context.clone(), request));
        Ok(Response::new(Empty {}))
    }
}

/// Go's checks of a registration, with its messages (`errUnsupportedVersion`,
/// `errInvalidResourceName`).
pub(super) fn check_request(request: &RegisterRequest) -> Result<(), String> {
    if !SUPPORTED_VERSIONS.contains(&request.version.as_str()) {
        return Err(format!(
            "requested API version {} is not supported by kubelet. Supported version is {}",
            go_quote(&request.version),
            go_quote_list(&SUPPORTED_VERSIONS)
        ));
    }
    if !is_valid_resource_name(&request.resource_name) {
        return Err(invalid_resource_name(&request.resource_name));
    }
    Ok(())
}

/// Go's `errInvalidResourceName` for `name`: `the ResourceName "<name>" is invalid`.
pub(super) fn invalid_resource_name(name: &str) -> String {
    format!("the ResourceName {} is invalid", go_quote(name))
}

/// Go's `IsExtendedResourceName`: outside the `kubernetes.io/` domains, with a domain
/// prefix, not a quota `requests.` name (kubelet-core's rules), and `requests.<name>` must be
/// a qualified name.
pub(super) fn is_valid_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) && is_qualified_name(&format!("requests.{name}"))
}

/// Go's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain, the name at most
/// 63 alphanumerics, `-`, `_` or `.`, starting and ending with an alphanumeric.
fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if name.contains('/') {
        return false;
    }
    let prefix_ok = prefix.is_none_or(is_dns1123_subdomain);
    let bytes = name.as_bytes();
    let name_ok = match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    };
    prefix_ok && name_ok
}

/// At most 253 characters of dot-separated DNS-1123 labels.
fn is_dns1123_subdomain(value: &str) -> bool {
    let label = |l: &str| {
        let b = l.as_bytes();
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        b.first().is_some_and(alnum)
            && b.last().is_some_and(alnum)
            && b.iter().all(|c| alnum(c) || *c == b'-')
    };
    !value.is_empty() && value.len() <= 253 && value.split('.').all(label)
}

/// Go's `%q` of a string (`strconv.Quote`).
pub(super) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                let n = c as u32;
                if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a string slice or array: `["a" "b"]`.
fn go_quote_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s)).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: &str, resource: &str) -> RegisterRequest {
        RegisterRequest {
            version: version.to_string(),
            endpoint: "plugin.sock".to_string(),
            resource_name: resource.to_string(),
            options: None,
        }
    }

    #[test]
    fn messages_are_gos() {
        assert_eq!(
            check_request(&request("v1beta1", "example.com/gpu")),
            Ok(())
        );
        assert_eq!(
            check_request(&request("v1alpha", "example.com/gpu")),
            Err(
                "requested API version \"v1alpha\" is not supported by kubelet. \
                 Supported version is [\"v1beta1\"]"
                    .to_string()
            )
        );
        assert_eq!(
            check_request(&request("v1beta1", "gpu")),
            Err("the ResourceName \"gpu\" is invalid".to_string())
        );
        // The version is checked first.
        assert!(check_request(&request("", "gpu"))
            .unwrap_err()
            .starts_with("requested API version \"\""));
    }

    #[test]
    fn extended_resource_names() {
        for (name, want) in [
            ("example.com/gpu", true),
            ("nvidia.com/gpu", true),
            ("vendor.example/Thing_1.a", true),
            ("gpu", false),
            ("cpu", false),
            ("kubernetes.io/gpu", false),
            ("example.kubernetes.io/gpu", false),
            ("requests.example.com/gpu", false),
            ("example.com/", false),
            ("/gpu", false),
            ("Example.com/gpu", false),
            ("example.com/a/b", false),
            ("example.com/-gpu", false),
            ("example.com/gpu!", false),
            (&format!("example.com/{}", "g".repeat(64)), false),
            (&format!("example.com/{}", "g".repeat(63)), true),
        ] {
            assert_eq!(is_valid_resource_name(name), want, "{name}");
        }
    }

    #[test]
    fn quoting_follows_go() {
        assert_eq!(go_quote("v1"), "\"v1\"");
        assert_eq!(go_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(go_quote("a\nb\t\u{1}\u{7f}"), "\"a\\nb\\t\\x01\\x7f\"");
        assert_eq!(go_quote("\u{85}é"), "\"\\u0085é\"");
        assert_eq!(go_quote_list(&["a", "b"]), "[\"a\" \"b\"]");
    }
}
