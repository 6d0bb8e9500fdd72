//! Thin wrappers over mount(2), umount(2) and `/proc/self/mountinfo`. Blocking.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

/// The mount points of this process's mount namespace, from `/proc/self/mountinfo`.
pub fn mount_points() -> std::io::Result<Vec<PathBuf>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_mountinfo(&text))
}

/// The mount point field (5th) of every line, with octal escapes (`\040`) decoded.
pub fn parse_mountinfo(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `path` is a mount point.
pub fn is_mount_point(path: &Path) -> std::io::Result<bool> {
    Ok(mount_points()?.iter().any(|m| m == path))
}

/// Mount points at or below `dir`, deepest first (the order to unmount them in).
pub fn mount_points_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = mount_points()?
        .into_iter()
        .filter(|m| m.starts_with(dir))
        .collect();
    v.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    v.dedup();
    Ok(v)
}

/// Mounts a tmpfs at `target` with these options (e.g. `size=1048576,mode=0777`).
pub fn mount_tmpfs(target: &Path, options: &str) -> std::io::Result<()> {
    let data = CString::new(options).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    rustix::mount::mount(
        "tmpfs",
        target,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV,
        data.as_c_str(),
    )?;
    Ok(())
}

/// Bind-mounts `source` (a path, or `/proc/self/fd/N`) onto `target`.
pub fn bind(source: &Path, target: &Path) -> std::io::Result<()> {
    rustix::mount::mount_bind(source, target)?;
    Ok(())
}

/// Applies `flags` (read-only, nosuid, …) to the bind mount at `target` (a bind mount takes
/// them only by a remount, as `mount -o bind,ro` does in two steps).
pub fn remount_bind(target: &Path, flags: MountFlags) -> std::io::Result<()> {
    rustix::mount::mount_remount(target, MountFlags::BIND | flags, "")?;
    Ok(())
}

/// Unmounts `target` (without following a symlink at `target`).
pub fn unmount(target: &Path) -> std::io::Result<()> {
    rustix::mount::unmount(target, UnmountFlags::NOFOLLOW)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_parsed() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    40 22 0:35 / /var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with\\040space rw - tmpfs tmpfs rw\n";
        assert_eq!(
            parse_mountinfo(text),
            vec![
                PathBuf::from("/"),
                PathBuf::from("/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/with space")
            ]
        );
    }
}
