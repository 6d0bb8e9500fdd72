//! A status sink that records everything.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use crate::pod;
use crate::sink::{Event, SinkError, StatusSink};

/// Records published statuses, terminations and events.
#[derive(Debug, Default)]
pub struct RecordingSink {
    statuses: Mutex<HashMap<String, Vec<PodStatus>>>,
    terminated: Mutex<Vec<String>>,
    events: Mutex<Vec<Event>>,
}

impl RecordingSink {
    /// Every status published for a pod uid, oldest first.
    pub fn statuses(&self, uid: &str) -> Vec<PodStatus> {
        self.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
            .unwrap_or_default()
    }

    /// Uids reported terminated.
    pub fn terminated(&self) -> Vec<String> {
        self.terminated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// All events, oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reasons of all events, oldest first.
    pub fn event_reasons(&self) -> Vec<String> {
        self.events().into_iter().map(|e| e.reason).collect()
    }
}

#[async_trait]
impl StatusSink for RecordingSink {
    async fn set_pod_status(&self, p: &Pod, status: &PodStatus) -> Result<(), SinkError> {
        self.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(pod::uid(p).to_string())
            .or_default()
            .push(status.clone());
        Ok(())
    }

    async fn pod_terminated(&self, p: &Pod) -> Result<(), SinkError> {
        self.terminated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pod::uid(p).to_string());
        Ok(())
    }

    fn record_event(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }
}
