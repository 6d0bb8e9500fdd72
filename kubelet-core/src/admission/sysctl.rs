//! Sysctl admission (Go's `pkg/kubelet/sysctl`): a pod's `securityContext.sysctls` must each
//! be in the node's allowlist — Go's safe set plus the `allowedUnsafeSysctls` patterns —
//! and a namespaced sysctl must not be set in a namespace the pod shares with the host
//! (`net.*` with `hostNetwork`, IPC sysctls with `hostIPC`). A pod that asks for anything
//! else is rejected with reason `SysctlForbidden` ("forbidden sysctl: …"), as Go does.
//!
//! `allowedUnsafeSysctls` patterns (a name, or a prefix ending in `*`) must be sysctls the
//! kernel namespaces (`kernel.shm*`, `kernel.msg*`, `kernel.sem`, `fs.mqueue.*`, `net.*`);
//! anything else is a configuration error when the kubelet is built.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::{reject, AdmitAttributes, AdmitHandler, AdmitResult};

/// Go's reason for a pod rejected for its sysctls.
pub const FORBIDDEN_REASON: &str = "SysctlForbidden";

/// Go's safe sysctls (namespaced, and without influence on other pods), with the kernel
/// version each needs (`None`: any).
pub const SAFE_SYSCTLS: [(&str, Option<(u32, u32)>); 12] = [
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.tcp_keepalive_time", None),
    ("net.ipv4.tcp_fin_timeout", None),
    ("net.ipv4.tcp_keepalive_intvl", None),
    ("net.ipv4.tcp_keepalive_probes", None),
    ("net.ipv4.ip_local_reserved_ports", Some((3, 16))),
    ("net.ipv4.tcp_rmem", Some((4, 15))),
    ("net.ipv4.tcp_wmem", Some((4, 15))),
];

/// The kernel namespace a sysctl lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Ipc,
    Net,
}

impl Namespace {
    fn as_str(self) -> &'static str {
        match self {
            Namespace::Ipc => "ipc",
            Namespace::Net => "net",
        }
    }
}

/// Go's `GetNamespace`/`NamespacedBy`: the namespace of a sysctl or sysctl prefix.
fn namespace_of(name: &str) -> Option<Namespace> {
    if name == "kernel.sem" {
        return Some(Namespace::Ipc);
    }
    for (prefix, ns) in [
        ("kernel.shm", Namespace::Ipc),
        ("kernel.msg", Namespace::Ipc),
        ("fs.mqueue.", Namespace::Ipc),
        ("net.", Namespace::Net),
    ] {
        if name.starts_with(prefix) {
            return Some(ns);
        }
    }
    None
}

/// Go's `NormalizeName`: a name written with `/` separators (`net/ipv4/conf/eth0.100/x`) in
/// its `.`-separated form (`net.ipv4.conf.eth0/100.x`).
pub fn normalize_name(name: &str) -> String {
    let Some(first) = name.find(['.', '/']) else {
        return name.to_string();
    };
    if name.as_bytes()[first] != b'/' {
        return name.to_string();
    }
    name.chars()
        .map(|c| match c {
            '/' => '.',
            '.' => '/',
            other => other,
        })
        .collect()
}

/// Go's `IsValidSysctlPattern`: dot- or slash-separated lower-case segments, the last of
/// which may end in `*` (a prefix), at most 253 characters.
fn valid_pattern(p: &str) -> bool {
    if p.is_empty() || p.len() > 253 {
        return false;
    }
    let segs: Vec<&str> = p.split(['.', '/']).collect();
    let chars_ok = |b: &[u8]| {
        b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
    };
    segs.iter().enumerate().all(|(i, s)| {
        let last = i + 1 == segs.len();
        if let Some(prefix) = s.strip_suffix('*').filter(|_| last) {
            let b = prefix.as_bytes();
            return b.is_empty() || (b[0].is_ascii_alphanumeric() && chars_ok(b));
        }
        let b = s.as_bytes();
        !b.is_empty()
            && chars_ok(b)
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
    })
}

/// The node's sysctl allowlist and its admission check. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct SysctlAdmitHandler {
    names: BTreeMap<String, Namespace>,
    prefixes: BTreeMap<String, Namespace>,
}

impl SysctlAdmitHandler {
    /// The safe set for kernel `kernel` (major, minor) plus `allowed_unsafe` patterns; an
    /// invalid or non-namespaced pattern is an error naming it.
    pub fn new(allowed_unsafe: &[String], kernel: (u32, u32)) -> Result<Self, String> {
        let mut h = SysctlAdmitHandler::default();
        for (name, min) in SAFE_SYSCTLS {
            if min.is_none_or(|m| kernel >= m) {
                h.add(name)?;
            }
        }
        for p in allowed_unsafe {
            h.add(p)?;
        }
        Ok(h)
    }

    fn add(&mut self, pattern: &str) -> Result<(), String> {
        if !valid_pattern(pattern) {
            return Err(format!(
                "sysctl {pattern:?} must have at most 253 characters and be dot- or slash-separated segments of [-_a-z0-9], the last of which may end in *"
            ));
        }
        let normalized = normalize_name(pattern);
        let (name, prefixed) = match normalized.strip_suffix('*') {
            Some(prefix) => (prefix.to_string(), true),
            None => (normalized, false),
        };
        let Some(ns) = namespace_of(&name) else {
            return Err(format!(
                "the sysctls {name:?} are not known to be namespaced"
            ));
        };
        if prefixed {
            self.prefixes.insert(name, ns);
        } else {
            self.names.insert(name, ns);
        }
        Ok(())
    }

    /// Go's `validateSysctl`.
    fn validate(&self, name: &str, host_net: bool, host_ipc: bool) -> Result<(), String> {
        let name = normalize_name(name);
        let ns = self.names.get(&name).copied().or_else(|| {
            self.prefixes
                .iter()
                .find(|(p, _)| name.starts_with(p.as_str()))
                .map(|(_, ns)| *ns)
        });
        match ns {
            None => Err(format!("{name:?} not allowlisted")),
            Some(ns)
                if (ns == Namespace::Ipc && host_ipc) || (ns == Namespace::Net && host_net) =>
            {
                Err(format!(
                    "{name:?} not allowed with host {} enabled",
                    ns.as_str()
                ))
            }
            Some(_) => Ok(()),
        }
    }

    /// The decision for one pod (see [`AdmitHandler::admit`]).
    pub fn admit_pod(&self, p: &Pod) -> AdmitResult {
        let Some(spec) = p.spec.as_ref() else {
            return AdmitResult::Admit;
        };
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|s| s.sysctls.as_deref())
            .unwrap_or(&[]);
        let host_net = spec.host_network.unwrap_or(false);
        let host_ipc = spec.host_ipc.unwrap_or(false);
        for s in sysctls {
            if let Err(e) = self.validate(&s.name, host_net, host_ipc) {
                return reject(FORBIDDEN_REASON, format!("forbidden sysctl: {e}"));
            }
        }
        AdmitResult::Admit
    }
}

impl AdmitHandler for SysctlAdmitHandler {
    fn admit(&self, attrs: &AdmitAttributes<'_>) -> AdmitResult {
        self.admit_pod(attrs.pod)
    }
}

/// The running kernel's (major, minor) version from `release` (`uname -r`, e.g.
/// `6.1.0-18-amd64`); `(0, 0)` when it cannot be read.
pub fn kernel_version(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSecurityContext, PodSpec, Sysctl};

    fn pod(sysctls: &[&str], host_net: bool, host_ipc: bool) -> Pod {
        Pod {
            spec: Some(PodSpec {
                host_network: Some(host_net),
                host_ipc: Some(host_ipc),
                security_context: Some(PodSecurityContext {
                    sysctls: Some(
                        sysctls
                            .iter()
                            .map(|n| Sysctl {
                                name: n.to_string(),
                                value: "1".into(),
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn message(r: AdmitResult) -> Option<String> {
        match r {
            AdmitResult::Admit => None,
            AdmitResult::Reject { reason, message } => {
                assert_eq!(reason, FORBIDDEN_REASON);
                Some(message)
            }
        }
    }

    #[test]
    fn admission_table() {
        let h = SysctlAdmitHandler::new(
            &["kernel.msg*".to_string(), "net.core.somaxconn".to_string()],
            (6, 1),
        )
        .unwrap();
        let cases: Vec<(Vec<&str>, bool, bool, Option<&str>)> = vec![
            (vec![], false, false, None),
            (vec!["net.ipv4.ip_unprivileged_port_start"], false, false, None),
            (vec!["net/ipv4/ip_unprivileged_port_start"], false, false, None),
            (vec!["kernel.shm_rmid_forced", "net.ipv4.tcp_rmem"], false, false, None),
            (vec!["kernel.msgmax", "net.core.somaxconn"], false, false, None),
            (
                vec!["kernel.shmmax"],
                false,
                false,
                Some("forbidden sysctl: \"kernel.shmmax\" not allowlisted"),
            ),
            (
                vec!["net.ipv4.ip_unprivileged_port_start"],
                true,
                false,
                Some("forbidden sysctl: \"net.ipv4.ip_unprivileged_port_start\" not allowed with host net enabled"),
            ),
            (
                vec!["kernel.shm_rmid_forced"],
                false,
                true,
                Some("forbidden sysctl: \"kernel.shm_rmid_forced\" not allowed with host ipc enabled"),
            ),
            (
                vec!["vm.overcommit_memory"],
                false,
                false,
                Some("forbidden sysctl: \"vm.overcommit_memory\" not allowlisted"),
            ),
        ];
        for (i, (names, net, ipc, want)) in cases.into_iter().enumerate() {
            assert_eq!(
                message(h.admit_pod(&pod(&names, net, ipc))).as_deref(),
                want,
                "case {i}"
            );
        }
    }

    #[test]
    fn kernel_gated_and_config_errors() {
        let old = SysctlAdmitHandler::new(&[], (4, 9)).unwrap();
        assert!(message(old.admit_pod(&pod(&["net.ipv4.tcp_rmem"], false, false))).is_some());
        assert!(
            message(old.admit_pod(&pod(&["net.ipv4.ip_local_reserved_ports"], false, false)))
                .is_none()
        );
        let err = SysctlAdmitHandler::new(&["vm.swappiness".into()], (6, 1)).unwrap_err();
        assert_eq!(
            err,
            "the sysctls \"vm.swappiness\" are not known to be namespaced"
        );
        assert!(SysctlAdmitHandler::new(&["Net.*".into()], (6, 1)).is_err());
        assert!(SysctlAdmitHandler::new(&["net.*.x".into()], (6, 1)).is_err());
        assert!(SysctlAdmitHandler::new(&["fs.mqueue.*".into()], (6, 1)).is_ok());
    }

    #[test]
    fn names_and_kernel_versions() {
        assert_eq!(
            normalize_name("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(normalize_name("net.ipv4.ip_forward"), "net.ipv4.ip_forward");
        assert_eq!(kernel_version("6.18.44-fc-v857"), (6, 18));
        assert_eq!(kernel_version("4.15.0"), (4, 15));
        assert_eq!(kernel_version("garbage"), (0, 0));
    }
}
