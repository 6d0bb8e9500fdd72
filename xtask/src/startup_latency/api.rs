//! The scenarios through the API server: pods created with their `nodeName` set, each timed
//! from just before its create request until a watch shows it `Ready`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection,
    DownwardAPIVolumeFile, Namespace, ObjectFieldSelector, Pod, PodSpec, ProjectedVolumeSource,
    Secret, SecretVolumeSource, ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::Api;
use serde_json::{json, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ms;
use super::steps::{self, Timed};
use crate::bench_cri::spans::{self as otlp, Collector, RunningCollector};
use crate::bench_cri::workload::busybox_container;

/// Flags of `cargo xtask startup-latency api`.
#[derive(clap::Args)]
pub(super) struct ApiArgs {
    /// The cluster's admin kubeconfig.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: PathBuf,
    /// The node the pods are bound to (the kubelet under test).
    #[arg(long)]
    node: String,
    /// The kubelet's name in the figures.
    #[arg(long)]
    kubelet: String,
    /// Scenario (a): pods created one at a time.
    #[arg(long, default_value_t = 50)]
    sequential: usize,
    /// Scenario (b): pods per burst.
    #[arg(long, default_value_t = 30)]
    burst: usize,
    /// Scenario (b): bursts (all of a burst's pods deleted before the next).
    #[arg(long, default_value_t = 3)]
    bursts: usize,
    /// Scenario (c): pods with configMap, secret and projected volumes, one at a time.
    #[arg(long, default_value_t = 30)]
    volume_pods: usize,
    /// Seconds any one wait may take (pods Ready, pods gone).
    #[arg(long, default_value_t = 180)]
    timeout: u64,
    /// Where the figures go (JSON).
    #[arg(long)]
    pub(super) out: PathBuf,
    /// Serve an OTLP/gRPC trace collector on this address during the scenarios (a kubelet-rs
    /// configured to export every span to it) and add each scenario's breakdown from the
    /// spans: intake, the sync's CRI calls and own time, after (see `steps`); the spans go to
    /// `OUT` with the extension `spans.tsv`.
    #[arg(long)]
    otlp: Option<SocketAddr>,
}

const NAMESPACE: &str = "startup-latency";
const RUN_LABEL: &str = "startup-latency-run";
const CONFIG_MAP: &str = "startup-config";
const SECRET: &str = "startup-secret";

/// When the watch first showed a pod's status from the kubelet, and the pod `Ready`.
#[derive(Default, Clone, Copy)]
struct Seen {
    status: Option<Instant>,
    ready: Option<Instant>,
}

type SeenMap = Arc<Mutex<HashMap<String, Seen>>>;

/// Notes what `pod`, as the watch delivered it at `at`, shows for the first time.
fn record(seen: &SeenMap, pod: &Pod, at: Instant) {
    let Some(name) = pod.metadata.name.clone() else {
        return;
    };
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    // The scheduler is not involved (nodeName is set): any condition is the kubelet's.
    let from_kubelet = conditions.iter().any(|c| c.type_ == "Initialized");
    let ready = conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if let Ok(mut m) = seen.lock() {
        let e = m.entry(name).or_default();
        if from_kubelet && e.status.is_none() {
            e.status = Some(at);
        }
        if ready && e.ready.is_none() {
            e.ready = Some(at);
        }
    }
}

/// One pod's figures (milliseconds from just before its create request).
struct Sample {
    create: f64,
    status: Option<f64>,
    ready: f64,
    /// The pod and its create request and `Ready` on the wall clock (the spans' time base).
    timed: Timed,
}

/// The state of one run: the client, its pods' API and what the watch saw.
struct Bench<'a> {
    client: kube::Client,
    pods: Api<Pod>,
    seen: SeenMap,
    run: String,
    args: &'a ApiArgs,
    collector: Option<RunningCollector>,
}

/// Runs the three scenarios against the kubelet of `args.node`.
pub(super) async fn run(args: &ApiArgs) -> Result<Value> {
    let cfg = kubelet_sources::apiserver::client::load_kubeconfig(&args.kubeconfig)
        .await
        .with_context(|| format!("kubeconfig {}", args.kubeconfig.display()))?;
    let client = kube::Client::try_from(cfg).context("building the client")?;
    let limit = Duration::from_secs(args.timeout);
    prepare_namespace(&client, limit).await?;
    let run = format!("{:x}", std::process::id());
    let collector = match args.otlp {
        Some(addr) => Some(Collector::start_on(addr).await?),
        None => None,
    };
    let bench = Bench {
        pods: Api::namespaced(client.clone(), NAMESPACE),
        client: client.clone(),
        seen: SeenMap::default(),
        run,
        args,
        collector,
    };
    let stop = CancellationToken::new();
    let watch = bench.watch(stop.clone()).await?;
    let result = bench.scenarios().await;
    stop.cancel();
    let _ = watch.await;
    let namespaces: Api<Namespace> = Api::all(client);
    let _ = namespaces.delete(NAMESPACE, &DeleteParams::default()).await;
    result
}

impl Bench<'_> {
    fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.run)
    }

    /// Starts the watch of the run's pods; returns once it has listed them.
    async fn watch(&self, stop: CancellationToken) -> Result<tokio::task::JoinHandle<()>> {
        let cfg = watcher::Config::default().labels(&self.selector());
        let (synced_tx, synced) = tokio::sync::oneshot::channel();
        let (pods, seen) = (self.pods.clone(), self.seen.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(pods, cfg));
            let mut synced_tx = Some(synced_tx);
            loop {
                let event = tokio::select! {
                    _ = stop.cancelled() => break,
                    e = stream.next() => e,
                };
                match event {
                    Some(Ok(Event::Apply(p) | Event::InitApply(p))) => {
                        record(&seen, &p, Instant::now())
                    }
                    Some(Ok(Event::InitDone)) => {
                        if let Some(tx) = synced_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => eprintln!("[startup-latency] watch: {e}"),
                    None => break,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), synced)
            .await
            .context("the watch of the benchmark's pods did not start within 30 s")?
            .context("the watch ended")?;
        Ok(task)
    }

    async fn scenarios(&self) -> Result<Value> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let mut rtt = Vec::new();
        for _ in 0..20 {
            let t = Instant::now();
            namespaces.get(NAMESPACE).await?;
            rtt.push(ms(t.elapsed()));
        }
        let mut out = serde_json::Map::new();
        out.insert("kubelet".into(), json!(self.args.kubelet));
        out.insert("node".into(), json!(self.args.node));
        out.insert("get_rtt_ms".into(), json!(rtt));

        let (n, burst) = (self.args.sequential, self.args.burst);
        let mut timings = Vec::new();
        let plan: [(&str, usize, usize, bool); 3] = [
            ("sequential", n, 1, false),
            ("burst", self.args.bursts, burst, false),
            ("volumes", self.args.volume_pods, 1, true),
        ];
        for (scenario, groups, per_group, volumes) in plan {
            eprintln!("[startup-latency] {}: {scenario}", self.args.kubelet);
            let before = self.pod_start_metric().await;
            let wall = Instant::now();
            let mut samples = Vec::new();
            let mut gone = Vec::new();
            for g in 0..groups {
                let pods: Vec<Pod> = (0..per_group)
                    .map(|i| self.pod(&format!("{scenario}-{g:03}-{i:03}"), scenario, volumes))
                    .collect();
                samples.extend(self.start(pods).await?);
                // A burst's pods go before the next burst; one-at-a-time pods stay until the
                // scenario ends (at most `sequential` of them, under maxPods).
                if per_group > 1 {
                    gone.push(self.delete_all().await?);
                }
            }
            if per_group == 1 {
                gone.push(self.delete_all().await?);
            }
            let after = self.pod_start_metric().await;
            let timed: Vec<Timed> = samples.iter().map(|s| s.timed.clone()).collect();
            let kubelet = match (before, after) {
                (Some((s0, c0)), Some((s1, c1))) if c1 > c0 => {
                    json!({"count": c1 - c0, "mean_ms": (s1 - s0) / (c1 - c0) * 1000.0})
                }
                _ => Value::Null,
            };
            timings.push((scenario, timed));
            out.insert(
                scenario.into(),
                json!({
                    "ready_ms": samples.iter().map(|s| s.ready).collect::<Vec<_>>(),
                    "status_ms": samples.iter().filter_map(|s| s.status).collect::<Vec<_>>(),
                    "create_ms": samples.iter().map(|s| s.create).collect::<Vec<_>>(),
                    "pods_per_group": per_group,
                    "kubelet_pod_start": kubelet,
                    "deleted_s": gone,
                    "wall_s": wall.elapsed().as_secs_f64(),
                }),
            );
        }
        if let Some(c) = &self.collector {
            // The last steps' spans leave in the kubelet's next export batch.
            c.collector
                .settle(Duration::from_secs(8), Duration::from_secs(30))
                .await;
            let spans = c.collector.spans();
            let dump = self.args.out.with_extension("spans.tsv");
            tokio::fs::write(&dump, otlp::tsv(&spans))
                .await
                .with_context(|| format!("writing {}", dump.display()))?;
            eprintln!(
                "[startup-latency] {} spans in {}",
                spans.len(),
                dump.display()
            );
            for (scenario, timed) in timings {
                if let Some(Value::Object(o)) = out.get_mut(scenario) {
                    o.insert("steps".into(), steps::breakdown(&spans, &timed));
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// Creates `pods` at once and waits until the watch has shown each `Ready`.
    async fn start(&self, pods: Vec<Pod>) -> Result<Vec<Sample>> {
        let creates = pods.into_iter().map(|p| async move {
            let name = p.metadata.name.clone().unwrap_or_default();
            let wall = otlp::unix_ns(kubelet_core::clock::wall_now());
            let t0 = Instant::now();
            let r = self.pods.create(&PostParams::default(), &p).await;
            (name, (t0, wall), t0.elapsed(), r)
        });
        let mut started = Vec::new();
        for (name, t0, took, r) in futures::future::join_all(creates).await {
            r.with_context(|| format!("creating pod {name}"))?;
            started.push((name, t0, took));
        }
        let limit = Duration::from_secs(self.args.timeout);
        let t = Instant::now();
        loop {
            let seen: BTreeMap<&str, Seen> = match self.seen.lock() {
                Ok(m) => started
                    .iter()
                    .map(|(n, _, _)| (n.as_str(), m.get(n).copied().unwrap_or_default()))
                    .collect(),
                Err(_) => bail!("the watch's record is poisoned"),
            };
            let ready = seen.values().filter(|s| s.ready.is_some()).count();
            if ready == started.len() {
                return Ok(started
                    .iter()
                    .map(|(n, (t0, wall), took)| {
                        let s = seen.get(n.as_str()).copied().unwrap_or_default();
                        let ready = s.ready.map(|at| at.saturating_duration_since(*t0));
                        let ready_ns = ready
                            .and_then(|d| u64::try_from(d.as_nanos()).ok())
                            .map_or(u64::MAX, |d| wall.saturating_add(d));
                        Sample {
                            create: ms(*took),
                            status: s.status.map(|at| ms(at.saturating_duration_since(*t0))),
                            ready: ready.map(ms).unwrap_or(f64::NAN),
                            timed: Timed {
                                pod: n.clone(),
                                create_ns: *wall,
                                ready_ns,
                            },
                        }
                    })
                    .collect());
            }
            if t.elapsed() > limit {
                bail!(
                    "{ready}/{} pods Ready after {limit:?} (node {})",
                    started.len(),
                    self.args.node
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Deletes the run's pods and waits until none is left: seconds it took.
    async fn delete_all(&self) -> Result<f64> {
        let t = Instant::now();
        let sel = ListParams::default().labels(&self.selector());
        self.pods
            .delete_collection(&DeleteParams::default(), &sel)
            .await
            .context("deleting the benchmark's pods")?;
        let limit = Duration::from_secs(self.args.timeout);
        loop {
            let left = self.pods.list_metadata(&sel).await?.items.len();
            if left == 0 {
                return Ok(t.elapsed().as_secs_f64());
            }
            if t.elapsed() > limit {
                bail!("{left} pods still there {limit:?} after their deletion");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The kubelet's `kubelet_pod_start_duration_seconds` (sum, count), through the API
    /// server's node proxy; `None` when it cannot be read.
    async fn pod_start_metric(&self) -> Option<(f64, f64)> {
        let path = format!("/api/v1/nodes/{}/proxy/metrics", self.args.node);
        let req = http::Request::get(&path).body(Vec::new()).ok()?;
        let text = match self.client.request_text(req).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("[startup-latency] GET {path}: {e}");
                return None;
            }
        };
        let figures = histogram_sum_count(&text, "kubelet_pod_start_duration_seconds");
        if figures.is_none() {
            eprintln!("[startup-latency] {path} has no kubelet_pod_start_duration_seconds");
        }
        figures
    }

    fn pod(&self, name: &str, scenario: &str, volumes: bool) -> Pod {
        let mut container = busybox_container();
        let mut spec = PodSpec {
            node_name: Some(self.args.node.clone()),
            termination_grace_period_seconds: Some(1),
            ..Default::default()
        };
        if volumes {
            let (vols, mounts) = volumes_of_scenario_c();
            container.volume_mounts = Some(mounts);
            spec.volumes = Some(vols);
        }
        spec.containers = vec![container];
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(NAMESPACE.into()),
                labels: Some(
                    [
                        (RUN_LABEL.to_string(), self.run.clone()),
                        ("scenario".to_string(), scenario.to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        }
    }
}

/// Scenario (c)'s volumes: the configMap, the secret, and a projected volume of a service
/// account token, the configMap and the pod's labels; and their mounts.
fn volumes_of_scenario_c() -> (Vec<Volume>, Vec<VolumeMount>) {
    let volumes = vec![
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: CONFIG_MAP.into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "secret".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(SECRET.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "projected".into(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            expiration_seconds: Some(3600),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: CONFIG_MAP.into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        downward_api: Some(DownwardAPIProjection {
                            items: Some(vec![DownwardAPIVolumeFile {
                                path: "labels".into(),
                                field_ref: Some(ObjectFieldSelector {
                                    field_path: "metadata.labels".into(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }]),
                        }),
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    let mounts = [
        ("config", "/config"),
        ("secret", "/secret"),
        ("projected", "/projected"),
    ]
    .map(|(name, path)| VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: Some(true),
        ..Default::default()
    })
    .to_vec();
    (volumes, mounts)
}

/// A fresh namespace with its default service account, a configMap and a secret.
async fn prepare_namespace(client: &kube::Client, limit: Duration) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let t = Instant::now();
    // A namespace an interrupted run left: gone first.
    while let Some(ns) = namespaces.get_opt(NAMESPACE).await? {
        if ns.metadata.deletion_timestamp.is_none() {
            namespaces
                .delete(NAMESPACE, &DeleteParams::default())
                .await?;
        }
        if t.elapsed() > limit {
            bail!("namespace {NAMESPACE} of an earlier run still there after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    // The service account admission plugin refuses pods until the default account exists
    // (and, in v1.20, its token secret).
    while accounts
        .get_opt("default")
        .await?
        .is_none_or(|a| a.secrets.unwrap_or_default().is_empty())
    {
        if t.elapsed() > limit {
            bail!("no default service account in {NAMESPACE} after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NAMESPACE.into()),
        ..Default::default()
    };
    let cm = ConfigMap {
        metadata: meta(CONFIG_MAP),
        data: Some([("greeting".to_string(), "hello".to_string())].into()),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await?;
    let secret = Secret {
        metadata: meta(SECRET),
        string_data: Some([("password".to_string(), "s3cret".to_string())].into()),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(())
}

/// The `_sum` and `_count` of the histogram `name` in a Prometheus text exposition (samples
/// of every label set added up); `None` when it has neither.
fn histogram_sum_count(text: &str, name: &str) -> Option<(f64, f64)> {
    let (mut sum, mut count, mut found) = (0.0, 0.0, false);
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (series, value) = match rest.split_once(' ') {
            Some((s, v)) => (s, v),
            None => continue,
        };
        let series = series.split('{').next().unwrap_or_default();
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        match series {
            "_sum" => sum += v,
            "_count" => count += v,
            _ => continue,
        }
        found = true;
    }
    found.then_some((sum, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_sum_and_count_add_up_label_sets() {
        let text = "# TYPE kubelet_pod_start_duration_seconds histogram\n\
            kubelet_pod_start_duration_seconds_bucket{le=\"0.5\"} 3\n\
            kubelet_pod_start_duration_seconds_sum 1.5\n\
            kubelet_pod_start_duration_seconds_count 4\n\
            kubelet_pod_start_duration_seconds_sum{node=\"x\"} 0.5\n\
            kubelet_pod_start_duration_seconds_count{node=\"x\"} 1\n\
            kubelet_pod_start_duration_seconds_count_other 9\n\
            kubelet_pod_start_duration_seconds_sum bogus\n";
        assert_eq!(
            histogram_sum_count(text, "kubelet_pod_start_duration_seconds"),
            Some((2.0, 5.0))
        );
        assert_eq!(histogram_sum_count(text, "kubelet_other_seconds"), None);
    }

    #[test]
    fn the_watch_records_first_status_and_first_ready() {
        let seen = SeenMap::default();
        let pod = |conditions: &[(&str, &str)]| {
            let mut p = Pod::default();
            p.metadata.name = Some("p".into());
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| k8s_openapi::api::core::v1::PodCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            });
            p
        };
        let t0 = Instant::now();
        let (t1, t2) = (t0 + Duration::from_millis(5), t0 + Duration::from_millis(9));
        record(&seen, &pod(&[]), t0);
        record(
            &seen,
            &pod(&[("Initialized", "True"), ("Ready", "False")]),
            t1,
        );
        record(
            &seen,
            &pod(&[("Initialized", "True"), ("Ready", "True")]),
            t2,
        );
        let later = t2 + Duration::from_millis(1);
        record(
            &seen,
            &pod(&[("Initialized", "True"), ("Ready", "True")]),
            later,
        );
        let s = seen
            .lock()
            .ok()
            .and_then(|m| m.get("p").copied())
            .unwrap_or_default();
        assert_eq!((s.status, s.ready), (Some(t1), Some(t2)));
    }
}
