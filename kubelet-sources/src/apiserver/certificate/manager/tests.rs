//! The manager on tokio's paused clock with a fake signer: deadlines at 70–90% of the
//! lifetime, rotations one after another, backoff on failures with the old pair kept, and
//! which credentials sign.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use async_trait::async_trait;

use super::*;

/// Issues certificates for the CSR's key, valid from now for `lifetime` seconds; fails the
/// first `failures` requests. Records (Unix ns, the pair then current) per request.
struct FakeSigner {
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    lifetime: i64,
    failures: AtomicU32,
    calls: Mutex<Vec<(i64, Option<i64>)>>,
    current: OnceLock<watch::Receiver<Option<Arc<CertPair>>>>,
}

impl FakeSigner {
    fn new(lifetime: i64, failures: u32) -> Arc<FakeSigner> {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).unwrap();
        Arc::new(FakeSigner {
            ca,
            ca_key,
            lifetime,
            failures: AtomicU32::new(failures),
            calls: Mutex::new(Vec::new()),
            current: OnceLock::new(),
        })
    }

    fn issue_now(&self, csr_pem: &str) -> String {
        let mut csr = rcgen::CertificateSigningRequestParams::from_pem(csr_pem).unwrap();
        let now = now_unix_nanos() / 1_000_000_000;
        csr.params.not_before = time::OffsetDateTime::from_unix_timestamp(now).unwrap();
        csr.params.not_after =
            time::OffsetDateTime::from_unix_timestamp(now + self.lifetime).unwrap();
        csr.signed_by(&self.ca, &self.ca_key).unwrap().pem()
    }

    fn calls(&self) -> Vec<(i64, Option<i64>)> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl Signer for FakeSigner {
    async fn sign(&self, r: &SignRequest) -> Result<String, CertError> {
        let seen = self
            .current
            .get()
            .and_then(|rx| rx.borrow().as_ref().map(|p| p.not_after));
        self.calls.lock().unwrap().push((now_unix_nanos(), seen));
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(CertError::Csr("the fake signer is down".into()));
        }
        Ok(self.issue_now(&r.csr_pem))
    }
}

fn leak_metrics() -> &'static CertificateMetrics {
    Box::leak(Box::default())
}

fn config(dir: &std::path::Path, jitter: f64) -> ManagerConfig {
    ManagerConfig {
        name: "client",
        template: CsrTemplate::node_client("n1"),
        signer_name: super::super::csr::CLIENT_SIGNER.into(),
        usages: super::super::csr::CLIENT_USAGES
            .iter()
            .map(|s| s.to_string())
            .collect(),
        store: FileStore::new("kubelet-client", dir),
        wait_timeout: CERTIFICATE_WAIT_TIMEOUT,
        metrics: leak_metrics(),
        jitter: Arc::new(move || jitter),
    }
}

/// A pair from `signer`, valid from now.
fn initial(signer: &FakeSigner) -> CertPair {
    let csr = make_csr(&CsrTemplate::node_client("n1"), None).unwrap();
    CertPair::from_pem(&signer.issue_now(&csr.csr_pem), &csr.key_pem, "initial").unwrap()
}

#[test]
fn deadlines_are_between_70_and_90_percent() {
    let (nb, na) = (1_000_000, 1_000_000 + 10_000);
    let at = |j: f64| (rotation_deadline(nb, na, j) - nb * 1_000_000_000) as f64 / 1e13;
    assert!((at(0.0) - 0.7).abs() < 1e-9);
    assert!((at(0.5) - 0.8).abs() < 1e-9);
    assert!((at(0.999_999) - 0.9).abs() < 1e-6);
    assert!((at(7.0) - 0.9).abs() < 1e-9, "clamped");
    for _ in 0..1000 {
        let r = random_unit();
        assert!((0.0..1.0).contains(&r), "{r}");
        let f = at(r);
        assert!((0.7..=0.9).contains(&f), "{f}");
    }
    assert_eq!(retry_delay(0, 0.0), Duration::from_secs(2));
    assert_eq!(retry_delay(3, 0.0), Duration::from_secs(16));
    assert_eq!(retry_delay(4, 0.0), Duration::from_secs(32));
    assert_eq!(retry_delay(40, 0.0), Duration::from_secs(32));
    assert_eq!(retry_delay(1, 1.0), Duration::from_millis(4400));
}

#[tokio::test(start_paused = true)]
async fn rotations_at_the_jittered_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let signer = FakeSigner::new(1000, 0);
    let first = initial(&signer);
    let cfg = config(dir.path(), 0.25);
    let metrics = cfg.metrics;
    let m = Arc::new(CertificateManager::new(
        cfg,
        Signers {
            current: signer.clone(),
            bootstrap: None,
        },
        Some(first.clone()),
    ));
    assert!(metrics.is_registered());
    let mut rx = m.subscribe();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    let mut nb = first.not_before;
    for round in 0..3 {
        rx.changed().await.unwrap();
        let now = rx.borrow().clone().unwrap();
        let calls = signer.calls();
        assert_eq!(calls.len(), round + 1);
        // At 75% (jitter 0.25) of the previous certificate's 1000s.
        let at = calls[round].0 / 1_000_000_000;
        assert_eq!(at - nb, 750, "round {round}");
        assert_eq!(now.not_before, at);
        assert_eq!(m.current().unwrap().not_after, now.not_after);
        assert_eq!(metrics.ttl_seconds(at), 1000.0);
        nb = now.not_before;
    }
    // Every issued pair went to the store; the link names the last.
    let stored = FileStore::new("kubelet-client", dir.path())
        .current()
        .unwrap()
        .unwrap();
    assert_eq!(stored.not_before, nb);
    assert_eq!(metrics.renew_errors(), 0);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_and_keep_the_old_pair() {
    let dir = tempfile::tempdir().unwrap();
    let signer = FakeSigner::new(1000, 3);
    let first = initial(&signer);
    let cfg = config(dir.path(), 0.5);
    let metrics = cfg.metrics;
    let m = Arc::new(CertificateManager::new(
        cfg,
        Signers {
            current: signer.clone(),
            bootstrap: None,
        },
        Some(first.clone()),
    ));
    let _ = signer.current.set(m.subscribe());
    let mut rx = m.subscribe();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    rx.changed().await.unwrap();
    let calls = signer.calls();
    assert_eq!(calls.len(), 4, "three failures, then the rotation");
    let t: Vec<f64> = calls.iter().map(|c| c.0 as f64 / 1e9).collect();
    // Tokio timers have a millisecond resolution.
    assert!(
        (t[0] - (first.not_before as f64 + 800.0)).abs() < 2e-3,
        "{t:?}"
    );
    // 2s, 4s, 8s apart, each with the jitter's 5%.
    for (i, want) in [2.1, 4.2, 8.4].iter().enumerate() {
        assert!((t[i + 1] - t[i] - want).abs() < 2e-3, "{t:?}");
    }
    // While failing, the old pair stayed current.
    assert!(
        calls.iter().all(|c| c.1 == Some(first.not_after)),
        "{calls:?}"
    );
    assert_eq!(metrics.renew_errors(), 3);
    assert_ne!(m.current().unwrap().not_after, first.not_after);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_a_valid_pair_the_bootstrap_signer_is_asked_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let node = FakeSigner::new(1000, 0);
    let bootstrap = FakeSigner::new(1000, 0);
    let m = Arc::new(CertificateManager::new(
        config(dir.path(), 0.0),
        Signers {
            current: node.clone(),
            bootstrap: Some(bootstrap.clone()),
        },
        None,
    ));
    let start = now_unix_nanos();
    let mut rx = m.subscribe();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(m.clone().run(shutdown.clone()));
    rx.changed().await.unwrap();
    assert_eq!(bootstrap.calls().len(), 1);
    assert!(bootstrap.calls()[0].0 - start < 1_000_000_000, "at once");
    assert!(node.calls().is_empty());
    // The next rotation uses the node's own (now valid) identity.
    rx.changed().await.unwrap();
    assert_eq!(node.calls().len(), 1);
    assert_eq!(bootstrap.calls().len(), 1);
    shutdown.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_pair_that_no_longer_fits_the_template_rotates_now() {
    let dir = tempfile::tempdir().unwrap();
    let signer = FakeSigner::new(1000, 0);
    let mut cfg = config(dir.path(), 0.5);
    cfg.template = CsrTemplate::node_client("renamed");
    let m = CertificateManager::new(
        cfg,
        Signers {
            current: signer.clone(),
            bootstrap: None,
        },
        Some(initial(&signer)),
    );
    assert!(m.next_deadline() - now_unix_nanos() <= 0);
}
