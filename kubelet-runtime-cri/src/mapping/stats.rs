//! CRI stats back to kubelet-core's types: container stats (`ContainerStats`) and the image
//! filesystem (`ImageFsInfoResponse`). CRI's unset `UInt64Value`s stay `None`.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerStats, CpuUsage, FilesystemUsage, ImageFsInfo, MemoryUsage};

use super::labels::pod_ref_from_labels;
use super::CONTAINER_NAME_LABEL;

fn value(v: Option<&cri::UInt64Value>) -> Option<u64> {
    v.map(|v| v.value)
}

fn filesystem(f: &cri::FilesystemUsage) -> FilesystemUsage {
    FilesystemUsage {
        timestamp: f.timestamp,
        mountpoint: f
            .fs_id
            .as_ref()
            .map(|id| id.mountpoint.clone())
            .unwrap_or_default(),
        used_bytes: value(f.used_bytes.as_ref()),
        inodes_used: value(f.inodes_used.as_ref()),
    }
}

/// One container's stats. The pod comes from the kubelet's labels (empty for a container
/// that is not the kubelet's), the name from the labels or else the metadata.
pub fn container_stats(s: &cri::ContainerStats) -> ContainerStats {
    let attributes = s.attributes.as_ref();
    let labels = attributes.map(|a| &a.labels);
    let metadata = attributes.and_then(|a| a.metadata.as_ref());
    ContainerStats {
        container_id: attributes.map(|a| a.id.clone()).unwrap_or_default(),
        pod: labels.and_then(pod_ref_from_labels).unwrap_or_default(),
        name: labels
            .and_then(|l| l.get(CONTAINER_NAME_LABEL).cloned())
            .or_else(|| metadata.map(|m| m.name.clone()))
            .unwrap_or_default(),
        attempt: metadata.map(|m| m.attempt).unwrap_or(0),
        cpu: s.cpu.as_ref().map(|c| CpuUsage {
            timestamp: c.timestamp,
            usage_core_nano_seconds: value(c.usage_core_nano_seconds.as_ref()),
            usage_nano_cores: value(c.usage_nano_cores.as_ref()),
        }),
        memory: s.memory.as_ref().map(|m| MemoryUsage {
            timestamp: m.timestamp,
            working_set_bytes: value(m.working_set_bytes.as_ref()),
            available_bytes: value(m.available_bytes.as_ref()),
            usage_bytes: value(m.usage_bytes.as_ref()),
            rss_bytes: value(m.rss_bytes.as_ref()),
            page_faults: value(m.page_faults.as_ref()),
            major_page_faults: value(m.major_page_faults.as_ref()),
        }),
        writable_layer: s.writable_layer.as_ref().map(filesystem),
    }
}

/// The image (and container) filesystems.
pub fn image_fs_info(r: &cri::ImageFsInfoResponse) -> ImageFsInfo {
    ImageFsInfo {
        image_filesystems: r.image_filesystems.iter().map(filesystem).collect(),
        container_filesystems: r.container_filesystems.iter().map(filesystem).collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::collections::HashMap;

    use super::super::fixtures::pod_with;
    use super::super::labels::container_labels;
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn u(value: u64) -> Option<cri::UInt64Value> {
        Some(cri::UInt64Value { value })
    }

    fn fs(mountpoint: &str, used: Option<u64>, inodes: Option<u64>) -> cri::FilesystemUsage {
        cri::FilesystemUsage {
            timestamp: 5,
            fs_id: Some(cri::FilesystemIdentifier {
                mountpoint: mountpoint.into(),
            }),
            used_bytes: used.and_then(u),
            inodes_used: inodes.and_then(u),
        }
    }

    #[test]
    fn container_stats_table() {
        let kubelet_labels = container_labels(&pod_with(vec![], PodSpec::default()), "app");
        let full = cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                id: "cid".into(),
                metadata: Some(cri::ContainerMetadata {
                    name: "meta-name".into(),
                    attempt: 2,
                }),
                labels: kubelet_labels,
                annotations: HashMap::new(),
            }),
            cpu: Some(cri::CpuUsage {
                timestamp: 7,
                usage_core_nano_seconds: u(1_000),
                usage_nano_cores: None,
            }),
            memory: Some(cri::MemoryUsage {
                timestamp: 8,
                working_set_bytes: u(4096),
                usage_bytes: u(8192),
                ..Default::default()
            }),
            writable_layer: Some(fs("/var/lib/containerd/snap", Some(12), Some(3))),
            swap: None,
        };
        let s = container_stats(&full);
        assert_eq!(s.container_id, "cid");
        assert_eq!((s.name.as_str(), s.attempt), ("app", 2));
        assert_eq!(s.pod.uid, "uid-1");
        let cpu = s.cpu.unwrap();
        assert_eq!(
            (cpu.timestamp, cpu.usage_core_nano_seconds),
            (7, Some(1_000))
        );
        assert_eq!(cpu.usage_nano_cores, None);
        let mem = s.memory.unwrap();
        assert_eq!(mem.working_set_bytes, Some(4096));
        assert_eq!(mem.usage_bytes, Some(8192));
        assert_eq!(mem.rss_bytes, None);
        let layer = s.writable_layer.unwrap();
        assert_eq!(layer.mountpoint, "/var/lib/containerd/snap");
        assert_eq!((layer.used_bytes, layer.inodes_used), (Some(12), Some(3)));

        // Nothing measured, no kubelet labels: the name from the metadata, no pod.
        let bare = cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                id: "other".into(),
                metadata: Some(cri::ContainerMetadata {
                    name: "meta-name".into(),
                    attempt: 0,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = container_stats(&bare);
        assert_eq!(s.name, "meta-name");
        assert_eq!(s.pod, kubelet_core::runtime::PodRef::default());
        assert!(s.cpu.is_none() && s.memory.is_none() && s.writable_layer.is_none());
        assert_eq!(
            container_stats(&cri::ContainerStats::default()).container_id,
            ""
        );
    }

    #[test]
    fn image_fs_info_keeps_both_lists() {
        let r = cri::ImageFsInfoResponse {
            image_filesystems: vec![fs("/images", Some(100), None)],
            container_filesystems: vec![fs("/layers", None, Some(9))],
        };
        let info = image_fs_info(&r);
        assert_eq!(info.image_filesystems.len(), 1);
        assert_eq!(info.image_filesystems[0].mountpoint, "/images");
        assert_eq!(info.image_filesystems[0].used_bytes, Some(100));
        assert_eq!(info.image_filesystems[0].inodes_used, None);
        assert_eq!(info.container_filesystems[0].inodes_used, Some(9));
        assert_eq!(info.image_filesystems[0].timestamp, 5);
    }
}
