//! The simulator's container event stream: every state change it makes, in order, through a
//! bounded broadcast channel. A subscriber that falls more than [`EVENT_BUFFER`] events behind
//! gets one error item saying how many it missed (and should relist), then the newer events.
//! [`Events::break_subscribers`] ends every open stream (a runtime restart, for tests).

use std::sync::Mutex;

use futures::StreamExt;
use tokio::sync::broadcast;

use crate::runtime::{ContainerEvent, ContainerEventKind, ContainerEventStream, RuntimeError};

use super::SimContainer;

/// Events buffered per subscriber.
pub(super) const EVENT_BUFFER: usize = 1024;

/// The sending side, held by the runtime.
#[derive(Debug)]
pub(super) struct Events(Mutex<broadcast::Sender<ContainerEvent>>);

impl Default for Events {
    fn default() -> Self {
        Events(Mutex::new(broadcast::channel(EVENT_BUFFER).0))
    }
}

impl Events {
    /// Publishes `kind` for `c`, stamped `at`; nobody listening is fine.
    pub fn emit(&self, c: &SimContainer, kind: ContainerEventKind, at: i64) {
        let s = &c.status.summary;
        let _ = self.sender().send(ContainerEvent {
            container_id: s.id.clone(),
            sandbox_id: s.sandbox_id.clone(),
            pod: s.pod.clone(),
            kind,
            created_at: at,
        });
    }

    fn sender(&self) -> std::sync::MutexGuard<'_, broadcast::Sender<ContainerEvent>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends every open stream (their subscribers see the end of the stream).
    pub fn break_subscribers(&self) {
        *self.sender() = broadcast::channel(EVENT_BUFFER).0;
    }

    /// A new subscriber's stream, from now on.
    pub fn subscribe(&self) -> ContainerEventStream {
        let rx = self.sender().subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
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
