//! The eviction manager against a fake host, on the paused clock.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use crate::summary::{
    ContainerStats, FsStats, MemoryStats, NodeStats, PodReference, PodStats, RuntimeStats,
    VolumeStats,
};
use crate::testing::{ContainerBuilder, PodBuilder};
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, Volume};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

const MI: u64 = 1 << 20;

#[derive(Default)]
struct Fake {
    pods: Mutex<Vec<Arc<Pod>>>,
    summary: Mutex<Summary>,
    evicted: Mutex<Vec<(String, i64, String)>>,
    reclaims: Mutex<Vec<Reclaim>>,
    events: Mutex<Vec<Event>>,
    /// Image-fs bytes freed by a reclaim of images.
    image_reclaim_frees: Mutex<u64>,
    /// The pods each summary was asked to measure.
    measured: Mutex<Vec<MeasuredPods>>,
}

impl Fake {
    fn measured(&self) -> Vec<MeasuredPods> {
        std::mem::take(&mut *self.measured.lock().unwrap())
    }
}

#[async_trait]
impl EvictionHost for Fake {
    fn node_name(&self) -> String {
        "node-1".into()
    }
    fn active_pods(&self) -> Vec<Arc<Pod>> {
        let evicted: Vec<String> = self.evicted().into_iter().map(|e| e.0).collect();
        self.pods
            .lock()
            .unwrap()
            .iter()
            .filter(|p| !evicted.contains(&pod::name(p).to_string()))
            .cloned()
            .collect()
    }
    async fn summary(&self, measured: MeasuredPods) -> Result<Summary, StatsError> {
        self.measured.lock().unwrap().push(measured);
        let mut s = self.summary.lock().unwrap().clone();
        // Only the pods asked for are measured (as the collector does).
        let pods = self.pods.lock().unwrap().clone();
        s.pods.retain(|st| match measured {
            MeasuredPods::All => true,
            MeasuredPods::None => false,
            MeasuredPods::WithLocalStorageLimits => pods
                .iter()
                .any(|p| pod::uid(p) == st.pod_ref.uid && local_storage::has_limits(p)),
        });
        // Every collection is a new measurement.
        let t = k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(
            crate::clock::now_unix_nanos(),
        ))
        .unwrap()
        .to_string();
        if let Some(m) = s.node.memory.as_mut() {
            m.time = t.clone();
        }
        if let Some(f) = s.node.fs.as_mut() {
            f.time = t.clone();
        }
        Ok(s)
    }
    fn dedicated_image_fs(&self) -> bool {
        false
    }
    async fn reclaim(&self, what: Reclaim) -> Result<(), String> {
        self.reclaims.lock().unwrap().push(what);
        if what == Reclaim::Images {
            let freed = *self.image_reclaim_frees.lock().unwrap();
            let mut s = self.summary.lock().unwrap();
            if let Some(f) = s.node.fs.as_mut() {
                f.available_bytes = f.available_bytes.map(|a| a + freed);
            }
        }
        Ok(())
    }
    fn evict(&self, p: &Arc<Pod>, grace_seconds: i64, message: &str) -> bool {
        self.evicted.lock().unwrap().push((
            pod::name(p).to_string(),
            grace_seconds,
            message.to_string(),
        ));
        true
    }
    fn pod_cleaned_up(&self, _uid: &str) -> bool {
        true
    }
    fn pod_resources_reclaimed(&self, _uid: &str) -> bool {
        true
    }
    fn record_event(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
}

impl Fake {
    fn evicted(&self) -> Vec<(String, i64, String)> {
        self.evicted.lock().unwrap().clone()
    }
    fn set_memory_available(&self, available: u64) {
        let mut s = self.summary.lock().unwrap();
        s.node.memory = Some(MemoryStats {
            available_bytes: Some(available),
            working_set_bytes: 1024 * MI - available,
            ..Default::default()
        });
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn manager(config: EvictionConfig) -> (EvictionManager, Arc<PressureState>) {
    let pressure = Arc::new(PressureState::default());
    let thresholds = config.thresholds().unwrap();
    (
        EvictionManager::new(config, thresholds, pressure.clone()),
        pressure,
    )
}

fn pod_with(
    name: &str,
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
    f: impl FnOnce(PodBuilder) -> PodBuilder,
) -> Arc<Pod> {
    let mut c = ContainerBuilder::new("app", "busybox");
    if !requests.is_empty() {
        c = c.requests(requests);
    }
    if !limits.is_empty() {
        c = c.limits(limits);
    }
    Arc::new(
        f(PodBuilder::new(name, name)
            .container(c.build())
            .grace_period(30))
        .build(),
    )
}

fn pod_stats(uid: &str, working_set: u64) -> PodStats {
    PodStats {
        pod_ref: PodReference {
            name: uid.into(),
            namespace: "default".into(),
            uid: uid.into(),
        },
        memory: Some(MemoryStats {
            working_set_bytes: working_set,
            ..Default::default()
        }),
        containers: vec![ContainerStats {
            name: "app".into(),
            memory: Some(MemoryStats {
                working_set_bytes: working_set,
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn memory_pressure_evicts_one_pod_per_cycle_best_effort_first_never_a_critical_one() {
    let host = Fake::default();
    let mem = [("memory", "100Mi")];
    let guaranteed = pod_with("guaranteed", &mem, &mem, |b| b);
    let best_effort = pod_with("besteffort", &[], &[], |b| b);
    let burstable = pod_with("burstable", &[("memory", "10Mi")], &[], |b| b);
    let critical = pod_with("critical", &[], &[], |b| {
        b.spec(|s| s.priority = Some(2_000_000_000))
    });
    *host.pods.lock().unwrap() = vec![
        guaranteed.clone(),
        burstable.clone(),
        best_effort.clone(),
        critical.clone(),
    ];
    host.summary.lock().unwrap().pods = vec![
        pod_stats("guaranteed", 50 * MI),
        pod_stats("burstable", 5 * MI),
        pod_stats("besteffort", 5 * MI),
        pod_stats("critical", 500 * MI),
    ];
    host.set_memory_available(90 * MI);
    let (m, pressure) = manager(EvictionConfig {
        hard: map(&[("memory.available", "100Mi")]),
        ..EvictionConfig::default()
    });

    let evicted = m.synchronize(&host).await.unwrap();
    assert_eq!(evicted.len(), 1);
    assert!(pressure.pressure().memory);
    let e = host.evicted();
    assert_eq!(e[0].0, "besteffort", "the BestEffort pod goes first: {e:?}");
    assert_eq!(e[0].1, 0, "hard threshold: no grace");
    assert_eq!(
        e[0].2,
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container app was using 5Mi, request is 0, has larger consumption of memory. "
    );
    let events = host.events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e.reason == "EvictionThresholdMet"
                && e.message == "Attempting to reclaim memory")
    );
    assert!(events.iter().any(|e| e.reason == "Evicted"));
    assert!(
        host.reclaims.lock().unwrap().is_empty(),
        "no node-level reclaim for memory"
    );
    assert!(crate::metrics::global().evictions.get("memory.available") >= 1);

    // Next cycles: the burstable pod (over its request), then the guaranteed one; the
    // critical pod never.
    tokio::time::advance(Duration::from_secs(10)).await;
    m.synchronize(&host).await.unwrap();
    tokio::time::advance(Duration::from_secs(10)).await;
    m.synchronize(&host).await.unwrap();
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(m.synchronize(&host).await.unwrap().is_empty());
    let names: Vec<String> = host.evicted().into_iter().map(|e| e.0).collect();
    assert_eq!(names, ["besteffort", "burstable", "guaranteed"]);

    // The threshold is lifted: the condition holds for the transition period (5m), then
    // goes.
    host.set_memory_available(900 * MI);
    tokio::time::advance(Duration::from_secs(10)).await;
    m.synchronize(&host).await.unwrap();
    assert!(pressure.pressure().memory, "held for the transition period");
    tokio::time::advance(Duration::from_secs(280)).await;
    m.synchronize(&host).await.unwrap();
    assert!(
        pressure.pressure().memory,
        "4m50s after it was last observed"
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    m.synchronize(&host).await.unwrap();
    assert!(!pressure.pressure().memory, "5m after it was last observed");
}

#[tokio::test(start_paused = true)]
async fn soft_thresholds_wait_their_grace_period_and_cap_the_pods_grace() {
    let host = Fake::default();
    *host.pods.lock().unwrap() = vec![pod_with("p", &[], &[], |b| b)];
    host.summary.lock().unwrap().pods = vec![pod_stats("p", 5 * MI)];
    host.set_memory_available(90 * MI);
    let (m, pressure) = manager(EvictionConfig {
        hard: BTreeMap::new(),
        soft: map(&[("memory.available", "100Mi")]),
        soft_grace_period: [("memory.available".to_string(), Duration::from_secs(60))].into(),
        max_pod_grace_period_seconds: 20,
        ..EvictionConfig::default()
    });
    assert!(m.synchronize(&host).await.unwrap().is_empty());
    assert!(
        pressure.pressure().memory,
        "the condition does not wait for the grace period"
    );
    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(m.synchronize(&host).await.unwrap().is_empty());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(m.synchronize(&host).await.unwrap().len(), 1);
    assert_eq!(
        host.evicted()[0].1,
        20,
        "min(pod grace 30, evictionMaxPodGracePeriod 20)"
    );

    // With a larger maximum the pod's own grace period wins.
    let host = Fake::default();
    *host.pods.lock().unwrap() = vec![pod_with("p", &[], &[], |b| b)];
    host.summary.lock().unwrap().pods = vec![pod_stats("p", 5 * MI)];
    host.set_memory_available(90 * MI);
    let (m, _) = manager(EvictionConfig {
        hard: BTreeMap::new(),
        soft: map(&[("memory.available", "100Mi")]),
        soft_grace_period: [(
            "memory.available".to_string(),
            Duration::ZERO + Duration::from_secs(1),
        )]
        .into(),
        max_pod_grace_period_seconds: 600,
        ..EvictionConfig::default()
    });
    m.synchronize(&host).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    m.synchronize(&host).await.unwrap();
    assert_eq!(host.evicted()[0].1, 30);
}

fn disk_summary(available: u64) -> NodeStats {
    let fs = FsStats {
        available_bytes: Some(available),
        capacity_bytes: Some(1000 * MI),
        inodes_free: Some(1000),
        inodes: Some(1000),
        ..Default::default()
    };
    NodeStats {
        fs: Some(fs.clone()),
        runtime: Some(RuntimeStats { image_fs: None }),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn disk_pressure_reclaims_containers_and_images_before_evicting() {
    let host = Fake::default();
    *host.pods.lock().unwrap() = vec![pod_with("p", &[], &[], |b| b)];
    {
        let mut s = host.summary.lock().unwrap();
        s.node = disk_summary(50 * MI);
        s.pods = vec![pod_stats("p", MI)];
    }
    *host.image_reclaim_frees.lock().unwrap() = 200 * MI;
    let (m, pressure) = manager(EvictionConfig {
        hard: map(&[("nodefs.available", "10%")]),
        minimum_reclaim: map(&[("nodefs.available", "5%")]),
        ..EvictionConfig::default()
    });
    assert!(m.synchronize(&host).await.unwrap().is_empty());
    assert!(pressure.pressure().disk);
    assert_eq!(
        *host.reclaims.lock().unwrap(),
        [Reclaim::Containers, Reclaim::Images]
    );
    assert!(
        host.evicted().is_empty(),
        "reclaim was enough: 250Mi free now"
    );

    // Not enough: reclaim, then evict.
    let host = Fake::default();
    *host.pods.lock().unwrap() = vec![pod_with("p", &[], &[], |b| b)];
    {
        let mut s = host.summary.lock().unwrap();
        s.node = disk_summary(50 * MI);
        s.pods = vec![pod_stats("p", MI)];
    }
    *host.image_reclaim_frees.lock().unwrap() = 60 * MI;
    let (m, _) = manager(EvictionConfig {
        hard: map(&[("nodefs.available", "10%")]),
        minimum_reclaim: map(&[("nodefs.available", "5%")]),
        ..EvictionConfig::default()
    });
    assert_eq!(
        m.synchronize(&host).await.unwrap().len(),
        1,
        "110Mi < 100Mi + 50Mi min reclaim"
    );
    // 10% as Go computes it: float32(0.1) × capacity, truncated (104857601.56…).
    let message = host.evicted()[0].2.clone();
    assert!(
        message.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 104857601, available: 50Mi. "
        ),
        "{message}"
    );
}

#[tokio::test(start_paused = true)]
async fn local_storage_limits_evict_at_once_even_without_pressure() {
    let host = Fake::default();
    let p = pod_with("sized", &[], &[], |b| {
        b.volume(Volume {
            name: "scratch".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity("1Mi".into())),
                ..Default::default()
            }),
            ..Default::default()
        })
    });
    *host.pods.lock().unwrap() = vec![p];
    let mut stats = pod_stats("sized", MI);
    stats.volume = vec![VolumeStats {
        fs: FsStats {
            used_bytes: Some(2 * MI),
            ..Default::default()
        },
        name: "scratch".into(),
        pvc_ref: None,
    }];
    {
        let mut s = host.summary.lock().unwrap();
        s.node = disk_summary(900 * MI);
        s.pods = vec![stats];
    }
    let (m, pressure) = manager(EvictionConfig::default());
    assert_eq!(m.synchronize(&host).await.unwrap().len(), 1);
    assert_eq!(pressure.conditions(), []);
    assert_eq!(host.measured(), [MeasuredPods::WithLocalStorageLimits]);
    let e = host.evicted();
    assert_eq!(
        (e[0].1, e[0].2.as_str()),
        (
            0,
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
        )
    );
    assert!(crate::metrics::global().evictions.get("emptydirfs.limit") >= 1);
}

#[tokio::test(start_paused = true)]
async fn a_measurement_is_acted_on_once_and_minimum_reclaim_keeps_a_threshold_met() {
    let thresholds = EvictionConfig {
        hard: map(&[("memory.available", "100")]),
        minimum_reclaim: map(&[("memory.available", "50")]),
        enforce_pods_allocatable: false,
        ..EvictionConfig::default()
    }
    .thresholds()
    .unwrap();
    let obs = |available, t| -> Observations {
        [(
            Signal::MemoryAvailable,
            signals::Observation {
                available,
                capacity: 1000,
                time_nanos: Some(t),
            },
        )]
        .into()
    };
    let mut state = State::default();
    let period = Duration::from_secs(300);
    let now = Instant::now();
    assert_eq!(
        state.step(&thresholds, &obs(90, 1), now, period).act_on,
        [0]
    );
    assert_eq!(
        state.step(&thresholds, &obs(90, 1), now, period).act_on,
        Vec::<usize>::new(),
        "the same measurement again"
    );
    // 120 > 100, but < 100 + 50: still met until the minimum is reclaimed.
    assert_eq!(
        state.step(&thresholds, &obs(120, 2), now, period).act_on,
        [0]
    );
    assert_eq!(
        state.step(&thresholds, &obs(160, 3), now, period).act_on,
        Vec::<usize>::new()
    );
    // Not met any more: the next shortage is met afresh.
    assert_eq!(
        state.step(&thresholds, &obs(120, 4), now, period).act_on,
        Vec::<usize>::new()
    );
}

#[tokio::test(start_paused = true)]
async fn pods_are_measured_only_where_a_cycle_needs_them() {
    let host = Fake::default();
    let plain = pod_with("plain", &[], &[], |b| b);
    let limited = pod_with("limited", &[], &[("ephemeral-storage", "1Gi")], |b| b);
    assert!(!local_storage::has_limits(&plain));
    assert!(local_storage::has_limits(&limited));
    *host.pods.lock().unwrap() = vec![plain, limited];
    {
        let mut s = host.summary.lock().unwrap();
        s.node = disk_summary(900 * MI);
        s.pods = vec![pod_stats("plain", MI), pod_stats("limited", MI)];
    }
    // No threshold met: the node and the pods with local-storage limits only.
    let (m, _) = manager(EvictionConfig::default());
    assert_eq!(m.synchronize(&host).await.unwrap(), []);
    assert_eq!(host.measured(), [MeasuredPods::WithLocalStorageLimits]);
    // Without local-storage isolation: the node alone.
    let (m, _) = manager(EvictionConfig {
        local_storage_capacity_isolation: false,
        ..EvictionConfig::default()
    });
    assert_eq!(m.synchronize(&host).await.unwrap(), []);
    assert_eq!(host.measured(), [MeasuredPods::None]);
    // Under disk pressure that reclaim does not lift: the node again after reclaim, then
    // every pod to rank them.
    host.summary.lock().unwrap().node = disk_summary(10 * MI);
    let (m, _) = manager(EvictionConfig {
        hard: map(&[("nodefs.available", "100Mi")]),
        ..EvictionConfig::default()
    });
    assert_eq!(m.synchronize(&host).await.unwrap().len(), 1);
    assert_eq!(
        host.measured(),
        [
            MeasuredPods::WithLocalStorageLimits,
            MeasuredPods::None,
            MeasuredPods::All
        ]
    );
}

#[test]
fn the_kill_wait_is_gos() {
    // killPodNow: grace + grace/2, at least 10 s; the cleanup wait starts after it.
    for (grace, secs) in [(0, 10), (5, 10), (30, 45), (120, 180), (-1, 10)] {
        assert_eq!(
            super::kill_timeout(grace),
            Duration::from_secs(secs),
            "{grace}"
        );
    }
}
