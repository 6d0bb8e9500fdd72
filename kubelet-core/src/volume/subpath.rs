//! Safe `subPath` resolution (the class of CVE-2017-1002101 and CVE-2021-25741).
//!
//! A container may replace any component of a sub path with a symlink (it can write into the
//! volume). The sub path is therefore never handed to the runtime as a path: it is opened
//! relative to the volume root with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, which
//! the kernel refuses when any step (a symlink to `/`, to `..`, or one swapped in during the
//! walk) would leave the volume; on kernels without `openat2` every component is opened with
//! `O_NOFOLLOW` and any symlink is refused. The opened file descriptor is then bind-mounted
//! through `/proc/self/fd/N` onto `<pod>/volume-subpaths/<volume>/<container>/<index>`, and
//! that bind mount — which pins the object that was opened — is what the container gets. A
//! later symlink swap cannot redirect it.
//!
//! Blocking; call from `spawn_blocking`.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::mount;

/// Why a sub path could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SubpathError {
    /// The sub path is absolute or contains `..`.
    #[error("invalid subPath {subpath:?}: {reason}")]
    Invalid {
        /// The sub path.
        subpath: String,
        /// Why.
        reason: &'static str,
    },
    /// Resolving the sub path would leave the volume (through a symlink or `..`).
    #[error("subPath {subpath:?} of volume {volume} resolves outside the volume (symlink escape refused)")]
    Escape {
        /// The sub path.
        subpath: String,
        /// The volume root on the host.
        volume: PathBuf,
    },
    /// A filesystem or mount operation failed.
    #[error("subPath {subpath:?}: {op} {path}: {error}")]
    Io {
        /// The sub path.
        subpath: String,
        /// What failed.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

/// Checks a sub path as the API does: relative, no `..` component.
pub fn validate(subpath: &str) -> Result<(), SubpathError> {
    let bad = |reason| SubpathError::Invalid {
        subpath: subpath.to_string(),
        reason,
    };
    if Path::new(subpath).is_absolute() {
        return Err(bad("must be a relative path"));
    }
    if Path::new(subpath)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(bad("must not contain '..'"));
    }
    Ok(())
}

fn components(subpath: &str) -> Vec<String> {
    Path::new(subpath)
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// How the resolver walks: the kernel's `openat2` or the portable component walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// `openat2(RESOLVE_BENEATH)`; falls back to `NoFollow` on `ENOSYS`.
    Openat2,
    /// `openat(O_NOFOLLOW)` per component; symlinks refused.
    NoFollow,
}

/// Opens `subpath` beneath `root` (an `O_PATH` descriptor), creating missing directories with
/// `create_mode` when given. See the module docs.
pub fn open_beneath(
    root: &Path,
    subpath: &str,
    create_mode: Option<u32>,
) -> Result<OwnedFd, SubpathError> {
    open_with(root, subpath, create_mode, Walk::Openat2)
}

pub(crate) fn open_with(
    root: &Path,
    subpath: &str,
    create_mode: Option<u32>,
    walk: Walk,
) -> Result<OwnedFd, SubpathError> {
    validate(subpath)?;
    let io = |op: &'static str, path: &Path| {
        let (subpath, path) = (subpath.to_string(), path.to_path_buf());
        move |e: Errno| SubpathError::Io {
            subpath,
            op,
            path,
            error: e.into(),
        }
    };
    let escape = || SubpathError::Escape {
        subpath: subpath.to_string(),
        volume: root.to_path_buf(),
    };
    let root_fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io("opening volume root", root))?;
    let comps = components(subpath);
    let mut walk = walk;
    // The descriptor of the deepest prefix opened so far (the root at first).
    let mut cur = root_fd
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| SubpathError::Io {
            subpath: subpath.to_string(),
            op: "duplicating descriptor",
            path: root.to_path_buf(),
            error: e,
        })?;
    let mut i = 0;
    // Per component: whether a directory was already created for it (a second ENOENT after
    // that means a dangling symlink is in the way: never loop on it), and EAGAIN retries.
    let mut created_at: Option<usize> = None;
    let mut again = 0u32;
    while i < comps.len() {
        let prefix = comps[..=i].join("/");
        let opened = match walk {
            Walk::Openat2 => {
                match rustix::fs::openat2(
                    &root_fd,
                    prefix.as_str(),
                    OFlags::PATH | OFlags::CLOEXEC,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
                ) {
                    // No openat2 (old kernel) or a seccomp profile refusing it: the
                    // conservative walk.
                    Err(Errno::NOSYS) | Err(Errno::PERM) => {
                        walk = Walk::NoFollow;
                        continue;
                    }
                    // A rename raced the lookup: try again a few times.
                    Err(Errno::AGAIN) if again < 5 => {
                        again += 1;
                        continue;
                    }
                    // EXDEV: the walk would leave the root; ELOOP: a magic link or a loop.
                    Err(Errno::XDEV) | Err(Errno::LOOP) => return Err(escape()),
                    r => r,
                }
            }
            Walk::NoFollow => {
                let r = rustix::fs::openat(
                    &cur,
                    comps[i].as_str(),
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                );
                if let Ok(fd) = &r {
                    let st = rustix::fs::fstat(fd).map_err(io("stat", &root.join(&prefix)))?;
                    if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                        return Err(escape());
                    }
                }
                r
            }
        };
        match opened {
            Ok(fd) => {
                if created_at == Some(i) {
                    // A directory made here gets the volume root's mode exactly, special bits
                    // included and without the umask (Go's `doSafeMakeDir`: `os.Chmod` with
                    // the root's mode after `Mkdirat`), through the descriptor just checked
                    // to lie beneath the root.
                    let perm = Mode::from_raw_mode(create_mode.unwrap_or(0o750) & 0o7777);
                    rustix::fs::chmod(format!("/proc/self/fd/{}", fd.as_raw_fd()), perm)
                        .map_err(io("setting the mode of", &root.join(&prefix)))?;
                }
                cur = fd;
                i += 1;
                again = 0;
            }
            Err(Errno::NOENT) if create_mode.is_some() && created_at == Some(i) => {
                // Still missing right after mkdirat: the name is a symlink to nowhere.
                return Err(escape());
            }
            Err(Errno::NOENT) if create_mode.is_some() => {
                created_at = Some(i);
                let mode = Mode::from_raw_mode(create_mode.unwrap_or(0o750));
                match rustix::fs::mkdirat(&cur, comps[i].as_str(), mode) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(io("creating directory", &root.join(&prefix))(e)),
                }
                // Loop: open the new directory through the same checks.
            }
            Err(e) => return Err(io("opening", &root.join(&prefix))(e)),
        }
    }
    Ok(cur)
}

/// The path the descriptor refers to, as the kernel reports it.
#[cfg(test)]
pub fn fd_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Resolves `subpath` beneath `volume_root` safely and bind-mounts it onto `target`,
/// creating `target` as a file or directory to match. A `target` that already is a mount
/// point is kept (the container was started before). Returns `target`.
pub fn bind_subpath(
    volume_root: &Path,
    subpath: &str,
    target: &Path,
    create_mode: Option<u32>,
) -> Result<PathBuf, SubpathError> {
    let io = |op: &'static str, path: &Path| {
        let (subpath, path) = (subpath.to_string(), path.to_path_buf());
        move |source: std::io::Error| SubpathError::Io {
            subpath,
            op,
            path,
            error: source,
        }
    };
    if mount::is_mount_point(target).map_err(io("reading mountinfo", target))? {
        return Ok(target.to_path_buf());
    }
    let fd = open_beneath(volume_root, subpath, create_mode)?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io("stat", target)(e.into()))?;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(io("creating directory", parent))?;
    }
    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
    match std::fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() == is_dir && !m.file_type().is_symlink() => {}
        Ok(_) => {
            return Err(io("preparing mount target", target)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists with another type",
            )))
        }
        Err(_) if is_dir => {
            std::fs::create_dir(target).map_err(io("creating directory", target))?
        }
        Err(_) => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(target)
                .map_err(io("creating file", target))?;
        }
    }
    let source = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    mount::bind(&source, target).map_err(io("bind-mounting onto", target))?;
    drop(fd);
    Ok(target.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn volume() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("dir/sub")).unwrap();
        std::fs::write(d.path().join("dir/file"), "inside").unwrap();
        d
    }

    #[test]
    fn plain_and_inner_symlink_paths_resolve_inside() {
        let v = volume();
        symlink("dir", v.path().join("inner")).unwrap();
        for walk in [Walk::Openat2, Walk::NoFollow] {
            let fd = open_with(v.path(), "dir/file", None, walk).unwrap();
            assert_eq!(fd_path(&fd).unwrap(), v.path().join("dir/file"));
        }
        // A relative symlink that stays inside is followed by openat2 ...
        let fd = open_beneath(v.path(), "inner/file", None).unwrap();
        assert_eq!(fd_path(&fd).unwrap(), v.path().join("dir/file"));
        // ... and refused by the conservative walk.
        assert!(matches!(
            open_with(v.path(), "inner/file", None, Walk::NoFollow),
            Err(SubpathError::Escape { .. })
        ));
    }

    #[test]
    fn escapes_are_refused() {
        let v = volume();
        symlink("/", v.path().join("root")).unwrap();
        symlink("..", v.path().join("up")).unwrap();
        symlink("../..", v.path().join("dir/upup")).unwrap();
        symlink("/etc/passwd", v.path().join("passwd")).unwrap();
        for walk in [Walk::Openat2, Walk::NoFollow] {
            for sub in ["root", "root/etc", "up", "up/x", "dir/upup/etc", "passwd"] {
                let r = open_with(v.path(), sub, None, walk);
                assert!(
                    matches!(r, Err(SubpathError::Escape { .. })),
                    "{walk:?} {sub}: {r:?}"
                );
            }
        }
        for sub in ["/etc", "../x", "a/../../b"] {
            assert!(matches!(
                open_beneath(v.path(), sub, None),
                Err(SubpathError::Invalid { .. })
            ));
        }
    }

    #[test]
    fn created_directories_take_the_volume_roots_mode_without_umask() {
        use std::os::unix::fs::PermissionsExt;
        let v = volume();
        // A memory-backed emptyDir's root with an fsGroup: 3777 (tmpfs's sticky 1777 plus
        // set-group-id). Go's Mkdirat + os.Chmod gives a subPath directory the same mode (the
        // node e2e spec expects `dgtrwxrwxrwx`); the umask does not apply.
        open_beneath(v.path(), "made/here", Some(0o3777)).unwrap();
        for dir in ["made", "made/here"] {
            let mode = std::fs::metadata(v.path().join(dir))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o7777, 0o3777, "{dir}: {mode:o}");
        }
        // An existing directory keeps its mode.
        std::fs::create_dir(v.path().join("kept")).unwrap();
        std::fs::set_permissions(
            v.path().join("kept"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        open_beneath(v.path(), "kept", Some(0o777)).unwrap();
        let mode = std::fs::metadata(v.path().join("kept"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o700);
    }

    #[test]
    fn missing_directories_are_created_inside() {
        let v = volume();
        let fd = open_beneath(v.path(), "new/deep/dir", Some(0o750)).unwrap();
        assert_eq!(fd_path(&fd).unwrap(), v.path().join("new/deep/dir"));
        assert!(v.path().join("new/deep/dir").is_dir());
        // Never through a symlink out of the volume.
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), v.path().join("out")).unwrap();
        assert!(open_beneath(v.path(), "out/created", Some(0o750)).is_err());
        assert!(!outside.path().join("created").exists());
    }

    /// A component swapped between a directory and a symlink to `/` while resolving: every
    /// descriptor handed out refers to something inside the volume.
    #[test]
    fn component_swapped_during_resolution() {
        let v = volume();
        std::fs::create_dir_all(v.path().join("swap/etc")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (root, stop) = (v.path().to_path_buf(), stop.clone());
            std::thread::spawn(move || {
                let real = root.join("swap");
                let parked = root.join("parked");
                let link = root.join("link-tmp");
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::fs::rename(&real, &parked);
                    let _ = std::fs::remove_file(&link);
                    let _ = symlink("/", &link);
                    let _ = std::fs::rename(&link, &real);
                    let _ = std::fs::remove_file(&real);
                    let _ = std::fs::rename(&parked, &real);
                }
            })
        };
        let mut inside = 0;
        for walk in [Walk::Openat2, Walk::NoFollow] {
            for _ in 0..3000 {
                if let Ok(fd) = open_with(v.path(), "swap/etc", None, walk) {
                    let p = fd_path(&fd).unwrap();
                    assert!(p.starts_with(v.path()), "{walk:?} escaped to {p:?}");
                    inside += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        // How many opens won the race depends on scheduling (none at all on a loaded CI
        // machine once): the walk itself must still work once the component is a directory.
        eprintln!("{inside} of 6000 opens succeeded during the swaps");
        for walk in [Walk::Openat2, Walk::NoFollow] {
            let fd = open_with(v.path(), "swap/etc", None, walk).unwrap();
            assert!(fd_path(&fd).unwrap().starts_with(v.path()), "{walk:?}");
        }
    }

    #[test]
    fn dangling_symlink_with_create_is_refused_not_looped_on() {
        let v = volume();
        symlink("missing", v.path().join("dangling")).unwrap();
        for walk in [Walk::Openat2, Walk::NoFollow] {
            let r = open_with(v.path(), "dangling/x", Some(0o755), walk);
            assert!(
                matches!(r, Err(SubpathError::Escape { .. })),
                "{walk:?}: {r:?}"
            );
        }
        assert!(!v.path().join("missing").exists());
    }
}
