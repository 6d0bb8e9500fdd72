//! The raw floor's pod made the same as the benchmark's API pod as the runtime sees it. The
//! kubelet gives every pod from the API server more than `bench-cri`'s bare pod has: its
//! cluster DNS (`ClusterFirst`), the `kubernetes` service's variables, and three bind mounts
//! (the service account token volume the API server's admission adds, the managed
//! `/etc/hosts`, the termination log). Each mount is work for the runtime in
//! `CreateContainer` and `StartContainer`; a floor without them is the floor of another pod.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use kubelet_core::runtime::{DnsConfig, EnvVar, Mount, MountPropagation};

use crate::bench_cri::workload::BenchPod;

/// The cluster DNS the benchmark's kubelet is given (`--cluster-dns`, `--cluster-domain`).
#[derive(Debug, Clone, clap::Args)]
pub(super) struct ClusterDns {
    /// The kubelet's `--cluster-dns`.
    #[arg(long, default_value = "10.96.0.10")]
    pub(super) cluster_dns: String,
    /// The kubelet's `--cluster-domain`.
    #[arg(long, default_value = "cluster.local")]
    pub(super) cluster_domain: String,
}

/// Where a service account token volume is mounted (the API server's admission adds it).
const TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The `kubernetes` service's variables as the kubelet makes them for a cluster whose service
/// network starts at 10.96.0.0 (its first address is the API server's service).
fn master_service_env() -> Vec<EnvVar> {
    let var = |name: &str, value: &str| EnvVar {
        name: name.to_string(),
        value: value.to_string(),
    };
    vec![
        var("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
        var("KUBERNETES_SERVICE_PORT", "443"),
        var("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
        var("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
        var("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
        var("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
        var("KUBERNETES_PORT_443_TCP_PORT", "443"),
        var("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
    ]
}

/// `ClusterFirst` DNS of a pod in `namespace` (Go's `dns.Configurer`: the cluster's search
/// domains before the host's).
fn cluster_first(dns: &ClusterDns, namespace: &str, host_searches: &[String]) -> DnsConfig {
    let d = &dns.cluster_domain;
    let mut searches = vec![
        format!("{namespace}.svc.{d}"),
        format!("svc.{d}"),
        d.clone(),
    ];
    searches.extend(host_searches.iter().cloned());
    DnsConfig {
        servers: vec![dns.cluster_dns.clone()],
        searches,
        options: vec!["ndots:5".to_string()],
    }
}

/// The host's search domains (`/etc/resolv.conf`), which the kubelet appends.
fn host_searches() -> Vec<String> {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("search"))
        .flat_map(|rest| rest.split_whitespace().map(str::to_string))
        .collect()
}

/// Makes `pods` the API pod as the runtime sees it: DNS, variables and mounts, their files
/// under `files` (one directory per pod; the caller removes `files`).
pub(super) async fn as_an_api_pod(
    pods: &mut [BenchPod],
    files: &Path,
    dns: &ClusterDns,
) -> Result<()> {
    let searches = host_searches();
    for p in pods {
        let name = p.sandbox.hostname.clone();
        let dir = files.join(&name);
        let token = dir.join("token");
        tokio::fs::create_dir_all(&token)
            .await
            .with_context(|| format!("creating {}", token.display()))?;
        for (file, content) in [("token", "x"), ("namespace", "default"), ("ca.crt", "")] {
            tokio::fs::write(token.join(file), content).await?;
        }
        let hosts = dir.join("etc-hosts");
        tokio::fs::write(
            &hosts,
            format!("127.0.0.1\tlocalhost\n::1\tlocalhost\n10.0.0.1\t{name}\n"),
        )
        .await?;
        let termination_log = dir.join("termination-log");
        tokio::fs::write(&termination_log, "").await?;
        let namespace = kubelet_core::pod::namespace(&p.sandbox.pod).to_string();
        p.sandbox.dns = Some(cluster_first(dns, &namespace, &searches));
        p.container.env = master_service_env();
        let mount = |container_path: &str, host_path: PathBuf, read_only| Mount {
            container_path: container_path.to_string(),
            host_path,
            read_only,
            propagation: MountPropagation::Private,
        };
        p.container.mounts = vec![
            mount(TOKEN_MOUNT, token, true),
            mount("/etc/hosts", hosts, false),
            mount("/dev/termination-log", termination_log, false),
        ];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_first_puts_the_cluster_domains_before_the_hosts() {
        let dns = ClusterDns {
            cluster_dns: "10.96.0.10".into(),
            cluster_domain: "cluster.local".into(),
        };
        let got = cluster_first(&dns, "ns", &["example.org".to_string()]);
        assert_eq!(got.servers, ["10.96.0.10"]);
        assert_eq!(
            got.searches,
            [
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "example.org"
            ]
        );
        assert_eq!(got.options, ["ndots:5"]);
    }
}
