//! A pod source a test drives by hand.

use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::pod::CONFIG_SOURCE_ANNOTATION;
use crate::source::{PodOperation, PodSource, PodUpdate, SourceError};

/// Sends a `Set` snapshot of its pods at start and after every [`StaticSource::set`]. Pods
/// get the config.source annotation of the source's name. Created with `None` pods
/// ([`StaticSource::silent`]) it sends nothing until the first `set`, like a source that has
/// not delivered its first state.
#[derive(Debug)]
pub struct StaticSource {
    name: String,
    pods: watch::Sender<Option<Vec<Arc<Pod>>>>,
}

fn annotate(name: &str, mut pods: Vec<Pod>) -> Vec<Arc<Pod>> {
    for p in &mut pods {
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .entry(CONFIG_SOURCE_ANNOTATION.to_string())
            .or_insert_with(|| name.to_string());
    }
    crate::source::shared_pods(pods)
}

impl StaticSource {
    /// A source that delivers `pods` at start.
    pub fn new(name: &str, pods: Vec<Pod>) -> Self {
        let (tx, _) = watch::channel(Some(annotate(name, pods)));
        StaticSource {
            name: name.to_string(),
            pods: tx,
        }
    }

    /// A source that delivers nothing until [`StaticSource::set`] is called.
    pub fn silent(name: &str) -> Self {
        let (tx, _) = watch::channel(None);
        StaticSource {
            name: name.to_string(),
            pods: tx,
        }
    }

    /// Replaces the source's pods; a new snapshot is sent.
    pub fn set(&self, pods: Vec<Pod>) {
        self.pods.send_replace(Some(annotate(&self.name, pods)));
    }
}

#[async_trait]
impl PodSource for StaticSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(
        &self,
        updates: mpsc::Sender<PodUpdate>,
        shutdown: CancellationToken,
    ) -> Result<(), SourceError> {
        let mut rx = self.pods.subscribe();
        rx.mark_changed();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                changed = rx.changed() => if changed.is_err() { return Ok(()) },
            }
            let snapshot = rx.borrow_and_update().clone();
            if let Some(pods) = snapshot {
                let update = PodUpdate {
                    op: PodOperation::Set,
                    pods,
                    source: self.name.clone(),
                };
                if updates.send(update).await.is_err() {
                    return Err(SourceError::ChannelClosed {
                        source_name: self.name.clone(),
                    });
                }
            }
        }
    }
}
