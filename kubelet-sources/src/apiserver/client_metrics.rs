//! `rest_client_*` for the API clients (component-base's client-go metrics):
//! `rest_client_requests_total{code,host,method}` and
//! `rest_client_request_duration_seconds{host,verb}` for every request, observed into
//! [`kubelet_core::metrics::global`]; `rest_client_rate_limiter_duration_seconds{host,verb}`
//! is observed by the rate limiter ([`super::client::RateLimitLayer`]). `host` is the API
//! server's `host:port`; `code` is the HTTP status, `<error>` when no answer came.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct RestClientMetricsLayer {
    host: Arc<str>,
}

impl RestClientMetricsLayer {
    /// A layer labelling requests with `host` (`host:port` of the API server).
    pub fn new(host: &str) -> Self {
        RestClientMetricsLayer { host: host.into() }
    }
}

impl<S> Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetrics<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RestClientMetrics {
            inner,
            host: self.host.clone(),
        }
    }
}

/// The service of [`RestClientMetricsLayer`].
#[derive(Debug, Clone)]
pub struct RestClientMetrics<S> {
    inner: S,
    host: Arc<str>,
}

impl<S, B, RB> Service<http::Request<B>> for RestClientMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let host = self.host.clone();
        let started = tokio::time::Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            let m = kubelet_core::metrics::global();
            m.rest_client_request_duration
                .with_labels(&[&host, &method])
                .observe(started.elapsed());
            let code = match &result {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            m.rest_client_requests.inc_labels(&[&code, &host, &method]);
            result
        })
    }
}

/// What the rate limiter labels its wait with: the request's HTTP method (requests of other
/// types, as in tests, have none).
pub trait RequestVerb {
    /// The HTTP method, if this is an HTTP request.
    fn verb(&self) -> Option<&str>;
}

impl RequestVerb for () {
    fn verb(&self) -> Option<&str> {
        None
    }
}

impl<B> RequestVerb for http::Request<B> {
    fn verb(&self) -> Option<&str> {
        Some(self.method().as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_are_counted_by_code_host_and_method() {
        let svc = tower::service_fn(|req: http::Request<()>| async move {
            let status = if req.uri().path() == "/missing" {
                404
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(
                http::Response::builder().status(status).body(()).unwrap(),
            )
        });
        let mut metered = RestClientMetricsLayer::new("10.9.8.7:6443").layer(svc);
        for path in ["/api", "/missing", "/api"] {
            let req = http::Request::get(path).body(()).unwrap();
            metered.call(req).await.unwrap();
        }
        let m = kubelet_core::metrics::global();
        assert_eq!(
            m.rest_client_requests
                .get_labels(&["200", "10.9.8.7:6443", "GET"]),
            2
        );
        assert_eq!(
            m.rest_client_requests
                .get_labels(&["404", "10.9.8.7:6443", "GET"]),
            1
        );
        assert_eq!(
            m.rest_client_request_duration
                .with_labels(&["10.9.8.7:6443", "GET"])
                .count(),
            3
        );
    }
}
