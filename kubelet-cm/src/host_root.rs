//! Paths of host files under the root the container manager reads from (`/` on a node, a
//! fixture directory in tests).

use std::path::{Path, PathBuf};

/// Resolves an absolute host path under `root`.
pub(crate) fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}
