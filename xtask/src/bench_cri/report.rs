//! The benchmark's report: the raw/backend table and the end-to-end kubelet table with the
//! ratios to the raw CRI floor.

use std::time::Duration;

use super::kubelets::KubeletRun;
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
    rows: &[(usize, WorkloadRun, WorkloadRun)],
    go: Option<&KubeletRun>,
    rs: Option<&KubeletRun>,
) {
    println!();
    if !rows.is_empty() {
        println!("== CRI backend vs raw CRI (N pods at once; start = RunPodSandbox+CreateContainer+StartContainer,");
        println!("   stop = StopContainer+RemoveContainer+StopPodSandbox+RemovePodSandbox; latency per pod)");
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
            for e in r.errors.iter().chain(b.errors.iter()).take(5) {
                println!("        error: {e}");
            }
        }
        println!();
    }

    let floor = rows
        .iter()
        .find(|(n, _, _)| *n == args.pods)
        .map(|(_, r, _)| r);
    println!(
        "== {} static busybox pods written at once; idle window {} s",
        args.pods, args.idle_secs
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
            args.pods
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
        for n in &k.notes {
            println!("            note: {n}");
        }
    }
    println!();
    println!("targets: backend and kubelet-rs start/teardown ≤ 1.10x raw CRI; kubelet-rs idle ≤ 0.01 cores, RSS ≤ 25 MiB");
}
