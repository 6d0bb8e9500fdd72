//! `startup-latency api --otlp`: where each pod's create → `Ready` went, from the spans
//! kubelet-rs exports (its `syncPod` steps, each with a client span per CRI call under it; see
//! `bench_cri::spans`).
//!
//! A pod's time splits into three parts that add up to the whole:
//!
//! - **intake**: the create request sent → the kubelet's first `syncPod` of the pod began (the
//!   API server's create, the watch to the kubelet, admission, the pod worker's queue);
//! - **sync**: that first `syncPod` began → the last one that ended before `Ready` was seen
//!   (one step when nothing failed), split into the CRI calls in flight, the kubelet's own
//!   time in the steps (volumes, cgroups, directories, status) and the waits between steps (a
//!   retry's delay);
//! - **after**: that last step ended → the watch showed the pod `Ready` (the status manager's
//!   patch, the watch back to the benchmark).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::bench_cri::spans::{children_by_parent, covered_ns, method, SpanRecord};

/// The step whose spans are a pod's start (Go's span name).
const SYNC_STEP: &str = "syncPod";

/// One pod as the benchmark timed it, in Unix nanoseconds of the wall clock (the spans' base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Timed {
    pub(super) pod: String,
    pub(super) create_ns: u64,
    pub(super) ready_ns: u64,
}

/// One pod's parts, in nanoseconds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Parts {
    intake: u64,
    sync: u64,
    own: u64,
    between: u64,
    after: u64,
    steps: usize,
    calls: Vec<(String, u64)>,
    /// The own time by where it was spent: just before a call of each method (since the
    /// step began or the call before ended), or after the step's last call; summed per pod.
    own_by_place: BTreeMap<String, u64>,
    /// The kubelet's own parts its internal spans name (`WaitForAttachAndMount`, …), part of
    /// the own time; summed per pod.
    own_parts: BTreeMap<String, u64>,
}

/// Where a step's own time went: the gaps before each of its `calls` (sorted by start) and
/// after the last, added to `into` by place. The gaps add up to the step less its calls.
fn own_by_place(step: &SpanRecord, calls: &[&SpanRecord], into: &mut BTreeMap<String, u64>) {
    let mut reach = step.start_ns;
    for c in calls {
        *into.entry(format!("before {}", method(c))).or_default() +=
            c.start_ns.saturating_sub(reach);
        reach = reach.max(c.end_ns);
    }
    *into.entry("after the last call".into()).or_default() += step.end_ns.saturating_sub(reach);
}

/// The parts of one pod; `None` when no `syncPod` of it began between its create and `Ready`.
fn parts(
    spans: &[SpanRecord],
    children: &BTreeMap<&[u8], Vec<&SpanRecord>>,
    t: &Timed,
) -> Option<Parts> {
    let mut steps: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| s.name == SYNC_STEP && s.pod.as_deref() == Some(t.pod.as_str()))
        .filter(|s| s.start_ns >= t.create_ns && s.end_ns <= t.ready_ns)
        .collect();
    steps.sort_by_key(|s| s.start_ns);
    let first = steps.first()?.start_ns;
    let last = steps.iter().map(|s| s.end_ns).max()?;
    let stepping = covered_ns(steps.iter().map(|s| (s.start_ns, s.end_ns)).collect());
    let mut in_flight = Vec::new();
    let mut calls = Vec::new();
    let mut by_place = BTreeMap::new();
    let mut own_parts = BTreeMap::new();
    for step in &steps {
        // A CRI call's span is named by its gRPC method (`package.Service/Method`); the
        // kubelet's internal spans are plain names.
        let (mut under, internal): (Vec<&SpanRecord>, Vec<&SpanRecord>) = children
            .get(step.span_id.as_slice())
            .map(|c| c.iter().partition(|s| s.name.contains('/')))
            .unwrap_or_default();
        for part in internal {
            *own_parts.entry(part.name.clone()).or_default() +=
                part.end_ns.saturating_sub(part.start_ns);
        }
        under.sort_by_key(|c| c.start_ns);
        own_by_place(step, &under, &mut by_place);
        for c in under {
            in_flight.push((c.start_ns, c.end_ns));
            calls.push((method(c).to_string(), c.end_ns.saturating_sub(c.start_ns)));
        }
    }
    let sync = last.saturating_sub(first);
    Some(Parts {
        intake: first.saturating_sub(t.create_ns),
        sync,
        own: stepping.saturating_sub(covered_ns(in_flight)),
        between: sync.saturating_sub(stepping),
        after: t.ready_ns.saturating_sub(last),
        steps: steps.len(),
        calls,
        own_by_place: by_place,
        own_parts,
    })
}

/// The parts of `pods` as JSON (milliseconds per pod, in `pods`' order; the CRI calls by
/// method), and how many pods had no step to go by.
pub(super) fn breakdown(spans: &[SpanRecord], pods: &[Timed]) -> Value {
    let children = children_by_parent(spans);
    let ms = |ns: u64| ns as f64 / 1e6;
    let (mut intake, mut sync, mut own, mut between, mut after) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut steps = vec![];
    let mut calls: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut places: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut own_parts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut missing = 0;
    for t in pods {
        let Some(p) = parts(spans, &children, t) else {
            missing += 1;
            continue;
        };
        intake.push(ms(p.intake));
        sync.push(ms(p.sync));
        own.push(ms(p.own));
        between.push(ms(p.between));
        after.push(ms(p.after));
        steps.push(p.steps);
        for (method, d) in p.calls {
            calls.entry(method).or_default().push(ms(d));
        }
        for (place, d) in p.own_by_place {
            places.entry(place).or_default().push(ms(d));
        }
        for (part, d) in p.own_parts {
            own_parts.entry(part).or_default().push(ms(d));
        }
    }
    json!({
        "intake_ms": intake,
        "sync_ms": sync,
        "own_ms": own,
        "between_ms": between,
        "after_ms": after,
        "steps": steps,
        "calls_ms": calls,
        "own_by_place_ms": places,
        "own_parts_ms": own_parts,
        "pods_without_spans": missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_cri::spans::span;

    #[test]
    fn a_pods_time_splits_into_intake_sync_and_after() {
        let rpc = |m: &str| format!("runtime.v1.RuntimeService/{m}");
        let spans = vec![
            // Pod a: one step, two calls overlapping by 10 ms.
            span("syncPod", 1, 0, 1_020, 1_200, Some("a")),
            span("WaitForAttachAndMount", 9, 1, 1_022, 1_028, None),
            span(&rpc("RunPodSandbox"), 2, 1, 1_030, 1_130, None),
            span(&rpc("CreateContainer"), 3, 1, 1_120, 1_150, None),
            // A periodic sync after Ready: not the start.
            span("syncPod", 4, 0, 1_300, 1_310, Some("a")),
            // Pod b: a failed step (volumes), then the start.
            span("syncPod", 5, 0, 2_010, 2_015, Some("b")),
            span("syncPod", 6, 0, 2_515, 2_600, Some("b")),
            span(&rpc("RunPodSandbox"), 7, 6, 2_520, 2_580, None),
            // Another pod's step.
            span("syncPod", 8, 0, 2_100, 2_200, Some("c")),
        ];
        let ns = |ms: u64| ms * 1_000_000;
        let timed = |pod: &str, create, ready| Timed {
            pod: pod.into(),
            create_ns: ns(create),
            ready_ns: ns(ready),
        };
        let pods = [
            timed("a", 1_000, 1_210),
            timed("b", 2_000, 2_620),
            timed("gone", 3_000, 3_100),
        ];
        let got = breakdown(&spans, &pods);
        assert_eq!(got["intake_ms"], json!([20.0, 10.0]));
        assert_eq!(got["sync_ms"], json!([180.0, 590.0]));
        // a: 180 less the 120 ms some call was in flight; b: its steps' 5 + 85 less 60.
        assert_eq!(got["own_ms"], json!([60.0, 30.0]));
        assert_eq!(got["between_ms"], json!([0.0, 500.0]));
        assert_eq!(got["after_ms"], json!([10.0, 20.0]));
        assert_eq!(got["steps"], json!([1, 2]));
        assert_eq!(got["calls_ms"]["RunPodSandbox"], json!([100.0, 60.0]));
        assert_eq!(got["calls_ms"]["CreateContainer"], json!([30.0]));
        assert_eq!(got["pods_without_spans"], json!(1));
        // a: 10 before the sandbox, 0 before the create (it began within the sandbox call),
        // 50 after; b: 5 before the sandbox, 5 (the failed step, no call) + 20 after.
        let places = &got["own_by_place_ms"];
        assert_eq!(places["before RunPodSandbox"], json!([10.0, 5.0]));
        assert_eq!(places["before CreateContainer"], json!([0.0]));
        assert_eq!(places["after the last call"], json!([50.0, 25.0]));
        // An internal span is a named part of the own time, not a call.
        assert_eq!(got["own_parts_ms"]["WaitForAttachAndMount"], json!([6.0]));
        assert_eq!(got["calls_ms"].get("WaitForAttachAndMount"), None);
    }
}
