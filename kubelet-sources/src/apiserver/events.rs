//! The event recorder (Go's `record.EventRecorder` with its `EventCorrelator`).
//!
//! [`EventRecorder::record`] never blocks: events go into a bounded queue and are dropped
//! (counted, logged at debug level) when it is full. The [`EventWorker`] writes them as
//! core/v1 Events:
//! - **aggregation**: an event identical to one written in the last 10 minutes (same
//!   object, type, reason and message) updates that Event's `count` and `lastTimestamp`
//!   instead of creating a new one;
//! - **rate limit**: per involved object, a token bucket of burst 25 refilled by one token
//!   every 5 minutes (Go's spam filter); events over the limit are dropped.
//!
//! Pod events go to the pod's namespace; node events to `default`, with the node name as
//! the involved object's uid (as Go does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as ApiEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use kubelet_core::sink::{Event, EventObject};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::TokenBucket;

/// Queue capacity (Go's broadcaster queue is 1000 deep).
pub const QUEUE_CAPACITY: usize = 1000;
/// How long a written event can be aggregated into.
const AGGREGATION_WINDOW: Duration = Duration::from_secs(600);
/// Spam filter burst per object.
const SPAM_BURST: u32 = 25;
/// Spam filter refill rate per object (one per 5 minutes).
const SPAM_QPS: f64 = 1.0 / 300.0;
/// Largest number of distinct keys remembered.
const MAX_CACHE: usize = 4096;

/// The sending half: cheap to clone, never blocks.
#[derive(Debug, Clone)]
pub struct EventRecorder {
    tx: mpsc::Sender<Event>,
    dropped: Arc<AtomicU64>,
}

impl EventRecorder {
    /// A recorder and the worker that writes its events for `node_name` through `client`.
    pub fn new(client: kube::Client, node_name: impl Into<String>) -> (Self, EventWorker) {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        (
            EventRecorder {
                tx,
                dropped: dropped.clone(),
            },
            EventWorker {
                client,
                node_name: node_name.into(),
                rx,
                correlator: Correlator::default(),
            },
        )
    }

    /// Queues an event; drops it when the queue is full.
    pub fn record(&self, event: Event) {
        if let Err(e) = self.tx.try_send(event) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::debug!(dropped = n, error = %e, "event queue full; event dropped");
        }
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// What the correlator decided for one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Create a new Event with this name.
    Create {
        /// The Event's name.
        name: String,
    },
    /// Update the earlier Event `name` to `count`.
    Aggregate {
        /// The Event's name.
        name: String,
        /// The new count.
        count: i32,
        /// When the first occurrence was.
        first: Time,
    },
    /// Dropped by the spam filter.
    Drop,
}

#[derive(Debug)]
struct Seen {
    name: String,
    count: i32,
    first: Time,
    at: Instant,
}

/// The aggregation and rate-limit state (pure, for testing).
#[derive(Debug, Default)]
pub struct Correlator {
    seen: HashMap<(String, String, String, String), Seen>,
    buckets: HashMap<String, TokenBucket>,
}

fn object_key(o: &EventObject) -> String {
    match o {
        EventObject::Pod {
            namespace,
            name,
            uid,
            field_path,
        } => {
            format!("pod/{namespace}/{name}/{uid}/{field_path}")
        }
        EventObject::Node { name } => format!("node/{name}"),
    }
}

fn object_name(o: &EventObject) -> &str {
    match o {
        EventObject::Pod { name, .. } | EventObject::Node { name } => name,
    }
}

impl Correlator {
    /// Decides what to do with `e` at `now` (`wall` is the event time).
    pub fn observe(&mut self, e: &Event, now: Instant, wall: &Time, unique: u64) -> Decision {
        let obj = object_key(&e.object);
        if self.buckets.len() > MAX_CACHE {
            self.buckets.clear();
        }
        let bucket = self
            .buckets
            .entry(obj.clone())
            .or_insert_with(|| TokenBucket::new(SPAM_QPS, SPAM_BURST));
        if !bucket.reserve(now).is_zero() {
            // Give the token back: a dropped event must not cost future ones.
            bucket.unreserve();
            return Decision::Drop;
        }
        let key = (
            obj,
            e.event_type.as_str().to_string(),
            e.reason.clone(),
            e.message.clone(),
        );
        if self.seen.len() > MAX_CACHE {
            self.seen
                .retain(|_, s| now.saturating_duration_since(s.at) < AGGREGATION_WINDOW);
        }
        match self.seen.get_mut(&key) {
            Some(s) if now.saturating_duration_since(s.at) < AGGREGATION_WINDOW => {
                s.count += 1;
                s.at = now;
                Decision::Aggregate {
                    name: s.name.clone(),
                    count: s.count,
                    first: s.first.clone(),
                }
            }
            _ => {
                let name = format!("{}.{:x}", object_name(&e.object), unique);
                self.seen.insert(
                    key,
                    Seen {
                        name: name.clone(),
                        count: 1,
                        first: wall.clone(),
                        at: now,
                    },
                );
                Decision::Create { name }
            }
        }
    }

    /// Forgets an aggregation entry (its Event could not be updated).
    fn forget(&mut self, name: &str) {
        self.seen.retain(|_, s| s.name != name);
    }
}

/// The writing half; run it with [`EventWorker::run`].
pub struct EventWorker {
    client: kube::Client,
    node_name: String,
    rx: mpsc::Receiver<Event>,
    correlator: Correlator,
}

impl std::fmt::Debug for EventWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventWorker")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

/// The core/v1 Event for `e` (namespace, involved object, source).
pub fn api_event(
    e: &Event,
    name: &str,
    node_name: &str,
    first: &Time,
    last: &Time,
    count: i32,
) -> ApiEvent {
    let (namespace, involved) = match &e.object {
        EventObject::Pod {
            namespace,
            name,
            uid,
            field_path,
        } => (
            namespace.clone(),
            ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                uid: Some(uid.clone()),
                field_path: (!field_path.is_empty()).then(|| field_path.clone()),
                ..Default::default()
            },
        ),
        EventObject::Node { name } => (
            "default".to_string(),
            ObjectReference {
                kind: Some("Node".into()),
                name: Some(name.clone()),
                uid: Some(name.clone()),
                ..Default::default()
            },
        ),
    };
    ApiEvent {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace),
            annotations: (!e.annotations.is_empty()).then(|| e.annotations.clone()),
            ..Default::default()
        },
        involved_object: involved,
        reason: Some(e.reason.clone()),
        message: Some(e.message.clone()),
        type_: Some(e.event_type.as_str().to_string()),
        source: Some(EventSource {
            component: Some("kubelet".into()),
            host: Some(node_name.to_string()),
        }),
        first_timestamp: Some(first.clone()),
        last_timestamp: Some(last.clone()),
        count: Some(count),
        reporting_component: Some("kubelet".into()),
        reporting_instance: Some(node_name.to_string()),
        ..Default::default()
    }
}

impl EventWorker {
    /// Writes queued events until `shutdown`.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let e = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = self.rx.recv() => match e {
                    Some(e) => e,
                    None => return,
                },
            };
            self.write(&e).await;
        }
    }

    async fn write(&mut self, e: &Event) {
        let wall = kubelet_core::clock::now_time()
            .unwrap_or(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let unique = u64::try_from(kubelet_core::clock::now_unix_nanos()).unwrap_or(0);
        let decision = self.correlator.observe(e, Instant::now(), &wall, unique);
        let ev_ns = match &e.object {
            EventObject::Pod { namespace, .. } => namespace.clone(),
            EventObject::Node { .. } => "default".into(),
        };
        let api: Api<ApiEvent> = Api::namespaced(self.client.clone(), &ev_ns);
        match decision {
            Decision::Drop => {
                tracing::debug!(reason = %e.reason, "event dropped by the rate limit");
            }
            Decision::Create { name } => {
                let ev = api_event(e, &name, &self.node_name, &wall, &wall, 1);
                if let Err(err) = api.create(&PostParams::default(), &ev).await {
                    tracing::debug!(reason = %e.reason, error = %err, "writing an event failed");
                    self.correlator.forget(&name);
                }
            }
            Decision::Aggregate { name, count, first } => {
                let ev = api_event(e, &name, &self.node_name, &first, &wall, count);
                let patch = ApiEvent {
                    metadata: ObjectMeta::default(),
                    involved_object: ObjectReference::default(),
                    count: ev.count,
                    last_timestamp: ev.last_timestamp.clone(),
                    ..Default::default()
                };
                let res = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                if let Err(err) = res {
                    tracing::debug!(reason = %e.reason, error = %err, "updating an event failed; creating it anew");
                    self.correlator.forget(&name);
                    let fresh = format!("{}.{:x}", object_name(&e.object), unique);
                    let ev = api_event(e, &fresh, &self.node_name, &wall, &wall, 1);
                    let _ = api.create(&PostParams::default(), &ev).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubelet_core::sink::EventType;

    fn ev(reason: &str, msg: &str) -> Event {
        Event {
            object: EventObject::Pod {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
                field_path: String::new(),
            },
            event_type: EventType::Normal,
            reason: reason.into(),
            message: msg.into(),
            annotations: Default::default(),
        }
    }

    fn wall() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_aggregate_within_the_window() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let d1 = c.observe(&ev("BackOff", "m"), now, &wall(), 1);
        assert_eq!(d1, Decision::Create { name: "p.1".into() });
        let d2 = c.observe(
            &ev("BackOff", "m"),
            now + Duration::from_secs(5),
            &wall(),
            2,
        );
        assert_eq!(
            d2,
            Decision::Aggregate {
                name: "p.1".into(),
                count: 2,
                first: wall()
            }
        );
        // Another message is another event.
        let d3 = c.observe(&ev("BackOff", "other"), now, &wall(), 3);
        assert_eq!(d3, Decision::Create { name: "p.3".into() });
        // Past the window a new Event is created.
        let d4 = c.observe(
            &ev("BackOff", "m"),
            now + Duration::from_secs(1000),
            &wall(),
            4,
        );
        assert_eq!(d4, Decision::Create { name: "p.4".into() });
    }

    #[tokio::test(start_paused = true)]
    async fn spam_filter_allows_a_burst_of_25_per_object() {
        let mut c = Correlator::default();
        let now = Instant::now();
        let decisions: Vec<Decision> = (0..30)
            .map(|i| c.observe(&ev("R", &i.to_string()), now, &wall(), i))
            .collect();
        assert!(decisions[..25]
            .iter()
            .all(|d| matches!(d, Decision::Create { .. })));
        assert!(decisions[25..].iter().all(|d| *d == Decision::Drop));
        // One token back after five minutes.
        let later = now + Duration::from_secs(300);
        assert!(matches!(
            c.observe(&ev("R", "x"), later, &wall(), 99),
            Decision::Create { .. }
        ));
        assert_eq!(
            c.observe(&ev("R", "y"), later, &wall(), 100),
            Decision::Drop
        );
    }

    #[tokio::test]
    async fn record_never_blocks_and_counts_drops() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let (rec, _worker) = EventRecorder::new(client, "n1");
        for _ in 0..(QUEUE_CAPACITY + 10) {
            rec.record(ev("R", "m"));
        }
        assert_eq!(rec.dropped(), 10);
    }

    #[test]
    fn node_events_go_to_default_namespace() {
        let e = Event::for_node("n1", EventType::Normal, "NodeReady", "m".into());
        let a = api_event(&e, "n1.1", "n1", &wall(), &wall(), 1);
        assert_eq!(a.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(a.involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(a.involved_object.uid.as_deref(), Some("n1"));
        assert_eq!(a.source.unwrap().host.as_deref(), Some("n1"));
        assert_eq!(a.metadata.annotations, None);
    }

    #[test]
    fn annotations_go_on_the_event_object() {
        // The eviction manager's (Go's AnnotatedEventf): the node e2e eviction specs read them.
        let e = ev("Evicted", "The node was low on resource: memory. ")
            .with_annotations([("starved_resource".to_string(), "memory".to_string())].into());
        let a = api_event(&e, "p.1", "n1", &wall(), &wall(), 1);
        assert_eq!(
            a.metadata.annotations,
            Some([("starved_resource".to_string(), "memory".to_string())].into())
        );
    }
}
