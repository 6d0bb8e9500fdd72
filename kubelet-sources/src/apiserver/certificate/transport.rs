//! A TLS client identity that can change under a running API client (the Go kubelet's
//! rotating transport, `pkg/kubelet/certificate/transport.go`).
//!
//! [`ClientIdentity`] is the rustls client certificate resolver of the API clients' TLS
//! configuration: each new connection presents the pair set last. Every connection is
//! tagged ([`TrackingConnector`]) with the identity generation it was opened under, and
//! [`CaptureLayer`] learns, from each response, which pooled connection served it. When
//! [`ClientIdentity::set`] installs a new pair, the known connections of older generations
//! are *poisoned* — hyper's pool never hands them out again — instead of closed as Go does;
//! a connection of an older generation first seen afterwards is poisoned when it answers.
//! Requests in flight on them, long watches included, run to their end, and later requests
//! open connections with the new certificate. Watches, the lease and node status therefore
//! go on without a restart or a gap (the API server authenticates each request when it
//! starts, so a watch begun with the old certificate stays authenticated). TLS session
//! resumption is off in these clients (as in client-go): a resumed session would carry the
//! identity it began with.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{
    capture_connection, CaptureConnection, Connected, Connection,
};
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use rustls::SignatureScheme;
use tower::Service;

use super::pair::CertPair;
use super::CertError;

/// What a connection carries in hyper's `Connected` extras.
#[derive(Debug, Clone)]
struct ConnTag {
    id: u64,
    generation: u64,
}

struct Tracked {
    generation: u64,
    capture: CaptureConnection,
    alive: Weak<()>,
}

#[derive(Default)]
struct State {
    key: RwLock<Option<Arc<CertifiedKey>>>,
    generation: AtomicU64,
    next_id: AtomicU64,
    /// Connection id → what is known of it (from the responses it served).
    connections: Mutex<HashMap<u64, Tracked>>,
    /// Connection id → liveness, from the connector (until a response tells more).
    alive: Mutex<HashMap<u64, Weak<()>>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A changeable client identity. See the module docs. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct ClientIdentity {
    state: Arc<State>,
}

impl ClientIdentity {
    /// An identity presenting `pair` (none: connections present no certificate).
    pub fn new(pair: Option<&CertPair>) -> Result<ClientIdentity, CertError> {
        let id = ClientIdentity::default();
        if let Some(p) = pair {
            *id.state.key.write().unwrap_or_else(|e| e.into_inner()) =
                Some(Arc::new(p.certified_key()?));
        }
        Ok(id)
    }

    /// Presents `pair` on new connections from now on and retires the connections opened
    /// before (see the module docs).
    pub fn set(&self, pair: &CertPair) -> Result<(), CertError> {
        let key = Arc::new(pair.certified_key()?);
        *self.state.key.write().unwrap_or_else(|e| e.into_inner()) = Some(key);
        let generation = self.state.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let mut conns = self.connections();
        conns.retain(|_, c| c.alive.strong_count() > 0);
        let mut retired = 0;
        for c in conns.values().filter(|c| c.generation < generation) {
            if let Some(connected) = c.capture.connection_metadata().as_ref() {
                connected.poison();
                retired += 1;
            }
        }
        tracing::info!(
            generation,
            retired,
            "the API clients present the new client certificate on new connections"
        );
        Ok(())
    }

    /// How many times the identity changed.
    pub fn generation(&self) -> u64 {
        self.state.generation.load(Ordering::SeqCst)
    }

    /// Connections opened through this identity that are still open.
    pub fn open_connections(&self) -> usize {
        let mut alive = self.state.alive.lock().unwrap_or_else(|e| e.into_inner());
        alive.retain(|_, a| a.strong_count() > 0);
        alive.len()
    }

    /// The rustls resolver (for `ClientConfig::client_auth_cert_resolver`).
    pub fn resolver(&self) -> Arc<dyn ResolvesClientCert> {
        Arc::new(Resolver(self.state.clone()))
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Tracked>> {
        self.state
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection opened under `generation`: its tag and liveness token.
    fn opened(&self, generation: u64) -> (ConnTag, Arc<()>) {
        let id = self.state.next_id.fetch_add(1, Ordering::Relaxed);
        let alive = Arc::new(());
        let mut map = self.state.alive.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, a| a.strong_count() > 0);
        map.insert(id, Arc::downgrade(&alive));
        (ConnTag { id, generation }, alive)
    }

    /// A response came over the connection `capture` names: remember it, or retire it at
    /// once when the identity changed since it was opened.
    fn observe(&self, capture: &CaptureConnection) {
        let tag = {
            let meta = capture.connection_metadata();
            let Some(connected) = meta.as_ref() else {
                return;
            };
            let mut ext = http::Extensions::new();
            connected.get_extras(&mut ext);
            let Some(tag) = ext.get::<ConnTag>().cloned() else {
                return;
            };
            if tag.generation < self.generation() {
                connected.poison();
                return;
            }
            tag
        };
        let alive = {
            let map = self.state.alive.lock().unwrap_or_else(|e| e.into_inner());
            map.get(&tag.id).cloned().unwrap_or_default()
        };
        let mut conns = self.connections();
        if conns.contains_key(&tag.id) {
            return;
        }
        conns.retain(|_, c| c.alive.strong_count() > 0);
        conns.insert(
            tag.id,
            Tracked {
                generation: tag.generation,
                capture: capture.clone(),
                alive,
            },
        );
    }
}

#[derive(Debug)]
struct Resolver(Arc<State>);

impl ResolvesClientCert for Resolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.0.key.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A connector whose connections are tracked by a [`ClientIdentity`].
#[derive(Debug, Clone)]
pub struct TrackingConnector<C> {
    inner: C,
    identity: ClientIdentity,
}

impl<C> TrackingConnector<C> {
    /// Wraps `inner`.
    pub fn new(inner: C, identity: ClientIdentity) -> Self {
        TrackingConnector { inner, identity }
    }
}

impl<C> Service<Uri> for TrackingConnector<C>
where
    C: Service<Uri>,
    C::Future: Send + 'static,
    C::Response: Send + 'static,
{
    type Response = TrackedIo<C::Response>;
    type Error = C::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        // The generation before the handshake: a change during it retires this one too.
        let generation = self.identity.generation();
        let identity = self.identity.clone();
        let fut = self.inner.call(dst);
        Box::pin(async move {
            let io = fut.await?;
            let (tag, alive) = identity.opened(generation);
            Ok(TrackedIo {
                io,
                tag,
                _alive: alive,
            })
        })
    }
}

/// A tracked connection.
#[derive(Debug)]
pub struct TrackedIo<T> {
    io: T,
    tag: ConnTag,
    _alive: Arc<()>,
}

impl<T: Connection> Connection for TrackedIo<T> {
    fn connected(&self) -> Connected {
        self.io.connected().extra(self.tag.clone())
    }
}

/// A layer over hyper's client that tells the identity which connection served each
/// response (see the module docs).
#[derive(Debug, Clone)]
pub struct CaptureLayer {
    identity: ClientIdentity,
}

impl CaptureLayer {
    /// Reports to `identity`.
    pub fn new(identity: ClientIdentity) -> Self {
        CaptureLayer { identity }
    }
}

impl<S> tower::Layer<S> for CaptureLayer {
    type Service = Capture<S>;
    fn layer(&self, inner: S) -> Capture<S> {
        Capture {
            inner,
            identity: self.identity.clone(),
        }
    }
}

/// The service of [`CaptureLayer`].
#[derive(Debug, Clone)]
pub struct Capture<S> {
    inner: S,
    identity: ClientIdentity,
}

impl<S, B> Service<http::Request<B>> for Capture<S>
where
    S: Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let capture = capture_connection(&mut req);
        let identity = self.identity.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            identity.observe(&capture);
            res
        })
    }
}

impl<T: Read + Unpin> Read for TrackedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for TrackedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::super::pair::tests::issue;
    use super::*;

    #[test]
    fn the_resolver_follows_set_and_generations_count() {
        let (_, a) = issue("a", &[], &[], 1_000_000, 600);
        let (_, b) = issue("b", &[], &[], 1_000_000, 600);
        let id = ClientIdentity::new(Some(&a)).unwrap();
        let resolver = id.resolver();
        assert!(resolver.has_certs());
        let chain = |r: &Arc<dyn ResolvesClientCert>| r.resolve(&[], &[]).unwrap().cert.clone();
        assert_eq!(chain(&resolver), a.chain);
        let (tag0, alive0) = id.opened(id.generation());
        assert_eq!(tag0.generation, 0);
        assert_eq!(id.open_connections(), 1);
        id.set(&b).unwrap();
        assert_eq!(id.generation(), 1);
        assert_eq!(chain(&resolver), b.chain, "new connections present b");
        drop(alive0);
        assert_eq!(id.open_connections(), 0);
        assert!(ClientIdentity::new(None)
            .unwrap()
            .resolver()
            .resolve(&[], &[])
            .is_none());
    }
}
