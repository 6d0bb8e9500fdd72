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
    let status = tokio::fs::read_to_string(format!("/proc/{pid}/status")).await?;
    let get = |key: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("{key} missing in /proc/{pid}/status"))
    };
    Ok((get("VmRSS:")?, get("VmHWM:")?))
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
        let before = sockets(pid).await.unwrap();
        let _l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(sockets(pid).await.unwrap(), before + 1);
    }
}
