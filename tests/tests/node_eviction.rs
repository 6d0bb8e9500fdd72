//! Eviction on the real engine and containerd, without endangering the shared machine: every
//! engine here sees only its own namespace's pods (so it can evict nothing else), and the
//! thresholds are the test's own.
//!
//! - Local storage: a pod writing past its emptyDir `sizeLimit`, and one writing past its
//!   container's `ephemeral-storage` limit, are evicted at once — phase `Failed`, reason
//!   `Evicted`, Go's message, an `Evicted` event, `kubelet_evictions` — while a pod within
//!   its limit keeps running.
//! - Memory pressure: a soft `memory.available` threshold above the machine's memory
//!   (always met) makes MemoryPressure True at the manager's first measurement — which the
//!   test holds back until every pod is admitted, as a node's first stats usually come after
//!   its pods (otherwise the BestEffort pod is, rightly, refused at admission); past its
//!   grace period the BestEffort pod is evicted first, then the
//!   Burstable one (one pod per cycle); the static pod is never evicted; a new BestEffort
//!   pod is refused at admission. Restarted with the threshold lifted and a short transition
//!   period, the condition returns to False.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, EmptyDirVolumeSource, Pod, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubelet_core::eviction::{EvictionConfig, PressureCondition};
use kubelet_core::stats::{MachineInfo, NodeStatsProvider, Sample, SampleRequest, StatsError};
use kubelet_core::testing::{RecordingSink, StaticSource};
use kubelet_core::{
    CmError, ContainerManager, KubeletHandle, PodResources, PodSource, ResourceList,
};
use kubelet_tests::engine::{busybox, phase, resources, wait_running, wait_until, EngineTest};
use tokio::sync::watch;

const LONG: Duration = Duration::from_secs(90);
/// The soft memory threshold's grace period.
const GRACE: Duration = Duration::from_secs(20);

fn with_scratch(mut p: Pod, c: &mut Container, size_limit: &str) -> Pod {
    c.volume_mounts = Some(vec![VolumeMount {
        name: "scratch".into(),
        mount_path: "/scratch".into(),
        ..Default::default()
    }]);
    p.spec.as_mut().unwrap().containers = vec![c.clone()];
    p.spec.as_mut().unwrap().volumes = Some(vec![Volume {
        name: "scratch".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(size_limit.into())),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    p
}

/// The real container manager, whose node measurements wait until the test opens the gate:
/// what the eviction manager sees of the node, it sees only from then on.
struct GatedStats {
    cm: Arc<dyn ContainerManager>,
    stats: Arc<dyn NodeStatsProvider>,
    open: watch::Receiver<bool>,
}

#[async_trait]
impl NodeStatsProvider for GatedStats {
    fn machine_info(&self) -> Arc<MachineInfo> {
        self.stats.machine_info()
    }

    async fn sample(&self, request: SampleRequest) -> Result<Sample, StatsError> {
        let mut open = self.open.clone();
        // The sender lives as long as the test; were it gone, measuring goes ahead.
        let _ = open.wait_for(|o| *o).await;
        self.stats.sample(request).await
    }
}

struct GatedManager(Arc<GatedStats>);

#[async_trait]
impl ContainerManager for GatedManager {
    fn capacity(&self) -> ResourceList {
        self.0.cm.capacity()
    }
    fn allocatable(&self) -> ResourceList {
        self.0.cm.allocatable()
    }
    async fn ensure_pod_resources(&self, pod: &Pod) -> Result<PodResources, CmError> {
        self.0.cm.ensure_pod_resources(pod).await
    }
    async fn remove_pod_resources(&self, pod_uid: &str) -> Result<(), CmError> {
        self.0.cm.remove_pod_resources(pod_uid).await
    }
    async fn pods_with_resources(&self) -> Result<Vec<String>, CmError> {
        self.0.cm.pods_with_resources().await
    }
    fn node_stats(&self) -> Option<Arc<dyn NodeStatsProvider>> {
        Some(self.0.clone() as Arc<dyn NodeStatsProvider>)
    }
    fn pod_cgroup_parent(&self, pod: &Pod) -> Option<String> {
        self.0.cm.pod_cgroup_parent(pod)
    }
    fn container_cgroup(&self, pod: &Pod, container_id: &str) -> Option<String> {
        self.0.cm.container_cgroup(pod, container_id)
    }
}

/// The test's container manager with its measurements held back, and the gate's handle.
fn gated(t: &EngineTest) -> (Arc<dyn ContainerManager>, watch::Sender<bool>) {
    let cm = t.cm.clone() as Arc<dyn ContainerManager>;
    let stats = cm
        .node_stats()
        .expect("the Linux container manager measures");
    let (tx, open) = watch::channel(false);
    let manager = GatedManager(Arc::new(GatedStats { cm, stats, open }));
    (Arc::new(manager), tx)
}

/// Waits until the pod's status is phase Failed; returns (reason, message).
async fn wait_evicted(handle: &KubeletHandle, uid: &str) -> (String, String) {
    wait_until(LONG, &format!("pod {uid} Failed"), || {
        let s = handle.pod_status(uid)?;
        (phase(&s) == "Failed").then(|| {
            (
                s.reason.clone().unwrap_or_default(),
                s.message.clone().unwrap_or_default(),
            )
        })
    })
    .await
}

fn pod_event(sink: &RecordingSink, reason: &str, message: &str) -> bool {
    sink.events()
        .iter()
        .any(|e| e.reason == reason && e.message == message)
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_over_their_local_storage_limits_are_evicted() {
    let Some(t) = EngineTest::new("evict-local").await else {
        return;
    };
    // 4 MiB into an emptyDir limited to 1Mi.
    let ed_uid = t.uid("ed");
    let mut c = busybox(
        "app",
        "dd if=/dev/zero of=/scratch/fill bs=1024 count=4096; exec sleep 3600",
    );
    let ed = with_scratch(t.pod("ed", &ed_uid, vec![]), &mut c, "1Mi");
    // 4 MiB into the writable layer of a container limited to 2Mi.
    let rootfs_uid = t.uid("rootfs");
    let mut c = busybox(
        "app",
        "dd if=/dev/zero of=/fill bs=1024 count=4096; exec sleep 3600",
    );
    c.resources = Some(resources(&[], &[("ephemeral-storage", "2Mi")]));
    let rootfs = t.pod("rootfs", &rootfs_uid, vec![c]);
    // 100 KiB into an emptyDir limited to 10Mi: within bounds.
    let quiet_uid = t.uid("quiet");
    let mut c = busybox(
        "app",
        "dd if=/dev/zero of=/scratch/fill bs=1024 count=100; exec sleep 3600",
    );
    let quiet = with_scratch(t.pod("quiet", &quiet_uid, vec![]), &mut c, "10Mi");

    let metrics = kubelet_core::metrics::global();
    let before_ed = metrics.evictions.get("emptydirfs.limit");
    let sink = Arc::new(RecordingSink::default());
    let config = kubelet_core::Config {
        // No thresholds: only the local storage limits.
        eviction: EvictionConfig {
            local_storage_capacity_isolation: true,
            monitoring_interval: Duration::from_secs(2),
            ..EvictionConfig::disabled()
        },
        ..t.config()
    };
    let sink2 = sink.clone();
    let k = t.start_customized(
        config,
        vec![Arc::new(StaticSource::new("api", vec![ed, rootfs, quiet])) as Arc<dyn PodSource>],
        move |b| b.status_sink(sink2),
    );

    let (reason, message) = wait_evicted(&k.handle, &ed_uid).await;
    assert_eq!(reason, "Evicted");
    assert_eq!(
        message,
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
    );
    assert!(pod_event(&sink, "Evicted", &message), "{:?}", sink.events());
    assert!(metrics.evictions.get("emptydirfs.limit") > before_ed);

    let (reason, message) = wait_evicted(&k.handle, &rootfs_uid).await;
    assert_eq!(reason, "Evicted");
    assert_eq!(
        message,
        "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
    );
    assert!(pod_event(&sink, "Evicted", &message), "{:?}", sink.events());

    // The evicted pods' containers are stopped; the pod within its limit runs on.
    for uid in [&ed_uid, &rootfs_uid] {
        let running = t
            .containers(uid)
            .await
            .into_iter()
            .filter(|c| c.state == kubelet_core::runtime::ContainerState::Running)
            .count();
        assert_eq!(running, 0, "pod {uid} has running containers");
    }
    wait_running(&k.handle, &quiet_uid, LONG).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let s = k.handle.pod_status(&quiet_uid).unwrap();
    assert_eq!(phase(&s), "Running", "{s:#?}");
    assert!(k.handle.pressure_conditions().is_empty());
    k.stop().await;
}

/// A Burstable pod: it requests far more memory than it uses, so Go's ranking puts it after
/// a BestEffort pod (whose any usage is above its zero request).
fn burstable(t: &EngineTest, name: &str, uid: &str) -> Pod {
    let mut c = busybox("app", "exec sleep 3600");
    c.resources = Some(resources(&[("memory", "512Mi")], &[]));
    t.pod(name, uid, vec![c])
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_pressure_evicts_best_effort_first_and_spares_static_pods() {
    let Some(t) = EngineTest::new("evict-memory").await else {
        return;
    };
    let be_uid = t.uid("be");
    let be = t.pod("be", &be_uid, vec![busybox("app", "exec sleep 3600")]);
    let bu_uid = t.uid("bu");
    let bu = burstable(&t, "bu", &bu_uid);
    let st_uid = t.uid("static");
    let st = t.pod("static", &st_uid, vec![busybox("app", "exec sleep 3600")]);

    // A soft threshold always met, with a grace period (counted from the first
    // measurement) long enough for every pod to be measured: Go ranks pods without stats
    // first.
    let api = Arc::new(StaticSource::new("api", vec![be.clone(), bu.clone()]));
    let file = Arc::new(StaticSource::new("file", vec![st.clone()]));
    let sink = Arc::new(RecordingSink::default());
    let huge = [("memory.available".to_string(), "1Pi".to_string())]
        .into_iter()
        .collect();
    let config = kubelet_core::Config {
        eviction: EvictionConfig {
            soft: huge,
            soft_grace_period: [("memory.available".to_string(), GRACE)]
                .into_iter()
                .collect(),
            // Only what the test is about: no allocatable copy, no local storage.
            enforce_pods_allocatable: false,
            local_storage_capacity_isolation: false,
            monitoring_interval: Duration::from_secs(2),
            pressure_transition_period: Duration::from_secs(2),
            ..EvictionConfig::disabled()
        },
        ..t.config()
    };
    let sink2 = sink.clone();
    let (cm, gate) = gated(&t);
    let k = t.start_customized(
        config.clone(),
        vec![
            api.clone() as Arc<dyn PodSource>,
            file.clone() as Arc<dyn PodSource>,
        ],
        move |b| b.status_sink(sink2).container_manager(cm),
    );
    // Every pod is admitted and running before the node is first measured.
    for uid in [&be_uid, &bu_uid, &st_uid] {
        wait_running(&k.handle, uid, LONG).await;
    }
    assert!(k.handle.pressure_conditions().is_empty());
    gate.send_replace(true);
    wait_until(LONG, "MemoryPressure", || {
        (k.handle.pressure_conditions() == [PressureCondition::MemoryPressure]).then_some(())
    })
    .await;
    assert!(k.handle.node_pressure().memory);
    let (reason, message) = wait_evicted(&k.handle, &be_uid).await;
    assert_eq!(reason, "Evicted");
    assert!(
        message.starts_with(
            "The node was low on resource: memory. Threshold quantity: 1Pi, available: "
        ),
        "{message}"
    );
    // The BestEffort pod went first: the Burstable one was not yet failed when it was.
    let (reason, message2) = wait_evicted(&k.handle, &bu_uid).await;
    assert_eq!(reason, "Evicted");
    assert!(
        message2.starts_with("The node was low on resource: memory."),
        "{message2}"
    );
    let evicted_order: Vec<String> = sink
        .events()
        .into_iter()
        .filter(|e| e.reason == "Evicted")
        .map(|e| e.message)
        .collect();
    assert!(evicted_order.len() >= 2, "{evicted_order:?}");
    assert_eq!(evicted_order[0], message, "the BestEffort pod first");
    // The static pod is critical: never evicted (the manager goes on trying every cycle).
    wait_running(&k.handle, &st_uid, LONG).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let s = k.handle.pod_status(&st_uid).unwrap();
    assert_eq!(phase(&s), "Running", "{s:#?}");
    assert!(
        sink.events()
            .iter()
            .filter(|e| e.reason == "Evicted")
            .all(|e| !matches!(
                &e.object,
                kubelet_core::sink::EventObject::Pod { uid, .. } if uid == &st_uid
            )),
        "{:?}",
        sink.events()
    );

    // A new BestEffort pod is refused at admission.
    let late_uid = t.uid("late");
    let late = t.pod("late", &late_uid, vec![busybox("app", "exec sleep 3600")]);
    api.set(vec![be, bu, late]);
    let (reason, message) = wait_evicted(&k.handle, &late_uid).await;
    assert_eq!(reason, "Evicted");
    assert_eq!(
        message,
        "Pod was rejected: The node had condition: [MemoryPressure]. "
    );
    k.stop().await;

    // Restarted with the threshold lifted: the condition is gone once the transition
    // period is over.
    let config = kubelet_core::Config {
        eviction: EvictionConfig {
            soft: [("memory.available".to_string(), "1Ki".to_string())]
                .into_iter()
                .collect(),
            ..config.eviction
        },
        ..config
    };
    let k = t.start_with(config, vec![file as Arc<dyn PodSource>]);
    wait_running(&k.handle, &st_uid, LONG).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(k.handle.pressure_conditions().is_empty());
    assert!(!k.handle.node_pressure().memory);
    k.stop().await;
}
