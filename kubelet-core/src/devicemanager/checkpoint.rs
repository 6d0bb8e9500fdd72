//! The device manager's checkpoint, `<device-plugins dir>/kubelet_internal_checkpoint`, in
//! the Go kubelet's format (v1.20's `checkpoint.Data`), so that a node can switch between the
//! Go kubelet and kubelet-rs with its devices still assigned:
//!
//! ```json
//! {"Data":{"PodDeviceEntries":[{"PodUID":"<uid>","ContainerName":"c","ResourceName":"example.com/resource",
//!   "DeviceIDs":{"0":["Dev-1"]},"AllocResp":"<base64 ContainerAllocateResponse>"}],
//!  "RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":2542853925}
//! ```
//!
//! `PodDeviceEntries` is `null` when no container holds a device (Go writes its nil slice);
//! `DeviceIDs` maps a NUMA node to the container's devices on it; `AllocResp` is the plugin's
//! `Allocate` answer for the container, protobuf-encoded ([`AllocResp`]);
//! `RegisteredDevices` lists each registered resource's healthy devices. The checksum is
//! Go's `checksum.New(cp.Data)`: FNV-1a (32 bits) over spew's `%#v` rendering (sorted keys)
//! of the `Data` member (`go_rendering`, checked against files the Go kubelet's own code
//! wrote, in the tests). Whether a list or map was `null` or empty matters to that rendering,
//! so the wire types keep the difference. A checksum of 0 is accepted unchecked, as Go does.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::devices::{ContainerAllocation, DeviceMount, DeviceNode};

/// The file's name in the device plugin directory (Go's `kubeletDeviceManagerCheckpoint`).
pub const CHECKPOINT_FILE: &str = "kubelet_internal_checkpoint";

/// Why a checkpoint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Larger than the checkpoint bound.
    #[error("the device manager checkpoint is {len} bytes, more than {max}")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// Not the JSON document.
    #[error("the device manager checkpoint is not valid JSON of Go's format: {0}")]
    Json(#[from] serde_json::Error),
    /// The checksum does not match (Go's `ErrCorruptCheckpoint`).
    #[error("checkpoint is corrupted (checksum {found}, computed {computed})")]
    Corrupt {
        /// The checksum in the file.
        found: u64,
        /// The checksum of its contents.
        computed: u64,
    },
}

/// One container's devices of one resource, as checkpointed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDevicesEntry {
    /// The pod.
    pub pod_uid: String,
    /// The container.
    pub container: String,
    /// The extended resource.
    pub resource: String,
    /// NUMA node → device ids (Go puts devices without topology on node 0).
    pub devices: BTreeMap<i64, Vec<String>>,
    /// The plugin's answer; `None` when the stored bytes do not decode (Go skips such an
    /// entry on restore, as this crate does).
    pub response: Option<ContainerAllocation>,
}

/// The checkpoint's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCheckpoint {
    /// Every container's devices.
    pub entries: Vec<PodDevicesEntry>,
    /// Resource → its healthy devices when written.
    pub registered: BTreeMap<String, Vec<String>>,
}

impl DeviceCheckpoint {
    /// Go's file for these contents.
    pub fn to_json(&self) -> Result<Vec<u8>, CheckpointError> {
        let entries = (!self.entries.is_empty()).then(|| {
            self.entries
                .iter()
                .map(|e| WireEntry {
                    pod_uid: e.pod_uid.clone(),
                    container: e.container.clone(),
                    resource: e.resource.clone(),
                    devices: Some(
                        e.devices
                            .iter()
                            .map(|(n, ids)| (n.to_string(), Some(ids.clone())))
                            .collect(),
                    ),
                    alloc_resp: Some(
                        base64::engine::general_purpose::STANDARD.encode(encode_response(
                            e.response
                                .as_ref()
                                .unwrap_or(&ContainerAllocation::default()),
                        )),
                    ),
                })
                .collect()
        });
        let registered = Some(
            self.registered
                .iter()
                .map(|(r, ids)| (r.clone(), Some(ids.clone())))
                .collect(),
        );
        let mut wire = Wire {
            data: WireData {
                entries,
                registered,
            },
            checksum: 0,
        };
        wire.checksum = checksum(&wire.data)?;
        Ok(serde_json::to_vec(&wire)?)
    }

    /// Reads Go's file: checks the size and the checksum, then decodes every entry.
    pub fn from_json(bytes: &[u8]) -> Result<DeviceCheckpoint, CheckpointError> {
        let max = crate::checkpoint_file::MAX_CHECKPOINT_BYTES;
        if bytes.len() > max {
            return Err(CheckpointError::TooLarge {
                len: bytes.len(),
                max,
            });
        }
        let wire: Wire = serde_json::from_slice(bytes)?;
        if wire.checksum != 0 {
            let computed = checksum(&wire.data)?;
            if computed != wire.checksum {
                return Err(CheckpointError::Corrupt {
                    found: wire.checksum,
                    computed,
                });
            }
        }
        let mut entries = Vec::new();
        for e in wire.data.entries.unwrap_or_default() {
            let mut devices = BTreeMap::new();
            for (node, ids) in e.devices.unwrap_or_default() {
                // Go's encoding/json refuses a key that is not an int64; so does this.
                let node: i64 = node.parse().map_err(|_| {
                    <serde_json::Error as serde::de::Error>::custom(format!(
                        "DeviceIDs key {node:?} of pod {} container {} is not a NUMA node number",
                        e.pod_uid, e.container
                    ))
                })?;
                devices.insert(node, ids.unwrap_or_default());
            }
            let response = e
                .alloc_resp
                .as_deref()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .and_then(|b| decode_response(&b));
            entries.push(PodDevicesEntry {
                pod_uid: e.pod_uid,
                container: e.container,
                resource: e.resource,
                devices,
                response,
            });
        }
        let registered = wire
            .data
            .registered
            .unwrap_or_default()
            .into_iter()
            .map(|(r, ids)| (r, ids.unwrap_or_default()))
            .collect();
        Ok(DeviceCheckpoint {
            entries,
            registered,
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "Data")]
    data: WireData,
    #[serde(rename = "Checksum")]
    checksum: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireData {
    #[serde(rename = "PodDeviceEntries", default)]
    entries: Option<Vec<WireEntry>>,
    #[serde(rename = "RegisteredDevices", default)]
    registered: Option<BTreeMap<String, Option<Vec<String>>>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireEntry {
    #[serde(rename = "PodUID", default)]
    pod_uid: String,
    #[serde(rename = "ContainerName", default)]
    container: String,
    #[serde(rename = "ResourceName", default)]
    resource: String,
    /// NUMA node (as JSON's string key) → ids.
    #[serde(rename = "DeviceIDs", default)]
    devices: Option<BTreeMap<String, Option<Vec<String>>>>,
    /// Base64 of the protobuf bytes (Go's `[]byte`).
    #[serde(rename = "AllocResp", default)]
    alloc_resp: Option<String>,
}

/// Go's checksum of the `Data` member: FNV-1a 32 over [`go_rendering`].
fn checksum(data: &WireData) -> Result<u64, CheckpointError> {
    let rendering = go_rendering(data)?;
    Ok(u64::from(
        rendering.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        }),
    ))
}

/// What Go's `hashutil.DeepHashObject` hashes for a `checkpointData` value: spew's `%#v`
/// with sorted keys. Struct fields carry their type, slice elements and map keys and values
/// do not; strings are bare, bytes decimal, a nil slice or map is `<nil>`; map keys sort by
/// value (NUMA nodes numerically).
fn go_rendering(data: &WireData) -> Result<String, CheckpointError> {
    fn list(ids: &Option<Vec<String>>) -> String {
        match ids {
            None => "<nil>".to_string(),
            Some(ids) => format!("[{}]", ids.join(" ")),
        }
    }
    let entries = match &data.entries {
        None => "<nil>".to_string(),
        Some(entries) => {
            let mut out = Vec::with_capacity(entries.len());
            for e in entries {
                let devices = match &e.devices {
                    None => "<nil>".to_string(),
                    Some(map) => {
                        let mut nodes = Vec::with_capacity(map.len());
                        for (k, v) in map {
                            let n: i64 = k.parse().map_err(|_| {
                                <serde_json::Error as serde::de::Error>::custom(format!(
                                    "DeviceIDs key {k:?} is not a NUMA node number"
                                ))
                            })?;
                            nodes.push((n, list(v)));
                        }
                        nodes.sort_by_key(|(n, _)| *n);
                        let inner: Vec<String> =
                            nodes.iter().map(|(n, v)| format!("{n}:{v}")).collect();
                        format!("map[{}]", inner.join(" "))
                    }
                };
                let bytes = match &e.alloc_resp {
                    None => "<nil>".to_string(),
                    Some(b64) => {
                        let raw = base64::engine::general_purpose::STANDARD
                            .decode(b64)
                            .map_err(|err| {
                                <serde_json::Error as serde::de::Error>::custom(format!(
                                    "AllocResp of pod {} container {} is not base64: {err}",
                                    e.pod_uid, e.container
                                ))
                            })?;
                        let nums: Vec<String> = raw.iter().map(u8::to_string).collect();
                        format!("[{}]", nums.join(" "))
                    }
                };
                out.push(format!(
                    "{{PodUID:(string){} ContainerName:(string){} ResourceName:(string){} \
                     DeviceIDs:(checkpoint.DevicesPerNUMA){devices} AllocResp:([]uint8){bytes}}}",
                    e.pod_uid, e.container, e.resource
                ));
            }
            format!("[{}]", out.join(" "))
        }
    };
    let registered = match &data.registered {
        None => "<nil>".to_string(),
        Some(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(r, v)| format!("{r}:{}", list(v)))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
    };
    Ok(format!(
        "(checkpoint.checkpointData){{PodDeviceEntries:([]checkpoint.PodDevicesEntry){entries} \
         RegisteredDevices:(map[string][]string){registered}}}"
    ))
}

/// The protobuf form of `ContainerAllocateResponse` (`deviceplugin/v1beta1`, the field
/// numbers of the API), for the checkpoint's `AllocResp` bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocResp {
    /// `envs = 1`.
    #[prost(btree_map = "string, string", tag = "1")]
    pub envs: BTreeMap<String, String>,
    /// `mounts = 2`.
    #[prost(message, repeated, tag = "2")]
    pub mounts: Vec<AllocMount>,
    /// `devices = 3`.
    #[prost(message, repeated, tag = "3")]
    pub devices: Vec<AllocDeviceSpec>,
    /// `annotations = 4`.
    #[prost(btree_map = "string, string", tag = "4")]
    pub annotations: BTreeMap<String, String>,
    /// `cdi_devices = 5`.
    #[prost(message, repeated, tag = "5")]
    pub cdi_devices: Vec<AllocCdiDevice>,
}

/// `Mount`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocMount {
    /// `container_path = 1`.
    #[prost(string, tag = "1")]
    pub container_path: String,
    /// `host_path = 2`.
    #[prost(string, tag = "2")]
    pub host_path: String,
    /// `read_only = 3`.
    #[prost(bool, tag = "3")]
    pub read_only: bool,
}

/// `DeviceSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocDeviceSpec {
    /// `container_path = 1`.
    #[prost(string, tag = "1")]
    pub container_path: String,
    /// `host_path = 2`.
    #[prost(string, tag = "2")]
    pub host_path: String,
    /// `permissions = 3`.
    #[prost(string, tag = "3")]
    pub permissions: String,
}

/// `CDIDevice`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AllocCdiDevice {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// The protobuf bytes of a container's allocation.
pub fn encode_response(a: &ContainerAllocation) -> Vec<u8> {
    use prost::Message as _;
    AllocResp {
        envs: a.envs.clone(),
        mounts: a
            .mounts
            .iter()
            .map(|m| AllocMount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                read_only: m.read_only,
            })
            .collect(),
        devices: a
            .devices
            .iter()
            .map(|d| AllocDeviceSpec {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        annotations: a.annotations.clone(),
        cdi_devices: a
            .cdi_devices
            .iter()
            .map(|n| AllocCdiDevice { name: n.clone() })
            .collect(),
    }
    .encode_to_vec()
}

/// A container's allocation from its protobuf bytes; `None` when they do not decode.
pub fn decode_response(bytes: &[u8]) -> Option<ContainerAllocation> {
    use prost::Message as _;
    let r = AllocResp::decode(bytes).ok()?;
    Some(ContainerAllocation {
        envs: r.envs,
        mounts: r
            .mounts
            .into_iter()
            .map(|m| DeviceMount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: r
            .devices
            .into_iter()
            .map(|d| DeviceNode {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: r.annotations,
        cdi_devices: r.cdi_devices.into_iter().map(|c| c.name).collect(),
    })
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
