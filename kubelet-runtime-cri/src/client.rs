//! The gRPC plumbing every call shares: the lazily (re)connecting unix-socket channel,
//! client-side deadlines, and the mapping of gRPC status codes to [`RuntimeError`].

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use kubelet_core::runtime::{RuntimeError, RuntimeResult};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::debug;

use crate::CriRuntime;

/// A channel that dials the unix socket on first use and again after every disconnect.
pub(crate) fn lazy_channel(socket: PathBuf) -> Channel {
    // The URI is never resolved: the connector below dials the socket.
    Endpoint::from_static("http://cri.local").connect_with_connector_lazy(tower::service_fn(
        move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        },
    ))
}

/// Maps a gRPC status to a [`RuntimeError`] for `operation` on the object `kind`/`id`.
pub fn map_status(
    operation: &'static str,
    kind: &'static str,
    id: &str,
    status: &tonic::Status,
) -> RuntimeError {
    use tonic::Code;
    let message = status.message().to_string();
    match status.code() {
        Code::NotFound => RuntimeError::NotFound {
            kind,
            id: id.to_string(),
        },
        Code::Unavailable => RuntimeError::Unavailable(format!("{operation}: {message}")),
        Code::InvalidArgument => RuntimeError::InvalidInput {
            what: format!("{operation} request for {kind} {id}"),
            message,
        },
        Code::DeadlineExceeded => RuntimeError::DeadlineExceeded { operation },
        Code::Unimplemented => RuntimeError::Unimplemented { operation },
        // grpc-go answers ResourceExhausted when a message exceeds the limit on either side;
        // tonic reports a too-large decoded message as OutOfRange.
        Code::ResourceExhausted | Code::OutOfRange if is_size_failure(&message) => {
            RuntimeError::TooLarge { operation, message }
        }
        // Transport failures tonic reports without a server answer (connection refused, the
        // connection dropped under an in-flight call). This client never cancels calls itself.
        Code::Unknown | Code::Cancelled if is_transport_failure(&message) => {
            RuntimeError::Unavailable(format!("{operation}: {message}"))
        }
        _ => RuntimeError::OperationFailed { operation, message },
    }
}

fn is_size_failure(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("larger than max")
        || m.contains("message length too large")
        || m.contains("too large")
}

fn is_transport_failure(message: &str) -> bool {
    const SIGNS: [&str; 7] = [
        "transport error",
        "Service was not ready",
        "error trying to connect",
        "operation was canceled",
        "connection reset",
        "broken pipe",
        "connection closed",
    ];
    SIGNS.iter().any(|s| message.contains(s))
}

/// What an error is about: the operation and the object.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    pub operation: &'static str,
    pub kind: &'static str,
    pub id: &'a str,
    /// The image the call uses, to tell "image not found" from "sandbox not found".
    pub image: Option<&'a str>,
}

pub(crate) fn ctx<'a>(operation: &'static str, kind: &'static str, id: &'a str) -> Ctx<'a> {
    Ctx {
        operation,
        kind,
        id,
        image: None,
    }
}

impl CriRuntime {
    pub(crate) fn request<T>(&self, message: T, timeout: Option<Duration>) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        request
    }

    /// Runs one call with the client-side deadline and maps its error.
    pub(crate) async fn call<T, F>(
        &self,
        c: Ctx<'_>,
        timeout: Option<Duration>,
        fut: F,
    ) -> RuntimeResult<T>
    where
        F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let result = match timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(RuntimeError::DeadlineExceeded {
                        operation: c.operation,
                    })
                }
            },
            None => fut.await,
        };
        match result {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => {
                let err = match c.image {
                    Some(image)
                        if status.code() == tonic::Code::NotFound
                            && status.message().contains("image") =>
                    {
                        RuntimeError::NotFound {
                            kind: "image",
                            id: image.to_string(),
                        }
                    }
                    _ => map_status(c.operation, c.kind, c.id, &status),
                };
                debug!(operation = c.operation, id = c.id, code = ?status.code(), error = %err, "CRI call failed");
                Err(err)
            }
        }
    }

    pub(crate) fn deadline(&self) -> Option<Duration> {
        Some(self.config.request_timeout)
    }
}

/// A timeout in whole seconds, rounded up (CRI timeouts are seconds).
pub(crate) fn whole_seconds_up(d: Duration) -> i64 {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    i64::try_from(secs).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_table() {
        use tonic::{Code, Status};
        type Check = fn(&RuntimeError) -> bool;
        let cases: Vec<(Status, Check)> = vec![
            (
                Status::not_found("x"),
                |e| matches!(e, RuntimeError::NotFound { kind: "container", id } if id == "c1"),
            ),
            (Status::unavailable("down"), |e| {
                matches!(e, RuntimeError::Unavailable(_))
            }),
            (
                Status::invalid_argument("bad"),
                |e| matches!(e, RuntimeError::InvalidInput { message, .. } if message == "bad"),
            ),
            (Status::deadline_exceeded("slow"), |e| {
                matches!(
                    e,
                    RuntimeError::DeadlineExceeded {
                        operation: "CreateContainer"
                    }
                )
            }),
            (Status::unimplemented("no"), |e| {
                matches!(
                    e,
                    RuntimeError::Unimplemented {
                        operation: "CreateContainer"
                    }
                )
            }),
            (Status::new(Code::Unknown, "transport error"), |e| {
                matches!(e, RuntimeError::Unavailable(_))
            }),
            (
                Status::new(Code::Cancelled, "operation was canceled"),
                |e| matches!(e, RuntimeError::Unavailable(_)),
            ),
            (Status::new(Code::Unknown, "image is broken"), |e| {
                matches!(e, RuntimeError::OperationFailed { .. })
            }),
            (
                Status::resource_exhausted(
                    "trying to send message larger than max (18002774 vs. 16777216)",
                ),
                |e| matches!(e, RuntimeError::TooLarge { operation: "CreateContainer", .. }),
            ),
            (
                Status::out_of_range("Error, decoded message length too large: found 18002774 bytes, the limit is: 16777216 bytes"),
                |e| matches!(e, RuntimeError::TooLarge { .. }),
            ),
            (Status::resource_exhausted("quota"), |e| {
                matches!(e, RuntimeError::OperationFailed { .. })
            }),
            (
                Status::internal("boom"),
                |e| matches!(e, RuntimeError::OperationFailed { operation: "CreateContainer", message } if message == "boom"),
            ),
        ];
        for (status, check) in cases {
            let err = map_status("CreateContainer", "container", "c1", &status);
            assert!(check(&err), "{status:?} -> {err:?}");
        }
    }

    #[test]
    fn timeouts_round_up() {
        assert_eq!(whole_seconds_up(Duration::ZERO), 0);
        assert_eq!(whole_seconds_up(Duration::from_millis(1)), 1);
        assert_eq!(whole_seconds_up(Duration::from_secs(30)), 30);
        assert_eq!(whole_seconds_up(Duration::from_millis(30_500)), 31);
    }
}
