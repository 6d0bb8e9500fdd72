//! The listeners: accept loop, TLS, per-request authentication and authorization, limits.
//!
//! Every connection is its own task. Admission is in two stages, so clients that never
//! authenticate cannot crowd out those that do:
//! - A new connection is *unauthenticated* until a request on it passes authentication (on
//!   a listener without TLS: until its first request's headers arrive). Unauthenticated
//!   connections are limited per client address ([`ServerLimits::max_unauthenticated_per_address`])
//!   and in all ([`ServerLimits::max_unauthenticated`]); at a limit the *oldest*
//!   unauthenticated connection (of that address, or at all) is closed to make room, so a
//!   flood of idle or slow connections cannot lock out a client that completes its handshake
//!   and sends a request at once. Their life is bounded anyway: the TLS handshake and every
//!   request's headers must arrive within [`ServerLimits::header_timeout`] (an idle
//!   keep-alive connection is closed after the same time), and a refused request closes its
//!   connection.
//! - All connections together are capped at [`ServerLimits::max_connections`]; over it a
//!   new connection is closed at once (the accept loop never waits).
//! - A connection on which nothing moves for [`HandlerOptions::streaming_idle_timeout`]
//!   while the server waits on it (`streamingConnectionIdleTimeout`) is closed: an
//!   exec/attach/port-forward stream left idle, or a log stream whose client stopped reading.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, AuthConfig, Authn, Decision, PeerCert};
use crate::host::Host;
use crate::reply::{status_error, Body};
use crate::routes::{route, Ctx, Endpoints, HandlerOptions};
use crate::tls::ServerTls;

/// Connection and request limits of a listener. See the module docs.
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// Connections open at once, authenticated or not; a new one over this is closed.
    pub max_connections: usize,
    /// Unauthenticated connections open at once; at the limit the oldest is closed.
    pub max_unauthenticated: usize,
    /// Unauthenticated connections of one client address; at the limit that address's
    /// oldest is closed.
    pub max_unauthenticated_per_address: usize,
    /// Time for the TLS handshake and for each request's headers (and for an idle
    /// keep-alive connection's next request).
    pub header_timeout: Duration,
    /// Largest request body accepted (declared `Content-Length`).
    pub max_body_bytes: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 4096,
            max_unauthenticated: 1024,
            max_unauthenticated_per_address: 128,
            header_timeout: Duration::from_secs(10),
            max_body_bytes: 1024 * 1024,
        }
    }
}

/// The unauthenticated connections, oldest first, for eviction.
#[derive(Default)]
struct Pending {
    next_id: u64,
    /// id → (address, the connection's cancellation).
    by_age: BTreeMap<u64, (IpAddr, CancellationToken)>,
    per_address: HashMap<IpAddr, usize>,
}

/// Admission of connections (see the module docs).
struct Admission {
    pending: Mutex<Pending>,
    total: Arc<Semaphore>,
    max_pending: usize,
    max_per_address: usize,
}

impl Admission {
    fn new(limits: &ServerLimits) -> Admission {
        Admission {
            pending: Mutex::new(Pending::default()),
            total: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            max_pending: limits.max_unauthenticated.max(1),
            max_per_address: limits.max_unauthenticated_per_address.max(1),
        }
    }

    /// Registers a new unauthenticated connection from `addr`, closing the oldest ones over
    /// the limits; `None` when all connections are taken.
    fn admit(self: &Arc<Self>, addr: IpAddr) -> Option<Arc<Conn>> {
        let permit = self.total.clone().try_acquire_owned().ok()?;
        let token = CancellationToken::new();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.per_address.get(&addr).copied().unwrap_or(0) >= self.max_per_address {
            let oldest = p
                .by_age
                .iter()
                .find(|(_, (a, _))| *a == addr)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                tracing::debug!(%addr, "closing the oldest unauthenticated connection of this address");
                p.remove(id);
            }
        }
        if p.by_age.len() >= self.max_pending {
            if let Some(id) = p.by_age.keys().next().copied() {
                tracing::debug!("closing the oldest unauthenticated connection");
                p.remove(id);
            }
        }
        let id = p.next_id;
        p.next_id += 1;
        p.by_age.insert(id, (addr, token.clone()));
        *p.per_address.entry(addr).or_insert(0) += 1;
        Some(Arc::new(Conn {
            id,
            token,
            admission: self.clone(),
            promoted: AtomicBool::new(false),
            _permit: permit,
        }))
    }

    fn forget(&self, id: u64) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((addr, _)) = p.by_age.remove(&id) {
            p.uncount(addr);
        }
    }
}

impl Pending {
    /// Evicts connection `id`: cancels it and forgets it.
    fn remove(&mut self, id: u64) {
        if let Some((addr, token)) = self.by_age.remove(&id) {
            token.cancel();
            self.uncount(addr);
        }
    }

    fn uncount(&mut self, addr: IpAddr) {
        if let Some(n) = self.per_address.get_mut(&addr) {
            *n -= 1;
            if *n == 0 {
                self.per_address.remove(&addr);
            }
        }
    }
}

/// One admitted connection.
struct Conn {
    id: u64,
    /// Cancelled when the connection is evicted.
    token: CancellationToken,
    admission: Arc<Admission>,
    promoted: AtomicBool,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Conn {
    /// The connection made an authenticated request: it can no longer be evicted.
    fn promote(&self) {
        if !self.promoted.swap(true, Ordering::SeqCst) {
            self.admission.forget(self.id);
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.admission.forget(self.id);
    }
}

/// Stands for "no idle limit" (about 30 years).
const NO_LIMIT: Duration = Duration::from_secs(30 * 365 * 86_400);

/// An I/O stream that fails once it has waited `idle` without moving a byte in the
/// direction it waits on (see the module docs).
struct IdleIo<S> {
    inner: S,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<S> IdleIo<S> {
    /// `idle` zero means no limit (as Go's zero `streamingConnectionIdleTimeout`).
    fn new(inner: S, idle: Duration) -> IdleIo<S> {
        let idle = if idle.is_zero() { NO_LIMIT } else { idle };
        let deadline = Box::pin(tokio::time::sleep(idle));
        IdleIo {
            inner,
            idle,
            deadline,
        }
    }

    fn progress(&mut self) {
        let now = tokio::time::Instant::now();
        let at = now.checked_add(self.idle).unwrap_or(now + NO_LIMIT);
        self.deadline.as_mut().reset(at);
    }

    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connection idle for longer than the streaming idle timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    this.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => this.waiting(cx),
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, data) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    this.progress();
                }
                Poll::Ready(r)
            }
            Poll::Pending => this.waiting(cx),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.waiting(cx),
            r => r,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
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
    let admission = Arc::new(Admission::new(&config.limits));
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
        let Some(conn) = admission.admit(remote.ip()) else {
            tracing::debug!(%remote, "connection limit reached; closing the new connection");
            drop(stream);
            continue;
        };
        let (ctx, config, acceptor, token) = (
            ctx.clone(),
            config.clone(),
            acceptor.clone(),
            shutdown.clone(),
        );
        let stream = IdleIo::new(stream, config.handlers.streaming_idle_timeout);
        tokio::spawn(async move {
            let evicted = conn.token.clone();
            let serve = async {
                match acceptor {
                    None => serve_conn(stream, PeerCert::None, ctx, config, conn, token).await,
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
                        serve_conn(tls, peer, ctx, config, conn, token).await
                    }
                }
            };
            tokio::select! {
                _ = evicted.cancelled() => {
                    tracing::debug!(%remote, "unauthenticated connection closed to make room");
                }
                _ = serve => {}
            }
        });
    }
}

async fn serve_conn<S>(
    stream: S,
    peer: PeerCert,
    ctx: Arc<Ctx>,
    config: Arc<ServerConfig>,
    conn: Arc<Conn>,
    token: CancellationToken,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let peer = Arc::new(peer);
    let header_timeout = config.limits.header_timeout;
    let service = service_fn(move |req: Request<Incoming>| {
        let (ctx, config, peer, conn) = (ctx.clone(), config.clone(), peer.clone(), conn.clone());
        async move { Ok::<_, Infallible>(handle(&ctx, &config, &peer, &conn, req).await) }
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
    conn: &Conn,
    req: Request<Incoming>,
) -> Response<Body> {
    if config.tls.is_none() {
        // Nothing to authenticate: a client that got its headers in is no longer "slow".
        conn.promote();
    }
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
            Authn::User(u) => {
                if u.name != "system:anonymous" {
                    conn.promote();
                }
                u
            }
            Authn::Unauthorized(why) => {
                tracing::debug!(path = req.uri().path(), reason = %why, "unauthorized request");
                return closing(status_error(StatusCode::UNAUTHORIZED, "Unauthorized"));
            }
        };
        let attrs = auth::request_attributes_list(
            user,
            &ctx.host.node_name(),
            req.method().as_str(),
            req.uri().path(),
            crate::streaming::is_upgrade(&req),
        );
        let mut allowed = false;
        for a in &attrs {
            match config.auth.authorizer.authorize(a).await {
                Ok(Decision::Allow) => {
                    allowed = true;
                    break;
                }
                Ok(Decision::Deny(reason)) => {
                    tracing::debug!(user = %a.user.name, verb = %a.verb, subresource = %a.subresource, reason, "not allowed by this subresource");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "authorization failed");
                    return status_error(StatusCode::INTERNAL_SERVER_ERROR, "Authorization error");
                }
            }
        }
        if !allowed {
            let subresources: Vec<&str> = attrs.iter().map(|a| a.subresource.as_str()).collect();
            let (user, verb) = attrs
                .first()
                .map(|a| (a.user.name.as_str(), a.verb.as_str()))
                .unwrap_or_default();
            tracing::debug!(user, verb, ?subresources, "forbidden request");
            return closing(status_error(
                StatusCode::FORBIDDEN,
                &format!(
                    "Forbidden (user={user}, verb={verb}, resource=nodes, subresource(s)=[{}])",
                    subresources.join(" ")
                ),
            ));
        }
    }
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let resp = route(ctx, req).await;
    tracing::debug!(%method, path, status = resp.status().as_u16(), "request served");
    resp
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

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn the_oldest_unauthenticated_connection_makes_room() {
        let limits = ServerLimits {
            max_connections: 100,
            max_unauthenticated: 4,
            max_unauthenticated_per_address: 2,
            ..Default::default()
        };
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let adm = Arc::new(Admission::new(&limits));
        let a1 = adm.admit(a).unwrap();
        let a2 = adm.admit(a).unwrap();
        // A third from the same address evicts that address's oldest.
        let a3 = adm.admit(a).unwrap();
        assert!(a1.token.is_cancelled());
        assert!(!a2.token.is_cancelled() && !a3.token.is_cancelled());
        // A promoted connection is never evicted.
        a2.promote();
        let b1 = adm.admit(b).unwrap();
        let b2 = adm.admit(b).unwrap();
        let _a4 = adm.admit(a).unwrap();
        assert!(!a2.token.is_cancelled());
        // Over the total: the oldest unauthenticated one overall goes (a3, then b1).
        let _b3 = adm.admit(b).unwrap();
        assert!(a3.token.is_cancelled() || b1.token.is_cancelled());
        assert!(!b2.token.is_cancelled() || !a3.token.is_cancelled());
        let p = adm.pending.lock().unwrap();
        assert!(p.by_age.len() <= 4);
        assert!(p.per_address.values().all(|n| *n <= 2));
    }

    #[test]
    fn the_total_cap_refuses_new_connections() {
        let limits = ServerLimits {
            max_connections: 2,
            ..Default::default()
        };
        let adm = Arc::new(Admission::new(&limits));
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let c1 = adm.admit(ip).unwrap();
        let _c2 = adm.admit(ip).unwrap();
        assert!(adm.admit(ip).is_none());
        drop(c1);
        assert!(adm.admit(ip).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_stops_reading_times_out() {
        let (near, mut far) = tokio::io::duplex(1024);
        let mut io = IdleIo::new(near, Duration::from_secs(60));
        // The peer reads a little, then stops: writes block, then fail after the idle time.
        io.write_all(&[1u8; 512]).await.unwrap();
        let mut buf = [0u8; 512];
        far.read_exact(&mut buf).await.unwrap();
        let started = tokio::time::Instant::now();
        let err = loop {
            if let Err(e) = io.write_all(&[2u8; 4096]).await {
                break e;
            }
        };
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(60));
        // A read that waits as long fails the same way.
        let (near, _far) = tokio::io::duplex(16);
        let mut io = IdleIo::new(near, Duration::from_secs(5));
        let err = io.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
    }
}
