//! `bench-cri --breakdown`: where kubelet-rs's start-up and teardown time goes, from the
//! spans it exports (Go's `KubeletTracing`: one span per pod worker step, `syncPod`,
//! `syncTerminatingPod`, `syncTerminatedPod`, with one client span per CRI call under it).
//!
//! The benchmark runs an OTLP/gRPC collector on a loopback port, configures the kubelet to
//! export every span to it, and after each phase groups the spans of the benchmark's pods by
//! step: how long after the phase began each pod's first step started (the kubelet's intake:
//! the file source, admission, the worker's queue), how long the steps took, each CRI call in
//! them, and the step's own time between and around its CRI calls (volumes, cgroups,
//! directories, status).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::report::ms;
use super::workload::percentile;

/// One received span, reduced to what the breakdown needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanRecord {
    pub(crate) name: String,
    pub(crate) span_id: Vec<u8>,
    pub(crate) parent_span_id: Vec<u8>,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// `k8s.pod.name`, on the pod worker's spans.
    pub(crate) pod: Option<String>,
}

/// The OTLP/gRPC trace collector: every span the kubelet exports, in arrival order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Collector {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let received = request
            .into_inner()
            .resource_spans
            .into_iter()
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .map(|s| SpanRecord {
                pod: s.attributes.iter().find_map(|kv| {
                    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(Value::StringValue(v)) if kv.key == "k8s.pod.name" => Some(v.clone()),
                        _ => None,
                    }
                }),
                name: s.name,
                span_id: s.span_id,
                parent_span_id: s.parent_span_id,
                start_ns: s.start_time_unix_nano,
                end_ns: s.end_time_unix_nano,
            });
        if let Ok(mut spans) = self.spans.lock() {
            spans.extend(received);
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The running collector: its address; the server stops when this is dropped.
pub(crate) struct RunningCollector {
    pub(crate) collector: Collector,
    pub(crate) addr: SocketAddr,
    _stop: DropGuard,
}

impl Collector {
    /// Serves a collector on a free loopback port.
    pub(super) async fn start() -> Result<RunningCollector> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Serves a collector on `addr` (a kubelet configured before the collector started
    /// connects once it is there: its exporter's channel is lazy).
    pub(crate) async fn start_on(addr: SocketAddr) -> Result<RunningCollector> {
        let collector = Collector::default();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding the OTLP collector on {addr}"))?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        tokio::spawn({
            let service = TraceServiceServer::new(collector.clone());
            let stop = stop.clone();
            async move {
                if let Err(e) = tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming_shutdown(
                        tonic::transport::server::TcpIncoming::from(listener),
                        stop.cancelled_owned(),
                    )
                    .await
                {
                    eprintln!("[otlp] the collector stopped: {e}");
                }
            }
        });
        Ok(RunningCollector {
            collector,
            addr,
            _stop: stop.drop_guard(),
        })
    }

    fn len(&self) -> usize {
        self.spans.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// A copy of what has arrived.
    pub(crate) fn spans(&self) -> Vec<SpanRecord> {
        self.spans.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until no span arrived for `quiet` (the kubelet exports in batches every few
    /// seconds), at most `max`.
    pub(crate) async fn settle(&self, quiet: Duration, max: Duration) {
        let t = kubelet_core::clock::monotonic_now();
        let (mut seen, mut since) = (self.len(), kubelet_core::clock::monotonic_now());
        while kubelet_core::clock::elapsed(t) < max {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let n = self.len();
            if n != seen {
                (seen, since) = (n, kubelet_core::clock::monotonic_now());
            } else if kubelet_core::clock::elapsed(since) >= quiet {
                return;
            }
        }
    }
}

/// Nanoseconds since the Unix epoch of a wall-clock instant (the spans' time base).
pub(crate) fn unix_ns(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// The spans as tab-separated lines (name, span id, parent id, start and end in Unix ns, pod),
/// for a closer look than the breakdown's.
pub(crate) fn tsv(spans: &[SpanRecord]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut out = String::from("name\tspan\tparent\tstart_ns\tend_ns\tpod\n");
    for s in spans {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            s.name,
            hex(&s.span_id),
            hex(&s.parent_span_id),
            s.start_ns,
            s.end_ns,
            s.pod.as_deref().unwrap_or("-")
        ));
    }
    out
}

/// The spans under each parent, by the parent's span id (a step's CRI calls).
pub(crate) fn children_by_parent(spans: &[SpanRecord]) -> BTreeMap<&[u8], Vec<&SpanRecord>> {
    let mut children: BTreeMap<&[u8], Vec<&SpanRecord>> = BTreeMap::new();
    for s in spans.iter().filter(|s| !s.parent_span_id.is_empty()) {
        children.entry(&s.parent_span_id).or_default().push(s);
    }
    children
}

/// A CRI call's method: the last part of its span's name (`runtime.v1.RuntimeService/X`).
pub(crate) fn method(call: &SpanRecord) -> &str {
    call.name.rsplit('/').next().unwrap_or(&call.name)
}

/// One pod worker step's figures over a phase.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct StepStats {
    /// Go's span name (`syncPod`, …).
    pub(super) name: String,
    /// Steps of this name in the phase, and the pods they were for.
    pub(super) steps: usize,
    pub(super) pods: usize,
    /// Phase start -> the pod's first step of this name started (one per pod).
    pub(super) queued: Vec<Duration>,
    /// Each step's duration.
    pub(super) took: Vec<Duration>,
    /// Each step's duration less the time any of its CRI calls was in flight (the kubelet's
    /// own work in it; calls made together count once).
    pub(super) own: Vec<Duration>,
    /// The CRI calls under the steps, by method (`RunPodSandbox`, …): their durations.
    pub(super) calls: BTreeMap<String, Vec<Duration>>,
    /// Phase start -> the last step's end.
    pub(super) last_end: Duration,
}

/// The steps of pods named `prefix…` that started in `[from_ns, until_ns]`, by step name
/// (in the order each name first appears).
pub(super) fn breakdown(
    spans: &[SpanRecord],
    prefix: &str,
    from_ns: u64,
    until_ns: u64,
) -> Vec<StepStats> {
    let ns = |n: u64| Duration::from_nanos(n);
    let mut steps: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| s.pod.as_deref().is_some_and(|p| p.starts_with(prefix)))
        .filter(|s| (from_ns..=until_ns).contains(&s.start_ns))
        .collect();
    steps.sort_by_key(|s| s.start_ns);
    let children = children_by_parent(spans);
    let mut out: Vec<StepStats> = Vec::new();
    let mut first_seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut pods: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for step in steps {
        let pod = step.pod.as_deref().unwrap_or_default();
        let idx = match out.iter().position(|o| o.name == step.name) {
            Some(i) => i,
            None => {
                out.push(StepStats {
                    name: step.name.clone(),
                    ..StepStats::default()
                });
                out.len() - 1
            }
        };
        let stats = &mut out[idx];
        let took = ns(step.end_ns.saturating_sub(step.start_ns));
        stats.steps += 1;
        stats.took.push(took);
        stats.last_end = stats.last_end.max(ns(step.end_ns.saturating_sub(from_ns)));
        if first_seen.insert((step.name.as_str(), pod)) {
            stats.queued.push(ns(step.start_ns.saturating_sub(from_ns)));
        }
        pods.entry(step.name.as_str()).or_default().insert(pod);
        let mut in_flight = Vec::new();
        for c in children.get(step.span_id.as_slice()).into_iter().flatten() {
            let d = ns(c.end_ns.saturating_sub(c.start_ns));
            in_flight.push((c.start_ns, c.end_ns));
            stats
                .calls
                .entry(method(c).to_string())
                .or_default()
                .push(d);
        }
        stats
            .own
            .push(took.saturating_sub(ns(covered_ns(in_flight))));
    }
    for o in &mut out {
        o.pods = pods.get(o.name.as_str()).map(|p| p.len()).unwrap_or(0);
    }
    out
}

/// "p50 / p90 / max" in milliseconds.
pub(super) fn spread(v: &[Duration]) -> String {
    format!(
        "{:>6} {:>6} {:>6}",
        ms(percentile(v, 50.0)),
        ms(percentile(v, 90.0)),
        ms(percentile(v, 100.0))
    )
}

/// The lines of one phase's breakdown; `raw` are the raw CRI floor's call durations by method
/// (printed beside the kubelet's), `total` the phase's measured length.
pub(super) fn breakdown_lines(
    phase: &str,
    total: Option<Duration>,
    steps: &[StepStats],
    raw: &BTreeMap<String, Vec<Duration>>,
) -> Vec<String> {
    let mut lines = vec![format!(
        "{phase} ({}):",
        total
            .map(|t| format!("{:.2} s in all", t.as_secs_f64()))
            .unwrap_or("not measured".into())
    )];
    if steps.is_empty() {
        lines.push("  no spans of the benchmark's pods arrived".into());
        return lines;
    }
    lines.push(format!(
        "  {:<26} {:>5}  {:<22} {:<22} {:<22}",
        "ms: p50 p90 max", "n", "raw CRI", "kubelet-rs", "queued since phase start"
    ));
    for s in steps {
        lines.push(format!(
            "  {:<26} {:>5}  {:<22} {:<22} {:<22}",
            format!("{} ({} pods)", s.name, s.pods),
            s.steps,
            "",
            spread(&s.took),
            spread(&s.queued),
        ));
        for (method, d) in &s.calls {
            lines.push(format!(
                "    {:<24} {:>5}  {:<22} {:<22}",
                method,
                d.len(),
                raw.get(method)
                    .map(|r| spread(r))
                    .unwrap_or_else(|| "-".into()),
                spread(d)
            ));
        }
        lines.push(format!(
            "    {:<24} {:>5}  {:<22} {:<22}",
            "own (step less CRI)",
            s.own.len(),
            "",
            spread(&s.own)
        ));
        lines.push(format!(
            "    last {} ended {:.2} s after the phase began",
            s.name,
            s.last_end.as_secs_f64()
        ));
    }
    lines
}
/// Nanoseconds covered by the union of the intervals `[start, end)`.
pub(crate) fn covered_ns(mut intervals: Vec<(u64, u64)>) -> u64 {
    intervals.sort_unstable();
    let mut total = 0;
    let mut reach = 0;
    for (start, end) in intervals {
        let start = start.max(reach);
        if end > start {
            total += end - start;
            reach = end;
        }
    }
    total
}

/// A span for tests: ids of one byte (0 for no parent), times in milliseconds.
#[cfg(test)]
pub(crate) fn span(
    name: &str,
    id: u8,
    parent: u8,
    start_ms: u64,
    end_ms: u64,
    pod: Option<&str>,
) -> SpanRecord {
    SpanRecord {
        name: name.into(),
        span_id: vec![id],
        parent_span_id: if parent == 0 { vec![] } else { vec![parent] },
        start_ns: start_ms * 1_000_000,
        end_ns: end_ms * 1_000_000,
        pod: pod.map(String::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_grouped_with_their_cri_calls_and_own_time() {
        let rpc = |m: &str| format!("runtime.v1.RuntimeService/{m}");
        let spans = vec![
            // Before the phase (a pod of an earlier run): left out.
            span("syncPod", 1, 0, 50, 60, Some("bench-rs-1-000")),
            span("syncPod", 2, 0, 1_100, 1_500, Some("bench-rs-1-000")),
            span(&rpc("RunPodSandbox"), 3, 2, 1_150, 1_350, None),
            span(&rpc("CreateContainer"), 4, 2, 1_360, 1_400, None),
            span("syncPod", 5, 0, 1_300, 1_600, Some("bench-rs-1-001")),
            span(&rpc("RunPodSandbox"), 6, 5, 1_310, 1_410, None),
            // A second sync of the first pod: a step, not a second queue time.
            span("syncPod", 7, 0, 1_700, 1_710, Some("bench-rs-1-000")),
            // Another pod prefix, and a step after the phase: left out.
            span("syncPod", 8, 0, 1_200, 1_300, Some("other-000")),
            span(
                "syncTerminatingPod",
                9,
                0,
                9_000,
                9_100,
                Some("bench-rs-1-000"),
            ),
        ];
        let got = breakdown(&spans, "bench-rs-1", 1_000_000_000, 2_000_000_000);
        assert_eq!(got.len(), 1);
        let s = &got[0];
        assert_eq!((s.name.as_str(), s.steps, s.pods), ("syncPod", 3, 2));
        let d = Duration::from_millis;
        assert_eq!(s.queued, [d(100), d(300)]);
        assert_eq!(s.took, [d(400), d(300), d(10)]);
        assert_eq!(s.own, [d(160), d(200), d(10)]);
        assert_eq!(s.calls["RunPodSandbox"], [d(200), d(100)]);
        assert_eq!(s.calls["CreateContainer"], [d(40)]);
        assert_eq!(s.last_end, d(710));
        // Calls in flight together count once in the step's own time.
        assert_eq!(covered_ns(vec![(0, 10), (5, 20), (30, 40), (32, 35)]), 30);

        let raw = BTreeMap::from([("RunPodSandbox".to_string(), vec![d(90), d(110)])]);
        let lines = breakdown_lines("start", Some(d(2_000)), &got, &raw);
        assert_eq!(lines[0], "start (2.00 s in all):");
        assert!(lines
            .iter()
            .any(|l| l.contains("RunPodSandbox") && l.contains("110")));
        assert!(lines
            .iter()
            .any(|l| l.contains("last syncPod ended 0.71 s")));
        assert_eq!(
            breakdown_lines("teardown", None, &[], &raw),
            [
                "teardown (not measured):",
                "  no spans of the benchmark's pods arrived"
            ]
        );
    }
}
