//! The density table of `bench-cri --pods 110,250,500`: each kubelet's figures at each count
//! side by side, the per-pod slopes of RSS and idle CPU, and issue #38's density targets.

use super::kubelets::KubeletRun;
use super::report::verdict;

/// One count's runs: (Go kubelet, kubelet-rs).
pub(super) type CountRuns = (Option<KubeletRun>, Option<KubeletRun>);

/// The table's lines.
pub(super) fn table(runs: &[CountRuns]) -> Vec<String> {
    let mut out = vec![
        String::new(),
        "== density: each kubelet at each pod count (start = manifests written -> all Running)"
            .to_string(),
        format!(
            "{:<11} {:>5} {:>8} {:>10} {:>13} {:>9} {:>9} {:>9} {:>13} {:>9}",
            "kubelet",
            "pods",
            "start s",
            "idle cores",
            "cores/100pod",
            "RSS MiB",
            "anon MiB",
            "file MiB",
            "relist p99 ms",
            "removed s"
        ),
    ];
    let mib = |k: Option<u64>| k.map(|k| format!("{:.1}", k as f64 / 1024.0));
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for (label, pick) in kinds() {
        for k in runs.iter().filter_map(|r| pick(r)) {
            let per100 = k.idle_cores.map(|c| c / k.pods.max(1) as f64 * 100.0);
            out.push(format!(
                "{:<11} {:>5} {:>8} {:>10} {:>13} {:>9} {:>9} {:>9} {:>13} {:>9}",
                label,
                k.pods,
                dash(k.start.map(|d| format!("{:.2}", d.as_secs_f64()))),
                dash(k.idle_cores.map(|c| format!("{c:.4}"))),
                dash(per100.map(|c| format!("{c:.4}"))),
                dash(mib(k.rss_kib)),
                dash(mib(k.rss_parts_kib.map(|p| p.0))),
                dash(mib(k.rss_parts_kib.map(|p| p.1))),
                dash(k.idle_relist_p99.map(|(p, _)| format!("{:.1}", p * 1000.0))),
                dash(k.teardown.map(|d| format!("{:.2}", d.as_secs_f64()))),
            ));
        }
    }
    out.push("per-pod slopes between the smallest and the largest count:".into());
    for (label, pick) in kinds() {
        let of: Vec<&KubeletRun> = runs.iter().filter_map(|r| pick(r)).collect();
        if let Some(s) = slopes(&of) {
            out.push(format!("  {label}: {s}"));
        }
    }
    out.push("targets of issue #38 (kubelet-rs):".into());
    out.extend(targets(runs).into_iter().map(|t| format!("  {t}")));
    out
}

type Pick = fn(&CountRuns) -> Option<&KubeletRun>;

fn kinds() -> [(&'static str, Pick); 2] {
    [
        ("Go kubelet", |r: &CountRuns| r.0.as_ref()),
        ("kubelet-rs", |r: &CountRuns| r.1.as_ref()),
    ]
}

/// The smallest and the largest count's runs among `of`.
fn ends<'a>(of: &[&'a KubeletRun]) -> Option<(&'a KubeletRun, &'a KubeletRun)> {
    let lo = of.iter().min_by_key(|k| k.pods)?;
    let hi = of.iter().max_by_key(|k| k.pods)?;
    (hi.pods > lo.pods).then_some((*lo, *hi))
}

fn slopes(of: &[&KubeletRun]) -> Option<String> {
    let (lo, hi) = ends(of)?;
    let pods = (hi.pods - lo.pods) as f64;
    let rss = match (lo.rss_kib, hi.rss_kib) {
        (Some(a), Some(b)) => format!("RSS {:+.1} KiB per pod", (b as f64 - a as f64) / pods),
        _ => "RSS not measured".into(),
    };
    let idle = match (lo.idle_cores, hi.idle_cores) {
        (Some(a), Some(b)) => format!("idle {:+.4} cores per 100 pods", (b - a) / pods * 100.0),
        _ => "idle not measured".into(),
    };
    Some(format!("{rss}, {idle} ({} -> {} pods)", lo.pods, hi.pods))
}

/// Idle CPU grows at most linearly in pods; kubelet-rs's idle at its largest count below the
/// Go kubelet's at its smallest (110 in the issue); relist p99 ≤ 100 ms at the largest count.
fn targets(runs: &[CountRuns]) -> Vec<String> {
    let rs: Vec<&KubeletRun> = runs.iter().filter_map(|r| r.1.as_ref()).collect();
    let go: Vec<&KubeletRun> = runs.iter().filter_map(|r| r.0.as_ref()).collect();
    let Some((lo, hi)) = ends(&rs) else {
        return vec!["one count only: no density targets".into()];
    };
    let growth = match (lo.idle_cores, hi.idle_cores) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    let linear = hi.pods as f64 / lo.pods.max(1) as f64;
    let go_small = go.iter().min_by_key(|k| k.pods);
    vec![
        verdict(
            &format!(
                "idle grows at most linearly ({} -> {} pods: ×{linear:.2})",
                lo.pods, hi.pods
            ),
            growth,
            Some(linear),
            |v| format!("×{v:.2}"),
        ),
        verdict(
            &format!(
                "idle at {} pods below the Go kubelet's at {} pods",
                hi.pods,
                go_small.map(|k| k.pods).unwrap_or_default()
            ),
            hi.idle_cores,
            go_small.and_then(|k| k.idle_cores),
            |v| format!("{v:.4} cores"),
        ),
        verdict(
            &format!("relist p99 ≤ 100 ms at {} pods", hi.pods),
            hi.idle_relist_p99.map(|(p, _)| p * 1000.0),
            Some(100.0),
            |v| format!("{v:.1} ms"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pods: usize, idle: f64, rss_mib: u64, relist_ms: f64) -> KubeletRun {
        KubeletRun {
            pods,
            idle_cores: Some(idle),
            rss_kib: Some(rss_mib * 1024),
            idle_relist_p99: Some((relist_ms / 1000.0, 60.0)),
            ..KubeletRun::default()
        }
    }

    #[test]
    fn slopes_and_targets_come_from_the_smallest_and_largest_counts() {
        let runs = vec![
            (
                Some(run(110, 0.1, 130, 20.0)),
                Some(run(110, 0.004, 30, 5.0)),
            ),
            (
                Some(run(500, 0.5, 300, 90.0)),
                Some(run(500, 0.012, 39, 40.0)),
            ),
        ];
        let lines = table(&runs);
        let text = lines.join("\n");
        assert!(text.contains("kubelet-rs: RSS +23.6 KiB per pod, idle +0.0021 cores per 100 pods (110 -> 500 pods)"), "{text}");
        let t = targets(&runs);
        assert!(t[0].contains("×3.00 (limit ×4.55) — met"), "{t:?}");
        assert!(
            t[1].contains("0.0120 cores (limit 0.1000 cores) — met"),
            "{t:?}"
        );
        assert!(t[2].contains("40.0 ms (limit 100.0 ms) — met"), "{t:?}");
        let worse = vec![
            (None, Some(run(110, 0.001, 30, 5.0))),
            (None, Some(run(250, 0.01, 30, 150.0))),
        ];
        let t = targets(&worse);
        assert!(
            t[0].ends_with("NOT met") && t[2].ends_with("NOT met"),
            "{t:?}"
        );
        assert!(t[1].contains("no limit measured"), "{t:?}");
        assert_eq!(targets(&worse[..1]), ["one count only: no density targets"]);
    }
}
