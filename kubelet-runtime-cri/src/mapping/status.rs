//! CRI listings and statuses back to kubelet-core's types; objects without the kubelet's
//! labels are not the kubelet's and map to `None`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{
    ContainerState, ContainerStatus, ContainerSummary, SandboxState, SandboxStatus, SandboxSummary,
};

use super::labels::{hash_from_annotations, pod_ref_from_labels};
use super::CONTAINER_NAME_LABEL;

/// Maps a CRI sandbox state.
pub fn sandbox_state(state: i32) -> SandboxState {
    if state == cri::PodSandboxState::SandboxReady as i32 {
        SandboxState::Ready
    } else {
        SandboxState::NotReady
    }
}

/// Maps a CRI container state.
pub fn container_state(state: i32) -> ContainerState {
    match cri::ContainerState::try_from(state) {
        Ok(cri::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(cri::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(cri::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

/// A listed sandbox; `None` when it carries no kubelet labels.
pub fn sandbox_summary(s: &cri::PodSandbox) -> Option<SandboxSummary> {
    let pod = pod_ref_from_labels(&s.labels)?;
    Some(SandboxSummary {
        id: s.id.clone(),
        pod,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        state: sandbox_state(s.state),
        created_at: s.created_at,
    })
}

/// A sandbox status; `None` when it carries no kubelet labels.
pub fn sandbox_status(s: &cri::PodSandboxStatus) -> Option<SandboxStatus> {
    let mut pod = pod_ref_from_labels(&s.labels)?;
    if let Some(m) = s.metadata.as_ref() {
        if pod.name.is_empty() {
            pod.name = m.name.clone();
        }
        if pod.namespace.is_empty() {
            pod.namespace = m.namespace.clone();
        }
    }
    let network = s.network.as_ref();
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .map(|o| o.network == cri::NamespaceMode::Node as i32)
        .unwrap_or(false);
    Some(SandboxStatus {
        id: s.id.clone(),
        pod,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        state: sandbox_state(s.state),
        created_at: s.created_at,
        ip: network.map(|n| n.ip.clone()).filter(|ip| !ip.is_empty()),
        additional_ips: network
            .map(|n| {
                n.additional_ips
                    .iter()
                    .map(|ip| ip.ip.clone())
                    .filter(|ip| !ip.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        host_network,
    })
}

/// A listed container; `None` when it carries no kubelet labels.
pub fn container_summary(c: &cri::Container) -> Option<ContainerSummary> {
    let pod = pod_ref_from_labels(&c.labels)?;
    let name = c
        .labels
        .get(CONTAINER_NAME_LABEL)
        .cloned()
        .or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))?;
    Some(ContainerSummary {
        id: c.id.clone(),
        sandbox_id: c.pod_sandbox_id.clone(),
        pod,
        name,
        attempt: c.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        hash: hash_from_annotations(&c.annotations),
        image: c
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: c.image_ref.clone(),
        state: container_state(c.state),
        created_at: c.created_at,
    })
}

/// A container status; `None` when it carries no kubelet labels. `sandbox_id` comes from the
/// caller (CRI's status does not carry it).
pub fn container_status(s: &cri::ContainerStatus, sandbox_id: &str) -> Option<ContainerStatus> {
    let pod = pod_ref_from_labels(&s.labels)?;
    let name = s
        .labels
        .get(CONTAINER_NAME_LABEL)
        .cloned()
        .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))?;
    Some(ContainerStatus {
        summary: ContainerSummary {
            id: s.id.clone(),
            sandbox_id: sandbox_id.to_string(),
            pod,
            name,
            attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
            hash: hash_from_annotations(&s.annotations),
            image: s
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            image_ref: s.image_ref.clone(),
            state: container_state(s.state),
            created_at: s.created_at,
        },
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        log_path: (!s.log_path.is_empty()).then(|| s.log_path.clone().into()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;

    use super::super::fixtures::pod_with;
    use super::super::labels::{container_labels, sandbox_labels};
    use super::super::CONTAINER_HASH_ANNOTATION;
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn status_mapping_table() {
        let states = [
            (0, ContainerState::Created),
            (1, ContainerState::Running),
            (2, ContainerState::Exited),
            (3, ContainerState::Unknown),
            (99, ContainerState::Unknown),
        ];
        for (raw, want) in states {
            assert_eq!(container_state(raw), want);
        }
        assert_eq!(sandbox_state(0), SandboxState::Ready);
        assert_eq!(sandbox_state(1), SandboxState::NotReady);

        let labels = container_labels(&pod_with(vec![], PodSpec::default()), "app");
        let status = cri::ContainerStatus {
            id: "cid".into(),
            metadata: Some(cri::ContainerMetadata {
                name: "app".into(),
                attempt: 1,
            }),
            state: 2,
            created_at: 1,
            started_at: 2,
            finished_at: 3,
            exit_code: 3,
            reason: "Error".into(),
            message: "boom".into(),
            labels,
            annotations: HashMap::from([(CONTAINER_HASH_ANNOTATION.into(), "ff".into())]),
            log_path: "/var/log/pods/x/app/1.log".into(),
            ..Default::default()
        };
        let s = container_status(&status, "sid").unwrap();
        assert_eq!(s.summary.state, ContainerState::Exited);
        assert_eq!(s.summary.hash, 255);
        assert_eq!(s.summary.sandbox_id, "sid");
        assert_eq!((s.started_at, s.finished_at, s.exit_code), (2, 3, 3));
        assert_eq!(s.reason, "Error");
        assert_eq!(s.log_path, Some(PathBuf::from("/var/log/pods/x/app/1.log")));

        let sandbox = cri::PodSandboxStatus {
            id: "sid".into(),
            metadata: Some(cri::PodSandboxMetadata {
                name: "web".into(),
                uid: "uid-1".into(),
                namespace: "prod".into(),
                attempt: 1,
            }),
            state: 0,
            created_at: 9,
            network: Some(cri::PodSandboxNetworkStatus {
                ip: "10.88.0.5".into(),
                additional_ips: vec![cri::PodIp {
                    ip: "fd00::5".into(),
                }],
            }),
            linux: Some(cri::LinuxPodSandboxStatus {
                namespaces: Some(cri::Namespace {
                    options: Some(cri::NamespaceOption {
                        network: cri::NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                }),
            }),
            labels: sandbox_labels(&pod_with(vec![], PodSpec::default())),
            ..Default::default()
        };
        let s = sandbox_status(&sandbox).unwrap();
        assert_eq!(s.ip.as_deref(), Some("10.88.0.5"));
        assert_eq!(s.additional_ips, vec!["fd00::5"]);
        assert!(s.host_network);
        assert_eq!(s.attempt, 1);
        assert_eq!(s.state, SandboxState::Ready);
    }
}
