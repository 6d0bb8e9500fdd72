//! The HTTP stack under each API client: what kube-rs's `ClientBuilder::try_from(config)`
//! builds (the kubeconfig's TLS, credentials, extra headers and connect/read/write timeouts,
//! kube-rs's retry of 429/503/504 when `default_retry` is on), with the kubelet's own parts:
//! a rotating client certificate ([`ClientIdentity`]), the token bucket, the `rest_client_*`
//! metrics, and the connections requests take ([`Protocols`]).
//!
//! # Connections
//! With [`Protocols::Multiplexed`] (the `api` and `events` clients):
//! - every request but a watch (get, list, create, patch, delete, a TokenRequest) goes over
//!   one HTTP/2 connection when the API server offers `h2` in ALPN, as client-go's requests
//!   do. A burst of pods' reads and status patches then needs no new connection, and so no
//!   TLS handshake (10 ms on an idle 2-core machine, about 50 ms under a start's load). A ping
//!   goes out after 30 s without a frame and the connection is dropped when it is not answered
//!   within 15 s (client-go's `ReadIdleTimeout` and `PingTimeout`), so a dead connection does
//!   not hold every request;
//! - every watch takes an HTTP/1.1 connection of its own, as all requests did before. An API
//!   server lets one HTTP/2 connection carry a limited number of streams (250 by Go's
//!   default) and a watch holds its stream for minutes; at the limit client-go opens another
//!   connection where hyper's client waits for a stream, so a kubelet watching a few hundred
//!   config maps and secrets would leave its status patches waiting.
//!
//! [`Protocols::Http1`] (the `heartbeat` client) speaks HTTP/1.1 only: each request in
//! flight has a connection of its own with the heartbeat's read timeout, so a stuck connection
//! fails one heartbeat, never the pods' requests.

use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt};
use tower::retry::RetryLayer;
use tower::{BoxError, Service, ServiceBuilder};

use super::{ApiError, RateLimitLayer};
use crate::apiserver::certificate::transport::{CaptureLayer, TrackingConnector};
use crate::apiserver::certificate::ClientIdentity;
use crate::apiserver::client_metrics::RestClientMetricsLayer;

/// Client-go's `ReadIdleTimeout`: a ping after this long without a frame.
const PING_AFTER: Duration = Duration::from_secs(30);
/// Client-go's `PingTimeout`: the connection is closed when a ping is not answered in time.
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The HTTP versions a client speaks (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocols {
    /// Requests over one HTTP/2 connection when the server offers it, each watch over an
    /// HTTP/1.1 connection of its own.
    Multiplexed,
    /// HTTP/1.1 only.
    Http1,
}

/// What one client is built from.
pub(crate) struct Stack<'a> {
    /// The kubeconfig's server, credentials and timeouts.
    pub config: &'a kube::Config,
    /// A rotating client certificate in place of the kubeconfig's.
    pub identity: Option<&'a ClientIdentity>,
    /// The client's token bucket.
    pub limiter: Option<RateLimitLayer>,
    /// The connections its requests take.
    pub protocols: Protocols,
}

impl Stack<'_> {
    /// Builds the client.
    pub(crate) fn build(self) -> Result<kube::Client, ApiError> {
        let config = self.config;
        let server = config.cluster_url.to_string();
        let build_err = |error: kube::Error| ApiError::ClientBuild {
            server: server.clone(),
            error,
        };
        let host = config
            .cluster_url
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let mut tls = config.rustls_client_config().map_err(build_err)?;
        if let Some(identity) = self.identity {
            tls.client_auth_cert_resolver = identity.resolver();
            // A resumed session keeps the identity it began with, so a new connection after
            // a rotation could still present the old certificate; client-go does not resume
            // either.
            tls.resumption = rustls::client::Resumption::disabled();
        }
        let h2 = self.protocols == Protocols::Multiplexed;
        let watches = https(config, tls.clone(), false).map_err(build_err)?;
        let requests = https(config, tls, h2).map_err(build_err)?;
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(self.limiter.map(|l| l.with_host(&host)))
            .option_layer(
                config
                    .default_retry
                    .then(|| RetryLayer::new(RetryPolicy::server_retry())),
            )
            .option_layer(config.auth_layer().map_err(build_err)?)
            .layer(config.extra_headers_layer().map_err(build_err)?)
            .layer(RestClientMetricsLayer::new(&host))
            .map_err(BoxError::from);
        let client = match self.identity {
            Some(identity) => {
                let tracked = |c| timeouts(config, TrackingConnector::new(c, identity.clone()));
                let router = ByKind {
                    requests: hyper_client(tracked(requests), h2),
                    watches: hyper_client(tracked(watches), false),
                };
                let service = service
                    .layer(CaptureLayer::new(identity.clone()))
                    .service(router);
                ClientBuilder::new(service, config.default_namespace.clone()).build()
            }
            None => {
                let router = ByKind {
                    requests: hyper_client(timeouts(config, requests), h2),
                    watches: hyper_client(timeouts(config, watches), false),
                };
                ClientBuilder::new(service.service(router), config.default_namespace.clone())
                    .build()
            }
        };
        Ok(client)
    }
}

/// A TLS connector with the kubeconfig's server name, offering `h2` and `http/1.1` in ALPN
/// when `h2`, only `http/1.1` otherwise.
fn https(
    config: &kube::Config,
    tls: rustls::ClientConfig,
    h2: bool,
) -> Result<HttpsConnector<HttpConnector>, kube::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // As Go's dialer: an HTTP/2 request is a HEADERS frame and a DATA frame written apart, and
    // with Nagle's algorithm the second waits for the API server's delayed ACK of the first
    // (40 ms here: every status patch took 40 ms more before this).
    http.set_nodelay(true);
    let mut builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    if let Some(name) = &config.tls_server_name {
        let name = rustls::pki_types::ServerName::try_from(name.clone()).map_err(|e| {
            kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
        })?;
        builder = builder.with_server_name_resolver(FixedServerNameResolver::new(name));
    }
    Ok(if h2 {
        builder.enable_all_versions().wrap_connector(http)
    } else {
        builder.enable_http1().wrap_connector(http)
    })
}

/// `connector` with the kubeconfig's connect, read and write timeouts.
fn timeouts<C>(config: &kube::Config, connector: C) -> hyper_timeout::TimeoutConnector<C>
where
    C: tower::Service<http::Uri> + Send,
    C::Response: hyper::rt::Read + hyper::rt::Write + Send + Unpin,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    let mut connector = hyper_timeout::TimeoutConnector::new(connector);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    connector
}

/// hyper's pooling client over `connector`; with `h2`, an HTTP/2 connection (when ALPN
/// chose it) is pinged as client-go's are.
fn hyper_client<C: Connect + Clone>(
    connector: C,
    h2: bool,
) -> hyper_util::client::legacy::Client<C, Body> {
    let mut builder = hyper_util::client::legacy::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new());
    if h2 {
        builder
            .http2_keep_alive_interval(PING_AFTER)
            .http2_keep_alive_timeout(PING_TIMEOUT)
            .http2_keep_alive_while_idle(true);
    }
    builder.build(connector)
}

/// Whether a request is a watch (`watch=true` or `watch=1` in its query), which the API
/// server serves as a long-running request.
pub(crate) fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// Sends watches to one client and every other request to the other (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct ByKind<S> {
    /// For every request but watches.
    pub requests: S,
    /// For watches.
    pub watches: S,
}

impl<S, B> Service<Request<B>> for ByKind<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Either may take the next request: both must be ready (hyper's client always is).
        match self.requests.poll_ready(cx) {
            Poll::Ready(Ok(())) => self.watches.poll_ready(cx),
            other => other,
        }
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if is_watch(req.uri()) {
            self.watches.call(req)
        } else {
            self.requests.call(req)
        }
    }
}
