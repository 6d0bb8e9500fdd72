//! A kubelet's Prometheus histograms over a window: the `_bucket` samples of one histogram read
//! from two scrapes of its `/metrics`, and a quantile of the observations between them (as
//! PromQL's `histogram_quantile` over an `increase`: linear within the bucket). The relist
//! duration at rest (`kubelet_pleg_relist_duration_seconds`, Go's name and buckets in both
//! kubelets) comes from here.

use super::exposition::{label, labelled_samples};

/// Cumulative bucket counts by upper bound (`le`), ascending; `+Inf` last.
pub(super) type Buckets = Vec<(f64, f64)>;

/// The cumulative buckets of the histogram `name` in `text` (the samples of every label set
/// added up per bound).
pub(super) fn buckets(text: &str, name: &str) -> Buckets {
    let series = format!("{name}_bucket");
    let mut out: Buckets = Vec::new();
    for (labels, v) in labelled_samples(text, &series) {
        let le = match label(labels, "le") {
            Some("+Inf") => f64::INFINITY,
            Some(b) => match b.parse::<f64>() {
                Ok(b) => b,
                Err(_) => continue,
            },
            None => continue,
        };
        match out.iter_mut().find(|(b, _)| *b == le) {
            Some((_, n)) => *n += v,
            None => out.push((le, v)),
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The `q` quantile (0..1) of the observations made between the scrapes `before` and `after`,
/// with how many there were; `None` without any.
pub(super) fn quantile_between(before: &Buckets, after: &Buckets, q: f64) -> Option<(f64, f64)> {
    let delta: Buckets = after
        .iter()
        .map(|(le, n)| {
            let was = before
                .iter()
                .find(|(b, _)| b == le)
                .map(|(_, c)| *c)
                .unwrap_or(0.0);
            (*le, (n - was).max(0.0))
        })
        .collect();
    let total = delta.last().map(|(_, n)| *n).unwrap_or(0.0);
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, n) in &delta {
        if n >= rank {
            if le.is_infinite() {
                // Above the highest finite bound: that bound is all PromQL can say.
                return Some((lower.0, total));
            }
            let within = n - lower.1;
            let frac = if within > 0.0 {
                (rank - lower.1) / within
            } else {
                1.0
            };
            return Some((lower.0 + (le - lower.0) * frac, total));
        }
        lower = (le, n);
    }
    Some((lower.0, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "kubelet_pleg_relist_duration_seconds";

    fn scrape(counts: [f64; 4]) -> String {
        let les = ["0.005", "0.01", "0.1", "+Inf"];
        les.iter()
            .zip(counts)
            .map(|(le, n)| format!("{NAME}_bucket{{le=\"{le}\"}} {n}\n"))
            .collect::<String>()
            + &format!("{NAME}_sum 1\n{NAME}_count {}\n", counts[3])
    }

    #[test]
    fn buckets_are_read_sorted_and_summed_over_label_sets() {
        let text = format!(
            "{}{NAME}_bucket{{node=\"x\",le=\"0.01\"}} 2\n{NAME}_bucket{{le=\"bad\"}} 1\n",
            scrape([1.0, 3.0, 4.0, 4.0])
        );
        assert_eq!(
            buckets(&text, NAME),
            vec![(0.005, 1.0), (0.01, 5.0), (0.1, 4.0), (f64::INFINITY, 4.0)]
        );
        assert!(buckets(&text, "other").is_empty());
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_of_the_window() {
        let before = buckets(&scrape([10.0, 10.0, 10.0, 10.0]), NAME);
        // 100 observations in the window: 50 below 5 ms, 40 in 5-10 ms, 10 in 10-100 ms.
        let after = buckets(&scrape([60.0, 100.0, 110.0, 110.0]), NAME);
        let cases = [(0.5, 0.005), (0.7, 0.0075), (0.9, 0.01), (0.99, 0.091)];
        for (q, want) in cases {
            let (got, n) = quantile_between(&before, &after, q).unwrap_or_default();
            assert!((got - want).abs() < 1e-9, "q{q}: {got} != {want}");
            assert_eq!(n, 100.0);
        }
        assert_eq!(quantile_between(&after, &after, 0.99), None);
        let slow = buckets(&scrape([0.0, 0.0, 0.0, 5.0]), NAME);
        assert_eq!(quantile_between(&Vec::new(), &slow, 0.99), Some((0.1, 5.0)));
    }
}
