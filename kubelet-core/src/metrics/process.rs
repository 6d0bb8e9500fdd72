//! `process_*`: the kubelet process itself, from `/proc/self` (what client_golang's process
//! collector reports): CPU seconds, resident and virtual memory, start time, open and
//! maximum file descriptors. Reads are small procfs reads; a value that cannot be read is
//! left out.

use std::fmt::Write as _;

use super::families::value;

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// One reading of the process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessStats {
    /// User + system CPU time in seconds.
    pub cpu_seconds: Option<f64>,
    /// Resident memory in bytes.
    pub resident_bytes: Option<u64>,
    /// Virtual memory in bytes.
    pub virtual_bytes: Option<u64>,
    /// Start time, seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit of open file descriptors.
    pub max_fds: Option<u64>,
}

/// Parses `/proc/<pid>/stat`: (cpu seconds, start ticks after boot, vsize, rss pages).
fn parse_stat(stat: &str) -> Option<(f64, u64, u64, u64)> {
    // The command may contain spaces and parentheses: fields start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let cpu = (num(14)? + num(15)?) as f64 / USER_HZ;
    Some((cpu, num(22)?, num(23)?, num(24)?))
}

/// The soft "Max open files" of `/proc/<pid>/limits`.
fn parse_max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` of `/proc/stat`.
fn parse_btime(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

impl ProcessStats {
    /// Reads this process.
    pub fn read() -> ProcessStats {
        let mut out = ProcessStats::default();
        if let Some((cpu, start_ticks, vsize, rss)) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .as_deref()
            .and_then(parse_stat)
        {
            out.cpu_seconds = Some(cpu);
            out.virtual_bytes = Some(vsize);
            out.resident_bytes = Some(rss.saturating_mul(rustix::param::page_size() as u64));
            out.start_time_seconds = std::fs::read_to_string("/proc/stat")
                .ok()
                .as_deref()
                .and_then(parse_btime)
                .map(|b| b as f64 + start_ticks as f64 / USER_HZ);
        }
        out.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        out.max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .as_deref()
            .and_then(parse_max_fds);
        out
    }

    /// The `process_*` families in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let mut one = |name: &str, kind: &str, help: &str, v: Option<f64>| {
            if let Some(v) = v {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                    value(v)
                );
            }
        };
        one(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds,
        );
        one(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds.map(|v| v as f64),
        );
        one(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds.map(|v| v as f64),
        );
        one(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_bytes.map(|v| v as f64),
        );
        one(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds,
        );
        one(
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            self.virtual_bytes.map(|v| v as f64),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "1234 (kube let) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 5000 123456789 2048 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((3.0, 5000, 123_456_789, 2048)));
        assert_eq!(parse_max_fds("Limit Soft Hard Units\nMax open files            1048576              1048576              files\n"), Some(1_048_576));
        assert_eq!(
            parse_btime("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        let me = ProcessStats::read();
        assert!(
            me.cpu_seconds.is_some() && me.resident_bytes.unwrap_or(0) > 0,
            "{me:?}"
        );
        assert!(me.open_fds.unwrap_or(0) > 0 && me.max_fds.is_some());
        let mut out = String::new();
        me.render(&mut out);
        assert!(
            out.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{out}"
        );
        assert!(out.contains("process_start_time_seconds "), "{out}");
    }
}
