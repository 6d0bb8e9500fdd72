//! Where certificates are kept (client-go's `FileStore`): in the cert dir, each issued pair
//! as `<prefix>-<YYYY-MM-DD-HH-MM-SS>.pem` (certificates then key, mode 0600), and the link
//! `<prefix>-current.pem` pointing at the one in use, switched atomically (a new link
//! `<prefix>-updated.pem` renamed over it). `current` reads the link, else an explicit
//! certificate/key file pair (e.g. `--tls-cert-file`), else `<prefix>.crt`/`<prefix>.key`.
//! Blocking file IO: call from `spawn_blocking`.

use std::path::{Path, PathBuf};

use super::pair::CertPair;
use super::CertError;

/// A certificate store. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStore {
    prefix: String,
    dir: PathBuf,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
}

fn io_err(path: &Path, e: std::io::Error) -> CertError {
    CertError::Store {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl FileStore {
    /// A store of `<prefix>-*.pem` files in `dir`.
    pub fn new(prefix: &str, dir: impl Into<PathBuf>) -> FileStore {
        FileStore {
            prefix: prefix.to_string(),
            dir: dir.into(),
            cert_file: None,
            key_file: None,
        }
    }

    /// With a certificate and key file used when no current link exists.
    pub fn with_files(mut self, cert: Option<PathBuf>, key: Option<PathBuf>) -> FileStore {
        self.cert_file = cert;
        self.key_file = key;
        self
    }

    /// `<dir>/<prefix>-current.pem`.
    pub fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}-current.pem", self.prefix))
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pair in use, if any (see the module docs); a file that cannot be read or parsed
    /// is an error.
    pub fn current(&self) -> Result<Option<CertPair>, CertError> {
        let current = self.current_path();
        if current.exists() {
            let text = std::fs::read_to_string(&current).map_err(|e| io_err(&current, e))?;
            return CertPair::from_combined_pem(&text, &current.display().to_string()).map(Some);
        }
        let fallback = (self.cert_file.clone(), self.key_file.clone());
        let default = (
            Some(self.dir.join(format!("{}.crt", self.prefix))),
            Some(self.dir.join(format!("{}.key", self.prefix))),
        );
        for (cert, key) in [fallback, default] {
            let (Some(cert), Some(key)) = (cert, key) else {
                continue;
            };
            if cert.exists() && key.exists() {
                let c = std::fs::read_to_string(&cert).map_err(|e| io_err(&cert, e))?;
                let k = std::fs::read_to_string(&key).map_err(|e| io_err(&key, e))?;
                return CertPair::from_pem(&c, &k, &cert.display().to_string()).map(Some);
            }
        }
        Ok(None)
    }

    /// Writes a new pair (`stamp` names the file, Go's `2006-01-02-15-04-05`) and points
    /// the current link at it; returns the pair as read back.
    pub fn update(&self, pair: &CertPair, stamp: &str) -> Result<CertPair, CertError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::create_dir_all(&self.dir).map_err(|e| io_err(&self.dir, e))?;
        let file = self.dir.join(format!("{}-{stamp}.pem", self.prefix));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&file)
            .map_err(|e| io_err(&file, e))?;
        f.write_all(pair.combined_pem().as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| io_err(&file, e))?;
        let text = std::fs::read_to_string(&file).map_err(|e| io_err(&file, e))?;
        let written = CertPair::from_combined_pem(&text, &file.display().to_string())?;
        let current = self.current_path();
        if let Ok(meta) = std::fs::symlink_metadata(&current) {
            if !meta.file_type().is_symlink() {
                return Err(CertError::Store {
                    path: current.display().to_string(),
                    message: "expected a symlink but it is a file".into(),
                });
            }
        }
        let updated = self.dir.join(format!("{}-updated.pem", self.prefix));
        match std::fs::remove_file(&updated) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&updated, e)),
        }
        std::os::unix::fs::symlink(&file, &updated).map_err(|e| io_err(&updated, e))?;
        std::fs::rename(&updated, &current).map_err(|e| io_err(&current, e))?;
        Ok(written)
    }
}

/// Go's file name stamp for now (local time, `2006-01-02-15-04-05`).
pub fn stamp_now() -> String {
    jiff::Zoned::now().strftime("%Y-%m-%d-%H-%M-%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::super::pair::tests::issue;
    use super::*;

    #[test]
    fn update_links_current_and_current_falls_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new("kubelet-client", dir.path());
        assert!(store.current().unwrap().is_none());
        let (_, a) = issue("a", &[], &[], 1_000_000, 600);
        store.update(&a, "2026-01-01-00-00-00").unwrap();
        let cur = store.current().unwrap().unwrap();
        assert_eq!(cur.common_name, "a");
        let link = std::fs::read_link(store.current_path()).unwrap();
        assert_eq!(
            link,
            dir.path().join("kubelet-client-2026-01-01-00-00-00.pem")
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&link).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (_, b) = issue("b", &[], &[], 1_000_000, 600);
        store.update(&b, "2026-01-01-00-05-00").unwrap();
        assert_eq!(store.current().unwrap().unwrap().common_name, "b");
        // The older file stays.
        assert!(dir
            .path()
            .join("kubelet-client-2026-01-01-00-00-00.pem")
            .exists());

        // Fallbacks: explicit files, then <prefix>.crt/.key.
        let other = tempfile::tempdir().unwrap();
        let (_, c) = issue("c", &[], &[], 1_000_000, 600);
        std::fs::write(other.path().join("kubelet-server.crt"), &c.cert_pem).unwrap();
        std::fs::write(other.path().join("kubelet-server.key"), &c.key_pem).unwrap();
        let s = FileStore::new("kubelet-server", other.path());
        assert_eq!(s.current().unwrap().unwrap().common_name, "c");
        let (_, d) = issue("d", &[], &[], 1_000_000, 600);
        let (cf, kf) = (other.path().join("d.crt"), other.path().join("d.key"));
        std::fs::write(&cf, &d.cert_pem).unwrap();
        std::fs::write(&kf, &d.key_pem).unwrap();
        let s = s.with_files(Some(cf), Some(kf));
        assert_eq!(s.current().unwrap().unwrap().common_name, "d");
        // A plain file where the link should be is refused.
        std::fs::write(s.current_path(), "x").unwrap();
        assert!(s.update(&d, "x").is_err());
        assert!(s.current().is_err());
    }
}
