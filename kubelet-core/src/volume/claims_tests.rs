use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LocalVolumeSource, NFSVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;
use crate::objects::{MemoryObjectStore, StandaloneObjectStore};

/// The claim `ns/data` (uid `claim-uid`) in this phase, bound to `volume`.
pub(in crate::volume) fn claim(phase: &str, volume: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".into()),
            namespace: Some("ns".into()),
            uid: Some("claim-uid".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: volume.map(str::to_string),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
    }
}

fn volume(claim_uid: Option<&str>, mode: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv1".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            claim_ref: claim_uid.map(|u| ObjectReference {
                uid: Some(u.into()),
                ..Default::default()
            }),
            local: Some(LocalVolumeSource {
                path: "/mnt/disks/a".into(),
                ..Default::default()
            }),
            volume_mode: mode.map(str::to_string),
            ..Default::default()
        }),
        ..Default::default()
    }
}

async fn resolve_with(
    pvc: Option<PersistentVolumeClaim>,
    pv: Option<PersistentVolume>,
    mounted: bool,
    as_device: bool,
) -> Result<BoundVolume, ClaimError> {
    let store = MemoryObjectStore::new();
    if let Some(c) = pvc {
        store.put_persistent_volume_claim(c);
    }
    if let Some(v) = pv {
        store.put_persistent_volume(v);
    }
    resolve(&store, "ns", "data", true, "vol", mounted, as_device).await
}

/// (what, claim, volume, used in volumeMounts, used in volumeDevices, the error).
type Case = (
    &'static str,
    Option<PersistentVolumeClaim>,
    Option<PersistentVolume>,
    bool,
    bool,
    &'static str,
);

#[tokio::test]
async fn claims_resolve_with_gos_checks_and_messages() {
    let mut deleting = claim("Bound", Some("pv1"));
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let cases: Vec<Case> = vec![
        ("no claim", None, None, true, false,
         "failed to fetch PVC from API server: persistentvolumeclaim \"data\" not found in namespace ns"),
        ("deleting", Some(deleting), Some(volume(Some("claim-uid"), None)), true, false, "PVC is being deleted"),
        ("pending", Some(claim("Pending", None)), None, true, false, "PVC is not bound"),
        ("no volume name", Some(claim("Bound", None)), None, true, false, "PVC has empty pvc.Spec.VolumeName"),
        ("no volume", Some(claim("Bound", Some("pv1"))), None, true, false,
         "failed to fetch PV pv1 from API server: persistentvolume \"pv1\" not found in namespace "),
        ("volume unbound", Some(claim("Bound", Some("pv1"))), Some(volume(None, None)), true, false,
         "found PV object pv1 but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim"),
        ("other claim", Some(claim("Bound", Some("pv1"))), Some(volume(Some("old-uid"), None)), true, false,
         "found PV object pv1 but its pv.Spec.ClaimRef.UID old-uid does not point to claim.UID claim-uid"),
        ("block mounted", Some(claim("Bound", Some("pv1"))), Some(volume(Some("claim-uid"), Some("Block"))), true, false,
         "volume vol has volumeMode Block, but is specified in volumeMounts"),
        ("filesystem as device", Some(claim("Bound", Some("pv1"))), Some(volume(Some("claim-uid"), None)), false, true,
         "volume vol has volumeMode Filesystem, but is specified in volumeDevices"),
    ];
    for (what, pvc, pv, mounted, device, want) in cases {
        let err = resolve_with(pvc, pv, mounted, device).await.unwrap_err();
        assert_eq!(err.to_string(), want, "{what}");
    }
    let ok = resolve_with(
        Some(claim("Bound", Some("pv1"))),
        Some(volume(Some("claim-uid"), None)),
        true,
        false,
    )
    .await
    .unwrap();
    assert_eq!((ok.name.as_str(), ok.read_only), ("pv1", true));
    assert_eq!(ok.mode(), "Filesystem");
    assert_eq!(
        source_of(&ok.spec()),
        Ok(VolumeSource::Local("/mnt/disks/a".into()))
    );
}

#[tokio::test]
async fn standalone_names_what_is_missing() {
    let err = resolve(
        &StandaloneObjectStore,
        "ns",
        "data",
        false,
        "vol",
        true,
        false,
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to fetch PVC from API server: persistentvolumeclaim ns/data: cluster objects are not available in standalone mode"
    );
}

fn with_affinity(terms: Vec<NodeSelectorTerm>) -> PersistentVolume {
    let mut pv = volume(Some("claim-uid"), None);
    if let Some(spec) = pv.spec.as_mut() {
        spec.node_affinity = Some(VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: terms,
            }),
        });
    }
    pv
}

fn term(key: &str, op: &str, values: &[&str]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }]),
        match_fields: None,
    }
}

#[test]
fn node_affinity_is_checked_against_the_labels() {
    let labels: BTreeMap<String, String> =
        [("kubernetes.io/hostname".to_string(), "node-a".to_string())].into();
    let host = "kubernetes.io/hostname";
    let table = [
        ("no affinity", volume(None, None), Ok(())),
        (
            "matching term",
            with_affinity(vec![term(host, "In", &["node-a"])]),
            Ok(()),
        ),
        (
            "one of two terms",
            with_affinity(vec![
                term(host, "In", &["node-b"]),
                term(host, "In", &["node-a"]),
            ]),
            Ok(()),
        ),
        (
            "other node",
            with_affinity(vec![term(host, "In", &["node-b"])]),
            Err("no matching NodeSelectorTerms"),
        ),
        (
            "no terms",
            with_affinity(vec![]),
            Err("no matching NodeSelectorTerms"),
        ),
    ];
    for (what, pv, want) in table {
        assert_eq!(check_node_affinity(&pv, &labels), want, "{what}");
    }
}

#[test]
fn sources_are_named() {
    let spec = PersistentVolumeSpec {
        nfs: Some(NFSVolumeSource {
            path: "/x".into(),
            server: "s".into(),
            read_only: None,
        }),
        storage_class_name: Some("slow".into()),
        ..Default::default()
    };
    assert_eq!(source_of(&spec), Err("nfs".to_string()));
    assert_eq!(
        source_of(&PersistentVolumeSpec::default()),
        Err("no source".to_string())
    );
}
