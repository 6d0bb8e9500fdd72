//! `/logs/`: files under the node log directory (`/var/log`), as Go's
//! `http.FileServer(http.Dir("/var/log"))`, but confined: `..` components are refused and a
//! path whose canonical form (symlinks resolved) leaves the directory is answered 404, so a
//! symlink cannot expose files elsewhere.

use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use hyper::{Response, StatusCode};
use tokio::io::AsyncReadExt;

use crate::logs::percent_decode;
use crate::reply::{channel_body, status_error, with_type, Body};

/// Chunk size of streamed files (a file is never read whole: at most a few chunks are in
/// flight, the client's pace sets the rest).
const CHUNK: usize = 64 * 1024;
/// Most entries of a directory listing (a directory with millions of files costs a bounded
/// answer; the listing says it was cut).
const MAX_LISTING: usize = 10_000;

/// What a `/logs/` path resolves to.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    /// A file inside the root (canonical path).
    File(PathBuf),
    /// A directory inside the root (canonical path).
    Dir(PathBuf),
    /// Outside the root, missing, or malformed.
    NotFound,
}

/// Resolves `rel` (the part after `/logs/`, percent-encoded) under `root`.
pub async fn resolve(root: &Path, rel: &str) -> Resolved {
    let decoded = percent_decode(rel);
    if decoded.contains('\0') {
        return Resolved::NotFound;
    }
    let rel = Path::new(decoded.trim_start_matches('/'));
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Resolved::NotFound;
    }
    let Ok(root) = tokio::fs::canonicalize(root).await else {
        return Resolved::NotFound;
    };
    let Ok(path) = tokio::fs::canonicalize(root.join(rel)).await else {
        return Resolved::NotFound;
    };
    if !path.starts_with(&root) {
        return Resolved::NotFound;
    }
    match tokio::fs::metadata(&path).await {
        Ok(m) if m.is_dir() => Resolved::Dir(path),
        Ok(m) if m.is_file() => Resolved::File(path),
        _ => Resolved::NotFound,
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Serves `/logs/<rel>` from `root`: a file's bytes (streamed), or for a directory, when
/// `list_directories`, Go's `<pre>` listing.
pub async fn serve(root: &Path, rel: &str, list_directories: bool) -> Response<Body> {
    match resolve(root, rel).await {
        Resolved::NotFound => status_error(StatusCode::NOT_FOUND, "404 page not found"),
        Resolved::Dir(_) if !list_directories => {
            status_error(StatusCode::FORBIDDEN, "directory listing is disabled")
        }
        Resolved::Dir(dir) => {
            let mut names = Vec::new();
            let mut cut = false;
            if let Ok(mut rd) = tokio::fs::read_dir(&dir).await {
                while let Ok(Some(e)) = rd.next_entry().await {
                    if names.len() == MAX_LISTING {
                        cut = true;
                        break;
                    }
                    let mut n = e.file_name().to_string_lossy().into_owned();
                    if e.file_type().await.is_ok_and(|t| t.is_dir()) {
                        n.push('/');
                    }
                    names.push(n);
                }
            }
            names.sort();
            let mut html = String::from("<pre>\n");
            for n in names {
                let e = html_escape(&n);
                html.push_str(&format!("<a href=\"{e}\">{e}</a>\n"));
            }
            if cut {
                html.push_str(&format!("(listing cut at {MAX_LISTING} entries)\n"));
            }
            html.push_str("</pre>\n");
            with_type(
                StatusCode::OK,
                "text/html; charset=utf-8",
                crate::reply::full(html),
            )
        }
        Resolved::File(path) => match tokio::fs::File::open(&path).await {
            Err(e) => status_error(StatusCode::NOT_FOUND, &format!("{}: {e}", path.display())),
            Ok(mut f) => {
                let (tx, rx) = tokio::sync::mpsc::channel(4);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; CHUNK];
                    loop {
                        match f.read(&mut buf).await {
                            Ok(0) => return,
                            Ok(n) => {
                                if tx
                                    .send(Ok(Bytes::copy_from_slice(&buf[..n])))
                                    .await
                                    .is_err()
                                {
                                    return;
                                }
                            }
                            Err(e) => {
                                let _ = tx.send(Err(e)).await;
                                return;
                            }
                        }
                    }
                });
                let ct = if path.extension().is_some_and(|e| e == "gz") {
                    "application/gzip"
                } else {
                    "text/plain; charset=utf-8"
                };
                with_type(StatusCode::OK, ct, channel_body(rx))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn traversal_and_symlinks_table() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let root_dir = tempfile::tempdir().unwrap();
        let root = root_dir.path();
        std::fs::write(root.join("syslog"), "log").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.log"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("escape")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("escape-dir")).unwrap();
        std::os::unix::fs::symlink(root.join("syslog"), root.join("inside")).unwrap();
        let canon = |p: &str| std::fs::canonicalize(root.join(p)).unwrap();
        let cases = [
            ("syslog", Resolved::File(canon("syslog"))),
            ("", Resolved::Dir(canon(""))),
            ("sub/", Resolved::Dir(canon("sub"))),
            ("sub/a.log", Resolved::File(canon("sub/a.log"))),
            ("sub%2Fa.log", Resolved::File(canon("sub/a.log"))),
            ("inside", Resolved::File(canon("syslog"))),
            ("../secret", Resolved::NotFound),
            ("sub/../../secret", Resolved::NotFound),
            ("%2e%2e/secret", Resolved::NotFound),
            ("..%2Fsecret", Resolved::NotFound),
            ("escape", Resolved::NotFound),
            ("escape-dir/secret", Resolved::NotFound),
            ("missing", Resolved::NotFound),
            ("/etc/passwd", Resolved::NotFound),
            ("syslog%00", Resolved::NotFound),
        ];
        for (rel, want) in cases {
            assert_eq!(resolve(root, rel).await, want, "{rel}");
        }
    }
}
