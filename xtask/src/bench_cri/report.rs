//! The benchmark's report: the raw/backend table and the end-to-end kubelet table with the
//! ratios to the raw CRI floor.

use std::collections::BTreeMap;
use std::time::Duration;

use super::kubelets::KubeletRun;
use super::raw::TeardownOrder;
#[cfg(test)]
use super::restart::Restart;
use super::spans::{breakdown_lines, spread};
use super::workload::WorkloadRun;
use super::BenchArgs;

pub(super) fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

pub(super) fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

pub(super) fn ratio(a: Option<Duration>, floor: Option<Duration>) -> String {
    match (a, floor) {
        (Some(a), Some(f)) if !f.is_zero() => format!("{:.2}x", a.as_secs_f64() / f.as_secs_f64()),
        _ => "-".into(),
    }
}

pub(super) fn print_report(
    args: &BenchArgs,
    pods: usize,
    rows: &[(usize, WorkloadRun, WorkloadRun)],
    go: Option<&KubeletRun>,
    rs: Option<&KubeletRun>,
) {
    println!();
    if !rows.is_empty() {
        let stop = match args.raw_teardown {
            TeardownOrder::RemoveFirst => "StopContainer+RemoveContainer+StopPodSandbox",
            TeardownOrder::StopSandboxFirst => "StopContainer+StopPodSandbox+RemoveContainer",
        };
        println!("== CRI backend vs raw CRI (N pods at once; start = RunPodSandbox+CreateContainer+StartContainer,");
        println!("   stop = {stop}+RemovePodSandbox; latency per pod)");
        println!(
            "{:>4}  {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  errors",
            "N", "path", "start s", "p50 ms", "p99 ms", "stop s", "start×", "stop×"
        );
        for (n, r, b) in rows {
            for (label, w) in [("raw CRI", r), ("backend", b)] {
                println!(
                    "{:>4}  {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {}",
                    n,
                    label,
                    secs(w.start),
                    ms(w.percentile(50.0)),
                    ms(w.percentile(99.0)),
                    secs(w.stop),
                    ratio(Some(w.start), Some(r.start)),
                    ratio(Some(w.stop), Some(r.stop)),
                    w.errors.len()
                );
            }
            for (method, d) in &r.calls {
                println!("        raw {method:<17} ms p50 p90 max: {}", spread(d));
            }
            for e in r.errors.iter().chain(b.errors.iter()).take(5) {
                println!("        error: {e}");
            }
        }
        println!();
    }

    let floor = rows.iter().find(|(n, _, _)| *n == pods).map(|(_, r, _)| r);
    println!(
        "== {} static busybox pods written at once; idle window {} s",
        pods, args.idle_secs
    );
    println!("   start = manifests written -> all Running in /pods; stopped/removed = manifests removed ->");
    println!(
        "   no running container / no container at all listed by CRI; ratios to the raw CRI floor"
    );
    println!(
        "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
        "row",
        "start s",
        "idle cores",
        "RSS MiB",
        "HWM MiB",
        "stopped s",
        "removed s",
        "start×",
        "stopped×",
        "removed×"
    );
    match floor {
        Some(f) => println!(
            "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
            "raw CRI",
            secs(f.start),
            "-",
            "-",
            "-",
            "-",
            secs(f.stop),
            "1.00x",
            "-",
            "1.00x"
        ),
        None => println!(
            "raw CRI     (not measured for {} pods: add it to --counts)",
            pods
        ),
    }
    let mib = |k: Option<u64>| {
        k.map(|k| format!("{:.1}", k as f64 / 1024.0))
            .unwrap_or("-".into())
    };
    for (label, k) in [("Go kubelet", go), ("kubelet-rs", rs)] {
        let Some(k) = k else { continue };
        println!(
            "{:<11} {:>8} {:>11} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
            label,
            k.start.map(secs).unwrap_or("-".into()),
            k.idle_cores
                .map(|c| format!("{c:.4}"))
                .unwrap_or("-".into()),
            mib(k.rss_kib),
            mib(k.hwm_kib),
            k.stopped.map(secs).unwrap_or("-".into()),
            k.teardown.map(secs).unwrap_or("-".into()),
            ratio(k.start, floor.map(|f| f.start)),
            ratio(k.stopped, floor.map(|f| f.stop)),
            ratio(k.teardown, floor.map(|f| f.stop)),
        );
        if let Some((anon, file)) = k.rss_parts_kib {
            println!(
                "            RSS: {} MiB anonymous, {} MiB file-backed (the binary's code pages, shared with the page cache); {} threads",
                mib(Some(anon)),
                mib(Some(file)),
                k.threads.map(|t| t.to_string()).unwrap_or("-".into())
            );
        }
        if let Some(calls) = &k.idle_runtime_calls {
            println!(
                "            runtime calls at rest: {}",
                super::runtime_calls::describe(calls)
            );
        }
        if let Some((p99, n)) = k.idle_relist_p99 {
            println!(
                "            relists at rest: {n:.0}, p99 {:.1} ms (kubelet_pleg_relist_duration_seconds)",
                p99 * 1000.0
            );
        }
        if let Some(r) = &k.restart {
            println!(
                "            restart: all Running {} after the new process started; {}/{} containers kept, restart counts {}",
                r.adopted.map(|d| format!("{:.2} s", d.as_secs_f64())).unwrap_or("not within 60 s".into()),
                r.kept,
                r.before,
                r.restarts
            );
        }
        for n in &k.notes {
            println!("            note: {n}");
        }
    }
    for line in cpu_lines(floor, go, rs) {
        println!("{line}");
    }
    if let Some((start, teardown)) = rs.and_then(|r| r.breakdown.as_ref()) {
        let no_calls = BTreeMap::new();
        let raw = floor.map(|f| &f.calls).unwrap_or(&no_calls);
        println!();
        println!("== kubelet-rs: where the time goes (--breakdown: its spans, exported to the benchmark)");
        let rs = rs.map(|r| (r.start, r.teardown)).unwrap_or_default();
        for line in breakdown_lines("start: manifests written -> all Running", rs.0, start, raw)
            .into_iter()
            .chain(breakdown_lines(
                "teardown: manifests removed -> no container",
                rs.1,
                teardown,
                raw,
            ))
        {
            println!("{line}");
        }
    }
    if let Some(rs) = rs {
        println!();
        println!("targets of issue #18 (kubelet-rs):");
        for t in targets(rs, floor, go) {
            println!("  {t}");
        }
    }
}

/// The CPU the kubelets used during the start and the teardown, and how busy the whole machine
/// was (on a saturated machine the kubelet's CPU is taken from the runtime's).
fn cpu_lines(
    floor: Option<&WorkloadRun>,
    go: Option<&KubeletRun>,
    rs: Option<&KubeletRun>,
) -> Vec<String> {
    let f = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or("-".into());
    let mut lines = vec![
        String::new(),
        "CPU during the phases: the kubelet's CPU seconds, and the cores of the whole machine busy"
            .to_string(),
        format!(
            "{:<11} {:>14} {:>14} {:>17} {:>17}",
            "row", "start: kubelet", "machine cores", "teardown: kubelet", "machine cores"
        ),
    ];
    if let Some(r) = floor {
        lines.push(format!(
            "{:<11} {:>14} {:>14} {:>17} {:>17}",
            "raw CRI",
            "-",
            f(r.start_busy),
            "-",
            f(r.stop_busy)
        ));
    }
    for (label, k) in [("Go kubelet", go), ("kubelet-rs", rs)] {
        let Some(k) = k else { continue };
        lines.push(format!(
            "{:<11} {:>14} {:>14} {:>17} {:>17}",
            label,
            f(k.start_cpu),
            f(k.start_busy),
            f(k.teardown_cpu),
            f(k.teardown_busy)
        ));
    }
    lines
}

/// One target and how this run did against it.
pub(super) fn verdict(
    name: &str,
    value: Option<f64>,
    limit: Option<f64>,
    show: impl Fn(f64) -> String,
) -> String {
    match (value, limit) {
        (Some(v), Some(l)) => {
            let met = if v <= l { "met" } else { "NOT met" };
            format!("{name}: {} (limit {}) — {met}", show(v), show(l))
        }
        (None, _) => format!("{name}: not measured"),
        (Some(v), None) => format!("{name}: {} — no limit measured in this run", show(v)),
    }
}

/// The targets for the kubelet-rs row: start and teardown within 1.05x of the raw
/// CRI floor of the same run, idle ≤ 0.005 cores and no more than the Go kubelet's, RSS
/// ≤ 20 MiB with the pods running.
pub(super) fn targets(
    rs: &KubeletRun,
    floor: Option<&WorkloadRun>,
    go: Option<&KubeletRun>,
) -> Vec<String> {
    let s = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let x = |v: f64| format!("{v:.2}x");
    let per_floor = |a: Option<Duration>, f: Option<Duration>| match (s(a), s(f)) {
        (Some(a), Some(f)) if f > 0.0 => Some(a / f),
        _ => None,
    };
    let floor_ratio = floor.map(|_| 1.05);
    let mut out = vec![
        verdict(
            "start ≤ 1.05x raw CRI",
            per_floor(rs.start, floor.map(|f| f.start)),
            floor_ratio,
            x,
        ),
        verdict(
            "teardown ≤ 1.05x raw CRI",
            per_floor(rs.teardown, floor.map(|f| f.stop)),
            floor_ratio,
            x,
        ),
        verdict("idle ≤ 0.005 cores", rs.idle_cores, Some(0.005), |v| {
            format!("{v:.4} cores")
        }),
        verdict(
            "RSS ≤ 20 MiB",
            rs.rss_kib.map(|k| k as f64 / 1024.0),
            Some(20.0),
            |v| format!("{v:.1} MiB"),
        ),
    ];
    out.push(match &rs.restart {
        Some(r) if r.kept < r.before || r.restarts > 0 => format!(
            "restart adopts every pod within 1 s, none restarted: NOT met ({}/{} containers kept, restart counts {})",
            r.kept, r.before, r.restarts
        ),
        Some(r) => verdict(
            "restart adopts every pod within 1 s, none restarted",
            r.adopted.map(|d| d.as_secs_f64()),
            Some(1.0),
            |v| format!("{v:.2} s"),
        ),
        None => "restart adopts every pod within 1 s, none restarted: not measured".into(),
    });
    if let Some(go) = go {
        out.push(verdict(
            "idle ≤ the Go kubelet's",
            rs.idle_cores,
            go.idle_cores,
            |v| format!("{v:.4} cores"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_what_was_met_and_what_was_not_measured() {
        let rs = KubeletRun {
            start: Some(Duration::from_millis(10_400)),
            idle_cores: Some(0.0083),
            rss_kib: Some(34 * 1024),
            teardown: None,
            ..KubeletRun::default()
        };
        let floor = WorkloadRun {
            start: Duration::from_secs(10),
            stop: Duration::from_secs(8),
            ..WorkloadRun::default()
        };
        let go = KubeletRun {
            idle_cores: Some(0.07),
            ..KubeletRun::default()
        };
        let lines = targets(&rs, Some(&floor), Some(&go));
        assert_eq!(
            lines,
            [
                "start ≤ 1.05x raw CRI: 1.04x (limit 1.05x) — met",
                "teardown ≤ 1.05x raw CRI: not measured",
                "idle ≤ 0.005 cores: 0.0083 cores (limit 0.0050 cores) — NOT met",
                "RSS ≤ 20 MiB: 34.0 MiB (limit 20.0 MiB) — NOT met",
                "restart adopts every pod within 1 s, none restarted: not measured",
                "idle ≤ the Go kubelet's: 0.0083 cores (limit 0.0700 cores) — met",
            ]
        );
        let restarted = |adopted_ms, kept, restarts| KubeletRun {
            restart: Some(Restart {
                adopted: Some(Duration::from_millis(adopted_ms)),
                before: 110,
                kept,
                restarts,
            }),
            ..KubeletRun::default()
        };
        for (run, want) in [
            (restarted(640, 110, 0), "restart adopts every pod within 1 s, none restarted: 0.64 s (limit 1.00 s) — met"),
            (restarted(1500, 110, 0), "restart adopts every pod within 1 s, none restarted: 1.50 s (limit 1.00 s) — NOT met"),
            (restarted(640, 109, 1), "restart adopts every pod within 1 s, none restarted: NOT met (109/110 containers kept, restart counts 1)"),
        ] {
            assert_eq!(targets(&run, None, None)[4], want);
        }
        let cpu = cpu_lines(
            Some(&WorkloadRun {
                start_busy: Some(1.94),
                ..WorkloadRun::default()
            }),
            None,
            Some(&KubeletRun {
                start_cpu: Some(0.8),
                teardown_busy: Some(1.5),
                ..KubeletRun::default()
            }),
        );
        assert_eq!(cpu.len(), 5);
        assert!(cpu[3].starts_with("raw CRI") && cpu[3].contains("1.94"));
        let rs_cpu: Vec<&str> = cpu[4].split_whitespace().collect();
        assert_eq!(rs_cpu, ["kubelet-rs", "0.80", "-", "-", "1.50"]);
        let no_floor = targets(&rs, None, Some(&KubeletRun::default()));
        assert_eq!(no_floor[0], "start ≤ 1.05x raw CRI: not measured");
        assert_eq!(
            no_floor[5],
            "idle ≤ the Go kubelet's: 0.0083 cores — no limit measured in this run"
        );
    }
}
