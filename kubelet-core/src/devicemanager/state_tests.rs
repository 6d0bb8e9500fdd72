#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::devicemanager::pod_device_requests;
use crate::devices::{DeviceMount, DevicePluginError};
use crate::topologymanager::{NumaMask, TopologyHint};

const RES: &str = "example.com/resource";

use crate::testing::NoopDevicePlugin as NoPlugin;

fn endpoint(id: u64) -> Endpoint {
    Endpoint {
        id,
        options: DevicePluginOptions::default(),
        plugin: Arc::new(NoPlugin),
    }
}

fn dev(id: &str, healthy: bool, numa: &[i64]) -> Device {
    Device {
        id: id.into(),
        healthy,
        numa_nodes: numa.to_vec(),
    }
}

fn container(name: &str, n: u32) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            limits: Some(BTreeMap::from([(RES.to_string(), Quantity(n.to_string()))])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(uid: &str, init: Vec<Container>, app: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            uid: Some(uid.into()),
            name: Some(uid.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            init_containers: (!init.is_empty()).then_some(init),
            containers: app,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Two healthy devices without topology, registered by endpoint 1.
fn two_devices() -> DeviceState {
    let mut s = DeviceState::new(vec![0]);
    s.registered(RES, endpoint(1));
    assert!(s.devices_listed(
        RES,
        1,
        vec![dev("Dev-1", true, &[]), dev("Dev-2", true, &[])]
    ));
    s
}

/// Admits every container of the pod as the topology manager would with no affinity.
fn admit(s: &mut DeviceState, p: &Pod) -> Result<(), String> {
    for c in pod::all_containers(p) {
        s.allocate(p, c, None)?;
    }
    for a in s.pending(pod::uid(p))? {
        s.allocated_response(
            pod::uid(p),
            &a.container,
            &a.resource,
            ContainerAllocation {
                mounts: a
                    .device_ids
                    .iter()
                    .map(|d| DeviceMount {
                        container_path: format!("/tmp/{d}"),
                        host_path: format!("/tmp/{d}"),
                        read_only: false,
                    })
                    .collect(),
                ..Default::default()
            },
        );
    }
    Ok(())
}

fn held(s: &DeviceState, uid: &str, c: &str) -> Vec<String> {
    s.container_devices(uid, c, RES)
        .map(|d| d.ids().into_iter().collect())
        .unwrap_or_default()
}

#[test]
fn capacity_follows_health_and_the_grace_period() {
    let t0 = Instant::now();
    let mut s = two_devices();
    assert_eq!(s.capacity().0[RES], 2);
    assert_eq!(s.capacity().1[RES], 2);
    s.devices_listed(
        RES,
        1,
        vec![dev("Dev-1", true, &[]), dev("Dev-2", false, &[])],
    );
    assert_eq!((s.capacity().0[RES], s.capacity().1[RES]), (2, 1));
    // The plugin goes: allocatable 0, capacity kept for the grace period, then 0 / 0.
    assert!(s.endpoint_stopped(RES, 1, t0));
    assert_eq!((s.capacity().0[RES], s.capacity().1[RES]), (2, 0));
    assert!(!s.expire(t0 + ENDPOINT_STOP_GRACE - Duration::from_secs(1)));
    assert!(s.expire(t0 + ENDPOINT_STOP_GRACE));
    assert_eq!((s.capacity().0[RES], s.capacity().1[RES]), (0, 0));
    assert!(!s.is_device_resource(RES));
    // Registering again restores it.
    s.registered(RES, endpoint(2));
    s.devices_listed(RES, 2, vec![dev("Dev-1", true, &[])]);
    assert_eq!((s.capacity().0[RES], s.capacity().1[RES]), (1, 1));
}

#[test]
fn a_replaced_endpoint_is_ignored() {
    let mut s = two_devices();
    s.registered(RES, endpoint(2));
    // The old endpoint's last list and its end change nothing.
    assert!(!s.devices_listed(RES, 1, vec![]));
    assert!(!s.endpoint_stopped(RES, 1, Instant::now()));
    assert_eq!(s.capacity().1[RES], 2);
    assert!(s.endpoint_stopped(RES, 2, Instant::now()));
    assert_eq!(s.capacity().1[RES], 0);
}

#[test]
fn admission_hands_out_each_device_once_and_rejects_with_gos_message() {
    let mut s = two_devices();
    let a = pod("a", vec![], vec![container("c", 1)]);
    let b = pod("b", vec![], vec![container("c", 1)]);
    let c = pod("c", vec![], vec![container("c", 1)]);
    admit(&mut s, &a).unwrap();
    admit(&mut s, &b).unwrap();
    assert_eq!(held(&s, "a", "c"), vec!["Dev-1"]);
    assert_eq!(held(&s, "b", "c"), vec!["Dev-2"]);
    assert_eq!(
        admit(&mut s, &c).unwrap_err(),
        "requested number of devices unavailable for example.com/resource. Requested: 1, Available: 0"
    );
    // Admitting a pod again (a kubelet restart) keeps its devices.
    admit(&mut s, &a).unwrap();
    assert_eq!(held(&s, "a", "c"), vec!["Dev-1"]);
    // A changed request is refused as Go does.
    let a2 = pod("a", vec![], vec![container("c", 2)]);
    assert_eq!(
        admit(&mut s, &a2).unwrap_err(),
        "pod \"a\" container \"c\" changed request for resource \"example.com/resource\" from 1 to 2"
    );
    // Once a is gone, c gets its device.
    s.release_stale(&["b", "c"].into_iter().collect());
    admit(&mut s, &c).unwrap();
    assert_eq!(held(&s, "c", "c"), vec!["Dev-1"]);
}

#[test]
fn unhealthy_and_unregistered_devices_are_not_handed_out() {
    let mut s = two_devices();
    s.devices_listed(
        RES,
        1,
        vec![dev("Dev-1", false, &[]), dev("Dev-2", true, &[])],
    );
    admit(&mut s, &pod("a", vec![], vec![container("c", 1)])).unwrap();
    assert_eq!(held(&s, "a", "c"), vec!["Dev-2"]);
    let mut empty = DeviceState::new(vec![0]);
    // Not a device resource at all: nothing to do (the predicate admission handles it).
    admit(&mut empty, &pod("a", vec![], vec![container("c", 1)])).unwrap();
    assert!(!empty.has_pod("a"));
}

#[test]
fn app_containers_reuse_the_init_containers_devices() {
    let mut s = two_devices();
    let p = pod(
        "a",
        vec![container("init", 1)],
        vec![container("app1", 1), container("app2", 1)],
    );
    admit(&mut s, &p).unwrap();
    assert_eq!(held(&s, "a", "init"), vec!["Dev-1"]);
    assert_eq!(held(&s, "a", "app1"), vec!["Dev-1"]);
    assert_eq!(held(&s, "a", "app2"), vec!["Dev-2"]);
}

#[test]
fn a_failed_allocate_frees_the_devices() {
    let mut s = two_devices();
    let p = pod("a", vec![], vec![container("c", 2)]);
    s.allocate(&p, &p.spec.as_ref().unwrap().containers[0], None)
        .unwrap();
    assert_eq!(s.pending("a").unwrap().len(), 1);
    s.discard_pending("a");
    assert!(!s.has_pod("a"));
    assert_eq!(s.allocated(RES).len(), 0);
}

#[test]
fn devices_follow_the_affinity() {
    let mut s = DeviceState::new(vec![0, 1]);
    s.registered(RES, endpoint(1));
    s.devices_listed(
        RES,
        1,
        vec![
            dev("A", true, &[0]),
            dev("B", true, &[1]),
            dev("C", true, &[1]),
            dev("D", true, &[]),
        ],
    );
    let p = pod("a", vec![], vec![container("c", 2)]);
    s.allocate(
        &p,
        &p.spec.as_ref().unwrap().containers[0],
        Some(NumaMask::of(&[1])),
    )
    .unwrap();
    assert_eq!(held(&s, "a", "c"), vec!["B", "C"]);
    assert_eq!(
        s.container_devices("a", "c", RES).unwrap().devices,
        BTreeMap::from([(1, vec!["B".to_string(), "C".to_string()])])
    );
    // Node 0 has one device left: the rest comes from the other node, then no topology.
    let q = pod("b", vec![], vec![container("c", 2)]);
    s.allocate(
        &q,
        &q.spec.as_ref().unwrap().containers[0],
        Some(NumaMask::of(&[0])),
    )
    .unwrap();
    assert_eq!(held(&s, "b", "c"), vec!["A", "D"]);
    assert_eq!(
        s.container_devices("b", "c", RES).unwrap().devices,
        BTreeMap::from([(0, vec!["A".to_string(), "D".to_string()])])
    );
}

#[test]
fn hints_on_two_numa_nodes() {
    let mut s = DeviceState::new(vec![0, 1]);
    s.registered(RES, endpoint(1));
    s.devices_listed(
        RES,
        1,
        vec![
            dev("A", true, &[0]),
            dev("B", true, &[1]),
            dev("C", true, &[1]),
        ],
    );
    let p = pod("a", vec![], vec![container("c", 2)]);
    let c = &p.spec.as_ref().unwrap().containers[0];
    let hints = s.container_hints(&p, c)[RES].clone().unwrap();
    // {1} holds 2 devices: preferred; {0,1} also fits, not preferred; {0} does not fit.
    assert_eq!(
        hints,
        vec![
            TopologyHint::on(&[1], true),
            TopologyHint::on(&[0, 1], false)
        ]
    );
    let three = pod("b", vec![], vec![container("c", 3)]);
    let hints = s.container_hints(&three, &three.spec.as_ref().unwrap().containers[0])[RES]
        .clone()
        .unwrap();
    assert_eq!(hints, vec![TopologyHint::on(&[0, 1], true)]);
    // More than available: an empty hint list (no placement), as Go.
    let four = pod("d", vec![], vec![container("c", 4)]);
    let hints = s.container_hints(&four, &four.spec.as_ref().unwrap().containers[0]);
    assert_eq!(hints[RES], Some(vec![]));
    // Devices without topology: no preference.
    let flat = two_devices();
    assert_eq!(flat.container_hints(&p, c)[RES], None);
    // The pod scope sums app containers against the largest init container.
    let pp = pod(
        "e",
        vec![container("i", 3)],
        vec![container("x", 1), container("y", 1)],
    );
    assert_eq!(pod_device_requests(&pp, |_| true)[RES], 3);
    assert_eq!(
        s.pod_hints(&pp)[RES],
        Some(vec![TopologyHint::on(&[0, 1], true)])
    );
}

#[test]
fn checkpoint_round_trip_restores_allocations_and_zero_capacity() {
    let mut s = two_devices();
    let a = pod("a", vec![], vec![container("c", 1)]);
    admit(&mut s, &a).unwrap();
    let cp = s.to_checkpoint();
    assert_eq!(cp.registered[RES], vec!["Dev-1", "Dev-2"]);
    assert_eq!(cp.entries.len(), 1);
    let bytes = cp.to_json().unwrap();
    let mut restored = DeviceState::new(vec![0]);
    let t0 = Instant::now();
    restored.restore(DeviceCheckpoint::from_json(&bytes).unwrap(), t0);
    assert_eq!(held(&restored, "a", "c"), vec!["Dev-1"]);
    assert_eq!(
        (restored.capacity().0[RES], restored.capacity().1[RES]),
        (0, 0)
    );
    assert_eq!(
        restored.run_options("a", "c").mounts[0].container_path,
        "/tmp/Dev-1"
    );
    // The running pod is admitted again without its plugin; a new pod is not.
    admit(&mut restored, &a).unwrap();
    assert_eq!(restored.allocated_counts()[RES], 1);
    assert!(admit(&mut restored, &pod("b", vec![], vec![container("c", 1)])).is_err());
    // The plugin comes back: the held device is not handed out again.
    restored.registered(RES, endpoint(7));
    restored.devices_listed(
        RES,
        7,
        vec![dev("Dev-1", true, &[]), dev("Dev-2", true, &[])],
    );
    admit(&mut restored, &pod("b", vec![], vec![container("c", 1)])).unwrap();
    assert_eq!(held(&restored, "b", "c"), vec!["Dev-2"]);
}

#[test]
fn run_options_merge_first_setting_wins() {
    let mut s = DeviceState::new(vec![0]);
    for (r, ep) in [("a.io/x", 1), ("b.io/y", 2)] {
        s.registered(r, endpoint(ep));
        s.devices_listed(r, ep, vec![dev("d", true, &[])]);
    }
    let mut c = container("c", 1);
    c.resources.as_mut().unwrap().limits = Some(BTreeMap::from([
        ("a.io/x".to_string(), Quantity("1".into())),
        ("b.io/y".to_string(), Quantity("1".into())),
    ]));
    let p = pod("p", vec![], vec![c.clone()]);
    s.allocate(&p, &c, None).unwrap();
    for (r, v) in [("a.io/x", "1"), ("b.io/y", "2")] {
        s.allocated_response(
            "p",
            "c",
            r,
            ContainerAllocation {
                envs: BTreeMap::from([("E".into(), v.into()), (format!("E{v}"), v.into())]),
                cdi_devices: vec![format!("vendor.com/dev={v}")],
                ..Default::default()
            },
        );
    }
    let o = s.run_options("p", "c");
    assert_eq!(
        o.envs,
        vec![
            ("E".to_string(), "1".to_string()),
            ("E1".to_string(), "1".to_string()),
            ("E2".to_string(), "2".to_string())
        ]
    );
    assert_eq!(o.cdi_devices, vec!["vendor.com/dev=1", "vendor.com/dev=2"]);
}

fn endpoint_preferring(id: u64) -> Endpoint {
    Endpoint {
        options: DevicePluginOptions {
            get_preferred_allocation_available: true,
            ..Default::default()
        },
        ..endpoint(id)
    }
}

#[test]
fn the_plugins_preference_is_asked_where_go_asks_it() {
    // No topology: every free device is the pool, the request the size.
    let mut s = DeviceState::new(vec![0]);
    s.registered(RES, endpoint_preferring(1));
    s.devices_listed(
        RES,
        1,
        vec![
            dev("A", true, &[]),
            dev("B", true, &[]),
            dev("C", true, &[]),
        ],
    );
    let p = pod("a", vec![], vec![container("c", 1)]);
    s.allocate(&p, &p.spec.as_ref().unwrap().containers[0], None)
        .unwrap();
    let pending = s.pending("a").unwrap();
    let q = pending[0].preference.clone().unwrap();
    assert_eq!(q.available, vec!["A", "B", "C"]);
    assert!(q.must_include.is_empty());
    assert_eq!(q.size, 1);
    assert_eq!(s.apply_preference("a", "c", RES, &["C".into()]), vec!["C"]);
    assert_eq!(held(&s, "a", "c"), vec!["C"]);
    // An answer outside the pool is ignored: Go's order fills in.
    let p = pod("b", vec![], vec![container("c", 1)]);
    s.allocate(&p, &p.spec.as_ref().unwrap().containers[0], None)
        .unwrap();
    assert_eq!(
        s.apply_preference("b", "c", RES, &["C".into(), "X".into()]),
        vec!["A"]
    );

    // With topology and more affinity devices than needed: the pool is the affinity's.
    let mut s = DeviceState::new(vec![0, 1]);
    s.registered(RES, endpoint_preferring(1));
    s.devices_listed(
        RES,
        1,
        vec![
            dev("A", true, &[0]),
            dev("B", true, &[1]),
            dev("C", true, &[1]),
        ],
    );
    let p = pod("a", vec![], vec![container("c", 1)]);
    s.allocate(
        &p,
        &p.spec.as_ref().unwrap().containers[0],
        Some(NumaMask::of(&[1])),
    )
    .unwrap();
    let q = s.pending("a").unwrap()[0].preference.clone().unwrap();
    assert_eq!(q.available, vec!["B", "C"]);
    assert_eq!(
        s.apply_preference("a", "c", RES, &["A".into(), "C".into()]),
        vec!["C"]
    );
    // A plugin that does not offer it is not asked.
    let flat = {
        let mut s = two_devices();
        let p = pod("a", vec![], vec![container("c", 1)]);
        s.allocate(&p, &p.spec.as_ref().unwrap().containers[0], None)
            .unwrap();
        s
    };
    assert!(flat.pending("a").unwrap()[0].preference.is_none());
}

/// A plugin that prefers its last device and records what it was asked to allocate.
#[derive(Debug, Default)]
struct Preferring {
    allocated: std::sync::Mutex<Vec<Vec<String>>>,
}

#[async_trait]
impl DevicePlugin for Preferring {
    async fn allocate(&self, ids: &[String]) -> Result<ContainerAllocation, DevicePluginError> {
        self.allocated.lock().unwrap().push(ids.to_vec());
        Ok(ContainerAllocation::default())
    }
    async fn pre_start_container(&self, _: &[String]) -> Result<(), DevicePluginError> {
        Ok(())
    }
    async fn preferred_allocation(
        &self,
        available: &[String],
        _: &[String],
        size: usize,
    ) -> Result<Vec<String>, DevicePluginError> {
        Ok(available.iter().rev().take(size).cloned().collect())
    }
}

#[tokio::test]
async fn the_manager_allocates_what_the_plugin_prefers() {
    use crate::devicemanager::DeviceManager;
    use crate::topologymanager::HintProvider;
    let m = DeviceManager::new(None, vec![0]);
    let plugin = Arc::new(Preferring::default());
    m.apply(crate::devices::DevicePluginEvent::Registered {
        resource: RES.into(),
        endpoint: 1,
        options: DevicePluginOptions {
            get_preferred_allocation_available: true,
            ..Default::default()
        },
        plugin: plugin.clone(),
    });
    m.apply(crate::devices::DevicePluginEvent::Devices {
        resource: RES.into(),
        endpoint: 1,
        devices: vec![dev("Dev-1", true, &[]), dev("Dev-2", true, &[])],
    });
    let p = pod("a", vec![], vec![container("c", 1)]);
    m.allocate(
        &p,
        &p.spec.as_ref().unwrap().containers[0],
        &TopologyHint::default(),
    )
    .unwrap();
    m.allocate_pending(&p).await.unwrap();
    assert_eq!(
        *plugin.allocated.lock().unwrap(),
        vec![vec!["Dev-2".to_string()]]
    );
    assert_eq!(
        m.container_devices("a", "c"),
        vec![(
            RES.to_string(),
            BTreeMap::from([(0, vec!["Dev-2".to_string()])])
        )]
    );
}
