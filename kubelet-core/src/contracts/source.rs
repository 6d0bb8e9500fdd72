//! The [`PodSource`] contract: where desired pods come from (files, a URL, the API server).
//!
//! A source runs as one task that sends [`PodUpdate`]s into the channel the engine hands it,
//! until the shutdown token fires. Sources normally send [`PodOperation::Set`] snapshots (the
//! complete set of pods this source wants); incremental operations are also accepted. The
//! engine's merge (its `podconfig` module) turns every source's stream into one incremental
//! stream, and only counts a source as *seen* once it has delivered its first `Set`: until all
//! sources are seen, the kubelet never removes pods that a silent source might still want.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a [`PodUpdate`] does to the desired set of its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodOperation {
    /// Pods are new.
    Add,
    /// Pods changed.
    Update,
    /// Pods are gone from the source (stop and forget them).
    Remove,
    /// Pods were deleted gracefully (deletionTimestamp set): terminate with their grace period.
    Delete,
    /// Only the status of pods changed in the source: reconcile status, no spec change.
    Reconcile,
    /// The complete set of pods of this source (a snapshot).
    Set,
}

/// `pods` as shared pointers, in a vector of their own size. (`pods.into_iter().map(Arc::new)
/// .collect()` reuses the `Vec<Pod>` buffer in place: a source that keeps the result would keep
/// `size_of::<Pod>()` — over 2 KB — per pod for an 8-byte pointer.)
pub fn shared_pods(pods: Vec<Pod>) -> Vec<Arc<Pod>> {
    let mut out = Vec::with_capacity(pods.len());
    out.extend(pods.into_iter().map(Arc::new));
    out
}

/// A change to the desired pods of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUpdate {
    /// What to do.
    pub op: PodOperation,
    /// The pods concerned (for `Set`, all pods of the source). Shared, so a source that keeps
    /// its last snapshot and the engine hold one copy of each pod between them.
    pub pods: Vec<Arc<Pod>>,
    /// The source's name (the value of the config.source annotation: "file", "http", "api").
    pub source: String,
}

/// Errors a source reports when it cannot run at all (a broken manifest is logged, not fatal).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source's configuration is invalid (e.g. a bad path or URL).
    #[error("pod source {source_name}: invalid configuration: {message}")]
    InvalidConfig {
        /// Source name.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The engine stopped listening.
    #[error("pod source {source_name}: the kubelet stopped receiving updates")]
    ChannelClosed {
        /// Source name.
        source_name: String,
    },
    /// The source failed for good.
    #[error("pod source {source_name} failed: {message}")]
    Failed {
        /// Source name.
        source_name: String,
        /// Why.
        message: String,
    },
}

/// A producer of desired pods. See the module docs for the protocol.
#[cfg_attr(feature = "mock", mockall::automock)]
#[async_trait]
pub trait PodSource: Send + Sync {
    /// The source's name, also stamped into [`PodUpdate::source`] and the config.source
    /// annotation ("file", "http", "api").
    fn name(&self) -> &str;

    /// Runs until `shutdown` is cancelled, sending updates to `updates`. Returns `Ok(())` on
    /// shutdown; an error only when the source cannot work at all.
    async fn run(
        &self,
        updates: mpsc::Sender<PodUpdate>,
        shutdown: CancellationToken,
    ) -> Result<(), SourceError>;
}
