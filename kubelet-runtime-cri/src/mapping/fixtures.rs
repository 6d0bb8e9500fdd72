//! Pods, containers and configs the mapping tests build on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_core::runtime::{
    ContainerConfig, ContainerKind, DnsConfig, EnvVar, Mount, MountPropagation, SandboxConfig,
};

pub(crate) const GI: i64 = 1 << 30;

pub(crate) fn res(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    })
}

pub(crate) fn container(name: &str, req: &[(&str, &str)], lim: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        image: Some("kubelet-rs.local/busybox:1.0".into()),
        resources: Some(ResourceRequirements {
            requests: res(req),
            limits: res(lim),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) fn pod_with(containers: Vec<Container>, spec: PodSpec) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("prod".into()),
            uid: Some("uid-1".into()),
            labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            annotations: Some(BTreeMap::from([("note".to_string(), "x".to_string())])),
            ..Default::default()
        },
        spec: Some(PodSpec { containers, ..spec }),
        ..Default::default()
    }
}

pub(crate) fn sandbox_cfg(pod: Pod) -> SandboxConfig {
    SandboxConfig {
        pod: Arc::new(pod),
        attempt: 2,
        hostname: "web".into(),
        log_directory: PathBuf::from("/var/log/pods/prod_web_uid-1"),
        cgroup_parent: Some("/kubelet-rs-test/poduid-1".into()),
        dns: Some(DnsConfig {
            servers: vec!["10.0.0.10".into()],
            searches: vec!["prod.svc".into()],
            options: vec!["ndots:5".into()],
        }),
        runtime_handler: String::new(),
    }
}

pub(crate) fn container_cfg(pod: Pod, c: Container) -> ContainerConfig {
    ContainerConfig {
        pod: Arc::new(pod),
        container: c,
        kind: ContainerKind::Regular,
        restart_count: 3,
        hash: 0xdead_beef_0123_4567,
        image_ref: "sha256:abc".into(),
        command: vec!["sh".into()],
        args: vec!["-c".into(), "echo hi".into()],
        env: vec![EnvVar {
            name: "A".into(),
            value: "1".into(),
        }],
        mounts: vec![Mount {
            container_path: "/data".into(),
            host_path: "/tmp/data".into(),
            read_only: true,
            propagation: MountPropagation::HostToContainer,
        }],
        log_path: PathBuf::from("app/3.log"),
        cpuset_cpus: None,
        cpuset_mems: None,
        devices: Default::default(),
        extra_supplemental_groups: Vec::new(),
    }
}
