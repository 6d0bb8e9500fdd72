//! `/exec`, `/attach`, `/portForward`: the runtime hands out a URL on its own streaming
//! server (containerd's speaks SPDY and WebSocket remotecommand/portforward); the upgrade
//! request is forwarded there and, once both sides switched protocols, bytes are copied in
//! both directions unchanged (Go's `UpgradeAwareHandler`).

use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use crate::reply::{full, status_error, Body};

/// Limit of a non-upgrade answer of the streaming server copied to the client.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Time to connect to the streaming server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a request asks for a protocol upgrade (SPDY or WebSocket).
pub fn is_upgrade<B>(req: &Request<B>) -> bool {
    let connection_upgrade = req
        .headers()
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    connection_upgrade && req.headers().contains_key(header::UPGRADE)
}

/// Headers that belong to one hop only (but `Connection`/`Upgrade` are kept: they carry
/// the upgrade itself).
const HOP_HEADERS: [&str; 6] = [
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
];

/// Forwards the upgrade request `req` to `url` and splices the two connections once the
/// streaming server answers 101. The stream lasts until either side closes, it is idle
/// for `idle_timeout`, or `shutdown` fires.
pub async fn proxy(
    mut req: Request<Incoming>,
    url: &str,
    idle_timeout: Duration,
    shutdown: CancellationToken,
) -> Response<Body> {
    let target: Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => {
            return status_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the runtime returned an invalid streaming URL {url:?}: {e}"),
            )
        }
    };
    if target.scheme_str() != Some("http") {
        return status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("streaming URL {url:?}: only http streaming servers are supported"),
        );
    }
    let Some(authority) = target.authority().cloned() else {
        return status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("streaming URL {url:?} has no host"),
        );
    };
    let port = authority.port_u16().unwrap_or(80);
    let connect = tokio::net::TcpStream::connect((authority.host().trim_matches(['[', ']']), port));
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return status_error(
                StatusCode::BAD_GATEWAY,
                &format!("connecting to the streaming server {authority}: {e}"),
            )
        }
        Err(_) => {
            return status_error(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("connecting to the streaming server {authority} timed out"),
            )
        }
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(x) => x,
        Err(e) => {
            return status_error(
                StatusCode::BAD_GATEWAY,
                &format!("streaming server handshake: {e}"),
            )
        }
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "streaming server connection ended");
        }
    });

    // Go: the target's path with the original query.
    let path = target.path();
    let pq = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut out = Request::builder().method(req.method().clone()).uri(pq);
    for (name, value) in req.headers() {
        if name == header::HOST
            || name == header::AUTHORIZATION
            || HOP_HEADERS.contains(&name.as_str())
        {
            continue;
        }
        out = out.header(name, value);
    }
    out = out.header(header::HOST, authority.as_str());
    let out = match out.body(http_body_util::Empty::<bytes::Bytes>::new()) {
        Ok(r) => r,
        Err(e) => {
            return status_error(
                StatusCode::BAD_REQUEST,
                &format!("building the streaming request: {e}"),
            )
        }
    };
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut resp = match sender.send_request(out).await {
        Ok(r) => r,
        Err(e) => {
            return status_error(
                StatusCode::BAD_GATEWAY,
                &format!("streaming server request: {e}"),
            )
        }
    };

    let status = resp.status();
    let headers = resp.headers().clone();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        // The streaming server refused (bad token, unknown container): pass its answer on.
        use http_body_util::BodyExt;
        let body = http_body_util::Limited::new(resp.into_body(), MAX_ERROR_BODY)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let mut r = Response::new(full(body));
        *r.status_mut() = status;
        if let Some(ct) = headers.get(header::CONTENT_TYPE) {
            r.headers_mut().insert(header::CONTENT_TYPE, ct.clone());
        }
        return r;
    }
    let backend_upgrade = hyper::upgrade::on(&mut resp);
    tokio::spawn(async move {
        let (client, backend) = match tokio::join!(client_upgrade, backend_upgrade) {
            (Ok(c), Ok(b)) => (c, b),
            (c, b) => {
                tracing::warn!(client = ?c.err(), backend = ?b.err(), "stream upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut backend = TokioIo::new(backend);
        let copy = splice(&mut client, &mut backend, idle_timeout);
        tokio::select! {
            _ = shutdown.cancelled() => {}
            r = copy => if let Err(e) = r { tracing::debug!(error = %e, "stream ended") },
        }
    });
    let mut r = Response::new(full(bytes::Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    for (name, value) in &headers {
        if name == header::CONTENT_LENGTH {
            continue;
        }
        r.headers_mut().append(name, value.clone());
    }
    if !r.headers().contains_key(header::CONNECTION) {
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    }
    r
}

/// Copies both ways until both directions ended or nothing moved for `idle`.
async fn splice<A, B>(a: &mut A, b: &mut B, idle: Duration) -> std::io::Result<()>
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let mut abuf = vec![0u8; 32 * 1024];
    let mut bbuf = vec![0u8; 32 * 1024];
    let (mut a_open, mut b_open) = (true, true);
    while a_open || b_open {
        tokio::select! {
            r = ar.read(&mut abuf), if a_open => match r? {
                0 => { a_open = false; let _ = bw.shutdown().await; }
                n => bw.write_all(&abuf[..n]).await?,
            },
            r = br.read(&mut bbuf), if b_open => match r? {
                0 => { b_open = false; let _ = aw.shutdown().await; }
                n => aw.write_all(&bbuf[..n]).await?,
            },
            _ = tokio::time::sleep(idle) => {
                return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "stream idle timeout"));
            }
        }
    }
    Ok(())
}
