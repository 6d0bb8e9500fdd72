//! Tearing volumes down: after a pod terminated ([`VolumeManager::unmount_volumes`]), when it
//! is removed ([`VolumeManager::teardown_pod`]) and for directories nobody knows
//! ([`VolumeManager::cleanup_orphans`]).

use std::path::Path;

use super::{blocking, io, mount, VolumeError, VolumeManager};

impl VolumeManager {
    /// Unmounts everything below the pod's directory and removes it. A directory that still
    /// has a mount below it afterwards is left alone ([`VolumeError::StillMounted`]).
    pub async fn teardown_pod(&self, uid: &str) -> Result<(), VolumeError> {
        if self.pods_dir.is_none() || !crate::pod::is_safe_uid(uid) {
            return Ok(());
        }
        // CSI volumes through their drivers first: never unmounted behind a driver's back.
        self.teardown_csi(uid).await?;
        self.teardown_csi_block(uid).await?;
        self.unmap_block_devices(uid).await?;
        let dir = self.pod_dir(uid);
        blocking(move || teardown_dir(&dir, true)).await?;
        self.unmount_unused_local_devices().await;
        self.forget_pod_volumes(uid);
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        self.store.unregister_pod(uid);
        Ok(())
    }

    /// Unmounts everything below the pod's directory and removes its `volumes` and
    /// `volume-subpaths`, keeping the rest (container data such as termination messages,
    /// `etc-hosts`) until [`VolumeManager::teardown_pod`]. For pods that terminated.
    pub async fn unmount_volumes(&self, uid: &str) -> Result<(), VolumeError> {
        if self.pods_dir.is_none() || !crate::pod::is_safe_uid(uid) {
            return Ok(());
        }
        self.teardown_csi(uid).await?;
        self.teardown_csi_block(uid).await?;
        self.unmap_block_devices(uid).await?;
        let dir = self.pod_dir(uid);
        blocking(move || teardown_dir(&dir, false)).await?;
        self.unmount_unused_local_devices().await;
        self.forget_pod_volumes(uid);
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
        Ok(())
    }

    /// Unmaps the pod's raw block volumes (their bind files under the global map paths, see
    /// [`super::block`]), each under its volume's lock.
    async fn unmap_block_devices(&self, uid: &str) -> Result<(), VolumeError> {
        let root = self.root_dir();
        let volumes = {
            let (root, uid) = (root.clone(), uid.to_string());
            blocking(move || Ok(super::block::volumes_of_pod(&root, &uid))).await?
        };
        for volume in volumes {
            let lock = self.pv_lock(&volume);
            let _one_at_a_time = lock.lock().await;
            let (root, uid) = (root.clone(), uid.to_string());
            blocking(move || {
                super::block::unmap_device(&root, &volume, &uid)
                    .map_err(|error| VolumeError::Block { volume, error })
            })
            .await?;
        }
        Ok(())
    }

    /// Uids that have a pod directory.
    pub async fn pod_dirs(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Some(pods_dir) = self.pods_dir.as_ref() else {
            return out;
        };
        if let Ok(mut rd) = tokio::fs::read_dir(pods_dir).await {
            while let Ok(Some(e)) = rd.next_entry().await {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        out
    }

    /// Tears down the directories of pods for which `keep` is false (housekeeping).
    pub async fn cleanup_orphans(&self, keep: impl Fn(&str) -> bool) {
        let orphans: Vec<String> = self
            .pod_dirs()
            .await
            .into_iter()
            .filter(|uid| !keep(uid))
            .collect();
        for uid in orphans {
            match self.teardown_pod(&uid).await {
                Ok(()) => tracing::info!(uid, "removed orphaned pod directory"),
                Err(e) => {
                    tracing::warn!(uid, error = %e, "cleaning up orphaned pod directory failed")
                }
            }
        }
        self.retain_pods_wanting(&keep);
        self.cleanup_csi_staged().await;
        self.cleanup_csi_block_staged().await;
        self.unmount_unused_local_devices().await;
    }
}

/// Unmounts everything below `dir`, then removes `dir` (`whole`) or only its volume
/// directories; refuses to remove anything while a mount is left below.
fn teardown_dir(dir: &Path, whole: bool) -> Result<(), VolumeError> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    let mounted = mount::mount_points_under(dir).map_err(io("reading mountinfo for", dir))?;
    for m in &mounted {
        if let Err(e) = mount::unmount(m) {
            tracing::warn!(path = %m.display(), error = %e, "unmounting failed");
        }
    }
    let left = mount::mount_points_under(dir).map_err(io("reading mountinfo for", dir))?;
    if !left.is_empty() {
        return Err(VolumeError::StillMounted {
            path: dir.to_path_buf(),
            mounts: left,
        });
    }
    if whole {
        return std::fs::remove_dir_all(dir).map_err(io("removing", dir));
    }
    for sub in ["volumes", "volume-subpaths", "volumeDevices"] {
        let d = dir.join(sub);
        match std::fs::remove_dir_all(&d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("removing", &d)(e)),
        }
    }
    Ok(())
}
