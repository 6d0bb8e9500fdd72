//! TokenReview and SubjectAccessReview against the API server, with TTL caches (Go's
//! delegating authenticator and authorizer of k8s.io/apiserver).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{Attributes, AuthError, Authorizer, Decision, TokenAuthenticator, UserInfo};

/// Entries a cache holds at most; past that, expired entries go, then everything.
const CACHE_LIMIT: usize = 10_000;
/// Timeout of one review request.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// A small client of the API server for review requests.
#[derive(Debug, Clone)]
pub struct ApiServerClient {
    base: String,
    bearer: Option<String>,
    client: reqwest::Client,
}

impl ApiServerClient {
    /// A client of the API server at `base` (e.g. `https://10.0.0.1:6443`), trusting
    /// `ca_pem` (None: the system roots), presenting `identity_pem` (client certificate and
    /// key in one PEM) and/or a bearer token.
    pub fn new(
        base: &str,
        ca_pem: Option<&[u8]>,
        identity_pem: Option<&[u8]>,
        bearer: Option<String>,
    ) -> Result<ApiServerClient, AuthError> {
        let bad = |what: &str, e: reqwest::Error| AuthError::File {
            path: what.to_string(),
            message: e.to_string(),
        };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(REVIEW_TIMEOUT);
        if let Some(ca) = ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(ca)
                .map_err(|e| bad("API server CA bundle", e))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(id) = identity_pem {
            builder = builder.identity(
                reqwest::Identity::from_pem(id).map_err(|e| bad("client certificate", e))?,
            );
        }
        Ok(ApiServerClient {
            base: base.trim_end_matches('/').to_string(),
            bearer,
            client: builder.build().map_err(|e| bad("API server client", e))?,
        })
    }

    /// A client from a kubeconfig file's current context: the server URL, the CA
    /// (`certificate-authority[-data]`), the client certificate and key
    /// (`client-certificate[-data]`, `client-key[-data]`) and/or `token`/`tokenFile`. Relative
    /// paths are resolved against the kubeconfig's directory.
    pub async fn from_kubeconfig(path: &std::path::Path) -> Result<ApiServerClient, AuthError> {
        let fail = |message: String| AuthError::File {
            path: path.display().to_string(),
            message,
        };
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let kc: Kubeconfig = serde_yaml_ng::from_str(&text).map_err(|e| fail(e.to_string()))?;
        let ctx_name = kc.current_context.clone().unwrap_or_default();
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == ctx_name)
            .or_else(|| kc.contexts.first())
            .ok_or_else(|| fail("no context".into()))?;
        let cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == ctx.context.cluster)
            .ok_or_else(|| fail(format!("no cluster {:?}", ctx.context.cluster)))?;
        let user = kc.users.iter().find(|u| u.name == ctx.context.user);
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let load =
            |data: &Option<String>, file: &Option<String>| -> Result<Option<Vec<u8>>, AuthError> {
                use base64::Engine as _;
                if let Some(d) = data {
                    return base64::engine::general_purpose::STANDARD
                        .decode(d.trim())
                        .map(Some)
                        .map_err(|e| fail(format!("base64: {e}")));
                }
                match file {
                    Some(f) => std::fs::read(dir.join(f))
                        .map(Some)
                        .map_err(|e| fail(format!("{f}: {e}"))),
                    None => Ok(None),
                }
            };
        let ca = load(
            &cluster.cluster.certificate_authority_data,
            &cluster.cluster.certificate_authority,
        )?;
        let (mut identity, mut token) = (None, None);
        if let Some(u) = user {
            let cert = load(&u.user.client_certificate_data, &u.user.client_certificate)?;
            let key = load(&u.user.client_key_data, &u.user.client_key)?;
            if let (Some(mut c), Some(k)) = (cert, key) {
                c.push(b'\n');
                c.extend(k);
                identity = Some(c);
            }
            token = match (&u.user.token, &u.user.token_file) {
                (Some(t), _) => Some(t.clone()),
                (None, Some(f)) => Some(
                    std::fs::read_to_string(dir.join(f))
                        .map_err(|e| fail(format!("{f}: {e}")))?
                        .trim()
                        .to_string(),
                ),
                _ => None,
            };
        }
        ApiServerClient::new(
            &cluster.cluster.server,
            ca.as_deref(),
            identity.as_deref(),
            token,
        )
    }

    async fn create(
        &self,
        review: &'static str,
        path: &str,
        body: &Value,
    ) -> Result<Value, AuthError> {
        let url = format!("{}{path}", self.base);
        let fail = |message: String| AuthError::Webhook {
            review,
            url: url.clone(),
            message,
        };
        let mut req = self.client.post(&url).json(body);
        if let Some(t) = &self.bearer {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| fail(e.to_string()))?;
        if !status.is_success() {
            return Err(fail(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(300)
                    .collect::<String>()
            )));
        }
        serde_json::from_slice(&bytes).map_err(|e| fail(format!("decoding the answer: {e}")))
    }
}

#[derive(serde::Deserialize)]
struct Kubeconfig {
    #[serde(rename = "current-context")]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Vec<Named<KcCluster>>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
}

#[derive(serde::Deserialize)]
struct Named<T> {
    name: String,
    cluster: T,
}

#[derive(serde::Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: KcUser,
}

#[derive(serde::Deserialize)]
struct NamedContext {
    name: String,
    context: KcContext,
}

#[derive(serde::Deserialize)]
struct KcCluster {
    server: String,
    #[serde(rename = "certificate-authority")]
    certificate_authority: Option<String>,
    #[serde(rename = "certificate-authority-data")]
    certificate_authority_data: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct KcUser {
    #[serde(rename = "client-certificate")]
    client_certificate: Option<String>,
    #[serde(rename = "client-certificate-data")]
    client_certificate_data: Option<String>,
    #[serde(rename = "client-key")]
    client_key: Option<String>,
    #[serde(rename = "client-key-data")]
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
}

#[derive(serde::Deserialize)]
struct KcContext {
    cluster: String,
    #[serde(default)]
    user: String,
}

struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Hash + Eq, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
    fn get(&self, key: &K) -> Option<V> {
        let map = self.entries.lock().ok()?;
        map.get(key)
            .filter(|(expires, _)| *expires > kubelet_core::clock::monotonic_now())
            .map(|(_, v)| v.clone())
    }
    fn put(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        if let Ok(mut map) = self.entries.lock() {
            if map.len() >= CACHE_LIMIT {
                let now = kubelet_core::clock::monotonic_now();
                map.retain(|_, (expires, _)| *expires > now);
                if map.len() >= CACHE_LIMIT {
                    map.clear();
                }
            }
            map.insert(key, (kubelet_core::clock::monotonic_now() + ttl, value));
        }
    }
}

/// Bearer tokens checked with TokenReview (`authentication.webhook`), answers cached for
/// `cacheTTL` (default 2m).
pub struct WebhookTokenAuthenticator {
    client: ApiServerClient,
    ttl: Duration,
    cache: TtlCache<[u8; 32], Option<UserInfo>>,
}

impl WebhookTokenAuthenticator {
    /// Reviews through `client`, caching answers for `ttl`.
    pub fn new(client: ApiServerClient, ttl: Duration) -> Self {
        WebhookTokenAuthenticator {
            client,
            ttl,
            cache: TtlCache::new(),
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[async_trait]
impl TokenAuthenticator for WebhookTokenAuthenticator {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        });
        let review = self
            .client
            .create(
                "TokenReview",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                &body,
            )
            .await?;
        let status = &review["status"];
        let answer = (status["authenticated"].as_bool() == Some(true)).then(|| UserInfo {
            name: status["user"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            uid: status["user"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            groups: strings(&status["user"]["groups"]),
            extra: status["user"]["extra"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
                .unwrap_or_default(),
        });
        self.cache.put(key, answer.clone(), self.ttl);
        Ok(answer)
    }
}

/// SubjectAccessReview authorization (`authorization.mode: Webhook`), allowed answers
/// cached for `cacheAuthorizedTTL` (5m), denied ones for `cacheUnauthorizedTTL` (30s).
pub struct WebhookAuthorizer {
    client: ApiServerClient,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: TtlCache<String, Decision>,
}

impl WebhookAuthorizer {
    /// Reviews through `client` with the given cache times.
    pub fn new(client: ApiServerClient, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        WebhookAuthorizer {
            client,
            allowed_ttl,
            denied_ttl,
            cache: TtlCache::new(),
        }
    }
}

/// The SubjectAccessReview request body for `attrs`.
pub(crate) fn access_review(attrs: &Attributes) -> Value {
    let mut review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": attrs.user.name,
            "uid": attrs.user.uid,
            "groups": attrs.user.groups,
            "resourceAttributes": {
                "verb": attrs.verb,
                "version": "v1",
                "resource": attrs.resource,
                "subresource": attrs.subresource,
                "name": attrs.name,
            },
        },
    });
    // Go sends the user's extra attributes (omitted when there are none).
    if !attrs.user.extra.is_empty() {
        review["spec"]["extra"] = json!(attrs.user.extra);
    }
    review
}

#[async_trait]
impl Authorizer for WebhookAuthorizer {
    async fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthError> {
        let body = access_review(attrs);
        let key = body.to_string();
        if let Some(d) = self.cache.get(&key) {
            return Ok(d);
        }
        let review = self
            .client
            .create(
                "SubjectAccessReview",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                &body,
            )
            .await?;
        let status = &review["status"];
        let decision = if status["allowed"].as_bool() == Some(true) {
            Decision::Allow
        } else {
            Decision::Deny(status["reason"].as_str().unwrap_or_default().to_string())
        };
        let ttl = match decision {
            Decision::Allow => self.allowed_ttl,
            Decision::Deny(_) => self.denied_ttl,
        };
        self.cache.put(key, decision.clone(), ttl);
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_review_body() {
        let attrs = super::super::request_attributes(
            UserInfo {
                name: "bob".into(),
                uid: "1".into(),
                groups: vec!["devs".into()],
                extra: [("scopes".to_string(), vec!["a".to_string(), "b".to_string()])].into(),
            },
            "node-a",
            "GET",
            "/stats/summary",
            false,
        );
        let v = access_review(&attrs);
        assert_eq!(v["spec"]["user"], "bob");
        assert_eq!(v["spec"]["extra"]["scopes"], json!(["a", "b"]));
        assert_eq!(v["spec"]["groups"][0], "devs");
        let ra = &v["spec"]["resourceAttributes"];
        assert_eq!(
            (
                ra["verb"].as_str(),
                ra["resource"].as_str(),
                ra["subresource"].as_str(),
                ra["name"].as_str()
            ),
            (Some("get"), Some("nodes"), Some("stats"), Some("node-a"))
        );
    }

    #[test]
    fn ttl_cache_expires_and_skips_zero_ttl() {
        let c: TtlCache<u32, u32> = TtlCache::new();
        c.put(1, 10, Duration::from_secs(60));
        c.put(2, 20, Duration::ZERO);
        c.put(3, 30, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(c.get(&1), Some(10));
        assert_eq!(c.get(&2), None);
        assert_eq!(c.get(&3), None);
    }
}
