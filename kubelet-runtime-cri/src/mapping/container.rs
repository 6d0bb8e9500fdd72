//! The container config (Go `generateContainerConfig`, `generateLinuxContainerConfig`) and
//! the legacy log symlink name.

use k8s_cri::v1 as cri;
use kubelet_core::runtime::{ContainerConfig, MountPropagation, RuntimeError};

use super::labels::{container_annotations, container_labels};
use super::security::{container_security_context, ImageUser};
use super::{container_resources, Options};

fn propagation(p: MountPropagation) -> i32 {
    match p {
        MountPropagation::Private => cri::MountPropagation::PropagationPrivate as i32,
        MountPropagation::HostToContainer => {
            cri::MountPropagation::PropagationHostToContainer as i32
        }
        MountPropagation::Bidirectional => cri::MountPropagation::PropagationBidirectional as i32,
    }
}

/// The CRI container config (Go `generateContainerConfig` + `generateLinuxContainerConfig`).
pub fn container_config(
    config: &ContainerConfig,
    image_user: &ImageUser,
    opts: &Options,
) -> Result<cri::ContainerConfig, RuntimeError> {
    let c = &config.container;
    let mut resources = container_resources(&config.pod, c, opts)?;
    if let Some(cpus) = &config.cpuset_cpus {
        resources.cpuset_cpus.clone_from(cpus);
    }
    if let Some(mems) = &config.cpuset_mems {
        resources.cpuset_mems.clone_from(mems);
    }
    let mut security_context =
        container_security_context(&config.pod, c, &config.kind, image_user, opts)?;
    // The volumes' groups after the pod's (Go appends them in
    // `determineEffectiveSecurityContext`).
    security_context
        .supplemental_groups
        .extend(config.extra_supplemental_groups.iter().copied());
    Ok(cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: c.name.clone(),
            attempt: config.restart_count,
        }),
        image: Some(cri::ImageSpec {
            image: config.image_ref.clone(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command: config.command.clone(),
        args: config.args.clone(),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: config
            .env
            .iter()
            .map(|e| cri::KeyValue {
                key: e.name.clone(),
                value: e.value.clone(),
            })
            .collect(),
        mounts: config
            .mounts
            .iter()
            .map(|m| cri::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.to_string_lossy().into_owned(),
                readonly: m.read_only,
                propagation: propagation(m.propagation),
                ..Default::default()
            })
            .collect(),
        devices: config
            .devices
            .nodes
            .iter()
            .map(|d| cri::Device {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        cdi_devices: config
            .devices
            .cdi_devices
            .iter()
            .map(|name| cri::CdiDevice { name: name.clone() })
            .collect(),
        labels: container_labels(&config.pod, &c.name),
        annotations: container_annotations(config),
        log_path: config.log_path.to_string_lossy().into_owned(),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(resources),
            security_context: Some(security_context),
        }),
        ..Default::default()
    })
}

/// The legacy `/var/log/containers` symlink name for a container (Go `logSymlink`):
/// `<pod>_<namespace>_<container>-<id>.log`, cut to 255 bytes.
pub fn log_symlink_name(pod: &str, namespace: &str, container: &str, id: &str) -> String {
    const SUFFIX: &str = ".log";
    const MAX: usize = 255;
    let mut base = format!("{pod}_{namespace}_{container}-{id}");
    if base.len() > MAX - SUFFIX.len() {
        let mut cut = MAX - SUFFIX.len();
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    base.push_str(SUFFIX);
    base
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::collections::HashMap;

    use super::super::fixtures::{container, container_cfg, pod_with, GI};
    use super::super::status::container_summary;
    use super::super::*;
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, PodSpec};
    use kubelet_core::runtime::{ContainerState, PodRef};

    #[test]
    fn device_plugin_settings_reach_the_cri_config() {
        let c = container("app", &[], &[]);
        let pod = pod_with(vec![c.clone()], PodSpec::default());
        let mut cfg = container_cfg(pod, c);
        cfg.devices = kubelet_core::runtime::DeviceSettings {
            nodes: vec![kubelet_core::devices::DeviceNode {
                container_path: "/dev/x".into(),
                host_path: "/dev/null".into(),
                permissions: "rw".into(),
            }],
            annotations: vec![
                ("vendor.com/a".into(), "1".into()),
                (CONTAINER_RESTART_COUNT_ANNOTATION.into(), "99".into()),
            ],
            cdi_devices: vec!["vendor.com/gpu=0".into()],
        };
        let out = container_config(&cfg, &ImageUser::default(), &Options::default()).unwrap();
        assert_eq!(out.devices.len(), 1);
        assert_eq!(out.devices[0].container_path, "/dev/x");
        assert_eq!(out.devices[0].host_path, "/dev/null");
        assert_eq!(out.devices[0].permissions, "rw");
        assert_eq!(out.cdi_devices[0].name, "vendor.com/gpu=0");
        assert_eq!(out.annotations["vendor.com/a"], "1");
        // The kubelet's own annotation wins over a plugin's of the same key.
        assert_eq!(out.annotations[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
    }

    #[test]
    fn volume_groups_follow_the_pods_groups() {
        let c = container("app", &[], &[]);
        let spec = PodSpec {
            security_context: Some(k8s_openapi::api::core::v1::PodSecurityContext {
                supplemental_groups: Some(vec![5]),
                fs_group: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut cfg = container_cfg(pod_with(vec![c.clone()], spec), c);
        cfg.extra_supplemental_groups = vec![1234];
        let out = container_config(&cfg, &ImageUser::default(), &Options::default()).unwrap();
        let sc = out.linux.unwrap().security_context.unwrap();
        assert_eq!(sc.supplemental_groups, vec![5, 7, 1234]);
    }

    #[test]
    fn container_config_labels_annotations_round_trip() {
        let mut c = container("app", &[], &[]);
        c.ports = Some(vec![ContainerPort {
            container_port: 80,
            name: Some("http".into()),
            ..Default::default()
        }]);
        c.working_dir = Some("/work".into());
        c.tty = Some(true);
        let pod = pod_with(
            vec![c.clone()],
            PodSpec {
                termination_grace_period_seconds: Some(7),
                ..Default::default()
            },
        );
        let cfg = container_cfg(pod, c);
        let out = container_config(
            &cfg,
            &ImageUser::default(),
            &Options {
                memory_capacity: 4 * GI,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(out.metadata.as_ref().unwrap().attempt, 3);
        assert_eq!(out.image.as_ref().unwrap().image, "sha256:abc");
        assert_eq!(out.command, vec!["sh"]);
        assert_eq!(out.args, vec!["-c", "echo hi"]);
        assert_eq!(out.envs[0].key, "A");
        assert_eq!(out.mounts[0].host_path, "/tmp/data");
        assert!(out.mounts[0].readonly);
        assert_eq!(
            out.mounts[0].propagation,
            cri::MountPropagation::PropagationHostToContainer as i32
        );
        assert_eq!(out.working_dir, "/work");
        assert_eq!(out.log_path, "app/3.log");
        assert!(out.tty);
        let a = &out.annotations;
        assert_eq!(a[CONTAINER_HASH_ANNOTATION], "deadbeef01234567");
        assert_eq!(a[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
        assert_eq!(
            a[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION],
            "/dev/termination-log"
        );
        assert_eq!(a[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION], "File");
        assert_eq!(a[POD_TERMINATION_GRACE_PERIOD_ANNOTATION], "7");
        let ports: Vec<ContainerPort> =
            serde_json::from_str(&a[CONTAINER_PORTS_ANNOTATION]).unwrap();
        assert_eq!(ports[0].container_port, 80);

        // Round trip through a listing.
        let listed = cri::Container {
            id: "cid".into(),
            pod_sandbox_id: "sid".into(),
            metadata: out.metadata.clone(),
            image: out.image.clone(),
            image_ref: "sha256:abc".into(),
            state: cri::ContainerState::ContainerRunning as i32,
            created_at: 42,
            labels: out.labels.clone(),
            annotations: out.annotations.clone(),
            image_id: String::new(),
        };
        let s = container_summary(&listed).unwrap();
        assert_eq!(s.hash, cfg.hash);
        assert_eq!(s.name, "app");
        assert_eq!(s.attempt, 3);
        assert_eq!(s.state, ContainerState::Running);
        assert_eq!(
            s.pod,
            PodRef {
                uid: "uid-1".into(),
                name: "web".into(),
                namespace: "prod".into()
            }
        );
        // Objects without kubelet labels are not ours.
        let foreign = cri::Container {
            labels: HashMap::new(),
            ..listed
        };
        assert!(container_summary(&foreign).is_none());
    }

    #[test]
    fn log_symlink_names() {
        assert_eq!(
            log_symlink_name("web", "prod", "app", "abc"),
            "web_prod_app-abc.log"
        );
        let long = "x".repeat(300);
        let name = log_symlink_name(&long, "ns", "c", "id");
        assert_eq!(name.len(), 255);
        assert!(name.ends_with(".log"));
    }
}
