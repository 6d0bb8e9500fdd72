//! Image garbage collection (Go's `images/image_gc_manager.go`).
//!
//! The collector keeps a record of every image the runtime lists: when it was first seen,
//! when it was last in use, its size, and whether it is pinned (the runtime's sandbox
//! image, CRI's `pinned`, or an image named in the policy). An image is in use while a
//! container (running or exited) of it exists or a pod that may still start containers
//! names it ([`super::in_use`]: the caller passes those references). Records are refreshed
//! before every collection; an image that is gone is forgotten.
//!
//! The caller decides *when* a collection may run: the kubelet's task waits until every
//! pod source was seen and every pod synced once (see `kubelet::managers`).
//!
//! One collection ([`ImageGc::garbage_collect`], every `period`, 5m):
//! 1. The candidates: images not in use and not pinned, least recently used first
//!    (never used first; ties: first seen first).
//! 2. With `imageMaximumGCAge`, once the kubelet has run that long, candidates unused for
//!    longer are removed (reason `age`).
//! 3. When the image filesystem is used at or above `imageGCHighThresholdPercent`, candidates
//!    at least `imageMinimumGCAge` old are removed until usage is back at
//!    `imageGCLowThresholdPercent` (reason `space`); when that is not possible a
//!    `FreeDiskSpaceFailed` event says how much could be freed.
//!
//! The eviction manager's disk reclaim calls [`ImageGc::delete_unused`]: every candidate
//! old enough goes. Each removal counts in `kubelet_image_garbage_collected_total{reason}`.
//! A runtime that cannot list images (`Unimplemented`) is warned about once; the collector
//! then never runs.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::in_use::ImageRefs;
pub use crate::config::ImageGcPolicy;
use crate::runtime::{ContainerRuntime, ImageInfo, ListFilter, RuntimeError};
use crate::summary::FsStats;

/// `kubelet_image_garbage_collected_total` reason of removals for disk usage.
pub const REASON_SPACE: &str = "space";
/// `kubelet_image_garbage_collected_total` reason of removals for age.
pub const REASON_AGE: &str = "age";

/// What is known of one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    first_detected: Instant,
    /// `None`: never seen in use (Go's zero time).
    last_used: Option<Instant>,
    size: u64,
    pinned: bool,
}

impl From<RuntimeError> for ImageGcError {
    fn from(e: RuntimeError) -> Self {
        ImageGcError::Runtime(e)
    }
}

/// Why a collection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageGcError {
    /// The runtime failed.
    #[error("listing images or containers: {0}")]
    Runtime(RuntimeError),
    /// The image filesystem reports no capacity.
    #[error("invalid capacity 0 on image filesystem")]
    InvalidCapacity,
    /// Not enough could be freed (the `FreeDiskSpaceFailed` event's message).
    #[error("Failed to garbage collect required amount of images. Attempted to free {wanted} bytes, but only found {freed} bytes eligible to free.")]
    NotEnough {
        /// Bytes to free.
        wanted: u64,
        /// Bytes freed.
        freed: u64,
    },
    /// Removing some images failed.
    #[error("wanted to free {wanted} bytes, but freed {freed} bytes space with errors in image deletion: {errors}")]
    Removal {
        /// Bytes to free (`u64::MAX`: all unused).
        wanted: u64,
        /// Bytes freed.
        freed: u64,
        /// The removal errors, joined.
        errors: String,
    },
}

/// An image that may be removed.
#[derive(Debug, Clone)]
struct Candidate {
    id: String,
    record: Record,
}

/// The image garbage collector. See the module docs.
#[derive(Debug)]
pub struct ImageGc {
    policy: ImageGcPolicy,
    /// The policy's pinned images, normalized.
    pinned: ImageRefs,
    records: Mutex<HashMap<String, Record>>,
    began: Instant,
    unsupported: AtomicBool,
}

fn names(i: &ImageInfo) -> impl Iterator<Item = &str> {
    std::iter::once(i.id.as_str())
        .chain(i.repo_tags.iter().map(String::as_str))
        .chain(i.repo_digests.iter().map(String::as_str))
}

impl ImageGc {
    /// A collector with `policy`; "the kubelet started" (for `max_age`) is now.
    pub fn new(policy: ImageGcPolicy) -> Self {
        ImageGc {
            pinned: ImageRefs::new(policy.pinned_images.iter().map(String::as_str)),
            policy,
            records: Mutex::new(HashMap::new()),
            began: Instant::now(),
            unsupported: AtomicBool::new(false),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &ImageGcPolicy {
        &self.policy
    }

    /// Whether the runtime turned out not to list images.
    pub fn unsupported(&self) -> bool {
        self.unsupported.load(Ordering::Relaxed)
    }

    fn records(&self) -> std::sync::MutexGuard<'_, HashMap<String, Record>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refreshes the records from the runtime (Go's `detectImages`); returns the ids of
    /// images in use: those a container uses and those `wanted` names (the images of pods
    /// that may still start containers).
    pub async fn detect(
        &self,
        runtime: &dyn ContainerRuntime,
        now: Instant,
        wanted: &ImageRefs,
    ) -> Result<HashSet<String>, RuntimeError> {
        let images = match runtime.list_images().await {
            Ok(i) => i,
            Err(e) if e.is_unimplemented() => {
                if !self.unsupported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "image garbage collection cannot run: the container runtime does not list images");
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let containers = runtime.list_containers(&ListFilter::all()).await?;
        let used_refs: HashSet<&str> = containers
            .iter()
            .flat_map(|c| [c.image_ref.as_str(), c.image.as_str()])
            .filter(|r| !r.is_empty())
            .collect();
        let mut in_use = HashSet::new();
        let mut records = self.records();
        let mut current = HashSet::new();
        for image in &images {
            current.insert(image.id.clone());
            let record = records.entry(image.id.clone()).or_insert(Record {
                first_detected: now,
                last_used: None,
                size: 0,
                pinned: false,
            });
            if names(image).any(|n| used_refs.contains(n)) || wanted.matches(image) {
                record.last_used = Some(now);
                in_use.insert(image.id.clone());
            }
            record.size = image.size_bytes;
            record.pinned = image.pinned || self.pinned.matches(image);
        }
        records.retain(|id, _| current.contains(id));
        Ok(in_use)
    }

    /// The images that may be removed, least recently used first (Go's
    /// `imagesInEvictionOrder`).
    async fn candidates(
        &self,
        runtime: &dyn ContainerRuntime,
        now: Instant,
        wanted: &ImageRefs,
    ) -> Result<Vec<Candidate>, RuntimeError> {
        let in_use = self.detect(runtime, now, wanted).await?;
        let records = self.records();
        let mut out: Vec<Candidate> = records
            .iter()
            .filter(|(id, r)| !in_use.contains(*id) && !r.pinned)
            .map(|(id, r)| Candidate {
                id: id.clone(),
                record: *r,
            })
            .collect();
        out.sort_by(|a, b| {
            (a.record.last_used, a.record.first_detected, &a.id).cmp(&(
                b.record.last_used,
                b.record.first_detected,
                &b.id,
            ))
        });
        Ok(out)
    }

    async fn remove(
        &self,
        runtime: &dyn ContainerRuntime,
        c: &Candidate,
        reason: &'static str,
    ) -> Result<(), RuntimeError> {
        tracing::info!(image = %c.id, size = c.record.size, reason, "removing image to free bytes");
        runtime.remove_image(&c.id).await?;
        self.records().remove(&c.id);
        crate::metrics::global().image_garbage_collected.inc(reason);
        Ok(())
    }

    /// Removes candidates at least `min_age` old until `bytes_to_free` are freed (Go's
    /// `freeSpace`); returns the bytes freed.
    async fn free_space(
        &self,
        runtime: &dyn ContainerRuntime,
        bytes_to_free: u64,
        now: Instant,
        candidates: &[Candidate],
    ) -> Result<u64, ImageGcError> {
        let mut freed = 0u64;
        let mut errors = Vec::new();
        for c in candidates {
            if c.record.last_used.is_some_and(|u| u >= now) {
                continue;
            }
            if now.saturating_duration_since(c.record.first_detected) < self.policy.min_age {
                continue;
            }
            match self.remove(runtime, c, REASON_SPACE).await {
                Ok(()) => freed = freed.saturating_add(c.record.size),
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            }
            if freed >= bytes_to_free {
                break;
            }
        }
        if errors.is_empty() {
            Ok(freed)
        } else {
            Err(ImageGcError::Removal {
                wanted: bytes_to_free,
                freed,
                errors: errors.join("; "),
            })
        }
    }

    /// Removes candidates unused for longer than `max_age` once the kubelet ran that long
    /// (Go's `freeOldImages`); returns the candidates left.
    async fn free_old(
        &self,
        runtime: &dyn ContainerRuntime,
        candidates: Vec<Candidate>,
        now: Instant,
    ) -> Vec<Candidate> {
        let max = self.policy.max_age;
        if max.is_zero() || now.saturating_duration_since(self.began) <= max {
            return candidates;
        }
        let mut left = Vec::new();
        for c in candidates {
            let unused_for = c
                .record
                .last_used
                .map(|u| now.saturating_duration_since(u))
                .unwrap_or(Duration::MAX);
            if unused_for > max {
                if let Err(e) = self.remove(runtime, &c, REASON_AGE).await {
                    tracing::warn!(image = %c.id, error = %e, "removing an image past imageMaximumGCAge failed");
                    left.push(c);
                }
                continue;
            }
            left.push(c);
        }
        left
    }

    /// One collection against the image filesystem's current usage; `wanted`: the images
    /// of pods that may still start containers. See the module docs.
    pub async fn garbage_collect(
        &self,
        runtime: &dyn ContainerRuntime,
        image_fs: Option<&FsStats>,
        wanted: &ImageRefs,
    ) -> Result<(), ImageGcError> {
        let now = Instant::now();
        let candidates = self.candidates(runtime, now, wanted).await?;
        let candidates = self.free_old(runtime, candidates, now).await;
        let capacity = image_fs.and_then(|f| f.capacity_bytes).unwrap_or(0);
        let available = image_fs
            .and_then(|f| f.available_bytes)
            .unwrap_or(0)
            .min(capacity);
        if capacity == 0 {
            return Err(ImageGcError::InvalidCapacity);
        }
        let usage_percent =
            100 - i64::try_from(available.saturating_mul(100) / capacity).unwrap_or(100);
        if usage_percent >= i64::from(self.policy.high_threshold_percent) {
            let low = u64::try_from(100 - self.policy.low_threshold_percent).unwrap_or(0);
            let wanted = (capacity.saturating_mul(low) / 100).saturating_sub(available);
            tracing::info!(
                usage = usage_percent,
                high = self.policy.high_threshold_percent,
                low = self.policy.low_threshold_percent,
                bytes = wanted,
                "disk usage on the image filesystem is over the high threshold, trying to free bytes down to the low threshold"
            );
            let freed = self.free_space(runtime, wanted, now, &candidates).await?;
            if freed < wanted {
                return Err(ImageGcError::NotEnough { wanted, freed });
            }
        }
        Ok(())
    }

    /// Removes every candidate old enough (Go's `DeleteUnusedImages`, the eviction
    /// manager's reclaim); `wanted` as for [`ImageGc::garbage_collect`]. Returns the bytes
    /// freed.
    pub async fn delete_unused(
        &self,
        runtime: &dyn ContainerRuntime,
        wanted: &ImageRefs,
    ) -> Result<u64, ImageGcError> {
        tracing::info!("attempting to delete unused images");
        let now = Instant::now();
        let candidates = self.candidates(runtime, now, wanted).await?;
        self.free_space(runtime, u64::MAX, now, &candidates).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{ContainerConfig, ContainerKind, SandboxConfig};
    use crate::testing::{container, pod, SimRuntime};
    use std::path::PathBuf;
    use std::sync::Arc;

    fn none() -> ImageRefs {
        ImageRefs::default()
    }

    fn fs(capacity: u64, available: u64) -> FsStats {
        FsStats {
            capacity_bytes: Some(capacity),
            available_bytes: Some(available),
            ..Default::default()
        }
    }

    /// Creates a container of `image` (by its reference) on the simulator; its id.
    async fn use_image(sim: &SimRuntime, image: &str) -> String {
        let p = Arc::new(pod("p", "u1", vec![container("c", image)]));
        let sandbox = SandboxConfig {
            pod: p.clone(),
            attempt: 0,
            hostname: "p".into(),
            log_directory: PathBuf::from("/logs"),
            cgroup_parent: None,
            dns: None,
            runtime_handler: String::new(),
        };
        let sb = sim.run_pod_sandbox(&sandbox).await.unwrap();
        let config = ContainerConfig {
            pod: p.clone(),
            container: container("c", image),
            kind: ContainerKind::Regular,
            restart_count: 0,
            hash: 0,
            image_ref: format!("sha256:{image}"),
            command: vec![],
            args: vec![],
            env: vec![],
            mounts: vec![],
            log_path: PathBuf::from("c/0.log"),
            cpuset_cpus: None,
            cpuset_mems: None,
            devices: Default::default(),
            extra_supplemental_groups: Vec::new(),
        };
        sim.create_container(&sb, &config, &sandbox).await.unwrap()
    }

    async fn images(sim: &SimRuntime) -> Vec<String> {
        let mut v: Vec<String> = sim
            .list_images()
            .await
            .unwrap()
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .collect();
        v.sort();
        v
    }

    #[tokio::test(start_paused = true)]
    async fn frees_least_recently_used_unused_images_above_the_high_threshold() {
        let sim = SimRuntime::new();
        for i in ["old", "newer", "used", "pause"] {
            sim.add_image(i);
        }
        use_image(&sim, "used").await;
        let gc = ImageGc::new(ImageGcPolicy {
            pinned_images: vec!["pause".into()],
            ..ImageGcPolicy::default()
        });
        let t0 = Instant::now();
        gc.detect(&sim, t0, &none()).await.unwrap();
        tokio::time::advance(Duration::from_secs(60)).await;
        // "newer" is seen in use once, later than the others.
        let id = use_image(&sim, "newer").await;
        gc.detect(&sim, Instant::now(), &none()).await.unwrap();
        sim.remove_container(&id).await.unwrap();

        // Younger than imageMinimumGCAge (2m): nothing can go.
        const MI: u64 = 1 << 20;
        let err = gc
            .garbage_collect(&sim, Some(&fs(100 * MI, 10 * MI)), &none())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ImageGcError::NotEnough {
                wanted: 10 * MI,
                freed: 0
            }
        );
        tokio::time::advance(Duration::from_secs(120)).await;
        // Below the high threshold (85%): nothing to do.
        gc.garbage_collect(&sim, Some(&fs(100 * MI, 20 * MI)), &none())
            .await
            .unwrap();
        assert_eq!(images(&sim).await.len(), 4);
        // 90% used: free 10Mi to get to 80%; each simulated image is 1Mi, so every
        // candidate goes and it is still not enough — but never the used or pinned one.
        let before = crate::metrics::global()
            .image_garbage_collected
            .get(REASON_SPACE);
        let err = gc
            .garbage_collect(&sim, Some(&fs(100 * MI, 10 * MI)), &none())
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("Failed to garbage collect required amount of images. Attempted to free 10485760 bytes, but only found 2097152 bytes eligible to free."), "{err}");
        assert_eq!(images(&sim).await, ["pause", "used"]);
        assert_eq!(
            crate::metrics::global()
                .image_garbage_collected
                .get(REASON_SPACE)
                - before,
            2
        );
        assert!(matches!(
            gc.garbage_collect(&sim, Some(&fs(0, 0)), &none()).await,
            Err(ImageGcError::InvalidCapacity)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn least_recently_used_goes_first_and_max_age_removes_old_images() {
        let sim = SimRuntime::new();
        for i in ["a", "b"] {
            sim.add_image(i);
        }
        let gc = ImageGc::new(ImageGcPolicy {
            min_age: Duration::ZERO,
            max_age: Duration::from_secs(3600),
            ..ImageGcPolicy::default()
        });
        let id = use_image(&sim, "a").await;
        gc.detect(&sim, Instant::now(), &none()).await.unwrap();
        sim.remove_container(&id).await.unwrap();
        // "a" was used, "b" never: "b" is least recently used and goes first.
        const MI: u64 = 1 << 20;
        gc.garbage_collect(&sim, Some(&fs(10 * MI, MI)), &none())
            .await
            .ok();
        assert_eq!(images(&sim).await, ["a"]);
        // Within the first hour of the kubelet, no age-based removal.
        tokio::time::advance(Duration::from_secs(1800)).await;
        gc.garbage_collect(&sim, Some(&fs(10 * MI, 9 * MI)), &none())
            .await
            .unwrap();
        assert_eq!(images(&sim).await, ["a"]);
        // After the kubelet ran an hour and "a" was unused for over an hour: removed for age.
        tokio::time::advance(Duration::from_secs(1801)).await;
        gc.garbage_collect(&sim, Some(&fs(10 * MI, 9 * MI)), &none())
            .await
            .unwrap();
        assert!(images(&sim).await.is_empty());
        assert!(
            crate::metrics::global()
                .image_garbage_collected
                .get(REASON_AGE)
                >= 1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn images_the_pods_name_stay_though_no_container_of_them_exists() {
        let sim = SimRuntime::new();
        for i in ["app:1", "init:1", "unused:1", "registry.local/pause:9"] {
            sim.add_image(i);
        }
        // Pinned by the policy under another spelling of the same reference.
        let gc = ImageGc::new(ImageGcPolicy {
            min_age: Duration::ZERO,
            pinned_images: vec!["registry.local/pause:9".into()],
            ..ImageGcPolicy::default()
        });
        let mut desired = pod("p", "u1", vec![container("app", "docker.io/library/app:1")]);
        if let Some(spec) = desired.spec.as_mut() {
            spec.init_containers = Some(vec![container("init", "init:1")]);
        }
        let wanted = ImageRefs::of_pods([&desired]);
        const MI: u64 = 1 << 20;
        let err = gc
            .garbage_collect(&sim, Some(&fs(100 * MI, 0)), &wanted)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ImageGcError::NotEnough { freed, .. } if freed == MI),
            "{err}"
        );
        assert_eq!(
            images(&sim).await,
            ["app:1", "init:1", "registry.local/pause:9"]
        );
        // The eviction manager's reclaim keeps them too.
        assert_eq!(gc.delete_unused(&sim, &wanted).await.unwrap(), 0);
        // Once no pod names them, they go (not in the instant they were last in use).
        assert_eq!(gc.delete_unused(&sim, &none()).await.unwrap(), 0);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(gc.delete_unused(&sim, &none()).await.unwrap(), 2 * MI);
        assert_eq!(images(&sim).await, ["registry.local/pause:9"]);
    }

    #[tokio::test(start_paused = true)]
    async fn delete_unused_and_policy_validation() {
        let sim = SimRuntime::new();
        sim.add_image("x");
        let gc = ImageGc::new(ImageGcPolicy {
            min_age: Duration::ZERO,
            ..ImageGcPolicy::default()
        });
        assert_eq!(gc.delete_unused(&sim, &none()).await.unwrap(), 1 << 20);
        assert!(images(&sim).await.is_empty());
        let bad = ImageGcPolicy {
            high_threshold_percent: 70,
            ..ImageGcPolicy::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "imageGCLowThresholdPercent");
        assert!(ImageGcPolicy {
            high_threshold_percent: 101,
            ..ImageGcPolicy::default()
        }
        .validate()
        .is_err());
        assert!(!ImageGcPolicy {
            high_threshold_percent: 100,
            low_threshold_percent: 100,
            ..ImageGcPolicy::default()
        }
        .enabled());
    }
}
