//! The manifest URL source (`--manifest-url`, `staticPodURL`), as Go's
//! `pkg/kubelet/config/http.go`.
//!
//! Every `httpCheckFrequency` (20s) the URL is fetched with the configured headers. The body is
//! one `Pod` or a `PodList` (JSON or YAML). A valid body replaces the source's pods with one
//! [`PodOperation::Set`] (sent only when the set changed); an empty body is an empty set (as in
//! Go). A failing request, a non-200 answer or an invalid body is logged and changes nothing:
//! the last good state stays. Nothing is sent before the first successful fetch, so until then
//! the source is not *seen*.

use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kubelet_core::source::{PodOperation, PodSource, PodUpdate, SourceError};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::static_pod::{self, Context, SeenTracker, HTTP_SOURCE};

/// Timeout of one fetch (Go's http source uses a 10s client timeout).
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

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
    #[error("GET {url}: {source}")]
    Request {
        /// The URL.
        url: String,
        /// The client's error.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with a status other than 200.
    #[error("GET {url}: status {status}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
    },
    /// The body is not a valid pod or pod list.
    #[error("{0}")]
    Manifest(#[from] static_pod::ManifestError),
}

/// Static pods from a manifest URL. See the module docs.
#[derive(Debug)]
pub struct HttpSource {
    config: Config,
}

impl HttpSource {
    /// Creates the source; nothing is fetched until [`PodSource::run`].
    pub fn new(config: Config) -> HttpSource {
        HttpSource { config }
    }

    fn build_client(&self) -> Result<reqwest::Client, SourceError> {
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
        reqwest::Client::builder()
            .default_headers(headers)
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| invalid(format!("cannot build the HTTP client: {e}")))
    }
}

/// Fetches the body; `Ok(bytes)` only for status 200.
async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, FetchError> {
    let req_err = |source| FetchError::Request {
        url: url.to_string(),
        source,
    };
    let resp = client.get(url).send().await.map_err(req_err)?;
    let status = resp.status();
    if status != reqwest::StatusCode::OK {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
        });
    }
    let body = resp.bytes().await.map_err(req_err)?;
    Ok(body.to_vec())
}

/// Turns a body into the source's pods; any invalid pod rejects the whole body (as Go does
/// for a PodList).
fn decode_body(body: &[u8], url: &str, node_name: &str) -> Result<Vec<Pod>, FetchError> {
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
    let pods = manifest
        .pods
        .into_iter()
        .map(|p| (url.to_string(), p))
        .collect();
    let (keep, dups) = static_pod::reject_duplicates(pods, HTTP_SOURCE);
    for e in &dups {
        tracing::warn!(error = %e, "rejecting static pod");
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
        let client = self.build_client()?;
        let url = self.config.url.as_str();
        let period = self.config.check_frequency.max(Duration::from_millis(10));
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut seen = SeenTracker::new();
        let mut last_body: Option<Vec<u8>> = None;
        let mut last_sent: Option<Vec<Pod>> = None;
        let mut failing = false;
        tracing::info!(url, "starting static pod URL source");
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = ticker.tick() => {}
            }
            let fetched = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = fetch(&client, url) => r,
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
            let decoded = decode_body(&body, url, &self.config.node_name);
            last_body = Some(body);
            let mut pods = match decoded {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(url, error = %e, "invalid manifest from URL; keeping the last good state");
                    continue;
                }
            };
            seen.stamp(&mut pods);
            if last_sent.as_ref() == Some(&pods) {
                continue;
            }
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
