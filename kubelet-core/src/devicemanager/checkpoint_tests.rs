#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

/// Written by the Go kubelet v1.20.2's own `checkpoint.Data.MarshalCheckpoint` (its tree's
/// `pkg/kubelet/cm/devicemanager/checkpoint`, run with Go 1.15 on this project's machine by
/// `scripts/go-device-checkpoint-vectors.go`); the first AllocResp is gogo-protobuf's encoding
/// of envs {A:1, B:2}, a mount /tmp/Dev-1, a device /dev/x → /dev/null "rw" and an
/// annotation k=v.
const GO_WRITTEN: [&str; 3] = [
    r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{}},"Checksum":3467439661}"#,
    r#"{"Data":{"PodDeviceEntries":null,"RegisteredDevices":{"a.io/b":[],"example.com/resource":["Dev-2","Dev-1"]}},"Checksum":1892256308}"#,
    r#"{"Data":{"PodDeviceEntries":[{"PodUID":"pod-a","ContainerName":"c","ResourceName":"example.com/resource","DeviceIDs":{"0":["Dev-1"]},"AllocResp":"CgYKAUESATEKBgoBQhIBMhIYCgovdG1wL0Rldi0xEgovdG1wL0Rldi0xGhcKBi9kZXYveBIJL2Rldi9udWxsGgJydyIGCgFrEgF2"},{"PodUID":"pod-b","ContainerName":"d","ResourceName":"example.com/resource","DeviceIDs":{"-1":["Dev-5"],"1":["Dev-3","Dev-2"],"10":["Dev-4"]},"AllocResp":""}],"RegisteredDevices":{"example.com/resource":["Dev-1","Dev-2"]}},"Checksum":3231657972}"#,
];

/// Go's spew rendering of the third case (what its checksum hashed).
const GO_RENDERING_3: &str = "(checkpoint.checkpointData){PodDeviceEntries:([]checkpoint.PodDevicesEntry)[{PodUID:(string)pod-a ContainerName:(string)c ResourceName:(string)example.com/resource DeviceIDs:(checkpoint.DevicesPerNUMA)map[0:[Dev-1]] AllocResp:([]uint8)[10 6 10 1 65 18 1 49 10 6 10 1 66 18 1 50 18 24 10 10 47 116 109 112 47 68 101 118 45 49 18 10 47 116 109 112 47 68 101 118 45 49 26 23 10 6 47 100 101 118 47 120 18 9 47 100 101 118 47 110 117 108 108 26 2 114 119 34 6 10 1 107 18 1 118]} {PodUID:(string)pod-b ContainerName:(string)d ResourceName:(string)example.com/resource DeviceIDs:(checkpoint.DevicesPerNUMA)map[-1:[Dev-5] 1:[Dev-3 Dev-2] 10:[Dev-4]] AllocResp:([]uint8)[]}] RegisteredDevices:(map[string][]string)map[example.com/resource:[Dev-1 Dev-2]]}";

#[test]
fn reads_and_writes_go_checkpoints_byte_for_byte() {
    for go in GO_WRITTEN {
        let cp = DeviceCheckpoint::from_json(go.as_bytes()).unwrap();
        let ours = cp.to_json().unwrap();
        assert_eq!(String::from_utf8(ours).unwrap(), go);
    }
}

#[test]
fn renders_what_go_hashes() {
    let wire: Wire = serde_json::from_str(GO_WRITTEN[2]).unwrap();
    assert_eq!(go_rendering(&wire.data).unwrap(), GO_RENDERING_3);
}

#[test]
fn decodes_gos_allocation_response() {
    let cp = DeviceCheckpoint::from_json(GO_WRITTEN[2].as_bytes()).unwrap();
    let a = cp.entries[0].response.clone().unwrap();
    assert_eq!(a.envs.get("A").map(String::as_str), Some("1"));
    assert_eq!(a.envs.get("B").map(String::as_str), Some("2"));
    assert_eq!(
        a.mounts,
        vec![DeviceMount {
            container_path: "/tmp/Dev-1".into(),
            host_path: "/tmp/Dev-1".into(),
            read_only: false
        }]
    );
    assert_eq!(a.devices[0].host_path, "/dev/null");
    assert_eq!(a.devices[0].permissions, "rw");
    assert_eq!(a.annotations.get("k").map(String::as_str), Some("v"));
    assert_eq!(
        cp.entries[1].devices,
        BTreeMap::from([
            (-1, vec!["Dev-5".to_string()]),
            (1, vec!["Dev-3".to_string(), "Dev-2".to_string()]),
            (10, vec!["Dev-4".to_string()]),
        ])
    );
    assert_eq!(cp.entries[1].response, Some(ContainerAllocation::default()));
    // The bytes re-encode as Go encoded them.
    let go_bytes = base64::engine::general_purpose::STANDARD
        .decode("CgYKAUESATEKBgoBQhIBMhIYCgovdG1wL0Rldi0xEgovdG1wL0Rldi0xGhcKBi9kZXYveBIJL2Rldi9udWxsGgJydyIGCgFrEgF2")
        .unwrap();
    assert_eq!(encode_response(&a), go_bytes);
}

#[test]
fn a_changed_file_is_corrupt_and_checksum_zero_is_accepted() {
    let changed = GO_WRITTEN[2].replace("Dev-5", "Dev-6");
    let err = DeviceCheckpoint::from_json(changed.as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Corrupt {
                found: 3231657972,
                ..
            }
        ),
        "{err}"
    );
    let unchecked = changed.replace("3231657972", "0");
    let cp = DeviceCheckpoint::from_json(unchecked.as_bytes()).unwrap();
    assert_eq!(cp.entries[1].devices[&-1], vec!["Dev-6".to_string()]);
}

#[test]
fn bad_input_says_what_is_wrong() {
    let cases: &[(&[u8], &str)] = &[
        (b"{", "not valid JSON"),
        (br#"{"Data":{"PodDeviceEntries":[{"PodUID":"p","DeviceIDs":{"x":["a"]}}]},"Checksum":0}"#, "DeviceIDs key \"x\""),
        (br#"{"Data":{"PodDeviceEntries":[{"PodUID":"p","AllocResp":"!!"}]},"Checksum":5}"#, "not base64"),
    ];
    for (input, want) in cases {
        let err = DeviceCheckpoint::from_json(input).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    let huge = vec![b' '; crate::checkpoint_file::MAX_CHECKPOINT_BYTES + 1];
    assert!(matches!(
        DeviceCheckpoint::from_json(&huge),
        Err(CheckpointError::TooLarge { .. })
    ));
    // Undecodable response bytes: the entry is kept without a response (Go skips it).
    let cp = DeviceCheckpoint::from_json(
        br#"{"Data":{"PodDeviceEntries":[{"PodUID":"p","ContainerName":"c","ResourceName":"r","DeviceIDs":{"0":["a"]},"AllocResp":"/w=="}]},"Checksum":0}"#,
    )
    .unwrap();
    assert_eq!(cp.entries[0].response, None);
}
