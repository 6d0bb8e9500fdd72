//! Namespaces and security contexts (Go `security_context.go`,
//! `determineEffectiveSecurityContext`, `verifyRunAsNonRoot`): what the sandbox and its
//! containers share with the node, and whom a container runs as.

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};
use kubelet_core::runtime::RuntimeError;

/// CRI namespace options for a pod: network NODE with hostNetwork else POD; pid NODE with
/// hostPID, POD with shareProcessNamespace, else CONTAINER (always explicit); ipc NODE with
/// hostIPC else POD.
pub fn namespace_options(pod: &Pod) -> cri::NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let network = if flag(|s| s.host_network) {
        cri::NamespaceMode::Node
    } else {
        cri::NamespaceMode::Pod
    };
    let pid = if flag(|s| s.host_pid) {
        cri::NamespaceMode::Node
    } else if flag(|s| s.share_process_namespace) {
        cri::NamespaceMode::Pod
    } else {
        cri::NamespaceMode::Container
    };
    let ipc = if flag(|s| s.host_ipc) {
        cri::NamespaceMode::Node
    } else {
        cri::NamespaceMode::Pod
    };
    cri::NamespaceOption {
        network: network as i32,
        pid: pid as i32,
        ipc: ipc as i32,
        ..Default::default()
    }
}

pub(super) fn pod_security_context(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref().and_then(|s| s.security_context.as_ref())
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

pub(super) fn has_privileged_container(pod: &Pod) -> bool {
    all_containers(pod).any(|c| {
        c.security_context
            .as_ref()
            .and_then(|s| s.privileged)
            .unwrap_or(false)
    })
}

pub(super) fn seccomp_profile(
    pod_sc: Option<&PodSecurityContext>,
    sc: Option<&SecurityContext>,
) -> cri::SecurityProfile {
    let profile = sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or_else(|| pod_sc.and_then(|s| s.seccomp_profile.as_ref()));
    match profile {
        Some(p) if p.type_ == "RuntimeDefault" => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        },
        Some(p) if p.type_ == "Localhost" => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::Localhost as i32,
            localhost_ref: p.localhost_profile.clone().unwrap_or_default(),
        },
        // Go's default without the SeccompDefault feature: unconfined.
        _ => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::Unconfined as i32,
            localhost_ref: String::new(),
        },
    }
}

pub(super) fn supplemental_groups(pod_sc: Option<&PodSecurityContext>) -> Vec<i64> {
    let mut groups: Vec<i64> = pod_sc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default();
    if let Some(fs_group) = pod_sc.and_then(|s| s.fs_group) {
        if !groups.contains(&fs_group) {
            groups.push(fs_group);
        }
    }
    groups
}

/// The user an image runs as, from CRI ImageStatus (`uid` when numeric, else `username`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageUser {
    /// Numeric uid, when the image's user is numeric (or empty: 0).
    pub uid: Option<i64>,
    /// User name, when the image's user is a name.
    pub username: String,
}

/// The container's security context merged over the pod's (Go
/// `determineEffectiveSecurityContext`), with the runAsNonRoot check (`verifyRunAsNonRoot`).
pub fn container_security_context(
    pod: &Pod,
    container: &Container,
    image_user: &ImageUser,
) -> Result<cri::LinuxContainerSecurityContext, RuntimeError> {
    let pod_sc = pod_security_context(pod);
    let sc = container.security_context.as_ref();
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group));
    let run_as_non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);

    if run_as_non_root {
        verify_run_as_non_root(&container.name, run_as_user, image_user)?;
    }

    let mut out = cri::LinuxContainerSecurityContext {
        privileged,
        namespace_options: Some(namespace_options(pod)),
        run_as_group: run_as_group.map(|value| cri::Int64Value { value }),
        readonly_rootfs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups: supplemental_groups(pod_sc),
        no_new_privs: sc
            .and_then(|s| s.allow_privilege_escalation)
            .map(|allow| !allow)
            .unwrap_or(false),
        seccomp: Some(seccomp_profile(pod_sc, sc)),
        ..Default::default()
    };
    match (run_as_user, image_user.uid) {
        (Some(value), _) | (None, Some(value)) => {
            out.run_as_user = Some(cri::Int64Value { value });
        }
        (None, None) => out.run_as_username = image_user.username.clone(),
    }
    if let Some(caps) = sc.and_then(|s| s.capabilities.as_ref()) {
        out.capabilities = Some(cri::Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        });
    }
    Ok(out)
}

fn verify_run_as_non_root(
    container: &str,
    run_as_user: Option<i64>,
    image_user: &ImageUser,
) -> Result<(), RuntimeError> {
    let fail = |message: String| RuntimeError::InvalidInput {
        what: format!("container {container:?} securityContext.runAsNonRoot"),
        message,
    };
    if let Some(uid) = run_as_user {
        if uid == 0 {
            return Err(fail("container's runAsUser breaks non-root policy".into()));
        }
        return Ok(());
    }
    match image_user.uid {
        Some(0) => Err(fail("container has runAsNonRoot and image will run as root".into())),
        Some(_) => Ok(()),
        None if !image_user.username.is_empty() => Err(fail(format!(
            "container has runAsNonRoot and image has non-numeric user ({}), cannot verify user is non-root",
            image_user.username
        ))),
        None => Err(fail(
            "container has runAsNonRoot and the image's user is unknown".into(),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::super::fixtures::{container, pod_with};
    use super::*;
    use k8s_openapi::api::core::v1::{Capabilities, PodSpec};

    #[test]
    fn namespace_options_table() {
        use cri::NamespaceMode::*;
        let cases = [
            // host_network, host_pid, host_ipc, share_pid -> (net, pid, ipc)
            ((false, false, false, false), (Pod, Container, Pod)),
            ((true, false, false, false), (Node, Container, Pod)),
            ((false, true, false, false), (Pod, Node, Pod)),
            ((false, false, true, false), (Pod, Container, Node)),
            ((false, false, false, true), (Pod, Pod, Pod)),
            ((true, true, true, false), (Node, Node, Node)),
        ];
        for ((hn, hp, hi, sp), (net, pid, ipc)) in cases {
            let pod = pod_with(
                vec![],
                PodSpec {
                    host_network: Some(hn),
                    host_pid: Some(hp),
                    host_ipc: Some(hi),
                    share_process_namespace: Some(sp),
                    ..Default::default()
                },
            );
            let o = namespace_options(&pod);
            assert_eq!(
                (o.network, o.pid, o.ipc),
                (net as i32, pid as i32, ipc as i32),
                "{hn} {hp} {hi} {sp}"
            );
        }
        // Nothing set: pid is CONTAINER, explicitly (not the zero value POD).
        let o = namespace_options(&k8s_openapi::api::core::v1::Pod::default());
        assert_eq!(o.pid, Container as i32);
    }

    /// (pod runAsNonRoot, pod runAsUser, container runAsUser, image user, accepted, uid sent)
    type NonRootCase<'a> = (
        Option<bool>,
        Option<i64>,
        Option<i64>,
        &'a ImageUser,
        bool,
        Option<i64>,
    );

    #[test]
    fn security_context_merge_and_non_root_table() {
        let root = ImageUser {
            uid: Some(0),
            username: String::new(),
        };
        let named = ImageUser {
            uid: None,
            username: "app".into(),
        };
        let uid_1000 = ImageUser {
            uid: Some(1000),
            username: String::new(),
        };
        // (pod runAsNonRoot, pod runAsUser, container runAsUser, image user, ok, effective uid)
        let cases: Vec<NonRootCase> = vec![
            (None, None, None, &root, true, Some(0)),
            (Some(true), None, None, &root, false, None),
            (Some(true), None, None, &named, false, None),
            (Some(true), None, None, &uid_1000, true, Some(1000)),
            (Some(true), Some(1000), None, &root, true, Some(1000)),
            (Some(true), Some(1000), Some(0), &root, false, None),
            (None, Some(5), Some(6), &root, true, Some(6)),
            (None, None, None, &named, true, None),
        ];
        for (i, (non_root, pod_uid, c_uid, image, ok, uid)) in cases.into_iter().enumerate() {
            let mut c = container("app", &[], &[]);
            c.security_context = Some(SecurityContext {
                run_as_user: c_uid,
                allow_privilege_escalation: Some(false),
                capabilities: Some(Capabilities {
                    add: Some(vec!["NET_ADMIN".into()]),
                    drop: Some(vec!["ALL".into()]),
                }),
                read_only_root_filesystem: Some(true),
                ..Default::default()
            });
            let pod = pod_with(
                vec![c.clone()],
                PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: non_root,
                        run_as_user: pod_uid,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            );
            let got = container_security_context(&pod, &c, image);
            assert_eq!(got.is_ok(), ok, "case {i}: {got:?}");
            if let Ok(sc) = got {
                assert_eq!(sc.run_as_user.map(|v| v.value), uid, "case {i}");
                if uid.is_none() {
                    assert_eq!(sc.run_as_username, image.username, "case {i}");
                }
                assert!(sc.no_new_privs);
                assert!(sc.readonly_rootfs);
                let caps = sc.capabilities.unwrap();
                assert_eq!(caps.add_capabilities, vec!["NET_ADMIN"]);
                assert_eq!(caps.drop_capabilities, vec!["ALL"]);
                assert_eq!(
                    sc.namespace_options.unwrap().pid,
                    cri::NamespaceMode::Container as i32
                );
            }
        }
        // allowPrivilegeEscalation unset: no_new_privs false (Go's AddNoNewPrivileges).
        let c = container("app", &[], &[]);
        let pod = pod_with(vec![c.clone()], PodSpec::default());
        let sc = container_security_context(&pod, &c, &root).unwrap();
        assert!(!sc.no_new_privs);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            cri::security_profile::ProfileType::Unconfined as i32
        );
    }
}
