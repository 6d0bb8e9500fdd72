//! The simulator's container event stream: every state change it makes, in order, through a
//! bounded broadcast channel. A subscriber that falls more than [`EVENT_BUFFER`] events behind
//! gets one error item saying how many it missed (and should relist), then the newer events.

use futures::StreamExt;
use tokio::sync::broadcast;

use crate::runtime::{ContainerEvent, ContainerEventKind, ContainerEventStream, RuntimeError};

use super::SimContainer;

/// Events buffered per subscriber.
pub(super) const EVENT_BUFFER: usize = 1024;

/// The sending side, held by the runtime.
#[derive(Debug)]
pub(super) struct Events(broadcast::Sender<ContainerEvent>);

impl Default for Events {
    fn default() -> Self {
        Events(broadcast::channel(EVENT_BUFFER).0)
    }
}

impl Events {
    /// Publishes `kind` for `c`, stamped `at`; nobody listening is fine.
    pub fn emit(&self, c: &SimContainer, kind: ContainerEventKind, at: i64) {
        let s = &c.status.summary;
        let _ = self.0.send(ContainerEvent {
            container_id: s.id.clone(),
            sandbox_id: s.sandbox_id.clone(),
            pod: s.pod.clone(),
            kind,
            created_at: at,
        });
    }

    /// A new subscriber's stream, from now on.
    pub fn subscribe(&self) -> ContainerEventStream {
        futures::stream::unfold(self.0.subscribe(), |mut rx| async move {
            match rx.recv().await {
                Ok(event) => Some((Ok(event), rx)),
                Err(broadcast::error::RecvError::Lagged(missed)) => Some((
                    Err(RuntimeError::OperationFailed {
                        operation: "GetContainerEvents",
                        message: format!("{missed} events were dropped; relist"),
                    }),
                    rx,
                )),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .boxed()
    }
}
