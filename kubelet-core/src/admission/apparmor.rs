//! AppArmor admission (Go's `appArmorAdmitHandler` over `pkg/security/apparmor`): a pod that
//! asks for an AppArmor profile other than `Unconfined` — the `appArmorProfile` field of a
//! container's or the pod's security context, or the deprecated
//! `container.apparmor.security.beta.kubernetes.io/<container>` annotation — is rejected on
//! a host without AppArmor (reason `AppArmor`, "Cannot enforce AppArmor: AppArmor is not
//! enabled on the host"), never run unconfined; a `Localhost` profile without a name is
//! rejected everywhere. On a host with AppArmor the profile goes to the runtime
//! ([`profile`] is what the CRI mapping sends).

use k8s_openapi::api::core::v1::{AppArmorProfile, Container, Pod};

use super::{reject, AdmitAttributes, AdmitHandler, AdmitResult};

/// The deprecated per-container annotation prefix.
pub const ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
/// Where the kernel says whether AppArmor is enabled (`Y`).
pub const ENABLED_PATH: &str = "/sys/module/apparmor/parameters/enabled";

/// The AppArmor profile of a container (Go's `apparmor.GetProfile`): the container's field,
/// else its annotation (`runtime/default`, `localhost/<name>`, `unconfined`), else the pod's
/// field.
pub fn profile(pod: &Pod, c: &Container) -> Option<AppArmorProfile> {
    if let Some(p) = c
        .security_context
        .as_ref()
        .and_then(|s| s.app_armor_profile.as_ref())
    {
        return Some(p.clone());
    }
    let key = format!("{ANNOTATION_PREFIX}{}", c.name);
    if let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(&key)) {
        let (type_, localhost_profile) = match v.as_str() {
            "runtime/default" => ("RuntimeDefault", None),
            "unconfined" => ("Unconfined", None),
            other => match other.strip_prefix("localhost/") {
                Some(name) => ("Localhost", Some(name.to_string())),
                None => (other, None),
            },
        };
        return Some(AppArmorProfile {
            type_: type_.to_string(),
            localhost_profile,
        });
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.app_armor_profile.clone())
}

/// The containers of every kind (init, app, ephemeral) of a pod.
fn containers(pod: &Pod) -> Vec<Container> {
    let mut all: Vec<Container> = crate::pod::all_containers(pod).cloned().collect();
    all.extend(crate::pod::ephemeral_containers(pod));
    all
}

/// Whether `/sys/module/apparmor/parameters/enabled` says `Y` (a blocking sysfs read).
pub fn host_enabled() -> bool {
    std::fs::read_to_string(ENABLED_PATH).is_ok_and(|s| s.trim_start().starts_with('Y'))
}

/// See the module docs.
#[derive(Debug, Clone, Copy)]
pub struct AppArmorAdmitHandler {
    /// The host enforces AppArmor.
    pub host_enabled: bool,
}

impl AppArmorAdmitHandler {
    /// The decision for one pod.
    pub fn admit_pod(&self, p: &Pod) -> AdmitResult {
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
        // As Go: a pod past Pending was admitted before (a kubelet restart).
        if !matches!(phase, None | Some("") | Some("Pending")) {
            return AdmitResult::Admit;
        }
        let mut required = false;
        for c in containers(p) {
            let Some(prof) = profile(p, &c) else { continue };
            if prof.type_ == "Localhost"
                && prof
                    .localhost_profile
                    .as_deref()
                    .is_none_or(|n| n.trim().is_empty())
            {
                return cannot(format!(
                    "invalid empty AppArmor profile name for container {:?}",
                    c.name
                ));
            }
            if !matches!(
                prof.type_.as_str(),
                "Unconfined" | "RuntimeDefault" | "Localhost"
            ) {
                return cannot(format!(
                    "unknown AppArmor profile type {:?} for container {:?}",
                    prof.type_, c.name
                ));
            }
            required |= prof.type_ != "Unconfined";
        }
        if required && !self.host_enabled {
            return cannot("AppArmor is not enabled on the host".into());
        }
        AdmitResult::Admit
    }
}

fn cannot(why: String) -> AdmitResult {
    reject("AppArmor", format!("Cannot enforce AppArmor: {why}"))
}

impl AdmitHandler for AppArmorAdmitHandler {
    fn admit(&self, attrs: &AdmitAttributes<'_>) -> AdmitResult {
        self.admit_pod(attrs.pod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, SecurityContext};

    fn pod(container: Option<&str>, annotation: Option<&str>, pod_level: Option<&str>) -> Pod {
        let prof = |t: &str| {
            let (type_, name) = match t.split_once(':') {
                Some((t, n)) => (t, Some(n.to_string())),
                None => (t, None),
            };
            AppArmorProfile {
                type_: type_.into(),
                localhost_profile: name,
            }
        };
        let mut p = Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    security_context: container.map(|t| SecurityContext {
                        app_armor_profile: Some(prof(t)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                security_context: pod_level.map(|t| PodSecurityContext {
                    app_armor_profile: Some(prof(t)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(a) = annotation {
            p.metadata.annotations = Some(
                [(format!("{ANNOTATION_PREFIX}app"), a.to_string())]
                    .into_iter()
                    .collect(),
            );
        }
        p
    }

    fn msg(r: AdmitResult) -> Option<String> {
        match r {
            AdmitResult::Admit => None,
            AdmitResult::Reject { reason, message } => {
                assert_eq!(reason, "AppArmor");
                Some(message)
            }
        }
    }

    #[test]
    fn admission_table() {
        const OFF: &str = "Cannot enforce AppArmor: AppArmor is not enabled on the host";
        // (container field, annotation, pod field, host enabled, rejection)
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            bool,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (None, None, None, false, None),
            (Some("Unconfined"), None, None, false, None),
            (None, Some("unconfined"), None, false, None),
            (Some("RuntimeDefault"), None, None, false, Some(OFF)),
            (None, Some("runtime/default"), None, false, Some(OFF)),
            (None, Some("localhost/k8s-deny-write"), None, false, Some(OFF)),
            (None, None, Some("Localhost:p"), false, Some(OFF)),
            // The container's field wins over the pod's.
            (Some("Unconfined"), None, Some("RuntimeDefault"), false, None),
            (Some("RuntimeDefault"), None, None, true, None),
            (
                Some("Localhost"),
                None,
                None,
                true,
                Some("Cannot enforce AppArmor: invalid empty AppArmor profile name for container \"app\""),
            ),
        ];
        for (i, (c, a, p, enabled, want)) in cases.into_iter().enumerate() {
            let h = AppArmorAdmitHandler {
                host_enabled: enabled,
            };
            assert_eq!(msg(h.admit_pod(&pod(c, a, p))).as_deref(), want, "case {i}");
        }
    }

    #[test]
    fn annotation_profiles_map_to_fields() {
        let p = pod(None, Some("localhost/k8s-deny-write"), None);
        let got = profile(&p, &p.spec.as_ref().unwrap().containers[0]).unwrap();
        assert_eq!(got.type_, "Localhost");
        assert_eq!(got.localhost_profile.as_deref(), Some("k8s-deny-write"));
    }
}
