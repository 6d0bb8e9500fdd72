//! Evented PLEG tests: the whole engine on the simulated runtime and tokio's paused clock, and
//! the record keeping (no event lost or doubled) on a bare [`Pleg`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ContainerStateTerminated;
use tokio_util::sync::CancellationToken;

use super::super::{EventKind, Pleg};
use crate::engine::Engine;
use crate::objects::StandaloneObjectStore;
use crate::runtime::{ContainerEventKind, ContainerRuntime};
use crate::sink::NoopStatusSink;
use crate::testing::{
    eventually, ContainerBuilder, FakeContainerManager, PodBuilder, SimRuntime, StaticSource,
};
use crate::{Config, Kubelet, KubeletHandle};

const UID: &str = "uid-ev";

struct Node {
    handle: KubeletHandle,
    rt: Arc<SimRuntime>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<crate::Result<()>>,
}

fn config(evented: bool, relist: Duration) -> Config {
    Config {
        node_name: "node-1".into(),
        resolv_conf: Default::default(),
        root_dir: Default::default(),
        evented_pleg: evented,
        pleg_relist_period: relist,
        ..Config::default()
    }
}

/// One pod whose container runs until crashed, and is not restarted.
async fn start(cfg: Config, rt: Arc<SimRuntime>) -> Node {
    let pod = PodBuilder::new("ev", UID)
        .restart_policy("Never")
        .container(ContainerBuilder::new("app", "busybox").build())
        .build();
    let kubelet = Kubelet::builder()
        .config(cfg)
        .runtime(rt.clone())
        .container_manager(Arc::new(FakeContainerManager::default()))
        .source(Arc::new(StaticSource::new("file", vec![pod])))
        .build()
        .expect("build");
    let handle = kubelet.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(kubelet.run(shutdown.clone()));
    let node = Node {
        handle,
        rt,
        shutdown,
        task,
    };
    eventually(Duration::from_secs(30), "the container runs", || async {
        node.running().then_some(())
    })
    .await;
    node
}

impl Node {
    fn app(&self) -> Option<k8s_openapi::api::core::v1::ContainerState> {
        self.handle
            .pod_status(UID)?
            .container_statuses?
            .into_iter()
            .find(|s| s.name == "app")?
            .state
    }

    fn running(&self) -> bool {
        self.app().is_some_and(|s| s.running.is_some())
    }

    fn terminated(&self) -> Option<ContainerStateTerminated> {
        self.app()?.terminated
    }

    /// Crashes the container and returns how long (virtual time) its status took to show it.
    async fn crash_latency(&self, limit: Duration) -> Duration {
        let id = self
            .rt
            .container_ids(UID, "app")
            .pop()
            .expect("container id");
        let t0 = tokio::time::Instant::now();
        self.rt.crash(&id, 3);
        loop {
            if self.terminated().is_some_and(|t| t.exit_code == 3) {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < limit,
                "no exit in the status after {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("join").expect("run");
    }
}

#[tokio::test(start_paused = true)]
async fn an_exit_reaches_the_status_without_a_relist() {
    // A 10s relist period: only the event can bring the exit within 100ms.
    let node = start(
        config(true, Duration::from_secs(10)),
        Arc::new(SimRuntime::new()),
    )
    .await;
    let took = node.crash_latency(Duration::from_secs(20)).await;
    assert!(took <= Duration::from_millis(100), "took {took:?}");
    assert_eq!(node.rt.calls("GetContainerEvents"), 1);
    node.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_events_the_relist_brings_the_exit() {
    // Relist-only (the default) and a runtime answering Unimplemented: the exit waits for the
    // next relist (10s period).
    for evented in [false, true] {
        let rt = Arc::new(SimRuntime::new());
        rt.set_events_unimplemented(true);
        let node = start(config(evented, Duration::from_secs(10)), rt).await;
        let took = node.crash_latency(Duration::from_secs(20)).await;
        assert!(
            took > Duration::from_millis(100),
            "evented={evented}: {took:?}"
        );
        assert!(
            took <= Duration::from_secs(11),
            "evented={evented}: {took:?}"
        );
        assert_eq!(
            node.rt.calls("GetContainerEvents"),
            usize::from(evented),
            "evented={evented}: the subscription is tried once"
        );
        node.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_broken_stream_hands_over_to_the_relist_at_once() {
    let rt = Arc::new(SimRuntime::new());
    let node = start(config(true, Duration::from_secs(1)), rt.clone()).await;
    // The runtime restarts without events: the stream ends, the reconnect is refused.
    rt.set_events_unimplemented(true);
    rt.break_event_streams();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rt.calls("GetContainerEvents"), 2);
    let took = node.crash_latency(Duration::from_secs(5)).await;
    assert!(took <= Duration::from_millis(1100), "took {took:?}");
    node.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_stream_reconnects_and_drives_syncs_again() {
    let rt = Arc::new(SimRuntime::new());
    let node = start(config(true, Duration::from_secs(10)), rt.clone()).await;
    rt.break_event_streams();
    // Fallback: the relist takes over; the subscription is retried after one period.
    eventually(Duration::from_secs(15), "a second subscription", || async {
        (rt.calls("GetContainerEvents") == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let took = node.crash_latency(Duration::from_secs(20)).await;
    assert!(took <= Duration::from_millis(100), "took {took:?}");
    node.stop().await;
}

fn bare_pleg(rt: Arc<SimRuntime>) -> Pleg {
    let engine = Engine::new(
        config(true, Duration::from_secs(1)),
        rt,
        Arc::new(FakeContainerManager::default()),
        Arc::new(NoopStatusSink),
        Vec::new(),
        Arc::new(StandaloneObjectStore),
        Vec::new(),
    );
    Pleg::new(Arc::new(engine))
}

#[tokio::test(start_paused = true)]
async fn a_change_seen_by_relist_and_stream_is_reported_once() {
    let rt = Arc::new(SimRuntime::new());
    let node = start(config(false, Duration::from_secs(1)), rt.clone()).await;
    let id = rt.container_ids(UID, "app").pop().expect("container id");
    let mut pleg = bare_pleg(rt.clone());
    let mut stream = rt.container_events().await.expect("subscribe");
    pleg.relist().await.expect("relist");

    // Exit while subscribed, then a relist before the event is read (a reconnect relist).
    tokio::time::sleep(Duration::from_millis(5)).await;
    rt.crash(&id, 3);
    let died = pleg.relist().await.expect("relist");
    assert!(died
        .iter()
        .any(|e| e.kind == EventKind::ContainerDied && e.id == id && e.pod_uid == UID));
    let stopped = stream.next().await.expect("event").expect("ok");
    assert_eq!(stopped.kind, ContainerEventKind::Stopped);
    assert_eq!(pleg.apply(&stopped), None, "reported twice");

    // An event older than the last relist is stale, even of a state not recorded.
    let mut stale = stopped.clone();
    stale.kind = ContainerEventKind::Started;
    stale.created_at -= 1;
    assert_eq!(pleg.apply(&stale), None);
    node.stop().await;
}

#[tokio::test(start_paused = true)]
async fn stream_events_map_to_lifecycle_events_of_the_pod() {
    let rt = Arc::new(SimRuntime::new());
    let node = start(config(false, Duration::from_secs(1)), rt.clone()).await;
    let id = rt.container_ids(UID, "app").pop().expect("container id");
    let mut pleg = bare_pleg(rt.clone());
    pleg.relist().await.expect("relist");
    let mut stream = rt.container_events().await.expect("subscribe");
    tokio::time::sleep(Duration::from_millis(5)).await;
    rt.crash(&id, 3);
    let mut stopped = stream.next().await.expect("event").expect("ok");
    // No pod in the event: the container's record (or its sandbox's) says whose it is.
    stopped.pod = Default::default();
    let ev = pleg.apply(&stopped).expect("an event");
    assert_eq!(
        (ev.kind, ev.id.as_str(), ev.pod_uid.as_str()),
        (EventKind::ContainerDied, id.as_str(), UID)
    );
    // The same event again changes nothing.
    assert_eq!(pleg.apply(&stopped), None);
    let mut deleted = stopped.clone();
    deleted.kind = ContainerEventKind::Deleted;
    let ev = pleg.apply(&deleted).expect("an event");
    assert_eq!(ev.kind, EventKind::ContainerRemoved);
    // A container of no pod of ours: ignored.
    let mut foreign = deleted.clone();
    foreign.container_id = "other".into();
    foreign.sandbox_id = "other-sandbox".into();
    foreign.kind = ContainerEventKind::Started;
    assert_eq!(pleg.apply(&foreign), None);
    node.stop().await;
}
