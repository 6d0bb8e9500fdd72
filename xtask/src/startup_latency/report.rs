//! The side-by-side table of `startup-latency report`: per scenario and kubelet, create →
//! `Ready` p50/p90/p99, where the time went, the ratios to the first kubelet and to the raw
//! CRI floor, and the targets.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use super::percentile_ms;

/// The scenarios in the order of the table, with their titles.
const SCENARIOS: [(&str, &str); 3] = [
    ("sequential", "(a) one at a time"),
    ("burst", "(b) bursts"),
    (
        "volumes",
        "(c) configMap + secret + projected token, one at a time",
    ),
];

/// One kubelet's figures: its raw floor and its scenarios.
struct Figures {
    kind: String,
    raw: Value,
    api: Value,
}

async fn load(dir: &Path, kind: &str, part: &str) -> Result<Value> {
    let path = dir.join(format!("{kind}.{part}.json"));
    let text = tokio::fs::read_to_string(&path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The numbers of the array at `path` (keys into nested objects).
fn samples(v: &Value, path: &[&str]) -> Vec<f64> {
    let mut at = v;
    for k in path {
        match at.get(k) {
            Some(next) => at = next,
            None => return Vec::new(),
        }
    }
    at.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// Prints the table of the kubelets `kinds` (the first is the reference of the ratios).
pub(super) async fn print(dir: &Path, kinds: &[String]) -> Result<()> {
    let mut all = Vec::new();
    for kind in kinds {
        all.push(Figures {
            kind: kind.clone(),
            raw: load(dir, kind, "raw").await?,
            api: load(dir, kind, "api").await?,
        });
    }
    for line in table(&all) {
        println!("{line}");
    }
    Ok(())
}

fn table(all: &[Figures]) -> Vec<String> {
    let mut out = vec![
        "pod start-up latency: create request -> Ready seen by a watch (ms); nodeName set".into(),
    ];
    for f in all {
        let rtt = samples(&f.api, &["get_rtt_ms"]);
        out.push(format!(
            "  {}: API round trip (GET) p50 {:.1} ms; raw CRI floor before it started: one at a \
             time p50 {:.0} / p99 {:.0}, a burst p50 {:.0} / p99 {:.0}",
            f.kind,
            percentile_ms(&rtt, 50.0),
            percentile_ms(&samples(&f.raw, &["sequential_ms"]), 50.0),
            percentile_ms(&samples(&f.raw, &["sequential_ms"]), 99.0),
            percentile_ms(&samples(&f.raw, &["burst_ms"]), 50.0),
            percentile_ms(&samples(&f.raw, &["burst_ms"]), 99.0),
        ));
    }
    for (key, title) in SCENARIOS {
        let per_group = all
            .first()
            .and_then(|f| f.api.get(key)?.get("pods_per_group")?.as_u64())
            .unwrap_or(1);
        let n = all
            .first()
            .map(|f| samples(&f.api, &[key, "ready_ms"]).len())
            .unwrap_or(0);
        out.push(format!("\n{title}: {n} pods, {per_group} per group"));
        out.push(format!(
            "  {:<11} {:>7} {:>7} {:>7} {:>7} | {:>7} {:>9} {:>9} {:>9} | {:>9} {:>7}",
            "kubelet",
            "p50",
            "p90",
            "p99",
            "max",
            "create",
            "status50",
            "st->rdy50",
            "own mean",
            "deleted s",
            "p99 ×1st"
        ));
        let reference_p99 = all
            .first()
            .map(|f| percentile_ms(&samples(&f.api, &[key, "ready_ms"]), 99.0));
        for f in all {
            let ready = samples(&f.api, &[key, "ready_ms"]);
            let status = samples(&f.api, &[key, "status_ms"]);
            let create = samples(&f.api, &[key, "create_ms"]);
            let own = f
                .api
                .get(key)
                .and_then(|s| s.get("kubelet_pod_start")?.get("mean_ms")?.as_f64());
            let deleted: f64 = samples(&f.api, &[key, "deleted_s"]).iter().sum();
            let p99 = percentile_ms(&ready, 99.0);
            out.push(format!(
                "  {:<11} {:>7.0} {:>7.0} {:>7.0} {:>7.0} | {:>7.1} {:>9.0} {:>9.0} {:>9} | {:>9.1} {:>7}",
                f.kind,
                percentile_ms(&ready, 50.0),
                percentile_ms(&ready, 90.0),
                p99,
                percentile_ms(&ready, 100.0),
                percentile_ms(&create, 50.0),
                percentile_ms(&status, 50.0),
                percentile_ms(&ready, 50.0) - percentile_ms(&status, 50.0),
                own.map(|m| format!("{m:.0}")).unwrap_or_else(|| "–".into()),
                deleted,
                ratio(p99, reference_p99),
            ));
        }
        for f in all {
            out.extend(step_lines(f, key));
        }
        out.extend(targets(all, key));
    }
    out.push(
        "\ncolumns: create = the create call's round trip; status50 = p50 of create -> the \
         kubelet's first status seen; st->rdy50 = p50 Ready minus p50 first status; own mean = \
         the kubelet's kubelet_pod_start_duration_seconds (first seen -> running) over the \
         scenario; deleted s = all pods deleted -> gone (summed over groups)"
            .into(),
    );
    out
}

/// Where a kubelet's time went in scenario `key`, from its spans (`api --otlp`; nothing when
/// the run had no collector): p50 / p90 / p99 of each part, the CRI calls beside the raw
/// floor's one-at-a-time calls.
fn step_lines(f: &Figures, key: &str) -> Vec<String> {
    let Some(steps) = f.api.get(key).and_then(|s| s.get("steps")) else {
        return Vec::new();
    };
    let spread = |v: &[f64]| {
        format!(
            "{:>7.1} {:>7.1} {:>7.1}",
            percentile_ms(v, 50.0),
            percentile_ms(v, 90.0),
            percentile_ms(v, 99.0)
        )
    };
    let part = |name: &str| samples(steps, &[name]);
    let row = |label: &str, v: &[f64]| format!("    {label:<34} {}", spread(v));
    let pods = part("intake_ms").len();
    let multi = samples(steps, &["steps"])
        .iter()
        .filter(|n| **n > 1.0)
        .count();
    let missing = steps
        .get("pods_without_spans")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut out = vec![
        format!(
            "  {} from its spans: {pods} pods ({multi} with more than one syncPod before \
             Ready, {missing} without spans); ms p50 / p90 / p99",
            f.kind
        ),
        row("intake (create sent -> syncPod)", &part("intake_ms")),
        row("sync (first step -> last end)", &part("sync_ms")),
        row("  own (steps less CRI calls)", &part("own_ms")),
    ];
    if let Some(Value::Object(places)) = steps.get("own_by_place_ms") {
        for place in places.keys() {
            let d = samples(steps, &["own_by_place_ms", place]);
            out.push(row(&format!("    own {place}"), &d));
        }
    }
    if let Some(Value::Object(parts)) = steps.get("own_parts_ms") {
        for name in parts.keys() {
            let d = samples(steps, &["own_parts_ms", name]);
            out.push(row(&format!("    of it in {name} ({})", d.len()), &d));
        }
    }
    out.push(row("  waits between steps", &part("between_ms")));
    if let Some(Value::Object(calls)) = steps.get("calls_ms") {
        for method in calls.keys() {
            let d = samples(steps, &["calls_ms", method]);
            let raw = samples(&f.raw, &["sequential_calls_ms", method]);
            let raw = match raw.is_empty() {
                true => String::new(),
                false => format!("   raw one at a time {}", spread(&raw)),
            };
            out.push(row(&format!("  {method} ({})", d.len()), &d) + &raw);
        }
    }
    out.push(row("after (last end -> Ready seen)", &part("after_ms")));
    out
}

fn ratio(v: f64, reference: Option<f64>) -> String {
    match reference {
        Some(r) if r > 0.0 => format!("{:.2}x", v / r),
        _ => "–".into(),
    }
}

/// The targets for every kubelet but the first (the Go kubelet, the reference):
/// p99 ≤ 1.1 × the raw floor's p99 for the same pods + one API round trip (p50 of the GETs);
/// p99 below the reference's p50.
fn targets(all: &[Figures], key: &str) -> Vec<String> {
    let Some((reference, rest)) = all.split_first() else {
        return Vec::new();
    };
    let floor_key = if key == "burst" {
        "burst_ms"
    } else {
        "sequential_ms"
    };
    let reference_p50 = percentile_ms(&samples(&reference.api, &[key, "ready_ms"]), 50.0);
    rest.iter()
        .map(|f| {
            let p99 = percentile_ms(&samples(&f.api, &[key, "ready_ms"]), 99.0);
            let floor = percentile_ms(&samples(&f.raw, &[floor_key]), 99.0);
            let rtt = percentile_ms(&samples(&f.api, &["get_rtt_ms"]), 50.0);
            let bound = 1.1 * floor + rtt;
            format!(
                "  targets, {}: p99 {p99:.0} ≤ 1.1 × raw p99 {floor:.0} + RTT {rtt:.1} = \
                 {bound:.0}: {}; p99 {p99:.0} < {} p50 {reference_p50:.0}: {}",
                f.kind,
                met(p99 <= bound),
                reference.kind,
                met(p99 < reference_p50),
            )
        })
        .collect()
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn figures(kind: &str, ready: &[f64], raw: &[f64]) -> Figures {
        Figures {
            kind: kind.into(),
            raw: json!({"sequential_ms": raw, "burst_ms": raw}),
            api: json!({
                "get_rtt_ms": [2.0, 2.0, 3.0],
                "sequential": {"ready_ms": ready, "status_ms": ready, "create_ms": [5.0],
                               "pods_per_group": 1, "deleted_s": [1.5],
                               "kubelet_pod_start": {"count": 2, "mean_ms": 300.0}},
            }),
        }
    }

    #[test]
    fn the_spans_breakdown_is_printed_when_the_run_had_one() {
        let mut f = figures("rs", &[200.0, 210.0], &[150.0]);
        assert!(step_lines(&f, "sequential").is_empty());
        f.raw["sequential_calls_ms"] = json!({"RunPodSandbox": [100.0, 120.0]});
        f.api["sequential"]["steps"] = json!({
            "intake_ms": [10.0, 12.0], "sync_ms": [180.0, 190.0], "own_ms": [20.0, 25.0],
            "between_ms": [0.0, 0.0], "after_ms": [8.0, 9.0], "steps": [1, 2],
            "calls_ms": {"RunPodSandbox": [110.0, 130.0]}, "pods_without_spans": 0,
            "own_by_place_ms": {"before RunPodSandbox": [4.0, 5.0]},
            "own_parts_ms": {"WaitForAttachAndMount": [3.0, 3.5]},
        });
        let lines = step_lines(&f, "sequential");
        assert!(
            lines[0].contains("2 pods (1 with more than one syncPod"),
            "{lines:?}"
        );
        let sandbox = lines
            .iter()
            .find(|l| l.contains("RunPodSandbox (2)"))
            .cloned()
            .unwrap_or_default();
        assert!(
            sandbox.contains("raw one at a time   100.0   120.0   120.0"),
            "{sandbox}"
        );
        assert!(lines
            .last()
            .is_some_and(|l| l.contains("after") && l.contains("8.0")));
        assert!(
            lines
                .iter()
                .any(|l| l.contains("own before RunPodSandbox") && l.contains("4.0")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("of it in WaitForAttachAndMount (2)") && l.contains("3.0")),
            "{lines:?}"
        );
    }

    #[test]
    fn targets_compare_with_the_floor_and_the_reference() {
        let go = figures("go", &[1000.0, 1500.0], &[400.0]);
        let fast = figures("rs", &[420.0, 440.0], &[400.0]);
        let slow = figures("rs", &[900.0, 1200.0], &[400.0]);
        let t = targets(&[go, fast], "sequential");
        assert!(
            t[0].contains("p99 440 ≤ 1.1 × raw p99 400 + RTT 2.0 = 442: met"),
            "{t:?}"
        );
        assert!(t[0].contains("< go p50 1000: met"), "{t:?}");
        let go = figures("go", &[1000.0, 1500.0], &[400.0]);
        let t = targets(&[go, slow], "sequential");
        assert!(
            t[0].contains("= 442: NOT met") && t[0].ends_with("NOT met"),
            "{t:?}"
        );
    }

    #[test]
    fn the_table_has_a_row_per_kubelet_and_ratios_to_the_first() {
        let rows = table(&[
            figures("go", &[1000.0, 2000.0], &[400.0]),
            figures("rs", &[500.0, 500.0], &[400.0]),
        ]);
        let rs = rows
            .iter()
            .find(|l| l.trim_start().starts_with("rs ") && l.contains('|'))
            .cloned()
            .unwrap_or_default();
        assert!(rs.ends_with("0.25x"), "{rs}");
        assert!(rs.contains(" 300 "), "the kubelet's own mean: {rs}");
        assert!(samples(&json!({"a": {"b": [1, "x", 2.5]}}), &["a", "b"]) == [1.0, 2.5]);
        assert!(samples(&json!({}), &["a"]).is_empty());
    }
}
