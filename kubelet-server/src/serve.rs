//! The listeners: accept loop, TLS, per-request authentication and authorization, limits.
//!
//! Every connection is its own task, so a slow or hung client holds only its own
//! connection (and one of [`ServerLimits::max_connections`] slots); the request headers
//! must arrive within [`ServerLimits::header_timeout`] and the TLS handshake within the
//! same time.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, AuthConfig, Authn, Decision, PeerCert};
use crate::host::Host;
use crate::reply::{status_error, Body};
use crate::routes::{route, Ctx, Endpoints, HandlerOptions};
use crate::tls::ServerTls;

/// Connection and request limits of a listener.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Connections served at once; further ones wait in the accept queue.
    pub max_connections: usize,
    /// Time for the TLS handshake and for each request's headers.
    pub header_timeout: Duration,
    /// Largest request body accepted (declared `Content-Length`).
    pub max_body_bytes: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// A listener's whole configuration.
#[derive(Clone)]
pub struct ServerConfig {
    /// Which endpoints it serves.
    pub endpoints: Endpoints,
    /// TLS (the secure port); None: plain HTTP.
    pub tls: Option<ServerTls>,
    /// Authentication and authorization; [`AuthConfig::allow_all`] for the read-only and
    /// healthz listeners.
    pub auth: AuthConfig,
    /// Limits.
    pub limits: ServerLimits,
    /// Handler settings.
    pub handlers: HandlerOptions,
}

impl ServerConfig {
    /// A plain-HTTP listener without authentication (healthz, read-only port).
    pub fn plain(endpoints: Endpoints) -> ServerConfig {
        ServerConfig {
            endpoints,
            tls: None,
            auth: AuthConfig::allow_all(),
            limits: ServerLimits::default(),
            handlers: HandlerOptions::default(),
        }
    }
}

/// Serves `endpoints` over plain HTTP without authentication until `shutdown` fires (the
/// healthz and read-only listeners).
pub async fn serve(
    listener: TcpListener,
    host: Arc<dyn Host>,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) {
    serve_with(listener, host, ServerConfig::plain(endpoints), shutdown).await
}

/// Serves a listener with the given configuration until `shutdown` fires.
pub async fn serve_with(
    listener: TcpListener,
    host: Arc<dyn Host>,
    config: ServerConfig,
    shutdown: CancellationToken,
) {
    let limit = Arc::new(Semaphore::new(config.limits.max_connections.max(1)));
    let acceptor = config
        .tls
        .as_ref()
        .map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone()));
    let ctx = Arc::new(Ctx {
        host,
        endpoints: config.endpoints,
        options: config.handlers.clone(),
        shutdown: shutdown.clone(),
    });
    let config = Arc::new(config);
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, remote) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (ctx, config, acceptor, token) = (
            ctx.clone(),
            config.clone(),
            acceptor.clone(),
            shutdown.clone(),
        );
        tokio::spawn(async move {
            let _permit = permit;
            match acceptor {
                None => serve_conn(stream, PeerCert::None, ctx, config, token).await,
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(
                        config.limits.header_timeout,
                        acceptor.accept(stream),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%remote, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%remote, "TLS handshake timed out");
                            return;
                        }
                    };
                    let peer = match (&config.tls, tls.get_ref().1.peer_certificates()) {
                        (
                            Some(ServerTls {
                                client_ca: Some(ca),
                                ..
                            }),
                            Some(chain),
                        ) => ca.check(chain),
                        _ => PeerCert::None,
                    };
                    serve_conn(tls, peer, ctx, config, token).await
                }
            }
        });
    }
}

async fn serve_conn<S>(
    stream: S,
    peer: PeerCert,
    ctx: Arc<Ctx>,
    config: Arc<ServerConfig>,
    token: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let peer = Arc::new(peer);
    let header_timeout = config.limits.header_timeout;
    let service = service_fn(move |req: Request<Incoming>| {
        let (ctx, config, peer) = (ctx.clone(), config.clone(), peer.clone());
        async move { Ok::<_, Infallible>(handle(&ctx, &config, &peer, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = token.cancelled() => {}
        r = conn => if let Err(e) = r { tracing::debug!(error = %e, "connection ended") },
    }
}

/// Authentication, authorization, limits, then the route.
async fn handle(
    ctx: &Ctx,
    config: &ServerConfig,
    peer: &PeerCert,
    req: Request<Incoming>,
) -> Response<Body> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > config.limits.max_body_bytes) {
        return status_error(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
    }
    if !crate::auth::is_canonical_path(req.uri().path()) {
        return status_error(
            StatusCode::BAD_REQUEST,
            "invalid request path: empty, \".\" or \"..\" segments and encoded slashes are not allowed",
        );
    }
    if config.tls.is_some() {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let user = match auth::authenticate(&config.auth, peer, authorization).await {
            Authn::User(u) => u,
            Authn::Unauthorized(why) => {
                tracing::debug!(path = req.uri().path(), reason = %why, "unauthorized request");
                return closing(status_error(StatusCode::UNAUTHORIZED, "Unauthorized"));
            }
        };
        let attrs = auth::request_attributes(
            user,
            &ctx.host.node_name(),
            req.method().as_str(),
            req.uri().path(),
            crate::streaming::is_upgrade(&req),
        );
        match config.auth.authorizer.authorize(&attrs).await {
            Ok(Decision::Allow) => {}
            Ok(Decision::Deny(reason)) => {
                tracing::debug!(user = %attrs.user.name, verb = %attrs.verb, subresource = %attrs.subresource, reason, "forbidden request");
                return closing(status_error(
                    StatusCode::FORBIDDEN,
                    &format!(
                        "Forbidden (user={}, verb={}, resource={}, subresource={})",
                        attrs.user.name, attrs.verb, attrs.resource, attrs.subresource
                    ),
                ));
            }
            Err(e) => {
                tracing::warn!(error = %e, "authorization failed");
                return status_error(StatusCode::INTERNAL_SERVER_ERROR, "Authorization error");
            }
        }
    }
    route(ctx, req).await
}

/// Asks hyper to close the connection after this response: a refused client does not keep
/// one of the limited connection slots with keep-alive.
fn closing(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    resp
}
