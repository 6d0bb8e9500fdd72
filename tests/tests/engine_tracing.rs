//! OpenTelemetry tracing (Go's `KubeletTracing`) end to end: an in-process OTLP/gRPC
//! collector (a tonic `TraceService`), a kubelet configuration with `tracing` pointing at it
//! loaded and installed as the binary does (`kubelet_bin::config`, `kubelet_bin::telemetry`),
//! the engine on the real containerd running a pod; the collector receives the pod's
//! `syncPod` span with Go's `k8s.pod*` attributes and one client span per CRI call
//! (`runtime.v1.RuntimeService/RunPodSandbox`, `CreateContainer`, `StartContainer`) with
//! otelgrpc's `rpc.*` attributes, as children of the pod's sync, beside internal spans of the
//! kubelet's own parts (`WaitForAttachAndMount`, `generatePodSandboxConfig`,
//! `generateContainerConfig`); removing the pod gives
//! `syncTerminatingPod` (with `StopPodSandbox` under it) and `syncTerminatedPod`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{busybox, wait_running, EngineTest};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// One received span, flattened.
#[derive(Debug, Clone)]
struct Received {
    name: String,
    kind: i32,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    start_ns: u64,
    end_ns: u64,
    attributes: BTreeMap<String, String>,
    resource: BTreeMap<String, String>,
    scope: String,
}

#[derive(Default, Clone)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
    requests: Arc<Mutex<usize>>,
}

fn flatten(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        *self.requests.lock().unwrap() += 1;
        let mut spans = self.spans.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let resource = flatten(
                &rs.resource
                    .as_ref()
                    .map(|r| r.attributes.clone())
                    .unwrap_or_default(),
            );
            for ss in rs.scope_spans {
                let scope = ss
                    .scope
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default();
                for s in ss.spans {
                    spans.push(Received {
                        name: s.name.clone(),
                        kind: s.kind,
                        trace_id: s.trace_id.clone(),
                        span_id: s.span_id.clone(),
                        parent_span_id: s.parent_span_id.clone(),
                        start_ns: s.start_time_unix_nano,
                        end_ns: s.end_time_unix_nano,
                        attributes: flatten(&s.attributes),
                        resource: resource.clone(),
                        scope: scope.clone(),
                    });
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_sync_and_cri_calls_are_exported_over_otlp() {
    // The collector, on a port of its own.
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server_shutdown = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn({
        let collector = collector.clone();
        let stop = server_shutdown.clone();
        async move {
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector))
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    stop.cancelled_owned(),
                )
                .await
        }
    });

    // The kubelet configuration, loaded as the binary loads it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             featureGates:\n  KubeletTracing: true\n\
             tracing:\n  endpoint: {addr}\n  samplingRatePerMillion: 1000000\n"
        ),
    )
    .unwrap();
    let argv = [
        "kubelet",
        "--config",
        config.to_str().unwrap(),
        "--hostname-override=trace-node",
    ]
    .into_iter()
    .map(OsString::from);
    let loaded = kubelet_bin::config::load_with_hostname(argv, || Ok("unused".into()))
        .expect("the configuration loads");
    // Only Go's own line for setting a GA gate (KubeletTracing is GA since 1.34).
    assert_eq!(
        loaded.warnings,
        ["Setting GA feature gate KubeletTracing=true. It will be removed in a future release."]
    );
    let tracing_config = loaded
        .config
        .tracing
        .clone()
        .expect("tracing is configured");
    let (layer, telemetry) = kubelet_bin::telemetry::install(
        &tracing_config,
        &loaded.node_name,
        kubelet_bin::telemetry::QueueSettings {
            delay: Duration::from_millis(500),
            ..Default::default()
        },
    )
    .expect("the exporter starts");
    tracing_subscriber::registry().with(layer).init();

    let Some(t) = EngineTest::new("tracing").await else {
        server_shutdown.cancel();
        return;
    };
    let uid = t.uid("traced");
    let pod = t.pod("traced", &uid, vec![busybox("app", "exec sleep 3600")]);
    let source = Arc::new(StaticSource::new("file", vec![pod]));
    let k = t.start(vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &uid, Duration::from_secs(60)).await;

    // Everything ended so far reaches the collector.
    let pod_full = format!("{}/traced", t.namespace);
    let wanted = [
        "runtime.v1.RuntimeService/RunPodSandbox",
        "runtime.v1.RuntimeService/CreateContainer",
        "runtime.v1.RuntimeService/StartContainer",
    ];
    let spans = kubelet_core::testing::poll_until(Duration::from_secs(30), || {
        let collector = collector.clone();
        let telemetry = telemetry.clone();
        let pod_full = pod_full.clone();
        async move {
            telemetry.flush(Duration::from_secs(5)).await;
            let spans = collector.spans.lock().unwrap().clone();
            let synced = spans
                .iter()
                .any(|s| s.name == "syncPod" && s.attributes.get("k8s.pod") == Some(&pod_full));
            let calls = wanted.iter().all(|w| spans.iter().any(|s| s.name == *w));
            (synced && calls).then_some(spans)
        }
    })
    .await
    .unwrap_or_else(|| {
        let names: Vec<String> = collector
            .spans
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect();
        panic!("spans missing; received {names:?}")
    });

    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    eprintln!("received {} spans named {names:?}", spans.len());

    // The pod's first sync: Go's span name and attributes, the kubelet's resource.
    let sync = spans
        .iter()
        .find(|s| s.name == "syncPod" && s.attributes.get("k8s.pod") == Some(&pod_full))
        .unwrap();
    let attr = |s: &Received, k: &str| s.attributes.get(k).cloned().unwrap_or_default();
    assert_eq!(attr(sync, "k8s.pod.uid"), uid);
    assert_eq!(attr(sync, "k8s.pod.name"), "traced");
    assert_eq!(attr(sync, "k8s.namespace.name"), t.namespace);
    assert_eq!(attr(sync, "k8s.pod.update_type"), "create");
    assert_eq!(
        sync.resource.get("service.name").map(String::as_str),
        Some("kubelet")
    );
    assert_eq!(
        sync.resource.get("host.name").map(String::as_str),
        Some("trace-node")
    );
    assert_eq!(sync.scope, "k8s.io/kubernetes/pkg/kubelet");
    assert!(sync.parent_span_id.is_empty(), "syncPod is a root span");

    // The CRI calls: client spans with otelgrpc's attributes, children of the pod's sync.
    for w in wanted {
        let call = spans
            .iter()
            .find(|s| s.name == w && s.trace_id == sync.trace_id)
            .unwrap_or_else(|| panic!("no {w} span in the pod's first sync trace"));
        let (service, method) = w.split_once('/').unwrap();
        assert_eq!(call.kind, 3, "{w}: SPAN_KIND_CLIENT");
        assert_eq!(attr(call, "rpc.system"), "grpc", "{w}");
        assert_eq!(attr(call, "rpc.service"), service, "{w}");
        assert_eq!(attr(call, "rpc.method"), method, "{w}");
        assert_eq!(attr(call, "rpc.grpc.status_code"), "0", "{w}");
        assert_eq!(
            call.parent_span_id, sync.span_id,
            "{w} is a child of syncPod"
        );
        assert!(
            sync.start_ns <= call.start_ns && call.end_ns <= sync.end_ns,
            "{w} lies within syncPod"
        );
    }
    // The kubelet's own parts of the sync: internal spans under it.
    for part in [
        "WaitForAttachAndMount",
        "generatePodSandboxConfig",
        "generateContainerConfig",
    ] {
        let s = spans
            .iter()
            .find(|s| s.name == part && s.trace_id == sync.trace_id)
            .unwrap_or_else(|| panic!("no {part} span in the pod's first sync trace"));
        assert_eq!(s.kind, 1, "{part}: SPAN_KIND_INTERNAL");
        assert_eq!(
            s.parent_span_id, sync.span_id,
            "{part} is a child of syncPod"
        );
    }
    // A call's span covers the call, until its response is read: making a sandbox takes
    // containerd tens of milliseconds at least (a network namespace, CNI, the pause
    // container); a span that ended when the request was sent would last ~0.1 ms.
    let sandbox = spans
        .iter()
        .find(|s| s.name == wanted[0] && s.trace_id == sync.trace_id)
        .unwrap();
    let took = Duration::from_nanos(sandbox.end_ns.saturating_sub(sandbox.start_ns));
    assert!(
        took >= Duration::from_millis(5),
        "the RunPodSandbox span lasted {took:?}: it must cover the call"
    );

    // Removing the pod: syncTerminatingPod (with StopContainer/StopPodSandbox under it) and
    // syncTerminatedPod, with the pod's attributes and no update type (as Go).
    source.set(vec![]);
    let spans = kubelet_core::testing::poll_until(Duration::from_secs(60), || {
        let collector = collector.clone();
        let telemetry = telemetry.clone();
        let pod_full = pod_full.clone();
        async move {
            telemetry.flush(Duration::from_secs(5)).await;
            let spans = collector.spans.lock().unwrap().clone();
            let has = |n: &str| {
                spans
                    .iter()
                    .any(|s| s.name == n && s.attributes.get("k8s.pod") == Some(&pod_full))
            };
            (has("syncTerminatingPod") && has("syncTerminatedPod")).then_some(spans)
        }
    })
    .await
    .expect("termination spans");
    let terminating = spans
        .iter()
        .find(|s| s.name == "syncTerminatingPod" && s.attributes.get("k8s.pod") == Some(&pod_full))
        .unwrap();
    assert_eq!(attr(terminating, "k8s.pod.uid"), uid);
    assert!(!terminating.attributes.contains_key("k8s.pod.update_type"));
    assert!(
        spans
            .iter()
            .any(|s| s.name == "runtime.v1.RuntimeService/StopPodSandbox"
                && s.parent_span_id == terminating.span_id),
        "StopPodSandbox under syncTerminatingPod"
    );
    assert_eq!(telemetry.dropped_spans(), 0);
    assert!(*collector.requests.lock().unwrap() >= 1);

    k.stop().await;
    telemetry.shutdown(Duration::from_secs(5)).await;
    server_shutdown.cancel();
    let _ = server.await;
}
