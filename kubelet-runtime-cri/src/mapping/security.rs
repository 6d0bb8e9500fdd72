//! Namespaces and security contexts (Go `security_context.go`,
//! `determineEffectiveSecurityContext`, `verifyRunAsNonRoot`, `getSeccompProfile`,
//! `getAppArmorProfile`): what the sandbox and its containers share with the node, whom a
//! container runs as, and its seccomp and AppArmor profiles.
//!
//! - **seccomp**: the container's `seccompProfile`, else the pod's; `Localhost` profiles are
//!   files under `<root-dir>/seccomp` (`localhostProfile` is relative to it and may not leave
//!   it); without a profile: `RuntimeDefault` with `seccompDefault`, else `Unconfined`.
//! - **AppArmor**: the profile of [`kubelet_core::admission::apparmor::profile`] (field,
//!   deprecated annotation, pod field), sent both as the CRI `apparmor` profile and the
//!   deprecated `apparmor_profile` string; admission already refused it where the host has
//!   no AppArmor.
//! - An **ephemeral container** with a target joins the target's process namespace
//!   (namespace mode `TARGET`) unless the pod shares one process namespace anyway.

use std::path::{Component, Path};

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{
    Container, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};
use kubelet_core::runtime::{ContainerKind, RuntimeError};

use super::Options;

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

fn profile(
    type_: cri::security_profile::ProfileType,
    localhost_ref: String,
) -> cri::SecurityProfile {
    cri::SecurityProfile {
        profile_type: type_ as i32,
        localhost_ref,
    }
}

/// The file of a `Localhost` seccomp profile under `root` (Go's `filepath.Join`); a name that
/// climbs out of `root` is refused.
fn localhost_seccomp(root: &Path, name: &str, what: &str) -> Result<String, RuntimeError> {
    let rel = Path::new(name.trim_start_matches('/'));
    if name.is_empty()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(RuntimeError::InvalidInput {
            what: format!("{what}.seccompProfile.localhostProfile"),
            message: if name.is_empty() {
                "localhostProfile must be set if seccompProfile type is Localhost.".into()
            } else {
                format!(
                    "{name:?} must be a path below the seccomp profile root {}",
                    root.display()
                )
            },
        });
    }
    Ok(root.join(rel).to_string_lossy().into_owned())
}

fn field_seccomp(
    p: &SeccompProfile,
    opts: &Options,
    what: &str,
) -> Result<cri::SecurityProfile, RuntimeError> {
    use cri::security_profile::ProfileType;
    match p.type_.as_str() {
        "RuntimeDefault" => Ok(profile(ProfileType::RuntimeDefault, String::new())),
        "Localhost" => {
            let name = p.localhost_profile.as_deref().unwrap_or("");
            let file = localhost_seccomp(&opts.seccomp_profile_root, name, what)?;
            Ok(profile(ProfileType::Localhost, file))
        }
        _ => Ok(profile(ProfileType::Unconfined, String::new())),
    }
}

/// The seccomp profile of a container (`sc` set) or of the sandbox (`sc` None), as Go's
/// `getSeccompProfile`. See the module docs.
pub fn seccomp_profile(
    pod_sc: Option<&PodSecurityContext>,
    sc: Option<&SecurityContext>,
    opts: &Options,
) -> Result<cri::SecurityProfile, RuntimeError> {
    use cri::security_profile::ProfileType;
    if let Some(p) = sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_seccomp(p, opts, "securityContext");
    }
    if let Some(p) = pod_sc.and_then(|s| s.seccomp_profile.as_ref()) {
        return field_seccomp(p, opts, "spec.securityContext");
    }
    Ok(if opts.seccomp_default {
        profile(ProfileType::RuntimeDefault, String::new())
    } else {
        profile(ProfileType::Unconfined, String::new())
    })
}

/// The AppArmor profile of a container as CRI wants it (Go's `getAppArmorProfile`): the
/// profile and the deprecated string form (`runtime/default`, `localhost/<name>`,
/// `unconfined`); `None` when the container asks for none.
pub fn apparmor_profile(
    pod: &Pod,
    c: &Container,
) -> Result<Option<(cri::SecurityProfile, String)>, RuntimeError> {
    use cri::security_profile::ProfileType;
    let Some(p) = kubelet_core::admission::apparmor::profile(pod, c) else {
        return Ok(None);
    };
    let invalid = |message: String| RuntimeError::InvalidInput {
        what: format!("container {:?} appArmorProfile", c.name),
        message,
    };
    Ok(Some(match p.type_.as_str() {
        "RuntimeDefault" => (
            profile(ProfileType::RuntimeDefault, String::new()),
            "runtime/default".to_string(),
        ),
        "Unconfined" => (
            profile(ProfileType::Unconfined, String::new()),
            "unconfined".to_string(),
        ),
        "Localhost" => {
            let name = p
                .localhost_profile
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| invalid("missing localhost apparmor profile name".into()))?;
            (
                profile(ProfileType::Localhost, name.clone()),
                format!("localhost/{name}"),
            )
        }
        other => return Err(invalid(format!("unknown apparmor profile type: {other:?}"))),
    }))
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
/// `determineEffectiveSecurityContext`), with the runAsNonRoot check (`verifyRunAsNonRoot`),
/// its seccomp and AppArmor profiles and, for an ephemeral container with a target, the
/// target's process namespace.
pub fn container_security_context(
    pod: &Pod,
    container: &Container,
    kind: &ContainerKind,
    image_user: &ImageUser,
    opts: &Options,
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

    let mut namespaces = namespace_options(pod);
    if let ContainerKind::Ephemeral {
        target_id: Some(target),
    } = kind
    {
        if namespaces.pid == cri::NamespaceMode::Container as i32 {
            namespaces.pid = cri::NamespaceMode::Target as i32;
            namespaces.target_id = target.clone();
        }
    }
    let apparmor = apparmor_profile(pod, container)?;
    let mut out = cri::LinuxContainerSecurityContext {
        privileged,
        namespace_options: Some(namespaces),
        run_as_group: run_as_group.map(|value| cri::Int64Value { value }),
        readonly_rootfs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups: supplemental_groups(pod_sc),
        no_new_privs: sc
            .and_then(|s| s.allow_privilege_escalation)
            .map(|allow| !allow)
            .unwrap_or(false),
        seccomp: Some(seccomp_profile(pod_sc, sc, opts)?),
        ..Default::default()
    };
    if let Some((profile, deprecated)) = apparmor {
        out.apparmor = Some(profile);
        #[allow(deprecated)]
        {
            out.apparmor_profile = deprecated;
        }
    }
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
            let got = container_security_context(
                &pod,
                &c,
                &ContainerKind::Regular,
                image,
                &Options::default(),
            );
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
        let sc = container_security_context(
            &pod,
            &c,
            &ContainerKind::Regular,
            &root,
            &Options::default(),
        )
        .unwrap();
        assert!(!sc.no_new_privs);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            cri::security_profile::ProfileType::Unconfined as i32
        );
    }

    #[test]
    fn seccomp_table() {
        use cri::security_profile::ProfileType::*;
        let field = |t: &str, name: Option<&str>| SeccompProfile {
            type_: t.into(),
            localhost_profile: name.map(String::from),
        };
        let opts = Options {
            seccomp_profile_root: "/var/lib/kubelet/seccomp".into(),
            ..Default::default()
        };
        let defaulted = Options {
            seccomp_default: true,
            ..opts.clone()
        };
        // (pod field, container field, options, want type, want file)
        type Case<'a> = (
            Option<SeccompProfile>,
            Option<SeccompProfile>,
            &'a Options,
            cri::security_profile::ProfileType,
            &'a str,
        );
        let cases: Vec<Case> = vec![
            (None, None, &opts, Unconfined, ""),
            (None, None, &defaulted, RuntimeDefault, ""),
            (
                Some(field("RuntimeDefault", None)),
                None,
                &opts,
                RuntimeDefault,
                "",
            ),
            (
                Some(field("RuntimeDefault", None)),
                Some(field("Unconfined", None)),
                &defaulted,
                Unconfined,
                "",
            ),
            (
                None,
                Some(field("Localhost", Some("profiles/audit.json"))),
                &opts,
                Localhost,
                "/var/lib/kubelet/seccomp/profiles/audit.json",
            ),
            (
                Some(field("Localhost", Some("/abs.json"))),
                None,
                &opts,
                Localhost,
                "/var/lib/kubelet/seccomp/abs.json",
            ),
        ];
        for (i, (pod_f, c_f, o, want, file)) in cases.into_iter().enumerate() {
            let pod_sc = PodSecurityContext {
                seccomp_profile: pod_f,
                ..Default::default()
            };
            let sc = SecurityContext {
                seccomp_profile: c_f,
                ..Default::default()
            };
            let got = seccomp_profile(Some(&pod_sc), Some(&sc), o).unwrap();
            assert_eq!(
                (got.profile_type, got.localhost_ref.as_str()),
                (want as i32, file),
                "case {i}"
            );
        }
        for bad in [Some("../etc/x.json"), Some("a/../../b"), None] {
            let sc = SecurityContext {
                seccomp_profile: Some(field("Localhost", bad)),
                ..Default::default()
            };
            let err = seccomp_profile(None, Some(&sc), &opts).unwrap_err();
            assert!(
                matches!(err, RuntimeError::InvalidInput { .. }),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn apparmor_and_ephemeral_target() {
        use k8s_openapi::api::core::v1::AppArmorProfile;
        let mut c = container("debug", &[], &[]);
        c.security_context = Some(SecurityContext {
            app_armor_profile: Some(AppArmorProfile {
                type_: "Localhost".into(),
                localhost_profile: Some("k8s-deny-write".into()),
            }),
            ..Default::default()
        });
        let pod = pod_with(vec![c.clone()], PodSpec::default());
        let kind = ContainerKind::Ephemeral {
            target_id: Some("abc".into()),
        };
        let sc =
            container_security_context(&pod, &c, &kind, &ImageUser::default(), &Options::default())
                .unwrap();
        let aa = sc.apparmor.clone().unwrap();
        assert_eq!(
            aa.profile_type,
            cri::security_profile::ProfileType::Localhost as i32
        );
        assert_eq!(aa.localhost_ref, "k8s-deny-write");
        #[allow(deprecated)]
        let deprecated = sc.apparmor_profile.clone();
        assert_eq!(deprecated, "localhost/k8s-deny-write");
        let ns = sc.namespace_options.unwrap();
        assert_eq!(
            (ns.pid, ns.target_id.as_str()),
            (cri::NamespaceMode::Target as i32, "abc")
        );
        // A pod sharing one process namespace keeps it.
        let shared = pod_with(
            vec![c.clone()],
            PodSpec {
                share_process_namespace: Some(true),
                ..Default::default()
            },
        );
        let sc = container_security_context(
            &shared,
            &c,
            &kind,
            &ImageUser::default(),
            &Options::default(),
        )
        .unwrap();
        assert_eq!(
            sc.namespace_options.unwrap().pid,
            cri::NamespaceMode::Pod as i32
        );
        // No profile asked for: none sent.
        let plain = container("app", &[], &[]);
        let pod = pod_with(vec![plain.clone()], PodSpec::default());
        assert!(apparmor_profile(&pod, &plain).unwrap().is_none());
    }
}
