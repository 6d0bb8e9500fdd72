//! The HTTP/1 listener loop.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::host::Host;
use crate::routes::{respond, Endpoints};

/// Connections served at once per listener; further ones wait in the accept queue.
const MAX_CONNECTIONS: usize = 256;
/// A client must send its request headers within this time.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `endpoints` on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    host: Arc<dyn Host>,
    endpoints: Endpoints,
    shutdown: CancellationToken,
) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let (stream, _) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let host = host.clone();
        let token = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |req: Request<Incoming>| {
                let reply = respond(
                    host.as_ref(),
                    endpoints,
                    req.method().as_str(),
                    req.uri().path(),
                );
                let mut resp = Response::new(Full::new(Bytes::from(reply.body)));
                *resp.status_mut() =
                    hyper::StatusCode::from_u16(reply.status).unwrap_or(hyper::StatusCode::OK);
                if let Ok(v) = hyper::header::HeaderValue::from_str(reply.content_type) {
                    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
                }
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = token.cancelled() => {}
                r = conn => if let Err(e) = r { tracing::debug!(error = %e, "connection ended") },
            }
        });
    }
}
