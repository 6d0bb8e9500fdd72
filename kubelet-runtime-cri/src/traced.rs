//! The CRI channel with one OpenTelemetry client span per call (Go's otelgrpc client
//! interceptor on the kubelet's CRI connection): [`TracedChannel`] wraps the gRPC channel,
//! names the span by the call's full method and records its `grpc-status`, from the response
//! headers (a trailers-only answer) or the trailers, and sends the span's W3C `traceparent`
//! with the call. The span is entered whenever the call's future or its response body is
//! polled, and ends at the body's last poll, so its duration covers the call (a streaming
//! call's, the stream): tracing-opentelemetry takes a span's end time from its last exit,
//! not from its close.
//!
//! When no subscriber takes [`kubelet_core::telemetry::SPAN_TARGET`] (tracing not
//! configured), the span is disabled and the call goes straight to the channel: one branch.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use futures::FutureExt;
use http_body::{Body as HttpBody, Frame, SizeHint};
use kubelet_core::telemetry;
use tonic::body::Body;
use tonic::codegen::http::{HeaderMap, Request, Response};
use tonic::transport::Channel;
use tower::Service;
use tracing::{Instrument, Span};

/// A [`Channel`] whose calls each get a client span.
#[derive(Debug, Clone)]
pub(crate) struct TracedChannel {
    inner: Channel,
}

impl TracedChannel {
    pub(crate) fn new(inner: Channel) -> TracedChannel {
        TracedChannel { inner }
    }
}

type CallFuture = Either<
    tonic::transport::channel::ResponseFuture,
    BoxFuture<'static, Result<Response<Body>, tonic::transport::Error>>,
>;

impl Service<Request<Body>> for TracedChannel {
    type Response = Response<Body>;
    type Error = tonic::transport::Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let span = telemetry::grpc_client_span(request.uri().path());
        if span.is_disabled() {
            return Either::Left(self.inner.call(request));
        }
        let mut request = request;
        // The trace goes on in the runtime (otelgrpc's W3C propagation).
        if let Some(value) = telemetry::traceparent(&span)
            .and_then(|v| tonic::codegen::http::HeaderValue::from_str(&v).ok())
        {
            request.headers_mut().insert("traceparent", value);
        }
        let call = {
            let _entered = span.enter();
            self.inner.call(request)
        };
        let polled = span.clone();
        Either::Right(
            async move {
                match call.await {
                    Ok(response) => {
                        // A trailers-only answer (every error containerd returns) has the
                        // status in the headers.
                        record_status(&span, response.headers());
                        let (parts, body) = response.into_parts();
                        Ok(Response::from_parts(
                            parts,
                            Body::new(TracedBody { inner: body, span }),
                        ))
                    }
                    Err(e) => {
                        // No answer: otelgrpc reports Unavailable for a transport failure.
                        telemetry::record_grpc_status(&span, 14, Some(&e.to_string()));
                        Err(e)
                    }
                }
            }
            .instrument(polled)
            .boxed(),
        )
    }
}

/// Records `grpc-status` (and `grpc-message`) when `headers` carry it.
fn record_status(span: &Span, headers: &HeaderMap) {
    let Some(code) = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    let message = headers.get("grpc-message").and_then(|v| v.to_str().ok());
    telemetry::record_grpc_status(span, code, message);
}

/// The response body, holding the call's span until the body ends.
struct TracedBody {
    inner: Body,
    span: Span,
}

impl HttpBody for TracedBody {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    record_status(&this.span, trailers);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                telemetry::record_grpc_status(&this.span, 14, Some(&e.to_string()));
            }
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
