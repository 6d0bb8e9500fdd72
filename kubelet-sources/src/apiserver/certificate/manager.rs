//! The certificate manager (client-go's `util/certificate` `manager`): keeps a certificate
//! current and renews it before it expires.
//!
//! States and transitions (one task, [`CertificateManager::run`]):
//!
//! ```text
//!   Waiting(deadline) ──deadline reached──▶ Rotating
//!   Rotating ──issued and stored──▶ publish the new pair ──▶ Waiting(next deadline)
//!   Rotating ──failed──▶ count a renew error, sleep 2s, 4s, 8s, 16s (±10%), then 32s
//!                       between tries until one succeeds ──▶ Rotating
//! ```
//!
//! The deadline is Go's: a uniformly random point between 70% and 90% of the current
//! certificate's lifetime (`notBefore + (0.7 + 0.2·r)·(notAfter − notBefore)`), or now when
//! there is no certificate or it no longer matches the template (a serving certificate
//! whose addresses changed). A rotation makes a new key and a `csr-` CSR, waits for it to be
//! issued (15 minutes at most), writes the pair to the [`FileStore`] and only then publishes
//! it: until the new certificate is in hand, the old one stays in use. Subscribers
//! ([`CertificateManager::subscribe`]) switch their TLS identity on publication; nothing
//! restarts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::clock::now_unix_nanos;
use kubelet_core::metrics::CertificateMetrics;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::csr::{make_csr, CsrTemplate, SignRequest, Signer};
use super::pair::CertPair;
use super::store::{stamp_now, FileStore};
use super::CertError;

/// How long a rotation waits for its CSR to be issued (Go's `certificateWaitTimeout`).
pub const CERTIFICATE_WAIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Go's backoff: 2s, doubling, five tries; then every 32s.
const BACKOFF_INITIAL: Duration = Duration::from_secs(2);
const BACKOFF_STEPS: u32 = 4;
const POLL_INTERVAL: Duration = Duration::from_secs(32);

/// A uniform number in `[0, 1)` (jitter).
pub type Jitter = Arc<dyn Fn() -> f64 + Send + Sync>;

/// A random number in `[0, 1)` from the standard library's randomly keyed hasher.
pub fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_i64(now_unix_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Go's rotation deadline (Unix ns): `notBefore + (0.7 + 0.2·jitter)·lifetime`.
pub fn rotation_deadline(not_before: i64, not_after: i64, jitter: f64) -> i64 {
    let nb = i128::from(not_before) * 1_000_000_000;
    let total = (i128::from(not_after) - i128::from(not_before)) * 1_000_000_000;
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    let offset = (total as f64 * fraction) as i128;
    i64::try_from(nb + offset).unwrap_or(i64::MAX)
}

/// The pause after the `attempt`-th failed rotation (0-based): 2s·2ⁿ for the first four,
/// then 32s, each with up to 10% added.
pub fn retry_delay(attempt: u32, jitter: f64) -> Duration {
    let base = if attempt < BACKOFF_STEPS {
        BACKOFF_INITIAL * 2u32.pow(attempt)
    } else {
        POLL_INTERVAL
    };
    base.mul_f64(1.0 + 0.1 * jitter.clamp(0.0, 1.0))
}

/// Which signer to ask: with a valid certificate the node's own identity, else the
/// bootstrap credentials (when there are any).
#[derive(Clone)]
pub struct Signers {
    /// Signs with the node's current identity.
    pub current: Arc<dyn Signer>,
    /// Signs with the bootstrap credentials.
    pub bootstrap: Option<Arc<dyn Signer>>,
}

/// What a manager manages.
#[derive(Clone)]
pub struct ManagerConfig {
    /// For logs: "client" or "serving".
    pub name: &'static str,
    /// The certificate requested.
    pub template: CsrTemplate,
    /// The signer name of the CSRs.
    pub signer_name: String,
    /// The usages of the CSRs.
    pub usages: Vec<String>,
    /// Where issued pairs are written.
    pub store: FileStore,
    /// How long a CSR is waited for.
    pub wait_timeout: Duration,
    /// The gauges and counters to keep (`kubelet_certificate_manager_*`).
    pub metrics: &'static CertificateMetrics,
    /// The jitter source (tests fix it).
    pub jitter: Jitter,
}

/// A certificate manager. See the module docs.
pub struct CertificateManager {
    config: ManagerConfig,
    signers: Signers,
    current: watch::Sender<Option<Arc<CertPair>>>,
    force: AtomicBool,
}

impl std::fmt::Debug for CertificateManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateManager")
            .field("name", &self.config.name)
            .field("current", &*self.current.borrow())
            .finish_non_exhaustive()
    }
}

impl CertificateManager {
    /// A manager starting from `initial` (e.g. the store's current pair).
    pub fn new(config: ManagerConfig, signers: Signers, initial: Option<CertPair>) -> Self {
        config.metrics.register();
        config
            .metrics
            .set_not_after(initial.as_ref().map(|p| p.not_after));
        let (current, _) = watch::channel(initial.map(Arc::new));
        CertificateManager {
            config,
            signers,
            current,
            force: AtomicBool::new(false),
        }
    }

    /// Makes the next deadline now (Go's `forceRotation`, for an initial certificate that
    /// came from the kubeconfig rather than from a CSR).
    pub fn force_rotation(&self) {
        self.force.store(true, Ordering::SeqCst);
    }

    /// The pair in use.
    pub fn current(&self) -> Option<Arc<CertPair>> {
        self.current.borrow().clone()
    }

    /// Follows the pair in use (a new value on every rotation).
    pub fn subscribe(&self) -> watch::Receiver<Option<Arc<CertPair>>> {
        self.current.subscribe()
    }

    /// When the current pair should be replaced (Unix ns; see the module docs).
    pub fn next_deadline(&self) -> i64 {
        if self.force.swap(false, Ordering::SeqCst) {
            return now_unix_nanos();
        }
        match self.current().as_deref() {
            Some(p) if self.config.template.satisfied_by(p) => {
                rotation_deadline(p.not_before, p.not_after, (self.config.jitter)())
            }
            Some(_) => {
                tracing::info!(certificate = self.config.name, "the certificate does not match the requested subject and addresses; rotating now");
                now_unix_nanos()
            }
            None => now_unix_nanos(),
        }
    }

    /// One rotation: a new key and CSR, the issued certificate stored, then published.
    pub async fn rotate(&self) -> Result<Arc<CertPair>, CertError> {
        let csr = make_csr(&self.config.template, None)?;
        let now_s = now_unix_nanos() / 1_000_000_000;
        let current = self.current();
        let signer = match (&current, &self.signers.bootstrap) {
            (Some(c), _) if c.valid_at(now_s) => &self.signers.current,
            (_, Some(b)) => b,
            (_, None) => &self.signers.current,
        };
        let request = SignRequest {
            name: None,
            csr_pem: csr.csr_pem,
            public_key_der: csr.public_key_der,
            signer_name: self.config.signer_name.clone(),
            usages: self.config.usages.clone(),
            timeout: self.config.wait_timeout,
        };
        let cert_pem = signer.sign(&request).await?;
        let pair = CertPair::from_pem(&cert_pem, &csr.key_pem, "the issued certificate")?;
        let store = self.config.store.clone();
        let stored = tokio::task::spawn_blocking(move || store.update(&pair, &stamp_now()))
            .await
            .map_err(|e| CertError::Task(e.to_string()))??;
        let stored = Arc::new(stored);
        self.config.metrics.set_not_after(Some(stored.not_after));
        self.current.send_replace(Some(stored.clone()));
        tracing::info!(
            certificate = self.config.name,
            expires = stored.not_after,
            "rotated the certificate"
        );
        Ok(stored)
    }

    /// Rotates at every deadline until `shutdown` (see the module docs).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let deadline = self.next_deadline();
            if let Some(p) = self.current() {
                tracing::info!(
                    certificate = self.config.name,
                    expiration = %fmt_unix(p.not_after * 1_000_000_000),
                    deadline = %fmt_unix(deadline),
                    "certificate rotation deadline"
                );
            }
            let wait = u64::try_from(deadline.saturating_sub(now_unix_nanos())).unwrap_or(0);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_nanos(wait)) => {}
            }
            let mut attempt = 0;
            loop {
                let result = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    r = self.rotate() => r,
                };
                match result {
                    Ok(_) => break,
                    Err(e) => {
                        self.config.metrics.renew_error();
                        let delay = retry_delay(attempt, (self.config.jitter)());
                        tracing::warn!(certificate = self.config.name, error = %e, retry_in = ?delay, "failed to rotate the certificate; the current one stays in use");
                        attempt = attempt.saturating_add(1);
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(delay) => {}
                        }
                    }
                }
            }
        }
    }
}

/// Unix ns as an RFC 3339 time, for logs.
fn fmt_unix(nanos: i64) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| nanos.to_string())
}

#[cfg(test)]
mod tests;
