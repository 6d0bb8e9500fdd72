//! The runtime calls a kubelet makes at rest: `kubelet_runtime_operations_total` (both
//! kubelets export it under Go's name, by `operation_type`) read from its `/metrics` on the
//! read-only port before and after the idle window.

use std::collections::BTreeMap;
use std::time::Duration;

use super::exposition::{label, labelled_samples};
use super::kubelets::http_get;

/// Calls so far by operation type.
pub(super) type Counts = BTreeMap<String, f64>;

/// The `/metrics` text of the kubelet serving the read-only port `port`; `None` when it does
/// not answer.
pub(super) async fn metrics_text(port: u16) -> Option<String> {
    match http_get(port, "/metrics").await {
        Ok((200, body)) => Some(body),
        _ => None,
    }
}

/// `kubelet_runtime_operations_total` samples, summed by `operation_type`.
pub(super) fn parse(text: &str) -> Counts {
    let mut out = Counts::new();
    for (labels, v) in labelled_samples(text, "kubelet_runtime_operations_total") {
        if let Some(op) = label(labels, "operation_type") {
            *out.entry(op.to_string()).or_default() += v;
        }
    }
    out
}

/// Calls per minute by operation type between two scrapes `over` apart (types without a
/// call left out).
pub(super) fn per_minute(before: &Counts, after: &Counts, over: Duration) -> Counts {
    let minutes = over.as_secs_f64().max(0.001) / 60.0;
    after
        .iter()
        .filter_map(|(op, n)| {
            let d = n - before.get(op).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (op.clone(), d / minutes))
        })
        .collect()
}

/// One line: the total per minute, then the types, most first.
pub(super) fn describe(rates: &Counts) -> String {
    let total: f64 = rates.values().sum();
    let mut by: Vec<(&String, &f64)> = rates.iter().collect();
    by.sort_by(|a, b| b.1.total_cmp(a.1));
    let parts: Vec<String> = by
        .into_iter()
        .map(|(op, r)| format!("{op} {r:.1}"))
        .collect();
    format!("{total:.1}/min ({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_summed_by_type_and_differenced_per_minute() {
        let before = parse(
            "# TYPE kubelet_runtime_operations_total counter\n\
             kubelet_runtime_operations_total{operation_type=\"list_containers\"} 100\n\
             kubelet_runtime_operations_total{operation_type=\"container_status\"} 40\n",
        );
        let after = parse(
            "kubelet_runtime_operations_total{operation_type=\"list_containers\"} 160\n\
             kubelet_runtime_operations_total{operation_type=\"container_status\"} 40\n\
             kubelet_runtime_operations_total{node=\"n\",operation_type=\"version\"} 1\n\
             kubelet_runtime_operations_total{operation_type=\"version\"} 2\n\
             kubelet_runtime_operations_duration_seconds_count{operation_type=\"version\"} 9\n\
             kubelet_runtime_operations_total{operation_type=\"broken\"} x\n",
        );
        assert_eq!(after.get("version"), Some(&3.0));
        let rates = per_minute(&before, &after, Duration::from_secs(30));
        assert_eq!(
            rates,
            Counts::from([("list_containers".into(), 120.0), ("version".into(), 6.0)])
        );
        assert_eq!(
            describe(&rates),
            "126.0/min (list_containers 120.0, version 6.0)"
        );
    }
}
