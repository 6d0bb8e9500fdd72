//! Authentication and authorization of requests to the secure port, as the Go kubelet
//! (`pkg/kubelet/server/auth.go` and the delegating authenticator/authorizer of
//! k8s.io/apiserver):
//!
//! - **Authentication**: a client certificate verified against `clientCAFile` (user = the
//!   subject's CN, groups = its O values); else a bearer token checked by a
//!   [`TokenAuthenticator`] (TokenReview webhook, answers cached 2m); else, only when
//!   enabled, `system:anonymous` in `system:unauthenticated`. A presented but invalid
//!   certificate or token is never taken for anonymous.
//! - **Authorization**: an [`Authorizer`] (`AlwaysAllow` or SubjectAccessReview webhook,
//!   allowed answers cached 5m, denied 30s) asked about [`Attributes`] derived from the
//!   request as Go does: verb from the method, resource `nodes`, subresource from the path.

mod attributes;
mod webhook;

use std::sync::Arc;

use async_trait::async_trait;

pub use attributes::{
    is_canonical_path, request_attributes, request_attributes_list, verb_for, Attributes,
};
pub use webhook::{ApiServerClient, WebhookAuthorizer, WebhookTokenAuthenticator};

/// Errors of authentication and authorization.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The client certificate did not verify against the client CA.
    #[error("client certificate of {subject:?} is not valid: {message}")]
    ClientCertificate {
        /// The certificate's subject as far as it could be read.
        subject: String,
        /// Why it is rejected.
        message: String,
    },
    /// The bearer token was rejected.
    #[error("bearer token rejected: {0}")]
    InvalidToken(String),
    /// Asking the API server failed.
    #[error("{review} request to {url} failed: {message}")]
    Webhook {
        /// `TokenReview` or `SubjectAccessReview`.
        review: &'static str,
        /// The URL asked.
        url: String,
        /// Why.
        message: String,
    },
    /// A configured file (CA bundle, client certificate) could not be used.
    #[error("reading {path}: {message}")]
    File {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
}

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name, e.g. `system:node:n1`, `kube-apiserver-kubelet-client`, `system:anonymous`.
    pub name: String,
    /// User UID, when the authenticator knows it.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes (TokenReview's `user.extra`, e.g. scopes or the pod a service account
    /// token is bound to), sent on to authorization as Go does.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The anonymous user (`system:anonymous`, group `system:unauthenticated`).
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
            extra: Default::default(),
        }
    }
}

/// Checks bearer tokens (Go: the TokenReview webhook authenticator).
#[async_trait]
pub trait TokenAuthenticator: Send + Sync {
    /// `Ok(Some(user))` when the token is valid, `Ok(None)` when it is not, `Err` when it
    /// could not be checked.
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError>;
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Denied, with the reason the authorizer gave (may be empty).
    Deny(String),
}

/// Decides whether a user may do what a request asks (Go: `authorizer.Authorizer`).
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// The decision for `attrs`.
    async fn authorize(&self, attrs: &Attributes) -> Result<Decision, AuthError>;
}

/// `authorization.mode: AlwaysAllow`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysAllow;

#[async_trait]
impl Authorizer for AlwaysAllow {
    async fn authorize(&self, _attrs: &Attributes) -> Result<Decision, AuthError> {
        Ok(Decision::Allow)
    }
}

/// How the secure port authenticates and authorizes requests.
#[derive(Clone)]
pub struct AuthConfig {
    /// Accept requests nothing else authenticated as `system:anonymous`.
    pub anonymous: bool,
    /// Bearer token checking; `None`: bearer tokens are not accepted.
    pub tokens: Option<Arc<dyn TokenAuthenticator>>,
    /// The authorizer.
    pub authorizer: Arc<dyn Authorizer>,
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("anonymous", &self.anonymous)
            .field("tokens", &self.tokens.is_some())
            .finish_non_exhaustive()
    }
}

impl AuthConfig {
    /// No authentication at all, everything allowed: what the read-only port does.
    pub fn allow_all() -> AuthConfig {
        AuthConfig {
            anonymous: true,
            tokens: None,
            authorizer: Arc::new(AlwaysAllow),
        }
    }
}

/// What the TLS layer found out about the client's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PeerCert {
    /// No certificate was presented (or the connection is plain HTTP).
    #[default]
    None,
    /// A certificate chained to the client CA: the user it names.
    Verified(UserInfo),
    /// A certificate that did not verify; the message says why.
    Invalid(String),
}

/// The result of authenticating one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authn {
    /// Authenticated (possibly as anonymous).
    User(UserInfo),
    /// Not authenticated: answer 401 with this reason.
    Unauthorized(String),
}

/// Go's union authenticator with anonymous as fail-on-error fallback: x509, then the bearer
/// token (tried even when the client certificate failed), then anonymous when enabled and
/// nothing failed.
pub async fn authenticate(
    config: &AuthConfig,
    peer: &PeerCert,
    authorization: Option<&str>,
) -> Authn {
    match authenticate_union(config, peer, authorization).await {
        Authn::User(u) => Authn::User(with_authenticated_group(u)),
        refused => refused,
    }
}

/// Go's `AuthenticatedGroupAdder`: every authenticated user except `system:anonymous` is in
/// `system:authenticated` (unless it already is, or is in `system:unauthenticated`).
pub fn with_authenticated_group(mut user: UserInfo) -> UserInfo {
    const AUTHENTICATED: &str = "system:authenticated";
    let marked = user
        .groups
        .iter()
        .any(|g| g == AUTHENTICATED || g == "system:unauthenticated");
    if user.name != "system:anonymous" && !marked {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

async fn authenticate_union(
    config: &AuthConfig,
    peer: &PeerCert,
    authorization: Option<&str>,
) -> Authn {
    let mut failure = None;
    match peer {
        PeerCert::Verified(user) => return Authn::User(user.clone()),
        PeerCert::Invalid(why) => failure = Some(format!("client certificate: {why}")),
        PeerCert::None => {}
    }
    let token = authorization.and_then(bearer_token);
    if let Some(token) = token {
        // Go's union: a failed client certificate does not stop a valid token (the error
        // counts only when nothing succeeds). Without a token authenticator a bearer token
        // is simply not looked at.
        if let Some(t) = &config.tokens {
            match t.authenticate_token(token).await {
                Ok(Some(user)) => return Authn::User(user),
                Ok(None) => {
                    failure.get_or_insert_with(|| "invalid bearer token".into());
                }
                Err(e) => {
                    failure.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
    match failure {
        Some(why) => Authn::Unauthorized(why),
        None if config.anonymous => Authn::User(UserInfo::anonymous()),
        None => Authn::Unauthorized("no credentials".into()),
    }
}

/// The token of an `Authorization: Bearer <token>` header (case-insensitive scheme, as Go).
fn bearer_token(header: &str) -> Option<&str> {
    let mut parts = header.trim().splitn(2, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct Tokens(HashMap<&'static str, &'static str>);

    #[async_trait]
    impl TokenAuthenticator for Tokens {
        async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
            if token == "broken" {
                return Err(AuthError::Webhook {
                    review: "TokenReview",
                    url: "https://x".into(),
                    message: "down".into(),
                });
            }
            Ok(self.0.get(token).map(|n| UserInfo {
                name: n.to_string(),
                ..Default::default()
            }))
        }
    }

    #[tokio::test]
    async fn authentication_matrix() {
        let tokens: Arc<dyn TokenAuthenticator> =
            Arc::new(Tokens(HashMap::from([("good", "alice")])));
        let cert_user = UserInfo {
            name: "cert-user".into(),
            uid: String::new(),
            groups: vec!["g".into()],
            extra: Default::default(),
        };
        let name = |a: Authn| match a {
            Authn::User(u) => u.name,
            Authn::Unauthorized(_) => "401".into(),
        };
        // (anonymous, tokens configured, peer, header, expected)
        let cases: Vec<(bool, bool, PeerCert, Option<&str>, &str)> = vec![
            (false, true, PeerCert::None, None, "401"),
            (true, true, PeerCert::None, None, "system:anonymous"),
            (
                false,
                true,
                PeerCert::Verified(cert_user.clone()),
                None,
                "cert-user",
            ),
            (true, true, PeerCert::Invalid("bad ca".into()), None, "401"),
            // A bad client certificate does not stop a valid token (Go's union) ...
            (
                false,
                true,
                PeerCert::Invalid("bad ca".into()),
                Some("Bearer good"),
                "alice",
            ),
            // ... and a bad token after a bad certificate is still a 401, even with anonymous.
            (
                true,
                true,
                PeerCert::Invalid("bad ca".into()),
                Some("Bearer bad"),
                "401",
            ),
            (false, true, PeerCert::None, Some("Bearer good"), "alice"),
            (false, true, PeerCert::None, Some("bearer good"), "alice"),
            (true, true, PeerCert::None, Some("Bearer bad"), "401"),
            (true, true, PeerCert::None, Some("Bearer broken"), "401"),
            (
                true,
                false,
                PeerCert::None,
                Some("Bearer good"),
                "system:anonymous",
            ),
            (false, false, PeerCert::None, Some("Bearer good"), "401"),
            (
                true,
                true,
                PeerCert::None,
                Some("Basic abc"),
                "system:anonymous",
            ),
            (
                false,
                true,
                PeerCert::Verified(cert_user),
                Some("Bearer bad"),
                "cert-user",
            ),
        ];
        for (i, (anonymous, with_tokens, peer, header, want)) in cases.into_iter().enumerate() {
            let config = AuthConfig {
                anonymous,
                tokens: with_tokens.then(|| tokens.clone()),
                authorizer: Arc::new(AlwaysAllow),
            };
            assert_eq!(
                name(authenticate(&config, &peer, header).await),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn authenticated_users_get_the_authenticated_group() {
        let u = |name: &str, groups: &[&str]| UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        };
        let g = |user: UserInfo| with_authenticated_group(user).groups;
        assert_eq!(
            g(u("alice", &["admins"])),
            ["admins", "system:authenticated"]
        );
        assert_eq!(
            g(u("alice", &["system:authenticated"])),
            ["system:authenticated"]
        );
        assert_eq!(
            g(u("system:anonymous", &["system:unauthenticated"])),
            ["system:unauthenticated"]
        );
    }
}
