//! The API-server [`ObjectStore`]: config maps, secrets, service-account tokens, services,
//! RuntimeClasses, PersistentVolumeClaims and PersistentVolumes read through kube-rs on behalf
//! of the node's pods (claims and volumes always afresh, as Go's volume manager reads them).
//!
//! Config maps and secrets follow their [`ChangeDetection`] strategy (Go's
//! `configMapAndSecretChangeDetectionStrategy`): with `Watch` (Go's default) each referenced
//! object has a watch of its own (the private `watch` module) and reads are answered from it;
//! with `Cache` objects are cached for a TTL (a read within it is answered from the cache, an
//! older one goes to the API server); with `Get` every read goes to the API server. The store
//! follows the pods: [`ObjectStore::register_pod`] records which config maps and secrets a pod
//! references (a newly referenced object is always read fresh, and watched under `Watch`),
//! [`ObjectStore::unregister_pod`] drops the pod's tokens and every cached or watched object no
//! remaining pod references; registering a pod again (an update) replaces its references and
//! releases those it dropped. The Node authorizer lets a node read and watch exactly the
//! objects its pods reference, so nothing else is asked for. An object whose watch cannot be
//! kept (the watch ends, or fails before it ever listed: an API server that refuses it) is
//! cached for Go's default TTL instead.
//!
//! Services are never cached for a TTL: the Go kubelet reads them from an informer (a watch,
//! current within the watch's latency), so a service created just before a pod is in the
//! pod's environment; a TTL cache would hand a pod the namespace's services as they were at
//! an earlier pod's start (the e2e spec "Pods should contain environment variables for
//! services" fails that way). A store [`with a service
//! informer`](ApiObjectStore::with_service_informer) (the kubelet binary's) answers from its
//! watch of every service once it has listed them (the private `services` module); until
//! then, or without one, each container start lists its namespace's services and the
//! `default` namespace's from the API server.
//!
//! A read the API server refuses only because its own caches have not taken in a pod just
//! created (the Node authorizer's graph, NodeRestriction's pod informer) is retried within
//! 70 ms (the private `lag` module).
//!
//! Tokens (TokenRequest, bound to the pod, with audiences and `expirationSeconds`) are cached
//! per request and replaced once 80% of their lifetime has passed or they are a day old
//! ([`token_needs_refresh`]), as the Go kubelet's token manager does.

mod lag;
mod services;
#[cfg(test)]
mod store_tests;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, TokenRequest as ApiTokenRequest, TokenRequestSpec,
};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use kubelet_core::objects::{
    token_needs_refresh, ObjectError, ObjectStore, ServiceAccountToken, TokenRequest,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Go's default TTL of cached objects.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

/// How the store notices changes of the config maps and secrets its pods reference (Go's
/// `configMapAndSecretChangeDetectionStrategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeDetection {
    /// A watch per referenced object, reads answered from it (Go's default `Watch`): at rest
    /// one watch request per object every few minutes, changes seen within the watch's
    /// latency.
    Watch,
    /// Cached for this long (Go's `Cache`): one read per object per TTL while it is used.
    Cache(Duration),
    /// Every read goes to the API server (Go's `Get`).
    Get,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    ConfigMap,
    Secret,
}

type Key = (Kind, String, String);

#[derive(Clone)]
enum Cached {
    ConfigMap(ConfigMap),
    Secret(Secret),
}

#[derive(Default)]
struct State {
    objects: HashMap<Key, (Instant, Cached)>,
    /// The watches of referenced objects ([`ChangeDetection::Watch`]).
    watches: HashMap<Key, watch::Watched>,
    /// Ids of watches started so far.
    watches_started: u64,
    runtime_classes: HashMap<String, (Instant, RuntimeClass)>,
    pods: HashMap<String, HashSet<Key>>,
    tokens: HashMap<TokenRequest, (ServiceAccountToken, SystemTime)>,
}

/// See the module docs.
pub struct ApiObjectStore {
    client: Client,
    strategy: ChangeDetection,
    /// How long RuntimeClasses (and, under `Cache`, config maps and secrets) are cached.
    ttl: Duration,
    state: Arc<Mutex<State>>,
    /// The watch of every service, when started ([`ApiObjectStore::with_service_informer`]).
    services: Option<services::ServiceInformer>,
}

/// The config maps and secrets a pod references (volumes, projected sources, env, envFrom).
pub fn pod_references(p: &Pod) -> HashSet<(bool, String)> {
    let mut out = HashSet::new();
    let Some(spec) = p.spec.as_ref() else {
        return out;
    };
    for v in spec.volumes.iter().flatten() {
        if let Some(cm) = v.config_map.as_ref() {
            out.insert((false, cm.name.clone()));
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            out.insert((true, s));
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = src.config_map.as_ref() {
                out.insert((false, cm.name.clone()));
            }
            if let Some(s) = src.secret.as_ref() {
                out.insert((true, s.name.clone()));
            }
        }
    }
    let ephemeral = kubelet_core::pod::ephemeral_containers(p);
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .chain(ephemeral.iter());
    for c in containers {
        for e in c.env.iter().flatten() {
            if let Some(from) = e.value_from.as_ref() {
                if let Some(r) = from.config_map_key_ref.as_ref() {
                    out.insert((false, r.name.clone()));
                }
                if let Some(r) = from.secret_key_ref.as_ref() {
                    out.insert((true, r.name.clone()));
                }
            }
        }
        for f in c.env_from.iter().flatten() {
            if let Some(r) = f.config_map_ref.as_ref() {
                out.insert((false, r.name.clone()));
            }
            if let Some(r) = f.secret_ref.as_ref() {
                out.insert((true, r.name.clone()));
            }
        }
    }
    for s in spec.image_pull_secrets.iter().flatten() {
        out.insert((true, s.name.clone()));
    }
    out
}

fn api_error(kind: &'static str, namespace: &str, name: &str, e: kube::Error) -> ObjectError {
    match &e {
        kube::Error::Api(s) if s.code == 404 => not_found(kind, namespace, name),
        _ => ObjectError::Api {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            message: e.to_string(),
        },
    }
}

/// A failed TokenRequest with the API server's own words: its 404 may be about the bound pod
/// (`pods "x" not found`) as well as about the service account, so it is not turned into a
/// service account's [`ObjectError::NotFound`].
fn token_request_error(request: &TokenRequest, e: kube::Error) -> ObjectError {
    ObjectError::Api {
        kind: "serviceaccount token",
        namespace: request.namespace.clone(),
        name: request.service_account.clone(),
        message: match e {
            kube::Error::Api(s) => format!("{} ({}, {})", s.message, s.reason, s.code),
            other => other.to_string(),
        },
    }
}

impl ApiObjectStore {
    /// A store over `client` caching objects for `ttl` (Go's `Cache` strategy; [`DEFAULT_TTL`]
    /// is Go's default TTL).
    pub fn new(client: Client, ttl: Duration) -> Self {
        Self::with_strategy(client, ChangeDetection::Cache(ttl))
    }

    /// A store over `client` noticing changes of config maps and secrets by `strategy`
    /// (RuntimeClasses are cached for the strategy's TTL, [`DEFAULT_TTL`] under `Watch`).
    pub fn with_strategy(client: Client, strategy: ChangeDetection) -> Self {
        let ttl = match strategy {
            ChangeDetection::Watch => DEFAULT_TTL,
            ChangeDetection::Cache(ttl) => ttl,
            ChangeDetection::Get => Duration::ZERO,
        };
        ApiObjectStore {
            client,
            strategy,
            ttl,
            state: Arc::default(),
            services: None,
        }
    }

    /// Starts a watch of every service in the cluster (Go's service informer; the Node
    /// authorizer lets nodes list and watch services), from which [`ObjectStore::services`]
    /// answers once it has listed them, without a request to the API server per container
    /// start. Outside a tokio runtime nothing is started.
    pub fn with_service_informer(mut self) -> Self {
        self.services = services::ServiceInformer::start(self.client.clone());
        self
    }

    /// Whether services are answered from the service informer: it was started and has
    /// listed them, and its watch has not ended.
    pub fn services_from_informer(&self) -> bool {
        self.services
            .as_ref()
            .is_some_and(services::ServiceInformer::listed)
    }

    /// How many config maps and secrets have a watch: running, or given up (its object read
    /// through the TTL cache) and kept until no pod references the object.
    pub fn watched_objects(&self) -> usize {
        self.lock().watches.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The TTL of the object's cache entry: `None` when it is not cached (`Get`, or a watch
    /// that answers or is about to). Under `Watch`, an object without a working watch (none
    /// could be started, or it was given up) is cached for Go's default TTL.
    fn ttl(&self, st: &State, key: &Key) -> Option<Duration> {
        match self.strategy {
            ChangeDetection::Cache(ttl) => Some(ttl),
            ChangeDetection::Get => None,
            ChangeDetection::Watch => match st.watches.get(key).map(|w| &w.value) {
                None | Some(watch::Value::Unwatchable) => Some(DEFAULT_TTL),
                Some(_) => None,
            },
        }
    }

    /// The object as its watch or the TTL cache has it; `Some(None)`: its watch knows it is
    /// missing; `None`: read it from the API server.
    fn cached(&self, key: &Key) -> Option<Option<Cached>> {
        let st = self.lock();
        if let Some(w) = st.watches.get(key) {
            match &w.value {
                watch::Value::Present(obj) => return Some(Some(Cached::clone(obj))),
                watch::Value::Missing => return Some(None),
                watch::Value::Syncing | watch::Value::Unwatchable => {}
            }
        }
        let ttl = self.ttl(&st, key)?;
        let (at, obj) = st.objects.get(key)?;
        (at.elapsed() < ttl).then(|| Some(obj.clone()))
    }

    fn store(&self, key: Key, obj: Cached) {
        let mut st = self.lock();
        if self.ttl(&st, &key).is_some() {
            st.objects.insert(key, (Instant::now(), obj));
        }
    }
}

impl Drop for ApiObjectStore {
    fn drop(&mut self) {
        for w in self.lock().watches.values() {
            w.cancel.cancel();
        }
    }
}

/// Drops the cached objects and cancels the watches no registered pod references.
fn prune(st: &mut State) {
    let still: HashSet<Key> = st.pods.values().flatten().cloned().collect();
    st.objects.retain(|k, _| still.contains(k));
    st.watches.retain(|k, w| {
        let keep = still.contains(k);
        if !keep {
            w.cancel.cancel();
        }
        keep
    });
}

fn not_found(kind: &'static str, namespace: &str, name: &str) -> ObjectError {
    ObjectError::NotFound {
        kind,
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[async_trait]
impl ObjectStore for ApiObjectStore {
    async fn config_map(&self, namespace: &str, name: &str) -> Result<ConfigMap, ObjectError> {
        let key = (Kind::ConfigMap, namespace.to_string(), name.to_string());
        match self.cached(&key) {
            Some(Some(Cached::ConfigMap(cm))) => return Ok(cm),
            Some(None) => return Err(not_found("configmap", namespace, name)),
            _ => {}
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let cm = lag::retrying_lag("configmap", None, || api.get(name))
            .await
            .map_err(|e| api_error("configmap", namespace, name, e))?;
        self.store(key, Cached::ConfigMap(cm.clone()));
        Ok(cm)
    }

    async fn secret(&self, namespace: &str, name: &str) -> Result<Secret, ObjectError> {
        let key = (Kind::Secret, namespace.to_string(), name.to_string());
        match self.cached(&key) {
            Some(Some(Cached::Secret(s))) => return Ok(s),
            Some(None) => return Err(not_found("secret", namespace, name)),
            _ => {}
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let s = lag::retrying_lag("secret", None, || api.get(name))
            .await
            .map_err(|e| api_error("secret", namespace, name, e))?;
        self.store(key, Cached::Secret(s.clone()));
        Ok(s)
    }

    async fn service_account_token(
        &self,
        request: &TokenRequest,
    ) -> Result<ServiceAccountToken, ObjectError> {
        let now = kubelet_core::clock::wall_now();
        if let Some((t, issued)) = self.lock().tokens.get(request) {
            if !token_needs_refresh(*issued, t.expiration, now) {
                return Ok(t.clone());
            }
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &request.namespace);
        let body = ApiTokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(request.audiences.clone()).filter(|a| !a.is_empty()),
                expiration_seconds: Some(request.expiration_seconds),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(request.pod_name.clone()),
                    uid: Some(request.pod_uid.clone()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let kind = "serviceaccount token";
        let params = PostParams::default();
        let resp = lag::retrying_lag(kind, Some(&request.pod_name), || {
            api.create_token_request(&request.service_account, &params, &body)
        })
        .await
        .map_err(|e| token_request_error(request, e))?;
        let incomplete = || ObjectError::Api {
            kind,
            namespace: request.namespace.clone(),
            name: request.service_account.clone(),
            message: "TokenRequest answered without a token or expiration".into(),
        };
        let status = resp.status.ok_or_else(incomplete)?;
        let token = ServiceAccountToken {
            token: status.token.ok_or_else(incomplete)?,
            expiration: SystemTime::from(status.expiration_timestamp.ok_or_else(incomplete)?.0),
        };
        tracing::debug!(namespace = %request.namespace, service_account = %request.service_account, pod_uid = %request.pod_uid, "service account token issued");
        self.lock()
            .tokens
            .insert(request.clone(), (token.clone(), now));
        Ok(token)
    }

    async fn services(&self, namespace: &str) -> Result<Vec<Service>, ObjectError> {
        // From the informer's watch or the API server, never a TTL cache (see the module docs).
        if let Some(listed) = self.services.as_ref().and_then(|i| i.namespace(namespace)) {
            return Ok(listed);
        }
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        Ok(api
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error("services", namespace, "", e))?
            .items)
    }

    async fn persistent_volume_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PersistentVolumeClaim, ObjectError> {
        // Never from a cache: Go's volume manager reads the claim afresh, so a claim bound
        // since the last try is seen at once.
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.get(name)
            .await
            .map_err(|e| api_error("persistentvolumeclaim", namespace, name, e))
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
        // A merge patch of the two fields with the resource version: the server refuses it
        // when the claim changed since it was read (Go's PatchPVCStatus). The conditions are
        // the whole list (a merge patch replaces lists); none: the field removed.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {
                "capacity": capacity,
                "conditions": (!conditions.is_empty()).then_some(conditions),
            },
        });
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        api.patch_status(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| api_error("persistentvolumeclaim", namespace, name, e))
    }

    async fn persistent_volume(&self, name: &str) -> Result<PersistentVolume, ObjectError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.get(name)
            .await
            .map_err(|e| api_error("persistentvolume", "", name, e))
    }

    async fn csi_driver(&self, name: &str) -> Result<CSIDriver, ObjectError> {
        let api: Api<CSIDriver> = Api::all(self.client.clone());
        api.get(name)
            .await
            .map_err(|e| api_error("csidriver", "", name, e))
    }

    async fn volume_attachment(&self, name: &str) -> Result<VolumeAttachment, ObjectError> {
        // Never from a cache: the volume manager waits for the attacher's answer.
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        api.get(name)
            .await
            .map_err(|e| api_error("volumeattachment", "", name, e))
    }

    async fn runtime_class(&self, name: &str) -> Result<RuntimeClass, ObjectError> {
        if let Some((at, rc)) = self.lock().runtime_classes.get(name) {
            if at.elapsed() < self.ttl {
                return Ok(rc.clone());
            }
        }
        let api: Api<RuntimeClass> = Api::all(self.client.clone());
        let rc = api
            .get(name)
            .await
            .map_err(|e| api_error("runtimeclass", "", name, e))?;
        self.lock()
            .runtime_classes
            .insert(name.to_string(), (Instant::now(), rc.clone()));
        Ok(rc)
    }

    fn register_pod(&self, p: &Pod) {
        let ns = kubelet_core::pod::namespace(p).to_string();
        let uid = kubelet_core::pod::uid(p).to_string();
        let keys: HashSet<Key> = pod_references(p)
            .into_iter()
            .map(|(secret, name)| {
                let kind = if secret {
                    Kind::Secret
                } else {
                    Kind::ConfigMap
                };
                (kind, ns.clone(), name)
            })
            .collect();
        let mut st = self.lock();
        let known: HashSet<Key> = st.pods.values().flatten().cloned().collect();
        // A reference no registered pod had is read fresh (and watched from now on).
        for k in keys.difference(&known) {
            st.objects.remove(k);
            if self.strategy != ChangeDetection::Watch || st.watches.contains_key(k) {
                continue;
            }
            st.watches_started += 1;
            let (id, cancel) = (st.watches_started, CancellationToken::new());
            if watch::spawn(self.client.clone(), k, id, &self.state, cancel.clone()) {
                let value = watch::Value::Syncing;
                st.watches
                    .insert(k.clone(), watch::Watched { id, cancel, value });
            }
        }
        // A pod registered again (updated) replaces its references: the dropped ones go.
        st.pods.insert(uid, keys);
        prune(&mut st);
    }

    fn unregister_pod(&self, uid: &str) {
        let mut st = self.lock();
        st.pods.remove(uid);
        st.tokens.retain(|r, _| r.pod_uid != uid);
        prune(&mut st);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_of_a_pod() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {
                "imagePullSecrets": [{"name": "pull"}],
                "volumes": [
                    {"name": "a", "configMap": {"name": "cm-vol"}},
                    {"name": "b", "secret": {"secretName": "sec-vol"}},
                    {"name": "c", "projected": {"sources": [
                        {"configMap": {"name": "kube-root-ca.crt"}},
                        {"secret": {"name": "sec-proj"}},
                        {"serviceAccountToken": {"path": "token"}}
                    ]}}
                ],
                "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "sec-from"}}]}],
                "containers": [{"name": "c", "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "sec-env", "key": "k"}}}
                ], "envFrom": [{"configMapRef": {"name": "cm-from"}}]}]
            }
        }))
        .unwrap();
        let mut got: Vec<(bool, String)> = pod_references(&p).into_iter().collect();
        got.sort();
        let want: Vec<(bool, String)> = [
            (false, "cm-env"),
            (false, "cm-from"),
            (false, "cm-vol"),
            (false, "kube-root-ca.crt"),
            (true, "pull"),
            (true, "sec-env"),
            (true, "sec-from"),
            (true, "sec-proj"),
            (true, "sec-vol"),
        ]
        .into_iter()
        .map(|(s, n)| (s, n.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_token_request_error_keeps_the_api_servers_words() {
        let request = TokenRequest {
            namespace: "ns".into(),
            service_account: "default".into(),
            audiences: vec![],
            expiration_seconds: 3607,
            pod_name: "p".into(),
            pod_uid: "u".into(),
        };
        let pod_gone = kube::core::Status::failure(r#"pods "p" not found"#, "NotFound")
            .with_code(404)
            .boxed();
        let e = token_request_error(&request, kube::Error::Api(pod_gone));
        assert!(
            !e.is_not_found(),
            "a 404 about the bound pod is not the account's"
        );
        assert_eq!(
            e.to_string(),
            r#"serviceaccount token ns/default: pods "p" not found (NotFound, 404)"#
        );
    }
}
