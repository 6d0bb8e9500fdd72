//! CRI container events (`ContainerEventResponse`) back to kubelet-core's
//! [`ContainerEvent`].

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerEvent, ContainerEventKind, PodRef};

use super::labels::pod_ref_from_labels;

/// Maps a CRI event type; `None` for a type this kubelet does not know (a newer runtime).
pub fn container_event_kind(kind: i32) -> Option<ContainerEventKind> {
    Some(match cri::ContainerEventType::try_from(kind).ok()? {
        cri::ContainerEventType::ContainerCreatedEvent => ContainerEventKind::Created,
        cri::ContainerEventType::ContainerStartedEvent => ContainerEventKind::Started,
        cri::ContainerEventType::ContainerStoppedEvent => ContainerEventKind::Stopped,
        cri::ContainerEventType::ContainerDeletedEvent => ContainerEventKind::Deleted,
    })
}

/// One event: the sandbox and the pod come from the event's sandbox status (its id and
/// the kubelet's labels, else its metadata); `None` for an unknown event type.
pub fn container_event(e: &cri::ContainerEventResponse) -> Option<ContainerEvent> {
    let kind = container_event_kind(e.container_event_type)?;
    let sandbox = e.pod_sandbox_status.as_ref();
    let pod = sandbox
        .and_then(|s| {
            pod_ref_from_labels(&s.labels).or_else(|| {
                s.metadata.as_ref().map(|m| PodRef {
                    uid: m.uid.clone(),
                    name: m.name.clone(),
                    namespace: m.namespace.clone(),
                })
            })
        })
        .unwrap_or_default();
    Some(ContainerEvent {
        container_id: e.container_id.clone(),
        sandbox_id: sandbox.map(|s| s.id.clone()).unwrap_or_default(),
        pod,
        kind,
        created_at: e.created_at,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::fixtures::pod_with;
    use super::super::labels::sandbox_labels;
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn event_kinds_table() {
        let cases = [
            (0, Some(ContainerEventKind::Created)),
            (1, Some(ContainerEventKind::Started)),
            (2, Some(ContainerEventKind::Stopped)),
            (3, Some(ContainerEventKind::Deleted)),
            (4, None),
            (-1, None),
        ];
        for (raw, want) in cases {
            assert_eq!(container_event_kind(raw), want, "{raw}");
        }
    }

    #[test]
    fn events_carry_sandbox_and_pod() {
        let event = cri::ContainerEventResponse {
            container_id: "cid".into(),
            container_event_type: cri::ContainerEventType::ContainerStoppedEvent as i32,
            created_at: 42,
            pod_sandbox_status: Some(cri::PodSandboxStatus {
                id: "sid".into(),
                labels: sandbox_labels(&pod_with(vec![], PodSpec::default())),
                ..Default::default()
            }),
            containers_statuses: vec![],
        };
        let e = container_event(&event).unwrap();
        assert_eq!(
            (e.container_id.as_str(), e.sandbox_id.as_str(), e.created_at),
            ("cid", "sid", 42)
        );
        assert_eq!(e.kind, ContainerEventKind::Stopped);
        assert_eq!(e.pod.full_name(), "prod/web");
        assert_eq!(e.pod.uid, "uid-1");

        // No kubelet labels: the sandbox metadata names the pod; no sandbox: nothing.
        let from_metadata = cri::ContainerEventResponse {
            pod_sandbox_status: Some(cri::PodSandboxStatus {
                id: "sid".into(),
                metadata: Some(cri::PodSandboxMetadata {
                    name: "n".into(),
                    uid: "u".into(),
                    namespace: "ns".into(),
                    attempt: 0,
                }),
                ..Default::default()
            }),
            ..event.clone()
        };
        assert_eq!(container_event(&from_metadata).unwrap().pod.uid, "u");
        let bare = cri::ContainerEventResponse {
            pod_sandbox_status: None,
            ..event.clone()
        };
        let e = container_event(&bare).unwrap();
        assert_eq!((e.sandbox_id.as_str(), e.pod.uid.as_str()), ("", ""));
        let unknown = cri::ContainerEventResponse {
            container_event_type: 9,
            ..event
        };
        assert!(container_event(&unknown).is_none());
    }
}
