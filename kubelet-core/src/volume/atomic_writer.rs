//! The atomic writer for API-data volumes (configMap, secret, downwardAPI, projected), as Go's
//! `pkg/volume/util/atomic_writer.go` lays it out:
//!
//! ```text
//! <dir>/..2026_11_30_05_40_01.123456789/   the payload of one version (a timestamped dir)
//! <dir>/..data -> ..2026_11_30_05_40_01.123456789
//! <dir>/<key>  -> ..data/<key>              one user-visible link per top-level path
//! ```
//!
//! A new version is written into a fresh timestamped directory, then `..data` is swapped to it
//! with a `rename(2)` of a temporary link, so a reader that goes through `..data` sees either
//! the whole old set or the whole new set, never a half-written one. Afterwards the old
//! directory and the user-visible links of keys no longer in the payload are removed. Writing
//! an unchanged payload changes nothing.
//!
//! These functions block; call them from `spawn_blocking`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Name of the link to the current payload directory.
pub const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";
/// Longest payload path (as Go's validation).
const MAX_PATH_LEN: usize = 4096;
/// Longest path component.
const MAX_NAME_LEN: usize = 255;

/// One file of a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// File content.
    pub data: Vec<u8>,
    /// Permission bits (e.g. 0o644).
    pub mode: u32,
}

/// Relative path → file. Paths may contain `/` (sub directories).
pub type Payload = BTreeMap<String, FileProjection>;

/// Why writing a payload failed.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// A payload path is absolute, contains `..`, starts with `..` or is too long.
    #[error("invalid payload path {path:?}: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A filesystem operation failed.
    #[error("{op} {path}: {error}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The path it worked on.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AtomicWriteError {
    let path = path.to_path_buf();
    move |error| AtomicWriteError::Io { op, path, error }
}

/// Checks a payload path as Go's `validatePath` does.
pub fn validate_path(path: &str) -> Result<(), AtomicWriteError> {
    let bad = |reason| {
        Err(AtomicWriteError::InvalidPath {
            path: path.to_string(),
            reason,
        })
    };
    if path.is_empty() {
        return bad("must not be empty");
    }
    if path.len() > MAX_PATH_LEN {
        return bad("is longer than 4096 characters");
    }
    if Path::new(path).is_absolute() {
        return bad("must be relative");
    }
    if path.starts_with("..") {
        return bad("must not start with '..'");
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(n) if n.len() > MAX_NAME_LEN => {
                return bad("has a component longer than 255 characters")
            }
            Component::Normal(_) | Component::CurDir => {}
            _ => return bad("must not contain '..'"),
        }
    }
    Ok(())
}

/// The first component of a payload path ("a/b/c" → "a").
fn top_level(path: &str) -> &str {
    path.split('/')
        .find(|s| !s.is_empty() && *s != ".")
        .unwrap_or(path)
}

/// `..YYYY_MM_DD_HH_MM_SS.nnnnnnnnn` in UTC, as Go names its timestamped directories.
fn timestamp_name(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "..{year:04}_{month:02}_{day:02}_{:02}_{:02}_{:02}.{:09}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        d.subsec_nanos()
    )
}

/// Whether the files under `dir` are exactly the payload (same paths, contents, modes and,
/// when given, group).
fn matches_payload(dir: &Path, payload: &Payload, gid: Option<u32>) -> bool {
    let mut on_disk = BTreeSet::new();
    if !collect_files(dir, dir, &mut on_disk) {
        return false;
    }
    if on_disk.len() != payload.len() {
        return false;
    }
    payload.iter().all(|(path, f)| {
        let p = dir.join(path);
        on_disk.contains(path)
            && fs::symlink_metadata(&p).is_ok_and(|m| {
                m.is_file()
                    && m.permissions().mode() & 0o7777 == f.mode
                    && gid.is_none_or(|g| m.gid() == g)
            })
            && fs::read(&p).is_ok_and(|d| d == f.data)
    })
}

fn collect_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) -> bool {
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                if !collect_files(root, &p, out) {
                    return false;
                }
            }
            Ok(_) => {
                if let Ok(rel) = p.strip_prefix(root) {
                    out.insert(rel.to_string_lossy().into_owned());
                }
            }
            Err(_) => return false,
        }
    }
    true
}

fn write_file(path: &Path, f: &FileProjection, gid: Option<u32>) -> Result<(), AtomicWriteError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_err("creating directory", parent))?;
        if gid.is_some() {
            std::os::unix::fs::chown(parent, None, gid)
                .map_err(io_err("changing the group of", parent))?;
        }
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("creating file", path))?;
    file.write_all(&f.data)
        .map_err(io_err("writing file", path))?;
    // Explicitly, so the umask does not narrow the mode.
    if gid.is_some() {
        std::os::unix::fs::fchown(&file, None, gid)
            .map_err(io_err("changing the group of", path))?;
    }
    file.set_permissions(fs::Permissions::from_mode(f.mode))
        .map_err(io_err("setting the mode of", path))?;
    file.sync_all().map_err(io_err("syncing file", path))?;
    Ok(())
}

/// Writes `payload` into `target` (which must exist) atomically; see the module docs.
/// Returns whether anything changed.
#[cfg(test)]
pub fn write_payload(target: &Path, payload: &Payload) -> Result<bool, AtomicWriteError> {
    write_payload_with_group(target, payload, None)
}

/// [`write_payload`], with every file and directory of the payload owned by group `gid`
/// (the pod's `fsGroup`) when given.
pub fn write_payload_with_group(
    target: &Path,
    payload: &Payload,
    gid: Option<u32>,
) -> Result<bool, AtomicWriteError> {
    for path in payload.keys() {
        validate_path(path)?;
    }
    let data_link = target.join(DATA_DIR);
    let old_ts = fs::read_link(&data_link)
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
        .filter(|t| t.starts_with("..") && !t.contains('/'));
    let wanted: BTreeSet<&str> = payload.keys().map(|p| top_level(p)).collect();
    let unchanged = old_ts
        .as_ref()
        .is_some_and(|ts| matches_payload(&target.join(ts), payload, gid));
    if !unchanged {
        let ts = timestamp_name(crate::clock::wall_now());
        let ts_dir = target.join(&ts);
        fs::create_dir(&ts_dir).map_err(io_err("creating directory", &ts_dir))?;
        fs::set_permissions(&ts_dir, fs::Permissions::from_mode(0o755))
            .map_err(io_err("setting the mode of", &ts_dir))?;
        if gid.is_some() {
            std::os::unix::fs::chown(&ts_dir, None, gid)
                .map_err(io_err("changing the group of", &ts_dir))?;
        }
        for (path, f) in payload {
            if let Err(e) = write_file(&ts_dir.join(path), f, gid) {
                let _ = fs::remove_dir_all(&ts_dir);
                return Err(e);
            }
        }
        let tmp = target.join(DATA_DIR_TMP);
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("removing", &tmp)(e)),
        }
        std::os::unix::fs::symlink(&ts, &tmp).map_err(io_err("creating symlink", &tmp))?;
        fs::rename(&tmp, &data_link).map_err(io_err("renaming to", &data_link))?;
        if let Some(old) = old_ts.as_ref().filter(|o| **o != ts) {
            let old_dir = target.join(old);
            if let Err(e) = fs::remove_dir_all(&old_dir) {
                tracing::warn!(path = %old_dir.display(), error = %e, "removing the old payload directory failed");
            }
        }
    }
    // User-visible links: one per top-level path, stale ones removed.
    let mut changed = !unchanged;
    for top in &wanted {
        let link = target.join(top);
        if fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_DIR).join(top), &link)
                .map_err(io_err("creating symlink", &link))?;
            changed = true;
        }
    }
    let entries = fs::read_dir(target).map_err(io_err("listing", target))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") || wanted.contains(name.as_str()) {
            continue;
        }
        if e.file_type().is_ok_and(|t| t.is_symlink()) {
            let p = e.path();
            fs::remove_file(&p).map_err(io_err("removing", &p))?;
            changed = true;
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn payload(entries: &[(&str, &str, u32)]) -> Payload {
        entries
            .iter()
            .map(|(p, d, m)| {
                (
                    p.to_string(),
                    FileProjection {
                        data: d.as_bytes().to_vec(),
                        mode: *m,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn writes_links_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(&[
            ("a", "1", 0o644),
            ("secret", "s", 0o400),
            ("sub/c", "3", 0o600),
        ]);
        assert!(write_payload(dir.path(), &p).unwrap());
        assert_eq!(fs::read_to_string(dir.path().join("a")).unwrap(), "1");
        assert_eq!(fs::read_to_string(dir.path().join("sub/c")).unwrap(), "3");
        assert_eq!(
            fs::read_link(dir.path().join("a")).unwrap(),
            Path::new("..data/a")
        );
        assert_eq!(
            fs::read_link(dir.path().join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        let mode = |p: &str| {
            fs::metadata(dir.path().join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        assert_eq!(mode("a"), 0o644);
        assert_eq!(mode("secret"), 0o400);
        assert_eq!(mode("sub/c"), 0o600);
        let ts = fs::read_link(dir.path().join(DATA_DIR)).unwrap();
        assert!(ts.to_string_lossy().starts_with("..20"), "{ts:?}");
    }

    #[test]
    fn unchanged_payload_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(&[("a", "1", 0o644)]);
        write_payload(dir.path(), &p).unwrap();
        let ts = fs::read_link(dir.path().join(DATA_DIR)).unwrap();
        assert!(!write_payload(dir.path(), &p).unwrap());
        assert_eq!(fs::read_link(dir.path().join(DATA_DIR)).unwrap(), ts);
        // A mode change alone is a change.
        let p2 = payload(&[("a", "1", 0o600)]);
        assert!(write_payload(dir.path(), &p2).unwrap());
        assert_ne!(fs::read_link(dir.path().join(DATA_DIR)).unwrap(), ts);
    }

    #[test]
    fn stale_keys_and_old_versions_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        write_payload(
            dir.path(),
            &payload(&[("a", "1", 0o644), ("b", "2", 0o644)]),
        )
        .unwrap();
        let old = fs::read_link(dir.path().join(DATA_DIR)).unwrap();
        write_payload(
            dir.path(),
            &payload(&[("b", "3", 0o644), ("c", "4", 0o644)]),
        )
        .unwrap();
        assert!(
            fs::symlink_metadata(dir.path().join("a")).is_err(),
            "a is stale"
        );
        assert_eq!(fs::read_to_string(dir.path().join("b")).unwrap(), "3");
        assert_eq!(fs::read_to_string(dir.path().join("c")).unwrap(), "4");
        assert!(!dir.path().join(old).exists(), "old version removed");
        let versions = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("..") && n != DATA_DIR
            })
            .count();
        assert_eq!(versions, 1);
        // An empty payload leaves no user-visible files.
        write_payload(dir.path(), &Payload::new()).unwrap();
        assert!(fs::symlink_metadata(dir.path().join("b")).is_err());
    }

    #[test]
    fn group_ownership() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(&[("a", "1", 0o440), ("d/b", "2", 0o440)]);
        assert!(write_payload_with_group(dir.path(), &p, Some(1234)).unwrap());
        for f in ["a", "d/b", "d"] {
            assert_eq!(fs::metadata(dir.path().join(f)).unwrap().gid(), 1234, "{f}");
        }
        assert!(!write_payload_with_group(dir.path(), &p, Some(1234)).unwrap());
        // Another group is a change.
        assert!(write_payload_with_group(dir.path(), &p, Some(4321)).unwrap());
        assert_eq!(fs::metadata(dir.path().join("a")).unwrap().gid(), 4321);
    }

    #[test]
    fn invalid_paths_are_refused() {
        for bad in ["", "/abs", "../up", "..hidden", "a/../../b", "a/.."] {
            let dir = tempfile::tempdir().unwrap();
            let r = write_payload(dir.path(), &payload(&[(bad, "x", 0o644)]));
            assert!(
                matches!(r, Err(AtomicWriteError::InvalidPath { .. })),
                "{bad:?}: {r:?}"
            );
        }
        assert!(validate_path("a/b.c/..d").is_ok());
    }

    #[test]
    fn timestamp_names_are_civil_utc() {
        let t = UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5);
        assert_eq!(timestamp_name(t), "..2023_11_14_22_13_20.000000005");
    }

    /// A reader that resolves `..data` once and reads every file of that version never sees
    /// a mix of versions or a partial file, while a writer keeps replacing the payload.
    #[test]
    fn concurrent_reader_sees_whole_versions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let version = |n: usize| {
            let body = format!("v{n}:").repeat(2000);
            payload(&[
                ("a", &body, 0o644),
                ("b", &body, 0o644),
                ("sub/c", &body, 0o644),
            ])
        };
        write_payload(&root, &version(0)).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (root, done) = (root.clone(), done.clone());
            std::thread::spawn(move || {
                let mut consistent = 0u32;
                while !done.load(Ordering::Relaxed) {
                    let Ok(ts) = fs::read_link(root.join(DATA_DIR)) else {
                        continue;
                    };
                    let dir = root.join(ts);
                    let files: Vec<_> = ["a", "b", "sub/c"]
                        .iter()
                        .map(|f| fs::read_to_string(dir.join(f)))
                        .collect();
                    // The old version may be removed under a slow reader: that is a miss,
                    // never a mix.
                    if files.iter().any(|f| f.is_err()) {
                        continue;
                    }
                    let files: Vec<String> = files.into_iter().flatten().collect();
                    let first = &files[0];
                    let tag = first.split(':').next().unwrap().to_string();
                    assert_eq!(*first, format!("{tag}:").repeat(2000), "partial file");
                    assert!(files.iter().all(|f| f == first), "mixed versions");
                    // Reading through the user-visible link gives some whole version.
                    if let Ok(a) = fs::read_to_string(root.join("a")) {
                        let t = a.split(':').next().unwrap().to_string();
                        assert_eq!(a, format!("{t}:").repeat(2000), "partial file via link");
                    }
                    consistent += 1;
                }
                consistent
            })
        };
        for n in 1..200 {
            write_payload(&root, &version(n)).unwrap();
        }
        done.store(true, Ordering::Relaxed);
        let consistent = reader.join().unwrap();
        assert!(consistent > 0, "the reader read at least one whole version");
        assert_eq!(
            fs::read_to_string(root.join("sub/c")).unwrap(),
            "v199:".repeat(2000)
        );
    }
}
