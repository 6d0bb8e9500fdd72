//! gRPC clients over unix sockets: connecting a tonic [`Channel`] to a socket path, trying
//! again until a deadline (Go's blocking `grpc.DialContext` on a `unix` address). Device
//! plugin endpoints and the plugin manager's registration client dial this way.

use std::io;
use std::path::Path;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tracing::debug;

/// First and longest pause between attempts to connect.
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(1);

/// Connects to `socket`, trying again until `timeout`. The channel reconnects by itself
/// after a broken connection, as a Go `ClientConn` does. The error names the last failure.
pub(crate) async fn dial(socket: &Path, timeout: Duration) -> Result<Channel, String> {
    let mut last_error = String::from("no connection attempt finished");
    let attempts = async {
        let mut pause = RETRY_MIN;
        loop {
            match connect(socket).await {
                Ok(channel) => return channel,
                Err(e) => {
                    last_error = e;
                    debug!(socket = %socket.display(), error = %last_error, "Socket not reachable yet");
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RETRY_MAX);
        }
    };
    let dialled = tokio::time::timeout(timeout, attempts).await;
    dialled.map_err(|_| {
        format!(
            "no connection within {}s: {last_error}",
            timeout.as_secs_f64()
        )
    })
}

/// One attempt to connect to `socket`.
async fn connect(socket: &Path) -> Result<Channel, String> {
    let path = socket.to_path_buf();
    // The URI is never resolved: the connector dials the socket.
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .map_err(|e| error_chain(&e))
}

/// An error and its sources, `: `-separated (tonic's transport error says little alone).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A gRPC failure as Go's `status.Error` prints it: `rpc error: code = … desc = …`.
pub(crate) fn status_message(status: &tonic::Status) -> String {
    format!(
        "rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    )
}
