//! Removing logs nobody will read again (Go's `evictPodLogsDirectories`), run with container
//! garbage collection once every pod source was seen:
//!
//! - `<pod logs dir>/<namespace>_<name>_<uid>` of a pod the kubelet no longer knows — not
//!   desired, no worker, nothing of it in the runtime — is removed with everything in it;
//! - a `<containers log dir>/*.log` symlink whose target is gone is removed, unless its
//!   container is still running (its log is being rotated right now).

use std::path::{Path, PathBuf};

use crate::runtime::{ContainerRuntime, ContainerState};

/// The pod uid of a pod log directory name (Go's `parsePodUIDFromLogsDirectory`: what
/// follows the last `_`).
pub(crate) fn uid_of_log_dir(name: &str) -> &str {
    name.rsplit('_').next().unwrap_or(name)
}

/// The container id of a legacy log symlink name (`<pod>_<ns>_<container>-<id>.log`).
pub(crate) fn container_id_of_symlink(name: &str) -> Option<&str> {
    let last = name.rsplit('-').next()?;
    last.strip_suffix(".log").filter(|id| !id.is_empty())
}

/// Removes the log directories of pods `keep` does not know. See the module docs.
pub(crate) async fn remove_pod_log_dirs(dir: &Path, keep: impl Fn(&str) -> bool) -> usize {
    let Ok(mut rd) = tokio::fs::read_dir(dir).await else {
        return 0;
    };
    let mut gone: Vec<PathBuf> = Vec::new();
    while let Ok(Some(e)) = rd.next_entry().await {
        let name = e.file_name().to_string_lossy().into_owned();
        let uid = uid_of_log_dir(&name);
        // Only directories named as the runtime names them.
        if name.split('_').count() < 3 || !crate::pod::is_safe_uid(uid) {
            continue;
        }
        if !e.file_type().await.map(|t| t.is_dir()).unwrap_or(false) || keep(uid) {
            continue;
        }
        gone.push(e.path());
    }
    let mut removed = 0;
    for path in gone {
        tracing::info!(path = %path.display(), "removing the log directory of a pod that is gone");
        match tokio::fs::remove_dir_all(&path).await {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "failed to remove a pod log directory")
            }
        }
    }
    removed
}

/// Removes the dangling container log symlinks of `dir`. See the module docs.
pub(crate) async fn remove_dangling_symlinks(dir: &Path, runtime: &dyn ContainerRuntime) -> usize {
    let Ok(mut rd) = tokio::fs::read_dir(dir).await else {
        return 0;
    };
    let mut removed = 0;
    while let Ok(Some(e)) = rd.next_entry().await {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".log") {
            continue;
        }
        let path = e.path();
        let is_link = tokio::fs::symlink_metadata(&path)
            .await
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link || tokio::fs::metadata(&path).await.is_ok() {
            continue;
        }
        if let Some(id) = container_id_of_symlink(&name) {
            match runtime.container_status(id).await {
                Ok(s) if s.summary.state != ContainerState::Exited => {
                    tracing::trace!(
                        container = id,
                        "container not exited; its log symlink stays"
                    );
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(container = id, error = %e, "no status for a dangling log symlink's container")
                }
            }
        }
        match tokio::fs::remove_file(&path).await {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "failed to remove a dangling log symlink")
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SimRuntime;

    #[test]
    fn names() {
        assert_eq!(uid_of_log_dir("default_web_1234-abcd"), "1234-abcd");
        assert_eq!(
            container_id_of_symlink("web_default_app-0123abcd.log"),
            Some("0123abcd")
        );
        assert_eq!(container_id_of_symlink("web_default_app-.log"), None);
        assert_eq!(container_id_of_symlink("plain"), None);
    }

    #[tokio::test]
    async fn gone_pods_and_dangling_links() {
        let dir = tempfile::tempdir().unwrap();
        let pods = dir.path().join("pods");
        for d in ["default_web_u1", "default_old_u2", "not-a-pod-dir"] {
            std::fs::create_dir_all(pods.join(d).join("app")).unwrap();
        }
        std::fs::write(pods.join("default_old_u2/app/0.log"), "x").unwrap();
        assert_eq!(remove_pod_log_dirs(&pods, |uid| uid == "u1").await, 1);
        assert!(pods.join("default_web_u1").exists());
        assert!(!pods.join("default_old_u2").exists());
        assert!(pods.join("not-a-pod-dir").exists(), "not named as a pod's");

        let links = dir.path().join("containers");
        std::fs::create_dir_all(&links).unwrap();
        let target = pods.join("default_web_u1/app/0.log");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, links.join("web_default_app-c1.log")).unwrap();
        std::os::unix::fs::symlink(pods.join("gone.log"), links.join("old_default_app-c2.log"))
            .unwrap();
        let sim = SimRuntime::new();
        assert_eq!(remove_dangling_symlinks(&links, &sim).await, 1);
        assert!(links.join("web_default_app-c1.log").exists());
        assert!(
            tokio::fs::symlink_metadata(links.join("old_default_app-c2.log"))
                .await
                .is_err()
        );
    }
}
