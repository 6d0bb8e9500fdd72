//! The bounded batch queue between the tracer and the OTLP exporter.
//!
//! Ended spans go into a bounded channel from whatever thread ends them ([`QueueProcessor`]'s
//! `on_end` never blocks: a full queue drops the span and counts it). One task on the tokio
//! runtime owns the exporter and loops: collect spans; export a batch when it reaches
//! [`QueueSettings::max_batch`], when [`QueueSettings::delay`] passes with spans waiting, or when
//! asked to flush; on shutdown, export what is left (bounded by the caller's timeout) and end.
//! Failed exports are dropped (no retry) and logged at most once per
//! [`QueueSettings::error_log_interval`], with how many failed since the last message; the
//! dropped-span count is logged the same way.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Sizes and intervals of the queue (Go's batcher defaults).
#[derive(Debug, Clone, Copy)]
pub struct QueueSettings {
    /// Spans held at most; more are dropped (Go: 2048).
    pub max_queue: usize,
    /// Spans per export at most (Go: 512).
    pub max_batch: usize,
    /// How long spans wait for a batch to fill (Go: 5s).
    pub delay: Duration,
    /// How often an export failure or dropped spans are logged at most.
    pub error_log_interval: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            max_queue: 2048,
            max_batch: 512,
            delay: Duration::from_secs(5),
            error_log_interval: Duration::from_secs(60),
        }
    }
}

/// The tracer provider's span processor: hands ended sampled spans to the queue.
#[derive(Debug)]
pub(crate) struct QueueProcessor {
    spans: mpsc::Sender<SpanData>,
    dropped: Arc<AtomicU64>,
}

/// Control of the queue's task.
#[derive(Debug, Clone)]
pub(crate) struct Handle {
    flush: mpsc::Sender<oneshot::Sender<()>>,
    dropped: Arc<AtomicU64>,
    stop: CancellationToken,
    done: Arc<tokio::sync::Notify>,
    finished: Arc<std::sync::atomic::AtomicBool>,
}

/// Starts the queue's task for `exporter` on the current tokio runtime.
pub(crate) fn start<E: SpanExporter + 'static>(
    exporter: E,
    settings: QueueSettings,
    endpoint: String,
) -> (QueueProcessor, Handle) {
    let (spans_tx, spans_rx) = mpsc::channel(settings.max_queue.max(1));
    let (flush_tx, flush_rx) = mpsc::channel(8);
    let dropped = Arc::new(AtomicU64::new(0));
    let handle = Handle {
        flush: flush_tx,
        dropped: dropped.clone(),
        stop: CancellationToken::new(),
        done: Arc::new(tokio::sync::Notify::new()),
        finished: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    };
    let worker = Worker {
        exporter,
        settings,
        endpoint,
        batch: Vec::new(),
        dropped: dropped.clone(),
        failed_since_log: 0,
        dropped_logged: 0,
        last_log: None,
    };
    let h = handle.clone();
    tokio::spawn(async move {
        worker.run(spans_rx, flush_rx, h.stop.clone()).await;
        h.finished.store(true, Ordering::SeqCst);
        h.done.notify_waiters();
    });
    (
        QueueProcessor {
            spans: spans_tx,
            dropped,
        },
        handle,
    )
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.spans.try_send(span) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        // The export runs on the queue's task; Telemetry::flush waits for it.
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

impl Handle {
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub(crate) async fn flush(&self, timeout: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.flush.send(tx).await.is_ok() {
            let _ = tokio::time::timeout(timeout, rx).await;
        }
    }

    pub(crate) async fn shutdown(&self, timeout: Duration) {
        let done = self.done.notified();
        self.stop.cancel();
        if !self.finished.load(Ordering::SeqCst) {
            let _ = tokio::time::timeout(timeout, done).await;
        }
    }
}

struct Worker<E> {
    exporter: E,
    settings: QueueSettings,
    endpoint: String,
    batch: Vec<SpanData>,
    dropped: Arc<AtomicU64>,
    failed_since_log: u64,
    dropped_logged: u64,
    last_log: Option<std::time::Instant>,
}

impl<E: SpanExporter> Worker<E> {
    async fn run(
        mut self,
        mut spans: mpsc::Receiver<SpanData>,
        mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
        stop: CancellationToken,
    ) {
        let delay = self.settings.delay.max(Duration::from_millis(1));
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + delay, delay);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => {
                    while let Ok(s) = spans.try_recv() {
                        self.push(s).await;
                    }
                    self.export().await;
                    let _ = self.exporter.shutdown();
                    return;
                }
                Some(reply) = flushes.recv() => {
                    while let Ok(s) = spans.try_recv() {
                        self.push(s).await;
                    }
                    self.export().await;
                    let _ = reply.send(());
                }
                span = spans.recv() => match span {
                    Some(s) => self.push(s).await,
                    None => {
                        self.export().await;
                        return;
                    }
                },
                _ = tick.tick() => self.export().await,
            }
        }
    }

    async fn push(&mut self, span: SpanData) {
        self.batch.push(span);
        if self.batch.len() >= self.settings.max_batch.max(1) {
            self.export().await;
        }
    }

    async fn export(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            let n = batch.len();
            let result = tokio::time::timeout(
                super::EXPORT_TIMEOUT + Duration::from_secs(1),
                self.exporter.export(batch),
            )
            .await;
            let error = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("export timed out".to_string()),
            };
            if let Some(error) = error {
                self.failed_since_log += 1;
                self.log(Some((n, error)));
            }
        }
        if self.dropped.load(Ordering::Relaxed) != self.dropped_logged {
            self.log(None);
        }
    }

    /// Logs an export failure or newly dropped spans, at most once per interval.
    fn log(&mut self, failure: Option<(usize, String)>) {
        let now = kubelet_core::clock::monotonic_now();
        if let Some(last) = self.last_log {
            if now.saturating_duration_since(last) < self.settings.error_log_interval {
                return;
            }
        }
        self.last_log = Some(now);
        let dropped = self.dropped.load(Ordering::Relaxed);
        let newly_dropped = dropped - self.dropped_logged.min(dropped);
        self.dropped_logged = dropped;
        match failure {
            Some((spans, error)) => tracing::warn!(
                endpoint = %self.endpoint,
                spans,
                failed_exports = self.failed_since_log,
                dropped_spans = newly_dropped,
                error = %error,
                "exporting OpenTelemetry spans failed; the spans are dropped"
            ),
            None => tracing::warn!(
                endpoint = %self.endpoint,
                dropped_spans = newly_dropped,
                "OpenTelemetry span queue full; spans dropped"
            ),
        }
        self.failed_since_log = 0;
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
