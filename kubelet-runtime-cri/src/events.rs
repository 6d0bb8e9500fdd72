//! Container lifecycle events over CRI: the server stream `GetContainerEvents` (containerd
//! 1.7 and later; 1.6 answers `Unimplemented`, which is how the capability is detected).
//!
//! A runtime without the method answers at once. One that has it may hold back its response
//! headers until the first event (grpc-go sends them with the first message), so the call is
//! given [`ESTABLISH_WAIT`] to answer; after that the stream counts as established and a
//! late answer (an error, or the first events) arrives through it. The request carries no
//! deadline: the stream lives until the runtime ends it (a restart) or the consumer drops
//! it. The stream ends after its first error item; the consumer relists and subscribes again.

use std::time::Duration;

use futures::{future, stream, StreamExt};
use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerEventStream, RuntimeError, RuntimeResult};
use tracing::debug;

use crate::client::map_status;
use crate::{mapping, CriRuntime};

/// How long the runtime gets to answer the subscription before it counts as established.
pub const ESTABLISH_WAIT: Duration = Duration::from_secs(1);

const OPERATION: &str = "GetContainerEvents";

fn error(status: &tonic::Status) -> RuntimeError {
    let err = map_status(OPERATION, "runtime", "", status);
    debug!(operation = OPERATION, code = ?status.code(), error = %err, "CRI call failed");
    err
}

/// The runtime's event messages as [`kubelet_core::runtime::ContainerEvent`]s; event types
/// this kubelet does not know are skipped.
fn events(messages: tonic::Streaming<cri::ContainerEventResponse>) -> ContainerEventStream {
    messages
        .filter_map(|item| {
            future::ready(match item {
                Ok(e) => mapping::container_event(&e).map(Ok),
                Err(status) => Some(Err(error(&status))),
            })
        })
        .boxed()
}

/// Subscribes to the runtime's container events.
pub(crate) async fn subscribe(rt: &CriRuntime) -> RuntimeResult<ContainerEventStream> {
    let mut client = rt.runtime.clone();
    let mut call = Box::pin(async move {
        client
            .get_container_events(tonic::Request::new(cri::GetEventsRequest {}))
            .await
    });
    let answered = tokio::select! {
        r = &mut call => Some(r),
        _ = tokio::time::sleep(ESTABLISH_WAIT) => None,
    };
    match answered {
        Some(Ok(response)) => Ok(events(response.into_inner())),
        Some(Err(status)) => Err(error(&status)),
        None => Ok(stream::once(call)
            .flat_map(|r| match r {
                Ok(response) => events(response.into_inner()),
                Err(status) => stream::once(future::ready(Err(error(&status)))).boxed(),
            })
            .boxed()),
    }
}
