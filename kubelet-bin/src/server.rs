//! The kubelet's HTTP listeners from the configuration (Go's `ListenAndServeKubeletServer`,
//! `ListenAndServeKubeletReadOnlyServer`, the healthz server): the secure port with TLS,
//! authentication and authorization, the read-only port and the healthz port; and the pod
//! resources gRPC socket (Go's `ListenAndServePodResources`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use kubelet_core::summary::SummaryCollector;
use kubelet_core::KubeletHandle;
use kubelet_server::auth::{
    AlwaysAllow, ApiServerClient, AuthConfig, Authorizer, TokenAuthenticator, WebhookAuthorizer,
    WebhookTokenAuthenticator,
};
use kubelet_server::tls::{ServerTls, TlsOptions};
use kubelet_server::{Endpoints, Host, KubeletHost, ServerConfig};
use tokio_util::sync::CancellationToken;

use crate::config::LoadedConfig;

fn non_empty(s: &str) -> Option<PathBuf> {
    (!s.is_empty()).then(|| PathBuf::from(s))
}

/// Authentication and authorization of the secure port from the configuration. Webhook
/// modes need `api` (a client of the API server); without one they fail, as in Go ("no
/// client provided, cannot use webhook authentication").
pub fn auth_config(loaded: &LoadedConfig, api: Option<&ApiServerClient>) -> Result<AuthConfig> {
    let c = &loaded.config;
    let tokens: Option<Arc<dyn TokenAuthenticator>> = if c.authentication.webhook.enabled {
        let Some(api) = api else {
            bail!("authentication.webhook.enabled: no API server client (standalone mode), cannot use webhook authentication; set it to false or run with --kubeconfig");
        };
        Some(Arc::new(WebhookTokenAuthenticator::new(
            api.clone(),
            c.authentication.webhook.cache_ttl.0,
        )))
    } else {
        None
    };
    let authorizer: Arc<dyn Authorizer> = match c.authorization.mode.as_str() {
        "AlwaysAllow" => Arc::new(AlwaysAllow),
        "Webhook" => {
            let Some(api) = api else {
                bail!("authorization.mode Webhook: no API server client (standalone mode), cannot use webhook authorization; use AlwaysAllow or run with --kubeconfig");
            };
            Arc::new(WebhookAuthorizer::new(
                api.clone(),
                c.authorization.webhook.cache_authorized_ttl.0,
                c.authorization.webhook.cache_unauthorized_ttl.0,
            ))
        }
        other => bail!("authorization.mode {other:?}: expected AlwaysAllow or Webhook"),
    };
    Ok(AuthConfig {
        anonymous: c.authentication.anonymous.enabled,
        tokens,
        authorizer,
    })
}

/// TLS options of the secure port: `tlsCertFile`/`tlsPrivateKeyFile`, else a self-signed
/// pair in `<root-dir>/pki` (Go's `--cert-dir` default).
pub fn tls_options(loaded: &LoadedConfig, node_ips: &[IpAddr]) -> TlsOptions {
    let c = &loaded.config;
    TlsOptions {
        cert_file: non_empty(&c.tls_cert_file),
        key_file: non_empty(&c.tls_private_key_file),
        cert_dir: loaded.cert_dir.clone(),
        host_name: loaded.node_name.clone(),
        host_ips: node_ips.to_vec(),
        client_ca_file: non_empty(&c.authentication.x509.client_ca_file),
        min_version: (!c.tls_min_version.is_empty()).then(|| c.tls_min_version.clone()),
        cipher_suites: c.tls_cipher_suites.clone(),
        bootstrap: c.server_tls_bootstrap,
    }
}

/// What the listeners of a cluster member get from it.
#[derive(Clone, Default)]
pub struct ClusterServers {
    /// The API server client for webhook authentication and authorization (default: one
    /// from `--kubeconfig`).
    pub api: Option<ApiServerClient>,
    /// The client serving-certificate CSRs go through (`serverTLSBootstrap`).
    pub csr_client: Option<kube::Client>,
}

async fn bind(address: &str, port: i32, what: &str) -> Result<tokio::net::TcpListener> {
    let ip: IpAddr = address
        .parse()
        .with_context(|| format!("{what} address {address:?} is not an IP address"))?;
    let port =
        u16::try_from(port).with_context(|| format!("{what} port {port} is out of range"))?;
    let addr = SocketAddr::new(ip, port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for {what} on {addr}"))?;
    tracing::info!(%addr, "{what} server listening");
    Ok(listener)
}

/// Binds and starts the listeners the configuration asks for: the secure port (`port`,
/// when `enableServer`), the read-only port (`readOnlyPort` > 0) and healthz
/// (`healthzPort` > 0). Binding happens here, so a port conflict fails start-up; serving
/// runs in background tasks until `shutdown`. `stats` enables `/stats/summary`,
/// `/metrics/resource` and `/spec/` (the collector's machine info); `api`
/// is the API server client for webhook authentication and authorization (default: one
/// from `--kubeconfig`, when given).
pub async fn start_servers(
    loaded: &LoadedConfig,
    handle: &KubeletHandle,
    stats: Option<Arc<SummaryCollector>>,
    api: Option<ApiServerClient>,
    shutdown: &CancellationToken,
) -> Result<()> {
    let cluster = ClusterServers {
        api,
        csr_client: None,
    };
    start_servers_with(loaded, handle, stats, cluster, shutdown).await
}

/// [`start_servers`] with what a cluster member provides: with `serverTLSBootstrap` the
/// secure port serves the certificate a manager requests through `cluster.csr_client`
/// (none until it is issued); the certificate and client CA files are re-read when they
/// change.
pub async fn start_servers_with(
    loaded: &LoadedConfig,
    handle: &KubeletHandle,
    stats: Option<Arc<SummaryCollector>>,
    cluster: ClusterServers,
    shutdown: &CancellationToken,
) -> Result<()> {
    let ClusterServers { api, csr_client } = cluster;
    let c = &loaded.config;
    let mut host = KubeletHost::new(handle.clone())
        .with_configz(serde_json::to_value(c).context("encoding the configuration")?);
    if let Some(stats) = stats {
        host = host
            .with_machine_info(&stats.machine_info())
            .with_stats(stats);
    }
    let host: Arc<dyn Host> = Arc::new(host);
    let handlers = kubelet_server::HandlerOptions {
        list_node_log_dirs: true,
        debugging_handlers: c.enable_debugging_handlers,
        system_log_handler: c.enable_system_log_handler,
        profiling_handler: c.enable_profiling_handler,
        debug_flags_handler: c.enable_debug_flags_handler,
        streaming_idle_timeout: c.streaming_connection_idle_timeout.0,
        run_timeout: c.runtime_request_timeout.0,
    };
    if c.healthz_port > 0 {
        let l = bind(&c.healthz_bind_address, c.healthz_port, "healthz").await?;
        tokio::spawn(kubelet_server::serve(
            l,
            host.clone(),
            Endpoints::Healthz,
            shutdown.clone(),
        ));
    }
    if c.read_only_port > 0 {
        let l = bind(&c.address, c.read_only_port, "read-only").await?;
        let config = ServerConfig {
            handlers: handlers.clone(),
            ..ServerConfig::plain(Endpoints::ReadOnly)
        };
        tokio::spawn(kubelet_server::serve_with(
            l,
            host.clone(),
            config,
            shutdown.clone(),
        ));
    }
    if c.enable_server && c.port > 0 {
        // Cluster mode: the webhooks ask the API server of --kubeconfig.
        let api = match (api, &loaded.kubeconfig) {
            (Some(api), _) => Some(api),
            (None, Some(kc)) => Some(
                ApiServerClient::from_kubeconfig(kc)
                    .await
                    .with_context(|| format!("API server client from {}", kc.display()))?,
            ),
            (None, None) => None,
        };
        let auth = auth_config(loaded, api.as_ref())?;
        let ips = loaded.node_ips.clone();
        let options = tls_options(loaded, &ips);
        let opts = options.clone();
        let tls = tokio::task::spawn_blocking(move || ServerTls::load(&opts))
            .await
            .context("TLS set-up task")?
            .context("setting up TLS for the kubelet server")?;
        if c.server_tls_bootstrap {
            let Some(client) = csr_client else {
                bail!("serverTLSBootstrap: no API server client (standalone mode), cannot request a serving certificate; set it to false or run with --kubeconfig");
            };
            let node_ips: Vec<String> = if loaded.node_ips.is_empty() {
                crate::app::node_ips_of(loaded).await
            } else {
                loaded.node_ips.iter().map(IpAddr::to_string).collect()
            };
            let manager = crate::certificates::serving_manager(loaded, client, &node_ips).await?;
            crate::certificates::serve_managed_certificate(
                manager,
                tls.serving.clone(),
                shutdown.clone(),
            );
        }
        tokio::spawn(tls.clone().reload_files(
            options,
            kubelet_server::tls::FILE_CHECK_INTERVAL,
            shutdown.clone(),
        ));
        // The debugging handlers are switched inside (`HandlerOptions`), answering Go's 405
        // "Debug endpoints are disabled." when off.
        let endpoints = Endpoints::Full;
        let l = bind(&c.address, c.port, "kubelet (HTTPS)").await?;
        warn_if_open(loaded);
        let config = ServerConfig {
            endpoints,
            tls: Some(tls),
            auth,
            limits: kubelet_server::ServerLimits::default(),
            handlers,
        };
        tokio::spawn(kubelet_server::serve_with(
            l,
            host,
            config,
            shutdown.clone(),
        ));
    }
    start_pod_resources(loaded, handle, shutdown).await
}

/// The pod resources API on `<root-dir>/pod-resources/kubelet.sock` (Go serves it unless
/// the `KubeletPodResources` gate is off; a socket that cannot be bound stops start-up, as
/// Go's kubelet exits then).
async fn start_pod_resources(
    loaded: &LoadedConfig,
    handle: &KubeletHandle,
    shutdown: &CancellationToken,
) -> Result<()> {
    use kubelet_server::pod_resources::{socket_path, PodResourcesListener, PodResourcesService};
    if !crate::feature_gates::FeatureGates::new(&loaded.config.feature_gates)
        .enabled("KubeletPodResources")
    {
        tracing::info!(
            "the KubeletPodResources feature gate is off: not serving the pod resources API"
        );
        return Ok(());
    }
    let listener = PodResourcesListener::bind(&socket_path(&loaded.root_dir))
        .await
        .context("starting the pod resources API")?;
    let service = PodResourcesService::new(Arc::new(handle.clone()));
    tokio::spawn(listener.serve(service, shutdown.clone()));
    Ok(())
}

/// Start-up warning: the secure port with anonymous authentication and AlwaysAllow (the
/// flags-only default) lets anyone who reaches it run commands in every container.
fn warn_if_open(loaded: &LoadedConfig) {
    let c = &loaded.config;
    if is_open(c) {
        tracing::warn!(
            port = c.port,
            "INSECURE: the kubelet's secure port allows anonymous requests and authorizes \
             everything (authentication.anonymous.enabled=true, authorization.mode=AlwaysAllow): \
             anyone who can reach it can read logs and exec into every container. Set \
             --anonymous-auth=false (authentication.anonymous.enabled: false) with \
             --client-ca-file or --authentication-token-webhook, and \
             --authorization-mode=Webhook (authorization.mode: Webhook)"
        );
    }
}

/// Anonymous requests allowed and everything authorized?
fn is_open(c: &crate::config::KubeletConfiguration) -> bool {
    c.authentication.anonymous.enabled && c.authorization.mode == "AlwaysAllow"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(args: &[&str]) -> LoadedConfig {
        crate::config::load_for_test(args, "node-a")
    }

    #[test]
    fn the_flags_only_default_is_reported_open() {
        assert!(is_open(&load(&[]).config));
        let secured = load(&["--anonymous-auth=false"]);
        assert!(!is_open(&secured.config));
        let webhook = load(&["--authorization-mode=Webhook"]);
        assert!(!is_open(&webhook.config));
    }

    #[test]
    fn auth_from_flags_and_files() {
        // No config file: Go's legacy defaults (anonymous, AlwaysAllow, no webhook).
        let legacy = load(&[]);
        let a = auth_config(&legacy, None).expect("legacy auth");
        assert!(a.anonymous);
        assert!(a.tokens.is_none());
        // A config file's defaults want webhooks: standalone cannot serve them.
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("c.yaml");
        std::fs::write(
            &file,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
        )
        .expect("write");
        let from_file = load(&["--config", file.to_str().expect("utf8")]);
        assert!(!from_file.config.authentication.anonymous.enabled);
        let err = auth_config(&from_file, None).expect_err("webhook needs a client");
        assert!(err.to_string().contains("webhook authentication"), "{err}");
        std::fs::write(
            &file,
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  webhook:\n    enabled: false\nauthorization:\n  mode: AlwaysAllow\ntlsMinVersion: VersionTLS13\n",
        )
        .expect("write");
        let ok = load(&["--config", file.to_str().expect("utf8")]);
        let a = auth_config(&ok, None).expect("auth");
        assert!(!a.anonymous);
        let t = tls_options(&ok, &[]);
        assert_eq!(t.min_version.as_deref(), Some("VersionTLS13"));
        assert_eq!(t.cert_dir, ok.root_dir.join("pki"));
        assert!(t.cert_file.is_none());
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port")
    }

    #[tokio::test]
    async fn listeners_start_per_configuration() {
        use kubelet_core::testing::{FakeContainerManager, SimRuntime};
        let root = tempfile::tempdir().expect("tempdir");
        let (healthz, read_only, secure) = (free_port(), free_port(), free_port());
        let loaded = load(&[
            "--address=127.0.0.1",
            &format!("--healthz-port={healthz}"),
            &format!("--read-only-port={read_only}"),
            &format!("--port={secure}"),
            &format!("--root-dir={}", root.path().display()),
        ]);
        let kubelet = kubelet_core::Kubelet::builder()
            .config(loaded.engine_config())
            .runtime(Arc::new(SimRuntime::new()))
            .container_manager(Arc::new(FakeContainerManager::default()))
            .build()
            .expect("kubelet");
        let shutdown = CancellationToken::new();
        start_servers(&loaded, &kubelet.handle(), None, None, &shutdown)
            .await
            .expect("listeners start");
        // The self-signed serving pair went to <root-dir>/pki.
        assert!(root.path().join("pki/kubelet.crt").exists());
        // The pod resources API listens in <root-dir>/pod-resources.
        let socket = root.path().join("pod-resources/kubelet.sock");
        assert!(tokio::net::UnixStream::connect(&socket).await.is_ok());
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .expect("client");
        let status = |url: String| {
            let client = client.clone();
            async move {
                client
                    .get(url)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
            }
        };
        let cases = [
            (format!("http://127.0.0.1:{healthz}/healthz"), 200),
            (format!("http://127.0.0.1:{healthz}/pods"), 404),
            (format!("http://127.0.0.1:{read_only}/pods"), 200),
            (format!("http://127.0.0.1:{read_only}/configz"), 404),
            // Legacy defaults (no config file): anonymous and AlwaysAllow.
            (format!("https://127.0.0.1:{secure}/configz"), 200),
            (format!("https://127.0.0.1:{secure}/pods"), 200),
            (format!("http://127.0.0.1:{secure}/pods"), 0),
        ];
        for (url, want) in cases {
            assert_eq!(status(url.clone()).await, want, "{url}");
        }
        // A port in use fails start-up.
        let again = start_servers(&loaded, &kubelet.handle(), None, None, &shutdown).await;
        assert!(again.is_err());
        shutdown.cancel();
    }

    #[tokio::test]
    async fn stats_and_spec_from_the_composed_collector() {
        use kubelet_core::testing::{FakeContainerManager, SimRuntime};
        let root = tempfile::tempdir().expect("tempdir");
        let read_only = free_port();
        let loaded = load(&[
            "--address=127.0.0.1",
            "--healthz-port=0",
            &format!("--read-only-port={read_only}"),
            &format!("--port={}", free_port()),
            &format!("--root-dir={}", root.path().display()),
        ]);
        let kubelet = kubelet_core::Kubelet::builder()
            .config(loaded.engine_config())
            .runtime(Arc::new(SimRuntime::new()))
            .container_manager(Arc::new(FakeContainerManager::default()))
            .build()
            .expect("kubelet");
        let handle = kubelet.handle();
        let stats = crate::app::stats_collector(&loaded, &handle).expect("the fake measures");
        assert_eq!(stats.config().root_dir, loaded.root_dir);
        assert_eq!(stats.config().node_name, "node-a");
        let shutdown = CancellationToken::new();
        start_servers(&loaded, &handle, Some(stats), None, &shutdown)
            .await
            .expect("listeners start");
        let get = |path: &str| {
            let url = format!("http://127.0.0.1:{read_only}{path}");
            async move {
                let r = reqwest::get(url).await.expect("get");
                (r.status().as_u16(), r.text().await.expect("body"))
            }
        };
        let (code, body) = get("/stats/summary").await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["node"]["nodeName"], "node-a");
        let (code, body) = get("/spec/").await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(v["num_cores"], 4);
        let (code, body) = get("/metrics/resource").await;
        assert_eq!(code, 200);
        assert!(body.contains("node_cpu_usage_seconds_total 0 "), "{body}");
        shutdown.cancel();
    }
}
