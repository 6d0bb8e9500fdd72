//! `projected` volumes: the files of several sources in one directory — secrets, config maps,
//! downward API items and service-account tokens (TokenRequest with `audience` and
//! `expirationSeconds`, bound to the pod; the store refreshes a token once 80% of its lifetime
//! has passed, and the next sync writes the new one).

use k8s_openapi::api::core::v1::{Pod, ProjectedVolumeSource};

use super::atomic_writer::{FileProjection, Payload};
use super::configmap::{self, key_payload, mode_bits, DEFAULT_MODE};
use super::{downward_api, secret, VolumeError};
use crate::cm::ResourceList;
use crate::env::FieldValues;
use crate::objects::{ObjectStore, TokenRequest};

/// Default `expirationSeconds` of a token projection (API defaulting).
pub const DEFAULT_TOKEN_EXPIRATION_SECONDS: i64 = 3600;

/// The pod's service account (`spec.serviceAccountName`, else "default").
pub fn service_account(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "default".into())
}

/// The payload of a projected volume.
pub async fn payload(
    volume: &str,
    pod: &Pod,
    src: &ProjectedVolumeSource,
    store: &dyn ObjectStore,
    fields: &FieldValues,
    allocatable: &ResourceList,
) -> Result<Payload, VolumeError> {
    let ns = crate::pod::namespace(pod);
    let default_mode = src.default_mode.unwrap_or(DEFAULT_MODE);
    let mut out = Payload::new();
    let object_err = |source| VolumeError::Object {
        volume: volume.to_string(),
        error: source,
    };
    for s in src.sources.iter().flatten() {
        if let Some(sp) = s.secret.as_ref() {
            let optional = sp.optional.unwrap_or(false);
            let data = match store.secret(ns, &sp.name).await {
                Ok(sec) => secret::data_of(&sec),
                Err(e) if e.is_not_found() && optional => Default::default(),
                Err(e) => return Err(object_err(e)),
            };
            out.extend(key_payload(
                volume,
                "secret",
                &data,
                sp.items.as_deref(),
                default_mode,
                optional,
            )?);
        }
        if let Some(cp) = s.config_map.as_ref() {
            let optional = cp.optional.unwrap_or(false);
            let data = match store.config_map(ns, &cp.name).await {
                Ok(cm) => configmap::data_of(&cm),
                Err(e) if e.is_not_found() && optional => Default::default(),
                Err(e) => return Err(object_err(e)),
            };
            out.extend(key_payload(
                volume,
                "configmap",
                &data,
                cp.items.as_deref(),
                default_mode,
                optional,
            )?);
        }
        if let Some(dp) = s.downward_api.as_ref() {
            out.extend(downward_api::payload(
                volume,
                pod,
                dp.items.as_deref().unwrap_or_default(),
                default_mode,
                fields,
                allocatable,
            )?);
        }
        if let Some(tp) = s.service_account_token.as_ref() {
            let request = TokenRequest {
                namespace: ns.to_string(),
                service_account: service_account(pod),
                audiences: tp
                    .audience
                    .clone()
                    .filter(|a| !a.is_empty())
                    .into_iter()
                    .collect(),
                expiration_seconds: tp
                    .expiration_seconds
                    .unwrap_or(DEFAULT_TOKEN_EXPIRATION_SECONDS),
                pod_name: crate::pod::name(pod).to_string(),
                pod_uid: crate::pod::uid(pod).to_string(),
            };
            let token = store
                .service_account_token(&request)
                .await
                .map_err(object_err)?;
            out.insert(
                tp.path.clone(),
                FileProjection {
                    data: token.token.into_bytes(),
                    mode: mode_bits(default_mode),
                },
            );
        }
        if s.cluster_trust_bundle.is_some() {
            return Err(VolumeError::Unsupported {
                volume: volume.to_string(),
                kind: "projected clusterTrustBundle".into(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::MemoryObjectStore;
    use k8s_openapi::api::core::v1::{
        ConfigMap, ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, KeyToPath,
        ObjectFieldSelector, PodSpec, SecretProjection, ServiceAccountTokenProjection,
        VolumeProjection,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// The volume `kubectl run` pods get (kube-api-access-*).
    fn api_access() -> ProjectedVolumeSource {
        ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        expiration_seconds: Some(3607),
                        path: "token".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            ..Default::default()
                        }]),
                        optional: None,
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".into(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.namespace".into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }]),
                    }),
                    ..Default::default()
                },
                VolumeProjection {
                    secret: Some(SecretProjection {
                        name: "absent".into(),
                        optional: Some(true),
                        items: None,
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn kube_api_access_volume() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("sa".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let store = MemoryObjectStore::new();
        let src = api_access();
        let fields = FieldValues::default();
        let alloc = ResourceList::new();
        let e = payload("v", &pod, &src, &store, &fields, &alloc)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("kube-root-ca.crt"), "{e}");
        store.put_config_map(ConfigMap {
            metadata: ObjectMeta {
                name: Some("kube-root-ca.crt".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some([("ca.crt".to_string(), "CA".to_string())].into()),
            ..Default::default()
        });
        let p = payload("v", &pod, &src, &store, &fields, &alloc)
            .await
            .unwrap();
        assert_eq!(
            p.keys().collect::<Vec<_>>(),
            ["ca.crt", "namespace", "token"]
        );
        assert_eq!(p["namespace"].data, b"ns");
        assert_eq!(p["ca.crt"].data, b"CA");
        // The second payload got the cached token.
        let reqs = store.token_requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].service_account, "sa");
        assert_eq!(reqs[0].expiration_seconds, 3607);
        assert_eq!(reqs[0].pod_uid, "u");
        assert!(reqs[0].audiences.is_empty());
        assert_eq!(
            String::from_utf8(p["token"].data.clone()).unwrap(),
            "ns/sa/1"
        );
    }
}
