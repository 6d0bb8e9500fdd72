//! CSI drivers recorded on the node's API objects (Go's `nodeinfomanager`), the API-server
//! [`CsiNodeObjects`]:
//!
//! - the Node's `csi.volume.kubernetes.io/nodeid` annotation, a JSON map of driver name to
//!   the node's ID in that driver;
//! - the Node's labels for the driver's topology segments (a segment whose label the Node
//!   already has with another value is a collision and fails the registration, as in Go);
//! - the `CSINode` object of the node's name (made, owned by the Node, when missing): one
//!   `drivers[]` entry per driver with its node ID, sorted topology keys and volume limit
//!   (`allocatable.count`, when the driver reported one).
//!
//! At start-up [`ApiCsiNodeObjects::initialize`] makes the `CSINode` before any driver
//! registers (the node is not Ready until it exists, as with Go's "CSINode is not yet
//! initialized").
//!
//! Uninstalling removes the driver's `CSINode` entry and its annotation entry (the labels
//! stay, as in Go). Every call is bounded by [`API_TIMEOUT`]; the `CSINode` update is tried
//! again on a conflict, at most [`UPDATE_RETRIES`] times.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use kubelet_core::csi::{CsiDriverNode, CsiNodeObjects};

/// The Node annotation mapping CSI driver names to the node's IDs.
pub const NODE_ID_ANNOTATION: &str = "csi.volume.kubernetes.io/nodeid";
/// The longest one install or uninstall takes.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a conflicting `CSINode` update is tried (Go's `updateMaxRetries`).
pub const UPDATE_RETRIES: usize = 5;

/// The API-server [`CsiNodeObjects`] of one node. See the module docs.
#[derive(Clone)]
pub struct ApiCsiNodeObjects {
    client: kube::Client,
    node_name: String,
    /// One install or uninstall at a time (Go's `nim.lock`): each reads the Node and CSINode
    /// and writes them back.
    lock: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for ApiCsiNodeObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiCsiNodeObjects")
            .field("node_name", &self.node_name)
            .finish()
    }
}

fn message(what: &str, e: kube::Error) -> String {
    format!("{what}: {}", kubelet_core::display_chain(&e))
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The annotation's map (an unreadable value counts as empty, as Go overwrites it).
fn node_ids(node: &Node) -> BTreeMap<String, String> {
    node.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_ID_ANNOTATION))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// The label changes the topology needs, or Go's collision error.
pub fn topology_labels(
    existing: &BTreeMap<String, String>,
    topology: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let mut add = BTreeMap::new();
    for (k, v) in topology {
        match existing.get(k) {
            Some(old) if old == v => {}
            Some(old) => {
                return Err(format!(
                    "detected topology value collision: driver reported {k:?}:{v:?} but existing label is {k:?}:{old:?}"
                ))
            }
            None => {
                add.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(add)
}

/// The `CSINode` drivers with `node`'s entry in place of any older one of the driver, or
/// `None` when the entry is there as it should be (Go's `installDriverToCSINode`).
pub fn with_driver(drivers: &[CSINodeDriver], node: &CsiDriverNode) -> Option<Vec<CSINodeDriver>> {
    let keys: BTreeSet<&String> = node.topology.keys().collect();
    let want_count = node.max_volumes > 0;
    let mut others = Vec::new();
    let mut same = false;
    for d in drivers {
        if d.name == node.driver {
            let their: BTreeSet<&String> = d.topology_keys.iter().flatten().collect();
            same =
                d.node_id == node.node_id && their == keys && want_count == d.allocatable.is_some();
        } else {
            others.push(d.clone());
        }
    }
    if same {
        return None;
    }
    let count = (node.max_volumes > 0).then(|| i32::try_from(node.max_volumes).unwrap_or(i32::MAX));
    others.push(CSINodeDriver {
        name: node.driver.clone(),
        node_id: node.node_id.clone(),
        topology_keys: Some(node.topology.keys().cloned().collect()),
        allocatable: count.map(|c| VolumeNodeResources { count: Some(c) }),
    });
    Some(others)
}

impl ApiCsiNodeObjects {
    /// The objects of `node_name`, through `client` (the node's own identity).
    pub fn new(client: kube::Client, node_name: impl Into<String>) -> Self {
        ApiCsiNodeObjects {
            client,
            node_name: node_name.into(),
            lock: std::sync::Arc::default(),
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn csi_nodes(&self) -> Api<CSINode> {
        Api::all(self.client.clone())
    }

    /// Sets the annotation entry (`Some`) or removes it (`None`), and adds labels.
    async fn patch_node(
        &self,
        node: &Node,
        driver: &str,
        node_id: Option<&str>,
        labels: BTreeMap<String, String>,
    ) -> Result<(), String> {
        let mut ids = node_ids(node);
        let before = ids.clone();
        match node_id {
            Some(id) => {
                ids.insert(driver.to_string(), id.to_string());
            }
            None => {
                ids.remove(driver);
            }
        }
        if ids == before && labels.is_empty() {
            return Ok(());
        }
        let annotation = if ids.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::Value::String(serde_json::to_string(&ids).map_err(|e| e.to_string())?)
        };
        let patch = serde_json::json!({
            "metadata": {
                "annotations": { NODE_ID_ANNOTATION: annotation },
                "labels": labels,
            }
        });
        merge_patch(&self.nodes(), &self.node_name, &patch, "patching node").await
    }

    /// The node's `CSINode`, made (owned by the Node) when missing.
    async fn csi_node(&self, node: &Node) -> Result<CSINode, String> {
        match self.csi_nodes().get(&self.node_name).await {
            Ok(c) => return Ok(c),
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(message(&format!("getting CSINode {}", self.node_name), e)),
        }
        let owner = OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: self.node_name.clone(),
            uid: node.metadata.uid.clone().unwrap_or_default(),
            ..Default::default()
        };
        let fresh = CSINode {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            spec: CSINodeSpec { drivers: vec![] },
            ..Default::default()
        };
        match self
            .csi_nodes()
            .create(&PostParams::default(), &fresh)
            .await
        {
            Ok(c) => Ok(c),
            Err(e) if is_status(&e, 409) => self
                .csi_nodes()
                .get(&self.node_name)
                .await
                .map_err(|e| message(&format!("getting CSINode {}", self.node_name), e)),
            Err(e) => Err(message(&format!("creating CSINode {}", self.node_name), e)),
        }
    }

    /// Applies `change` to the `CSINode`'s drivers and updates it, again on a conflict.
    async fn update_csi_node(
        &self,
        node: &Node,
        change: impl Fn(&[CSINodeDriver]) -> Option<Vec<CSINodeDriver>>,
    ) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..UPDATE_RETRIES {
            let mut current = self.csi_node(node).await?;
            let Some(drivers) = change(&current.spec.drivers) else {
                return Ok(());
            };
            current.spec.drivers = drivers;
            match self
                .csi_nodes()
                .replace(&self.node_name, &PostParams::default(), &current)
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_status(&e, 409) => last = message("updating CSINode", e),
                Err(e) => return Err(message(&format!("updating CSINode {}", self.node_name), e)),
            }
        }
        Err(last)
    }

    async fn install(&self, info: &CsiDriverNode) -> Result<(), String> {
        if info.node_id.is_empty() {
            return Err("error adding CSI driver node info: driverNodeID must not be empty".into());
        }
        let node = self
            .nodes()
            .get(&self.node_name)
            .await
            .map_err(|e| message(&format!("getting node {}", self.node_name), e))?;
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let node_update = async {
            let add = topology_labels(&labels, &info.topology)?;
            self.patch_node(&node, &info.driver, Some(&info.node_id), add)
                .await
        };
        node_update
            .await
            .map_err(|e| format!("error updating Node object with CSI driver node info: {e}"))?;
        self.update_csi_node(&node, |drivers| with_driver(drivers, info))
            .await
            .map_err(|e| format!("error updating CSINode object with CSI driver node info: {e}"))
    }

    async fn uninstall(&self, driver: &str) -> Result<(), String> {
        let node = match self.nodes().get(&self.node_name).await {
            Ok(n) => n,
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) => return Err(message(&format!("getting node {}", self.node_name), e)),
        };
        self.update_csi_node(&node, |drivers| {
            drivers.iter().any(|d| d.name == driver).then(|| {
                drivers
                    .iter()
                    .filter(|d| d.name != driver)
                    .cloned()
                    .collect()
            })
        })
        .await
        .map_err(|e| format!("error uninstalling CSI driver from CSINode object: {e}"))?;
        // The Node as it is now (the CSINode update took a while).
        let node = self
            .nodes()
            .get(&self.node_name)
            .await
            .map_err(|e| message(&format!("getting node {}", self.node_name), e))?;
        self.patch_node(&node, driver, None, BTreeMap::new())
            .await
            .map_err(|e| format!("error removing CSI driver node info from Node object: {e}"))
    }
}

/// The CSINode annotation listing the in-tree plugins migrated to CSI on the node (Go's
/// `MigratedPluginsAnnotationKey`). kubelet-rs migrates none (as v1.20's defaults).
pub const MIGRATED_PLUGINS_ANNOTATION: &str = "storage.alpha.kubernetes.io/migrated-plugins";

impl ApiCsiNodeObjects {
    /// Makes the node's `CSINode` (owned by the Node, no drivers) when it is missing, and
    /// drops a migrated-plugins annotation a kubelet with migration gates left on it (Go's
    /// `InitializeCSINodeWithAnnotation`, with no in-tree plugin migrated). The Node must
    /// exist.
    pub async fn initialize(&self) -> Result<(), String> {
        bounded("initializing CSINode", async {
            let _one_at_a_time = self.lock.lock().await;
            let node = self
                .nodes()
                .get(&self.node_name)
                .await
                .map_err(|e| message(&format!("getting node {}", self.node_name), e))?;
            let current = self.csi_node(&node).await?;
            let annotated = current
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(MIGRATED_PLUGINS_ANNOTATION));
            if !annotated {
                return Ok(());
            }
            let patch = serde_json::json!({
                "metadata": {"annotations": {MIGRATED_PLUGINS_ANNOTATION: null}}
            });
            merge_patch(
                &self.csi_nodes(),
                &self.node_name,
                &patch,
                "updating CSINode",
            )
            .await
        })
        .await
    }
}

/// A JSON merge patch of the object `name`; the error names `what` and the object.
async fn merge_patch<K>(
    api: &Api<K>,
    name: &str,
    patch: &serde_json::Value,
    what: &str,
) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| message(&format!("{what} {name}"), e))
}

async fn bounded(
    what: &str,
    f: impl std::future::Future<Output = Result<(), String>>,
) -> Result<(), String> {
    tokio::time::timeout(API_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{what}: no answer within {}s",
                API_TIMEOUT.as_secs()
            ))
        })
}

#[async_trait]
impl CsiNodeObjects for ApiCsiNodeObjects {
    async fn install_driver(&self, node: &CsiDriverNode) -> Result<(), String> {
        bounded("installing the CSI driver", async {
            let _one_at_a_time = self.lock.lock().await;
            self.install(node).await
        })
        .await
    }

    async fn uninstall_driver(&self, driver: &str) -> Result<(), String> {
        bounded("uninstalling the CSI driver", async {
            let _one_at_a_time = self.lock.lock().await;
            self.uninstall(driver).await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver_node(max: i64, topology: &[(&str, &str)]) -> CsiDriverNode {
        CsiDriverNode {
            driver: "csi.example.com".into(),
            node_id: "id-1".into(),
            max_volumes: max,
            topology: topology
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn the_driver_entry_replaces_an_older_one_and_is_left_when_current() {
        let other = CSINodeDriver {
            name: "other".into(),
            node_id: "x".into(),
            ..Default::default()
        };
        let info = driver_node(16, &[("topology.example.com/zone", "a")]);
        let drivers = with_driver(std::slice::from_ref(&other), &info).unwrap();
        assert_eq!(drivers.len(), 2);
        assert_eq!(drivers[0], other);
        assert_eq!(drivers[1].node_id, "id-1");
        assert_eq!(
            drivers[1].topology_keys,
            Some(vec!["topology.example.com/zone".to_string()])
        );
        assert_eq!(
            drivers[1].allocatable.as_ref().and_then(|a| a.count),
            Some(16)
        );
        // Already there as it should be: no update.
        assert_eq!(with_driver(&drivers, &info), None);
        // Another node ID or no limit: replaced, once.
        let changed = with_driver(
            &drivers,
            &driver_node(0, &[("topology.example.com/zone", "a")]),
        )
        .unwrap();
        assert_eq!(changed.len(), 2);
        assert!(changed[1].allocatable.is_none());
    }

    #[test]
    fn topology_labels_are_added_and_collisions_refused() {
        let existing: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
        let same = [("zone".to_string(), "a".to_string())].into();
        assert_eq!(topology_labels(&existing, &same), Ok(BTreeMap::new()));
        let more = [("rack".to_string(), "r1".to_string())].into();
        assert_eq!(topology_labels(&existing, &more), Ok(more.clone()));
        let clash = [("zone".to_string(), "b".to_string())].into();
        assert_eq!(
            topology_labels(&existing, &clash),
            Err("detected topology value collision: driver reported \"zone\":\"b\" but existing label is \"zone\":\"a\"".into())
        );
    }
}
