//! `configMap` volumes (and configMap sources of projected volumes): the keys of a config map
//! (`data` and `binaryData`), or the listed `items`, as files with `defaultMode`/`mode`
//! (default 0644). A missing config map is an error unless `optional`, which gives an empty
//! volume; a missing listed key likewise.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, KeyToPath};

use super::atomic_writer::{FileProjection, Payload};
use super::VolumeError;

/// Default file mode of configMap, secret, downwardAPI and projected volumes.
pub const DEFAULT_MODE: i32 = 0o644;

/// A config map's `data` and `binaryData` as bytes.
pub fn data_of(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.entry(k.clone()).or_insert_with(|| v.0.clone());
    }
    out
}

/// The mode bits of an API mode value (only permission bits).
pub(crate) fn mode_bits(mode: i32) -> u32 {
    u32::try_from(mode).unwrap_or(0o644) & 0o7777
}

/// Go's `MakePayload` for key-based sources: every key with `default_mode` when `items` is
/// empty, else each listed key at its path (a missing key: skipped when `optional`, else
/// an error naming `kind`).
pub(crate) fn key_payload(
    volume: &str,
    kind: &'static str,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: i32,
    optional: bool,
) -> Result<Payload, VolumeError> {
    let mut out = Payload::new();
    match items.filter(|i| !i.is_empty()) {
        None => {
            for (k, v) in data {
                out.insert(
                    k.clone(),
                    FileProjection {
                        data: v.clone(),
                        mode: mode_bits(default_mode),
                    },
                );
            }
        }
        Some(items) => {
            for item in items {
                let Some(v) = data.get(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(VolumeError::MissingKey {
                        volume: volume.to_string(),
                        kind,
                        key: item.key.clone(),
                    });
                };
                out.insert(
                    item.path.clone(),
                    FileProjection {
                        data: v.clone(),
                        mode: mode_bits(item.mode.unwrap_or(default_mode)),
                    },
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn payload_from_keys_and_items() {
        let cm = ConfigMap {
            data: Some([("a".to_string(), "1".to_string())].into()),
            binary_data: Some([("bin".to_string(), ByteString(vec![0, 1]))].into()),
            ..Default::default()
        };
        let data = data_of(&cm);
        let all = key_payload("v", "configmap", &data, None, 0o600, false).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all["bin"].data, vec![0, 1]);
        assert_eq!(all["a"].mode, 0o600);
        let items = vec![
            KeyToPath {
                key: "a".into(),
                path: "dir/x".into(),
                mode: Some(0o400),
                ..Default::default()
            },
            KeyToPath {
                key: "missing".into(),
                path: "y".into(),
                ..Default::default()
            },
        ];
        let e = key_payload("v", "configmap", &data, Some(&items), 0o644, false).unwrap_err();
        assert!(e.to_string().contains("non-existent"), "{e}");
        let some = key_payload("v", "configmap", &data, Some(&items), 0o644, true).unwrap();
        assert_eq!(some.len(), 1);
        assert_eq!(some["dir/x"].mode, 0o400);
        assert_eq!(some["dir/x"].data, b"1");
    }
}
