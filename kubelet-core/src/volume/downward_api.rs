//! `downwardAPI` volumes (and downwardAPI sources of projected volumes): each item is a file
//! holding a `fieldRef` (metadata.name/namespace/uid, labels and annotations whole or by key)
//! or a `resourceFieldRef` (of a named container, with divisor), with `mode` or the default.
//! Rewritten on every sync, so label and annotation changes reach the files.

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod};

use super::atomic_writer::{FileProjection, Payload};
use super::configmap::mode_bits;
use super::VolumeError;
use crate::cm::ResourceList;
use crate::env::{field_ref_value, resource_field_value, FieldValues};

/// The payload of a list of downward API items.
pub fn payload(
    volume: &str,
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: i32,
    fields: &FieldValues,
    allocatable: &ResourceList,
) -> Result<Payload, VolumeError> {
    let mut out = Payload::new();
    for item in items {
        let data = if let Some(fr) = item.field_ref.as_ref() {
            field_ref_value(pod, &fr.field_path, fields).ok_or_else(|| VolumeError::FieldRef {
                volume: volume.to_string(),
                path: fr.field_path.clone(),
            })?
        } else if let Some(rr) = item.resource_field_ref.as_ref() {
            let name = rr.container_name.clone().unwrap_or_default();
            let spec = pod.spec.as_ref();
            let c = spec
                .and_then(|s| {
                    s.containers
                        .iter()
                        .chain(s.init_containers.iter().flatten())
                        .find(|c| c.name == name)
                })
                .ok_or_else(|| VolumeError::ResourceField {
                    volume: volume.to_string(),
                    resource: rr.resource.clone(),
                    message: format!("container {name:?} not found in the pod"),
                })?;
            resource_field_value(c, &rr.resource, rr.divisor.as_ref(), allocatable).map_err(
                |error| VolumeError::ResourceField {
                    volume: volume.to_string(),
                    resource: rr.resource.clone(),
                    message: error.to_string(),
                },
            )?
        } else {
            continue;
        };
        out.insert(
            item.path.clone(),
            FileProjection {
                data: data.into_bytes(),
                mode: mode_bits(item.mode.unwrap_or(default_mode)),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ObjectFieldSelector, PodSpec, ResourceFieldSelector, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn fields_and_resources() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                labels: Some(
                    [
                        ("b".to_string(), "two \"quoted\"".to_string()),
                        ("a".to_string(), "one".to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some([("memory".to_string(), Quantity("64Mi".into()))].into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let field = |path: &str, fp: &str| DownwardAPIVolumeFile {
            path: path.into(),
            field_ref: Some(ObjectFieldSelector {
                field_path: fp.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let items = vec![
            field("labels", "metadata.labels"),
            field("name", "metadata.name"),
            field("a", "metadata.labels['a']"),
            DownwardAPIVolumeFile {
                path: "mem".into(),
                resource_field_ref: Some(ResourceFieldSelector {
                    container_name: Some("c".into()),
                    resource: "limits.memory".into(),
                    divisor: Some(Quantity("1Mi".into())),
                }),
                mode: Some(0o400),
                ..Default::default()
            },
        ];
        let p = payload(
            "v",
            &pod,
            &items,
            0o644,
            &FieldValues::default(),
            &ResourceList::new(),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(p["labels"].data.clone()).unwrap(),
            "a=\"one\"\nb=\"two \\\"quoted\\\"\""
        );
        assert_eq!(p["name"].data, b"p");
        assert_eq!(p["a"].data, b"one");
        assert_eq!(p["mem"].data, b"64");
        assert_eq!(p["mem"].mode, 0o400);
        let bad = vec![field("x", "status.bogus")];
        assert!(payload(
            "v",
            &pod,
            &bad,
            0o644,
            &FieldValues::default(),
            &ResourceList::new()
        )
        .is_err());
    }
}
