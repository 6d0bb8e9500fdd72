//! `kubelet_node_startup_*_duration_seconds` (Go's node start-up latency tracker): boot →
//! kubelet start → first registration attempt → node registered → node first Ready. The
//! gauges appear once the node was first Ready (after registering it); before that, or on a
//! node that was already registered, they are absent.

use std::fmt::Write as _;
use std::sync::Mutex;

use super::families::head;

/// The start-up milestones, Unix nanoseconds (0: not yet).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Milestones {
    boot: i64,
    kubelet_start: i64,
    registration_attempt: i64,
    registered: i64,
    ready: i64,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct NodeStartup {
    m: Mutex<Milestones>,
}

fn now() -> i64 {
    crate::clock::now_unix_nanos()
}

impl NodeStartup {
    fn with(&self, f: impl FnOnce(&mut Milestones)) {
        f(&mut self.m.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// The kubelet started; `boot_unix_secs` is the host's boot time (`/proc/stat` btime).
    pub fn record_kubelet_start(&self, boot_unix_secs: i64) {
        self.with(|m| {
            if m.kubelet_start == 0 {
                m.boot = boot_unix_secs.saturating_mul(1_000_000_000);
                m.kubelet_start = now();
            }
        });
    }

    /// The first attempt to register the node.
    pub fn record_registration_attempt(&self) {
        self.with(|m| {
            if m.registration_attempt == 0 {
                m.registration_attempt = now();
            }
        });
    }

    /// The node object was created by this kubelet.
    pub fn record_registered_new_node(&self) {
        self.with(|m| {
            if m.registered == 0 {
                m.registered = now();
            }
        });
    }

    /// The node was first reported Ready.
    pub fn record_node_ready(&self) {
        self.with(|m| {
            if m.ready == 0 && m.registered != 0 {
                m.ready = now();
            }
        });
    }

    /// The gauges, once the node was first Ready.
    pub fn render(&self, out: &mut String) {
        let m = *self.m.lock().unwrap_or_else(|e| e.into_inner());
        let secs = |a: i64, b: i64| (b - a) as f64 / 1e9;
        let rows = [
            (
                "kubelet_node_startup_pre_kubelet_duration_seconds",
                "Duration in seconds of node startup before kubelet starts.",
                m.boot,
                m.kubelet_start,
            ),
            (
                "kubelet_node_startup_pre_registration_duration_seconds",
                "Duration in seconds of node startup before registration.",
                m.kubelet_start,
                m.registration_attempt,
            ),
            (
                "kubelet_node_startup_registration_duration_seconds",
                "Duration in seconds of node startup during registration.",
                m.registration_attempt,
                m.registered,
            ),
            (
                "kubelet_node_startup_post_registration_duration_seconds",
                "Duration in seconds of node startup after registration.",
                m.registered,
                m.ready,
            ),
            (
                "kubelet_node_startup_duration_seconds",
                "Duration in seconds of node startup in total.",
                m.boot,
                m.ready,
            ),
        ];
        for (name, help, from, to) in rows {
            head(out, name, "gauge", help);
            if m.ready != 0 && from != 0 && to != 0 {
                let _ = writeln!(out, "{name} {}", secs(from, to));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn gauges_once_ready() {
        let s = NodeStartup::default();
        let boot = now() / 1_000_000_000 - 100;
        s.record_kubelet_start(boot);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        s.record_registration_attempt();
        tokio::time::advance(std::time::Duration::from_secs(2)).await;
        s.record_registered_new_node();
        let mut out = String::new();
        s.render(&mut out);
        assert!(
            !out.contains("\nkubelet_node_startup_duration_seconds "),
            "{out}"
        );
        tokio::time::advance(std::time::Duration::from_secs(3)).await;
        s.record_node_ready();
        let mut out = String::new();
        s.render(&mut out);
        assert!(
            out.contains("kubelet_node_startup_registration_duration_seconds 2\n"),
            "{out}"
        );
        assert!(
            out.contains("kubelet_node_startup_post_registration_duration_seconds 3\n"),
            "{out}"
        );
        assert!(
            out.contains("kubelet_node_startup_pre_registration_duration_seconds 1\n"),
            "{out}"
        );
    }
}
