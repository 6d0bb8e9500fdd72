//! The memory manager's state file, `<root-dir>/memory_manager_state`, in the Go kubelet's
//! format (v1.25's `MemoryManagerCheckpoint`), so a node switches between the Go kubelet
//! and kubelet-rs with its NUMA assignments intact:
//!
//! ```json
//! {"policyName":"Static","machineState":{"0":{"numberOfAssignments":1,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[0]}},"entries":{"<pod uid>":{"<container>":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum":1234}
//! ```
//!
//! Go's `encoding/json`: compact, map keys sorted as strings (`"10"` before `"2"`),
//! `entries` left out when empty. The checksum is Go's `checksum.New`: FNV-1a (32 bits)
//! over spew's `%#v` rendering of the checkpoint with its checksum 0 (`go_rendering`,
//! checked against files Go's own code wrote — the tests). Unlike the CPU manager's older
//! format, a checksum of 0 is not special (v1.25). Reading checks the checksum over the
//! document as written (`null` and empty differ), then converts it; the policy it was
//! written under must be the configured one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::state::{Block, MachineState, MemoryManagerState, MemoryTable, NumaNodeState};

/// The file's name in the kubelet's root directory (Go's `memoryManagerStateFileName`).
pub const STATE_FILE: &str = "memory_manager_state";

/// The largest state file read.
pub const MAX_STATE_FILE_BYTES: usize = crate::checkpoint_file::MAX_CHECKPOINT_BYTES;

/// Why a state file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Larger than [`MAX_STATE_FILE_BYTES`].
    #[error("the memory manager checkpoint is {len} bytes, more than {MAX_STATE_FILE_BYTES}")]
    TooLarge {
        /// Its size.
        len: usize,
    },
    /// Not the JSON document.
    #[error("the memory manager checkpoint is not valid JSON of its format: {0}")]
    Json(#[from] serde_json::Error),
    /// A value out of range (a negative NUMA node, a key that is not a node number).
    #[error("the memory manager checkpoint has an invalid {what}: {value:?}")]
    Invalid {
        /// Which value.
        what: &'static str,
        /// It.
        value: String,
    },
    /// The checksum does not match (Go's `ErrCorruptCheckpoint`).
    #[error("checkpoint is corrupted (checksum {found}, computed {computed})")]
    Corrupt {
        /// The checksum in the file.
        found: u64,
        /// The checksum of its contents.
        computed: u64,
    },
    /// Written under another policy than the configured one (Go's message).
    #[error("[memorymanager] configured policy {configured:?} differs from state checkpoint policy {found:?}")]
    PolicyMismatch {
        /// `memoryManagerPolicy`.
        configured: String,
        /// The file's.
        found: String,
    },
}

/// The document, field for field (Go's order and tags); `Option` where Go's value may be
/// nil (`null`), which renders differently in the checksum.
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "policyName")]
    policy_name: String,
    /// Missing: Go's pre-initialised empty map; `null`: nil.
    #[serde(rename = "machineState", default = "empty_map")]
    machine_state: Option<BTreeMap<String, Option<WireNode>>>,
    #[serde(default = "empty_map", skip_serializing_if = "is_empty_or_nil")]
    entries: Option<WireEntries>,
    checksum: u64,
}

/// Pod uid → container → blocks, each level nullable.
type WireEntries = BTreeMap<String, Option<BTreeMap<String, Option<Vec<WireBlock>>>>>;

#[derive(Serialize, Deserialize)]
struct WireNode {
    #[serde(rename = "numberOfAssignments")]
    number_of_assignments: i64,
    #[serde(rename = "memoryMap")]
    memory_map: Option<BTreeMap<String, Option<WireTable>>>,
    cells: Option<Vec<i64>>,
}

#[derive(Serialize, Deserialize)]
struct WireTable {
    total: u64,
    #[serde(rename = "systemReserved")]
    system_reserved: u64,
    allocatable: u64,
    reserved: u64,
    free: u64,
}

#[derive(Serialize, Deserialize)]
struct WireBlock {
    #[serde(rename = "numaAffinity")]
    numa_affinity: Option<Vec<i64>>,
    #[serde(rename = "type")]
    resource: String,
    size: u64,
}

fn empty_map<K: Ord, V>() -> Option<BTreeMap<K, V>> {
    Some(BTreeMap::new())
}

fn is_empty_or_nil<K, V>(m: &Option<BTreeMap<K, V>>) -> bool {
    m.as_ref().is_none_or(BTreeMap::is_empty)
}

impl MemoryManagerState {
    /// The file's bytes, with Go's checksum.
    pub fn to_json(&self) -> Result<Vec<u8>, CheckpointError> {
        let mut wire = Wire::from(self);
        wire.checksum = checksum(&wire)?;
        Ok(serde_json::to_vec(&wire)?)
    }

    /// Reads a state file written under `policy` (Go's `RestoreCheckpoint` and its checks).
    pub fn from_json(bytes: &[u8], policy: &str) -> Result<MemoryManagerState, CheckpointError> {
        if bytes.len() > MAX_STATE_FILE_BYTES {
            return Err(CheckpointError::TooLarge { len: bytes.len() });
        }
        let wire: Wire = serde_json::from_slice(bytes)?;
        let computed = checksum(&wire)?;
        if computed != wire.checksum {
            return Err(CheckpointError::Corrupt {
                found: wire.checksum,
                computed,
            });
        }
        if wire.policy_name != policy {
            return Err(CheckpointError::PolicyMismatch {
                configured: policy.to_string(),
                found: wire.policy_name,
            });
        }
        MemoryManagerState::try_from(wire)
    }
}

fn node_id(what: &'static str, n: i64) -> Result<u32, CheckpointError> {
    u32::try_from(n).map_err(|_| CheckpointError::Invalid {
        what,
        value: n.to_string(),
    })
}

fn node_ids(what: &'static str, ns: Option<Vec<i64>>) -> Result<Vec<u32>, CheckpointError> {
    ns.unwrap_or_default()
        .into_iter()
        .map(|n| node_id(what, n))
        .collect()
}

fn node_key(key: &str) -> Result<u32, CheckpointError> {
    key.parse().map_err(|_| CheckpointError::Invalid {
        what: "NUMA node key of machineState",
        value: key.to_string(),
    })
}

impl TryFrom<Wire> for MemoryManagerState {
    type Error = CheckpointError;

    fn try_from(wire: Wire) -> Result<Self, CheckpointError> {
        let mut machine_state = MachineState::new();
        for (key, node) in wire.machine_state.unwrap_or_default() {
            let id = node_key(&key)?;
            let Some(node) = node else { continue };
            let memory_map = node
                .memory_map
                .unwrap_or_default()
                .into_iter()
                .map(|(r, t)| {
                    let t = t.unwrap_or(WireTable {
                        total: 0,
                        system_reserved: 0,
                        allocatable: 0,
                        reserved: 0,
                        free: 0,
                    });
                    (
                        r,
                        MemoryTable {
                            total: t.total,
                            system_reserved: t.system_reserved,
                            allocatable: t.allocatable,
                            reserved: t.reserved,
                            free: t.free,
                        },
                    )
                })
                .collect();
            machine_state.insert(
                id,
                NumaNodeState {
                    number_of_assignments: node.number_of_assignments,
                    memory_map,
                    cells: node_ids("cell", node.cells)?,
                },
            );
        }
        let mut entries = BTreeMap::new();
        for (uid, containers) in wire.entries.unwrap_or_default() {
            let mut out = BTreeMap::new();
            for (name, blocks) in containers.unwrap_or_default() {
                let blocks = blocks
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| {
                        Ok(Block {
                            numa_affinity: node_ids("numaAffinity", b.numa_affinity)?,
                            resource: b.resource,
                            size: b.size,
                        })
                    })
                    .collect::<Result<Vec<_>, CheckpointError>>()?;
                out.insert(name, blocks);
            }
            entries.insert(uid, out);
        }
        Ok(MemoryManagerState {
            policy_name: wire.policy_name,
            machine_state,
            entries,
        })
    }
}

impl From<&MemoryManagerState> for Wire {
    fn from(s: &MemoryManagerState) -> Wire {
        let ids = |v: &[u32]| Some(v.iter().map(|n| i64::from(*n)).collect());
        Wire {
            policy_name: s.policy_name.clone(),
            machine_state: Some(
                s.machine_state
                    .iter()
                    .map(|(id, n)| {
                        let memory_map = n
                            .memory_map
                            .iter()
                            .map(|(r, t)| {
                                (
                                    r.clone(),
                                    Some(WireTable {
                                        total: t.total,
                                        system_reserved: t.system_reserved,
                                        allocatable: t.allocatable,
                                        reserved: t.reserved,
                                        free: t.free,
                                    }),
                                )
                            })
                            .collect();
                        (
                            id.to_string(),
                            Some(WireNode {
                                number_of_assignments: n.number_of_assignments,
                                memory_map: Some(memory_map),
                                cells: ids(&n.cells),
                            }),
                        )
                    })
                    .collect(),
            ),
            entries: Some(
                s.entries
                    .iter()
                    .map(|(uid, cs)| {
                        let cs = cs
                            .iter()
                            .map(|(name, blocks)| {
                                let blocks = blocks
                                    .iter()
                                    .map(|b| WireBlock {
                                        numa_affinity: ids(&b.numa_affinity),
                                        resource: b.resource.clone(),
                                        size: b.size,
                                    })
                                    .collect();
                                (name.clone(), Some(blocks))
                            })
                            .collect();
                        (uid.clone(), Some(cs))
                    })
                    .collect(),
            ),
            checksum: 0,
        }
    }
}

/// Go's checksum: FNV-1a 32 over [`go_rendering`] (checksum field 0).
fn checksum(wire: &Wire) -> Result<u64, CheckpointError> {
    Ok(u64::from(
        go_rendering(wire)?.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        }),
    ))
}

/// What Go's `hashutil.DeepHashObject` hashes for a `*state.MemoryManagerCheckpoint`:
/// spew's `%#v` with sorted keys. Struct fields carry their type, map keys, map values and
/// slice elements do not; a pointer reached as a map value is `<*>`; strings are bare; nil
/// is `<nil>`; the node map sorts numerically, string keys bytewise.
fn go_rendering(wire: &Wire) -> Result<String, CheckpointError> {
    /// spew's nil, else `f` of the value.
    fn nil_or<T>(v: &Option<T>, f: impl FnOnce(&T) -> String) -> String {
        v.as_ref().map_or_else(|| "<nil>".to_string(), f)
    }
    /// spew's slice: `[a b c]`.
    fn slice<T>(v: &[T], f: impl Fn(&T) -> String) -> String {
        format!("[{}]", v.iter().map(f).collect::<Vec<_>>().join(" "))
    }
    /// spew's map of string keys, sorted: `map[k:v k:v]`.
    fn map<T>(m: &BTreeMap<String, T>, f: impl Fn(&T) -> String) -> String {
        let v: Vec<String> = m.iter().map(|(k, v)| format!("{k}:{}", f(v))).collect();
        format!("map[{}]", v.join(" "))
    }
    let ints = |v: &Option<Vec<i64>>| nil_or(v, |v| slice(v, i64::to_string));
    let table = |t: &Option<WireTable>| {
        nil_or(t, |t| {
            format!(
                "<*>{{TotalMemSize:(uint64){} SystemReserved:(uint64){} Allocatable:(uint64){} Reserved:(uint64){} Free:(uint64){}}}",
                t.total, t.system_reserved, t.allocatable, t.reserved, t.free
            )
        })
    };
    let node = |n: &Option<WireNode>| {
        nil_or(n, |n| {
            format!(
                "<*>{{NumberOfAssignments:(int){} MemoryMap:(map[v1.ResourceName]*state.MemoryTable){} Cells:([]int){}}}",
                n.number_of_assignments,
                nil_or(&n.memory_map, |m| map(m, table)),
                ints(&n.cells)
            )
        })
    };
    let block = |b: &WireBlock| {
        format!(
            "{{NUMAAffinity:([]int){} Type:(v1.ResourceName){} Size:(uint64){}}}",
            ints(&b.numa_affinity),
            b.resource,
            b.size
        )
    };
    let machine_state = match &wire.machine_state {
        None => "<nil>".to_string(),
        Some(m) => {
            // Integer keys: sorted as numbers.
            let mut nodes = Vec::with_capacity(m.len());
            for (k, n) in m {
                nodes.push((node_key(k)?, node(n)));
            }
            nodes.sort_by_key(|(id, _)| *id);
            slice(&nodes, |(id, n)| format!("{id}:{n}")).replacen('[', "map[", 1)
        }
    };
    let entries = nil_or(&wire.entries, |pods| {
        map(pods, |cs| {
            nil_or(cs, |cs| map(cs, |bs| nil_or(bs, |bs| slice(bs, block))))
        })
    });
    Ok(format!(
        "(*state.MemoryManagerCheckpoint){{PolicyName:(string){} MachineState:(state.NUMANodeMap){machine_state} \
         Entries:(state.ContainerMemoryAssignments){entries} Checksum:(checksum.Checksum)0}}",
        wire.policy_name
    ))
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
