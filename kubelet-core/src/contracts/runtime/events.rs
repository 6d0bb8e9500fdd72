//! Container lifecycle events a runtime pushes ([`ContainerRuntime::container_events`],
//! CRI `GetContainerEvents`), for an event-driven PLEG that relists only as a fallback.
//!
//! The stream is pull-based, so it is bounded by construction: a runtime produces the next
//! event when the consumer asks for it (a gRPC stream is flow-controlled; an in-process
//! backend buffers in a bounded channel and reports a lag as an error item). A consumer that
//! sees an error item or the end of the stream has missed events and must relist.
//!
//! [`ContainerRuntime::container_events`]: super::ContainerRuntime::container_events

use futures::stream::BoxStream;

use super::{PodRef, RuntimeResult};

/// What happened to a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerEventKind {
    /// It was created.
    Created,
    /// It started running.
    Started,
    /// It stopped running (exited, was killed, or its sandbox was stopped).
    Stopped,
    /// It was removed.
    Deleted,
}

/// One container lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEvent {
    /// Runtime id of the container.
    pub container_id: String,
    /// Runtime id of its sandbox (empty when the runtime did not say).
    pub sandbox_id: String,
    /// The pod it belongs to (empty when the runtime did not say or the pod is not the
    /// kubelet's).
    pub pod: PodRef,
    /// What happened.
    pub kind: ContainerEventKind,
    /// When it happened, nanoseconds since the Unix epoch.
    pub created_at: i64,
}

/// The stream [`ContainerRuntime::container_events`](super::ContainerRuntime::container_events)
/// returns: events in the order the runtime saw them; an `Err` item means events were lost.
pub type ContainerEventStream = BoxStream<'static, RuntimeResult<ContainerEvent>>;
