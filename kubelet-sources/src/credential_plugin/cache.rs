//! The answers of one plugin, cached as its responses ask (Go's plugin cache): under the image
//! (`cacheKeyType: Image`), the registry host (`Registry`: the image's first path segment) or
//! for every image (`Global`), until `cacheDuration` (absent: the configured
//! `defaultCacheDuration`; zero: not cached) has passed. A lookup tries the image, then its
//! registry, then the global entry; expired entries are purged every 15 minutes.

use std::collections::HashMap;
use std::time::Duration;

use kubelet_core::credentials::DockerConfig;
use tokio::time::Instant;

/// How often expired entries are dropped.
const PURGE_INTERVAL: Duration = Duration::from_secs(15 * 60);
/// The key of `Global` answers.
const GLOBAL_KEY: &str = "global";

/// What a response's `cacheKeyType` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKeyType {
    /// For this image only.
    Image,
    /// For every image of this registry.
    Registry,
    /// For every image.
    Global,
}

impl CacheKeyType {
    /// From the response's field; `None` for an unknown value.
    pub fn parse(s: &str) -> Option<CacheKeyType> {
        match s {
            "Image" => Some(CacheKeyType::Image),
            "Registry" => Some(CacheKeyType::Registry),
            "Global" => Some(CacheKeyType::Global),
            _ => None,
        }
    }
}

/// The registry of an image (Go's `parseRegistry`: up to the first `/`).
fn registry(image: &str) -> &str {
    image.split('/').next().unwrap_or(image)
}

/// The cache of one plugin. See the module docs.
#[derive(Debug)]
pub struct Cache {
    entries: HashMap<String, (DockerConfig, Instant)>,
    last_purge: Instant,
}

impl Cache {
    /// An empty cache at `now`.
    pub fn new(now: Instant) -> Cache {
        Cache {
            entries: HashMap::new(),
            last_purge: now,
        }
    }

    /// The cached answer for `image` at `now`, if any.
    pub fn get(&mut self, image: &str, now: Instant) -> Option<DockerConfig> {
        if now.saturating_duration_since(self.last_purge) >= PURGE_INTERVAL {
            self.entries.retain(|_, (_, expires)| *expires > now);
            self.last_purge = now;
        }
        [image, registry(image), GLOBAL_KEY]
            .into_iter()
            .find_map(|k| match self.entries.get(k) {
                Some((config, expires)) if *expires > now => Some(config.clone()),
                _ => None,
            })
    }

    /// Keeps `config`, the answer for `image`, under the key `key_type` asks for, for
    /// `duration` (zero: not kept).
    pub fn put(
        &mut self,
        image: &str,
        key_type: CacheKeyType,
        config: DockerConfig,
        duration: Duration,
        now: Instant,
    ) {
        if duration.is_zero() {
            return;
        }
        let key = match key_type {
            CacheKeyType::Image => image,
            CacheKeyType::Registry => registry(image),
            CacheKeyType::Global => GLOBAL_KEY,
        };
        self.entries
            .insert(key.to_string(), (config, now + duration));
    }

    /// How many entries are kept (expired ones until the next purge included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_core::credentials::DockerConfigEntry;

    fn config(user: &str) -> DockerConfig {
        [(
            "reg.io".to_string(),
            DockerConfigEntry {
                username: user.into(),
                ..Default::default()
            },
        )]
        .into_iter()
        .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn keys_and_expiry_on_the_paused_clock() {
        let mut c = Cache::new(Instant::now());
        let minute = Duration::from_secs(60);
        c.put(
            "reg.io/a",
            CacheKeyType::Image,
            config("image"),
            minute,
            Instant::now(),
        );
        assert_eq!(c.get("reg.io/a", Instant::now()), Some(config("image")));
        assert_eq!(
            c.get("reg.io/b", Instant::now()),
            None,
            "image key: not for b"
        );
        c.put(
            "reg.io/a",
            CacheKeyType::Registry,
            config("registry"),
            2 * minute,
            Instant::now(),
        );
        // The image entry wins while it lasts, then the registry's serves every image.
        assert_eq!(c.get("reg.io/a", Instant::now()), Some(config("image")));
        assert_eq!(c.get("reg.io/b", Instant::now()), Some(config("registry")));
        assert_eq!(c.get("other.io/b", Instant::now()), None);
        tokio::time::advance(minute).await;
        assert_eq!(c.get("reg.io/a", Instant::now()), Some(config("registry")));
        tokio::time::advance(minute).await;
        assert_eq!(c.get("reg.io/a", Instant::now()), None, "both expired");
        c.put(
            "x.io/y",
            CacheKeyType::Global,
            config("global"),
            minute,
            Instant::now(),
        );
        assert_eq!(c.get("other.io/b", Instant::now()), Some(config("global")));
        // Zero: not cached.
        c.put(
            "z.io/z",
            CacheKeyType::Image,
            config("zero"),
            Duration::ZERO,
            Instant::now(),
        );
        assert_eq!(c.get("z.io/z", Instant::now()), Some(config("global")));
        // Expired entries are purged every 15 minutes.
        assert_eq!(c.len(), 3);
        tokio::time::advance(PURGE_INTERVAL).await;
        assert_eq!(c.get("z.io/z", Instant::now()), None);
        assert!(c.is_empty());
        assert_eq!(
            CacheKeyType::parse("Registry"),
            Some(CacheKeyType::Registry)
        );
        assert_eq!(CacheKeyType::parse("registry"), None);
    }
}
