use super::*;

/// Written by Go's own `MarshalCheckpoint` and checksum package
/// (`scripts/go-memory-checkpoint-vectors.sh`): the `None` policy's file, the static
/// policy's before the machine is filled in, and a state with a node group, huge pages, an
/// init container's emptied block and node 10 (keys sort as strings in JSON, as numbers
/// in the checksum).
const GO_WRITTEN: [&str; 3] = [
    r#"{"policyName":"None","machineState":{},"checksum":4236770233}"#,
    r#"{"policyName":"Static","machineState":{},"checksum":3940083781}"#,
    r#"{"policyName":"Static","machineState":{"0":{"numberOfAssignments":3,"memoryMap":{"hugepages-1Gi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"hugepages-2Mi":{"total":67108864,"systemReserved":0,"allocatable":67108864,"reserved":4194304,"free":62914560},"memory":{"total":1073741824,"systemReserved":104857600,"allocatable":968884224,"reserved":536870912,"free":432013312}},"cells":[0,1]},"1":{"numberOfAssignments":1,"memoryMap":{"hugepages-1Gi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":2147483648,"systemReserved":0,"allocatable":2147483648,"reserved":1073741824,"free":1073741824}},"cells":[0,1]},"10":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":1073741824,"systemReserved":0,"allocatable":1073741824,"reserved":0,"free":1073741824}},"cells":[10]},"2":{"numberOfAssignments":1,"memoryMap":{"memory":{"total":1073741824,"systemReserved":0,"allocatable":1073741824,"reserved":268435456,"free":805306368}},"cells":[2]}},"entries":{"pod-a":{"c":[{"numaAffinity":[0,1],"type":"memory","size":1610612736},{"numaAffinity":[0,1],"type":"hugepages-2Mi","size":4194304}],"init":[{"numaAffinity":[0,1],"type":"memory","size":0}]},"pod-b":{"app":[{"numaAffinity":[2],"type":"memory","size":268435456}]}},"checksum":2132451283}"#,
];

/// The Go tree's own test file (`state_checkpoint_test.go`): `cells` empty.
const GO_TEST_FILE: &str = r#"{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum":4215593881}"#;

fn policy(json: &str) -> &str {
    if json.contains("\"None\"") {
        "None"
    } else {
        "Static"
    }
}

#[test]
fn reads_and_writes_go_checkpoints_byte_for_byte() {
    for json in GO_WRITTEN {
        let state = MemoryManagerState::from_json(json.as_bytes(), policy(json)).unwrap();
        let written = state.to_json().unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), json);
    }
    let state = MemoryManagerState::from_json(GO_WRITTEN[2].as_bytes(), "Static").unwrap();
    assert_eq!(
        state.machine_state.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2, 10]
    );
    assert_eq!(state.machine_state[&0].cells, [0, 1]);
    assert_eq!(
        state.machine_state[&0].memory_map["memory"],
        MemoryTable {
            total: 1 << 30,
            system_reserved: 100 << 20,
            allocatable: (1 << 30) - (100 << 20),
            reserved: 512 << 20,
            free: (1 << 30) - (100 << 20) - (512 << 20),
        }
    );
    assert_eq!(
        state.blocks("pod-a", "c").unwrap()[1],
        Block {
            numa_affinity: vec![0, 1],
            resource: "hugepages-2Mi".into(),
            size: 4 << 20,
        }
    );
}

#[test]
fn the_go_trees_own_test_file_verifies() {
    let state = MemoryManagerState::from_json(GO_TEST_FILE.as_bytes(), "static").unwrap();
    assert!(state.machine_state[&0].cells.is_empty());
    assert_eq!(state.blocks("pod", "container1").unwrap()[0].size, 512);
}

#[test]
fn null_and_empty_differ_in_the_checksum_as_in_go() {
    // Go reads an explicit null as a nil map, which spew renders <nil>: the checksum of
    // the empty map no longer matches.
    let null = GO_WRITTEN[1].replace("{}", "null");
    assert!(matches!(
        MemoryManagerState::from_json(null.as_bytes(), "Static"),
        Err(CheckpointError::Corrupt { .. })
    ));
    // A missing machineState is Go's pre-initialised empty map: same checksum.
    let missing = r#"{"policyName":"Static","checksum":3940083781}"#;
    assert!(MemoryManagerState::from_json(missing.as_bytes(), "Static").is_ok());
}

#[test]
fn corrupt_policy_and_bad_values_say_what_is_wrong() {
    let changed = GO_WRITTEN[2].replace("\"size\":268435456", "\"size\":268435457");
    assert!(matches!(
        MemoryManagerState::from_json(changed.as_bytes(), "Static"),
        Err(CheckpointError::Corrupt {
            found: 2132451283,
            ..
        })
    ));
    // Checksum 0 is not special in v1.25.
    let zero = r#"{"policyName":"None","machineState":{},"checksum":0}"#;
    assert!(matches!(
        MemoryManagerState::from_json(zero.as_bytes(), "None"),
        Err(CheckpointError::Corrupt { .. })
    ));
    let err = MemoryManagerState::from_json(GO_WRITTEN[0].as_bytes(), "Static").unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"[memorymanager] configured policy "Static" differs from state checkpoint policy "None""#
    );
    for (json, want) in [
        ("not json", "JSON"),
        (
            r#"{"policyName":"None","machineState":{"x":null},"checksum":1}"#,
            "NUMA node key",
        ),
    ] {
        let err = MemoryManagerState::from_json(json.as_bytes(), "None").unwrap_err();
        assert!(err.to_string().contains(want), "{json}: {err}");
    }
    let huge = vec![b' '; MAX_STATE_FILE_BYTES + 1];
    assert!(matches!(
        MemoryManagerState::from_json(&huge, "None"),
        Err(CheckpointError::TooLarge { .. })
    ));
}
