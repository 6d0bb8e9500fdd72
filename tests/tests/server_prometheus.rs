//! A real Prometheus (Debian's `prometheus`, installed by `scripts/test.sh`) scrapes the
//! kubelet's secure port on 127.0.0.1 — `/metrics`, `/metrics/cadvisor`, `/metrics/resource`
//! and `/metrics/probes`, authenticated by bearer token and authorized — and the test asks
//! Prometheus's HTTP API for a few series of each endpoint.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kubelet_core::metrics::InstrumentedRuntime;
use kubelet_core::testing::StaticSource;
use kubelet_core::{ContainerRuntime, PodSource};
use kubelet_server::auth::{
    Attributes, AuthConfig, AuthError, Authorizer, Decision, TokenAuthenticator, UserInfo,
};
use kubelet_server::stats::SummaryCollector;
use kubelet_server::tls::{ServerTls, TlsOptions};
use kubelet_server::{Endpoints, KubeletHost, ServerConfig};
use kubelet_tests::engine::{busybox, wait_running, EngineTest};

const TOKEN: &str = "prometheus-scrape-token";

struct OneToken;

#[async_trait]
impl TokenAuthenticator for OneToken {
    async fn authenticate_token(&self, token: &str) -> Result<Option<UserInfo>, AuthError> {
        Ok((token == TOKEN).then(|| UserInfo {
            name: "system:serviceaccount:monitoring:prometheus".into(),
            groups: vec!["system:authenticated".into()],
            ..Default::default()
        }))
    }
}

/// Allows the scraper `get` on `nodes/metrics` only (as the usual monitoring ClusterRole).
struct MetricsOnly;

#[async_trait]
impl Authorizer for MetricsOnly {
    async fn authorize(&self, a: &Attributes) -> Result<Decision, AuthError> {
        Ok(if a.verb == "get" && a.subresource == "metrics" {
            Decision::Allow
        } else {
            Decision::Deny("metrics only".into())
        })
    }
}

fn prometheus_binary() -> Option<&'static str> {
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn query(prom: &str, q: &str) -> Vec<serde_json::Value> {
    let url = format!("http://{prom}/api/v1/query");
    let Ok(r) = reqwest::Client::new()
        .get(url)
        .query(&[("query", q)])
        .send()
        .await
    else {
        return vec![];
    };
    let v: serde_json::Value = r.json().await.unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_scrapes_every_metrics_endpoint_through_authn() {
    let Some(bin) = prometheus_binary() else {
        if std::env::var_os("CI").is_some() {
            panic!("prometheus is not installed (scripts/test.sh installs Debian's prometheus)");
        }
        eprintln!("SKIPPED: no prometheus binary; apt-get install prometheus");
        return;
    };
    let Some(t) = EngineTest::new("prometheus").await else {
        return;
    };
    let uid = t.uid("prom");
    let mut app = busybox("app", "exec sleep 3600");
    app.readiness_probe = Some(k8s_openapi::api::core::v1::Probe {
        exec: Some(k8s_openapi::api::core::v1::ExecAction {
            command: Some(vec!["true".into()]),
        }),
        period_seconds: Some(1),
        ..Default::default()
    });
    let pod = t.pod("prom", &uid, vec![app]);
    // The runtime instrumented as kubelet-bin wires it (kubelet_runtime_operations_*).
    let runtime: Arc<dyn ContainerRuntime> = t.runtime.clone();
    let k = t.start_customized(
        t.config(),
        vec![Arc::new(StaticSource::new("file", vec![pod])) as Arc<dyn PodSource>],
        move |b| b.runtime(Arc::new(InstrumentedRuntime::new(runtime))),
    );
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;

    // The secure port: self-signed serving certificate, bearer tokens, authorization.
    let stats = Arc::new(SummaryCollector::for_kubelet(&k.handle).expect("kubelet-cm measures"));
    let host = KubeletHost::new(k.handle.clone())
        .with_machine_info(&stats.machine_info())
        .with_stats(stats);
    let tls = ServerTls::load(&TlsOptions {
        cert_dir: t.dir.path().join("pki"),
        host_name: "localhost".into(),
        host_ips: vec!["127.0.0.1".parse().unwrap()],
        ..Default::default()
    })
    .unwrap();
    let config = ServerConfig {
        tls: Some(tls),
        auth: AuthConfig {
            anonymous: false,
            tokens: Some(Arc::new(OneToken)),
            authorizer: Arc::new(MetricsOnly),
        },
        ..ServerConfig::plain(Endpoints::Full)
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let kubelet_addr = listener.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(kubelet_server::serve_with(
        listener,
        Arc::new(host),
        config,
        shutdown.clone(),
    ));

    // Prometheus on 127.0.0.1 with one job per endpoint.
    let dir = t.dir.path().join("prometheus");
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("token"), TOKEN).unwrap();
    let mut jobs = String::new();
    for (job, path) in [
        ("kubelet", "/metrics"),
        ("cadvisor", "/metrics/cadvisor"),
        ("resource", "/metrics/resource"),
        ("probes", "/metrics/probes"),
    ] {
        jobs.push_str(&format!(
            "  - job_name: {job}\n    scheme: https\n    metrics_path: {path}\n    tls_config:\n      insecure_skip_verify: true\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{kubelet_addr}']\n",
            dir.join("token").display()
        ));
    }
    // A job with a wrong token: the kubelet refuses it (up == 0), so authn is really in the way.
    jobs.push_str(&format!(
        "  - job_name: wrong-token\n    scheme: https\n    metrics_path: /metrics\n    tls_config:\n      insecure_skip_verify: true\n    authorization:\n      credentials: nope\n    static_configs:\n      - targets: ['{kubelet_addr}']\n"
    ));
    let config_file = dir.join("prometheus.yml");
    std::fs::write(
        &config_file,
        format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}"),
    )
    .unwrap();
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let mut prom = tokio::process::Command::new(bin)
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus starts");

    let series = [
        ("kubelet", "up{job=\"kubelet\"} == 1".to_string()),
        ("kubelet", "kubelet_node_name{job=\"kubelet\"}".to_string()),
        ("kubelet", "kubelet_running_pods{job=\"kubelet\"} >= 1".to_string()),
        ("kubelet", "kubelet_runtime_operations_total{job=\"kubelet\",operation_type=\"list_podsandbox\"}".to_string()),
        ("kubelet", "kubelet_started_containers_total{job=\"kubelet\",container_type=\"container\"}".to_string()),
        ("kubelet", "process_resident_memory_bytes{job=\"kubelet\"} > 0".to_string()),
        ("cadvisor", "up{job=\"cadvisor\"} == 1".to_string()),
        ("cadvisor", format!("container_cpu_usage_seconds_total{{job=\"cadvisor\",pod=\"prom\",container=\"app\",namespace=\"{}\"}}", t.namespace)),
        ("cadvisor", "container_memory_working_set_bytes{job=\"cadvisor\",pod=\"prom\",container=\"app\"} > 0".to_string()),
        ("cadvisor", "container_network_receive_bytes_total{job=\"cadvisor\",pod=\"prom\",interface=\"eth0\"}".to_string()),
        ("cadvisor", "machine_cpu_cores{job=\"cadvisor\"} > 0".to_string()),
        ("resource", "up{job=\"resource\"} == 1".to_string()),
        ("resource", "node_memory_working_set_bytes{job=\"resource\"} > 0".to_string()),
        ("resource", "container_memory_working_set_bytes{job=\"resource\",pod=\"prom\",container=\"app\"}".to_string()),
        ("probes", "up{job=\"probes\"} == 1".to_string()),
        ("probes", "prober_probe_total{job=\"probes\",probe_type=\"Readiness\",pod=\"prom\",result=\"successful\"} > 0".to_string()),
        ("wrong-token", "up{job=\"wrong-token\"} == 0".to_string()),
    ];
    let deadline = kubelet_core::clock::monotonic_now() + Duration::from_secs(90);
    loop {
        let mut missing = Vec::new();
        for (job, q) in &series {
            if query(&prom_addr, q).await.is_empty() {
                missing.push(format!("{job}: {q}"));
            }
        }
        if missing.is_empty() {
            break;
        }
        if kubelet_core::clock::monotonic_now() > deadline {
            let log = std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
            let targets = reqwest::get(format!("http://{prom_addr}/api/v1/targets"))
                .await
                .map(|r| r.status().to_string())
                .unwrap_or_default();
            panic!("series missing after 90s: {missing:#?}\ntargets: {targets}\nprometheus log tail: {}", log.lines().rev().take(20).collect::<Vec<_>>().join("\n"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let _ = prom.kill().await;
    shutdown.cancel();
    k.stop().await;
}
