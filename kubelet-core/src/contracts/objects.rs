//! The contract for cluster objects the kubelet reads on behalf of its pods: config maps,
//! secrets, service-account tokens (TokenRequest), services (for service environment
//! variables), RuntimeClasses (`runtimeClassName` → the handler the sandbox runs with) and
//! the PersistentVolumeClaims and PersistentVolumes behind `persistentVolumeClaim` volumes.
//!
//! In cluster mode an implementation over the API server (kubelet-sources' `objects`) caches
//! objects for the pods that use them ([`ObjectStore::register_pod`] /
//! [`ObjectStore::unregister_pod`]); in standalone mode [`StandaloneObjectStore`] answers every
//! request with [`ObjectError::NotAvailable`], which the engine turns into an event and a
//! waiting reason, never a crash.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};

/// Why an object could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ObjectError {
    /// The object does not exist.
    #[error("{kind} \"{name}\" not found in namespace {namespace}")]
    NotFound {
        /// "configmap", "secret", "serviceaccount", ...
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The kubelet has no API server to ask (standalone mode).
    #[error("{kind} {namespace}/{name}: cluster objects are not available in standalone mode")]
    NotAvailable {
        /// What was asked for.
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// The API server refused or failed the request.
    #[error("{kind} {namespace}/{name}: {message}")]
    Api {
        /// What was asked for.
        kind: &'static str,
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The server's or client's explanation.
        message: String,
    },
}

impl ObjectError {
    /// Whether the object does not exist (an `optional` reference then counts as empty).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ObjectError::NotFound { .. })
    }
}

/// A service-account token issued through the TokenRequest API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountToken {
    /// The JWT.
    pub token: String,
    /// When the token expires.
    pub expiration: SystemTime,
}

/// A TokenRequest for a pod's service account.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenRequest {
    /// Namespace of the pod and service account.
    pub namespace: String,
    /// Service account name.
    pub service_account: String,
    /// Audiences; empty means the API server's default audiences.
    pub audiences: Vec<String>,
    /// Requested lifetime in seconds.
    pub expiration_seconds: i64,
    /// The pod the token is bound to.
    pub pod_name: String,
    /// Uid of the pod the token is bound to.
    pub pod_uid: String,
}

/// Read access to the cluster objects pods reference. See the module docs.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// The config map `namespace/name`.
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, ObjectError>;
    /// The secret `namespace/name`.
    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, ObjectError>;
    /// A token for a service account, bound to a pod (TokenRequest).
    async fn service_account_token(
        &self,
        request: &TokenRequest,
    ) -> Result<ServiceAccountToken, ObjectError>;
    /// The services of a namespace (for service environment variables).
    async fn services(&self, namespace: &str) -> Result<Vec<Service>, ObjectError>;
    /// The RuntimeClass `name` (cluster-scoped; `NotFound` carries an empty namespace).
    /// Default: [`ObjectError::NotAvailable`] — a store without RuntimeClasses cannot run a
    /// pod that names one (never silently the default handler).
    async fn runtime_class(&self, name: &str) -> Result<RuntimeClass, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "runtimeclass",
            namespace: String::new(),
            name: name.into(),
        })
    }
    /// The PersistentVolumeClaim `namespace/name`, as the API server has it now (Go's volume
    /// manager reads claims uncached). Default: [`ObjectError::NotAvailable`].
    async fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "persistentvolumeclaim",
            namespace: namespace.into(),
            name: name.into(),
        })
    }
    /// The PersistentVolume `name` (cluster-scoped; `NotFound` carries an empty namespace),
    /// as the API server has it now. Default: [`ObjectError::NotAvailable`].
    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "persistentvolume",
            namespace: String::new(),
            name: name.into(),
        })
    }
    /// The CSIDriver object of a CSI driver (cluster-scoped; `NotFound` carries an empty
    /// namespace). Default: [`ObjectError::NotAvailable`].
    async fn csi_driver(&self, name: &str) -> Result<CSIDriver, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "csidriver",
            namespace: String::new(),
            name: name.into(),
        })
    }
    /// The VolumeAttachment `name` (cluster-scoped; `NotFound` carries an empty namespace), as
    /// the API server has it now. Default: [`ObjectError::NotAvailable`].
    async fn volume_attachment(&self, name: &str) -> Result<VolumeAttachment, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "volumeattachment",
            namespace: String::new(),
            name: name.into(),
        })
    }
    /// Writes the claim `namespace/name`'s `status.capacity` and `status.conditions` (the
    /// kubelet's part of a volume expansion, Go's `MarkFSResizeFinished`), only while the
    /// claim is at `resource_version` (a conflict error otherwise, as Go's patch with the
    /// resource version). Default: [`ObjectError::NotAvailable`].
    async fn update_claim_status(
        &self,
        namespace: &str,
        name: &str,
        _resource_version: &str,
        _capacity: &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
        _conditions: &[k8s_openapi::api::core::v1::PersistentVolumeClaimCondition],
    ) -> Result<(), ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "persistentvolumeclaim",
            namespace: namespace.into(),
            name: name.into(),
        })
    }
    /// The pod (now) references these objects: a cache may start following them.
    fn register_pod(&self, _pod: &Pod) {}
    /// The pod with this uid is gone: a cache may drop what only it used.
    fn unregister_pod(&self, _uid: &str) {}
}

/// The standalone [`ObjectStore`]: every request fails with [`ObjectError::NotAvailable`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StandaloneObjectStore;

#[async_trait]
impl ObjectStore for StandaloneObjectStore {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "configmap",
            namespace: namespace.into(),
            name: name.into(),
        })
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "secret",
            namespace: namespace.into(),
            name: name.into(),
        })
    }
    async fn service_account_token(
        &self,
        request: &TokenRequest,
    ) -> Result<ServiceAccountToken, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "serviceaccount token",
            namespace: request.namespace.clone(),
            name: request.service_account.clone(),
        })
    }
    async fn services(&self, namespace: &str) -> Result<Vec<Service>, ObjectError> {
        Err(ObjectError::NotAvailable {
            kind: "services",
            namespace: namespace.into(),
            name: String::new(),
        })
    }
}

/// When a cached token must be replaced (Go's token manager): once 80% of its lifetime has
/// passed, or it is older than 24 hours.
pub fn token_needs_refresh(issued: SystemTime, expiration: SystemTime, now: SystemTime) -> bool {
    let Ok(ttl) = expiration.duration_since(issued) else {
        return true;
    };
    let refresh_at = issued + ttl.mul_f64(0.8).min(Duration::from_secs(24 * 3600));
    now >= refresh_at
}

/// An in-memory [`ObjectStore`] for tests and embedders: objects are put in and removed by
/// hand; tokens are minted locally (`<namespace>/<service account>/<n>`) with the requested
/// lifetime and cached per request until [`token_needs_refresh`] says they are due, as an
/// API-server store does. Missing objects answer [`ObjectError::NotFound`].
#[derive(Debug, Default)]
pub struct MemoryObjectStore {
    inner: Mutex<MemoryObjects>,
}

#[derive(Debug, Default)]
struct MemoryObjects {
    config_maps: HashMap<(String, String), ConfigMap>,
    secrets: HashMap<(String, String), Secret>,
    services: HashMap<(String, String), Service>,
    runtime_classes: HashMap<String, RuntimeClass>,
    claims: HashMap<(String, String), PersistentVolumeClaim>,
    persistent_volumes: HashMap<String, PersistentVolume>,
    csi_drivers: HashMap<String, CSIDriver>,
    volume_attachments: HashMap<String, VolumeAttachment>,
    token_requests: Vec<TokenRequest>,
    tokens: HashMap<TokenRequest, (ServiceAccountToken, SystemTime)>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

impl MemoryObjectStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryObjects> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Adds or replaces a config map (keyed by its namespace and name).
    pub fn put_config_map(&self, cm: ConfigMap) {
        self.lock().config_maps.insert(key_of(&cm.metadata), cm);
    }
    /// Adds or replaces a secret.
    pub fn put_secret(&self, s: Secret) {
        self.lock().secrets.insert(key_of(&s.metadata), s);
    }
    /// Adds or replaces a service.
    pub fn put_service(&self, s: Service) {
        self.lock().services.insert(key_of(&s.metadata), s);
    }
    /// Adds or replaces a RuntimeClass (cluster-scoped, keyed by name).
    pub fn put_runtime_class(&self, rc: RuntimeClass) {
        let name = rc.metadata.name.clone().unwrap_or_default();
        self.lock().runtime_classes.insert(name, rc);
    }
    /// Adds or replaces a PersistentVolumeClaim.
    pub fn put_persistent_volume_claim(&self, c: PersistentVolumeClaim) {
        self.lock().claims.insert(key_of(&c.metadata), c);
    }
    /// Adds or replaces a PersistentVolume (cluster-scoped, keyed by name).
    pub fn put_persistent_volume(&self, pv: PersistentVolume) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        self.lock().persistent_volumes.insert(name, pv);
    }
    /// Adds or replaces a CSIDriver (cluster-scoped, keyed by name).
    pub fn put_csi_driver(&self, d: CSIDriver) {
        let name = d.metadata.name.clone().unwrap_or_default();
        self.lock().csi_drivers.insert(name, d);
    }
    /// Adds or replaces a VolumeAttachment (cluster-scoped, keyed by name).
    pub fn put_volume_attachment(&self, va: VolumeAttachment) {
        let name = va.metadata.name.clone().unwrap_or_default();
        self.lock().volume_attachments.insert(name, va);
    }
    /// Removes a config map.
    pub fn remove_config_map(&self, namespace: &str, name: &str) {
        self.lock()
            .config_maps
            .remove(&(namespace.to_string(), name.to_string()));
    }
    /// Every token minted so far (cache hits are not counted).
    pub fn token_requests(&self) -> Vec<TokenRequest> {
        self.lock().token_requests.clone()
    }
}

#[async_trait]
impl ObjectStore for MemoryObjectStore {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, ObjectError> {
        self.lock()
            .config_maps
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "configmap",
                namespace: namespace.into(),
                name: name.into(),
            })
    }
    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, ObjectError> {
        self.lock()
            .secrets
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "secret",
                namespace: namespace.into(),
                name: name.into(),
            })
    }
    async fn service_account_token(
        &self,
        request: &TokenRequest,
    ) -> Result<ServiceAccountToken, ObjectError> {
        let mut inner = self.lock();
        let now = crate::clock::wall_now();
        if let Some((t, issued)) = inner.tokens.get(request) {
            if !token_needs_refresh(*issued, t.expiration, now) {
                return Ok(t.clone());
            }
        }
        inner.token_requests.push(request.clone());
        let n = inner.token_requests.len();
        let secs = u64::try_from(request.expiration_seconds.max(1)).unwrap_or(3600);
        let token = ServiceAccountToken {
            token: format!("{}/{}/{n}", request.namespace, request.service_account),
            expiration: now + Duration::from_secs(secs),
        };
        inner.tokens.insert(request.clone(), (token.clone(), now));
        Ok(token)
    }
    async fn services(&self, namespace: &str) -> Result<Vec<Service>, ObjectError> {
        Ok(self
            .lock()
            .services
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .map(|(_, s)| s.clone())
            .collect())
    }
    async fn update_claim_status(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
        capacity: &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
        conditions: &[k8s_openapi::api::core::v1::PersistentVolumeClaimCondition],
    ) -> Result<(), ObjectError> {
        let mut objects = self.lock();
        let key = (namespace.to_string(), name.to_string());
        let Some(claim) = objects.claims.get_mut(&key) else {
            return Err(ObjectError::NotFound {
                kind: "persistentvolumeclaim",
                namespace: namespace.into(),
                name: name.into(),
            });
        };
        if claim.metadata.resource_version.as_deref().unwrap_or("") != resource_version {
            return Err(ObjectError::Api {
                kind: "persistentvolumeclaim",
                namespace: namespace.into(),
                name: name.into(),
                message: "the object has been modified; please apply your changes to the latest version and try again".into(),
            });
        }
        let status = claim.status.get_or_insert_with(Default::default);
        status.capacity = Some(capacity.clone());
        status.conditions = Some(conditions.to_vec()).filter(|c| !c.is_empty());
        Ok(())
    }
    async fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, ObjectError> {
        self.lock()
            .claims
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "persistentvolumeclaim",
                namespace: namespace.into(),
                name: name.into(),
            })
    }
    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, ObjectError> {
        self.lock()
            .persistent_volumes
            .get(name)
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "persistentvolume",
                namespace: String::new(),
                name: name.into(),
            })
    }
    async fn csi_driver(&self, name: &str) -> Result<CSIDriver, ObjectError> {
        self.lock()
            .csi_drivers
            .get(name)
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "csidriver",
                namespace: String::new(),
                name: name.into(),
            })
    }
    async fn volume_attachment(&self, name: &str) -> Result<VolumeAttachment, ObjectError> {
        self.lock()
            .volume_attachments
            .get(name)
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "volumeattachment",
                namespace: String::new(),
                name: name.into(),
            })
    }
    async fn runtime_class(&self, name: &str) -> Result<RuntimeClass, ObjectError> {
        self.lock()
            .runtime_classes
            .get(name)
            .cloned()
            .ok_or_else(|| ObjectError::NotFound {
                kind: "runtimeclass",
                namespace: String::new(),
                name: name.into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn standalone_store_says_not_available() {
        let s = StandaloneObjectStore;
        let e = s.config_map("ns", "cm").await.unwrap_err();
        assert!(
            e.to_string().contains("not available in standalone mode"),
            "{e}"
        );
        assert!(!e.is_not_found());
        assert!(s.secret("ns", "s").await.is_err());
        assert!(s.services("ns").await.is_err());
    }

    #[test]
    fn tokens_refresh_at_80_percent_or_a_day() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(3600);
        let exp = t0 + hour;
        assert!(!token_needs_refresh(t0, exp, t0));
        assert!(!token_needs_refresh(
            t0,
            exp,
            t0 + Duration::from_secs(2879)
        ));
        assert!(token_needs_refresh(t0, exp, t0 + Duration::from_secs(2880)));
        let week = t0 + hour * 24 * 7;
        assert!(!token_needs_refresh(t0, week, t0 + hour * 23));
        assert!(token_needs_refresh(t0, week, t0 + hour * 24));
        assert!(token_needs_refresh(exp, t0, t0), "expiration before issue");
    }
}
