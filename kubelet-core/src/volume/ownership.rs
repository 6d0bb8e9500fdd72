//! A pod's `fsGroup` applied to a volume it mounts (Go's `volume.SetVolumeOwnership`): every
//! file and directory below the volume's root (each directory after its contents, the root
//! last) gets the group, the group's read-write bits
//! (read-only for a read-only volume), and directories also search and set-group-id, so files
//! made later inherit the group. Symbolic links get the group but keep their mode (a chmod
//! would change their target). With `fsGroupChangePolicy: OnRootMismatch` the walk is
//! skipped when the root already has the group and the bits. Errors on single files are
//! logged and the walk goes on, as in Go. Blocking.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Read-write for owner and group (Go's `rwMask`).
const RW_MASK: u32 = 0o660;
/// Read-only for owner and group (Go's `roMask`).
const RO_MASK: u32 = 0o440;
/// Search for owner and group (Go's `execMask`).
const EXEC_MASK: u32 = 0o110;
/// Set-group-id.
const SETGID: u32 = 0o2000;

/// `securityContext.fsGroupChangePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChangePolicy {
    /// `Always` (the default): walk the whole volume at every mount.
    #[default]
    Always,
    /// `OnRootMismatch`: only when the root lacks the group or the bits.
    OnRootMismatch,
}

impl ChangePolicy {
    /// The policy a pod's `fsGroupChangePolicy` names (anything but `OnRootMismatch` is
    /// `Always`, as Go treats it).
    pub fn from_field(value: Option<&str>) -> Self {
        match value {
            Some("OnRootMismatch") => ChangePolicy::OnRootMismatch,
            _ => ChangePolicy::Always,
        }
    }
}

/// Go's `requiresPermissionChange`: whether the root lacks the group, the bits or
/// set-group-id (or cannot be read).
pub fn root_needs_change(root: &Path, gid: u32, read_only: bool) -> bool {
    let Ok(meta) = std::fs::metadata(root) else {
        return true;
    };
    if meta.gid() != gid || !meta.is_dir() {
        return true;
    }
    let wanted = if read_only { RO_MASK } else { RW_MASK } | EXEC_MASK;
    let mode = meta.permissions().mode();
    mode & wanted != wanted || mode & SETGID == 0
}

/// Applies `gid` to the volume at `root` (see the module docs). Returns how many entries
/// were changed; an unreadable directory ends the walk with its error.
pub fn set_volume_ownership(
    root: &Path,
    gid: u32,
    read_only: bool,
    policy: ChangePolicy,
) -> std::io::Result<usize> {
    if policy == ChangePolicy::OnRootMismatch && !root_needs_change(root, gid, read_only) {
        return Ok(0);
    }
    let mask = if read_only { RO_MASK } else { RW_MASK };
    let mut changed = 0;
    // Post-order, as Go's walkDeep: a directory after everything below it, the root last, so
    // an interrupted walk leaves the root unchanged and OnRootMismatch walks again.
    let mut pending: Vec<(PathBuf, Option<std::fs::Metadata>)> = vec![(root.to_path_buf(), None)];
    while let Some((path, visited)) = pending.pop() {
        if let Some(meta) = visited {
            change_one(&path, &meta, gid, mask);
            changed += 1;
            continue;
        }
        let meta = std::fs::symlink_metadata(&path)?;
        let is_dir = meta.is_dir();
        pending.push((path.clone(), Some(meta)));
        if is_dir {
            for entry in std::fs::read_dir(&path)? {
                pending.push((entry?.path(), None));
            }
        }
    }
    Ok(changed)
}

fn change_one(path: &Path, meta: &std::fs::Metadata, gid: u32, mask: u32) {
    if let Err(e) = std::os::unix::fs::lchown(path, None, Some(gid)) {
        tracing::error!(path = %path.display(), error = %e, "changing the group of a volume file failed");
    }
    if meta.file_type().is_symlink() {
        return;
    }
    let mut bits = mask;
    if meta.is_dir() {
        bits |= SETGID | EXEC_MASK;
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode | bits != mode {
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | bits))
        {
            tracing::error!(path = %path.display(), error = %e, "changing the mode of a volume file failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    fn gid(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().gid()
    }

    /// A tree: root/ (0755), root/a (0600), root/sub/ (0700), root/sub/b (0644), root/link → a.
    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("a"), "a").unwrap();
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::set_permissions(root.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(root.join("sub/b"), "b").unwrap();
        std::fs::set_permissions(root.join("sub/b"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::os::unix::fs::symlink("a", root.join("link")).unwrap();
        t
    }

    #[test]
    fn the_whole_tree_gets_the_group_and_bits() {
        let t = tree();
        let root = t.path();
        let n = set_volume_ownership(root, 4321, false, ChangePolicy::Always).unwrap();
        assert_eq!(n, 5);
        for p in ["", "a", "sub", "sub/b", "link"] {
            assert_eq!(gid(&root.join(p)), 4321, "{p}");
        }
        assert_eq!(mode(root), 0o2775);
        assert_eq!(mode(&root.join("a")), 0o660);
        assert_eq!(mode(&root.join("sub")), 0o2770);
        assert_eq!(mode(&root.join("sub/b")), 0o664);
        // The link's target kept what the walk gave it (not the link's 0777).
        assert_eq!(mode(&root.join("a")), 0o660);
    }

    #[test]
    fn read_only_volumes_get_read_bits_only() {
        let t = tree();
        let root = t.path();
        set_volume_ownership(root, 4321, true, ChangePolicy::Always).unwrap();
        assert_eq!(mode(&root.join("a")), 0o640);
        assert_eq!(mode(&root.join("sub")), 0o2750);
    }

    #[test]
    fn on_root_mismatch_skips_a_volume_whose_root_is_right() {
        let t = tree();
        let root = t.path();
        assert!(root_needs_change(root, 4321, false));
        set_volume_ownership(root, 4321, false, ChangePolicy::OnRootMismatch).unwrap();
        assert!(!root_needs_change(root, 4321, false));
        // A file changed since is left alone while the root matches …
        std::fs::set_permissions(root.join("a"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let n = set_volume_ownership(root, 4321, false, ChangePolicy::OnRootMismatch).unwrap();
        assert_eq!((n, mode(&root.join("a"))), (0, 0o600));
        // … and fixed by `Always`, or once the root lacks set-group-id.
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(root_needs_change(root, 4321, false));
        set_volume_ownership(root, 4321, false, ChangePolicy::OnRootMismatch).unwrap();
        assert_eq!(mode(&root.join("a")), 0o660);
        assert!(root_needs_change(root, 99, false));
    }

    #[test]
    fn policy_names() {
        assert_eq!(
            ChangePolicy::from_field(Some("OnRootMismatch")),
            ChangePolicy::OnRootMismatch
        );
        assert_eq!(
            ChangePolicy::from_field(Some("Always")),
            ChangePolicy::Always
        );
        assert_eq!(ChangePolicy::from_field(None), ChangePolicy::Always);
    }
}
