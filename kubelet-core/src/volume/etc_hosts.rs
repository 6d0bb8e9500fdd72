//! The kubelet-managed `/etc/hosts` of a pod (`<pod dir>/etc-hosts`), as Go writes it:
//! localhost entries, the pod's IPs with its hostname (and FQDN when it has a subdomain), then
//! the `hostAliases`. Host-network pods get the node's `/etc/hosts` under a header instead.
//! The file is written once per pod and then left alone, as in Go.

use k8s_openapi::api::core::v1::{HostAlias, Pod};

/// First line of the file for pods with their own network.
pub const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// First line of the file for host-network pods.
pub const MANAGED_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";

/// The pod's hostname and domain (Go `GeneratePodHostNameAndDomain`): `spec.hostname` or the
/// pod name (cut to 63 characters, without a trailing `-`/`.`), and
/// `<subdomain>.<namespace>.svc.<cluster domain>` when `spec.subdomain` is set.
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, String) {
    let spec = pod.spec.as_ref();
    let hostname = match spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
    {
        Some(h) => h,
        None => {
            let name = crate::pod::name(pod);
            let cut: String = name.chars().take(63).collect();
            cut.trim_end_matches(['-', '.']).to_string()
        }
    };
    let domain = match spec
        .and_then(|s| s.subdomain.clone())
        .filter(|d| !d.is_empty())
    {
        // With no cluster domain this ends in `svc.`, as Go's (a fully qualified name).
        Some(sub) => format!("{sub}.{}.svc.{cluster_domain}", crate::pod::namespace(pod)),
        None => String::new(),
    };
    (hostname, domain)
}

/// The longest name the kernel's hostname field takes (Go's `fqdnMaxLen`).
const KERNEL_HOSTNAME_MAX: usize = 64;

/// The hostname of the pod's sandbox (its UTS namespace), as Go's (`GetNodenameForKernel`):
/// the hostname of [`hostname_and_domain`] (a pod name longer than the kernel's 64-byte limit
/// cut as Go cuts it, `truncatePodHostnameIfNeeded`, instead of failing `sethostname` in the
/// runtime), or with `setHostnameAsFQDN` and a subdomain the FQDN `<hostname>.<domain>`,
/// refused when longer than 64 bytes with Go's message. Host-network pods keep the node's
/// hostname (the runtime ignores this one), so only the short name.
pub fn sandbox_hostname(pod: &Pod, cluster_domain: &str) -> Result<String, String> {
    let (hostname, domain) = hostname_and_domain(pod, cluster_domain);
    let spec = pod.spec.as_ref();
    let as_fqdn = spec.and_then(|s| s.set_hostname_as_fqdn) == Some(true);
    let host_network = spec.and_then(|s| s.host_network) == Some(true);
    if !as_fqdn || domain.is_empty() || host_network {
        return Ok(hostname);
    }
    let fqdn = format!("{hostname}.{domain}");
    if fqdn.len() > KERNEL_HOSTNAME_MAX {
        return Err(format!(
            "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({KERNEL_HOSTNAME_MAX} characters is the max, {} characters requested)",
            fqdn.len()
        ));
    }
    Ok(fqdn)
}

fn host_aliases(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for a in aliases {
        let names = a.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", a.ip));
    }
    out
}

/// The managed content for a pod with its own network.
pub fn managed_content(
    pod_ips: &[String],
    hostname: &str,
    domain: &str,
    aliases: &[HostAlias],
) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if domain.is_empty() {
            out.push_str(&format!("{ip}\t{hostname}\n"));
        } else {
            out.push_str(&format!("{ip}\t{hostname}.{domain}\t{hostname}\n"));
        }
    }
    out.push_str(&host_aliases(aliases));
    out
}

/// The content for a host-network pod: the node's hosts file under a header, then aliases.
pub fn host_network_content(node_hosts: &str, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HEADER_HOST_NETWORK);
    out.push_str(node_hosts);
    out.push_str(&host_aliases(aliases));
    out
}

/// The pod's host aliases.
pub fn aliases(pod: &Pod) -> Vec<HostAlias> {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_aliases.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn alias(ip: &str, names: &[&str]) -> HostAlias {
        HostAlias {
            ip: ip.into(),
            hostnames: Some(names.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn managed_content_as_go_writes_it() {
        let got = managed_content(
            &["10.0.0.5".into()],
            "web",
            "",
            &[alias("1.2.3.4", &["foo", "bar"]), alias("::2", &["v6"])],
        );
        let want = "# Kubernetes-managed hosts file.\n\
                    127.0.0.1\tlocalhost\n\
                    ::1\tlocalhost ip6-localhost ip6-loopback\n\
                    fe00::0\tip6-localnet\n\
                    fe00::0\tip6-mcastprefix\n\
                    fe00::1\tip6-allnodes\n\
                    fe00::2\tip6-allrouters\n\
                    10.0.0.5\tweb\n\
                    \n\
                    # Entries added by HostAliases.\n\
                    1.2.3.4\tfoo\tbar\n\
                    ::2\tv6\n";
        assert_eq!(got, want);
        let fqdn = managed_content(&["10.0.0.5".into()], "web", "sub.ns.svc.cluster.local", &[]);
        assert!(
            fqdn.ends_with("10.0.0.5\tweb.sub.ns.svc.cluster.local\tweb\n"),
            "{fqdn}"
        );
        let host = host_network_content("127.0.0.1 localhost\n", &[alias("1.1.1.1", &["one"])]);
        assert_eq!(
            host,
            "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n\n# Entries added by HostAliases.\n1.1.1.1\tone\n"
        );
    }

    #[test]
    fn a_sandbox_hostname_fits_the_kernel() {
        // The e2e spec "Pods should allow activeDeadlineSeconds to be updated" names its pod
        // like this (69 characters): the whole name as hostname failed RunPodSandbox with
        // "sethostname: invalid argument" forever.
        let name = "pod-update-activedeadlineseconds-ea039d58-1250-446f-951d-ecb2b340df78";
        let pod = |name: &str, hostname: Option<&str>| Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                hostname: hostname.map(Into::into),
                ..Default::default()
            }),
            ..Default::default()
        };
        let short = |p: &Pod| sandbox_hostname(p, "cluster.local").unwrap();
        let h = short(&pod(name, None));
        assert_eq!(h, &name[..63]);
        assert!(h.len() <= 63);
        // Cut at a '-': the trailing '-' goes too.
        let dash = format!("{}-{}", "b".repeat(62), "c".repeat(10));
        assert_eq!(short(&pod(&dash, None)), "b".repeat(62));
        assert_eq!(short(&pod("web", None)), "web");
        assert_eq!(short(&pod(name, Some("h"))), "h");
        // An empty spec.hostname is an unset one (Go: len(pod.Spec.Hostname) > 0).
        assert_eq!(short(&pod("web", Some(""))), "web");

        // setHostnameAsFQDN: the FQDN when there is a subdomain (ending in `svc.` without a
        // cluster domain, as Go's), refused past 64 bytes with Go's words.
        let fqdn_pod = |name: &str, subdomain: Option<&str>, host_network: bool| {
            let mut p = pod(name, None);
            if let Some(s) = p.spec.as_mut() {
                s.subdomain = subdomain.map(Into::into);
                s.set_hostname_as_fqdn = Some(true);
                s.host_network = Some(host_network);
            }
            p
        };
        assert_eq!(
            sandbox_hostname(&fqdn_pod("web", Some("t"), false), "cluster.local").unwrap(),
            "web.t.ns.svc.cluster.local"
        );
        assert_eq!(
            sandbox_hostname(&fqdn_pod("web", Some("t"), false), "").unwrap(),
            "web.t.ns.svc."
        );
        assert_eq!(
            sandbox_hostname(&fqdn_pod("web", None, false), "cluster.local").unwrap(),
            "web"
        );
        assert_eq!(
            sandbox_hostname(&fqdn_pod("web", Some("t"), true), "cluster.local").unwrap(),
            "web"
        );
        let long = "hostfqdnveryveryveryverylongforfqdntobemorethan64bytes-1";
        assert_eq!(
            sandbox_hostname(&fqdn_pod(long, Some("t"), false), "cluster.local").unwrap_err(),
            format!("failed to construct FQDN from pod hostname and cluster domain, FQDN {long}.t.ns.svc.cluster.local is too long (64 characters is the max, 79 characters requested)")
        );
    }

    #[test]
    fn hostname_and_domain_rules() {
        let mut p = Pod {
            metadata: ObjectMeta {
                name: Some(format!("{}-x", "a".repeat(62))),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            ..Default::default()
        };
        // Cut to 63 characters, trailing '-' removed.
        assert_eq!(
            hostname_and_domain(&p, "cluster.local"),
            ("a".repeat(62), String::new())
        );
        let spec = p.spec.as_mut().unwrap();
        spec.hostname = Some("h".into());
        spec.subdomain = Some("s".into());
        assert_eq!(
            hostname_and_domain(&p, "cluster.local"),
            ("h".into(), "s.ns.svc.cluster.local".into())
        );
    }
}
