//! The stock kubelet-rs node binary: parse the flags and configuration, build the kubelet
//! through the library's builder, run it, and drain on SIGTERM/SIGINT.

use std::process::ExitCode;

use kubelet_bin::config::{self, ConfigError};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_logging(verbosity: u8) {
    let level = match verbosity {
        0..=1 => "info",
        2..=4 => "info,kubelet_core=debug,kubelet_runtime_cri=debug,kubelet_sources=debug,kubelet_cm=debug,kubelet_bin=debug",
        _ => "debug,kubelet_core=trace,kubelet_runtime_cri=trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
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
        Err(e) => {
            eprintln!("kubelet: {e}");
            return ExitCode::from(1);
        }
    };
    init_logging(loaded.verbosity);
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
    let result = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        tokio::spawn(wait_for_signal(shutdown.clone()));
        kubelet_bin::app::run(loaded, shutdown).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubelet: {e:#}");
            ExitCode::from(1)
        }
    }
}
