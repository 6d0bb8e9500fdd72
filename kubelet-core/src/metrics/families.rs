//! The metric primitives the kubelet's families are made of, rendered in the Prometheus text
//! format (0.0.4): unlabelled histograms, and histograms, counters and gauges keyed by label
//! values. Series appear in label-value order, so renders are stable (snapshot-tested).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Prometheus' (and component-base's) default buckets.
pub const DEF_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Escapes a label value.
pub fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `a="x",b="y"` for label names and values.
pub fn label_pairs(names: &[&str], values: &[String]) -> String {
    names
        .iter()
        .zip(values)
        .map(|(n, v)| format!("{n}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Writes `# HELP` and `# TYPE` of a family (component-base marks ALPHA metrics so).
pub fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} [ALPHA] {help}\n# TYPE {name} {kind}");
}

/// Formats a sample value as Prometheus does (integers without a fraction).
pub fn value(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A histogram without labels.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// A histogram with these bucket bounds.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        for (bound, c) in self.bounds.iter().zip(&self.counts) {
            if secs <= *bound {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            u64::try_from(d.as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Renders the histogram's series with `labels` (`a="x"`, may be empty).
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

/// Histograms keyed by label values.
#[derive(Debug)]
pub struct HistogramVec {
    labels: &'static [&'static str],
    bounds: &'static [f64],
    series: Mutex<BTreeMap<Vec<String>, Arc<Histogram>>>,
}

impl HistogramVec {
    /// A family with these label names and bucket bounds.
    pub fn new(labels: &'static [&'static str], bounds: &'static [f64]) -> HistogramVec {
        HistogramVec {
            labels,
            bounds,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// The histogram of one value of a one-label family.
    pub fn with(&self, value: &str) -> Arc<Histogram> {
        self.with_labels(&[value])
    }

    /// The histogram of these label values (in label order).
    pub fn with_labels(&self, values: &[&str]) -> Arc<Histogram> {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key)
            .or_insert_with(|| Arc::new(Histogram::new(self.bounds)))
            .clone()
    }

    /// Renders every series.
    pub fn render(&self, out: &mut String, name: &str) {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (v, h) in map.iter() {
            h.render(out, name, &label_pairs(self.labels, v));
        }
    }
}

/// Counters keyed by label values (no labels: one series keyed by nothing).
#[derive(Debug)]
pub struct CounterVec {
    labels: &'static [&'static str],
    series: Mutex<BTreeMap<Vec<String>, u64>>,
}

impl CounterVec {
    /// A family with these label names.
    pub fn new(labels: &'static [&'static str]) -> CounterVec {
        CounterVec {
            labels,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Adds one to the counter of `value` (one-label families).
    pub fn inc(&self, value: &str) {
        self.inc_labels(&[value]);
    }

    /// Adds one to the counter of these label values.
    pub fn inc_labels(&self, values: &[&str]) {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let mut map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry(key).or_default() += 1;
    }

    /// The counter of `value` (one-label families).
    pub fn get(&self, value: &str) -> u64 {
        self.get_labels(&[value])
    }

    /// The counter of these label values.
    pub fn get_labels(&self, values: &[&str]) -> u64 {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&key).copied().unwrap_or_default()
    }

    /// Renders every series; an unlabelled counter always has its one series (0 at first).
    pub fn render(&self, out: &mut String, name: &str) {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        if self.labels.is_empty() {
            let n = map.get(&Vec::new()).copied().unwrap_or_default();
            let _ = writeln!(out, "{name} {n}");
            return;
        }
        for (v, n) in map.iter() {
            let _ = writeln!(out, "{name}{{{}}} {n}", label_pairs(self.labels, v));
        }
    }
}

/// Gauges keyed by label values, set as a whole or series by series.
#[derive(Debug)]
pub struct GaugeVec {
    labels: &'static [&'static str],
    series: Mutex<BTreeMap<Vec<String>, f64>>,
}

impl GaugeVec {
    /// A family with these label names.
    pub fn new(labels: &'static [&'static str]) -> GaugeVec {
        GaugeVec {
            labels,
            series: Mutex::new(BTreeMap::new()),
        }
    }

    /// Sets the gauge of these label values.
    pub fn set(&self, values: &[&str], v: f64) {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, v);
    }

    /// Replaces every series at once (series not given disappear).
    pub fn replace(&self, series: Vec<(Vec<String>, f64)>) {
        *self.series.lock().unwrap_or_else(|e| e.into_inner()) = series.into_iter().collect();
    }

    /// The gauge of these label values.
    pub fn get(&self, values: &[&str]) -> Option<f64> {
        let key: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        self.series
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .copied()
    }

    /// Renders every series (an unlabelled gauge renders its one series once set).
    pub fn render(&self, out: &mut String, name: &str) {
        let map = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (v, n) in map.iter() {
            if self.labels.is_empty() {
                let _ = writeln!(out, "{name} {}", value(*n));
            } else {
                let _ = writeln!(
                    out,
                    "{name}{{{}}} {}",
                    label_pairs(self.labels, v),
                    value(*n)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_and_render() {
        let h = Histogram::new(DEF_BUCKETS);
        h.observe(Duration::from_millis(20));
        h.observe(Duration::from_secs(3));
        let mut out = String::new();
        h.render(&mut out, "x", "");
        assert!(out.contains("x_bucket{le=\"0.01\"} 0\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.025\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"5\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 2\n"), "{out}");
        assert!(out.contains("x_sum 3.02\n"), "{out}");
        assert!(out.contains("x_count 2\n"), "{out}");
    }

    #[test]
    fn labelled_families_render_in_label_order() {
        let c = CounterVec::new(&["container_type", "code"]);
        c.inc_labels(&["init_container", "Unknown"]);
        c.inc_labels(&["container", "NotFound"]);
        c.inc_labels(&["container", "NotFound"]);
        let mut out = String::new();
        c.render(&mut out, "c");
        assert_eq!(
            out,
            "c{container_type=\"container\",code=\"NotFound\"} 2\nc{container_type=\"init_container\",code=\"Unknown\"} 1\n"
        );
        let plain = CounterVec::new(&[]);
        let mut out = String::new();
        plain.render(&mut out, "p");
        assert_eq!(out, "p 0\n");
        let g = GaugeVec::new(&["node"]);
        g.set(&["n\"1"], 1.0);
        let mut out = String::new();
        g.render(&mut out, "g");
        assert_eq!(out, "g{node=\"n\\\"1\"} 1\n");
        assert_eq!(value(0.25), "0.25");
    }
}
