//! The [`StatusSink`] contract: where the kubelet publishes what it observed.
//!
//! The engine's status manager calls [`StatusSink::set_pod_status`] only when a pod's status
//! changed, and [`StatusSink::pod_terminated`] once a pod that is being deleted has no running
//! containers left (in cluster mode that is when the API object is deleted). Events are
//! handed over with [`StatusSink::record_event`], which must not block: a sink that talks to a
//! remote service buffers and drops rather than stall the pod workers.
//!
//! Standalone mode uses [`NoopStatusSink`]; cluster mode implements this over the API server.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

/// Severity of an [`Event`], as Kubernetes' event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// "Normal"
    Normal,
    /// "Warning"
    Warning,
}

impl EventType {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventObject {
    /// A pod (and optionally a field path such as `spec.containers{web}`).
    Pod {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Uid.
        uid: String,
        /// Field path, empty for the pod itself.
        field_path: String,
    },
    /// The node.
    Node {
        /// Node name.
        name: String,
    },
}

/// An event the kubelet records (Scheduled, Pulling, Started, BackOff, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Subject.
    pub object: EventObject,
    /// Normal or Warning.
    pub event_type: EventType,
    /// CamelCase reason, e.g. "BackOff".
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// The Event object's annotations (Go's `AnnotatedEventf`; the eviction manager's
    /// `starved_resource`, `offending_containers`, `offending_containers_usage`), usually none.
    pub annotations: std::collections::BTreeMap<String, String>,
}

impl Event {
    /// An event about a pod, or about one of its containers (`field_path`
    /// `spec.containers{<name>}`, as Go records container events).
    pub fn for_pod(
        p: &Pod,
        container: Option<&str>,
        event_type: EventType,
        reason: &str,
        message: String,
    ) -> Event {
        Event {
            object: EventObject::Pod {
                namespace: crate::pod::namespace(p).to_string(),
                name: crate::pod::name(p).to_string(),
                uid: crate::pod::uid(p).to_string(),
                field_path: container
                    .map(|c| format!("spec.containers{{{c}}}"))
                    .unwrap_or_default(),
            },
            event_type,
            reason: reason.to_string(),
            message,
            annotations: Default::default(),
        }
    }

    /// An event about the node `name`.
    pub fn for_node(name: &str, event_type: EventType, reason: &str, message: String) -> Event {
        Event {
            object: EventObject::Node {
                name: name.to_string(),
            },
            event_type,
            reason: reason.to_string(),
            message,
            annotations: Default::default(),
        }
    }

    /// The same event carrying `annotations` on its Event object.
    pub fn with_annotations(
        mut self,
        annotations: std::collections::BTreeMap<String, String>,
    ) -> Event {
        self.annotations = annotations;
        self
    }
}

/// Errors a sink reports; the engine logs them and retries on the next change.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The destination could not be reached.
    #[error("status destination unavailable: {0}")]
    Unavailable(String),
    /// The destination refused the update.
    #[error("status update for {pod} rejected: {message}")]
    Rejected {
        /// `ns/name`.
        pod: String,
        /// Why.
        message: String,
    },
}

/// Where pod status and events go. See the module docs.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait StatusSink: Send + Sync {
    /// Publishes a changed pod status.
    async fn set_pod_status(&self, pod: &Pod, status: &PodStatus) -> Result<(), SinkError>;
    /// The pod finished terminating and its containers are gone.
    async fn pod_terminated(&self, pod: &Pod) -> Result<(), SinkError>;
    /// Records an event. Never blocks.
    fn record_event(&self, event: Event);
}

/// A sink that publishes nothing (standalone mode); events go to the log at debug level.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopStatusSink;

#[async_trait]
impl StatusSink for NoopStatusSink {
    async fn set_pod_status(&self, _pod: &Pod, _status: &PodStatus) -> Result<(), SinkError> {
        Ok(())
    }

    async fn pod_terminated(&self, _pod: &Pod) -> Result<(), SinkError> {
        Ok(())
    }

    fn record_event(&self, event: Event) {
        tracing::debug!(
            reason = %event.reason,
            kind = event.event_type.as_str(),
            message = %event.message,
            "event"
        );
    }
}
