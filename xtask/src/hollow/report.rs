//! The figures of one hollow-node run and how they are printed.

use std::time::Duration;

/// What one run measured; `None` where the run did not get that far.
#[derive(Debug, Default)]
pub(super) struct Report {
    /// Hollow nodes.
    pub(super) nodes: usize,
    /// Pods per node.
    pub(super) pods_per_node: usize,
    /// The run id (namespace `hollow-<id>`).
    pub(super) run_id: String,
    /// Whether this is an optimised build.
    pub(super) release: bool,
    /// Issuing (or finding cached) the node identities.
    pub(super) identities: Option<Duration>,
    /// Process RSS before any node started (KiB).
    pub(super) baseline_kib: Option<u64>,
    /// Nodes started -> all Ready through the API server.
    pub(super) nodes_ready: Option<Duration>,
    /// (VmRSS, VmHWM) once all nodes are Ready, before any pod (KiB).
    pub(super) started_kib: Option<(u64, u64)>,
    /// First pod create -> all created.
    pub(super) pods_created: Option<Duration>,
    /// First pod create -> all Running through the API server.
    pub(super) pods_running: Option<Duration>,
    /// (VmRSS, VmHWM) at the end of the idle window (KiB).
    pub(super) steady_kib: Option<(u64, u64)>,
    /// Open sockets of the process (before the nodes, at the end of the idle window).
    pub(super) sockets: Option<(usize, usize)>,
    /// (CPU seconds of the process, wall time) over the idle window.
    pub(super) idle_cpu: Option<(f64, Duration)>,
    /// CPU seconds of each control-plane component over the idle window.
    pub(super) control_plane_cpu: Vec<(String, f64)>,
    /// The audit-log report of the hollow nodes' requests over the idle window.
    pub(super) audit: Option<String>,
    /// Pods deleted -> none left in the namespace.
    pub(super) pods_deleted: Option<Duration>,
    /// Anything that went wrong or is worth knowing.
    pub(super) notes: Vec<String>,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// (RSS - baseline) / nodes, in MiB.
pub(super) fn per_node_mib(rss_kib: u64, baseline_kib: u64, nodes: usize) -> f64 {
    mib(rss_kib.saturating_sub(baseline_kib)) / nodes.max(1) as f64
}

/// Requests per minute from the first line of `audit-rate`'s report ("T requests over M min:
/// R/min").
pub(super) fn audit_total_per_min(report: &str) -> Option<f64> {
    let first = report.lines().next()?;
    let (_, rate) = first.rsplit_once(": ")?;
    rate.strip_suffix("/min")?.trim().parse().ok()
}

impl Report {
    /// Prints the report.
    pub(super) fn print(&self) {
        let n = self.nodes;
        let secs = |d: Option<Duration>| {
            d.map(|d| format!("{:.1} s", d.as_secs_f64()))
                .unwrap_or_else(|| "-".into())
        };
        println!();
        println!(
            "== hollow nodes: {n} nodes x {} pods = {} pods (run {}){}",
            self.pods_per_node,
            n * self.pods_per_node,
            self.run_id,
            if self.release {
                ""
            } else {
                " -- DEBUG BUILD: figures are not representative, use --release"
            }
        );
        println!("node identities:          {}", secs(self.identities));
        println!(
            "all nodes Ready:          {} after start",
            secs(self.nodes_ready)
        );
        println!(
            "all pods created:         {} after the first create",
            secs(self.pods_created)
        );
        println!(
            "all pods Running (API):   {} after the first create",
            secs(self.pods_running)
        );
        if let Some(b) = self.baseline_kib {
            println!(
                "RSS baseline:             {:.1} MiB (before any node)",
                mib(b)
            );
        }
        if let Some((rss, hwm)) = self.started_kib {
            println!(
                "RSS, nodes Ready:         {:.1} MiB (VmHWM {:.1} MiB)",
                mib(rss),
                mib(hwm)
            );
        }
        if let Some((rss, hwm)) = self.steady_kib {
            println!(
                "RSS, steady:              {:.1} MiB (VmHWM {:.1} MiB)",
                mib(rss),
                mib(hwm)
            );
        }
        if let (Some(b), Some((rss, _))) = (self.baseline_kib, self.started_kib) {
            println!(
                "per node, no pods:        {:.2} MiB ((RSS - baseline) / {n})",
                per_node_mib(rss, b, n)
            );
        }
        if let (Some(b), Some((rss, hwm))) = (self.baseline_kib, self.steady_kib) {
            println!(
                "per node, {} pods:        {:.2} MiB ((RSS - baseline) / {n}; by VmHWM {:.2} MiB)",
                self.pods_per_node,
                per_node_mib(rss, b, n),
                per_node_mib(hwm, b, n)
            );
        }
        if let Some((before, steady)) = self.sockets {
            println!(
                "open sockets, steady:     {steady} ({before} before the nodes; {:.1} per node)",
                steady.saturating_sub(before) as f64 / n.max(1) as f64
            );
        }
        if let Some((cpu, wall)) = self.idle_cpu {
            let w = wall.as_secs_f64().max(0.001);
            println!(
                "CPU, idle window:         {cpu:.2} s over {w:.0} s = {:.4} cores ({:.5} per node)",
                cpu / w,
                cpu / w / n.max(1) as f64
            );
        }
        if let (Some((_, wall)), false) = (self.idle_cpu, self.control_plane_cpu.is_empty()) {
            let w = wall.as_secs_f64().max(0.001);
            let total: f64 = self.control_plane_cpu.iter().map(|(_, c)| c).sum();
            let each: Vec<String> = self
                .control_plane_cpu
                .iter()
                .map(|(name, c)| format!("{name} {:.3}", c / w))
                .collect();
            println!(
                "control plane, idle:      {:.3} cores ({})",
                total / w,
                each.join(", ")
            );
        }
        if let Some(a) = &self.audit {
            match audit_total_per_min(a) {
                Some(r) => println!(
                    "API requests (audit):     {r:.0}/min = {:.2}/s ({:.1}/min per node)",
                    r / 60.0,
                    r / n.max(1) as f64
                ),
                None => println!(
                    "API requests (audit):     {}",
                    a.lines().next().unwrap_or("-")
                ),
            }
            for l in a.lines().skip(1).take(10) {
                println!("    {}", l.trim());
            }
        }
        println!("pods deleted -> gone:     {}", secs(self.pods_deleted));
        for note in &self.notes {
            println!("note: {note}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_total_comes_from_the_first_line() {
        let cases = [
            (
                "1234 requests over 1.0 min: 1234.0/min\n   600.0/min  update leases",
                Some(1234.0),
            ),
            ("12 requests over 0.5 min: 24.5/min", Some(24.5)),
            ("no requests", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(audit_total_per_min(text), want, "{text}");
        }
    }

    #[test]
    fn per_node_memory_is_the_growth_over_the_baseline() {
        assert_eq!(per_node_mib(20 * 1024, 10 * 1024, 5), 2.0);
        assert_eq!(per_node_mib(1024, 2048, 5), 0.0);
        assert_eq!(per_node_mib(2048, 1024, 0), 1.0);
    }
}
