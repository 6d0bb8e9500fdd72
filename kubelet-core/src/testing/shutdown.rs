//! [`ScriptedShutdownInhibitor`]: a host whose shutdown signals a test sends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::nodeshutdown::{ShutdownError, ShutdownInhibitor};

/// A [`ShutdownInhibitor`] driven by the test: `true`/`false` sent on the sender from
/// [`new`](Self::new) are the host's shutdown signals; every call is recorded
/// (`start <period>s`, `acquire`, `release`).
pub struct ScriptedShutdownInhibitor {
    events: tokio::sync::Mutex<mpsc::Receiver<bool>>,
    calls: Mutex<Vec<String>>,
    start_error: Option<ShutdownError>,
}

impl ScriptedShutdownInhibitor {
    /// The inhibitor and the sender of its signals; `start_error` is what `start` fails with.
    pub fn new(start_error: Option<ShutdownError>) -> (Arc<Self>, mpsc::Sender<bool>) {
        let (tx, rx) = mpsc::channel(4);
        let inhibitor = Arc::new(ScriptedShutdownInhibitor {
            events: tokio::sync::Mutex::new(rx),
            calls: Mutex::default(),
            start_error,
        });
        (inhibitor, tx)
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether `call` was made.
    pub fn called(&self, call: &str) -> bool {
        self.calls().iter().any(|c| c == call)
    }

    fn record(&self, call: String) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(call);
    }
}

#[async_trait]
impl ShutdownInhibitor for ScriptedShutdownInhibitor {
    async fn start(&self, period: Duration) -> Result<(), ShutdownError> {
        self.record(format!("start {}s", period.as_secs()));
        self.start_error.clone().map_or(Ok(()), Err)
    }
    async fn next_event(&self) -> Option<bool> {
        self.events.lock().await.recv().await
    }
    async fn acquire(&self) -> Result<(), ShutdownError> {
        self.record("acquire".into());
        Ok(())
    }
    async fn release(&self) -> Result<(), ShutdownError> {
        self.record("release".into());
        Ok(())
    }
}
