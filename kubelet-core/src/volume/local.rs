//! `local` PersistentVolumes on a directory (Go's `pkg/volume/local`): the directory is
//! bind-mounted at the pod's `volumes/kubernetes.io~local-volume/<pv-name>`, read-only when
//! the claim is, with the volume's mount options. Blocking.
//!
//! States of the pod's directory: absent or an empty directory → [`setup`] makes it (0750) and
//! bind-mounts the volume's path on it → mounted. A mounted directory is left as it is (a
//! kubelet restart finds its running pods' volumes mounted and keeps them). Teardown is the
//! pod directory's (unmount, then remove), never a removal through the mount.

use std::path::{Component, Path};

use rustix::mount::MountFlags;

use super::mount;

/// The plugin directory name under a pod's `volumes` (Go's `kubernetes.io/local-volume`).
pub const PLUGIN_DIR: &str = "local-volume";

/// Why a local volume could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The volume names no path.
    #[error("LocalVolume volume {volume:?} path is empty")]
    PathEmpty {
        /// The volume's name.
        volume: String,
    },
    /// The path climbs out with `..` (Go's `ValidatePathNoBacksteps`).
    #[error("invalid path: {path} must not contain '..'")]
    Backsteps {
        /// The path.
        path: String,
    },
    /// The path is not a directory (a block device is not supported yet).
    #[error("{path}: only directory local volumes are supported by kubelet-rs ({found})")]
    NotDirectory {
        /// The path.
        path: String,
        /// What it is.
        found: &'static str,
    },
    /// A mount option kubelet-rs cannot apply to a bind mount.
    #[error("mount option {option:?} is not supported for local volumes")]
    MountOption {
        /// The option.
        option: String,
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

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> LocalError {
    let path = path.display().to_string();
    move |error| LocalError::Io { op, path, error }
}

/// The flags of a bind mount with these options (`ro` when `read_only`): the options a bind
/// remount can apply; anything else is refused, never dropped.
pub fn mount_flags(read_only: bool, options: &[String]) -> Result<MountFlags, LocalError> {
    let mut flags = MountFlags::empty();
    if read_only {
        flags |= MountFlags::RDONLY;
    }
    for o in options {
        flags |= match o.trim() {
            "ro" => MountFlags::RDONLY,
            "rw" | "bind" | "defaults" => MountFlags::empty(),
            "nosuid" => MountFlags::NOSUID,
            "nodev" => MountFlags::NODEV,
            "noexec" => MountFlags::NOEXEC,
            "noatime" => MountFlags::NOATIME,
            "nodiratime" => MountFlags::NODIRATIME,
            "relatime" => MountFlags::RELATIME,
            other => {
                return Err(LocalError::MountOption {
                    option: other.to_string(),
                })
            }
        };
    }
    Ok(flags)
}

/// Bind-mounts the local volume at `source` onto the pod's directory `dir` (see the module
/// docs). Returns whether it mounted now (false: it was mounted already).
pub fn setup(
    volume: &str,
    source: &str,
    dir: &Path,
    read_only: bool,
    options: &[String],
) -> Result<bool, LocalError> {
    if source.is_empty() {
        return Err(LocalError::PathEmpty {
            volume: volume.to_string(),
        });
    }
    let src = Path::new(source);
    if src.components().any(|c| c == Component::ParentDir) {
        return Err(LocalError::Backsteps {
            path: source.to_string(),
        });
    }
    let flags = mount_flags(read_only, options)?;
    let meta = std::fs::metadata(src).map_err(io("stat", src))?;
    if !meta.is_dir() {
        use std::os::unix::fs::FileTypeExt;
        let found = if meta.file_type().is_block_device() {
            "a block device"
        } else {
            "not a directory"
        };
        return Err(LocalError::NotDirectory {
            path: source.to_string(),
            found,
        });
    }
    if mount::is_mount_point(dir).map_err(io("reading mountinfo for", dir))? {
        return Ok(false);
    }
    std::fs::create_dir_all(dir).map_err(io("creating directory", dir))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
            .map_err(io("setting the mode of", dir))?;
    }
    mount::bind(src, dir).map_err(io("bind-mounting the volume on", dir))?;
    if !flags.is_empty() {
        if let Err(e) = mount::remount_bind(dir, flags) {
            // Never leave the volume mounted writable when it was to be read-only.
            if let Err(u) = mount::unmount(dir) {
                tracing::warn!(path = %dir.display(), error = %u, "unmounting after a failed remount failed");
            }
            return Err(io("applying mount options to", dir)(e));
        }
    }
    Ok(true)
}

/// Whether another pod (a directory beside `dir`'s pod under `pods_dir`) has the same volume
/// mounted: Go leaves the volume's owner as that pod set it.
pub fn mounted_by_another_pod(dir: &Path, pods_dir: &Path) -> bool {
    let (Some(name), Ok(rel)) = (dir.file_name(), dir.strip_prefix(pods_dir)) else {
        return false;
    };
    let Some(own_uid) = rel.components().next() else {
        return false;
    };
    std::fs::read_dir(pods_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name() != own_uid.as_os_str())
        .any(|e| {
            let other = e
                .path()
                .join("volumes")
                .join(format!("kubernetes.io~{PLUGIN_DIR}"))
                .join(name);
            mount::is_mount_point(&other).unwrap_or(false)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_become_flags_or_are_refused() {
        let opts = |o: &[&str]| o.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(mount_flags(false, &[]).ok(), Some(MountFlags::empty()));
        assert_eq!(mount_flags(true, &[]).ok(), Some(MountFlags::RDONLY));
        assert_eq!(
            mount_flags(false, &opts(&["ro", "nosuid", "noexec"])).ok(),
            Some(MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NOEXEC)
        );
        let err = mount_flags(false, &opts(&["noatime", "uid=1000"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mount option \"uid=1000\" is not supported for local volumes"
        );
    }

    #[test]
    fn bad_paths_are_refused_before_any_mount() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pod-volume");
        let e = setup("pv", "", &dir, false, &[]).unwrap_err();
        assert_eq!(e.to_string(), "LocalVolume volume \"pv\" path is empty");
        let e = setup("pv", "/mnt/../etc", &dir, false, &[]).unwrap_err();
        assert!(matches!(e, LocalError::Backsteps { .. }), "{e}");
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let e = setup("pv", file.to_str().unwrap(), &dir, false, &[]).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        let missing = tmp.path().join("missing");
        let e = setup("pv", missing.to_str().unwrap(), &dir, false, &[]).unwrap_err();
        assert!(e.to_string().starts_with("stat "), "{e}");
        assert!(!dir.exists());
    }
}
