//! Docker config files as image pull secrets carry them: `kubernetes.io/dockerconfigjson`
//! (`.dockerconfigjson`: `{"auths": {REGISTRY: ENTRY}}`) and the legacy
//! `kubernetes.io/dockercfg` (`.dockercfg`: `{REGISTRY: ENTRY}`). An entry's `auth`
//! (base64 of `user:password`, padded or not) replaces its `username` and `password`, as in
//! Go's `DockerConfigEntry.UnmarshalJSON`.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::credentials::{DockerConfig, DockerConfigEntry};

/// The secret type of `.dockerconfigjson` secrets.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The secret type of `.dockercfg` secrets.
pub const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";

/// Why a pull secret's docker config cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerConfigError {
    /// The JSON does not parse.
    #[error("secret {secret}: {key} is not a docker config: {message}")]
    Json {
        /// `namespace/name` of the secret.
        secret: String,
        /// The data key.
        key: &'static str,
        /// The parser's message.
        message: String,
    },
    /// An entry's `auth` field is not base64 of `user:password`.
    #[error("secret {secret}: the auth field of {registry:?}: {message}")]
    Auth {
        /// `namespace/name` of the secret.
        secret: String,
        /// The registry the entry is for.
        registry: String,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize, Default)]
struct RawEntry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    auth: String,
}

#[derive(Deserialize, Default)]
struct RawConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, RawEntry>,
}

/// Go's `decodeDockerConfigFieldAuth`: base64 (padded when it ends with `=`, else unpadded)
/// of `user:password`.
pub(crate) fn decode_auth(field: &str) -> Result<(String, String), String> {
    let trimmed = field.trim();
    let decoded = if trimmed.ends_with('=') {
        base64::engine::general_purpose::STANDARD.decode(field)
    } else {
        base64::engine::general_purpose::STANDARD_NO_PAD.decode(field)
    }
    .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&decoded);
    match text.split_once(':') {
        Some((user, password)) => Ok((user.to_string(), password.to_string())),
        None => {
            Err("unable to parse auth field, must be formatted as base64(username:password)".into())
        }
    }
}

fn entries(
    raw: BTreeMap<String, RawEntry>,
    secret: &str,
) -> Result<DockerConfig, DockerConfigError> {
    let mut out = DockerConfig::new();
    for (registry, e) in raw {
        let (username, password) = if e.auth.is_empty() {
            (e.username, e.password)
        } else {
            decode_auth(&e.auth).map_err(|message| DockerConfigError::Auth {
                secret: secret.to_string(),
                registry: registry.clone(),
                message,
            })?
        };
        out.insert(
            registry,
            DockerConfigEntry {
                username,
                password,
                email: e.email,
            },
        );
    }
    Ok(out)
}

/// Parses a `.dockerconfigjson` document.
pub fn parse_config_json(bytes: &[u8], secret: &str) -> Result<DockerConfig, DockerConfigError> {
    let raw: RawConfigJson =
        serde_json::from_slice(bytes).map_err(|e| DockerConfigError::Json {
            secret: secret.to_string(),
            key: ".dockerconfigjson",
            message: e.to_string(),
        })?;
    entries(raw.auths, secret)
}

/// Parses a `.dockercfg` document.
pub fn parse_dockercfg(bytes: &[u8], secret: &str) -> Result<DockerConfig, DockerConfigError> {
    let raw: BTreeMap<String, RawEntry> =
        serde_json::from_slice(bytes).map_err(|e| DockerConfigError::Json {
            secret: secret.to_string(),
            key: ".dockercfg",
            message: e.to_string(),
        })?;
    entries(raw, secret)
}

/// The docker config of an image pull secret (Go's `MakeDockerKeyring` per secret): `None`
/// for a secret of another type or without (or with empty) data under its key.
pub fn from_secret(secret: &Secret) -> Result<Option<DockerConfig>, DockerConfigError> {
    let name = format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    let data = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.as_slice())
            .filter(|b| !b.is_empty())
    };
    match secret.type_.as_deref() {
        Some(DOCKER_CONFIG_JSON_TYPE) => data(".dockerconfigjson")
            .map(|b| parse_config_json(b, &name))
            .transpose(),
        Some(DOCKERCFG_TYPE) => data(".dockercfg")
            .map(|b| parse_dockercfg(b, &name))
            .transpose(),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(type_: &str, key: &str, json: &str) -> Secret {
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("pull".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(
                [(key.to_string(), ByteString(json.as_bytes().to_vec()))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn both_secret_types_and_auth_decoding() {
        // base64("foo:bar") padded and unpadded.
        let json = secret(
            DOCKER_CONFIG_JSON_TYPE,
            ".dockerconfigjson",
            r#"{"auths":{"reg.io":{"auth":"Zm9vOmJhcg==","email":"a@b"},"other.io":{"username":"u","password":"p"}}}"#,
        );
        let c = from_secret(&json).unwrap().unwrap();
        assert_eq!(c["reg.io"].username, "foo");
        assert_eq!(c["reg.io"].password, "bar");
        assert_eq!(c["reg.io"].email, "a@b");
        assert_eq!(c["other.io"].username, "u");
        let cfg = secret(
            DOCKERCFG_TYPE,
            ".dockercfg",
            r#"{"https://reg.io":{"auth":"Zm9vOmJhcg"}}"#,
        );
        let c = from_secret(&cfg).unwrap().unwrap();
        assert_eq!(c["https://reg.io"].password, "bar");
        // A password with colons keeps them.
        assert_eq!(
            decode_auth("dTpwOnE=").unwrap(),
            ("u".to_string(), "p:q".to_string())
        );
    }

    #[test]
    fn other_types_and_bad_documents() {
        let opaque = secret("Opaque", ".dockerconfigjson", "{}");
        assert_eq!(from_secret(&opaque).unwrap(), None);
        // The key of the other type does not count.
        let wrong_key = secret(DOCKER_CONFIG_JSON_TYPE, ".dockercfg", "{}");
        assert_eq!(from_secret(&wrong_key).unwrap(), None);
        let bad = secret(DOCKER_CONFIG_JSON_TYPE, ".dockerconfigjson", "{not json");
        let err = from_secret(&bad).unwrap_err();
        assert!(err.to_string().contains("secret ns/pull"), "{err}");
        let no_colon = secret(
            DOCKERCFG_TYPE,
            ".dockercfg",
            r#"{"reg.io":{"auth":"Zm9v"}}"#,
        );
        assert!(matches!(
            from_secret(&no_colon),
            Err(DockerConfigError::Auth { .. })
        ));
        let not_base64 = secret(DOCKERCFG_TYPE, ".dockercfg", r#"{"reg.io":{"auth":"%%%"}}"#);
        assert!(from_secret(&not_base64).is_err());
        // No auths at all: an empty config.
        let empty = secret(DOCKER_CONFIG_JSON_TYPE, ".dockerconfigjson", "{}");
        assert_eq!(from_secret(&empty).unwrap(), Some(DockerConfig::new()));
    }
}
