//! The certificate managers' metrics (Go's `kubelet_certificate_manager_*`): the TTL of the
//! certificate in use and the failed renewals, rendered once a manager has registered them.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use super::families::head;

/// One certificate manager's metrics (Go's `certificate_manager_*_ttl_seconds` gauge and
/// `*_expiration_renew_errors` counter): rendered once a manager registered them.
#[derive(Debug, Default)]
pub struct CertificateMetrics {
    registered: AtomicBool,
    /// `notAfter` of the certificate in use (Unix seconds); 0: none.
    not_after: AtomicI64,
    renew_errors: AtomicU64,
}

impl CertificateMetrics {
    /// A manager runs: render these metrics.
    pub fn register(&self) {
        self.registered.store(true, Ordering::Relaxed);
    }
    /// Whether a manager registered them.
    pub fn is_registered(&self) -> bool {
        self.registered.load(Ordering::Relaxed)
    }
    /// The certificate in use expires at `not_after` (Unix seconds); `None`: there is none.
    pub fn set_not_after(&self, not_after: Option<i64>) {
        self.not_after
            .store(not_after.unwrap_or(0), Ordering::Relaxed);
    }
    /// A renewal failed.
    pub fn renew_error(&self) {
        self.renew_errors.fetch_add(1, Ordering::Relaxed);
    }
    /// Failed renewals so far.
    pub fn renew_errors(&self) -> u64 {
        self.renew_errors.load(Ordering::Relaxed)
    }
    /// Seconds until the certificate expires at `now` (Unix seconds; negative once
    /// expired); +Inf without one.
    pub fn ttl_seconds(&self, now: i64) -> f64 {
        match self.not_after.load(Ordering::Relaxed) {
            0 => f64::INFINITY,
            t => (t - now) as f64,
        }
    }
}

fn prometheus_float(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else {
        v.to_string()
    }
}

/// Renders the client and server certificate metrics that were registered.
pub(super) fn render(out: &mut String, client: &CertificateMetrics, server: &CertificateMetrics) {
    let now = crate::clock::now_unix_nanos() / 1_000_000_000;
    for (m, ttl, ttl_help, errors) in [
        (
            client,
            "kubelet_certificate_manager_client_ttl_seconds",
            "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
            "kubelet_certificate_manager_client_expiration_renew_errors",
        ),
        (
            server,
            "kubelet_certificate_manager_server_ttl_seconds",
            "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
            "kubelet_server_expiration_renew_errors",
        ),
    ] {
        if !m.is_registered() {
            continue;
        }
        head(out, ttl, "gauge", ttl_help);
        let _ = writeln!(out, "{ttl} {}", prometheus_float(m.ttl_seconds(now)));
        head(out, errors, "counter", "Counter of certificate renewal errors.");
        let _ = writeln!(out, "{errors} {}", m.renew_errors());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::Metrics;

    #[tokio::test(start_paused = true)]
    async fn certificate_metrics_render_once_registered() {
        let m = Metrics::default();
        assert!(!m.render().contains("certificate_manager"));
        m.client_certificate.register();
        let out = m.render();
        assert!(
            out.contains("kubelet_certificate_manager_client_ttl_seconds +Inf\n"),
            "{out}"
        );
        let now = crate::clock::now_unix_nanos() / 1_000_000_000;
        m.client_certificate.set_not_after(Some(now + 120));
        m.client_certificate.renew_error();
        tokio::time::advance(Duration::from_secs(20)).await;
        let out = m.render();
        assert!(
            out.contains("kubelet_certificate_manager_client_ttl_seconds 100\n"),
            "{out}"
        );
        assert!(
            out.contains("kubelet_certificate_manager_client_expiration_renew_errors 1\n"),
            "{out}"
        );
        assert!(!out.contains("server_ttl_seconds"));
        m.server_certificate.register();
        m.server_certificate.set_not_after(Some(now - 5));
        let out = m.render();
        assert!(
            out.contains("kubelet_certificate_manager_server_ttl_seconds -25\n"),
            "{out}"
        );
        assert!(
            out.contains("kubelet_server_expiration_renew_errors 0\n"),
            "{out}"
        );
    }
}
