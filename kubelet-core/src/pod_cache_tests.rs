//! Pod cache tests: the slot states of the module docs, step by step, and a model of the
//! PLEG and a worker racing each other (property test): a reading the cache serves never
//! misses a change an ended observation saw.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;

use super::{PodCache, Source, Stamp};
use crate::pod_status::PodRuntimeStatus;
use crate::runtime::{ContainerRuntime, ListFilter, SandboxConfig};
use crate::testing::SimRuntime;

/// A reading told apart by its uid field (the tests store the "version" they read there).
fn reading(version: &str) -> Arc<PodRuntimeStatus> {
    Arc::new(PodRuntimeStatus {
        uid: version.into(),
        ..Default::default()
    })
}

/// A cache whose readings do not age out in these tests (but the one that checks that).
fn new_cache() -> PodCache {
    PodCache::new(Duration::from_secs(3600))
}

fn served(cache: &PodCache, uid: &str) -> Option<String> {
    cache.get(uid).map(|r| r.uid.clone())
}

/// One ended relist that saw these pods change.
fn relist(cache: &PodCache, changed: &[&str]) {
    let n = cache.begin();
    cache.observed(n, changed.iter().copied());
}

#[test]
fn a_reading_is_served_once_an_observation_begun_after_it_ended() {
    let cache = new_cache();
    let stamp = cache.stamp();
    assert!(cache.store("a", stamp, reading("v1")));
    assert_eq!(
        served(&cache, "a"),
        None,
        "no observation since the reading"
    );
    let n = cache.begin();
    assert_eq!(served(&cache, "a"), None, "the observation has not ended");
    cache.observed(n, []);
    assert_eq!(served(&cache, "a").as_deref(), Some("v1"));
    relist(&cache, &[]);
    assert_eq!(
        served(&cache, "a").as_deref(),
        Some("v1"),
        "still current at rest"
    );
}

#[test]
fn an_observed_change_drops_the_reading() {
    let cache = new_cache();
    assert!(cache.store("a", cache.stamp(), reading("v1")));
    assert!(cache.store("b", cache.stamp(), reading("w1")));
    relist(&cache, &[]);
    relist(&cache, &["a"]);
    assert_eq!(served(&cache, "a"), None);
    assert_eq!(
        served(&cache, "b").as_deref(),
        Some("w1"),
        "other pods keep theirs"
    );
    // A stream event between relists drops it too.
    cache.changed("b");
    assert_eq!(served(&cache, "b"), None);
}

#[test]
fn a_reading_stamped_before_a_change_seen_meanwhile_is_refused() {
    // The worker stamps, the relist sees the pod change and ends, then the worker's reading
    // (which may predate the change) arrives: it must not be stored.
    let cache = new_cache();
    relist(&cache, &[]);
    let stamp = cache.stamp();
    relist(&cache, &["a"]);
    assert!(!cache.store("a", stamp, reading("old")));
    assert_eq!(served(&cache, "a"), None);
    // The same with a stream event (no relist in between), and before any relist at all.
    let stamp = cache.stamp();
    cache.changed("a");
    assert!(!cache.store("a", stamp, reading("old")));
    let fresh = new_cache();
    let stamp = fresh.stamp();
    fresh.changed("x");
    assert!(!fresh.store("x", stamp, reading("old")));
    // Stamped after the change became known: the read came after the change, so it is
    // stored, and served once an observation begun after it ends.
    let stamp = cache.stamp();
    assert!(cache.store("a", stamp, reading("new")));
    assert_eq!(served(&cache, "a"), None);
    relist(&cache, &[]);
    assert_eq!(served(&cache, "a").as_deref(), Some("new"));
}

#[test]
fn a_failed_observation_drops_every_reading() {
    let cache = new_cache();
    assert!(cache.store("a", cache.stamp(), reading("v1")));
    relist(&cache, &[]);
    cache.begin();
    cache.observation_failed();
    assert_eq!(served(&cache, "a"), None);
    // Stored again and vouched for by the next observation that succeeds.
    assert!(cache.store("a", cache.stamp(), reading("v2")));
    relist(&cache, &[]);
    assert_eq!(served(&cache, "a").as_deref(), Some("v2"));
}

#[tokio::test(start_paused = true)]
async fn readings_age_out_while_the_pleg_is_stuck() {
    let cache = PodCache::new(Duration::from_secs(3));
    assert!(cache.store("a", cache.stamp(), reading("v1")));
    relist(&cache, &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        served(&cache, "a").as_deref(),
        Some("v1"),
        "within the maximum age"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(served(&cache, "a"), None, "no observation for 4 s");
    relist(&cache, &[]);
    assert_eq!(
        served(&cache, "a").as_deref(),
        Some("v1"),
        "the PLEG caught up"
    );
}

#[test]
fn a_read_in_flight_across_a_failed_observation_is_refused() {
    let cache = new_cache();
    relist(&cache, &[]);
    let stamp = cache.stamp();
    cache.begin();
    cache.observation_failed();
    assert!(!cache.store("a", stamp, reading("v1")));
    assert!(cache.store("a", cache.stamp(), reading("v2")));
}

#[test]
fn a_removed_pod_is_read_afresh() {
    let cache = new_cache();
    assert!(cache.store("a", cache.stamp(), reading("v1")));
    relist(&cache, &[]);
    cache.remove("a");
    assert_eq!(served(&cache, "a"), None);
}

#[tokio::test(start_paused = true)]
async fn old_changes_are_pruned_and_raise_the_floor() {
    let cache = new_cache();
    let early = cache.stamp();
    relist(&cache, &["gone"]); // a pod whose worker never stores again
    relist(&cache, &[]);
    assert!(
        cache.inner.lock().expect("lock").slots.contains_key("gone"),
        "remembered within CHANGE_MEMORY"
    );
    // Another pod's reading in flight meanwhile is not refused for it.
    assert!(cache.store("other", early, reading("v1")));
    tokio::time::sleep(super::CHANGE_MEMORY).await;
    relist(&cache, &[]);
    assert!(
        !cache.inner.lock().expect("lock").slots.contains_key("gone"),
        "the changed slot was pruned"
    );
    // A reading stamped before the pruned change may have missed it: refused.
    assert!(!cache.store("gone", early, reading("old")));
    assert!(!cache.store("third", early, reading("old")));
    // A reading stamped now is stored.
    assert!(cache.store("gone", cache.stamp(), reading("new")));
    // At rest nothing is pruned, so nothing is refused.
    let cache = new_cache();
    let stamp = cache.stamp();
    for _ in 0..5 {
        relist(&cache, &[]);
        tokio::time::sleep(super::CHANGE_MEMORY).await;
    }
    assert!(cache.store("a", stamp, reading("v1")));
}

#[tokio::test(start_paused = true)]
async fn read_asks_the_runtime_only_when_nothing_current_is_stored() {
    let rt = SimRuntime::new();
    let uid = "uid-cache";
    let config = SandboxConfig {
        pod: Arc::new(crate::testing::pod("p", uid, vec![])),
        attempt: 0,
        hostname: "p".into(),
        log_directory: "/tmp/x".into(),
        cgroup_parent: None,
        dns: None,
        runtime_handler: String::new(),
    };
    rt.run_pod_sandbox(&config).await.expect("sandbox");
    let cache = new_cache();
    let lists = || rt.calls("ListPodSandbox");
    let (first, source) = cache.read(&rt, uid).await.expect("read");
    assert_eq!((first.sandboxes.len(), source), (1, Source::Runtime));
    assert_eq!(lists(), 1);
    cache.read(&rt, uid).await.expect("read");
    assert_eq!(lists(), 2, "no observation yet: read again");
    relist(&cache, &[]);
    let cached = cache.read(&rt, uid).await.expect("read");
    assert_eq!(cached, (first, Source::Stored));
    assert_eq!(lists(), 2, "current: served from the cache");
    relist(&cache, &[uid]);
    let (_, source) = cache.read(&rt, uid).await.expect("read");
    assert_eq!(
        (lists(), source),
        (3, Source::Runtime),
        "changed: read afresh"
    );
    assert_eq!(
        rt.list_pod_sandboxes(&ListFilter::pod(uid))
            .await
            .expect("list")
            .len(),
        1
    );
}

/// One step of the model: the runtime changes a pod, the PLEG begins / lists / ends (or
/// fails) an observation, delivers an event or beats (evented, between relists), forgets old
/// changes (the floor), a worker
/// stamps / reads / stores or acts on its pod (removes its reading, then changes the pod), or
/// someone asks the cache.
#[derive(Debug, Clone)]
enum Op {
    Change(usize),
    Begin,
    List,
    End,
    Fail,
    Heartbeat,
    Prune,
    Act(usize),
    Event(usize),
    Stamp(usize),
    Read(usize),
    Store(usize),
    Get(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let pod = 0..3usize;
    prop_oneof![
        pod.clone().prop_map(Op::Change),
        Just(Op::Begin),
        Just(Op::List),
        Just(Op::End),
        Just(Op::Fail),
        Just(Op::Heartbeat),
        Just(Op::Prune),
        pod.clone().prop_map(Op::Act),
        pod.clone().prop_map(Op::Event),
        pod.clone().prop_map(Op::Stamp),
        pod.clone().prop_map(Op::Read),
        pod.clone().prop_map(Op::Store),
        pod.prop_map(Op::Get),
    ]
}

/// The PLEG of the model: an observation in progress and what the last ended one listed.
#[derive(Default)]
struct Pleg {
    /// The observation begun and not ended: its stamp and the versions it listed, if it did.
    open: Option<(Stamp, Option<Vec<u64>>)>,
    /// The versions the last listing that ended saw (what the records hold).
    records: Vec<u64>,
    /// Versions an ended observation has seen (whose readings must not be served older).
    seen: Vec<u64>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the interleaving, a served reading is at least as new as what the last ended
    /// observation saw of that pod (stream events deliver a change at once in this model), and
    /// as new as the worker's own last action on it.
    #[test]
    fn a_served_reading_never_misses_an_observed_change(ops in proptest::collection::vec(op(), 1..120)) {
        let cache = new_cache();
        let uids = ["p0", "p1", "p2"];
        let mut truth = vec![0u64; 3];
        let mut pleg = Pleg { records: vec![0; 3], seen: vec![0; 3], ..Default::default() };
        // Per pod, the worker's reading in progress: its stamp and the version it read.
        let mut worker: HashMap<usize, (Stamp, Option<u64>)> = HashMap::new();
        // Per pod, the version the worker's own last action left.
        let mut acted = [0u64; 3];
        for op in ops {
            match op {
                Op::Change(p) => truth[p] += 1,
                Op::Begin if pleg.open.is_none() => pleg.open = Some((cache.begin(), None)),
                Op::List => {
                    if let Some((_, listed @ None)) = &mut pleg.open {
                        *listed = Some(truth.clone());
                    }
                }
                Op::End => {
                    if let Some((n, Some(listed))) = pleg.open.take() {
                        let changed: Vec<&str> = (0..3)
                            .filter(|&p| listed[p] != pleg.records[p])
                            .map(|p| uids[p])
                            .collect();
                        cache.observed(n, changed);
                        for (seen, &v) in pleg.seen.iter_mut().zip(&listed) {
                            *seen = (*seen).max(v);
                        }
                        pleg.records = listed;
                    }
                }
                Op::Fail => {
                    if pleg.open.take().is_some() {
                        cache.observation_failed();
                    }
                }
                Op::Heartbeat if pleg.open.is_none() => {
                    let n = cache.begin();
                    cache.observed(n, []);
                }
                Op::Heartbeat => {}
                // Every remembered change forgotten at once (CHANGE_MEMORY passed).
                Op::Prune => cache.prune_changes(Duration::ZERO),
                // A worker acts between its reads, never during one.
                Op::Act(p) if !worker.contains_key(&p) => {
                    cache.remove(uids[p]);
                    truth[p] += 1;
                    acted[p] = truth[p];
                }
                Op::Act(_) => {}
                Op::Event(p) => {
                    // The stream reports the pod's newest version (recorded as the relist would).
                    if pleg.records[p] != truth[p] {
                        cache.changed(uids[p]);
                        pleg.records[p] = truth[p];
                        pleg.seen[p] = truth[p];
                    }
                }
                Op::Stamp(p) => {
                    worker.entry(p).or_insert((cache.stamp(), None));
                }
                Op::Read(p) => {
                    if let Some((_, read @ None)) = worker.get_mut(&p) {
                        *read = Some(truth[p]);
                    }
                }
                Op::Store(p) => {
                    if let Some((stamp, Some(v))) = worker.get(&p).cloned() {
                        worker.remove(&p);
                        cache.store(uids[p], stamp, reading(&v.to_string()));
                    }
                }
                Op::Begin => {}
                Op::Get(p) => {
                    if let Some(v) = served(&cache, uids[p]) {
                        let v: u64 = v.parse().expect("version");
                        prop_assert!(
                            v >= pleg.seen[p],
                            "served version {} of {} but an ended observation saw {}",
                            v, uids[p], pleg.seen[p]
                        );
                        prop_assert!(
                            v >= acted[p],
                            "served version {} of {} but the worker's own action left {}",
                            v, uids[p], acted[p]
                        );
                    }
                }
            }
        }
    }
}

/// The whole engine on the simulated runtime: a steady pod's periodic resyncs (every 60 s)
/// are served from the cache, and an exit still reaches its status through the relist.
#[tokio::test(start_paused = true)]
async fn a_steady_pods_resyncs_ask_the_runtime_nothing_and_its_exit_still_shows() {
    use crate::lifecycle_tests::start;
    use crate::testing::{container, pod};

    let uid = "uid-steady";
    let mut p = pod("steady", uid, vec![container("app", "busybox")]);
    if let Some(spec) = p.spec.as_mut() {
        spec.restart_policy = Some("Never".into());
    }
    let h = start(vec![p]).await;
    h.until(Duration::from_secs(30), "Running", |h| {
        h.phase(uid) == "Running"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    // A pod's read is its listing and one status call per sandbox and container.
    let reads = |h: &crate::lifecycle_tests::Harness| {
        h.rt.calls("PodSandboxStatus") + h.rt.calls("ContainerStatus")
    };
    let relists = h.rt.calls("ListPodSandbox");
    let before = reads(&h);
    // At least three resyncs (60 s, jittered by up to half).
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(
        h.rt.calls("ListPodSandbox") > relists + 250,
        "the PLEG kept relisting"
    );
    assert_eq!(
        reads(&h),
        before,
        "the resyncs read the pod from the runtime"
    );
    let id = h.rt.container_ids(uid, "app").pop().expect("container");
    h.rt.crash(&id, 3);
    h.until(Duration::from_secs(5), "the exit in the status", |h| {
        h.status(uid)
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs.into_iter().next())
            .and_then(|c| c.state?.terminated)
            .is_some_and(|t| t.exit_code == 3)
    })
    .await;
    h.stop().await;
}

/// A stored reading that calls for an action is not acted on: the pod is read afresh first.
/// Here a crash-looping container's back-off ends while nothing has changed since the pod was
/// last read, so the sync at its end is served the stored reading; the restart must still
/// follow a read from the runtime.
#[tokio::test(start_paused = true)]
async fn an_action_on_a_stored_reading_waits_for_a_fresh_one() {
    use crate::lifecycle_tests::start;
    use crate::testing::{container, pod};

    let uid = "uid-backoff";
    let h = start(vec![pod("backoff", uid, vec![container("app", "busybox")])]).await;
    h.rt.keep_counts_at("CreateContainer");
    h.until(Duration::from_secs(30), "Running", |h| {
        h.phase(uid) == "Running"
    })
    .await;
    let crash = |h: &crate::lifecycle_tests::Harness| {
        let id = h.rt.container_ids(uid, "app").pop().expect("container");
        h.rt.crash(&id, 1);
    };
    // The first restart is at once; the second waits out a 10 s back-off.
    crash(&h);
    h.until(Duration::from_secs(5), "the first restart", |h| {
        h.rt.calls("CreateContainer") == 2
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    crash(&h);
    h.until(Duration::from_secs(5), "CrashLoopBackOff", |h| {
        h.waiting_reason(uid, "app").as_deref() == Some("CrashLoopBackOff")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Only reads of a pod ask for its sandbox's status.
    let reads = h.rt.calls("PodSandboxStatus");
    h.until(
        Duration::from_secs(15),
        "the restart after the back-off",
        |h| h.rt.calls("CreateContainer") == 3,
    )
    .await;
    assert!(
        h.rt.calls_at_last("CreateContainer", "PodSandboxStatus") > reads,
        "the container was created from the reading stored before the back-off"
    );
    h.stop().await;
}
