//! The credential provider configuration file (`--image-credential-provider-config`):
//! `CredentialProviderConfig` of `kubelet.config.k8s.io/v1` (also `v1beta1`, `v1alpha1`),
//! YAML or JSON, validated as Go's `validateCredentialProviderConfig` does.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::PluginError;

/// The `kind` of the configuration file.
pub const CONFIG_KIND: &str = "CredentialProviderConfig";
/// The configuration file versions read.
pub const CONFIG_API_VERSIONS: &[&str] = &[
    "kubelet.config.k8s.io/v1",
    "kubelet.config.k8s.io/v1beta1",
    "kubelet.config.k8s.io/v1alpha1",
];
/// The plugin protocol versions spoken (`credentialprovider.kubelet.k8s.io`).
pub const PROTOCOL_API_VERSIONS: &[&str] = &[
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
];

/// One configured plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The plugin's name: its executable in the plugin directory.
    pub name: String,
    /// Registry patterns of the images it is asked about (host globs, port, path prefix).
    pub match_images: Vec<String>,
    /// How long answers without a `cacheDuration` are cached.
    pub default_cache_duration: Duration,
    /// The protocol version of requests and responses.
    pub api_version: String,
    /// Arguments of the executable.
    pub args: Vec<String>,
    /// Environment added to the kubelet's for the executable.
    pub env: Vec<(String, String)>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawConfig {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    providers: Vec<RawProvider>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawProvider {
    #[serde(default)]
    name: String,
    #[serde(default)]
    match_images: Vec<String>,
    default_cache_duration: Option<String>,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<RawEnv>,
}

#[derive(Deserialize)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

/// Whether a `matchImages` entry is usable: a schemeless URL whose host parts are valid
/// globs, with a numeric port and no wildcard in the path.
fn match_image_error(pattern: &str) -> Option<String> {
    if pattern.is_empty() {
        return Some("must not be empty".into());
    }
    if pattern.contains("://") {
        return Some("must not have a scheme".into());
    }
    if let Err(e) = kubelet_core::keyring::urls_match(pattern, pattern) {
        return Some(e.to_string());
    }
    let path = pattern.split_once('/').map(|(_, p)| p).unwrap_or_default();
    path.contains('*')
        .then(|| "wildcards are not allowed in the path".to_string())
}

/// Parses and validates the configuration file's contents (`path` names it in errors).
pub fn parse(bytes: &[u8], path: &Path) -> Result<Vec<ProviderConfig>, PluginError> {
    let shown = path.display().to_string();
    let invalid = |errors: Vec<String>| PluginError::InvalidConfig {
        path: shown.clone(),
        errors: errors.join("; "),
    };
    let raw: RawConfig = serde_yaml_ng::from_slice(bytes).map_err(|e| PluginError::Config {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let mut errors = Vec::new();
    if raw.kind.as_deref() != Some(CONFIG_KIND) {
        errors.push(format!("kind: must be {CONFIG_KIND}, got {:?}", raw.kind));
    }
    match raw.api_version.as_deref() {
        Some(v) if CONFIG_API_VERSIONS.contains(&v) => {}
        other => errors.push(format!(
            "apiVersion: must be one of {CONFIG_API_VERSIONS:?}, got {other:?}"
        )),
    }
    if raw.providers.is_empty() {
        errors.push("providers: at least 1 item in plugins is required".into());
    }
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (i, p) in raw.providers.into_iter().enumerate() {
        let at = format!("providers[{i}]");
        if p.name.is_empty() {
            errors.push(format!("{at}.name: name is required"));
        } else if p.name.contains('/') {
            errors.push(format!("{at}.name: name cannot contain '/'"));
        } else if p.name == "." || p.name == ".." {
            errors.push(format!("{at}.name: name cannot be {:?}", p.name));
        } else if p.name.contains(' ') {
            errors.push(format!("{at}.name: name cannot contain spaces"));
        } else if !names.insert(p.name.clone()) {
            errors.push(format!("{at}.name: duplicate name {:?}", p.name));
        }
        if p.match_images.is_empty() {
            errors.push(format!(
                "{at}.matchImages: at least 1 item in matchImages is required"
            ));
        }
        for (j, m) in p.match_images.iter().enumerate() {
            if let Some(e) = match_image_error(m) {
                errors.push(format!(
                    "{at}.matchImages[{j}]: invalid match image {m:?}: {e}"
                ));
            }
        }
        let duration = match p.default_cache_duration.as_deref() {
            None => {
                errors.push(format!("{at}.defaultCacheDuration: required"));
                Duration::ZERO
            }
            Some(d) => kubelet_core::duration::parse_go_duration(d).unwrap_or_else(|e| {
                errors.push(format!("{at}.defaultCacheDuration: {e}"));
                Duration::ZERO
            }),
        };
        if !PROTOCOL_API_VERSIONS.contains(&p.api_version.as_str()) {
            errors.push(format!(
                "{at}.apiVersion: must be one of {PROTOCOL_API_VERSIONS:?}, got {:?}",
                p.api_version
            ));
        }
        out.push(ProviderConfig {
            name: p.name,
            match_images: p.match_images,
            default_cache_duration: duration,
            api_version: p.api_version,
            args: p.args,
            env: p.env.into_iter().map(|e| (e.name, e.value)).collect(),
        });
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(invalid(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-plugin
  matchImages: ["*.example.io", "127.0.0.1:5443/team"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: [--verbose]
  env:
  - name: TOKEN
    value: abc
"#;

    #[test]
    fn a_valid_file() {
        let got = parse(GOOD.as_bytes(), Path::new("c.yaml")).unwrap();
        assert_eq!(got.len(), 1);
        let p = &got[0];
        assert_eq!(p.name, "test-plugin");
        assert_eq!(p.default_cache_duration, Duration::from_secs(600));
        assert_eq!(p.env, vec![("TOKEN".to_string(), "abc".to_string())]);
        assert_eq!(p.args, vec!["--verbose".to_string()]);
        // JSON too.
        let json = r#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[{"name":"p","matchImages":["reg.io"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1"}]}"#;
        assert_eq!(
            parse(json.as_bytes(), Path::new("c.json")).unwrap().len(),
            1
        );
    }

    #[test]
    fn invalid_files_name_every_problem() {
        for (text, want) in [
            ("kind: Other\napiVersion: kubelet.config.k8s.io/v1\nproviders: []", "kind: must be"),
            ("kind: CredentialProviderConfig\napiVersion: v9\nproviders: []", "apiVersion: must be one of"),
            ("kind: CredentialProviderConfig\napiVersion: kubelet.config.k8s.io/v1\nproviders: []", "at least 1 item in plugins"),
            (&GOOD.replace("test-plugin", "a/b"), "cannot contain '/'"),
            (&GOOD.replace("test-plugin", ".."), "cannot be \"..\""),
            (&GOOD.replace("test-plugin", "a b"), "cannot contain spaces"),
            (&GOOD.replace("10m", "-1s"), "defaultCacheDuration"),
            (&GOOD.replace("  defaultCacheDuration: 10m\n", ""), "defaultCacheDuration: required"),
            (&GOOD.replace("credentialprovider.kubelet.k8s.io/v1", "v0"), "providers[0].apiVersion"),
            (&GOOD.replace("127.0.0.1:5443/team", "reg.io/*"), "wildcards are not allowed in the path"),
            (&GOOD.replace("127.0.0.1:5443/team", "reg.io:port"), "invalid port"),
            (&GOOD.replace("\"*.example.io\", \"127.0.0.1:5443/team\"", ""), "at least 1 item in matchImages"),
            ("{", "c.yaml"),
        ] {
            let err = parse(text.as_bytes(), Path::new("c.yaml")).unwrap_err().to_string();
            assert!(err.contains(want), "{want:?} not in {err}");
        }
        let twice = format!(
            "{GOOD}- name: test-plugin\n  matchImages: [a.io]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        );
        let err = parse(twice.as_bytes(), Path::new("c.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("duplicate name"), "{err}");
    }
}
