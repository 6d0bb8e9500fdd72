//! The stock kubelet-rs node binary: parse the flags and configuration, build the kubelet
//! through the library's builder, run it, and drain on SIGTERM/SIGINT.

use std::process::ExitCode;

use kubelet_bin::config::{self, ConfigError};
use tokio_util::sync::CancellationToken;

/// Logs as configured ([`kubelet_bin::logging`]: filtered by `-v`/`--vmodule` or `RUST_LOG`,
/// to standard error or klog's `--log-file`) and, with a `tracing` configuration, the
/// OpenTelemetry exporter (its own filter: only the exported spans). Runs inside the tokio
/// runtime: the exporter's task and channel live on it.
fn init_logging(
    loaded: &config::LoadedConfig,
) -> anyhow::Result<Option<kubelet_bin::telemetry::Telemetry>> {
    use anyhow::Context as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let fmt = loaded.log.layer().context("opening the log output")?;
    let (otel, telemetry) = match &loaded.config.tracing {
        Some(t) => {
            let (layer, telemetry) = kubelet_bin::telemetry::install(
                t,
                &loaded.node_name,
                kubelet_bin::telemetry::QueueSettings::default(),
            )?;
            (Some(layer), Some(telemetry))
        }
        None => (None, None),
    };
    tracing_subscriber::registry().with(fmt).with(otel).init();
    if let Some(t) = &telemetry {
        t.log_started();
    }
    Ok(telemetry)
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            tracing::error!("cannot install signal handlers");
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
        _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
        _ = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

/// Set when the kubelet has started over in `kubeletCgroups` (to that cgroup).
const STARTED_IN_CGROUP: &str = "KUBELET_RS_STARTED_IN_KUBELET_CGROUP";

/// `kubeletCgroups`: the Go kubelet moves itself in once its container manager runs, after
/// most of its start-up; kubelet-rs moves itself in first and starts over there (the same
/// binary and arguments, exec'd in place, same pid), so that the cgroup accounts for all of
/// the kubelet's memory and page faults (on cgroup v1 what was charged before a move stays
/// behind). Returns what failed (the kubelet then goes on where it is; the container manager
/// moves it later, as Go's does); returns only when not re-executing.
fn start_in_kubelet_cgroup(cgroup: &str) -> Option<String> {
    use std::os::unix::process::CommandExt as _;
    if cgroup.is_empty() || std::env::var(STARTED_IN_CGROUP).as_deref() == Ok(cgroup) {
        return None;
    }
    match kubelet_cm::process_placement::place_kubelet_now(std::path::Path::new("/"), cgroup) {
        Ok(true) => {}
        // A containerized kubelet leaves its cgroup alone.
        Ok(false) => return None,
        Err(e) => return Some(e),
    }
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "kubelet".into());
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env(STARTED_IN_CGROUP, cgroup)
        .exec();
    Some(format!("starting over in {cgroup:?}: {error}"))
}

fn main() -> ExitCode {
    // Before any thread starts (see heap_trim::one_arena).
    kubelet_bin::heap_trim::one_arena();
    let loaded = match config::load(std::env::args_os()) {
        Ok(l) => l,
        Err(ConfigError::Flags(e)) => e.exit(),
        Err(ConfigError::Help(text) | ConfigError::Version(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("kubelet: {e}");
            return ExitCode::from(1);
        }
    };
    let placement = start_in_kubelet_cgroup(&loaded.config.kubelet_cgroups);
    let runtime = match kubelet_bin::async_runtime::build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kubelet: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let telemetry = match runtime.block_on(async { init_logging(&loaded) }) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kubelet: {e:#}");
            return ExitCode::from(1);
        }
    };
    if let Some(e) = placement {
        tracing::warn!(error = %e, "placing the kubelet in kubeletCgroups");
    }
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        // Go's `run` takes the lock before anything else; it is held until the end.
        let _lock = kubelet_bin::lock_file::take(
            loaded.lock_file.as_deref(),
            loaded.exit_on_lock_contention,
            &shutdown,
        )
        .await?;
        tokio::spawn(wait_for_signal(shutdown.clone()));
        tokio::spawn(kubelet_bin::heap_trim::run(
            kubelet_bin::heap_trim::PERIOD,
            shutdown.clone(),
        ));
        kubelet_bin::app::run(loaded, shutdown).await
    });
    if let Some(t) = telemetry {
        // Send what is queued before exiting (bounded).
        runtime.block_on(t.shutdown(std::time::Duration::from_secs(5)));
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubelet: {e:#}");
            ExitCode::from(1)
        }
    }
}
