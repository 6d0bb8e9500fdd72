//! Persistent volumes' usage (Go's volume stat calculator, `fsResourceAnalyzer`): every
//! `volumeStatsAggPeriod` (1 min by default; 0: never) the manager measures the volumes of
//! each pod it has set up that can be measured — a `local` volume by `statfs` of its mount
//! (Go's `MetricsStatFS`), a CSI volume by the driver's `NodeGetVolumeStats` on the pod's
//! target path when the driver has `GET_VOLUME_STATS` (Go's `metricsCsi`) — and keeps the
//! result in a [`VolumeStatsCache`]: the summary lists those volumes after a pod's emptyDir
//! volumes, each with its `pvcRef`, and the `kubelet_volume_stats_*` families (labels
//! `namespace`, `persistentvolumeclaim`) are set from it, one series per claim. A volume that
//! cannot be measured is left out (Go: `hostPath`, drivers without the capability) and a
//! failing measurement is logged; the other volumes are still measured.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{blocking, io, SetUpVolume, VolumeError, VolumeManager};
use crate::summary::{FsStats, PvcReference, VolumeStats};

/// How a set-up volume is measured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum VolumeMeasure {
    /// Not measured here (emptyDir volumes are measured with the pod, others not at all).
    #[default]
    None,
    /// `statfs` of the mount (a `local` volume).
    StatFs,
    /// The driver's `NodeGetVolumeStats` on the pod's target path.
    Csi {
        /// The driver.
        driver: String,
        /// The volume's ID in the driver.
        volume_id: String,
    },
}

pub use crate::summary::VolumeStatsCache;

/// `statfs` of `path` as Go's `fs.Info` reads it.
fn statfs(path: &Path) -> Result<FsStats, VolumeError> {
    let s =
        rustix::fs::statvfs(path).map_err(|e| io("measuring", path)(std::io::Error::from(e)))?;
    let block = s.f_frsize;
    Ok(FsStats {
        available_bytes: Some(s.f_bavail.saturating_mul(block)),
        capacity_bytes: Some(s.f_blocks.saturating_mul(block)),
        used_bytes: Some(s.f_blocks.saturating_sub(s.f_bfree).saturating_mul(block)),
        inodes: Some(s.f_files),
        inodes_free: Some(s.f_ffree),
        inodes_used: Some(s.f_files.saturating_sub(s.f_ffree)),
        ..FsStats::default()
    })
}

impl VolumeManager {
    /// The cache the summary reads (see the module docs).
    pub fn volume_stats_cache(&self) -> VolumeStatsCache {
        self.volume_stats.clone()
    }

    /// One volume's usage; `None` when it is not measured.
    async fn measure(&self, volume: &SetUpVolume) -> Result<Option<FsStats>, VolumeError> {
        match &volume.measure {
            VolumeMeasure::None => Ok(None),
            VolumeMeasure::StatFs => {
                let path = volume.host_path.clone();
                blocking(move || statfs(&path)).await.map(Some)
            }
            VolumeMeasure::Csi { driver, volume_id } => {
                let Some(service) = self.csi.clone() else {
                    return Ok(None);
                };
                let path = volume.host_path.display().to_string();
                service
                    .volume_stats(driver, volume_id, &path)
                    .await
                    .map(|usage| {
                        usage.map(|u| FsStats {
                            available_bytes: Some(u.available_bytes),
                            capacity_bytes: Some(u.capacity_bytes),
                            used_bytes: Some(u.used_bytes),
                            inodes: Some(u.inodes),
                            inodes_free: Some(u.inodes_free),
                            inodes_used: Some(u.inodes_used),
                            ..FsStats::default()
                        })
                    })
                    .map_err(|e| VolumeError::Csi {
                        volume: volume_id.clone(),
                        step: "NodeGetVolumeStats",
                        message: e.to_string(),
                    })
            }
        }
    }

    /// Measures every set-up pod's measured volumes once and replaces the cache (and the
    /// `kubelet_volume_stats_*` series).
    pub async fn refresh_volume_stats(&self) {
        let pods: Vec<(String, Vec<(String, SetUpVolume)>)> = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(uid, volumes)| {
                let mut measured: Vec<(String, SetUpVolume)> = volumes
                    .iter()
                    .filter(|(_, v)| v.measure != VolumeMeasure::None)
                    .map(|(n, v)| (n.clone(), v.clone()))
                    .collect();
                measured.sort_by(|a, b| a.0.cmp(&b.0));
                (uid.clone(), measured)
            })
            .filter(|(_, m)| !m.is_empty())
            .collect();
        let time = crate::summary::rfc3339_now();
        let mut fresh = HashMap::new();
        for (uid, volumes) in pods {
            let mut stats = Vec::new();
            for (name, volume) in volumes {
                match self.measure(&volume).await {
                    Ok(Some(fs)) => stats.push(VolumeStats {
                        fs: FsStats {
                            time: time.clone(),
                            ..fs
                        },
                        name,
                        pvc_ref: volume.claim.clone(),
                    }),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(uid, volume = %name, error = %e, "measuring a volume failed")
                    }
                }
            }
            fresh.insert(uid, stats);
        }
        crate::metrics::global()
            .volume_stats
            .set(fresh.values().flatten());
        *self.volume_stats.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
    }

    /// Refreshes the volume stats every `period` until `shutdown` (never with a zero
    /// period).
    pub async fn run_volume_stats(&self, period: Duration, shutdown: CancellationToken) {
        if period.is_zero() {
            return;
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.refresh_volume_stats() => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }
}

/// The claim a pod's volume refers to, as the summary names it.
pub(super) fn claim_ref(namespace: &str, claim: Option<&str>) -> Option<PvcReference> {
    claim.map(|name| PvcReference {
        name: name.to_string(),
        namespace: namespace.to_string(),
    })
}
