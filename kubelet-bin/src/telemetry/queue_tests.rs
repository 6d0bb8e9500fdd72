//! The queue on tokio's paused clock with an exporter that records, fails or hangs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use opentelemetry::trace::{Tracer, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::Mutex;

#[derive(Debug, Clone)]
struct Fake {
    batches: Arc<Mutex<Vec<usize>>>,
    fail: bool,
    hang: Arc<tokio::sync::Semaphore>,
    hanging: bool,
}

impl SpanExporter for Fake {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if self.hanging {
            let _ = self.hang.acquire().await;
        }
        self.batches.lock().unwrap().push(batch.len());
        if self.fail {
            Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                "collector down".into(),
            ))
        } else {
            Ok(())
        }
    }
}

impl Default for Fake {
    fn default() -> Self {
        Fake {
            batches: Arc::default(),
            fail: false,
            hang: Arc::new(tokio::sync::Semaphore::new(0)),
            hanging: false,
        }
    }
}

fn settings() -> QueueSettings {
    QueueSettings {
        max_queue: 8,
        max_batch: 3,
        delay: Duration::from_secs(5),
        error_log_interval: Duration::from_secs(60),
    }
}

fn provider(exporter: Fake, s: QueueSettings) -> (SdkTracerProvider, Handle) {
    let (p, h) = start(exporter, s, "test".into());
    (
        SdkTracerProvider::builder().with_span_processor(p).build(),
        h,
    )
}

fn spans(p: &SdkTracerProvider, n: usize) {
    let t = p.tracer("t");
    for i in 0..n {
        drop(t.start(format!("s{i}")));
    }
}

#[tokio::test(start_paused = true)]
async fn spans_go_out_in_batches_after_the_delay_or_when_full() {
    let fake = Fake::default();
    let (p, h) = provider(fake.clone(), settings());
    spans(&p, 7);
    tokio::time::sleep(Duration::from_millis(10)).await;
    // Two full batches at once; the last one waits for the delay.
    assert_eq!(*fake.batches.lock().unwrap(), vec![3, 3]);
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(*fake.batches.lock().unwrap(), vec![3, 3, 1]);
    spans(&p, 2);
    h.flush(Duration::from_secs(1)).await;
    assert_eq!(*fake.batches.lock().unwrap(), vec![3, 3, 1, 2]);
    spans(&p, 1);
    h.shutdown(Duration::from_secs(1)).await;
    assert_eq!(*fake.batches.lock().unwrap(), vec![3, 3, 1, 2, 1]);
    assert_eq!(h.dropped(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_drops_and_counts_without_blocking() {
    let fake = Fake {
        hanging: true,
        ..Fake::default()
    };
    let (p, h) = provider(fake.clone(), settings());
    // The first batch hangs in the exporter; the queue (8) fills; the rest are dropped.
    spans(&p, 3);
    tokio::time::sleep(Duration::from_millis(10)).await;
    spans(&p, 20);
    assert_eq!(h.dropped(), 12);
    fake.hang.add_permits(100);
    h.flush(Duration::from_secs(1)).await;
    let exported: usize = fake.batches.lock().unwrap().iter().sum();
    assert_eq!(exported, 3 + 8);
}

#[tokio::test(start_paused = true)]
async fn failed_exports_are_dropped_and_the_queue_goes_on() {
    let fake = Fake {
        fail: true,
        ..Fake::default()
    };
    let (p, h) = provider(fake.clone(), settings());
    for _ in 0..5 {
        spans(&p, 3);
        h.flush(Duration::from_secs(1)).await;
    }
    assert_eq!(*fake.batches.lock().unwrap(), vec![3; 5]);
}

#[tokio::test(start_paused = true)]
async fn unsampled_spans_are_not_queued() {
    let fake = Fake::default();
    let (processor, h) = start(fake.clone(), settings(), "test".into());
    let p = SdkTracerProvider::builder()
        .with_sampler(opentelemetry_sdk::trace::Sampler::TraceIdRatioBased(0.0))
        .with_span_processor(processor)
        .build();
    spans(&p, 5);
    h.flush(Duration::from_secs(1)).await;
    assert!(fake.batches.lock().unwrap().is_empty());
}
