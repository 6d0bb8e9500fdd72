//! The sandbox config of a pod (Go `generatePodSandboxConfig`,
//! `generatePodSandboxLinuxConfig`): metadata, hostname, DNS, host ports, labels and
//! annotations, cgroup parent, sysctls and the sandbox security context.

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::runtime::{PodRef, SandboxConfig};

use super::labels::sandbox_labels;
use super::security::{
    has_privileged_container, namespace_options, pod_security_context, seccomp_profile,
    supplemental_groups,
};
use super::Options;

fn protocol(p: Option<&str>) -> i32 {
    match p {
        Some("UDP") => cri::Protocol::Udp as i32,
        Some("SCTP") => cri::Protocol::Sctp as i32,
        _ => cri::Protocol::Tcp as i32,
    }
}

/// Port mappings of every container port that asks for a host port.
pub fn port_mappings(pod: &Pod) -> Vec<cri::PortMapping> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| cri::PortMapping {
            protocol: protocol(p.protocol.as_deref()),
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}

/// The CRI sandbox config for a pod (Go `generatePodSandboxConfig` +
/// `generatePodSandboxLinuxConfig`). An invalid pod seccomp profile gives the sandbox
/// `Unconfined`: the containers' own configs, built from the same profile, fail with the
/// error.
pub fn sandbox_config(config: &SandboxConfig, opts: &Options) -> cri::PodSandboxConfig {
    let pod = &config.pod;
    let r = PodRef::of(pod);
    let pod_sc = pod_security_context(pod);
    let sysctls = pod_sc
        .and_then(|s| s.sysctls.as_ref())
        .map(|v| {
            v.iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect()
        })
        .unwrap_or_default();
    let security_context = cri::LinuxSandboxSecurityContext {
        namespace_options: Some(namespace_options(pod)),
        run_as_user: pod_sc
            .and_then(|s| s.run_as_user)
            .map(|value| cri::Int64Value { value }),
        run_as_group: pod_sc
            .and_then(|s| s.run_as_group)
            .map(|value| cri::Int64Value { value }),
        supplemental_groups: supplemental_groups(pod_sc),
        privileged: has_privileged_container(pod),
        seccomp: Some(
            seccomp_profile(pod_sc, None, opts).unwrap_or(cri::SecurityProfile {
                profile_type: cri::security_profile::ProfileType::Unconfined as i32,
                localhost_ref: String::new(),
            }),
        ),
        ..Default::default()
    };
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: r.name,
            uid: r.uid,
            namespace: r.namespace,
            attempt: config.attempt,
        }),
        // As Go: a hostNetwork pod keeps the node's UTS namespace and hostname.
        hostname: if kubelet_core::pod::host_network(pod) {
            String::new()
        } else {
            config.hostname.clone()
        },
        log_directory: config.log_directory.to_string_lossy().into_owned(),
        dns_config: config.dns.as_ref().map(|d| cri::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: port_mappings(pod),
        labels: sandbox_labels(pod),
        annotations: pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: config.cgroup_parent.clone().unwrap_or_default(),
            security_context: Some(security_context),
            sysctls,
            ..Default::default()
        }),
        windows: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::fixtures::{container, pod_with, sandbox_cfg};
    use super::super::POD_UID_LABEL;
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerPort, PodSecurityContext, PodSpec, SecurityContext, Sysctl,
    };

    #[test]
    fn sandbox_config_maps_pod() {
        let mut c = container("app", &[], &[]);
        c.ports = Some(vec![
            ContainerPort {
                container_port: 80,
                host_port: Some(8080),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 53,
                host_port: Some(5353),
                protocol: Some("UDP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 9090,
                ..Default::default()
            },
        ]);
        let mut priv_c = container("priv", &[], &[]);
        priv_c.security_context = Some(SecurityContext {
            privileged: Some(true),
            ..Default::default()
        });
        let pod = pod_with(
            vec![c, priv_c],
            PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(1000),
                    run_as_group: Some(2000),
                    fs_group: Some(3000),
                    sysctls: Some(vec![Sysctl {
                        name: "net.ipv4.ip_unprivileged_port_start".into(),
                        value: "0".into(),
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let cfg = sandbox_config(&sandbox_cfg(pod), &Options::default());
        let md = cfg.metadata.unwrap();
        assert_eq!(
            (
                md.name.as_str(),
                md.namespace.as_str(),
                md.uid.as_str(),
                md.attempt
            ),
            ("web", "prod", "uid-1", 2)
        );
        assert_eq!(cfg.hostname, "web");
        assert_eq!(cfg.log_directory, "/var/log/pods/prod_web_uid-1");
        assert_eq!(cfg.dns_config.unwrap().servers, vec!["10.0.0.10"]);
        assert_eq!(cfg.port_mappings.len(), 2);
        assert_eq!(cfg.port_mappings[1].protocol, cri::Protocol::Udp as i32);
        assert_eq!(cfg.port_mappings[0].host_port, 8080);
        assert_eq!(cfg.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(
            cfg.labels.get(POD_UID_LABEL).map(String::as_str),
            Some("uid-1")
        );
        assert_eq!(cfg.annotations.get("note").map(String::as_str), Some("x"));
        let linux = cfg.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/kubelet-rs-test/poduid-1");
        assert_eq!(
            linux
                .sysctls
                .get("net.ipv4.ip_unprivileged_port_start")
                .map(String::as_str),
            Some("0")
        );
        let sc = linux.security_context.unwrap();
        assert!(sc.privileged);
        assert_eq!(sc.run_as_user.unwrap().value, 1000);
        assert_eq!(sc.run_as_group.unwrap().value, 2000);
        assert_eq!(sc.supplemental_groups, vec![3000]);
        assert_eq!(
            sc.namespace_options.unwrap().pid,
            cri::NamespaceMode::Container as i32
        );

        // hostNetwork: no hostname (the node's UTS namespace), network NODE.
        let host = pod_with(
            vec![],
            PodSpec {
                host_network: Some(true),
                ..Default::default()
            },
        );
        let cfg = sandbox_config(&sandbox_cfg(host), &Options::default());
        assert_eq!(cfg.hostname, "");
        let opts = cfg
            .linux
            .unwrap()
            .security_context
            .unwrap()
            .namespace_options
            .unwrap();
        assert_eq!(opts.network, cri::NamespaceMode::Node as i32);
    }
}
