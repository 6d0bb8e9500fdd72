//! Raw block volumes (`volumeMode: Block` in a container's `volumeDevices`) of `local`
//! PersistentVolumes on a block device, laid out as Go's `util.MapBlockVolume` lays them out:
//! - `<root-dir>/plugins/kubernetes.io/local-volume/volumeDevices/<pv>/<pod-uid>`: a file the
//!   device is bind-mounted on, one per pod (the global map path: it shows which pods hold
//!   the device, and keeps the device node referenced while they do);
//! - `<root-dir>/pods/<uid>/volumeDevices/kubernetes.io~local-volume/<pv>`: a symbolic link to
//!   the device, which the container runtime is given as the device's host path (it resolves
//!   the link) with the container's `devicePath`.
//!
//! States per pod and volume: unmapped → [`map_device`] (the bind file made and mounted, the
//! link made or replaced) → mapped; mapped → [`map_device`] again (a later sync or a restarted
//! kubelet): kept; mapped → [`unmap_device`] (the pod's teardown, for each of
//! [`volumes_of_pod`]: the pod's bind file unmounted and removed, an emptied volume directory
//! removed; the link goes with the pod's directory) → unmapped. Blocking.
//!
//! Go also holds each device open through a loop device on the bind file (its "descriptor
//! lock"); kubelet-rs does not.

use std::path::{Path, PathBuf};

use super::{local, mount};

/// The global map directories' parent under the root dir.
pub const GLOBAL_MAP_DIR: &str = "plugins/kubernetes.io/local-volume/volumeDevices";

/// Why a block volume could not be mapped.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The volume's path is not a block device.
    #[error("{path} is not a block device: a volumeMode Block local volume needs one")]
    NotBlockDevice {
        /// The path.
        path: String,
    },
    /// A file operation failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// What failed.
        op: &'static str,
        /// Where.
        path: String,
        /// The error.
        error: std::io::Error,
    },
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BlockError {
    let path = path.display().to_string();
    move |error| BlockError::Io { op, path, error }
}

/// The pod's link for the volume of the plugin `plugin` (`local-volume`, `csi`):
/// `<pods_dir>/<uid>/volumeDevices/kubernetes.io~<plugin>/<pv>`.
pub fn pod_device_link(pods_dir: &Path, uid: &str, plugin: &str, pv: &str) -> PathBuf {
    pods_dir
        .join(uid)
        .join("volumeDevices")
        .join(format!("kubernetes.io~{plugin}"))
        .join(pv)
}

/// Maps the block device `device` of the `local` volume `pv` for the pod `uid` (see the
/// module docs); returns the pod's link, the device's host path for the runtime.
pub fn map_device(
    root_dir: &Path,
    pods_dir: &Path,
    uid: &str,
    pv: &str,
    device: &str,
) -> Result<PathBuf, BlockError> {
    let link = pod_device_link(pods_dir, uid, local::PLUGIN_DIR, pv);
    map_device_at(
        &root_dir.join(GLOBAL_MAP_DIR).join(pv),
        &link,
        uid,
        Path::new(device),
    )?;
    Ok(link)
}

/// Maps the block device at `device` (a device node, or a file a device node is bind-mounted
/// on) for the pod `uid`: bind-mounted on `<global>/<uid>`, and `link` made (or replaced) to
/// point at it. Go's `MapBlockVolume`, for every plugin.
pub fn map_device_at(
    global: &Path,
    link: &Path,
    uid: &str,
    device: &Path,
) -> Result<(), BlockError> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
    let meta = std::fs::metadata(device).map_err(io("stat", device))?;
    if !meta.file_type().is_block_device() {
        return Err(BlockError::NotBlockDevice {
            path: device.display().to_string(),
        });
    }
    let mut dirs = std::fs::DirBuilder::new();
    dirs.recursive(true).mode(0o750);
    dirs.create(global)
        .map_err(io("creating directory", global))?;
    let bind_file = global.join(uid);
    if !mount::is_mount_point(&bind_file).map_err(io("reading mountinfo for", &bind_file))? {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&bind_file)
            .map_err(io("creating", &bind_file))?;
        mount::bind(device, &bind_file).map_err(io("bind-mounting the device on", &bind_file))?;
    }
    if let Some(parent) = link.parent() {
        dirs.create(parent)
            .map_err(io("creating directory", parent))?;
    }
    if std::fs::read_link(link).ok().as_deref() != Some(device) {
        match std::fs::remove_file(link) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("removing", link)(e))
            }
            _ => {}
        }
        std::os::unix::fs::symlink(device, link).map_err(io("linking", link))?;
    }
    Ok(())
}

/// The block volumes (PV names) mapped for the pod `uid`: those with a bind file of it
/// under their global map path.
pub fn volumes_of_pod(root_dir: &Path, uid: &str) -> Vec<String> {
    std::fs::read_dir(root_dir.join(GLOBAL_MAP_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join(uid).symlink_metadata().is_ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect()
}

/// Unmaps the `local` block volume `pv` of the pod `uid` (see [`unmap_device_at`]).
pub fn unmap_device(root_dir: &Path, pv: &str, uid: &str) -> Result<(), BlockError> {
    unmap_device_at(&root_dir.join(GLOBAL_MAP_DIR).join(pv), uid).map(drop)
}

/// Unmaps the pod `uid` from the global map path `global`: its bind file unmounted and
/// removed, `global` removed once empty (the last pod's). Whether `global` is gone.
pub fn unmap_device_at(global: &Path, uid: &str) -> Result<bool, BlockError> {
    let bind_file = global.join(uid);
    if std::fs::symlink_metadata(&bind_file).is_ok() {
        if mount::is_mount_point(&bind_file).map_err(io("reading mountinfo for", &bind_file))? {
            mount::unmount(&bind_file).map_err(io("unmounting", &bind_file))?;
        }
        std::fs::remove_file(&bind_file).map_err(io("removing", &bind_file))?;
    }
    // Another pod's file keeps the directory (remove_dir fails on it).
    drop(std::fs::remove_dir(global));
    Ok(std::fs::symlink_metadata(global).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_no_block_device_is_refused_before_anything_is_made() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("disk");
        std::fs::write(&file, b"").unwrap();
        let err = map_device(
            root.path(),
            &root.path().join("pods"),
            "u1",
            "pv",
            file.to_str().unwrap(),
        )
        .unwrap_err();
        assert!(matches!(err, BlockError::NotBlockDevice { .. }), "{err}");
        assert!(!root.path().join(GLOBAL_MAP_DIR).exists());
        let err = map_device(
            root.path(),
            &root.path().join("pods"),
            "u1",
            "pv",
            "/nonexistent/dev",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("stat /nonexistent/dev"),
            "{err}"
        );
    }

    #[test]
    fn unmapping_removes_the_pods_files_and_emptied_volume_directories() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join(GLOBAL_MAP_DIR);
        for (pv, uid) in [("pv-a", "u1"), ("pv-b", "u1"), ("pv-b", "u2")] {
            std::fs::create_dir_all(base.join(pv)).unwrap();
            std::fs::write(base.join(pv).join(uid), b"").unwrap();
        }
        let mut of_u1 = volumes_of_pod(root.path(), "u1");
        of_u1.sort();
        assert_eq!(of_u1, vec!["pv-a", "pv-b"]);
        for pv in of_u1 {
            unmap_device(root.path(), &pv, "u1").unwrap();
        }
        assert!(!base.join("pv-a").exists());
        assert!(!base.join("pv-b/u1").exists());
        assert!(base.join("pv-b/u2").exists(), "another pod's file stays");
        unmap_device(root.path(), "pv-b", "u2").unwrap();
        assert!(!base.join("pv-b").exists());
        assert!(volumes_of_pod(root.path(), "u3").is_empty());
        unmap_device(root.path(), "pv-c", "u3").unwrap();
        assert_eq!(
            pod_device_link(Path::new("/r/pods"), "u1", "local-volume", "pv"),
            Path::new("/r/pods/u1/volumeDevices/kubernetes.io~local-volume/pv")
        );
    }
}
