//! The raw floor's pod made the same as the benchmark's API pod as the runtime sees it. The
//! kubelet gives every pod from the API server more than `bench-cri`'s bare pod has: its
//! cluster DNS (`ClusterFirst`), the `kubernetes` service's variables, and three bind mounts
//! (the service account token volume the API server's admission adds, the managed
//! `/etc/hosts`, the termination log). Each mount is work for the runtime in
//! `CreateContainer` and `StartContainer`; a floor without them is the floor of another pod.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubelet_core::runtime::{Mount, MountPropagation};

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

/// The `kubernetes` service of a cluster whose service network starts at 10.96.0.0 (its first
/// address is the API server's service), whose variables every pod gets.
fn master_service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("kubernetes".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.96.0.1".into()),
            ports: Some(vec![ServicePort {
                name: Some("https".into()),
                port: 443,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Makes `pods` the API pod as the runtime sees it: DNS, variables and mounts, their files
/// under `files` (one directory per pod; the caller removes `files`).
pub(super) async fn as_an_api_pod(
    pods: &mut [BenchPod],
    files: &Path,
    dns: &ClusterDns,
) -> Result<()> {
    // The kubelet's own functions: its DNS settings (with the host's resolv.conf, its
    // default `resolvConf`) and its service variables.
    let config = kubelet_core::Config {
        cluster_dns: vec![dns.cluster_dns.clone()],
        cluster_domain: dns.cluster_domain.clone(),
        ..Default::default()
    };
    let resolv_conf = tokio::fs::read_to_string("/etc/resolv.conf")
        .await
        .unwrap_or_default();
    let host = kubelet_core::dns::parse_resolv_conf(&resolv_conf);
    let env = kubelet_core::service_env(&[master_service()]);
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
        p.sandbox.dns = Some(kubelet_core::dns::pod_dns(&p.sandbox.pod, &config, &host));
        p.container.env = env.clone();
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
    use crate::bench_cri::workload::workload;

    #[test]
    fn the_floor_pod_gets_the_api_pods_dns_variables_and_mounts() {
        // A runtime without drivers (the files go through the blocking pool): a signal driver
        // holds a socket while it lives, and `proc_stats`'s test counts the process's sockets.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let files = tempfile::tempdir().expect("tempdir");
        let dns = ClusterDns {
            cluster_dns: "10.96.0.10".into(),
            cluster_domain: "cluster.local".into(),
        };
        let mut pods = workload("floor", 1);
        rt.block_on(as_an_api_pod(&mut pods, files.path(), &dns))
            .expect("made");
        let p = &pods[0];
        let got = p.sandbox.dns.as_ref().expect("DNS settings");
        assert_eq!(got.servers, ["10.96.0.10"]);
        assert_eq!(got.searches[1..3], ["svc.cluster.local", "cluster.local"]);
        assert_eq!(got.options, ["ndots:5"]);
        let host = p
            .container
            .env
            .iter()
            .find(|v| v.name == "KUBERNETES_SERVICE_HOST")
            .map(|v| v.value.as_str());
        assert_eq!(host, Some("10.96.0.1"));
        let mounts: Vec<&str> = p
            .container
            .mounts
            .iter()
            .map(|m| m.container_path.as_str())
            .collect();
        assert_eq!(mounts, [TOKEN_MOUNT, "/etc/hosts", "/dev/termination-log"]);
        for m in &p.container.mounts {
            assert!(m.host_path.exists(), "{}", m.host_path.display());
        }
    }
}
