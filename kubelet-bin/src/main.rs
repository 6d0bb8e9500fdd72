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

fn main() -> ExitCode {
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
