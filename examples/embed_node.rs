//! # Embedding the stock node
//!
//! Builds the node the `kubelet` binary builds, from the library crates, step by step as
//! `kubelet-bin`'s `app::run` does: the CRI runtime (`kubelet_runtime_cri::CriRuntime`,
//! counted by `InstrumentedRuntime`), the Linux container manager
//! (`kubelet_cm::LinuxContainerManager`: cgroups, capacity, swap check), static pods from a
//! manifest directory (`kubelet_sources::file::FileSource`), the engine
//! (`kubelet_core::Kubelet::builder()`), and the healthz and read-only HTTP listeners of
//! `kubelet_server`. Then it runs until SIGINT/SIGTERM; pods keep running after it stops,
//! as with the Go kubelet.
//!
//! ```text
//! cargo run -p kubelet-bin --example embed_node -- \
//!     --endpoint unix:///run/containerd/containerd.sock \
//!     --root-dir /var/lib/embedded-node --manifests /etc/embedded-node/manifests
//! ```
//!
//! Like any kubelet, the node owns every kubelet-made pod of its containerd: it stops the
//! ones it was not given (orphans). Point it at a containerd of its own. `--dry-run` builds
//! everything — connects to the runtime, starts the container manager, binds the ports,
//! builds the engine — and exits without touching a pod.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use kubelet_cm::{CmConfig, LinuxContainerManager};
use kubelet_core::metrics::InstrumentedRuntime;
use kubelet_core::{Config, ContainerRuntime, Kubelet, KubeletHandle};
use kubelet_runtime_cri::{CriConfig, CriRuntime};
use kubelet_server::{Endpoints, Host, KubeletHost};
use kubelet_sources::file::{Config as FileConfig, FileSource};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Errors of building and running the node.
pub type BoxError = Box<dyn Error + Send + Sync>;

const USAGE: &str = "\
usage: embed_node --endpoint URL --root-dir DIR --manifests DIR [options]

  --endpoint URL         CRI runtime endpoint (unix:///path/to/containerd.sock)
  --root-dir DIR         the node's state directory (created)
  --manifests DIR        static pod manifests
  --node-name NAME       node name (default: embedded-node)
  --cgroup-root PATH     cgroup root for the pods; must exist (default: /)
  --log-dir DIR          pod logs under DIR/pods, symlinks under DIR/containers (default: /var/log)
  --healthz-port N       healthz on 127.0.0.1:N, 0 disables (default: 10248)
  --read-only-port N     read-only API on 127.0.0.1:N, 0 disables (default: 0)
  --fail-swap-on BOOL    refuse to start when swap is on (default: true)
  --dry-run              build everything, then exit without running pods
  --help                 this text";

/// The command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// CRI endpoint.
    pub endpoint: String,
    /// State directory.
    pub root_dir: PathBuf,
    /// Static pod manifests.
    pub manifests: PathBuf,
    /// Node name.
    pub node_name: String,
    /// Cgroup root of the pods.
    pub cgroup_root: String,
    /// Parent of the `pods` and `containers` log directories.
    pub log_dir: PathBuf,
    /// Where healthz listens (`None`: off).
    pub healthz: Option<SocketAddr>,
    /// Where the read-only API listens (`None`: off).
    pub read_only: Option<SocketAddr>,
    /// Refuse to start with swap on.
    pub fail_swap_on: bool,
    /// Build, then exit.
    pub dry_run: bool,
}

impl Options {
    /// Parses `--flag value` and `--flag=value` arguments; `Ok(None)` for `--help`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
        let mut o = Options {
            endpoint: String::new(),
            root_dir: PathBuf::new(),
            manifests: PathBuf::new(),
            node_name: "embedded-node".into(),
            cgroup_root: "/".into(),
            log_dir: PathBuf::from("/var/log"),
            healthz: local(10248),
            read_only: None,
            fail_swap_on: true,
            dry_run: false,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) => (f.to_string(), Some(v.to_string())),
                None => (arg, None),
            };
            match flag.as_str() {
                "--help" | "-h" => return Ok(None),
                "--dry-run" => {
                    o.dry_run = true;
                    continue;
                }
                _ => {}
            }
            let value = match inline.or_else(|| args.next()) {
                Some(v) => v,
                None => return Err(format!("{flag} needs a value")),
            };
            let port = |v: &str| -> Result<Option<SocketAddr>, String> {
                let n: u16 = v.parse().map_err(|_| format!("{flag}: bad port {v:?}"))?;
                Ok(if n == 0 { None } else { local(n) })
            };
            match flag.as_str() {
                "--endpoint" => o.endpoint = value,
                "--root-dir" => o.root_dir = value.into(),
                "--manifests" => o.manifests = value.into(),
                "--node-name" => o.node_name = value,
                "--cgroup-root" => o.cgroup_root = value,
                "--log-dir" => o.log_dir = value.into(),
                "--healthz-port" => o.healthz = port(&value)?,
                "--read-only-port" => o.read_only = port(&value)?,
                "--fail-swap-on" => {
                    o.fail_swap_on = value
                        .parse()
                        .map_err(|_| format!("--fail-swap-on: bad bool {value:?}"))?
                }
                other => return Err(format!("unknown flag {other}")),
            }
        }
        for (flag, missing) in [
            ("--endpoint", o.endpoint.is_empty()),
            ("--root-dir", o.root_dir.as_os_str().is_empty()),
            ("--manifests", o.manifests.as_os_str().is_empty()),
        ] {
            if missing {
                return Err(format!("{flag} is required"));
            }
        }
        Ok(Some(o))
    }
}

fn local(port: u16) -> Option<SocketAddr> {
    Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// A built node: the engine and its bound listeners, not running yet.
pub struct Node {
    kubelet: Kubelet,
    listeners: Vec<(Endpoints, TcpListener)>,
}

impl Node {
    /// Read access to the engine (pods, statuses, health).
    pub fn handle(&self) -> KubeletHandle {
        self.kubelet.handle()
    }

    /// The address a listener is bound to.
    pub fn local_addr(&self, endpoints: Endpoints) -> Option<SocketAddr> {
        let (_, l) = self.listeners.iter().find(|(e, _)| *e == endpoints)?;
        l.local_addr().ok()
    }

    /// Serves the listeners and runs the engine until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), BoxError> {
        let host: Arc<dyn Host> = Arc::new(KubeletHost::new(self.kubelet.handle()));
        for (endpoints, listener) in self.listeners {
            let serve = kubelet_server::serve(listener, host.clone(), endpoints, shutdown.clone());
            tokio::spawn(serve);
        }
        self.kubelet.run(shutdown).await?;
        Ok(())
    }
}

/// Connects to the CRI runtime (and checks it speaks CRI v1).
pub async fn connect(o: &Options) -> Result<CriRuntime, BoxError> {
    let config = CriConfig {
        runtime_endpoint: o.endpoint.clone(),
        pod_logs_dir: o.log_dir.join("pods"),
        containers_log_dir: o.log_dir.join("containers"),
        ..CriConfig::default()
    };
    Ok(CriRuntime::connect(config).await?)
}

/// Builds the node on `runtime`: the container manager, the static pod source, the engine,
/// and the listeners (bound here, so a port in use fails the build).
pub async fn build(o: &Options, runtime: Arc<dyn ContainerRuntime>) -> Result<Node, BoxError> {
    tokio::fs::create_dir_all(&o.root_dir).await?;
    // As kubelet-bin: the canonical root, so mounts under it are recognised at teardown.
    let root_dir = tokio::fs::canonicalize(&o.root_dir).await?;
    let cm_config = CmConfig {
        root_dir: root_dir.clone(),
        cgroup_root: o.cgroup_root.clone(),
        fail_swap_on: o.fail_swap_on,
        ..CmConfig::default()
    };
    let cm = tokio::task::spawn_blocking(move || LinuxContainerManager::new(cm_config)).await??;
    let kubelet = Kubelet::builder()
        .config(Config {
            node_name: o.node_name.clone(),
            root_dir,
            pod_logs_dir: o.log_dir.join("pods"),
            container_logs_dir: o.log_dir.join("containers"),
            ..Config::default()
        })
        .runtime(runtime)
        .container_manager(Arc::new(cm))
        .source(Arc::new(FileSource::new(FileConfig::new(
            &o.manifests,
            o.node_name.clone(),
        ))))
        .build()?;
    let mut listeners = Vec::new();
    for (endpoints, addr) in [
        (Endpoints::Healthz, o.healthz),
        (Endpoints::ReadOnly, o.read_only),
    ] {
        if let Some(addr) = addr {
            listeners.push((endpoints, TcpListener::bind(addr).await?));
        }
    }
    Ok(Node { kubelet, listeners })
}

async fn run(o: Options) -> Result<(), BoxError> {
    let cri = connect(&o).await?;
    let runtime: Arc<dyn ContainerRuntime> = Arc::new(InstrumentedRuntime::new(Arc::new(cri)));
    let node = build(&o, runtime).await?;
    let addr = |e| {
        node.local_addr(e)
            .map_or("off".to_string(), |a| a.to_string())
    };
    println!(
        "node {} built: runtime {}, static pods from {}, healthz {}, read-only {}",
        o.node_name,
        o.endpoint,
        o.manifests.display(),
        addr(Endpoints::Healthz),
        addr(Endpoints::ReadOnly)
    );
    if o.dry_run {
        println!("dry run: not running pods");
        return Ok(());
    }
    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        } else {
            let _ = tokio::signal::ctrl_c().await;
        }
        on_signal.cancel();
    });
    let handle = node.handle();
    node.run(shutdown).await?;
    for p in handle.pods() {
        let phase = handle
            .pod_status(kubelet_core::pod::uid(&p))
            .and_then(|s| s.phase)
            .unwrap_or_else(|| "Unknown".into());
        println!(
            "pod {}: {phase} (keeps running)",
            kubelet_core::pod::full_name(&p)
        );
    }
    // Give the listeners a moment to close their connections.
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("embed_node: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embed_node: {e}");
            ExitCode::from(1)
        }
    }
}
