//! Disk pressure on a small dedicated filesystem, on the real engine and containerd: the
//! engine's root dir (nodefs) and pod log root sit on a 64 MiB tmpfs of the test's own
//! ([`SmallFs`]), which the runtime view also reports as the image filesystem
//! ([`ScopedRuntime::with_image_fs`]; one filesystem, as on a node without a dedicated image
//! disk), under a hard `nodefs.available<24Mi` threshold. Container logs are what fills it.
//!
//! 1. A completed pod's 20 MiB log and a running pod's 24 MiB log leave less than 24 MiB:
//!    DiskPressure goes True and the manager reclaims node-level resources first — the
//!    completed pod's dead container (and with it its log) and the test's unused image go —
//!    which is enough, so no pod is evicted. Once the threshold is no longer met the
//!    condition stays True for `evictionPressureTransitionPeriod` and then returns to False.
//! 2. A 20 MiB file of the test's own brings the pressure back; reclaim (another completed
//!    pod's 1 MiB log) is not enough, so one pod is evicted, ranked as Go ranks them: the
//!    pod using more than it requests (no request, 24 MiB of logs) before the one within its
//!    `ephemeral-storage` request — phase `Failed`, reason `Evicted`, Go's message, an
//!    `Evicted` event after the node's `EvictionThresholdMet` one. A new pod is refused at
//!    admission while DiskPressure holds. The evicted pod's worker removes its dead
//!    container (Go's container deletor for evicted pods), which ends the pressure without a
//!    second eviction, and the condition returns to False after the transition period.
//! 3. Restarted with image garbage collection thresholds the small filesystem is past and
//!    nothing left to remove, Go's `FreeDiskSpaceFailed` and (failing twice in a row)
//!    `ImageGCFailed` node events are recorded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kubelet_core::eviction::{EvictionConfig, PressureCondition};
use kubelet_core::images::gc::ImageGcPolicy;
use kubelet_core::logs::ContainerLogConfig;
use kubelet_core::sink::EventObject;
use kubelet_core::testing::{RecordingSink, StaticSource};
use kubelet_core::{ContainerRuntime, KubeletHandle, PodSource};
use kubelet_tests::engine::{
    busybox, phase, resources, wait_running, wait_until, EngineTest, ScopedRuntime,
};
use kubelet_tests::images::OwnImage;
use kubelet_tests::small_fs::SmallFs;

const LONG: Duration = Duration::from_secs(90);
const MIB: u64 = 1 << 20;
/// The transition period: short, but several monitoring periods long.
const TRANSITION: Duration = Duration::from_secs(8);
const MONITORING: Duration = Duration::from_secs(2);

/// A pod whose one container writes `mib` MiB to its log and then exits or sleeps.
fn writer(t: &EngineTest, name: &str, uid: &str, mib: usize, then_sleep: bool) -> Pod {
    let script = format!(
        "dd if=/dev/zero bs=1048576 count={mib} 2>/dev/null{}",
        if then_sleep { "; exec sleep 3600" } else { "" }
    );
    let mut p = t.pod(name, uid, vec![busybox("app", &script)]);
    if !then_sleep {
        p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    }
    p
}

async fn wait_phase(handle: &KubeletHandle, uid: &str, want: &str) -> (String, String) {
    wait_until(LONG, &format!("pod {uid} {want}"), || {
        let s = handle.pod_status(uid)?;
        (phase(&s) == want).then(|| {
            (
                s.reason.clone().unwrap_or_default(),
                s.message.clone().unwrap_or_default(),
            )
        })
    })
    .await
}

fn disk_pressure(handle: &KubeletHandle) -> bool {
    handle
        .pressure_conditions()
        .contains(&PressureCondition::DiskPressure)
}

/// Waits until DiskPressure is False; how long that took.
async fn wait_no_pressure(handle: &KubeletHandle) -> Duration {
    let start = kubelet_core::clock::monotonic_now();
    wait_until(LONG, "DiskPressure False", || {
        (!disk_pressure(handle)).then_some(())
    })
    .await;
    kubelet_core::clock::elapsed(start)
}

fn evicted_events(sink: &RecordingSink) -> Vec<(String, String)> {
    sink.events()
        .into_iter()
        .filter(|e| e.reason == "Evicted")
        .map(|e| match e.object {
            EventObject::Pod { uid, .. } => (uid, e.message),
            other => (format!("{other:?}"), e.message),
        })
        .collect()
}

/// The KiB in "<what> <n>Ki" of a message (binary quantities of disk bytes print in Ki,
/// Mi, ... as Go prints them).
fn quantity_after(message: &str, what: &str) -> u64 {
    let rest = &message[message
        .find(what)
        .unwrap_or_else(|| panic!("{what} in {message}"))
        + what.len()..];
    let end = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap();
    let q = &rest[..end];
    let (n, unit) = q.split_at(q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len()));
    let n: u64 = n.parse().unwrap();
    match unit {
        "Ki" => n,
        "Mi" => n << 10,
        "" => n >> 10,
        _ => panic!("unit {unit} in {message}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_pressure_reclaims_node_resources_before_evicting() {
    let Some(mut t) = EngineTest::new("disk-pressure").await else {
        return;
    };
    let fs = SmallFs::mount_for(&t, 64);
    // The node's capacity is the small filesystem's.
    t.new_container_manager().await;
    let unique = t.uid("img");
    let repo = format!("kubelet-rs.local/disk-test-{unique}");
    let image = OwnImage::import(t.dir.path(), &repo, &unique);
    assert!(t
        .cri
        .image_status(&image.reference)
        .await
        .unwrap()
        .is_some());
    let runtime = Arc::new(
        ScopedRuntime::new(t.cri.clone(), &t.namespace)
            .with_images(&repo)
            .with_image_fs(fs.path()),
    );

    let done_uid = t.uid("done");
    let done = writer(&t, "done", &done_uid, 20, false);
    let hog_uid = t.uid("hog");
    let hog = writer(&t, "hog", &hog_uid, 24, true);
    let quiet_uid = t.uid("quiet");
    let mut c = busybox("app", "exec sleep 3600");
    c.resources = Some(resources(
        &[("cpu", "10m"), ("ephemeral-storage", "16Mi")],
        &[],
    ));
    let quiet = t.pod("quiet", &quiet_uid, vec![c]);

    let config = kubelet_core::Config {
        eviction: EvictionConfig {
            hard: [("nodefs.available".to_string(), "24Mi".to_string())]
                .into_iter()
                .collect(),
            enforce_pods_allocatable: false,
            local_storage_capacity_isolation: false,
            monitoring_interval: MONITORING,
            pressure_transition_period: TRANSITION,
            ..EvictionConfig::disabled()
        },
        // Periodic image GC stays off (the eviction manager's reclaim is what is tested);
        // the image just imported is old enough for that reclaim.
        image_gc: ImageGcPolicy {
            min_age: Duration::ZERO,
            ..t.config().image_gc
        },
        // The logs are the load: no rotation.
        container_logs: ContainerLogConfig {
            max_size: 1 << 30,
            ..ContainerLogConfig::default()
        },
        ..t.config()
    };
    let api = Arc::new(StaticSource::new("api", vec![done.clone()]));
    let sink = Arc::new(RecordingSink::default());
    let sink2 = sink.clone();
    let k = t.start_on(
        runtime.clone(),
        config.clone(),
        vec![api.clone() as Arc<dyn PodSource>],
        move |b| b.status_sink(sink2),
    );

    // 1. Reclaim is enough.
    wait_phase(&k.handle, &done_uid, "Succeeded").await;
    assert!(!disk_pressure(&k.handle), "{} bytes free", fs.available());
    api.set(vec![done.clone(), hog.clone(), quiet.clone()]);
    wait_running(&k.handle, &quiet_uid, LONG).await;
    wait_until(LONG, "DiskPressure True", || {
        disk_pressure(&k.handle).then_some(())
    })
    .await;
    assert!(k.handle.node_pressure().disk);
    let cri = t.cri.clone();
    kubelet_tests::engine::eventually(
        LONG,
        "the dead container and unused image reclaimed",
        || {
            let (cri, uid, reference) = (cri.clone(), done_uid.clone(), image.reference.clone());
            async move {
                let containers = cri
                    .list_containers(&kubelet_core::runtime::ListFilter::pod(&uid))
                    .await
                    .ok()?;
                let image = cri.image_status(&reference).await.ok()?;
                (containers.is_empty() && image.is_none()).then_some(())
            }
        },
    )
    .await;
    // Reclaimed, the threshold is no longer met, but the condition holds for the
    // transition period.
    assert!(disk_pressure(&k.handle));
    let took = wait_no_pressure(&k.handle).await;
    assert!(
        took >= TRANSITION / 2,
        "DiskPressure went False {took:?} after the reclaim (transition period {TRANSITION:?})"
    );
    assert!(fs.available() > 24 * MIB, "{} bytes free", fs.available());
    assert!(
        sink.events()
            .iter()
            .any(|e| e.reason == "EvictionThresholdMet"
                && e.message == "Attempting to reclaim ephemeral-storage"),
        "{:?}",
        sink.events()
    );
    assert!(
        evicted_events(&sink).is_empty(),
        "{:?}",
        evicted_events(&sink)
    );
    for uid in [&hog_uid, &quiet_uid] {
        assert_eq!(phase(&k.handle.pod_status(uid).unwrap()), "Running");
    }
    // The image pods use stays.
    assert!(t
        .cri
        .image_status(kubelet_tests::cri::BUSYBOX_IMAGE)
        .await
        .unwrap()
        .is_some());

    // 2. Reclaim is not enough: one pod is evicted, ranked as Go ranks them.
    let done2_uid = t.uid("done2");
    let done2 = writer(&t, "done2", &done2_uid, 1, false);
    api.set(vec![
        done.clone(),
        hog.clone(),
        quiet.clone(),
        done2.clone(),
    ]);
    wait_phase(&k.handle, &done2_uid, "Succeeded").await;
    assert!(!t.containers(&done2_uid).await.is_empty());
    let events_before = sink.events().len();
    let _filler = fs.fill("filler", 20 * MIB);
    let (reason, message) = wait_phase(&k.handle, &hog_uid, "Failed").await;
    assert_eq!(reason, "Evicted");
    assert!(
        message.starts_with(
            "The node was low on resource: ephemeral-storage. Threshold quantity: 24Mi, available: "
        ),
        "{message}"
    );
    assert!(
        quantity_after(&message, "available: ") < 24 << 10,
        "{message}"
    );
    assert!(
        message.ends_with("request is 0, has larger consumption of ephemeral-storage. "),
        "{message}"
    );
    assert!(
        quantity_after(&message, "Container app was using ") >= 24 << 10,
        "{message}"
    );
    // Node-level reclaim came first: the completed pod's dead container is gone.
    assert!(t.containers(&done2_uid).await.is_empty());
    let later: Vec<_> = sink.events().into_iter().skip(events_before).collect();
    let met_at = later
        .iter()
        .position(|e| e.reason == "EvictionThresholdMet")
        .expect("EvictionThresholdMet");
    let evicted_at = later
        .iter()
        .position(|e| e.reason == "Evicted")
        .expect("Evicted");
    assert!(met_at < evicted_at, "{later:?}");
    assert_eq!(
        evicted_events(&sink),
        vec![(hog_uid.clone(), message.clone())]
    );
    // Admission refuses new pods under disk pressure.
    let late_uid = t.uid("late");
    let late = t.pod("late", &late_uid, vec![busybox("app", "exec sleep 3600")]);
    api.set(vec![done.clone(), hog.clone(), quiet.clone(), done2, late]);
    let hog_message = message;
    let (reason, message) = wait_phase(&k.handle, &late_uid, "Failed").await;
    assert_eq!(reason, "Evicted");
    assert_eq!(
        message,
        "Pod was rejected: The node had condition: [DiskPressure]. "
    );
    // The evicted pod's dead container is removed: the pressure ends without a second
    // eviction, and the condition returns to False after the transition period.
    let cri = t.cri.clone();
    kubelet_tests::engine::eventually(LONG, "the evicted pod's container reclaimed", || {
        let (cri, uid) = (cri.clone(), hog_uid.clone());
        async move {
            cri.list_containers(&kubelet_core::runtime::ListFilter::pod(&uid))
                .await
                .ok()?
                .is_empty()
                .then_some(())
        }
    })
    .await;
    wait_no_pressure(&k.handle).await;
    assert_eq!(phase(&k.handle.pod_status(&quiet_uid).unwrap()), "Running");
    // One eviction; the other `Evicted` event is the admission rejection's (Go records
    // that one with the same reason).
    assert_eq!(
        evicted_events(&sink),
        vec![
            (hog_uid.clone(), hog_message),
            (
                late_uid.clone(),
                "The node had condition: [DiskPressure]. ".to_string()
            )
        ]
    );
    k.stop().await;

    // 3. Image GC that cannot free enough on the small filesystem (20 MiB of the test's
    // own file on it, no unused image left).
    let sink = Arc::new(RecordingSink::default());
    let sink2 = sink.clone();
    let config = kubelet_core::Config {
        eviction: EvictionConfig::disabled(),
        image_gc: ImageGcPolicy {
            high_threshold_percent: 10,
            low_threshold_percent: 5,
            min_age: Duration::ZERO,
            period: Duration::from_secs(1),
            ..ImageGcPolicy::default()
        },
        ..config
    };
    // No pods: a restarted engine with these sources would run the terminated ones again.
    drop(api);
    let k = t.start_on(runtime, config, vec![], move |b| b.status_sink(sink2));
    let events = wait_until(LONG, "FreeDiskSpaceFailed and ImageGCFailed", || {
        let events = sink.events();
        let failed = events.iter().find(|e| e.reason == "FreeDiskSpaceFailed")?;
        events
            .iter()
            .any(|e| e.reason == "ImageGCFailed")
            .then(|| (failed.message.clone(), events.clone()))
    })
    .await;
    assert!(
        events
            .0
            .starts_with("Failed to garbage collect required amount of images. Attempted to free "),
        "{:?}",
        events.1
    );
    k.stop().await;
    drop(fs);
}
