//! The spans kubelet-rs exports over OpenTelemetry (Go's `KubeletTracing`).
//!
//! The engine and the CRI backend make ordinary [`tracing`] spans with the target
//! [`SPAN_TARGET`] at `TRACE` level, named and attributed as the Go kubelet's spans are:
//! `syncPod` / `syncTerminatingPod` / `syncTerminatedPod` with the `k8s.pod*` attributes, and
//! one client span per CRI call named by its full gRPC method with the `rpc.*` attributes of
//! otelgrpc. Beside Go's, three internal spans under `syncPod` name the kubelet's own work
//! before its calls ([`SyncPart`]), so that a trace shows where a pod's start went. Whoever composes the kubelet decides whether they go anywhere: kubelet-bin installs
//! an OpenTelemetry layer that takes only this target when a `tracing` configuration is given.
//! Without one no subscriber is interested in the target (log filters never enable it by
//! default), so each call site costs one cached branch.
//!
//! Field names follow tracing-opentelemetry's conventions: `otel.name` overrides the span name,
//! `otel.kind` sets the span kind, `otel.status_code` its status.

use tracing::{field, Level, Span};

/// The target of every exported span; an OpenTelemetry layer filters on it.
pub const SPAN_TARGET: &str = "kubelet_otel";

/// The OpenTelemetry instrumentation scope of the kubelet's own spans (Go's).
pub const INSTRUMENTATION_SCOPE: &str = "k8s.io/kubernetes/pkg/kubelet";

/// Which pod worker step a span covers (Go's span names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodStep {
    /// `syncPod`: bring the pod to its desired state.
    Sync,
    /// `syncTerminatingPod`: stop the pod's containers.
    Terminating,
    /// `syncTerminatedPod`: clean up after the pod stopped.
    Terminated,
}

impl PodStep {
    /// Go's span name.
    pub fn span_name(self) -> &'static str {
        match self {
            PodStep::Sync => "syncPod",
            PodStep::Terminating => "syncTerminatingPod",
            PodStep::Terminated => "syncTerminatedPod",
        }
    }
}

/// A part of `syncPod` that is the kubelet's own work, named after the Go kubelet's function
/// doing the same (Go makes no span of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPart {
    /// Setting up the pod's volumes (Go's `volumeManager.WaitForAttachAndMount`).
    Volumes,
    /// The pod's cgroup and sandbox settings (Go's `generatePodSandboxConfig`).
    SandboxConfig,
    /// A container's environment, mounts and devices (Go's `generateContainerConfig`).
    ContainerConfig,
}

impl SyncPart {
    /// The span's name.
    pub fn span_name(self) -> &'static str {
        match self {
            SyncPart::Volumes => "WaitForAttachAndMount",
            SyncPart::SandboxConfig => "generatePodSandboxConfig",
            SyncPart::ContainerConfig => "generateContainerConfig",
        }
    }
}

/// The internal span of one [`SyncPart`] (a child of the current `syncPod` span).
pub fn sync_part_span(part: SyncPart) -> Span {
    tracing::span!(
        target: SPAN_TARGET,
        Level::TRACE,
        "sync_part",
        otel.name = part.span_name(),
        otel.kind = "internal",
    )
}

/// Go's `kubetypes.SyncPodType` names, the `k8s.pod.update_type` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateType {
    /// The worker's first sync of the pod.
    Create,
    /// A later sync (an update, a periodic resync or a PLEG event).
    Sync,
}

impl UpdateType {
    /// Go's `SyncPodType.String()`.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateType::Create => "create",
            UpdateType::Sync => "sync",
        }
    }
}

/// The span of one pod worker step for the pod `namespace/name` with `uid` (Go's
/// `kl.tracer.Start(ctx, "syncPod", ...)` attributes; only `syncPod` has an update type).
pub fn pod_span(
    step: PodStep,
    namespace: &str,
    name: &str,
    uid: &str,
    update: Option<UpdateType>,
) -> Span {
    let span = tracing::span!(
        target: SPAN_TARGET,
        Level::TRACE,
        "pod_worker",
        otel.name = step.span_name(),
        k8s.pod.uid = uid,
        k8s.pod = %format_args!("{namespace}/{name}"),
        k8s.pod.name = name,
        k8s.pod.update_type = field::Empty,
        k8s.namespace.name = namespace,
    );
    if let Some(u) = update {
        span.record("k8s.pod.update_type", u.as_str());
    }
    span
}

/// The client span of one gRPC call to `path` (`/package.Service/Method`), as otelgrpc's
/// client interceptor makes it: named by the full method without the leading slash, kind
/// client, `rpc.system`, `rpc.service`, `rpc.method`; [`record_grpc_status`] completes it.
pub fn grpc_client_span(path: &str) -> Span {
    let full = path.strip_prefix('/').unwrap_or(path);
    let (service, method) = full.split_once('/').unwrap_or((full, ""));
    tracing::span!(
        target: SPAN_TARGET,
        Level::TRACE,
        "grpc_client",
        otel.name = full,
        otel.kind = "client",
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = field::Empty,
        otel.status_code = field::Empty,
        otel.status_description = field::Empty,
    )
}

/// Records the call's gRPC status code on its span (an error status for codes other than OK,
/// as otelgrpc does for a client).
pub fn record_grpc_status(span: &Span, code: i32, message: Option<&str>) {
    span.record("rpc.grpc.status_code", i64::from(code));
    if code != 0 {
        span.record("otel.status_code", "ERROR");
        if let Some(m) = message {
            span.record("otel.status_description", m);
        }
    }
}

/// How to tell a span's W3C `traceparent`; registered by whoever installs the exporter.
static TRACEPARENT: std::sync::OnceLock<fn(&Span) -> Option<String>> = std::sync::OnceLock::new();

/// Registers how to tell a span's W3C `traceparent` header value (kubelet-bin's OpenTelemetry
/// layer knows the span's trace and span ids); the first registration wins.
pub fn set_traceparent_source(source: fn(&Span) -> Option<String>) {
    let _ = TRACEPARENT.set(source);
}

/// The W3C `traceparent` of `span`, to propagate the trace to a server (otelgrpc sends it with
/// every call); `None` when the span is disabled or nothing is registered.
pub fn traceparent(span: &Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    TRACEPARENT.get().and_then(|source| source(span))
}

/// True when some subscriber takes the exported spans (tracing is configured).
pub fn enabled() -> bool {
    tracing::enabled!(target: SPAN_TARGET, Level::TRACE)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn go_names() {
        assert_eq!(PodStep::Sync.span_name(), "syncPod");
        assert_eq!(PodStep::Terminating.span_name(), "syncTerminatingPod");
        assert_eq!(PodStep::Terminated.span_name(), "syncTerminatedPod");
        assert_eq!(UpdateType::Create.as_str(), "create");
        assert_eq!(UpdateType::Sync.as_str(), "sync");
    }

    #[test]
    fn spans_are_disabled_without_a_subscriber() {
        // No subscriber: the call sites are off and the spans are disabled (the zero cost path).
        assert!(!enabled());
        let s = grpc_client_span("/runtime.v1.RuntimeService/RunPodSandbox");
        assert!(s.is_disabled());
        record_grpc_status(&s, 2, Some("boom"));
        assert_eq!(traceparent(&s), None);
        assert!(pod_span(PodStep::Sync, "ns", "p", "u", Some(UpdateType::Create)).is_disabled());
        assert!(sync_part_span(SyncPart::Volumes).is_disabled());
    }
}
