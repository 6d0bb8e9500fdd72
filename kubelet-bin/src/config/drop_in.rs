//! `--config-dir`: the drop-in configuration directory, merged as the Go kubelet merges it
//! (`mergeKubeletConfigurations`).
//!
//! Every regular file whose name ends in `.conf`, anywhere under the directory (walked in
//! lexical order, subdirectories where they sort, as Go's `filepath.WalkDir`), is a
//! `KubeletConfiguration` document of its own (`kind` and `apiVersion` required). Each is
//! applied in turn as a JSON merge patch (RFC 7386) onto the configuration so far: a field
//! it sets replaces the value, objects (maps such as `evictionHard`, `featureGates`) merge
//! key by key, lists are replaced whole, and `null` removes a field (back to its default).
//! The base is the `--config` file, or the defaults when there is none; the command-line
//! flags are applied after, and win. Relative paths in a drop-in are not resolved against its
//! directory (Go resolves only the main file's).
//!
//! Reading is bounded: each file as a manifest ([`kubelet_sources::decode::MANIFEST_LIMITS`]),
//! at most [`MAX_TOTAL_BYTES`] in all, at most [`MAX_ENTRIES`] directory entries.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::KubeletConfiguration;
use super::{
    decode_config_value, deserialize_config, encode_config, unknown_field_warnings, ConfigError,
    FileConfig,
};

/// The extension of the files Go reads from the drop-in directory.
pub const DROP_IN_EXTENSION: &str = "conf";

/// The most directory entries (files and directories, at any depth) one walk visits.
pub const MAX_ENTRIES: usize = 4096;

/// The most bytes all drop-in files together may hold (each is also bounded as a manifest).
pub const MAX_TOTAL_BYTES: usize = 16 * 1024 * 1024;

/// Why the drop-in directory could not be merged (wrapped in [`ConfigError::DropIn`]).
#[derive(Debug, thiserror::Error)]
pub enum DropInError {
    /// The directory (or one under it) cannot be read.
    #[error("failed to walk through kubelet dropin directory {dir:?}: {}: {error}", path.display())]
    Walk {
        /// The drop-in directory (`--config-dir`).
        dir: PathBuf,
        /// The directory that could not be read.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The files add up to more than [`MAX_TOTAL_BYTES`].
    #[error("kubelet dropin directory {dir:?}: the .conf files add up to more than {MAX_TOTAL_BYTES} bytes")]
    TooLarge {
        /// The drop-in directory.
        dir: PathBuf,
    },
    /// More entries than [`MAX_ENTRIES`].
    #[error("kubelet dropin directory {dir:?} has more than {MAX_ENTRIES} entries")]
    TooManyEntries {
        /// The drop-in directory.
        dir: PathBuf,
    },
}

/// The `.conf` files under `dir`, in the order Go applies them.
pub fn drop_in_files(dir: &Path) -> Result<Vec<PathBuf>, DropInError> {
    let mut files = Vec::new();
    let mut visited = 0usize;
    walk(dir, dir, &mut visited, &mut files)?;
    Ok(files)
}

fn walk(
    top: &Path,
    dir: &Path,
    visited: &mut usize,
    files: &mut Vec<PathBuf>,
) -> Result<(), DropInError> {
    let walk_err = |error| DropInError::Walk {
        dir: top.to_path_buf(),
        path: dir.to_path_buf(),
        error,
    };
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(walk_err)? {
        let entry = entry.map_err(walk_err)?;
        *visited += 1;
        if *visited > MAX_ENTRIES {
            return Err(DropInError::TooManyEntries {
                dir: top.to_path_buf(),
            });
        }
        entries.push(entry);
    }
    // Go's WalkDir: lexical order of the names' bytes.
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        // The entry itself, as WalkDir's DirEntry (a symlink is not followed).
        let file_type = entry.file_type().map_err(walk_err)?;
        if file_type.is_dir() {
            walk(top, &path, visited, files)?;
        } else if path.extension().is_some_and(|e| e == DROP_IN_EXTENSION) {
            files.push(path);
        }
    }
    Ok(())
}

/// RFC 7386 JSON merge patch: `patch` applied onto `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = target {
        for (key, value) in fields {
            if value.is_null() {
                map.remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Merges the drop-in files under `dir` onto `base` (the configuration from `--config`, or
/// the defaults), returning the merged configuration and a warning for each unknown field.
pub fn merge_drop_ins(base: &KubeletConfiguration, dir: &Path) -> Result<FileConfig, ConfigError> {
    let files = drop_in_files(dir)?;
    let mut merged = encode_config(base, dir)?;
    let mut config = base.clone();
    let mut patches = Vec::with_capacity(files.len());
    let mut total = 0usize;
    for path in files {
        let bytes = super::read_bounded(&path)?;
        total = total.saturating_add(bytes.len());
        if total > MAX_TOTAL_BYTES {
            return Err(DropInError::TooLarge {
                dir: dir.to_path_buf(),
            }
            .into());
        }
        let patch = decode_config_value(&bytes, &path)?;
        merge_patch(&mut merged, &patch);
        // Each step must still be a configuration: the error names the file that broke it.
        config = deserialize_config(&merged, &path)?;
        patches.push((path, patch));
    }
    let understood = encode_config(&config, dir)?;
    let warnings = patches
        .iter()
        .flat_map(|(path, patch)| unknown_field_warnings(patch, &understood, path))
        .collect();
    Ok(FileConfig { config, warnings })
}

#[cfg(test)]
#[path = "drop_in_tests.rs"]
mod load_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        // RFC 7386 appendix A, a selection.
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (mut target, patch, want) in cases {
            merge_patch(&mut target, &patch);
            assert_eq!(target, want, "patch {patch}");
        }
    }

    #[test]
    fn files_are_walked_in_lexical_order_with_subdirectories_where_they_sort() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for f in [
            "20-b.conf",
            "10-a.conf",
            "30-c.yaml",
            "b/00.conf",
            "a/99.conf",
            "c.conf/x.txt",
        ] {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "").expect("write");
        }
        let names: Vec<String> = drop_in_files(d)
            .expect("walk")
            .iter()
            .map(|p| p.strip_prefix(d).expect("under").display().to_string())
            .collect();
        assert_eq!(names, ["10-a.conf", "20-b.conf", "a/99.conf", "b/00.conf"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let err = drop_in_files(Path::new("/nonexistent/kubelet.conf.d")).expect_err("missing");
        assert!(
            err.to_string().starts_with(
                "failed to walk through kubelet dropin directory \"/nonexistent/kubelet.conf.d\""
            ),
            "{err}"
        );
    }
}
