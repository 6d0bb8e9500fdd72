//! OpenTelemetry span export (Go's `KubeletTracing`): the `tracing` configuration
//! ([`TracingConfiguration`]) becomes a [`tracing_subscriber`] layer that takes the spans of
//! [`kubelet_core::telemetry`] (pod worker steps, CRI calls) and sends them over OTLP/gRPC in
//! batches (see [`QueueSettings`]). Without a `tracing` configuration no layer is installed and the spans
//! cost a branch each.
//!
//! As component-base's `tracing.NewProvider`: the endpoint defaults to `localhost:4317`
//! (plain text), the sampler is parent-based over `samplingRatePerMillion / 1e6` (0, the
//! default, samples nothing that has no sampled parent), the resource names the service
//! `kubelet` and the host by the node name.

mod endpoint;
mod queue;

use std::time::Duration;

use anyhow::{Context, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithTonicConfig;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::types::TracingConfiguration;
pub use endpoint::{parse_endpoint, OtlpEndpoint, DEFAULT_ENDPOINT};
use opentelemetry_otlp::WithExportConfig;
pub use queue::QueueSettings;

/// Go's `componentKubelet`, the `service.name` of the spans.
const SERVICE_NAME: &str = "kubelet";
/// How long one OTLP export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The layer [`install`] adds for a subscriber `S`.
pub type OtelLayer<S> = Filtered<
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    Targets,
    S,
>;

/// The running exporter: flush it in tests, shut it down at exit to send what is queued.
#[derive(Debug, Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    queue: queue::Handle,
    endpoint: String,
    sampling_rate_per_million: i32,
}

impl Telemetry {
    /// Logs where spans go (once the subscriber is installed).
    pub fn log_started(&self) {
        tracing::info!(
            endpoint = %self.endpoint,
            sampling_rate_per_million = self.sampling_rate_per_million,
            "exporting OpenTelemetry spans"
        );
    }

    /// Exports every span ended so far (waits for the export, at most `timeout`).
    pub async fn flush(&self, timeout: Duration) {
        self.queue.flush(timeout).await;
    }

    /// Spans dropped because the queue was full.
    pub fn dropped_spans(&self) -> u64 {
        self.queue.dropped()
    }

    /// Exports what is queued (at most `timeout`) and stops the exporter.
    pub async fn shutdown(&self, timeout: Duration) {
        self.queue.shutdown(timeout).await;
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "tracer provider shutdown");
        }
    }
}

/// The sampling ratio of `samplingRatePerMillion` (unset: 0, as Go).
pub fn sampling_ratio(config: &TracingConfiguration) -> f64 {
    f64::from(
        config
            .sampling_rate_per_million
            .unwrap_or(0)
            .clamp(0, 1_000_000),
    ) / 1e6
}

/// Builds the exporter for `config` on the current tokio runtime (the node's name is the
/// resource's `host.name`) and the layer that feeds it; the layer takes only
/// [`kubelet_core::telemetry::SPAN_TARGET`].
pub fn install<S>(
    config: &TracingConfiguration,
    node_name: &str,
    settings: QueueSettings,
) -> Result<(OtelLayer<S>, Telemetry)>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let endpoint = parse_endpoint(config.endpoint.as_deref())
        .map_err(|e| anyhow::anyhow!("tracing.endpoint: {e}"))?;
    let channel = endpoint.lazy_channel().context("tracing.endpoint")?;
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_channel(channel)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .context("building the OTLP span exporter")?;
    let resource = Resource::builder_empty()
        .with_attributes([
            KeyValue::new("service.name", SERVICE_NAME),
            KeyValue::new("host.name", node_name.to_string()),
        ])
        .build();
    opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource);
    let (processor, queue) = queue::start(exporter, settings, endpoint.to_string());
    let provider = SdkTracerProvider::builder()
        .with_resource(resource)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            sampling_ratio(config),
        ))))
        .with_span_processor(processor)
        .build();
    let tracer = provider.tracer(kubelet_core::telemetry::INSTRUMENTATION_SCOPE);
    kubelet_core::telemetry::set_traceparent_source(traceparent);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_level(false)
        .with_filter(
            Targets::new().with_target(kubelet_core::telemetry::SPAN_TARGET, tracing::Level::TRACE),
        );
    Ok((
        layer,
        Telemetry {
            provider,
            queue,
            endpoint: endpoint.to_string(),
            sampling_rate_per_million: config.sampling_rate_per_million.unwrap_or(0),
        },
    ))
}

/// The W3C `traceparent` of a span the OpenTelemetry layer tracks (`None` for one it does not).
fn traceparent(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[tokio::test]
    async fn cri_spans_carry_their_trace_to_the_runtime() {
        let config = TracingConfiguration {
            endpoint: Some("127.0.0.1:1".into()),
            sampling_rate_per_million: Some(1_000_000),
        };
        let (layer, telemetry) = install(&config, "node", QueueSettings::default()).unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        let _default = tracing::subscriber::set_default(subscriber);
        let parent = kubelet_core::telemetry::pod_span(
            kubelet_core::telemetry::PodStep::Sync,
            "ns",
            "p",
            "uid",
            None,
        );
        let call = parent.in_scope(|| {
            kubelet_core::telemetry::grpc_client_span("/runtime.v1.RuntimeService/Version")
        });
        let parent_tp = kubelet_core::telemetry::traceparent(&parent).expect("parent traceparent");
        let call_tp = kubelet_core::telemetry::traceparent(&call).expect("call traceparent");
        let fields = |tp: &str| tp.split('-').map(str::to_string).collect::<Vec<_>>();
        let (p, c) = (fields(&parent_tp), fields(&call_tp));
        assert_eq!((p.len(), c.len()), (4, 4), "{parent_tp} {call_tp}");
        assert_eq!(c[0], "00");
        assert_eq!(c[1], p[1], "one trace");
        assert_ne!(c[2], p[2], "the call's own span id");
        assert_eq!(c[3], "01", "sampled");
        assert_eq!(c[1].len(), 32);
        assert_eq!(c[2].len(), 16);
        drop((call, parent));
        telemetry.shutdown(Duration::from_millis(100)).await;
    }
}
