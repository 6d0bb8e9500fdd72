//! Pod DNS configuration from `dnsPolicy`, `dnsConfig` and the kubelet's `clusterDNS`,
//! `clusterDomain` and `resolvConf` (Go's `network/dns`).
//!
//! - `Default`: the host's resolv.conf (as named by `resolvConf`).
//! - `ClusterFirst` (the API default): the cluster nameservers with the search path
//!   `<ns>.svc.<domain> svc.<domain> <domain>` before the host's, and `ndots:5`; without
//!   `clusterDNS` it falls back to `Default`, as Go does. Host-network pods use `Default`.
//! - `ClusterFirstWithHostNet`: `ClusterFirst` even on the host network.
//! - `None`: only `dnsConfig`.
//!
//! `dnsConfig` nameservers, searches and options are appended in every policy.

use k8s_openapi::api::core::v1::Pod;

use crate::config::Config;
use crate::pod;
use crate::runtime::DnsConfig;

/// Parses resolv.conf text into nameservers, search domains and options.
pub fn parse_resolv_conf(text: &str) -> DnsConfig {
    let mut dns = DnsConfig::default();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or("");
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => dns.servers.extend(fields.next().map(str::to_string)),
            Some("search") | Some("domain") => {
                dns.searches = fields.map(str::to_string).collect();
            }
            Some("options") => dns.options.extend(fields.map(str::to_string)),
            _ => {}
        }
    }
    dns
}

/// Computes the pod's DNS configuration; `host` is the parsed host resolv.conf.
pub fn pod_dns(p: &Pod, config: &Config, host: &DnsConfig) -> DnsConfig {
    let spec = p.spec.as_ref();
    let policy = spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst");
    let host_net = pod::host_network(p);
    let cluster = match policy {
        "ClusterFirstWithHostNet" => true,
        "ClusterFirst" => !host_net,
        _ => false,
    } && !config.cluster_dns.is_empty();
    let mut dns = match policy {
        "None" => DnsConfig::default(),
        _ if cluster => {
            let mut searches = Vec::new();
            if !config.cluster_domain.is_empty() {
                let d = &config.cluster_domain;
                searches.push(format!("{}.svc.{d}", pod::namespace(p)));
                searches.push(format!("svc.{d}"));
                searches.push(d.clone());
            }
            searches.extend(host.searches.iter().cloned());
            DnsConfig {
                servers: config.cluster_dns.clone(),
                searches,
                options: vec!["ndots:5".to_string()],
            }
        }
        _ => host.clone(),
    };
    if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
        dns.servers
            .extend(extra.nameservers.iter().flatten().cloned());
        dns.searches
            .extend(extra.searches.iter().flatten().cloned());
        for o in extra.options.iter().flatten() {
            let Some(name) = o.name.as_ref() else {
                continue;
            };
            dns.options
                .retain(|x| x.split(':').next() != Some(name.as_str()));
            dns.options.push(match o.value.as_ref() {
                Some(v) => format!("{name}:{v}"),
                None => name.clone(),
            });
        }
    }
    dns.searches.dedup();
    dns
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn policies() {
        let host = parse_resolv_conf("nameserver 10.0.0.2\nsearch example.com\noptions edns0\n");
        assert_eq!(host.servers, vec!["10.0.0.2"]);
        let mut cfg = Config::default();
        let mut p = Pod {
            spec: Some(PodSpec::default()),
            ..Default::default()
        };
        p.metadata.namespace = Some("ns".into());
        // No clusterDNS: ClusterFirst falls back to the host's.
        assert_eq!(pod_dns(&p, &cfg, &host), host);
        cfg.cluster_dns = vec!["10.96.0.10".into()];
        cfg.cluster_domain = "cluster.local".into();
        let d = pod_dns(&p, &cfg, &host);
        assert_eq!(d.servers, vec!["10.96.0.10"]);
        assert_eq!(
            d.searches,
            vec![
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "example.com"
            ]
        );
        assert_eq!(d.options, vec!["ndots:5"]);
        if let Some(s) = p.spec.as_mut() {
            s.host_network = Some(true);
        }
        assert_eq!(pod_dns(&p, &cfg, &host), host);
    }
}
