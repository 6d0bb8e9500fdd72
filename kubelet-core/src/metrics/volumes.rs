//! The `kubelet_volume_stats_*` families (Go's volume stats collector): per claim
//! (`namespace`, `persistentvolumeclaim`), the usage of the volume that stands for it, from
//! the volume manager's last measurement; rendered only while some claim is measured.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::families::{head, GaugeVec};
use crate::summary::VolumeStats;

const LABELS: &[&str] = &["namespace", "persistentvolumeclaim"];

/// The families, by name and help, in Go's order.
const FAMILIES: [(&str, &str); 6] = [
    (
        "kubelet_volume_stats_capacity_bytes",
        "Capacity in bytes of the volume",
    ),
    (
        "kubelet_volume_stats_available_bytes",
        "Number of available bytes in the volume",
    ),
    (
        "kubelet_volume_stats_used_bytes",
        "Number of used bytes in the volume",
    ),
    (
        "kubelet_volume_stats_inodes",
        "Maximum number of inodes in the volume",
    ),
    (
        "kubelet_volume_stats_inodes_free",
        "Number of free inodes in the volume",
    ),
    (
        "kubelet_volume_stats_inodes_used",
        "Number of used inodes in the volume",
    ),
];

/// See the module docs.
#[derive(Debug)]
pub struct VolumeStatsMetrics {
    families: [GaugeVec; 6],
    any: Mutex<bool>,
}

impl Default for VolumeStatsMetrics {
    fn default() -> Self {
        VolumeStatsMetrics {
            families: std::array::from_fn(|_| GaugeVec::new(LABELS)),
            any: Mutex::new(false),
        }
    }
}

impl VolumeStatsMetrics {
    /// Replaces every series with these volumes' (those with a claim; the first volume of
    /// a claim counts, as in Go).
    pub fn set<'a>(&self, volumes: impl IntoIterator<Item = &'a VolumeStats>) {
        let mut by_claim: BTreeMap<Vec<String>, [u64; 6]> = BTreeMap::new();
        for v in volumes {
            let Some(claim) = v.pvc_ref.as_ref() else {
                continue;
            };
            let f = &v.fs;
            by_claim
                .entry(vec![claim.namespace.clone(), claim.name.clone()])
                .or_insert_with(|| {
                    [
                        f.capacity_bytes,
                        f.available_bytes,
                        f.used_bytes,
                        f.inodes,
                        f.inodes_free,
                        f.inodes_used,
                    ]
                    .map(|x| x.unwrap_or(0))
                });
        }
        for (i, family) in self.families.iter().enumerate() {
            family.replace(
                by_claim
                    .iter()
                    .map(|(labels, values)| (labels.clone(), values[i] as f64))
                    .collect(),
            );
        }
        *self.any.lock().unwrap_or_else(|e| e.into_inner()) = !by_claim.is_empty();
    }

    /// The gauge of `family` (an index into Go's order: capacity, available, used, inodes,
    /// inodes free, inodes used) for a claim.
    pub fn get(&self, family: usize, namespace: &str, claim: &str) -> Option<f64> {
        self.families.get(family)?.get(&[namespace, claim])
    }

    pub(super) fn render(&self, out: &mut String) {
        if !*self.any.lock().unwrap_or_else(|e| e.into_inner()) {
            return;
        }
        for ((name, help), family) in FAMILIES.iter().zip(&self.families) {
            head(out, name, "gauge", help);
            family.render(out, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::{FsStats, PvcReference};

    fn volume(claim: Option<&str>, used: u64) -> VolumeStats {
        VolumeStats {
            fs: FsStats {
                capacity_bytes: Some(100),
                available_bytes: Some(100 - used),
                used_bytes: Some(used),
                inodes: Some(10),
                inodes_free: Some(8),
                inodes_used: Some(2),
                ..FsStats::default()
            },
            name: "v".into(),
            pvc_ref: claim.map(|c| PvcReference {
                name: c.into(),
                namespace: "ns".into(),
            }),
        }
    }

    #[test]
    fn one_series_per_claim_and_nothing_without_claims() {
        let m = VolumeStatsMetrics::default();
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.is_empty());
        m.set(&[
            volume(Some("a"), 30),
            volume(Some("a"), 50),
            volume(None, 1),
        ]);
        m.render(&mut out);
        assert!(out.contains(
            "kubelet_volume_stats_used_bytes{namespace=\"ns\",persistentvolumeclaim=\"a\"} 30\n"
        ), "{out}");
        assert!(out.contains(
            "# HELP kubelet_volume_stats_inodes_free [ALPHA] Number of free inodes in the volume"
        ));
        assert_eq!(m.get(1, "ns", "a"), Some(70.0));
        assert_eq!(
            out.matches("kubelet_volume_stats_capacity_bytes{").count(),
            1
        );
        m.set(&[]);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.is_empty(), "{out}");
    }
}
