//! `emptyDir` volumes: a directory under the pod (mode 0777, as Go), or for
//! `medium: Memory` a tmpfs mounted there with `size=` from `sizeLimit` (else the pod's memory
//! limit when every container has one, else the node's allocatable memory). Blocking.

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

/// Creates `dir` (mode 0777) and, for [`Medium::Memory`], mounts a tmpfs on it unless one is
/// already mounted there. With `fs_group` the directory belongs to that group and has the
/// set-group-id bit (0o2777), as Go's `SetVolumeOwnership` leaves it. Idempotent.
pub fn setup(
    dir: &Path,
    medium: Medium,
    size: Option<i64>,
    fs_group: Option<u32>,
) -> Result<(), EmptyDirError> {
    fs::create_dir_all(dir).map_err(io("creating directory", dir))?;
    if medium == Medium::Memory
        && !mount::is_mount_point(dir).map_err(io("reading mountinfo for", dir))?
    {
        let options = match size {
            Some(s) => format!("size={s}"),
            None => String::new(),
        };
        mount::mount_tmpfs(dir, &options).map_err(io("mounting tmpfs on", dir))?;
    }
    let mode = match fs_group {
        Some(gid) => {
            std::os::unix::fs::chown(dir, None, Some(gid))
                .map_err(io("changing the group of", dir))?;
            0o2777
        }
        None => 0o777,
    };
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
        .map_err(io("setting the mode of", dir))?;
    Ok(())
}

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
    }
}
