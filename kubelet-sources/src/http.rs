//! The manifest URL source (`--manifest-url`, `staticPodURL`), as Go's
//! `pkg/kubelet/config/http.go`.
//!
//! Every `httpCheckFrequency` (20s) the URL is fetched with the configured headers. The body is
//! one `Pod` or a `PodList` (JSON or YAML). A valid body replaces the source's pods with one
//! [`PodOperation::Set`] (sent only when the set changed); an empty body is an empty set (as in
//! Go). A failing request, a non-200 answer or an invalid body is logged and changes nothing:
//! the last good state stays. Nothing is sent before the first successful fetch, so until then
//! the source is not *seen*.
//!
//! A body is read up to [`MANIFEST_LIMITS`]'s size at most (a larger one, announced or not, is
//! refused without reading the rest) and decoded on a blocking thread within the limits of
//! [`crate::decode`]. Unknown fields are dropped with a warning (and an event with
//! [`HttpSource::with_events`]), as in the file source.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::source::{PodOperation, PodSource, PodUpdate, SourceError};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::decode::MANIFEST_LIMITS;
use crate::file::{report_duplicate, report_warnings};
use crate::static_pod::{self, Context, SeenTracker, HTTP_SOURCE};
use kubelet_core::sink::StatusSink;

/// Timeout of one fetch (Go's http source uses a 10s client timeout).
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest manifest body accepted (a guard against a misbehaving server).
const MAX_BODY_BYTES: usize = MANIFEST_LIMITS.max_bytes;

/// Configuration of an [`HttpSource`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The manifest URL (`http://` or `https://`).
    pub url: String,
    /// Extra request headers (`--manifest-url-header`), in order; repeated names are all sent.
    pub headers: Vec<(String, String)>,
    /// The node name (static pods are named `<name>-<node>`).
    pub node_name: String,
    /// Polling period (`httpCheckFrequency`, default 20s).
    pub check_frequency: Duration,
}

impl Config {
    /// A configuration without headers and with the Go default check frequency (20s).
    pub fn new(url: impl Into<String>, node_name: impl Into<String>) -> Self {
        Config {
            url: url.into(),
            headers: Vec::new(),
            node_name: node_name.into(),
            check_frequency: Duration::from_secs(20),
        }
    }
}

/// Why one fetch of the manifest URL produced no pods.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request failed (connection refused, timeout, ...).
    #[error("GET {url}: {}", kubelet_core::display_chain(.error))]
    Request {
        /// The URL.
        url: String,
        /// The client's error.
        error: reqwest::Error,
    },
    /// The server answered with a status other than 200.
    #[error("GET {url}: status {status}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The body is larger than the accepted maximum.
    #[error("GET {url}: body larger than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The body is not a valid pod or pod list.
    #[error(transparent)]
    Manifest(#[from] static_pod::ManifestError),
}

/// Static pods from a manifest URL. See the module docs.
pub struct HttpSource {
    config: Config,
    events: Option<Arc<dyn StatusSink>>,
}

impl std::fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSource")
            .field("config", &self.config)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl HttpSource {
    /// Creates the source; nothing is fetched until [`PodSource::run`].
    pub fn new(config: Config) -> HttpSource {
        HttpSource {
            config,
            events: None,
        }
    }

    /// Records events (unknown fields dropped, duplicate pods refused) through `events`.
    /// Without it they are only logged.
    pub fn with_events(mut self, events: Arc<dyn StatusSink>) -> HttpSource {
        self.events = Some(events);
        self
    }

    fn build_client(&self) -> Result<(reqwest::Client, HeaderMap), SourceError> {
        let invalid = |message: String| SourceError::InvalidConfig {
            source_name: HTTP_SOURCE.into(),
            message,
        };
        let url = reqwest::Url::parse(&self.config.url)
            .map_err(|e| invalid(format!("manifest URL {:?}: {e}", self.config.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "manifest URL {:?}: scheme must be http or https",
                self.config.url
            )));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &self.config.headers {
            let name = HeaderName::from_bytes(k.trim().as_bytes())
                .map_err(|e| invalid(format!("manifest URL header name {k:?}: {e}")))?;
            let value = HeaderValue::from_str(v.trim())
                .map_err(|e| invalid(format!("manifest URL header {k:?} value: {e}")))?;
            headers.append(name, value);
        }
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok((client, headers))
    }
}

/// Fetches the body; `Ok(bytes)` only for status 200.
async fn fetch(
    client: &reqwest::Client,
    headers: &HeaderMap,
    url: &str,
) -> Result<Vec<u8>, FetchError> {
    let req_err = |source| FetchError::Request {
        url: url.to_string(),
        error: source,
    };
    let mut resp = client
        .get(url)
        .headers(headers.clone())
        .send()
        .await
        .map_err(req_err)?;
    let status = resp.status();
    if status != reqwest::StatusCode::OK {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    if resp
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(FetchError::TooLarge {
            url: url.to_string(),
            limit: MAX_BODY_BYTES,
        });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(req_err)? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(FetchError::TooLarge {
                url: url.to_string(),
                limit: MAX_BODY_BYTES,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Turns a body into the source's pods; any invalid pod rejects the whole body (as Go does
/// for a PodList).
fn decode_body(
    body: &[u8],
    url: &str,
    node_name: &str,
    events: Option<&Arc<dyn StatusSink>>,
) -> Result<Vec<Pod>, FetchError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let ctx = Context {
        source: HTTP_SOURCE,
        origin: url,
        node_name,
    };
    let manifest = static_pod::parse_manifest(body, &ctx);
    if let Some(e) = manifest.errors.into_iter().next() {
        return Err(e.into());
    }
    report_warnings(&manifest.warnings, &manifest.pods, events);
    let pods = manifest
        .pods
        .into_iter()
        .map(|p| (url.to_string(), p))
        .collect();
    let (keep, dups) = static_pod::reject_duplicates_with_pods(pods, HTTP_SOURCE);
    for (e, pod) in &dups {
        tracing::warn!(error = %e, "rejecting static pod");
        report_duplicate(e, pod, events);
    }
    Ok(keep.into_iter().map(|(_, p)| p).collect())
}

#[async_trait]
impl PodSource for HttpSource {
    fn name(&self) -> &str {
        HTTP_SOURCE
    }

    async fn run(
        &self,
        updates: mpsc::Sender<PodUpdate>,
        shutdown: CancellationToken,
    ) -> Result<(), SourceError> {
        let (client, headers) = self.build_client()?;
        let url = self.config.url.as_str();
        let period = self.config.check_frequency.max(Duration::from_millis(10));
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = SeenTracker::new();
        let mut last_body: Option<Vec<u8>> = None;
        let mut last_sent: Option<Vec<Arc<Pod>>> = None;
        let mut failing = false;
        tracing::info!(url, "starting static pod URL source");
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticker.tick() => {}
            }
            let fetched = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = fetch(&client, &headers, url) => r,
            };
            let body = match fetched {
                Ok(b) => b,
                Err(e) => {
                    // Log the first failure loudly, repeats quietly.
                    if failing {
                        tracing::debug!(url, error = %e, "manifest URL still failing; keeping the last good state");
                    } else {
                        tracing::warn!(url, error = %e, "cannot fetch manifest URL; keeping the last good state");
                    }
                    failing = true;
                    continue;
                }
            };
            if failing {
                tracing::info!(url, "manifest URL reachable again");
                failing = false;
            }
            if last_body.as_deref() == Some(body.as_slice()) {
                continue;
            }
            let node_name = self.config.node_name.clone();
            let events = self.events.clone();
            let task_url = url.to_string();
            let (body, decoded) = match tokio::task::spawn_blocking(move || {
                let decoded = decode_body(&body, &task_url, &node_name, events.as_ref());
                (body, decoded)
            })
            .await
            {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(url, error = %e, "decoding the manifest failed");
                    continue;
                }
            };
            last_body = Some(body);
            let mut pods = match decoded {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(url, error = %e, "invalid manifest from URL; keeping the last good state");
                    continue;
                }
            };
            seen.stamp(&mut pods);
            let unchanged = last_sent.as_ref().is_some_and(|last: &Vec<Arc<Pod>>| {
                last.len() == pods.len() && last.iter().zip(&pods).all(|(a, b)| **a == *b)
            });
            if unchanged {
                continue;
            }
            let pods: Vec<Arc<Pod>> = kubelet_core::source::shared_pods(pods);
            tracing::info!(url, pods = pods.len(), "static pods from URL changed");
            let update = PodUpdate {
                op: PodOperation::Set,
                pods: pods.clone(),
                source: HTTP_SOURCE.into(),
            };
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                sent = updates.send(update) => if sent.is_err() {
                    return Err(SourceError::ChannelClosed { source_name: HTTP_SOURCE.into() });
                },
            }
            last_sent = Some(pods);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use kubelet_core::pod as podutil;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const WAIT: Duration = Duration::from_secs(10);

    /// What the test server answers, and the request heads it received.
    #[derive(Default)]
    struct Served {
        status: u16,
        body: String,
        requests: Vec<String>,
    }

    /// A one-route HTTP/1.1 server on 127.0.0.1 answering every request from `state`.
    async fn serve(state: Arc<Mutex<Served>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let state = state.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let (status, body) = {
                        let mut s = state.lock().unwrap();
                        s.requests.push(String::from_utf8_lossy(&buf).to_string());
                        (s.status, s.body.clone())
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        format!("http://{addr}/pods")
    }

    fn pod_yaml(name: &str, image: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
    }

    fn start(
        url: String,
    ) -> (
        mpsc::Receiver<PodUpdate>,
        CancellationToken,
        tokio::task::JoinHandle<Result<(), SourceError>>,
    ) {
        let source = HttpSource::new(Config {
            url,
            headers: vec![
                ("X-Token".into(), "secret".into()),
                ("X-Multi".into(), "1".into()),
                ("X-Multi".into(), "2".into()),
            ],
            node_name: "Node-B".into(),
            check_frequency: Duration::from_millis(50),
        });
        let (tx, rx) = mpsc::channel(8);
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        (
            rx,
            shutdown,
            tokio::spawn(async move { source.run(tx, token).await }),
        )
    }

    async fn next(rx: &mut mpsc::Receiver<PodUpdate>) -> PodUpdate {
        let u = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(u.op, PodOperation::Set);
        assert_eq!(u.source, "http");
        u
    }

    fn set(state: &Arc<Mutex<Served>>, status: u16, body: &str) {
        let mut s = state.lock().unwrap();
        s.status = status;
        s.body = body.to_string();
    }

    /// Waits until the server saw `n` more requests than `from`.
    async fn wait_requests(state: &Arc<Mutex<Served>>, from: usize, n: usize) {
        tokio::time::timeout(WAIT, async {
            while state.lock().unwrap().requests.len() < from + n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fetches_pods_keeps_last_good_state_and_sends_headers() {
        let state = Arc::new(Mutex::new(Served::default()));
        set(&state, 500, "");
        let url = serve(state.clone()).await;
        let (mut rx, shutdown, task) = start(url);

        // Failing URL: nothing is sent (the source is not seen yet).
        wait_requests(&state, 0, 3).await;
        assert!(rx.try_recv().is_err());

        set(&state, 200, &pod_yaml("web", "busybox:1"));
        let u = next(&mut rx).await;
        assert_eq!(u.pods.len(), 1);
        assert_eq!(podutil::name(&u.pods[0]), "web-node-b");
        assert_eq!(podutil::source(&u.pods[0]), "http");
        let uid = podutil::uid(&u.pods[0]).to_string();

        // Errors and an invalid body keep the last good state: nothing new is sent.
        let seen = state.lock().unwrap().requests.len();
        set(&state, 404, "");
        wait_requests(&state, seen, 2).await;
        set(
            &state,
            200,
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c}]}\n",
        );
        let seen = state.lock().unwrap().requests.len();
        wait_requests(&state, seen, 2).await;
        assert!(rx.try_recv().is_err());

        // A PodList in JSON replaces the set; the unchanged pod keeps its UID.
        let list = r#"{"apiVersion":"v1","kind":"PodList","items":[
            {"metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}},
            {"metadata":{"name":"db"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}]}"#;
        set(&state, 200, list);
        let u = next(&mut rx).await;
        let names: Vec<&str> = u.pods.iter().map(|p| podutil::name(p)).collect();
        assert_eq!(names, ["web-node-b", "db-node-b"]);
        assert_eq!(podutil::uid(&u.pods[0]), uid);

        // An empty body is an empty set (as in Go).
        set(&state, 200, "");
        assert!(next(&mut rx).await.pods.is_empty());

        let requests = state.lock().unwrap().requests.clone();
        let head = requests[0].to_ascii_lowercase();
        assert!(head.starts_with("get /pods "), "{head}");
        assert!(head.contains("x-token: secret"), "{head}");
        assert!(
            head.contains("x-multi: 1") && head.contains("x-multi: 2"),
            "{head}"
        );

        shutdown.cancel();
        assert!(tokio::time::timeout(WAIT, task)
            .await
            .unwrap()
            .unwrap()
            .is_ok());
    }

    #[tokio::test]
    async fn invalid_configuration_is_an_error() {
        let cases = [
            ("not a url", vec![]),
            ("ftp://127.0.0.1/x", vec![]),
            (
                "http://127.0.0.1/x",
                vec![("bad name".to_string(), "v".to_string())],
            ),
        ];
        for (url, headers) in cases {
            let source = HttpSource::new(Config {
                url: url.into(),
                headers,
                node_name: "n".into(),
                check_frequency: Duration::from_secs(1),
            });
            let (tx, _rx) = mpsc::channel(1);
            let res = source.run(tx, CancellationToken::new()).await;
            assert!(
                matches!(res, Err(SourceError::InvalidConfig { .. })),
                "{url}: {res:?}"
            );
        }
    }

    #[tokio::test]
    async fn bodies_over_the_limit_are_refused_and_unknown_fields_dropped() {
        let state = Arc::new(Mutex::new(Served::default()));
        let url = serve(state.clone()).await;
        let client = reqwest::Client::new();
        set(&state, 200, &"#".repeat(MAX_BODY_BYTES + 1));
        let err = fetch(&client, &HeaderMap::new(), &url).await.unwrap_err();
        assert!(matches!(err, FetchError::TooLarge { .. }), "{err}");
        // A body within the limit with a typo'd field: the pod is accepted without it.
        let body = pod_yaml("web", "busybox:1").replace("    image:", "    imagee: x\n    image:");
        let pods = decode_body(body.as_bytes(), &url, "node-a", None).unwrap();
        assert_eq!(pods.len(), 1);
        // An alias bomb is a clear error.
        let mut bomb = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  labels:\n    a0: &a0 [x,x,x,x,x,x,x,x,x,x]\n");
        for i in 1..9 {
            let p = i - 1;
            bomb.push_str(&format!(
                "    a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
            ));
        }
        let err = decode_body(bomb.as_bytes(), &url, "node-a", None).unwrap_err();
        assert!(err.to_string().contains("YAML aliases expand"), "{err}");
    }
}
