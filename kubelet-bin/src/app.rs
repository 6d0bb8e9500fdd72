//! Composing and running the stock kubelet, step by step as the Go kubelet does:
//! [`run`] (Go's `Run`/`run`: swap and cgroup checks through the container manager, the CRI
//! runtime, the healthz listener) → [`create_and_init_kubelet`] (Go's
//! `createAndInitKubelet`/`NewMainKubelet`: sources and the engine, through the same builder
//! embedders use) → [`start_kubelet`] (Go's `startKubelet`: run until a signal).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kubelet_cm::{CmConfig, LinuxContainerManager};
use kubelet_core::summary::SummaryCollector;
use kubelet_core::{ContainerManager, ContainerRuntime, Kubelet, KubeletHandle};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use kubelet_sources::apiserver::certificate::ClientCertificates;
use kubelet_sources::apiserver::{ClusterMember, ClusterMemberConfig};
use kubelet_sources::{file::FileSource, http::HttpSource};
use tokio_util::sync::CancellationToken;

use crate::config::LoadedConfig;

/// How long runonce mode waits for its pods.
const RUNONCE_TIMEOUT: Duration = Duration::from_secs(120);

/// The container manager's configuration from the kubelet configuration.
pub fn cm_config(loaded: &LoadedConfig) -> CmConfig {
    let c = &loaded.config;
    CmConfig {
        root_dir: loaded.root_dir.clone(),
        cgroup_root: if c.cgroup_root.is_empty() {
            "/".into()
        } else {
            c.cgroup_root.clone()
        },
        cgroups_per_qos: c.cgroups_per_qos,
        cgroup_driver: c.cgroup_driver.clone(),
        cpu_cfs_quota: c.cpu_cfs_quota,
        cpu_cfs_quota_period: c.cpu_cfs_quota_period.0,
        pod_pids_limit: c.pod_pids_limit,
        max_pods: u32::try_from(c.max_pods).unwrap_or(0),
        fail_swap_on: c.fail_swap_on,
        kube_reserved: c.kube_reserved.clone(),
        system_reserved: c.system_reserved.clone(),
        eviction_hard: c.eviction_hard.clone(),
        reserved_system_cpus: c.reserved_system_cpus.clone(),
        enforce_node_allocatable: c.enforce_node_allocatable.clone(),
        system_reserved_cgroup: c.system_reserved_cgroup.clone(),
        kube_reserved_cgroup: c.kube_reserved_cgroup.clone(),
        system_cgroups: kubelet_cm::system_containers::SystemCgroups {
            kubelet: c.kubelet_cgroups.clone(),
            runtime: loaded.runtime_cgroups.clone(),
            system: c.system_cgroups.clone(),
        },
        ..CmConfig::default()
    }
}

/// The CRI backend's configuration from the kubelet configuration.
pub fn cri_config(loaded: &LoadedConfig) -> CriConfig {
    let image = loaded.image_endpoint();
    CriConfig {
        runtime_endpoint: loaded.runtime_endpoint().to_string(),
        image_endpoint: (image != loaded.runtime_endpoint()).then(|| image.to_string()),
        request_timeout: loaded.config.runtime_request_timeout.0,
        seccomp_profile_root: loaded.root_dir.join("seccomp"),
        seccomp_default: loaded.config.seccomp_default,
        cpu_cfs_quota: loaded.config.cpu_cfs_quota,
        cpu_cfs_quota_period: loaded.config.cpu_cfs_quota_period.0,
        ..CriConfig::default()
    }
}

/// The node's IPs: `--node-ip`, else the node name if it is an IP, else the addresses the node
/// name resolves to (not loopback), else the address of the default route's interface
/// ([`crate::node_address`]).
pub async fn node_ips_of(loaded: &LoadedConfig) -> Vec<String> {
    node_ips(loaded).await
}

async fn node_ips(loaded: &LoadedConfig) -> Vec<String> {
    if !loaded.node_ips.is_empty() {
        return loaded.node_ips.iter().map(IpAddr::to_string).collect();
    }
    if let Ok(ip) = loaded.node_name.parse::<IpAddr>() {
        return vec![ip.to_string()];
    }
    let resolved = match tokio::net::lookup_host((loaded.node_name.as_str(), 0)).await {
        Ok(addrs) => {
            let mut ips: Vec<String> = addrs
                .map(|a| a.ip())
                .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
                .map(|ip| ip.to_string())
                .collect();
            ips.dedup();
            ips
        }
        Err(e) => {
            tracing::debug!(node = %loaded.node_name, error = %e, "the node name does not resolve");
            Vec::new()
        }
    };
    if !resolved.is_empty() {
        return resolved;
    }
    match crate::node_address::default_route_address().await {
        Some(ip) => vec![ip.to_string()],
        None => {
            tracing::warn!(node = %loaded.node_name, "cannot find the node's IP (the node name resolves to none and there is no default route); set --node-ip");
            Vec::new()
        }
    }
}

/// `kubeletCgroups` and `systemCgroups`: the processes placed now and every five minutes
/// (Go's system containers' `ensureStateFunc`), until shutdown.
fn spawn_process_placement(cm: Arc<LinuxContainerManager>, shutdown: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(kubelet_cm::process_placement::PLACEMENT_PERIOD);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let cm = cm.clone();
            match tokio::task::spawn_blocking(move || cm.place_system_processes()).await {
                Ok(errors) => {
                    for e in errors {
                        tracing::warn!(error = %e, "placing processes in the system cgroups");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "process placement task failed"),
            }
        }
    });
}

/// Go's `run`: checks and dependencies, then the kubelet itself.
pub async fn run(mut loaded: LoadedConfig, shutdown: CancellationToken) -> Result<()> {
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    loaded.root_dir = canonical_root_dir(&loaded.root_dir).await?;
    let cluster = cluster(&loaded).await?;
    let (member, certificates) = match cluster {
        Some(c) => (Some(c.member), Some(c.certificates)),
        None => (None, None),
    };
    if member.is_none() {
        tracing::info!(node = %loaded.node_name, "standalone mode: no --kubeconfig, pods come from static sources only");
    }

    let boot = tokio::fs::read_to_string("/proc/stat")
        .await
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<i64>().ok())
        })
        .unwrap_or(0);
    kubelet_core::metrics::global()
        .node_startup
        .record_kubelet_start(boot);
    // Go's run: the kubelet's own OOM score, when permitted (a failure is logged, not fatal).
    let oom_score_adj = loaded.config.oom_score_adj;
    match tokio::task::spawn_blocking(move || kubelet_cm::apply_oom_score_adj(None, oom_score_adj))
        .await
    {
        Ok(Ok(())) => tracing::info!(oom_score_adj, "kubelet OOM score adjusted"),
        Ok(Err(e)) => tracing::warn!(error = %e, "failed to apply oomScoreAdj to the kubelet"),
        Err(e) => tracing::warn!(error = %e, "oomScoreAdj task failed"),
    }
    let cm_cfg = cm_config(&loaded);
    let cm = tokio::task::spawn_blocking(move || LinuxContainerManager::new(cm_cfg))
        .await
        .context("container manager start-up task")?
        .context("starting the container manager")?;
    let runtime = CriRuntime::connect(cri_config(&loaded))
        .await
        .with_context(|| {
            format!(
                "connecting to the container runtime at {}",
                loaded.runtime_endpoint()
            )
        })?;
    check_runtime_cgroup_driver(&loaded.config.cgroup_driver, runtime.cgroup_driver().await)?;
    let runtime: Arc<dyn ContainerRuntime> = Arc::new(
        kubelet_core::metrics::InstrumentedRuntime::new(Arc::new(runtime)),
    );
    let cm = Arc::new(cm);
    spawn_process_placement(cm.clone(), shutdown.clone());
    let cm: Arc<dyn ContainerManager> = cm;
    let kubelet =
        create_and_init_kubelet_with(&loaded, runtime, cm, member.as_ref(), shutdown.clone())
            .await?;
    // The serving certificate manager asks through the node's (rotating) API client.
    let csr_client = member.as_ref().map(ClusterMember::api_client);
    let member_tasks = match member {
        Some(m) => Some(start_cluster_member(m, &kubelet, &shutdown).await),
        None => None,
    };
    let cluster_servers = match &certificates {
        Some(certs) => start_certificates(&loaded, csr_client, certs, &shutdown).await?,
        None => crate::server::ClusterServers::default(),
    };
    // The one summary collector: the container manager's measurements and the runtime.
    let stats = stats_collector(&loaded, &kubelet.handle());
    let result =
        start_kubelet_cluster(&loaded, kubelet, stats, cluster_servers, shutdown.clone()).await;
    if let Some(tasks) = member_tasks {
        // The kubelet stopped (normally on shutdown; on an error, stop the member too).
        shutdown.cancel();
        tasks.wait().await;
    }
    result
}

/// The kubelet's and the runtime's cgroup drivers must agree: with different drivers the
/// runtime puts containers outside the pod cgroups the kubelet made (or fails to parse the
/// cgroup parent), so the mismatch stops the start with both named.
fn check_runtime_cgroup_driver(kubelet: &str, runtime: Option<&str>) -> Result<()> {
    match runtime {
        Some(r) if r != kubelet => anyhow::bail!(
            "cgroupDriver {kubelet:?} differs from the container runtime's cgroup driver {r:?} (containerd: SystemdCgroup = {} in the default runtime's options); set both to the same driver",
            r == "systemd"
        ),
        Some(r) => {
            tracing::info!(cgroup_driver = r, "the container runtime uses the same cgroup driver");
            Ok(())
        }
        None => Ok(()),
    }
}

/// A cluster member with the certificates behind its API clients.
pub struct Cluster {
    /// The member.
    pub member: ClusterMember,
    /// Bootstrap's outcome, and the client certificate's rotation (start it with
    /// [`ClientCertificates::start`]).
    pub certificates: ClientCertificates,
}

/// Cluster mode (`--kubeconfig`): the API clients and the [`ClusterMember`] (API pod source,
/// status sink, node registration and status, lease, events, mirror pods); `None` standalone.
/// Without rotation (see [`cluster`] for the certificates).
pub async fn cluster_member(loaded: &LoadedConfig) -> Result<Option<ClusterMember>> {
    Ok(cluster(loaded).await?.map(|c| c.member))
}

/// [`cluster_member`] with its certificates: TLS bootstrap first with
/// `--bootstrap-kubeconfig` (Go's semantics: a valid `--kubeconfig` skips it), the API
/// clients over a rotating identity with `rotateCertificates`.
pub async fn cluster(loaded: &LoadedConfig) -> Result<Option<Cluster>> {
    let Some(kubeconfig) = &loaded.kubeconfig else {
        if loaded.bootstrap_kubeconfig.is_some() {
            bail!("--bootstrap-kubeconfig needs --kubeconfig: the kubeconfig bootstrapping writes");
        }
        return Ok(None);
    };
    let bad = kubelet_sources::apiserver::node::disallowed_node_labels(&loaded.node_labels);
    if !bad.is_empty() {
        bail!(
            "--node-labels: a node may not set these labels on itself (kubernetes.io and k8s.io labels must be well-known or under kubelet.kubernetes.io/ or node.kubernetes.io/): {}",
            bad.join(", ")
        );
    }
    let Some(certificates) = crate::certificates::client_certificates(loaded).await? else {
        return Ok(None);
    };
    let config = cluster_member_config(loaded, node_ips(loaded).await);
    tracing::info!(node = %loaded.node_name, kubeconfig = %kubeconfig.display(), register = config.node.register_node, rotate_certificates = certificates.manager.is_some(), "cluster mode: pods from the API server and static sources");
    let member = ClusterMember::new(certificates.clients.clone(), config);
    Ok(Some(Cluster {
        member,
        certificates,
    }))
}

/// Starts the client certificate's rotation (when on) and returns what the listeners get
/// from the cluster: the CSR client (`csr_client`, the member's API client) for the serving
/// certificate and, with rotation, a webhook client that follows the rotated certificate.
pub async fn start_certificates(
    loaded: &LoadedConfig,
    csr_client: Option<kube::Client>,
    certificates: &ClientCertificates,
    shutdown: &CancellationToken,
) -> Result<crate::server::ClusterServers> {
    let mut servers = crate::server::ClusterServers {
        csr_client,
        ..Default::default()
    };
    certificates.start(shutdown);
    if let (Some(manager), Some(kc)) = (&certificates.manager, &loaded.kubeconfig) {
        let api = kubelet_server::auth::ApiServerClient::from_kubeconfig(kc)
            .await
            .with_context(|| format!("API server client from {}", kc.display()))?;
        crate::certificates::follow_client_certificate(manager, api.clone(), shutdown.clone());
        servers.api = Some(api);
    }
    Ok(servers)
}

/// The cluster member's configuration from the kubelet configuration and flags.
pub fn cluster_member_config(loaded: &LoadedConfig, node_ips: Vec<String>) -> ClusterMemberConfig {
    let c = &loaded.config;
    let mut cfg = ClusterMemberConfig::new(loaded.node_name.clone());
    cfg.node.labels = loaded.node_labels.clone();
    cfg.node.taints = c
        .register_with_taints
        .iter()
        .map(|t| k8s_openapi::api::core::v1::Taint {
            key: t.key.clone(),
            value: (!t.value.is_empty()).then(|| t.value.clone()),
            effect: t.effect.clone(),
            time_added: None,
        })
        .collect();
    cfg.node.node_ip_specified = !loaded.node_ips.is_empty();
    cfg.node.node_ips = node_ips;
    cfg.node.provider_id = c.provider_id.clone();
    cfg.node.external_cloud_provider = loaded.external_cloud_provider;
    cfg.node.max_images = c.node_status_max_images;
    cfg.node.register_node = c.register_node;
    cfg.node.status_update_frequency = c.node_status_update_frequency.0;
    cfg.node.status_report_frequency = c.node_status_report_frequency.0;
    cfg.node.kubelet_port = c.port;
    cfg.lease.duration_seconds = c.node_lease_duration_seconds;
    // Go renews at a quarter of the lease duration.
    cfg.lease.renew_interval =
        Duration::from_secs(u64::try_from(c.node_lease_duration_seconds).unwrap_or(40)) / 4;
    cfg.lease.request_timeout = c.node_status_update_frequency.0;
    cfg
}

/// Starts the cluster member's tasks for a built kubelet (before it runs).
pub async fn start_cluster_member(
    member: ClusterMember,
    kubelet: &Kubelet,
    shutdown: &CancellationToken,
) -> tokio_util::task::TaskTracker {
    member.start(kubelet.handle(), shutdown.clone()).await
}

/// Go's `createAndInitKubelet`: pod sources and the engine, through the public builder. The
/// plugin manager (CSI drivers, device plugins) it starts ends with the device plugin
/// registry, or at `plugins_shutdown`.
pub async fn create_and_init_kubelet(
    loaded: &LoadedConfig,
    runtime: Arc<dyn ContainerRuntime>,
    cm: Arc<dyn ContainerManager>,
    plugins_shutdown: CancellationToken,
) -> Result<Kubelet> {
    create_and_init_kubelet_with(loaded, runtime, cm, None, plugins_shutdown).await
}

/// How long a call to logind may take.
const LOGIND_TIMEOUT: Duration = Duration::from_secs(10);

/// [`create_and_init_kubelet`] in cluster mode: the member's API source and status sink too
/// (and CSI drivers recorded on the node's API objects).
pub async fn create_and_init_kubelet_with(
    loaded: &LoadedConfig,
    runtime: Arc<dyn ContainerRuntime>,
    cm: Arc<dyn ContainerManager>,
    member: Option<&ClusterMember>,
    plugins_shutdown: CancellationToken,
) -> Result<Kubelet> {
    let mut config = loaded.engine_config();
    config.node_ips = node_ips(loaded).await;
    // Admission (node selectors and affinity) sees the labels the node registers with, as
    // Go's kubelet sees its Node object: the kubelet's own labels plus --node-labels.
    let mut labels = kubelet_sources::apiserver::node::default_labels(
        &kubelet_sources::apiserver::node::NodeConfig::new(loaded.node_name.clone()),
    );
    labels.append(&mut config.node_labels);
    config.node_labels = labels;
    let mut builder = Kubelet::builder()
        .config(config)
        .runtime(runtime)
        .container_manager(cm);
    for p in crate::certificates::credential_providers(loaded).await? {
        builder = builder.credential_provider(Arc::new(p));
    }
    let mut sources = 0;
    // In cluster mode the static pod sources record their events (unknown fields dropped,
    // duplicates refused) through the member's sink; standalone they only log them.
    let events = member.map(|m| m.status_sink());
    if let Some(file) = loaded.file_source_config() {
        tracing::info!(path = %file.path.display(), "static pods from a path");
        let mut source = FileSource::new(file);
        if let Some(e) = events.clone() {
            source = source.with_events(e);
        }
        builder = builder.source(Arc::new(source));
        sources += 1;
    }
    if let Some(http) = loaded.http_source_config() {
        tracing::info!(url = %http.url, "static pods from a URL");
        let mut source = HttpSource::new(http);
        if let Some(e) = events.clone() {
            source = source.with_events(e);
        }
        builder = builder.source(Arc::new(source));
        sources += 1;
    }
    if let Some(m) = member {
        // Config maps, secrets, service-account tokens and services for volumes and env come
        // from the API server, as the node identity may read them.
        let store = kubelet_sources::objects::ApiObjectStore::with_strategy(
            m.api_client(),
            change_detection(
                &loaded
                    .config
                    .config_map_and_secret_change_detection_strategy,
            ),
        )
        .with_service_informer();
        builder = builder
            .source(m.source())
            .status_sink(m.status_sink())
            .object_store(Arc::new(store))
            .node_lister(m.node_lister());
        sources += 1;
    }
    if sources == 0 {
        tracing::warn!("no pod source: set --pod-manifest-path (staticPodPath) or --manifest-url (staticPodURL)");
    }
    if !crate::config::node_shutdown_config(&loaded.config)
        .groups()
        .is_empty()
    {
        // Graceful node shutdown: systemd-logind on the system bus (Go's nodeshutdown).
        builder = builder.shutdown_inhibitor(Arc::new(kubelet_cm::logind::LogindInhibitor::new(
            &kubelet_cm::cgroups::systemd::dbus_client::DbusSystemd::system_bus_address(),
            LOGIND_TIMEOUT,
            std::path::PathBuf::from(kubelet_cm::logind::LOGIND_CONF_DIR),
        )));
    }
    // Device plugins register on `<root-dir>/device-plugins/kubelet.sock` (Go's device
    // manager, on unless the DevicePlugins gate is off).
    let mut device_plugins = None;
    if crate::feature_gates::FeatureGates::new(&loaded.config.feature_gates)
        .enabled("DevicePlugins")
    {
        let registry = Arc::new(kubelet_cm::device_plugins::GrpcDevicePluginRegistry::new(
            loaded
                .root_dir
                .join(kubelet_core::devicemanager::DEVICE_PLUGIN_DIR),
        ));
        builder = builder.device_plugin_registry(registry.clone());
        device_plugins = Some(registry);
    }
    // CSI drivers register through the plugin manager; in cluster mode they are recorded on
    // the node's CSINode, annotation and labels (Go's nodeinfomanager).
    let csi_objects: Arc<dyn kubelet_core::csi::CsiNodeObjects> = match member {
        Some(m) => Arc::new(kubelet_sources::apiserver::ApiCsiNodeObjects::new(
            m.api_client(),
            loaded.node_name.clone(),
        )),
        None => Arc::new(kubelet_core::csi::NoCsiNodeObjects),
    };
    let csi_drivers = Arc::new(kubelet_cm::csi::CsiDrivers::default());
    let csi = Arc::new(kubelet_cm::csi::registration::CsiRegistrationHandler::new(
        csi_drivers.clone(),
        csi_objects,
    ));
    // CSI volumes reach the registered drivers over gRPC.
    builder = builder.csi_node_service(Arc::new(
        kubelet_cm::csi::node_service::GrpcCsiNodeService::new(csi_drivers),
    ));
    spawn_plugin_manager(device_plugins, csi, &loaded.root_dir, plugins_shutdown);
    builder.build().context("building the kubelet")
}

/// The plugin manager on `<root-dir>/plugins_registry` (Go's, started with the kubelet), with
/// the CSI handler and, when there is a device plugin registry, its `DevicePlugin` handler
/// (the manager then starts once the registry listens, inside `Kubelet::run`, and ends with
/// it). It ends at `shutdown` too.
fn spawn_plugin_manager(
    device_plugins: Option<Arc<kubelet_cm::device_plugins::GrpcDevicePluginRegistry>>,
    csi: Arc<kubelet_cm::csi::registration::CsiRegistrationHandler>,
    root_dir: &std::path::Path,
    shutdown: CancellationToken,
) {
    use kubelet_cm::plugin_manager::{
        plugins_registry_dir, PluginHandler, PluginManager, CSI_PLUGIN, DEVICE_PLUGIN,
    };
    let dir = plugins_registry_dir(root_dir);
    tokio::spawn(async move {
        let mut handlers = std::collections::BTreeMap::new();
        handlers.insert(CSI_PLUGIN.to_string(), csi as Arc<dyn PluginHandler>);
        if let Some(registry) = device_plugins.as_ref() {
            let started = tokio::select! {
                started = registry.wait_started() => started,
                _ = shutdown.cancelled() => return,
            };
            if started {
                if let Some(h) = registry.watcher_handler().await {
                    handlers.insert(DEVICE_PLUGIN.to_string(), h);
                }
            }
        }
        let token = shutdown.child_token();
        let run = PluginManager::new(dir, handlers).run(token.clone());
        tokio::pin!(run);
        let registry_over = async {
            match device_plugins.as_ref() {
                Some(r) => r.stopped().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = &mut run => if let Err(e) = r {
                tracing::error!(error = %e, "plugin manager stopped");
            },
            _ = registry_over => {
                token.cancel();
                let _ = run.await;
            }
        }
    });
}

/// Creates `--root-dir` and resolves it to its canonical path (as Go's kubelet does): mount
/// points under it are found by comparing with `/proc/self/mountinfo`, which always shows
/// resolved paths, so a symlinked or relative root would hide them from teardown.
pub async fn canonical_root_dir(root: &std::path::Path) -> Result<std::path::PathBuf> {
    tokio::fs::create_dir_all(root)
        .await
        .with_context(|| format!("--root-dir {}: creating it", root.display()))?;
    tokio::fs::canonicalize(root)
        .await
        .with_context(|| format!("--root-dir {}: resolving it", root.display()))
}

/// The summary collector of a built kubelet: the engine's own ([`KubeletHandle::stats`],
/// over its container manager's stats provider and its runtime), which node status and
/// the eviction manager read too. `None` when the container manager does not measure.
pub fn stats_collector(
    loaded: &LoadedConfig,
    handle: &KubeletHandle,
) -> Option<Arc<SummaryCollector>> {
    let _ = loaded;
    handle.stats()
}

/// Go's `startKubelet`: the HTTP listeners (stats from [`stats_collector`]) and the kubelet,
/// until `shutdown`.
pub async fn start_kubelet(
    loaded: &LoadedConfig,
    kubelet: Kubelet,
    shutdown: CancellationToken,
) -> Result<()> {
    let stats = stats_collector(loaded, &kubelet.handle());
    start_kubelet_with(loaded, kubelet, stats, shutdown).await
}

/// [`start_kubelet`] with the summary collector `/stats/summary`, `/metrics/resource` and
/// `/spec/` serve (`None`: those endpoints are unavailable).
pub async fn start_kubelet_with(
    loaded: &LoadedConfig,
    kubelet: Kubelet,
    stats: Option<Arc<SummaryCollector>>,
    shutdown: CancellationToken,
) -> Result<()> {
    start_kubelet_cluster(
        loaded,
        kubelet,
        stats,
        crate::server::ClusterServers::default(),
        shutdown,
    )
    .await
}

/// [`start_kubelet_with`] for a cluster member: the listeners get the member's API clients
/// (webhooks, the serving certificate's CSRs).
pub async fn start_kubelet_cluster(
    loaded: &LoadedConfig,
    kubelet: Kubelet,
    stats: Option<Arc<SummaryCollector>>,
    cluster: crate::server::ClusterServers,
    shutdown: CancellationToken,
) -> Result<()> {
    let handle = kubelet.handle();
    crate::server::start_servers_with(loaded, &handle, stats, cluster, &shutdown).await?;
    let engine = tokio::spawn(kubelet.run(shutdown.clone()));
    if loaded.runonce {
        let ok = run_once(&handle).await;
        shutdown.cancel();
        engine.await.context("kubelet task")??;
        if !ok {
            bail!("runonce: not every pod is running or succeeded");
        }
        return Ok(());
    }
    engine.await.context("kubelet task")??;
    Ok(())
}

/// Runonce mode: waits for the sources' pods to run (or finish), prints each, and says
/// whether all are Running or Succeeded.
async fn run_once(handle: &KubeletHandle) -> bool {
    let deadline = tokio::time::Instant::now() + RUNONCE_TIMEOUT;
    loop {
        let pods = handle.pods();
        let done = handle.sources_ready()
            && pods.iter().all(|p| {
                let phase = handle
                    .pod_status(kubelet_core::pod::uid(p))
                    .and_then(|s| s.phase)
                    .unwrap_or_default();
                matches!(phase.as_str(), "Running" | "Succeeded" | "Failed")
            });
        if done || tokio::time::Instant::now() >= deadline {
            let mut ok = done;
            for p in &pods {
                let phase = handle
                    .pod_status(kubelet_core::pod::uid(p))
                    .and_then(|s| s.phase)
                    .unwrap_or_else(|| "Unknown".into());
                ok &= matches!(phase.as_str(), "Running" | "Succeeded");
                println!("pod {}: {phase}", kubelet_core::pod::full_name(p));
            }
            return ok;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `configMapAndSecretChangeDetectionStrategy` (validated: `Watch`, `Cache` or `Get`). Go's
/// `Cache` takes its TTL from the node's `node.alpha.kubernetes.io/ttl` annotation, 1m when
/// the annotation is absent; kubelet-rs always uses 1m.
fn change_detection(strategy: &str) -> kubelet_sources::objects::ChangeDetection {
    use kubelet_sources::objects::{ChangeDetection, DEFAULT_TTL};
    match strategy {
        "Cache" => ChangeDetection::Cache(DEFAULT_TTL),
        "Get" => ChangeDetection::Get,
        _ => ChangeDetection::Watch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(args: &[&str]) -> LoadedConfig {
        crate::config::load_for_test(args, "Node-A")
    }

    #[test]
    fn flags_reach_the_backends_and_the_engine() {
        let l = load(&[
            "--container-runtime-endpoint=unix:///run/x.sock",
            "--runtime-request-timeout=30s",
            "--cgroup-root=/kubelet-rs",
            "--max-pods=20",
            "--fail-swap-on=false",
            "--kube-reserved=cpu=100m,memory=64Mi",
        ]);
        let cri = cri_config(&l);
        assert_eq!(cri.runtime_endpoint, "unix:///run/x.sock");
        assert_eq!(cri.image_endpoint, None);
        assert_eq!(cri.request_timeout, Duration::from_secs(30));
        let cm = cm_config(&l);
        assert_eq!(cm.cgroup_root, "/kubelet-rs");
        assert_eq!(cm.max_pods, 20);
        assert!(!cm.fail_swap_on);
        assert_eq!(
            cm.kube_reserved.get("memory").map(String::as_str),
            Some("64Mi")
        );
        let engine = l.engine_config();
        assert_eq!(engine.node_name, "node-a");
        assert_eq!(engine.max_pods, 20);
        // Defaults: a separate image endpoint only when asked for; cgroup root "/".
        let d = load(&["--image-service-endpoint=unix:///run/img.sock"]);
        assert_eq!(
            cri_config(&d).image_endpoint.as_deref(),
            Some("unix:///run/img.sock")
        );
        assert_eq!(cm_config(&d).cgroup_root, "/");
    }

    #[test]
    fn the_runtimes_cgroup_driver_must_be_the_kubelets() {
        check_runtime_cgroup_driver("systemd", Some("systemd")).unwrap();
        check_runtime_cgroup_driver("cgroupfs", None).unwrap();
        let err = check_runtime_cgroup_driver("systemd", Some("cgroupfs"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cgroupDriver \"systemd\" differs from the container runtime's cgroup driver \"cgroupfs\" (containerd: SystemdCgroup = false"),
            "{err}"
        );
        assert_eq!(
            cm_config(&load(&["--cgroup-driver=systemd"])).cgroup_driver,
            "systemd"
        );
    }

    #[tokio::test]
    async fn node_labels_a_node_may_not_set_are_refused() {
        let l = load(&[
            "--kubeconfig=/nonexistent/kubeconfig",
            "--node-labels=node-role.kubernetes.io/master=,tier=edge",
        ]);
        let err = cluster_member(&l).await.expect_err("refused").to_string();
        assert!(err.contains("node-role.kubernetes.io/master"), "{err}");
        assert!(!err.contains("tier"), "{err}");
        // Without bad labels the kubeconfig is read (and here it is missing).
        let l = load(&["--kubeconfig=/nonexistent/kubeconfig"]);
        let err = format!("{:#}", cluster_member(&l).await.expect_err("no kubeconfig"));
        assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    }

    #[test]
    fn cluster_flags_reach_the_cluster_member() {
        let l = load(&[
            "--kubeconfig=/etc/kubelet.kubeconfig",
            "--node-labels=tier=edge",
            "--register-with-taints=dedicated=infra:NoSchedule",
            "--register-node=false",
            "--node-status-update-frequency=20s",
            "--port=10350",
        ]);
        let cfg = cluster_member_config(&l, vec!["10.0.0.7".into()]);
        assert_eq!(cfg.node.node_name, "node-a");
        assert_eq!(cfg.node.labels["tier"], "edge");
        assert_eq!(cfg.node.taints.len(), 1);
        assert_eq!(cfg.node.taints[0].key, "dedicated");
        assert_eq!(cfg.node.taints[0].value.as_deref(), Some("infra"));
        assert_eq!(cfg.node.taints[0].effect, "NoSchedule");
        assert!(!cfg.node.register_node);
        assert_eq!(cfg.node.status_update_frequency, Duration::from_secs(20));
        assert_eq!(cfg.node.status_report_frequency, Duration::from_secs(300));
        assert_eq!(cfg.node.kubelet_port, 10350);
        assert_eq!(cfg.node.node_ips, ["10.0.0.7"]);
        assert_eq!(cfg.lease.duration_seconds, 40);
        assert_eq!(cfg.lease.renew_interval, Duration::from_secs(10));
        assert!(!cfg.node.external_cloud_provider && cfg.node.provider_id.is_empty());
        assert_eq!(cfg.node.max_images, 50);
        assert!(!cfg.node.node_ip_specified, "detected, not given");
        let l = load(&[
            "--cloud-provider=external",
            "--provider-id=gce://project/zone/node-a",
            "--node-status-max-images=-1",
            "--node-ip=10.0.0.8",
        ]);
        let cfg = cluster_member_config(&l, vec!["10.0.0.8".into()]);
        assert!(cfg.node.external_cloud_provider && cfg.node.node_ip_specified);
        assert_eq!(cfg.node.provider_id, "gce://project/zone/node-a");
        assert_eq!(cfg.node.max_images, -1);
    }
}
