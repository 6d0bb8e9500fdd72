//! The node status loop (Go's `syncNodeStatus`/`updateNodeStatus`): register, then every
//! `nodeStatusUpdateFrequency` compute the status from a fresh
//! [`Observed`](super::Observed) snapshot and patch it when it changed, when the server's
//! copy of an owned condition drifted, or when `nodeStatusReportFrequency` passed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams};
use kube::Api;
use kubelet_core::sink::{Event, EventType, StatusSink};
use kubelet_core::KubeletHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::registration::{initial_node, register};
use super::setters::{
    adopt_foreign_capacity, owned_conditions_drifted, ready_status, set_node_status,
    status_changed, SetterContext,
};
use super::{observe, NodeConfig, OWNED_CONDITIONS};

/// The node events of the pressure conditions (Go's setters' `recordEventFunc`), by
/// condition (memory, disk, PID) and status (false, true).
const PRESSURE_EVENTS: [[&str; 2]; 3] = [
    ["NodeHasSufficientMemory", "NodeHasInsufficientMemory"],
    ["NodeHasNoDiskPressure", "NodeHasDiskPressure"],
    ["NodeHasSufficientPID", "NodeHasInsufficientPID"],
];

/// The status patch: the whole status, with only the owned conditions (a strategic merge
/// patch merges conditions by type, so the others stay as they are) and without
/// `volumesAttached` (the attach/detach controller's; a stale copy would merge back the
/// volumes it detached).
pub fn status_patch(node: &Node) -> Node {
    let mut status = node.status.clone().unwrap_or_default();
    if let Some(c) = status.conditions.as_mut() {
        c.retain(|c| OWNED_CONDITIONS.contains(&c.type_.as_str()));
    }
    status.volumes_attached = None;
    Node {
        metadata: ObjectMeta::default(),
        spec: None,
        status: Some(status),
    }
}

/// The status patch as sent: [`status_patch`], plus `null` for each capacity or allocatable
/// entry `server` (the API server's copy) has and the new status dropped (a strategic merge
/// patch keeps the map entries it does not name; Go's two-way patch names them `null`).
pub fn status_patch_body(node: &Node, server: Option<&Node>) -> serde_json::Value {
    let patch = status_patch(node);
    let mut body = serde_json::to_value(&patch).unwrap_or(serde_json::Value::Null);
    let (Some(server), Some(status)) = (
        server.and_then(|s| s.status.as_ref()),
        body.get_mut("status").and_then(|s| s.as_object_mut()),
    ) else {
        return body;
    };
    for (field, theirs) in [
        ("capacity", server.capacity.as_ref()),
        ("allocatable", server.allocatable.as_ref()),
    ] {
        let Some(map) = status
            .entry(field)
            .or_insert_with(|| serde_json::Value::Object(Default::default()))
            .as_object_mut()
        else {
            continue;
        };
        for k in theirs.into_iter().flat_map(|t| t.keys()) {
            if !map.contains_key(k) {
                map.insert(k.clone(), serde_json::Value::Null);
            }
        }
    }
    body
}

/// The node status loop. See the module docs.
pub struct NodeStatusLoop {
    /// Node API over the heartbeat client.
    pub api: Api<Node>,
    /// Static configuration.
    pub config: NodeConfig,
    /// The kubelet (its runtime and container manager are observed).
    pub handle: KubeletHandle,
    /// Where node events go.
    pub events: Arc<dyn StatusSink>,
    /// Timeout of one request.
    pub timeout: Duration,
}

impl std::fmt::Debug for NodeStatusLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStatusLoop")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The decision of one status tick, pure for testing.
#[derive(Debug, Clone, PartialEq)]
pub enum Tick {
    /// Nothing changed and the report interval has not passed.
    Skip,
    /// Patch with this node.
    Patch(Box<Node>),
}

/// Computes the next status from the last known node; patches when it changed or when
/// `report_due`.
pub fn next_status(last: &Node, ctx: &SetterContext<'_>, report_due: bool) -> Tick {
    let mut node = last.clone();
    set_node_status(&mut node, ctx);
    let old = last.status.clone().unwrap_or_default();
    let new = node.status.clone().unwrap_or_default();
    if report_due || status_changed(&old, &new) {
        Tick::Patch(Box::new(node))
    } else {
        Tick::Skip
    }
}

impl NodeStatusLoop {
    fn node_event(&self, event_type: EventType, reason: &str, message: String) {
        self.events.record_event(Event::for_node(
            &self.config.node_name,
            event_type,
            reason,
            message,
        ));
    }

    /// Registers the node (when `registerNode`), then keeps its status up to date until
    /// `shutdown`. `registered` is called once the node exists.
    pub async fn run(
        self,
        registered: tokio::sync::watch::Sender<Option<Node>>,
        shutdown: CancellationToken,
    ) {
        let name = self.config.node_name.clone();
        self.node_event(EventType::Normal, "Starting", "Starting kubelet.".into());
        let mut last: Option<Node> = None;
        while last.is_none() {
            let observed = observe(&self.handle).await;
            let now = now();
            let ctx = SetterContext {
                config: &self.config,
                observed: &observed,
                now: &now,
            };
            if self.config.register_node {
                let node = initial_node(&ctx);
                match register(&self.api, &node, &shutdown).await {
                    Some(n) => {
                        self.node_event(
                            EventType::Normal,
                            "RegisteredNode",
                            format!("Node {name} registered"),
                        );
                        last = Some(n);
                    }
                    None => return,
                }
            } else {
                match self.api.get(&name).await {
                    Ok(n) => last = Some(n),
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "registerNode=false and the node cannot be read; retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return,
                            _ = tokio::time::sleep(self.config.status_update_frequency) => {}
                        }
                    }
                }
            }
        }
        let _ = registered.send(last.clone());
        let mut last = last.unwrap_or_default();
        // Force the first status patch right away.
        let mut last_report: Option<Instant> = None;
        let mut reported_ready: Option<String> = None;
        let mut reported_pressure: [Option<bool>; 3] = [None; 3];
        let mut tick = tokio::time::interval(self.config.status_update_frequency);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let changed = self.handle.node_status_changed();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
                // Something the status reports changed (the node began shutting down): now.
                _ = changed.notified() => {}
            }
            let observed = observe(&self.handle).await;
            let now = now();
            let ctx = SetterContext {
                config: &self.config,
                observed: &observed,
                now: &now,
            };
            let mut due =
                last_report.is_none_or(|t| t.elapsed() >= self.config.status_report_frequency);
            // As Go's kubelet, start from the server's copy (a cache read): someone else may
            // have changed a condition the kubelet owns, or added or removed an extended
            // resource in capacity.
            let server = self.refresh_cached(&name).await;
            if let Some(server) = server.as_ref() {
                if !due && owned_conditions_drifted(server, &last) {
                    tracing::info!(node = %name, "node conditions on the server differ from the kubelet's; patching");
                    due = true;
                }
                adopt_foreign_capacity(&mut last, server, &observed);
            }
            let Tick::Patch(node) = next_status(&last, &ctx, due) else {
                continue;
            };
            let patch = status_patch_body(&node, server.as_ref());
            let params = PatchParams::default();
            let body = Patch::Strategic(&patch);
            let req = self.api.patch_status(&name, &params, &body);
            match tokio::time::timeout(self.timeout, req).await {
                Ok(Ok(_)) => {
                    // The next tick compares with what was sent, not with the server's copy
                    // (the server canonicalises quantities, which is no change).
                    let n = *node;
                    let is = ready_status(&n).map(str::to_string);
                    if reported_ready != is {
                        reported_ready.clone_from(&is);
                        match is.as_deref() {
                            Some("True") => {
                                kubelet_core::metrics::global()
                                    .node_startup
                                    .record_node_ready();
                                self.node_event(
                                    EventType::Normal,
                                    "NodeReady",
                                    format!("Node {name} status is now: NodeReady"),
                                )
                            }
                            _ => self.node_event(
                                EventType::Normal,
                                "NodeNotReady",
                                format!("Node {name} status is now: NodeNotReady"),
                            ),
                        }
                    }
                    let now_pressure = [
                        observed.memory_pressure,
                        observed.disk_pressure,
                        observed.pid_pressure,
                    ];
                    for (i, (was, is)) in reported_pressure.iter_mut().zip(now_pressure).enumerate()
                    {
                        if *was != Some(is) {
                            *was = Some(is);
                            let reason = PRESSURE_EVENTS[i][usize::from(is)];
                            self.node_event(
                                EventType::Normal,
                                reason,
                                format!("Node {name} status is now: {reason}"),
                            );
                        }
                    }
                    if let Some(in_use) = n.status.as_ref().and_then(|s| s.volumes_in_use.as_ref())
                    {
                        self.handle.mark_volumes_reported_in_use(in_use);
                    }
                    tracing::debug!(node = %name, "node status patched");
                    last = n;
                    last_report = Some(Instant::now());
                }
                Ok(Err(kube::Error::Api(s))) if s.code == 404 && self.config.register_node => {
                    tracing::warn!(node = %name, "the node object is gone; registering it again");
                    match register(&self.api, &initial_node(&ctx), &shutdown).await {
                        Some(n) => {
                            self.node_event(
                                EventType::Normal,
                                "RegisteredNode",
                                format!("Node {name} registered"),
                            );
                            last = n;
                            last_report = None;
                        }
                        None => return,
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(node = %name, error = %e, "updating the node status failed; will retry");
                    last = self.refresh(&name).await.unwrap_or(last);
                }
                Err(_) => {
                    tracing::warn!(node = %name, timeout = ?self.timeout, "updating the node status timed out; will retry");
                }
            }
        }
    }

    /// The node from the API server's cache (`resourceVersion=0`), as Go's kubelet reads it
    /// before each status update.
    async fn refresh_cached(&self, name: &str) -> Option<Node> {
        let params = kube::api::GetParams::any();
        match tokio::time::timeout(self.timeout, self.api.get_with(name, &params)).await {
            Ok(Ok(n)) => Some(n),
            _ => None,
        }
    }

    async fn refresh(&self, name: &str) -> Option<Node> {
        match tokio::time::timeout(self.timeout, self.api.get(name)).await {
            Ok(Ok(n)) => Some(n),
            _ => None,
        }
    }
}

fn now() -> Time {
    kubelet_core::clock::now_time().unwrap_or(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::node::fixtures::{observed, t};
    use crate::apiserver::node::setters::status;
    use k8s_openapi::api::core::v1::{AttachedVolume, NodeCondition};
    use kubelet_core::runtime::ImageInfo;

    #[test]
    fn patches_only_on_change_or_when_report_is_due() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let mut node = Node::default();
        let t0 = t(0);
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &t0,
            },
        );
        let t1 = t(10);
        let ctx = SetterContext {
            config: &cfg,
            observed: &o,
            now: &t1,
        };
        assert_eq!(next_status(&node, &ctx, false), Tick::Skip);
        assert!(matches!(next_status(&node, &ctx, true), Tick::Patch(_)));
        let mut o2 = o.clone();
        o2.images.push(ImageInfo {
            id: "sha256:1".into(),
            repo_tags: vec!["busybox:1".into()],
            repo_digests: vec![],
            size_bytes: 10,
            pinned: false,
        });
        let ctx = SetterContext {
            config: &cfg,
            observed: &o2,
            now: &t1,
        };
        assert!(matches!(next_status(&node, &ctx, false), Tick::Patch(_)));
    }

    #[test]
    fn volumes_in_use_are_reported_once_counted_and_volumes_attached_never_sent() {
        let cfg = NodeConfig::new("n1");
        let mut o = observed();
        let mut node = Node::default();
        status(&mut node).volumes_in_use = Some(vec!["kubernetes.io/csi/d^old".into()]);
        status(&mut node).volumes_attached = Some(vec![AttachedVolume {
            name: "kubernetes.io/csi/d^old".into(),
            device_path: String::new(),
        }]);
        let now = t(0);
        let apply = |n: &mut Node, o: &crate::apiserver::node::Observed| {
            set_node_status(
                n,
                &SetterContext {
                    config: &cfg,
                    observed: o,
                    now: &now,
                },
            )
        };
        // Not counted yet: the server's list stays.
        let mut n1 = node.clone();
        apply(&mut n1, &o);
        let st = n1.status.as_ref().unwrap();
        assert_eq!(
            st.volumes_in_use,
            Some(vec!["kubernetes.io/csi/d^old".into()])
        );
        // Counted: the kubelet's list, empty included.
        o.volumes_in_use = Some(vec![]);
        apply(&mut n1, &o);
        let body = serde_json::to_value(status_patch(&n1)).unwrap();
        assert_eq!(body["status"]["volumesInUse"], serde_json::json!([]));
        assert!(body["status"].get("volumesAttached").is_none(), "{body}");
    }

    #[test]
    fn status_patch_keeps_foreign_conditions_out() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let mut node = Node::default();
        status(&mut node).conditions = Some(vec![NodeCondition {
            type_: "NetworkUnavailable".into(),
            status: "False".into(),
            ..Default::default()
        }]);
        let now = t(0);
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &now,
            },
        );
        let p = status_patch(&node);
        let types: Vec<&str> = p
            .status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            types,
            vec!["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        // The patch is a typed Node, serialised without metadata fields.
        let v = serde_json::to_value(&p).unwrap();
        assert!(v.get("spec").is_none());
    }

    #[test]
    fn patch_body_names_dropped_resources_null() {
        let cfg = NodeConfig::new("n1");
        let o = observed();
        let now = t(0);
        let mut node = Node::default();
        set_node_status(
            &mut node,
            &SetterContext {
                config: &cfg,
                observed: &o,
                now: &now,
            },
        );
        let mut server = node.clone();
        status(&mut server)
            .allocatable
            .get_or_insert_with(Default::default)
            .insert(
                "example.com/fakecpu".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1k".into()),
            );
        let body = status_patch_body(&node, Some(&server));
        assert_eq!(
            body["status"]["allocatable"]["example.com/fakecpu"],
            serde_json::Value::Null
        );
        assert!(body["status"]["allocatable"]
            .as_object()
            .unwrap()
            .contains_key("example.com/fakecpu"));
        assert_eq!(body["status"]["allocatable"]["cpu"], "1900m");
        assert!(!body["status"]["capacity"]
            .as_object()
            .unwrap()
            .contains_key("example.com/fakecpu"));
        // Without the server's copy: the plain patch.
        assert_eq!(
            status_patch_body(&node, None),
            serde_json::to_value(status_patch(&node)).unwrap()
        );
    }
}
