//! The lean listings against k8s-cri's generated messages: every response the generated
//! decoder reads must give the same summaries through [`super::wire`].

use std::collections::HashMap;

use bytes::Bytes;
use k8s_cri::v1 as cri;
use proptest::prelude::*;
use prost::Message;

use super::{container_summary, sandbox_summary, wire};
use crate::mapping::{
    self, CONTAINER_HASH_ANNOTATION, CONTAINER_NAME_LABEL, POD_NAMESPACE_LABEL, POD_NAME_LABEL,
    POD_UID_LABEL,
};

/// Maps whose keys are often the kubelet's own.
fn string_map(
    kubelet_keys: &'static [&'static str],
) -> impl Strategy<Value = HashMap<String, String>> {
    let key = prop_oneof![
        proptest::sample::select(kubelet_keys).prop_map(str::to_string),
        "[a-z./]{1,12}",
    ];
    // Values: short words, hex (a hash), or anything.
    let value = prop_oneof!["[a-z0-9-]{0,10}", "[0-9a-f]{1,17}", any::<String>()];
    proptest::collection::hash_map(key, value, 0..6)
}

const CONTAINER_KEYS: &[&str] = &[
    POD_UID_LABEL,
    POD_NAME_LABEL,
    POD_NAMESPACE_LABEL,
    CONTAINER_NAME_LABEL,
    CONTAINER_HASH_ANNOTATION,
];

fn container() -> impl Strategy<Value = cri::Container> {
    (
        ("[a-f0-9]{0,12}", "[a-f0-9]{0,12}", "[a-z:/.@0-9]{0,20}"),
        proptest::option::of(("[a-z-]{0,8}", any::<u32>())),
        proptest::option::of(("[a-z:/.0-9]{0,20}", string_map(&["example.com/key"]))),
        (-1i32..5, any::<i64>()),
        (string_map(CONTAINER_KEYS), string_map(CONTAINER_KEYS)),
    )
        .prop_map(
            |(
                (id, sandbox, image_ref),
                meta,
                image,
                (state, created_at),
                (labels, annotations),
            )| {
                cri::Container {
                    id,
                    pod_sandbox_id: sandbox,
                    metadata: meta.map(|(name, attempt)| cri::ContainerMetadata { name, attempt }),
                    image: image.map(|(image, annotations)| cri::ImageSpec {
                        image,
                        annotations,
                        ..Default::default()
                    }),
                    image_ref,
                    state,
                    created_at,
                    labels,
                    annotations,
                    ..Default::default()
                }
            },
        )
}

fn sandbox() -> impl Strategy<Value = cri::PodSandbox> {
    (
        ("[a-f0-9]{0,12}", "[a-z]{0,6}"),
        proptest::option::of(("[a-z-]{0,8}", "[a-z0-9-]{0,8}", "[a-z]{0,6}", any::<u32>())),
        (-1i32..3, any::<i64>()),
        (string_map(CONTAINER_KEYS), string_map(&["example.com/key"])),
    )
        .prop_map(
            |((id, runtime_handler), meta, (state, created_at), (labels, annotations))| {
                cri::PodSandbox {
                    id,
                    metadata: meta.map(|(name, uid, namespace, attempt)| cri::PodSandboxMetadata {
                        name,
                        uid,
                        namespace,
                        attempt,
                    }),
                    state,
                    created_at,
                    labels,
                    annotations,
                    runtime_handler,
                }
            },
        )
}

proptest! {
    #[test]
    fn containers_read_as_the_generated_messages_do(
        containers in proptest::collection::vec(container(), 0..5)
    ) {
        let bytes = Bytes::from(cri::ListContainersResponse { containers }.encode_to_vec());
        let full = cri::ListContainersResponse::decode(bytes.clone()).unwrap();
        let lean = wire::ListContainersResponse::decode(bytes).unwrap();
        let want: Vec<_> = full.containers.iter().filter_map(mapping::container_summary).collect();
        let got: Vec<_> = lean.containers.iter().filter_map(container_summary).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn sandboxes_read_as_the_generated_messages_do(
        items in proptest::collection::vec(sandbox(), 0..5)
    ) {
        let bytes = Bytes::from(cri::ListPodSandboxResponse { items }.encode_to_vec());
        let full = cri::ListPodSandboxResponse::decode(bytes.clone()).unwrap();
        let lean = wire::ListPodSandboxResponse::decode(bytes).unwrap();
        let want: Vec<_> = full.items.iter().filter_map(mapping::sandbox_summary).collect();
        let got: Vec<_> = lean.items.iter().filter_map(sandbox_summary).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = wire::ListContainersResponse::decode(bytes.as_slice());
        let _ = wire::ListPodSandboxResponse::decode(bytes.as_slice());
    }
}

fn entry(key: &str, value: &[u8]) -> wire::Entry {
    wire::Entry {
        key: Bytes::copy_from_slice(key.as_bytes()),
        value: Bytes::copy_from_slice(value),
    }
}

#[test]
fn a_key_given_twice_counts_its_last_value() {
    let sent = wire::ListContainersResponse {
        containers: vec![wire::Container {
            id: Bytes::from_static(b"c1"),
            labels: vec![
                entry(POD_UID_LABEL, b"first"),
                entry(CONTAINER_NAME_LABEL, b"app"),
                entry(POD_UID_LABEL, b"second"),
            ],
            annotations: vec![
                entry(CONTAINER_HASH_ANNOTATION, b"1f"),
                entry(CONTAINER_HASH_ANNOTATION, b"2a"),
            ],
            ..Default::default()
        }],
    };
    let bytes = Bytes::from(sent.encode_to_vec());
    let full = cri::ListContainersResponse::decode(bytes.clone()).unwrap();
    let lean = wire::ListContainersResponse::decode(bytes).unwrap();
    let got = container_summary(&lean.containers[0]).unwrap();
    assert_eq!((got.pod.uid.as_str(), got.hash), ("second", 0x2a));
    assert_eq!(Some(got), mapping::container_summary(&full.containers[0]));
}

#[test]
fn invalid_utf8_in_a_field_not_read_does_not_fail_the_listing() {
    let sent = wire::ListContainersResponse {
        containers: vec![wire::Container {
            id: Bytes::from_static(b"c1"),
            labels: vec![
                entry(POD_UID_LABEL, b"u1"),
                entry(CONTAINER_NAME_LABEL, b"app"),
            ],
            annotations: vec![entry("vendor.example/blob", &[0xff, 0xfe])],
            ..Default::default()
        }],
    };
    let bytes = Bytes::from(sent.encode_to_vec());
    assert!(cri::ListContainersResponse::decode(bytes.clone()).is_err());
    let lean = wire::ListContainersResponse::decode(bytes).unwrap();
    let got = container_summary(&lean.containers[0]).unwrap();
    assert_eq!((got.id.as_str(), got.name.as_str()), ("c1", "app"));
}

#[test]
fn objects_without_the_kubelets_labels_are_not_the_kubelets() {
    let foreign = wire::Container {
        id: Bytes::from_static(b"c1"),
        labels: vec![entry(CONTAINER_NAME_LABEL, b"app")],
        ..Default::default()
    };
    assert!(container_summary(&foreign).is_none());
    assert!(sandbox_summary(&wire::PodSandbox::default()).is_none());
}
