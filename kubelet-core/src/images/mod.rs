//! Image pulls with the pull policy and ImagePullBackOff (Go's `kuberuntime/images` image
//! puller): `Never` uses only a present image (`ErrImageNeverPull`), `IfNotPresent` pulls
//! when missing, `Always` pulls every time a container starts. A failed pull answers
//! `ErrImagePull` and starts a backoff per pod and image; inside it the answer is
//! `ImagePullBackOff` without asking the runtime. Pulls are serialized unless
//! `serializeImagePulls` is off (then bounded by `maxParallelImagePulls`).
//!
//! Image garbage collection is in [`gc`].

pub mod gc;

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::Semaphore;

use crate::backoff::Backoff;
use crate::clock::now_unix_nanos;
use crate::config::Config;
use crate::pod;
use crate::runtime::{ContainerRuntime, PullImageRequest, SandboxConfig};
use crate::sink::{Event, EventType, StatusSink};
use crate::status::WaitingReason;

/// The default pull policy for an image reference: `Always` for `:latest` or untagged
/// images without a digest, else `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

/// A failed image step: the waiting reason and, when in backoff, how long until a retry.
#[derive(Debug, Clone)]
pub struct ImageError {
    /// Waiting reason and message for the status.
    pub reason: WaitingReason,
    /// Time until the next pull may be tried.
    pub retry_after: Option<Duration>,
}

/// Pull policy enforcement, backoff and pull concurrency.
pub struct ImageManager {
    backoff: Mutex<Backoff>,
    pulls: Semaphore,
}

impl std::fmt::Debug for ImageManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageManager").finish_non_exhaustive()
    }
}

fn err(reason: &str, message: String, retry_after: Option<Duration>) -> ImageError {
    ImageError {
        reason: WaitingReason {
            reason: reason.to_string(),
            message,
        },
        retry_after,
    }
}

impl ImageManager {
    /// An image manager configured from the engine config.
    pub fn new(config: &Config) -> Self {
        let permits = if config.serialize_image_pulls {
            1
        } else {
            config
                .max_parallel_image_pulls
                .unwrap_or(Semaphore::MAX_PERMITS)
                .clamp(1, Semaphore::MAX_PERMITS)
        };
        ImageManager {
            backoff: Mutex::new(Backoff::new(
                config.image_backoff_initial,
                config.image_backoff_max,
            )),
            pulls: Semaphore::new(permits),
        }
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops stale backoff entries.
    pub fn gc(&self) {
        self.backoff().gc(now_unix_nanos());
    }

    /// Makes sure the container's image is present according to its pull policy; returns
    /// the image reference to create the container from.
    pub async fn ensure_image(
        &self,
        runtime: &dyn ContainerRuntime,
        sink: &dyn StatusSink,
        p: &Pod,
        c: &Container,
        sandbox: &SandboxConfig,
    ) -> Result<String, ImageError> {
        let image = c.image.clone().unwrap_or_default();
        let event = |event_type, reason: &str, message: String| {
            sink.record_event(Event::for_pod(
                p,
                Some(&c.name),
                event_type,
                reason,
                message,
            ))
        };
        if image.trim().is_empty() {
            return Err(err(
                "InvalidImageName",
                format!("container {} has no image", c.name),
                None,
            ));
        }
        let policy = c
            .image_pull_policy
            .as_deref()
            .unwrap_or_else(|| default_pull_policy(&image));
        let present = runtime.image_status(&image).await.map_err(|e| {
            err(
                "ErrImageInspect",
                format!("Failed to inspect image {image:?}: {e}"),
                None,
            )
        })?;
        if let Some(info) = present.as_ref().filter(|_| policy != "Always") {
            event(
                EventType::Normal,
                "Pulled",
                format!("Container image {image:?} already present on machine"),
            );
            return Ok(if info.id.is_empty() {
                image
            } else {
                info.id.clone()
            });
        }
        if policy == "Never" {
            let message =
                format!("Container image {image:?} is not present with pull policy of Never");
            event(EventType::Warning, "ErrImageNeverPull", message.clone());
            return Err(err("ErrImageNeverPull", message, None));
        }
        let key = format!("{}_{}", pod::uid(p), image);
        let now = now_unix_nanos();
        if let Some(left) = self.backoff().is_in_backoff_since_update(&key, now) {
            let message = format!("Back-off pulling image {image:?}");
            event(EventType::Normal, "BackOff", message.clone());
            return Err(err("ImagePullBackOff", message, Some(left)));
        }
        event(
            EventType::Normal,
            "Pulling",
            format!("Pulling image {image:?}"),
        );
        let started = tokio::time::Instant::now();
        let result = {
            let _permit = self.pulls.acquire().await;
            runtime
                .pull_image(&PullImageRequest {
                    image: image.clone(),
                    auth: None,
                    sandbox: Some(sandbox.clone()),
                })
                .await
        };
        match result {
            Ok(image_ref) => {
                self.backoff().reset(&key);
                event(
                    EventType::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image {image:?} in {:.3}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
                Ok(image_ref)
            }
            Err(e) => {
                let now = now_unix_nanos();
                let delay = self.backoff().next(&key, now, now);
                let message = format!("Failed to pull image {image:?}: {e}");
                event(EventType::Warning, "Failed", message.clone());
                Err(err("ErrImagePull", message, Some(delay)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_table() {
        for (image, want) in [
            ("busybox", "Always"),
            ("busybox:latest", "Always"),
            ("busybox:1.36", "IfNotPresent"),
            ("localhost:5000/busybox", "Always"),
            ("localhost:5000/busybox:1", "IfNotPresent"),
            ("busybox@sha256:abc", "IfNotPresent"),
        ] {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
    }
}
