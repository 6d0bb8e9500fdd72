//! The CPU manager's state file, `<root-dir>/cpu_manager_state`, in the Go kubelet's format
//! (its `CPUManagerCheckpointV2`), so that a node can switch between the Go kubelet and
//! kubelet-rs without draining:
//!
//! ```json
//! {"policyName":"static","defaultCpuSet":"0,3-7","entries":{"<pod uid>":{"<container>":"1-2"}},"checksum":1277490030}
//! ```
//!
//! `entries` is left out when empty; maps are sorted by key. The checksum is Go's
//! `checksum.New`: FNV-1a (32 bits) over the spew rendering (`%#v`, sorted keys) of the
//! checkpoint with its checksum 0 — rendered here by `go_rendering` and checked against
//! checkpoints the Go kubelet's own code wrote (the tests). A checksum of 0 is accepted
//! unchecked, as Go does. The v1 format (entries by container id, before 1.18) is refused
//! with a clear error: migrating it needs the runtime's containers, as Go's does.
//!
//! Reading checks the checksum over the strings as written, then parses every CPU list; the
//! policy the file was written under must be the configured one (Go refuses to start
//! otherwise, with the message of [`CheckpointError::PolicyMismatch`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cpuset::{CpuSet, CpuSetError};

/// The file's name in the kubelet's root directory (Go's `cpuManagerStateFileName`).
pub const STATE_FILE: &str = "cpu_manager_state";

/// The largest state file read (a node's assignments fit in a few KiB).
pub const MAX_STATE_FILE_BYTES: usize = crate::checkpoint_file::MAX_CHECKPOINT_BYTES;

/// Why a state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Larger than [`MAX_STATE_FILE_BYTES`].
    #[error("the CPU manager checkpoint is {len} bytes, more than {MAX_STATE_FILE_BYTES}")]
    TooLarge {
        /// Its size.
        len: usize,
    },
    /// Not the v2 JSON document.
    #[error("the CPU manager checkpoint is not valid JSON of the v2 format: {0}")]
    Json(#[from] serde_json::Error),
    /// The checksum does not match (Go's `ErrCorruptCheckpoint`).
    #[error("checkpoint is corrupted (checksum {found}, computed {computed})")]
    Corrupt {
        /// The checksum in the file.
        found: u32,
        /// The checksum of its contents.
        computed: u32,
    },
    /// A CPU list that does not parse.
    #[error("could not parse cpuset {value:?} for {what}: {source}")]
    CpuSet {
        /// Which list (`the default cpu set`, `container "c" in pod "uid"`).
        what: String,
        /// The list.
        value: String,
        /// Why.
        source: CpuSetError,
    },
    /// Written under another policy than the configured one (Go's message).
    #[error("configured policy {configured:?} differs from state checkpoint policy {found:?}")]
    PolicyMismatch {
        /// `cpuManagerPolicy`.
        configured: String,
        /// The file's.
        found: String,
    },
}

/// The CPU manager's state: the policy it was written under, the shared pool, and the CPUs
/// assigned to containers (pod uid → container name → CPUs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuManagerCheckpoint {
    /// `none` or `static`.
    pub policy_name: String,
    /// The shared pool: CPUs not assigned exclusively.
    pub default_cpu_set: CpuSet,
    /// Exclusive assignments.
    pub entries: BTreeMap<String, BTreeMap<String, CpuSet>>,
}

/// The file's JSON, field for field (Go's field order and tags).
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "policyName")]
    policy_name: String,
    #[serde(rename = "defaultCpuSet")]
    default_cpu_set: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    entries: BTreeMap<String, BTreeMap<String, String>>,
    checksum: u32,
}

impl CpuManagerCheckpoint {
    /// The exclusive CPUs of `container` of pod `uid`, if it has any (Go's `GetCPUSet`).
    pub fn assigned(&self, uid: &str, container: &str) -> Option<&CpuSet> {
        self.entries.get(uid).and_then(|c| c.get(container))
    }

    /// The CPUs `container` of pod `uid` runs on: its exclusive ones, else the shared pool
    /// (Go's `GetCPUSetOrDefault`).
    pub fn cpus_or_default(&self, uid: &str, container: &str) -> &CpuSet {
        self.assigned(uid, container)
            .unwrap_or(&self.default_cpu_set)
    }

    /// The file's bytes, with Go's checksum.
    pub fn to_json(&self) -> Result<Vec<u8>, CheckpointError> {
        let mut wire = Wire {
            policy_name: self.policy_name.clone(),
            default_cpu_set: self.default_cpu_set.to_string(),
            entries: self
                .entries
                .iter()
                .map(|(pod, containers)| {
                    let containers = containers
                        .iter()
                        .map(|(name, cpus)| (name.clone(), cpus.to_string()))
                        .collect();
                    (pod.clone(), containers)
                })
                .collect(),
            checksum: 0,
        };
        wire.checksum = checksum(&wire);
        Ok(serde_json::to_vec(&wire)?)
    }

    /// Reads a state file: checksum, CPU lists, and the policy it must have been written
    /// under (`configured_policy`).
    pub fn from_json(
        bytes: &[u8],
        configured_policy: &str,
    ) -> Result<CpuManagerCheckpoint, CheckpointError> {
        if bytes.len() > MAX_STATE_FILE_BYTES {
            return Err(CheckpointError::TooLarge { len: bytes.len() });
        }
        let wire: Wire = serde_json::from_slice(bytes)?;
        if wire.checksum != 0 {
            let computed = checksum(&wire);
            if computed != wire.checksum {
                return Err(CheckpointError::Corrupt {
                    found: wire.checksum,
                    computed,
                });
            }
        }
        if wire.policy_name != configured_policy {
            return Err(CheckpointError::PolicyMismatch {
                configured: configured_policy.to_string(),
                found: wire.policy_name,
            });
        }
        let parse = |what: String, value: &str| {
            CpuSet::parse(value).map_err(|source| CheckpointError::CpuSet {
                what,
                value: value.to_string(),
                source,
            })
        };
        let default_cpu_set = parse("the default cpu set".into(), &wire.default_cpu_set)?;
        let mut entries = BTreeMap::new();
        for (pod, containers) in &wire.entries {
            let mut parsed = BTreeMap::new();
            for (name, cpus) in containers {
                let what = format!("container {name:?} in pod {pod:?}");
                parsed.insert(name.clone(), parse(what, cpus)?);
            }
            entries.insert(pod.clone(), parsed);
        }
        Ok(CpuManagerCheckpoint {
            policy_name: wire.policy_name,
            default_cpu_set,
            entries,
        })
    }
}

/// Go's checksum of a checkpoint: FNV-1a 32 over [`go_rendering`] (checksum field 0).
fn checksum(wire: &Wire) -> u32 {
    go_rendering(wire).bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// What Go's `hashutil.DeepHashObject` hashes for a `*state.CPUManagerCheckpoint`: spew's
/// `%#v` with sorted keys (strings bare, nested maps untyped, an empty map `map[]`; Go reads
/// and writes the entries as a map, never nil).
fn go_rendering(wire: &Wire) -> String {
    let entries: Vec<String> = wire
        .entries
        .iter()
        .map(|(pod, containers)| {
            let inner: Vec<String> = containers
                .iter()
                .map(|(name, cpus)| format!("{name}:{cpus}"))
                .collect();
            format!("{pod}:map[{}]", inner.join(" "))
        })
        .collect();
    format!(
        "(*state.CPUManagerCheckpoint){{PolicyName:(string){} DefaultCPUSet:(string){} \
         Entries:(map[string]map[string]string)map[{}] Checksum:(checksum.Checksum)0}}",
        wire.policy_name,
        wire.default_cpu_set,
        entries.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by the Go kubelet v1.20.2's own `CPUManagerCheckpointV2.MarshalCheckpoint`
    /// (its tree's `pkg/kubelet/cm/cpumanager/state`, run with Go 1.15 on this project's
    /// machine).
    const GO_WRITTEN: [&str; 3] = [
        r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#,
        r#"{"policyName":"static","defaultCpuSet":"0-3","checksum":611748604}"#,
        r#"{"policyName":"static","defaultCpuSet":"0,3-7","entries":{"pod-a":{"app":"8-9,12"},"pod-b":{"c1":"1","c2":"2"}},"checksum":1277490030}"#,
    ];

    fn policy(json: &str) -> &str {
        if json.contains("\"none\"") {
            "none"
        } else {
            "static"
        }
    }

    #[test]
    fn reads_and_writes_go_checkpoints_byte_for_byte() {
        for json in GO_WRITTEN {
            let cp = CpuManagerCheckpoint::from_json(json.as_bytes(), policy(json)).unwrap();
            let written = cp.to_json().unwrap();
            assert_eq!(String::from_utf8(written).unwrap(), json);
        }
        let cp = CpuManagerCheckpoint::from_json(GO_WRITTEN[2].as_bytes(), "static").unwrap();
        assert_eq!(cp.default_cpu_set, CpuSet::parse("0,3-7").unwrap());
        assert_eq!(cp.entries["pod-a"]["app"], CpuSet::parse("8-9,12").unwrap());
    }

    #[test]
    fn a_changed_file_is_corrupt_and_checksum_zero_is_accepted() {
        let changed = GO_WRITTEN[1].replace("0-3", "0-2");
        assert!(matches!(
            CpuManagerCheckpoint::from_json(changed.as_bytes(), "static"),
            Err(CheckpointError::Corrupt {
                found: 611748604,
                ..
            })
        ));
        let unchecked = r#"{"policyName":"static","defaultCpuSet":"0-2","checksum":0}"#;
        let cp = CpuManagerCheckpoint::from_json(unchecked.as_bytes(), "static").unwrap();
        assert_eq!(cp.default_cpu_set.to_string(), "0-2");
    }

    #[test]
    fn refuses_another_policy_with_gos_message() {
        let err = CpuManagerCheckpoint::from_json(GO_WRITTEN[1].as_bytes(), "none").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"configured policy "none" differs from state checkpoint policy "static""#
        );
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        for (json, want) in [
            (
                r#"{"policyName":"static","defaultCpuSet":"0-x","checksum":0}"#,
                "the default cpu set",
            ),
            (
                r#"{"policyName":"static","defaultCpuSet":"","entries":{"u":{"c":"3-1"}},"checksum":0}"#,
                r#"container "c" in pod "u""#,
            ),
            // v1: entries by container id.
            (
                r#"{"policyName":"static","defaultCpuSet":"","entries":{"abc":"1"},"checksum":0}"#,
                "v2 format",
            ),
            ("not json", "JSON"),
        ] {
            let err = CpuManagerCheckpoint::from_json(json.as_bytes(), "static").unwrap_err();
            assert!(err.to_string().contains(want), "{json}: {err}");
        }
        let huge = vec![b' '; MAX_STATE_FILE_BYTES + 1];
        assert!(matches!(
            CpuManagerCheckpoint::from_json(&huge, "static"),
            Err(CheckpointError::TooLarge { .. })
        ));
    }
}
