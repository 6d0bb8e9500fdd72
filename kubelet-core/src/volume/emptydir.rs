//! `emptyDir` volumes: a directory under the pod (mode 0777, as Go), or for
//! `medium: Memory` a tmpfs (its root 1777, as Go leaves it) mounted there with `size=` from
//! `sizeLimit` (else the pod's memory limit when every container has one, else the node's
//! allocatable memory). Blocking.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Pod};

use super::mount;
use crate::cm::ResourceList;
use crate::resources::value;

/// Storage medium of an emptyDir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Medium {
    /// The node's disk (the pod directory's filesystem).
    Disk,
    /// tmpfs.
    Memory,
}

/// Why an emptyDir could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EmptyDirError {
    /// `medium` is not "", "Memory".
    #[error("emptyDir medium {0:?} is not supported")]
    UnsupportedMedium(String),
    /// `sizeLimit` does not parse.
    #[error("emptyDir sizeLimit {0:?} is not a valid quantity")]
    InvalidSizeLimit(String),
    /// A filesystem or mount operation failed.
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

/// The medium an emptyDir source asks for.
pub fn medium(src: &EmptyDirVolumeSource) -> Result<Medium, EmptyDirError> {
    match src.medium.as_deref().unwrap_or("") {
        "" => Ok(Medium::Disk),
        "Memory" => Ok(Medium::Memory),
        other => Err(EmptyDirError::UnsupportedMedium(other.to_string())),
    }
}

/// The tmpfs size in bytes for a memory-backed emptyDir (see the module docs); `None` leaves
/// the kernel's default.
pub fn memory_size(
    src: &EmptyDirVolumeSource,
    pod: &Pod,
    allocatable: &ResourceList,
) -> Result<Option<i64>, EmptyDirError> {
    if let Some(q) = src.size_limit.as_ref() {
        let v = value(q).map_err(|_| EmptyDirError::InvalidSizeLimit(q.0.clone()))?;
        if v > 0 {
            return Ok(Some(v));
        }
    }
    let limits: Option<i64> = pod.spec.as_ref().and_then(|s| {
        s.containers.iter().try_fold(0i64, |acc, c| {
            let q = c.resources.as_ref()?.limits.as_ref()?.get("memory")?;
            Some(acc.saturating_add(value(q).ok()?))
        })
    });
    if let Some(l) = limits.filter(|l| *l > 0) {
        return Ok(Some(l));
    }
    Ok(allocatable
        .get("memory")
        .and_then(|q| value(q).ok())
        .filter(|v| *v > 0))
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EmptyDirError {
    let path = path.display().to_string();
    move |error| EmptyDirError::Io { op, path, error }
}

/// Sets up the emptyDir at `dir` in Go's order (`SetUpAt`): the directory, mode 0777 (Go's
/// `setupDir`: made, or chmod-ed when its permission bits differ); for [`Medium::Memory`] a
/// tmpfs mounted on it unless one is already there, whose root keeps tmpfs's own mode 1777
/// (Go mounts with `size=` only); then with `fs_group` Go's `SetVolumeOwnership` on the root:
/// that group, and set-group-id, `rw` and `x` for owner and group added to the mode (2777 on
/// disk, 3777 on tmpfs). Idempotent.
pub fn setup(
    dir: &Path,
    medium: Medium,
    size: Option<i64>,
    fs_group: Option<u32>,
) -> Result<(), EmptyDirError> {
    fs::create_dir_all(dir).map_err(io("creating directory", dir))?;
    let mounted = medium == Medium::Memory
        && mount::is_mount_point(dir).map_err(io("reading mountinfo for", dir))?;
    let mode = |dir: &Path| -> Result<u32, EmptyDirError> {
        Ok(fs::metadata(dir)
            .map_err(io("reading the mode of", dir))?
            .permissions()
            .mode()
            & 0o7777)
    };
    if !mounted && mode(dir)? & 0o777 != 0o777 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777))
            .map_err(io("setting the mode of", dir))?;
    }
    if medium == Medium::Memory && !mounted {
        let options = match size {
            Some(s) => format!("size={s}"),
            None => String::new(),
        };
        mount::mount_tmpfs(dir, &options).map_err(io("mounting tmpfs on", dir))?;
    }
    if let Some(gid) = fs_group {
        std::os::unix::fs::chown(dir, None, Some(gid)).map_err(io("changing the group of", dir))?;
        let owned = mode(dir)? | FS_GROUP_DIR_BITS;
        fs::set_permissions(dir, fs::Permissions::from_mode(owned))
            .map_err(io("setting the mode of", dir))?;
    }
    Ok(())
}

/// What Go's `SetVolumeOwnership` adds to a directory's mode: set-group-id, read-write
/// (`rwMask` 0660) and search (`execMask` 0110) for owner and group.
const FS_GROUP_DIR_BITS: u32 = 0o2000 | 0o660 | 0o110;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn pod_with_limits(limits: &[Option<&str>]) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers: limits
                    .iter()
                    .map(|l| Container {
                        resources: l.map(|l| ResourceRequirements {
                            limits: Some([("memory".to_string(), Quantity(l.to_string()))].into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn memory_size_rules() {
        let alloc: ResourceList = [("memory".to_string(), Quantity("1Gi".into()))].into();
        let src = |limit: Option<&str>| EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            size_limit: limit.map(|l| Quantity(l.into())),
            ..Default::default()
        };
        let p = pod_with_limits(&[Some("64Mi"), Some("64Mi")]);
        assert_eq!(
            memory_size(&src(Some("1Mi")), &p, &alloc).unwrap(),
            Some(1 << 20)
        );
        assert_eq!(
            memory_size(&src(None), &p, &alloc).unwrap(),
            Some(128 << 20)
        );
        let partial = pod_with_limits(&[Some("64Mi"), None]);
        assert_eq!(
            memory_size(&src(None), &partial, &alloc).unwrap(),
            Some(1 << 30)
        );
        assert_eq!(
            memory_size(&src(None), &partial, &ResourceList::new()).unwrap(),
            None
        );
        assert!(memory_size(&src(Some("lots")), &p, &alloc).is_err());
        assert!(medium(&EmptyDirVolumeSource {
            medium: Some("HugePages".into()),
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn disk_dir_is_world_writable() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("v");
        setup(&dir, Medium::Disk, None, None).unwrap();
        setup(&dir, Medium::Disk, None, None).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o7777,
            0o777
        );
        setup(&dir, Medium::Disk, None, Some(2000)).unwrap();
        let m = fs::metadata(&dir).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o2777);
        assert_eq!(std::os::unix::fs::MetadataExt::gid(&m), 2000);
        // fsGroup adds to the mode the root has (a tmpfs root is 1777): 3777, what the node
        // e2e FSGroup subPath spec sees (`dgtrwxrwxrwx`); a root of other permission bits is
        // made 0777 first, as Go's setupDir does.
        let sticky = d.path().join("sticky");
        fs::create_dir(&sticky).unwrap();
        fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
        setup(&sticky, Medium::Disk, None, Some(2000)).unwrap();
        let mode = fs::metadata(&sticky).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o3777, "{mode:o}");
        let narrow = d.path().join("narrow");
        fs::create_dir(&narrow).unwrap();
        fs::set_permissions(&narrow, fs::Permissions::from_mode(0o1700)).unwrap();
        setup(&narrow, Medium::Disk, None, None).unwrap();
        let mode = fs::metadata(&narrow).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o777, "{mode:o}");
    }
}
