//! The node lease (Go's `pkg/kubelet/nodelease` controller): a `coordination.k8s.io/v1`
//! Lease named after the node in `kube-node-lease`, holder the node, duration
//! `nodeLeaseDurationSeconds` (40), renewed every 10s (a quarter of the duration), with an
//! owner reference to the Node so it goes away with it.
//!
//! The first round gets (or creates) the lease; later renewals update the cached copy
//! directly (one request per renewal). A failed renewal is retried with a backoff from
//! 200ms doubling to 7s; after a failed update the lease is read again. Failures are logged
//! and never end the loop. The API calls go through [`LeaseClient`], so the timing is
//! tested on tokio's paused clock.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::api::PostParams;
use kube::Api;
use tokio_util::sync::CancellationToken;

use super::{req_err, ApiError};

/// The namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// Lease settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The node (lease name and holder).
    pub node_name: String,
    /// `nodeLeaseDurationSeconds` (40).
    pub duration_seconds: i32,
    /// Renewal interval (Go: a quarter of the duration, 10s).
    pub renew_interval: Duration,
    /// Timeout of one request.
    pub request_timeout: Duration,
}

impl LeaseConfig {
    /// Go's defaults for a node.
    pub fn new(node_name: impl Into<String>) -> Self {
        LeaseConfig {
            node_name: node_name.into(),
            duration_seconds: 40,
            renew_interval: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// The lease API calls (a seam for tests).
#[async_trait]
pub trait LeaseClient: Send + Sync {
    /// Reads the lease; `Ok(None)` when it does not exist.
    async fn get(&self, name: &str) -> Result<Option<Lease>, ApiError>;
    /// Creates the lease.
    async fn create(&self, lease: &Lease) -> Result<Lease, ApiError>;
    /// Replaces the lease (optimistic concurrency on its resourceVersion).
    async fn update(&self, lease: &Lease) -> Result<Lease, ApiError>;
    /// The uid of the node, for the owner reference (`None`: not known yet).
    async fn node_uid(&self, node: &str) -> Option<String>;
}

/// [`LeaseClient`] over kube-rs.
pub struct KubeLeaseClient {
    leases: Api<Lease>,
    nodes: Api<k8s_openapi::api::core::v1::Node>,
}

impl std::fmt::Debug for KubeLeaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeLeaseClient").finish_non_exhaustive()
    }
}

impl KubeLeaseClient {
    /// Leases in `kube-node-lease` over `client` (the heartbeat client).
    pub fn new(client: kube::Client) -> Self {
        KubeLeaseClient {
            leases: Api::namespaced(client.clone(), LEASE_NAMESPACE),
            nodes: Api::all(client),
        }
    }
}

#[async_trait]
impl LeaseClient for KubeLeaseClient {
    async fn get(&self, name: &str) -> Result<Option<Lease>, ApiError> {
        self.leases
            .get_opt(name)
            .await
            .map_err(req_err(format!("get lease {LEASE_NAMESPACE}/{name}")))
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, ApiError> {
        self.leases
            .create(&PostParams::default(), lease)
            .await
            .map_err(req_err(format!(
                "create lease {LEASE_NAMESPACE}/{}",
                name_of(lease)
            )))
    }
    async fn update(&self, lease: &Lease) -> Result<Lease, ApiError> {
        let name = name_of(lease);
        self.leases
            .replace(&name, &PostParams::default(), lease)
            .await
            .map_err(req_err(format!("update lease {LEASE_NAMESPACE}/{name}")))
    }
    async fn node_uid(&self, node: &str) -> Option<String> {
        self.nodes
            .get_opt(node)
            .await
            .ok()
            .flatten()
            .and_then(|n| n.metadata.uid)
    }
}

fn name_of(lease: &Lease) -> String {
    lease.metadata.name.clone().unwrap_or_default()
}

/// The lease as it should be after a renewal at `now`: holder, duration, renew time and
/// the node owner reference (when the node uid is known).
pub fn renewed(
    base: Option<&Lease>,
    cfg: &LeaseConfig,
    now: MicroTime,
    node_uid: Option<&str>,
) -> Lease {
    let mut lease = base.cloned().unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(cfg.node_name.clone()),
            namespace: Some(LEASE_NAMESPACE.into()),
            ..Default::default()
        },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(cfg.node_name.clone());
    spec.lease_duration_seconds = Some(cfg.duration_seconds);
    spec.renew_time = Some(now);
    if let (false, Some(uid)) = (has_node_owner(&lease), node_uid) {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: cfg.node_name.clone(),
            uid: uid.to_string(),
            ..Default::default()
        }]);
    }
    lease
}

fn has_node_owner(lease: &Lease) -> bool {
    lease
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|r| r.kind == "Node"))
}

fn micro_now() -> MicroTime {
    let nanos = kubelet_core::clock::now_unix_nanos();
    let ts = k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    MicroTime(ts)
}

/// The lease controller. See the module docs.
pub struct LeaseController<C> {
    client: C,
    cfg: LeaseConfig,
    latest: Option<Lease>,
}

impl<C: LeaseClient> LeaseController<C> {
    /// A controller over `client`.
    pub fn new(client: C, cfg: LeaseConfig) -> Self {
        LeaseController {
            client,
            cfg,
            latest: None,
        }
    }

    /// One renewal (ensure on the first round, update afterwards).
    pub async fn renew_once(&mut self) -> Result<(), ApiError> {
        let name = self.cfg.node_name.clone();
        if self.latest.is_none() {
            match self.client.get(&name).await? {
                Some(l) => self.latest = Some(l),
                None => {
                    let node_uid = self.client.node_uid(&name).await;
                    let l = renewed(None, &self.cfg, micro_now(), node_uid.as_deref());
                    let created = self.client.create(&l).await?;
                    tracing::info!(node = %name, "node lease created");
                    self.latest = Some(created);
                    return Ok(());
                }
            }
        }
        // The Node's uid is looked up only while the lease lacks its owner reference.
        let node_uid = if self.latest.as_ref().is_some_and(has_node_owner) {
            None
        } else {
            self.client.node_uid(&name).await
        };
        let l = renewed(
            self.latest.as_ref(),
            &self.cfg,
            micro_now(),
            node_uid.as_deref(),
        );
        match self.client.update(&l).await {
            Ok(updated) => {
                self.latest = Some(updated);
                Ok(())
            }
            Err(e) => {
                // Conflict or anything else: read it again next time.
                self.latest = None;
                Err(e)
            }
        }
    }

    /// Renews until `shutdown`: every `renew_interval` when it works, with backoff
    /// (200ms → 7s) while it fails. Never returns early, never panics.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(200);
        loop {
            let timeout = self.cfg.request_timeout;
            let delay = match tokio::time::timeout(timeout, self.renew_once()).await {
                Ok(Ok(())) => {
                    backoff = Duration::from_millis(200);
                    self.cfg.renew_interval
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = %self.cfg.node_name, error = %e, retry_in = ?backoff, "renewing the node lease failed");
                    self.next_backoff(&mut backoff)
                }
                Err(_) => {
                    tracing::warn!(node = %self.cfg.node_name, ?timeout, retry_in = ?backoff, "renewing the node lease timed out");
                    self.latest = None;
                    self.next_backoff(&mut backoff)
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn next_backoff(&self, backoff: &mut Duration) -> Duration {
        let d = *backoff;
        *backoff = (*backoff * 2).min(Duration::from_secs(7));
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::time::Instant;

    #[derive(Default)]
    struct Fake {
        stored: Mutex<Option<Lease>>,
        fail_until: Mutex<Option<Instant>>,
        calls: Mutex<Vec<(&'static str, Instant)>>,
    }

    #[derive(Clone, Default)]
    struct FakeClient(Arc<Fake>);

    impl FakeClient {
        fn check(&self, what: &'static str) -> Result<(), ApiError> {
            let now = Instant::now();
            self.0.calls.lock().unwrap().push((what, now));
            if self.0.fail_until.lock().unwrap().is_some_and(|t| now < t) {
                return Err(ApiError::Timeout {
                    what: what.into(),
                    timeout: Duration::ZERO,
                });
            }
            Ok(())
        }
    }

    #[async_trait]
    impl LeaseClient for FakeClient {
        async fn get(&self, _name: &str) -> Result<Option<Lease>, ApiError> {
            self.check("get")?;
            Ok(self.0.stored.lock().unwrap().clone())
        }
        async fn create(&self, lease: &Lease) -> Result<Lease, ApiError> {
            self.check("create")?;
            *self.0.stored.lock().unwrap() = Some(lease.clone());
            Ok(lease.clone())
        }
        async fn update(&self, lease: &Lease) -> Result<Lease, ApiError> {
            self.check("update")?;
            *self.0.stored.lock().unwrap() = Some(lease.clone());
            Ok(lease.clone())
        }
        async fn node_uid(&self, _node: &str) -> Option<String> {
            self.0
                .calls
                .lock()
                .unwrap()
                .push(("node_uid", Instant::now()));
            Some("node-uid".into())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn creates_then_renews_every_interval() {
        let fake = FakeClient::default();
        let ctl = LeaseController::new(fake.clone(), LeaseConfig::new("n1"));
        let shutdown = CancellationToken::new();
        let start = Instant::now();
        let task = tokio::spawn(ctl.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(35)).await;
        shutdown.cancel();
        task.await.unwrap();
        let calls = fake.0.calls.lock().unwrap().clone();
        let kinds: Vec<&str> = calls.iter().map(|c| c.0).collect();
        // The node's uid is read once (for the owner reference), not at every renewal.
        assert_eq!(
            kinds,
            vec!["get", "node_uid", "create", "update", "update", "update"]
        );
        let update_offsets: Vec<u64> = calls
            .iter()
            .filter(|c| c.0 == "update")
            .map(|c| (c.1 - start).as_secs())
            .collect();
        assert_eq!(update_offsets, vec![10, 20, 30]);
        let lease = fake.0.stored.lock().unwrap().clone().unwrap();
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert!(spec.renew_time.is_some());
        let owner = &lease.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Node", "node-uid")
        );
        assert_eq!(lease.metadata.namespace.as_deref(), Some(LEASE_NAMESPACE));
    }

    #[tokio::test(start_paused = true)]
    async fn backs_off_from_200ms_to_7s_while_failing_then_recovers() {
        let fake = FakeClient::default();
        let start = Instant::now();
        *fake.0.fail_until.lock().unwrap() = Some(start + Duration::from_secs(30));
        let ctl = LeaseController::new(fake.clone(), LeaseConfig::new("n1"));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(ctl.run(shutdown.clone()));
        tokio::time::sleep(Duration::from_secs(45)).await;
        shutdown.cancel();
        task.await.unwrap();
        let calls = fake.0.calls.lock().unwrap().clone();
        let offsets_ms: Vec<u128> = calls
            .iter()
            .filter(|c| c.0 != "node_uid")
            .map(|c| (c.1 - start).as_millis())
            .collect();
        // Failing attempts at 0, .2, .6, 1.4, 3.0, 6.2, 12.6, 19.6, 26.6 (cap 7s), then success
        // at 33.6 (get+create) and the next renewal 10s later.
        let failing: Vec<u128> = offsets_ms.iter().copied().filter(|t| *t < 30_000).collect();
        assert_eq!(
            failing,
            vec![0, 200, 600, 1400, 3000, 6200, 12600, 19600, 26600]
        );
        let rest: Vec<(&str, u128)> = calls
            .iter()
            .map(|c| (c.0, (c.1 - start).as_millis()))
            .filter(|c| c.1 >= 30_000)
            .collect();
        assert_eq!(
            rest,
            vec![
                ("get", 33600),
                ("node_uid", 33600),
                ("create", 33600),
                ("update", 43600)
            ]
        );
    }
}
