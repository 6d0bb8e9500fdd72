//! Response bodies and the Kubernetes `Status` error body.

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::{header, Response, StatusCode};
use serde_json::json;

/// The body type of every response: whole or streamed.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A whole body.
pub fn full(data: impl Into<Bytes>) -> Body {
    Full::new(data.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A body streamed from a bounded channel; the sender side ends it by dropping.
pub fn channel_body(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Body {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item.map(Frame::data), rx))
    });
    BodyExt::boxed(StreamBody::new(stream))
}

/// A response with a content type.
pub fn with_type(status: StatusCode, content_type: &str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

/// A plain text response.
pub fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    with_type(status, "text/plain; charset=utf-8", full(body.into()))
}

/// A JSON response.
pub fn json_reply<T: serde::Serialize>(value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(body) => with_type(StatusCode::OK, "application/json", full(body)),
        Err(e) => status_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("encoding: {e}")),
    }
}

/// The `reason` of a `Status` for an HTTP code.
fn reason(code: StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        408 => "Timeout",
        413 => "RequestEntityTooLarge",
        503 => "ServiceUnavailable",
        _ => "InternalError",
    }
}

/// A `Status` failure body (`kind: Status`, as the API server and the Go kubelet answer
/// errors), with the given code and message.
pub fn status_error(code: StatusCode, message: &str) -> Response<Body> {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason(code),
        "code": code.as_u16(),
    });
    with_type(code, "application/json", full(body.to_string()))
}
