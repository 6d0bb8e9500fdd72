//! A process's CPU time and memory, from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use anyhow::{anyhow, Result};

/// Clock ticks per second (`getconf CLK_TCK`; 100 when it cannot be asked).
pub(crate) async fn clock_ticks() -> f64 {
    let out = tokio::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .await;
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in clock ticks.
pub(crate) async fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = tokio::fs::read_to_string(format!("/proc/{pid}/stat")).await?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("malformed /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("/proc/{pid}/stat field {i}"))
    };
    // Fields after the command: state is #3, utime #14, stime #15.
    Ok(field(11)? + field(12)?)
}

/// (VmRSS, VmHWM) in KiB.
pub(crate) async fn memory_kib(pid: u32) -> Result<(u64, u64)> {
    let f = status_figures(pid).await?;
    Ok((f.rss_kib, f.hwm_kib))
}

/// The figures of one reading of `/proc/<pid>/status` (so the parts add up within the whole).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StatusFigures {
    /// VmRSS, KiB.
    pub(crate) rss_kib: u64,
    /// VmHWM (the peak RSS), KiB.
    pub(crate) hwm_kib: u64,
    /// RssAnon, KiB: the resident memory the process allocated.
    pub(crate) anon_kib: u64,
    /// RssFile, KiB: the resident pages of files it maps (its own binary's code among them;
    /// clean pages the page cache shares).
    pub(crate) file_kib: u64,
    /// Threads: its runtime's workers and whatever blocking threads it keeps alive.
    pub(crate) threads: u64,
}

/// Reads [`StatusFigures`] of process `pid`.
pub(crate) async fn status_figures(pid: u32) -> Result<StatusFigures> {
    let status = tokio::fs::read_to_string(format!("/proc/{pid}/status")).await?;
    let number = |key| status_number(&status, key, pid);
    Ok(StatusFigures {
        rss_kib: number("VmRSS:")?,
        hwm_kib: number("VmHWM:")?,
        anon_kib: number("RssAnon:")?,
        file_kib: number("RssFile:")?,
        threads: number("Threads:")?,
    })
}

/// The number on one `/proc/<pid>/status` line (`key` with its colon): KiB for the memory lines.
fn status_number(status: &str, key: &str, pid: u32) -> Result<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{key} missing in /proc/{pid}/status"))
}

/// The machine's CPU time since boot, from `/proc/stat`: how busy it was between two reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MachineTicks {
    /// Ticks of all CPUs but idle and iowait.
    busy: u64,
    /// Ticks of all CPUs.
    all: u64,
    /// CPUs (`cpuN` lines).
    cpus: usize,
}

impl MachineTicks {
    pub(crate) async fn read() -> Result<MachineTicks> {
        Self::parse(&tokio::fs::read_to_string("/proc/stat").await?)
    }

    fn parse(stat: &str) -> Result<MachineTicks> {
        let total = stat
            .lines()
            .find_map(|l| l.strip_prefix("cpu "))
            .ok_or_else(|| anyhow!("no cpu line in /proc/stat"))?;
        let f: Vec<u64> = total
            .split_whitespace()
            .map(|v| v.parse().map_err(|_| anyhow!("/proc/stat: {v:?}")))
            .collect::<Result<_>>()?;
        // user nice system idle iowait irq softirq steal (guest time is within user).
        let all: u64 = f.iter().take(8).sum();
        let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
        let cpus = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count();
        Ok(MachineTicks {
            busy: all.saturating_sub(idle),
            all,
            cpus,
        })
    }

    /// Cores busy on average since `earlier`.
    pub(crate) fn busy_cores_since(&self, earlier: &MachineTicks) -> f64 {
        let all = self.all.saturating_sub(earlier.all);
        if all == 0 {
            return 0.0;
        }
        self.busy.saturating_sub(earlier.busy) as f64 / all as f64 * self.cpus as f64
    }
}

/// Number of open sockets of a process (its file descriptors that are sockets).
pub(crate) async fn sockets(pid: u32) -> Result<usize> {
    let mut dir = tokio::fs::read_dir(format!("/proc/{pid}/fd")).await?;
    let mut n = 0;
    while let Some(e) = dir.next_entry().await? {
        if let Ok(target) = tokio::fs::read_link(e.path()).await {
            if target.to_string_lossy().starts_with("socket:") {
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn own_process_figures_are_readable() {
        let pid = std::process::id();
        cpu_ticks(pid).await.unwrap();
        let (rss, hwm) = memory_kib(pid).await.unwrap();
        assert!(rss > 0 && hwm >= rss);
        let f = status_figures(pid).await.unwrap();
        let (rss, anon, file) = (f.rss_kib, f.anon_kib, f.file_kib);
        assert!(anon > 0 && file > 0);
        // The parts within the whole, from one reading: other tests' threads allocate between
        // two.
        assert!(anon + file <= rss, "{anon} + {file} KiB > {rss} KiB");
        assert!(f.threads >= 1);
        let before = sockets(pid).await.unwrap();
        let _l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(sockets(pid).await.unwrap(), before + 1);
        MachineTicks::read().await.unwrap();
    }

    #[test]
    fn machine_busy_cores_count_all_but_idle_and_iowait() {
        let stat = |user: u64, idle: u64, iowait: u64| {
            format!(
                "cpu  {user} 0 0 {idle} {iowait} 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n\
                 cpu1 1 0 0 1 0 0 0 0 0 0\nintr 5 1 2\nctxt 99\n"
            )
        };
        let a = MachineTicks::parse(&stat(100, 100, 0)).unwrap();
        let b = MachineTicks::parse(&stat(250, 130, 20)).unwrap();
        assert_eq!(a.cpus, 2);
        // 150 of 200 ticks busy on 2 CPUs: 1.5 cores.
        assert!((b.busy_cores_since(&a) - 1.5).abs() < 1e-9);
        assert_eq!(a.busy_cores_since(&a), 0.0);
        assert!(MachineTicks::parse("intr 5\n").is_err());
    }
}
