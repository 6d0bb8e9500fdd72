//! `hostPath` volumes: the host path is handed to the runtime as is, after the check its
//! `type` asks for (Go's `checkType`). Blocking.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};

/// Why a hostPath type check failed.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    /// The path exists with another type, or is missing for a type that needs it.
    #[error("hostPath type check failed: {path} is not a {expected}")]
    TypeMismatch {
        /// The host path.
        path: String,
        /// What the `type` asked for ("directory", "file", "socket file", ...).
        expected: &'static str,
    },
    /// The `type` is not one Kubernetes defines.
    #[error("hostPath {path}: unknown type {type_:?}")]
    UnknownType {
        /// The host path.
        path: String,
        /// The type as written.
        type_: String,
    },
    /// Creating the path (`DirectoryOrCreate`, `FileOrCreate`) failed.
    #[error("hostPath {path}: creating it failed: {error}")]
    Create {
        /// The host path.
        path: String,
        /// The error.
        error: std::io::Error,
    },
}

/// Checks (and for the `...OrCreate` types creates) `path` as `type_` asks.
pub fn check_type(path: &str, type_: Option<&str>) -> Result<(), HostPathError> {
    let t = type_.unwrap_or("");
    let mismatch = |expected| HostPathError::TypeMismatch {
        path: path.to_string(),
        expected,
    };
    let meta = fs::metadata(path);
    let ft = meta.as_ref().ok().map(|m| m.file_type());
    match t {
        "" => Ok(()),
        "DirectoryOrCreate" => match ft {
            None => fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
                .map_err(|source| HostPathError::Create {
                    path: path.to_string(),
                    error: source,
                }),
            Some(f) if f.is_dir() => Ok(()),
            Some(_) => Err(mismatch("directory")),
        },
        "FileOrCreate" => match ft {
            // The parent directory is not created, as in Kubernetes.
            None => fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(path)
                .map(|_| ())
                .map_err(|source| HostPathError::Create {
                    path: path.to_string(),
                    error: source,
                }),
            Some(f) if f.is_file() => Ok(()),
            Some(_) => Err(mismatch("file")),
        },
        "Directory" => ft
            .filter(|f| f.is_dir())
            .map(|_| ())
            .ok_or(mismatch("directory")),
        "File" => ft
            .filter(|f| f.is_file())
            .map(|_| ())
            .ok_or(mismatch("file")),
        "Socket" => ft
            .filter(|f| f.is_socket())
            .map(|_| ())
            .ok_or(mismatch("socket file")),
        "CharDevice" => ft
            .filter(|f| f.is_char_device())
            .map(|_| ())
            .ok_or(mismatch("character device")),
        "BlockDevice" => ft
            .filter(|f| f.is_block_device())
            .map(|_| ())
            .ok_or(mismatch("block device")),
        other => Err(HostPathError::UnknownType {
            path: path.to_string(),
            type_: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::path::Path;

    #[test]
    fn type_checks_table() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("dir");
        let file = d.path().join("file");
        let sock = d.path().join("sock");
        fs::create_dir(&dir).unwrap();
        fs::write(&file, "x").unwrap();
        let _listener = UnixListener::bind(&sock).unwrap();
        let missing = d.path().join("missing");
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let ok: &[(String, &str)] = &[
            (s(&dir), "Directory"),
            (s(&dir), "DirectoryOrCreate"),
            (s(&dir), ""),
            (s(&missing), ""),
            (s(&file), "File"),
            (s(&file), "FileOrCreate"),
            (s(&sock), "Socket"),
            ("/dev/null".into(), "CharDevice"),
        ];
        for (p, t) in ok {
            check_type(p, Some(t)).unwrap_or_else(|e| panic!("{p} {t}: {e}"));
        }
        let bad: &[(String, &str, &str)] = &[
            (s(&file), "Directory", "is not a directory"),
            (s(&missing), "Directory", "is not a directory"),
            (s(&dir), "File", "is not a file"),
            (s(&file), "DirectoryOrCreate", "is not a directory"),
            (s(&dir), "FileOrCreate", "is not a file"),
            (s(&file), "Socket", "is not a socket file"),
            (s(&file), "CharDevice", "is not a character device"),
            ("/dev/null".into(), "BlockDevice", "is not a block device"),
            (s(&dir), "Bogus", "unknown type"),
        ];
        for (p, t, want) in bad {
            let e = check_type(p, Some(t)).expect_err(&format!("{p} {t}"));
            assert!(e.to_string().contains(want), "{p} {t}: {e}");
        }
        // The ...OrCreate types create what is missing; FileOrCreate not its parent.
        check_type(&s(&d.path().join("new/dir")), Some("DirectoryOrCreate")).unwrap();
        assert!(d.path().join("new/dir").is_dir());
        check_type(&s(&d.path().join("newfile")), Some("FileOrCreate")).unwrap();
        assert!(d.path().join("newfile").is_file());
        assert!(check_type(&s(&d.path().join("nope/file")), Some("FileOrCreate")).is_err());
    }
}
