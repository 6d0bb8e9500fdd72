//! Image pulls with the pull policy and ImagePullBackOff (Go's `kuberuntime/images` image
//! puller): `Never` uses only a present image (`ErrImageNeverPull`), `IfNotPresent` pulls
//! when missing, `Always` pulls every time a container starts. A failed pull answers
//! `ErrImagePull` and starts a backoff per pod and image; inside it the answer is
//! `ImagePullBackOff` without asking the runtime. Pulls are serialized unless
//! `serializeImagePulls` is off (then bounded by `maxParallelImagePulls`).
//!
//! Credentials: the pod's image pull secrets, then the credential providers, matched to the
//! image's registry by [`crate::keyring`]; each matching credential is tried in order until a
//! pull succeeds (the error names every attempt's failure, as Go's aggregate does). The
//! secrets and plugins are consulted before a pull slot is taken, so a slow plugin or a
//! wrong secret delays only its own pod.
//!
//! Retry timing (Go's): a failed image step is a failed pod sync, and the pod worker syncs
//! the pod again after the back-off period (`backOffPeriod`, 10s, the image back-off's
//! initial period too) plus up to 50% jitter, not at the end of the image back-off. A sync
//! inside the back-off answers `ImagePullBackOff` (a `BackOff` event "Back-off pulling
//! image"); the first sync after it pulls. With the 10s → 300s back-off a user sees
//! `ErrImagePull`, then `ImagePullBackOff` for a sync or more, then `ErrImagePull` again,
//! with pulls 10–15s, 20–30s, 40–55s ... apart (each gap at least the back-off, less than
//! it plus 15s).
//!
//! Image garbage collection is in [`gc`]; the images the pods name, which it keeps, in
//! [`in_use`].

pub mod gc;
pub mod in_use;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::Semaphore;

use crate::backoff::Backoff;
use crate::clock::now_unix_nanos;
use crate::config::Config;
use crate::credentials::CredentialProvider;
use crate::keyring;
use crate::objects::ObjectStore;
use crate::pod;
use crate::runtime::{ContainerRuntime, PullImageRequest, RegistryAuth, SandboxConfig};
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
    /// When to sync the pod again (Go's pod worker requeue after a failed sync).
    pub retry_after: Option<Duration>,
}

/// Pull policy enforcement, credentials, backoff and pull concurrency.
pub struct ImageManager {
    backoff: Mutex<Backoff>,
    /// Go's `backOffPeriod`: the requeue after a failed image step (before jitter).
    retry_period: Duration,
    pulls: Semaphore,
    providers: Vec<Arc<dyn CredentialProvider>>,
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
    /// An image manager configured from the engine config, without credential providers.
    pub fn new(config: &Config) -> Self {
        Self::with_providers(config, Vec::new())
    }

    /// An image manager whose pulls also use the credentials of `providers` (after the
    /// pod's pull secrets).
    pub fn with_providers(config: &Config, providers: Vec<Arc<dyn CredentialProvider>>) -> Self {
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
            retry_period: config.image_backoff_initial,
            pulls: Semaphore::new(permits),
            providers,
        }
    }

    /// When to sync again after a failed image step for `key` at `now` (Unix ns): Go's
    /// `wait.Jitter(backOffPeriod, 0.5)`, the jitter taken from a hash of both.
    fn retry_after(&self, key: &str, now: i64) -> Duration {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (key, now).hash(&mut h);
        let permille = u32::try_from(h.finish() % 500).unwrap_or(0);
        self.retry_period + self.retry_period * permille / 1000
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops stale backoff entries.
    pub fn gc(&self) {
        self.backoff().gc(now_unix_nanos());
    }

    /// The credentials to try for `image` (pull secrets read through `store`, then the
    /// providers); a secret that cannot be read is reported with a warning event, as Go does.
    async fn credentials(
        &self,
        store: &dyn ObjectStore,
        sink: &dyn StatusSink,
        p: &Pod,
        image: &str,
    ) -> Result<Vec<RegistryAuth>, keyring::KeyringError> {
        let secrets = keyring::pod_secrets(p, store).await?;
        if !secrets.missing.is_empty() {
            let missing = secrets.missing.join("; ");
            tracing::warn!(pod = %pod::full_name(p), missing = %missing, "unable to retrieve some image pull secrets; the pull may not succeed");
            sink.record_event(Event::for_pod(
                p,
                None,
                EventType::Warning,
                "FailedToRetrieveImagePullSecret",
                format!("Unable to retrieve some image pull secrets ({missing}); attempting to pull the image may not succeed."),
            ));
        }
        Ok(keyring::lookup(image, &secrets.keyring, &self.providers).await)
    }

    /// Pulls `image` with each credential in turn until one works (none: anonymously). The
    /// error of a failed pull names each attempt's failure once (Go's aggregate).
    async fn pull(
        &self,
        runtime: &dyn ContainerRuntime,
        image: &str,
        auths: Vec<RegistryAuth>,
        sandbox: &SandboxConfig,
    ) -> Result<String, String> {
        let _permit = self.pulls.acquire().await;
        let request = |auth| PullImageRequest {
            image: image.to_string(),
            auth,
            sandbox: Some(sandbox.clone()),
        };
        if auths.is_empty() {
            return runtime
                .pull_image(&request(None))
                .await
                .map_err(|e| e.to_string());
        }
        let mut errors: Vec<String> = Vec::new();
        for auth in auths {
            match runtime.pull_image(&request(Some(auth))).await {
                Ok(r) => return Ok(r),
                Err(e) => {
                    let e = e.to_string();
                    if !errors.contains(&e) {
                        errors.push(e);
                    }
                }
            }
        }
        Err(if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        })
    }

    /// Makes sure the container's image is present according to its pull policy; returns
    /// the image reference to create the container from. Pull secrets are read from
    /// `store`.
    pub async fn ensure_image(
        &self,
        runtime: &dyn ContainerRuntime,
        sink: &dyn StatusSink,
        store: &dyn ObjectStore,
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
        if self
            .backoff()
            .is_in_backoff_since_update(&key, now)
            .is_some()
        {
            let message = format!("Back-off pulling image {image:?}");
            event(EventType::Normal, "BackOff", message.clone());
            let retry = self.retry_after(&key, now);
            return Err(err("ImagePullBackOff", message, Some(retry)));
        }
        event(
            EventType::Normal,
            "Pulling",
            format!("Pulling image {image:?}"),
        );
        let started = tokio::time::Instant::now();
        let result = match self.credentials(store, sink, p, &image).await {
            Ok(auths) => self.pull(runtime, &image, auths, sandbox).await,
            Err(e) => Err(e.to_string()),
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
                self.backoff().next(&key, now, now);
                let message = format!("Failed to pull image {image:?}: {e}");
                event(EventType::Warning, "Failed", message.clone());
                Err(err(
                    "ErrImagePull",
                    message,
                    Some(self.retry_after(&key, now)),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::MemoryObjectStore;
    use crate::testing::{ContainerBuilder, PodBuilder, RecordingSink, SimRuntime};
    use k8s_openapi::api::core::v1::{LocalObjectReference, Secret};

    const IMAGE: &str = "reg.example:5000/team/app:1.0";

    fn pull_secret(name: &str, location: &str, user: &str, password: &str) -> Secret {
        let json = format!(
            r#"{{"auths":{{"{location}":{{"username":"{user}","password":"{password}"}}}}}}"#
        );
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            type_: Some(keyring::docker_config::DOCKER_CONFIG_JSON_TYPE.into()),
            data: Some(
                [(
                    ".dockerconfigjson".to_string(),
                    k8s_openapi::ByteString(json.into_bytes()),
                )]
                .into_iter()
                .collect(),
            ),
            ..Default::default()
        }
    }

    fn pod_with_secrets(uid: &str, secrets: &[&str]) -> (Pod, Container) {
        let c = ContainerBuilder::new("app", IMAGE)
            .pull_policy("Always")
            .build();
        let mut p = PodBuilder::new("p", uid)
            .namespace("ns")
            .container(c.clone())
            .build();
        if let Some(spec) = p.spec.as_mut() {
            spec.image_pull_secrets = Some(
                secrets
                    .iter()
                    .map(|n| LocalObjectReference {
                        name: n.to_string(),
                    })
                    .collect(),
            );
        }
        (p, c)
    }

    fn sandbox(p: &Pod) -> SandboxConfig {
        SandboxConfig {
            pod: Arc::new(p.clone()),
            attempt: 0,
            hostname: "p".into(),
            log_directory: "/tmp".into(),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        }
    }

    #[tokio::test]
    async fn matching_credentials_are_tried_in_order() {
        let runtime = SimRuntime::new();
        runtime.require_pull_credentials(IMAGE, "good", "pw");
        let store = MemoryObjectStore::new();
        // The more specific (wrong) one is tried first, then the host's.
        store.put_secret(pull_secret("team", "reg.example:5000/team", "wrong", "x"));
        store.put_secret(pull_secret(
            "host",
            "https://reg.example:5000",
            "good",
            "pw",
        ));
        let sink = RecordingSink::default();
        let images = ImageManager::new(&Config::default());
        let (p, c) = pod_with_secrets("uid-p", &["host", "team", "gone"]);
        let got = images
            .ensure_image(&runtime, &sink, &store, &p, &c, &sandbox(&p))
            .await;
        assert!(got.is_ok(), "{got:?}");
        let users: Vec<String> = runtime.pull_users().into_iter().map(|(_, u)| u).collect();
        assert_eq!(users, ["wrong", "good"]);
        let reasons = sink.event_reasons();
        assert!(
            reasons.contains(&"FailedToRetrieveImagePullSecret".to_string()),
            "{reasons:?}"
        );
        assert!(reasons.contains(&"Pulled".to_string()), "{reasons:?}");
    }

    #[tokio::test]
    async fn a_wrong_or_missing_secret_fails_with_the_registry_message() {
        let runtime = SimRuntime::new();
        runtime.require_pull_credentials(IMAGE, "good", "pw");
        let store = MemoryObjectStore::new();
        store.put_secret(pull_secret("wrong", "reg.example:5000", "bad", "x"));
        let sink = RecordingSink::default();
        let images = ImageManager::new(&Config::default());
        for secrets in [&["wrong"][..], &[][..]] {
            let (p, c) = pod_with_secrets(&format!("uid-{}", secrets.len()), secrets);
            let e = images
                .ensure_image(&runtime, &sink, &store, &p, &c, &sandbox(&p))
                .await
                .unwrap_err();
            assert_eq!(e.reason.reason, "ErrImagePull");
            assert!(
                e.reason.message.contains("401 Unauthorized"),
                "{:?}",
                e.reason
            );
            // Inside the backoff the runtime is not asked again.
            let again = images
                .ensure_image(&runtime, &sink, &store, &p, &c, &sandbox(&p))
                .await
                .unwrap_err();
            assert_eq!(again.reason.reason, "ImagePullBackOff");
        }
        let users: Vec<String> = runtime.pull_users().into_iter().map(|(_, u)| u).collect();
        assert_eq!(users, ["bad", ""], "the wrong secret, then anonymously");
    }

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
