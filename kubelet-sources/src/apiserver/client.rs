//! API clients from a kubeconfig file (client certificates or a bearer token; no exec
//! plugins are needed for a kubelet).
//!
//! [`ApiClients::from_kubeconfig`] gives three clients over the same credentials, as the Go
//! kubelet keeps three:
//! - `api`: every normal request (pod watch, pod status, mirror pods) goes through a
//!   client-side token bucket of `kubeAPIQPS` (50) per second with a burst of `kubeAPIBurst`
//!   (100), client-go's `flowcontrol` limiter: a request waits for its token, it is never
//!   refused;
//! - `events`: event writes, through a token bucket of their own, `eventRecordQPS` (50) per
//!   second with a burst of `eventBurst` (100) (Go's separate event client), so that events
//!   never take the pods' tokens;
//! - `heartbeat`: node status and lease requests, never throttled, with a request timeout
//!   (Go uses a separate client for heartbeats so a busy limiter cannot make a node look
//!   dead).
//!
//! The `api` and `events` clients send their requests over one HTTP/2 connection each and
//! their watches over HTTP/1.1 connections; the `heartbeat` client speaks HTTP/1.1 only (the
//! `connection` module's docs say why).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::time::Instant;
use tower::{Layer, Service};

use super::certificate::ClientIdentity;
use super::client_metrics::RequestVerb;
use super::ApiError;
use connection::{Protocols, Stack};

mod connection;

/// How the clients are made.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Path of the kubeconfig (`--kubeconfig`).
    pub kubeconfig: PathBuf,
    /// `kubeAPIQPS` (50); 0 or less disables the limiter.
    pub qps: f64,
    /// `kubeAPIBurst` (100).
    pub burst: u32,
    /// `eventRecordQPS` (50): event writes per second; 0 or less disables their limiter.
    pub event_qps: f64,
    /// `eventBurst` (100).
    pub event_burst: u32,
    /// Timeout of one heartbeat request (node status, lease). Go derives it from the lease
    /// duration; 10s by default here.
    pub heartbeat_timeout: Duration,
}

impl ClientConfig {
    /// Go's defaults (QPS 50, burst 100, for requests and for events) for a kubeconfig path.
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Self {
        ClientConfig {
            kubeconfig: kubeconfig.into(),
            qps: 50.0,
            burst: 100,
            event_qps: 50.0,
            event_burst: 100,
            heartbeat_timeout: Duration::from_secs(10),
        }
    }
}

/// The API clients of a kubelet. See the module docs.
#[derive(Clone)]
pub struct ApiClients {
    /// Rate-limited client for normal requests.
    pub api: kube::Client,
    /// Client for event writes, rate-limited on its own.
    pub events: kube::Client,
    /// Un-throttled client for node status and lease updates.
    pub heartbeat: kube::Client,
    /// Timeout applied to each heartbeat request.
    pub heartbeat_timeout: Duration,
}

impl std::fmt::Debug for ApiClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClients")
            .field("heartbeat_timeout", &self.heartbeat_timeout)
            .finish_non_exhaustive()
    }
}

impl ApiClients {
    /// Reads the kubeconfig (its current context) and builds the clients.
    pub async fn from_kubeconfig(cfg: &ClientConfig) -> Result<Self, ApiError> {
        let kube_cfg = load_kubeconfig(&cfg.kubeconfig).await?;
        Self::build(cfg, &kube_cfg, None)
    }

    /// [`ApiClients::from_kubeconfig`] presenting `identity` as the client certificate
    /// instead of the kubeconfig's: when the identity changes (certificate rotation), new
    /// connections use the new certificate and the clients keep working (see
    /// [`super::certificate::transport`]).
    pub async fn from_kubeconfig_with_identity(
        cfg: &ClientConfig,
        identity: &ClientIdentity,
    ) -> Result<Self, ApiError> {
        let kube_cfg = load_kubeconfig(&cfg.kubeconfig).await?;
        Self::build(cfg, &kube_cfg, Some(identity))
    }

    /// The three clients over `kube_cfg` (see the module docs).
    fn build(
        cfg: &ClientConfig,
        kube_cfg: &kube::Config,
        identity: Option<&ClientIdentity>,
    ) -> Result<Self, ApiError> {
        let limited = |qps: f64, burst: u32| {
            Stack {
                config: kube_cfg,
                identity,
                limiter: Some(RateLimitLayer::new(qps, burst)),
                protocols: Protocols::Multiplexed,
            }
            .build()
        };
        let api = limited(cfg.qps, cfg.burst)?;
        let events = limited(cfg.event_qps, cfg.event_burst)?;
        let mut hb_cfg = kube_cfg.clone();
        hb_cfg.connect_timeout = Some(cfg.heartbeat_timeout);
        hb_cfg.read_timeout = Some(cfg.heartbeat_timeout);
        hb_cfg.write_timeout = Some(cfg.heartbeat_timeout);
        hb_cfg.reset_reader_on_write = true;
        let heartbeat = Stack {
            config: &hb_cfg,
            identity,
            limiter: None,
            protocols: Protocols::Http1,
        }
        .build()?;
        Ok(ApiClients {
            api,
            events,
            heartbeat,
            heartbeat_timeout: cfg.heartbeat_timeout,
        })
    }

    /// The clients as one already built client (tests, embedders); no limiter is added.
    pub fn from_client(client: kube::Client, heartbeat_timeout: Duration) -> Self {
        ApiClients {
            api: client.clone(),
            events: client.clone(),
            heartbeat: client,
            heartbeat_timeout,
        }
    }
}

/// Loads a kubeconfig file into a kube-rs [`kube::Config`] (relative certificate paths are
/// resolved against the file's directory).
pub async fn load_kubeconfig(path: &Path) -> Result<kube::Config, ApiError> {
    let shown = path.display().to_string();
    let owned = path.to_path_buf();
    let kc = tokio::task::spawn_blocking(move || Kubeconfig::read_from(owned))
        .await
        .map_err(|e| ApiError::Kubeconfig {
            path: shown.clone(),
            message: format!("reading task failed: {e}"),
        })?
        .map_err(|e| ApiError::Kubeconfig {
            path: shown.clone(),
            message: e.to_string(),
        })?;
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| ApiError::Kubeconfig {
            path: shown,
            message: e.to_string(),
        })
}

/// A token bucket (client-go's `flowcontrol.NewTokenBucketRateLimiter`): `burst` tokens,
/// refilled at `qps` per second. [`TokenBucket::reserve`] takes a token and says how long the
/// caller must wait before using it, so waiting callers are served in order.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Returns a token taken by a reservation that is not used.
    pub fn unreserve(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }

    /// Takes one token at `now`; returns the wait before it may be used (zero when one was
    /// available). A non-positive qps never waits.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now.max(self.last);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// A tower layer that delays each request by the [`TokenBucket`] (shared by all clones).
/// Each wait is observed as `rest_client_rate_limiter_duration_seconds{host,verb}`.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
    host: Arc<str>,
}

impl RateLimitLayer {
    /// A limiter of `qps` requests per second with `burst`.
    pub fn new(qps: f64, burst: u32) -> Self {
        RateLimitLayer {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst))),
            host: "".into(),
        }
    }

    /// Labels the limiter's waits with the API server's `host:port`.
    pub fn with_host(mut self, host: &str) -> Self {
        self.host = host.into();
        self
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            host: self.host.clone(),
        }
    }
}

/// The service of [`RateLimitLayer`].
#[derive(Debug, Clone)]
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    host: Arc<str>,
}

impl<S, R: RequestVerb> Service<R> for RateLimit<S>
where
    S: Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let wait = self
            .bucket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reserve(Instant::now());
        if let Some(verb) = req.verb() {
            kubelet_core::metrics::global()
                .rest_client_rate_limiter_duration
                .with_labels(&[&self.host, verb])
                .observe(wait);
        }
        // The inner future does no work before it is polled (hyper's client is lazy), so the
        // request leaves only after the wait.
        let fut = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            fut.await
        })
    }
}

#[cfg(test)]
mod connection_tests;
#[cfg(test)]
mod rotation_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_paces_at_qps() {
        let mut b = TokenBucket::new(50.0, 100);
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(b.reserve(now), Duration::ZERO);
        }
        // The 101st waits one token interval (20ms), the 102nd two.
        let w1 = b.reserve(now);
        let w2 = b.reserve(now);
        assert!((w1.as_secs_f64() - 0.02).abs() < 1e-9, "{w1:?}");
        assert!((w2.as_secs_f64() - 0.04).abs() < 1e-9, "{w2:?}");
        // After a second, 50 tokens came back, 2 of them owed.
        let later = now + Duration::from_secs(1);
        for _ in 0..48 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert!(b.reserve(later) > Duration::ZERO);
        // Refill caps at the burst.
        let much_later = later + Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(b.reserve(much_later), Duration::ZERO);
        }
        assert!(b.reserve(much_later) > Duration::ZERO);
    }

    #[test]
    fn zero_qps_never_waits() {
        let mut b = TokenBucket::new(0.0, 1);
        let now = Instant::now();
        for _ in 0..1000 {
            assert_eq!(b.reserve(now), Duration::ZERO);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn layer_delays_requests_beyond_the_burst() {
        let svc =
            tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(Instant::now()) });
        let mut limited = RateLimitLayer::new(10.0, 2).layer(svc);
        let start = Instant::now();
        let mut times = Vec::new();
        for _ in 0..4 {
            let t = limited.call(()).await.unwrap();
            times.push(t - start);
        }
        assert_eq!(times[0], Duration::ZERO);
        assert_eq!(times[1], Duration::ZERO);
        assert!(times[2] >= Duration::from_millis(99), "{times:?}");
        assert!(times[3] >= Duration::from_millis(199), "{times:?}");
    }
}
