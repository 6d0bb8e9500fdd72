//! One plugin run (the exec protocol, `credentialprovider.kubelet.k8s.io`): the
//! `CredentialProviderRequest` (`{"apiVersion", "kind", "image"}`) on stdin, the
//! `CredentialProviderResponse` (`cacheKeyType`, `cacheDuration`, `auth`) from stdout, the
//! kubelet's environment plus the configured one, a timeout. The response must have the
//! requested `apiVersion`; a response that does not decode is refused without repeating it
//! (it may hold credentials).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use kubelet_core::credentials::{DockerConfig, DockerConfigEntry};
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::cache::CacheKeyType;
use super::config::ProviderConfig;
use super::PluginError;

/// How long a plugin may run.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// A decoded response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// What the answer may be cached under.
    pub cache_key_type: CacheKeyType,
    /// For how long; `None`: the configured default.
    pub cache_duration: Option<Duration>,
    /// Credentials by registry pattern.
    pub auth: DockerConfig,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponse {
    kind: Option<String>,
    #[serde(default)]
    cache_key_type: String,
    cache_duration: Option<String>,
    #[serde(default)]
    auth: BTreeMap<String, RawAuth>,
}

#[derive(Deserialize)]
struct RawAuth {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// The request document for `image`.
pub fn request(api_version: &str, image: &str) -> Vec<u8> {
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "CredentialProviderRequest",
        "image": image,
    })
    .to_string()
    .into_bytes()
}

/// Decodes a response of plugin `name` that must be of `api_version`.
pub fn decode(name: &str, api_version: &str, stdout: &[u8]) -> Result<Response, PluginError> {
    let bad = |message: String| PluginError::Response {
        plugin: name.to_string(),
        message,
    };
    // Only the type fields first: a body that fails to decode is never quoted.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct TypeMeta {
        api_version: Option<String>,
    }
    let meta: TypeMeta = serde_json::from_slice(stdout).map_err(|_| {
        bad("error decoding credential provider plugin response from stdout".into())
    })?;
    let got = meta.api_version.unwrap_or_default();
    if got != api_version {
        return Err(bad(format!(
            "apiVersion from credential plugin response did not match expected apiVersion:{api_version}, actual apiVersion:{got}"
        )));
    }
    let raw: RawResponse = serde_json::from_slice(stdout).map_err(|_| {
        bad("error decoding credential provider plugin response from stdout".into())
    })?;
    if raw.kind.as_deref() != Some("CredentialProviderResponse") {
        return Err(bad(format!(
            "kind must be CredentialProviderResponse, got {:?}",
            raw.kind
        )));
    }
    let cache_key_type = CacheKeyType::parse(&raw.cache_key_type).ok_or_else(|| {
        bad(format!(
            "credential provider plugin did not return a valid cacheKeyType: {:?}",
            raw.cache_key_type
        ))
    })?;
    let cache_duration = raw
        .cache_duration
        .as_deref()
        .map(kubelet_core::duration::parse_go_duration)
        .transpose()
        .map_err(|e| bad(format!("cacheDuration: {e}")))?;
    let auth = raw
        .auth
        .into_iter()
        .map(|(k, a)| {
            (
                k,
                DockerConfigEntry {
                    username: a.username,
                    password: a.password,
                    email: String::new(),
                },
            )
        })
        .collect();
    Ok(Response {
        cache_key_type,
        cache_duration,
        auth,
    })
}

/// Runs plugin `config` (its executable `bin`) for `image`, within `timeout`.
pub async fn run(
    config: &ProviderConfig,
    bin: &PathBuf,
    image: &str,
    timeout: Duration,
) -> Result<Response, PluginError> {
    let fail = |message: String| PluginError::Exec {
        plugin: config.name.clone(),
        image: image.to_string(),
        message,
    };
    let mut child = tokio::process::Command::new(bin)
        .args(&config.args)
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("starting {}: {e}", bin.display())))?;
    let body = request(&config.api_version, image);
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| fail("no stdin pipe".into()))?;
    let exchange = async move {
        // A plugin that exits without reading is judged by its exit status, not the pipe.
        let _ = stdin.write_all(&body).await;
        drop(stdin);
        child.wait_with_output().await
    };
    let out = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| {
            fail(format!(
                "timed out after {timeout:?} waiting for the plugin"
            ))
        })?
        .map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr: String = stderr.trim().chars().take(500).collect();
        return Err(fail(format!("{} (stderr: {stderr})", out.status)));
    }
    decode(&config.name, &config.api_version, &out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "credentialprovider.kubelet.k8s.io/v1";

    #[test]
    fn request_and_response_documents() {
        let req: serde_json::Value = serde_json::from_slice(&request(V1, "reg.io/a")).unwrap();
        assert_eq!(req["kind"], "CredentialProviderRequest");
        assert_eq!(req["apiVersion"], V1);
        assert_eq!(req["image"], "reg.io/a");
        let ok = format!(
            r#"{{"apiVersion":"{V1}","kind":"CredentialProviderResponse","cacheKeyType":"Registry","cacheDuration":"5m","auth":{{"reg.io":{{"username":"u","password":"p"}}}}}}"#
        );
        let r = decode("p", V1, ok.as_bytes()).unwrap();
        assert_eq!(r.cache_key_type, CacheKeyType::Registry);
        assert_eq!(r.cache_duration, Some(Duration::from_secs(300)));
        assert_eq!(r.auth["reg.io"].username, "u");
        let no_duration = ok.replace(r#""cacheDuration":"5m","#, "");
        assert_eq!(
            decode("p", V1, no_duration.as_bytes())
                .unwrap()
                .cache_duration,
            None
        );
    }

    #[test]
    fn bad_responses() {
        let other_version = r#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}"#;
        let e = decode("p", V1, other_version.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not match expected apiVersion"), "{e}");
        let e = decode("p", V1, b"password=hunter2")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "never quoted: {e}");
        let bad_key = format!(
            r#"{{"apiVersion":"{V1}","kind":"CredentialProviderResponse","cacheKeyType":"Pod"}}"#
        );
        let e = decode("p", V1, bad_key.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("valid cacheKeyType"), "{e}");
        let bad_kind = format!(r#"{{"apiVersion":"{V1}","kind":"Other","cacheKeyType":"Image"}}"#);
        assert!(decode("p", V1, bad_kind.as_bytes()).is_err());
    }
}
