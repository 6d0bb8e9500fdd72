//! Running one probe or lifecycle-hook action: exec (through the runtime's `ExecSync`),
//! `httpGet`, `tcpSocket` and `grpc` (`grpc.health.v1.Health/Check`), with Go's rules
//! (`pkg/probe/{exec,http,tcp,grpc}`):
//!
//! - **exec**: exit code 0 is success, any other code failure; a command that outlives
//!   `timeoutSeconds` fails ("command timed out"); other runtime errors are *unknown* (the
//!   result is thrown away, not counted).
//! - **httpGet**: to `host` (default: the pod IP), `scheme` HTTP or HTTPS (certificates not
//!   verified), `port` by number or by the container's port name, `path`, `httpHeaders`
//!   (default `User-Agent: kube-probe/<version>` and `Accept: */*`). Status 200–399 is
//!   success. Redirects are followed on the same host (at most 10); a redirect to another host
//!   is not followed and counts as success with a warning. At most 10 KiB of the body is read.
//! - **tcpSocket**: success when a connection opens within the timeout.
//! - **grpc**: success when the health service answers `SERVING` for `service` (plaintext;
//!   `mode: TLS` is not supported yet and fails with a message saying so).

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, HTTPHeader, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::runtime::{ContainerRuntime, RuntimeError};

/// The probe user agent's version (`kube-probe/<major.minor>`), as the Go kubelet sends.
pub const PROBE_USER_AGENT: &str = "kube-probe/1.20";
/// How much of an HTTP body is read for the probe's output.
const MAX_BODY: usize = 10 * 1024;
/// Redirects followed on the same host.
const MAX_REDIRECTS: usize = 10;

/// The outcome of running one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Healthy; the string is the output (may be empty).
    Success(String),
    /// Healthy with a remark (e.g. a redirect to another host was not followed).
    Warning(String),
    /// Unhealthy; the string says why.
    Failure(String),
    /// The probe could not be run (runtime error); the result is not counted.
    Unknown(String),
}

impl Outcome {
    /// Whether the outcome counts as success.
    #[cfg(test)]
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success(_) | Outcome::Warning(_))
    }
}

/// Where an action runs: the container and its pod's IP.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Runtime id of the container (for exec).
    pub container_id: &'a str,
    /// The container spec (for named ports).
    pub container: &'a Container,
    /// The pod's IP (default host of HTTP, TCP and gRPC actions).
    pub pod_ip: &'a str,
}

/// Resolves a port given by number or by the name of one of the container's ports.
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let n = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => match s.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| {
                    format!("couldn't find port {s:?} in container {}", container.name)
                })?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid port number: {n}"))
}

fn host_or<'a>(host: Option<&'a str>, pod_ip: &'a str) -> &'a str {
    match host {
        Some(h) if !h.is_empty() => h,
        _ => pod_ip,
    }
}

/// `host:port` with brackets around IPv6 literals.
fn host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// Runs an exec action with `timeout` (zero: no timeout).
pub async fn run_exec(
    runtime: &dyn ContainerRuntime,
    target: Target<'_>,
    action: &ExecAction,
    timeout: Duration,
) -> Outcome {
    let cmd = action.command.clone().unwrap_or_default();
    match runtime.exec_sync(target.container_id, &cmd, timeout).await {
        Ok(out) => {
            let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
            output.push_str(&String::from_utf8_lossy(&out.stderr));
            if out.exit_code == 0 {
                Outcome::Success(output)
            } else {
                Outcome::Failure(format!(
                    "command {:?} exited with {}: {}",
                    cmd.join(" "),
                    out.exit_code,
                    output.trim_end()
                ))
            }
        }
        Err(RuntimeError::DeadlineExceeded { .. }) => Outcome::Failure(format!(
            "command {:?} timed out after {}s",
            cmd.join(" "),
            timeout.as_secs()
        )),
        // A backend without exec (an optional capability): the probe or hook fails, saying why.
        Err(e @ RuntimeError::Unimplemented { .. }) => {
            Outcome::Failure(format!("command {:?} cannot run: {e}", cmd.join(" ")))
        }
        Err(e) => Outcome::Unknown(e.to_string()),
    }
}

/// The HTTP client shared by HTTP probes and hooks: no connection reuse (as Go's prober),
/// certificates not verified, same-host redirects only.
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error(format!("stopped after {MAX_REDIRECTS} redirects"));
            }
            let first = attempt
                .previous()
                .first()
                .and_then(|u| u.host_str().map(str::to_owned));
            if first.as_deref() != attempt.url().host_str() {
                return attempt.stop();
            }
            attempt.follow()
        }))
        .build()
        .map_err(|e| format!("building the HTTP prober client: {e}"))
}

/// Builds the URL of an `httpGet` action.
pub fn http_url(action: &HTTPGetAction, target: Target<'_>) -> Result<String, String> {
    let port = resolve_port(&action.port, target.container)?;
    let scheme = action
        .scheme
        .as_deref()
        .unwrap_or("HTTP")
        .to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!("unsupported HTTP scheme {scheme:?}"));
    }
    let host = host_or(action.host.as_deref(), target.pod_ip);
    let mut path = action.path.clone().unwrap_or_default();
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    Ok(format!("{scheme}://{}{path}", host_port(host, port)))
}

fn request(
    client: &reqwest::Client,
    url: &str,
    headers: &[HTTPHeader],
    timeout: Duration,
) -> reqwest::RequestBuilder {
    let mut req = client.get(url);
    if !timeout.is_zero() {
        req = req.timeout(timeout);
    }
    let has = |n: &str| headers.iter().any(|h| h.name.eq_ignore_ascii_case(n));
    if !has("user-agent") {
        req = req.header("User-Agent", PROBE_USER_AGENT);
    }
    if !has("accept") {
        req = req.header("Accept", "*/*");
    }
    for h in headers {
        req = req.header(h.name.as_str(), h.value.as_str());
    }
    req
}

/// Runs an `httpGet` probe.
pub async fn run_http(
    client: &reqwest::Client,
    target: Target<'_>,
    action: &HTTPGetAction,
    timeout: Duration,
) -> Outcome {
    let url = match http_url(action, target) {
        Ok(u) => u,
        Err(e) => return Outcome::Failure(e),
    };
    let headers = action.http_headers.as_deref().unwrap_or(&[]);
    let mut resp = match request(client, &url, headers, timeout).send().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failure(format!("Get {url:?}: {e}")),
    };
    let code = resp.status().as_u16();
    let mut body = Vec::new();
    while body.len() < MAX_BODY {
        match resp.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_BODY);
    let body = String::from_utf8_lossy(&body).into_owned();
    if (200..300).contains(&code) {
        Outcome::Success(body)
    } else if (300..400).contains(&code) {
        Outcome::Warning(format!("Probe terminated redirects, Response body: {body}"))
    } else {
        Outcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
    }
}

/// Runs an `httpGet` lifecycle hook: only a failed request fails it (Go ignores the status).
pub async fn run_http_hook(
    client: &reqwest::Client,
    target: Target<'_>,
    action: &HTTPGetAction,
) -> Result<(), String> {
    let url = http_url(action, target)?;
    let headers = action.http_headers.as_deref().unwrap_or(&[]);
    request(client, &url, headers, Duration::ZERO)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| format!("HTTP lifecycle hook ({url}) failed: {e}"))
}

/// Runs a `tcpSocket` probe.
pub async fn run_tcp(target: Target<'_>, action: &TCPSocketAction, timeout: Duration) -> Outcome {
    let port = match resolve_port(&action.port, target.container) {
        Ok(p) => p,
        Err(e) => return Outcome::Failure(e),
    };
    let addr = host_port(host_or(action.host.as_deref(), target.pod_ip), port);
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addr)).await {
        Ok(Ok(_)) => Outcome::Success(String::new()),
        Ok(Err(e)) => Outcome::Failure(format!("dial tcp {addr}: {e}")),
        Err(_) => Outcome::Failure(format!("dial tcp {addr}: i/o timeout")),
    }
}

/// Runs a `grpc` probe against `grpc.health.v1.Health/Check`.
pub async fn run_grpc(target: Target<'_>, action: &GRPCAction, timeout: Duration) -> Outcome {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;

    if action.mode.as_deref() == Some("TLS") {
        return Outcome::Failure(
            "gRPC probes with mode TLS are not supported by kubelet-rs".into(),
        );
    }
    let Ok(port) = u16::try_from(action.port) else {
        return Outcome::Failure(format!("invalid port number: {}", action.port));
    };
    let addr = host_port(target.pod_ip, port);
    let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{addr}")) {
        Ok(e) => e.connect_timeout(timeout).timeout(timeout),
        Err(e) => return Outcome::Failure(format!("invalid gRPC target {addr}: {e}")),
    };
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Failure(format!(
                "timeout: failed to connect service {addr:?} within {}s: {e}",
                timeout.as_secs()
            ))
        }
    };
    let request = HealthCheckRequest {
        service: action.service.clone().unwrap_or_default(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(resp) => {
            let status = resp.into_inner().status;
            if status == ServingStatus::Serving as i32 {
                Outcome::Success(String::new())
            } else {
                let name = ServingStatus::try_from(status)
                    .map(|s| s.as_str_name())
                    .unwrap_or("UNKNOWN");
                Outcome::Failure(format!("service unhealthy (responded with {name:?})"))
            }
        }
        Err(e) => Outcome::Failure(format!(
            "health rpc probe failed: {}: {}",
            e.code(),
            e.message()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ContainerPort;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn container_with_port(name: &str, port: i32) -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some(name.into()),
                container_port: port,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn ports_resolve_by_number_and_name() {
        let c = container_with_port("http", 8080);
        let cases = [
            (IntOrString::Int(80), Ok(80)),
            (IntOrString::String("81".into()), Ok(81)),
            (IntOrString::String("http".into()), Ok(8080)),
            (
                IntOrString::String("nope".into()),
                Err("couldn't find port \"nope\" in container c".to_string()),
            ),
            (
                IntOrString::Int(0),
                Err("invalid port number: 0".to_string()),
            ),
            (
                IntOrString::Int(70000),
                Err("invalid port number: 70000".to_string()),
            ),
        ];
        for (port, want) in cases {
            assert_eq!(resolve_port(&port, &c), want, "{port:?}");
        }
    }

    #[test]
    fn urls_default_to_the_pod_ip_and_bracket_ipv6() {
        let c = container_with_port("http", 8080);
        let t = Target {
            container_id: "x",
            container: &c,
            pod_ip: "10.0.0.7",
        };
        let mut a = HTTPGetAction {
            port: IntOrString::String("http".into()),
            path: Some("healthz".into()),
            ..Default::default()
        };
        assert_eq!(http_url(&a, t).unwrap(), "http://10.0.0.7:8080/healthz");
        a.host = Some("fd00::1".into());
        a.scheme = Some("HTTPS".into());
        assert_eq!(http_url(&a, t).unwrap(), "https://[fd00::1]:8080/healthz");
    }

    /// A one-shot-per-connection HTTP server answering from `route(path) -> (status, headers, body)`.
    async fn serve(route: fn(&str) -> (u16, String, String)) -> (u16, tokio::task::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let h = tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let req = String::from_utf8_lossy(&buf[..n]).to_string();
                    let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let ua_ok = req.contains("User-Agent: kube-probe/")
                        || req.contains("user-agent: kube-probe/");
                    let (code, headers, body) = route(&path);
                    let body = if path == "/ua" {
                        format!("{ua_ok}")
                    } else {
                        body
                    };
                    let resp = format!(
                        "HTTP/1.1 {code} X\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        (port, h)
    }

    fn routes(path: &str) -> (u16, String, String) {
        match path {
            "/ok" | "/ua" => (200, String::new(), "fine".into()),
            "/created" => (204, String::new(), String::new()),
            "/moved" => (302, "location: /ok\r\n".into(), String::new()),
            "/away" => (
                302,
                "location: http://other.invalid:1/x\r\n".into(),
                String::new(),
            ),
            "/loop" => (302, "location: /loop\r\n".into(), String::new()),
            "/big" => (200, String::new(), "x".repeat(50_000)),
            _ => (500, String::new(), "boom".into()),
        }
    }

    #[tokio::test]
    async fn http_probe_status_codes_and_redirects() {
        let (port, server) = serve(routes).await;
        let client = http_client().unwrap();
        let c = Container::default();
        let t = Target {
            container_id: "x",
            container: &c,
            pod_ip: "127.0.0.1",
        };
        let probe = |path: &str| HTTPGetAction {
            port: IntOrString::Int(i32::from(port)),
            path: Some(path.into()),
            ..Default::default()
        };
        let second = Duration::from_secs(1);
        type Check = fn(&Outcome) -> bool;
        let cases: Vec<(&str, Check)> = vec![
            ("/ok", |o| *o == Outcome::Success("fine".into())),
            ("/ua", |o| *o == Outcome::Success("true".into())),
            ("/created", |o| matches!(o, Outcome::Success(_))),
            ("/moved", |o| *o == Outcome::Success("fine".into())),
            (
                "/away",
                |o| matches!(o, Outcome::Warning(m) if m.starts_with("Probe terminated redirects")),
            ),
            ("/loop", |o| matches!(o, Outcome::Failure(_))),
            ("/fail", |o| {
                *o == Outcome::Failure("HTTP probe failed with statuscode: 500".into())
            }),
            (
                "/big",
                |o| matches!(o, Outcome::Success(b) if b.len() == MAX_BODY),
            ),
        ];
        for (path, check) in cases {
            let o = run_http(&client, t, &probe(path), second).await;
            assert!(check(&o), "{path}: {o:?}");
        }
        // Nothing listening: failure.
        server.abort();
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = l.local_addr().unwrap().port();
        drop(l);
        let a = HTTPGetAction {
            port: IntOrString::Int(i32::from(closed)),
            ..Default::default()
        };
        assert!(matches!(
            run_http(&client, t, &a, second).await,
            Outcome::Failure(_)
        ));
        assert!(run_http_hook(&client, t, &a).await.is_err());
    }

    #[tokio::test]
    async fn http_probe_times_out() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let _server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                held.push(s); // never answers
            }
        });
        let c = Container::default();
        let t = Target {
            container_id: "x",
            container: &c,
            pod_ip: "127.0.0.1",
        };
        let a = HTTPGetAction {
            port: IntOrString::Int(i32::from(port)),
            ..Default::default()
        };
        let o = run_http(&http_client().unwrap(), t, &a, Duration::from_millis(200)).await;
        assert!(matches!(o, Outcome::Failure(_)), "{o:?}");
    }

    #[tokio::test]
    async fn tcp_probe_connects_or_fails() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let c = container_with_port("svc", i32::from(port));
        let t = Target {
            container_id: "x",
            container: &c,
            pod_ip: "127.0.0.1",
        };
        let a = TCPSocketAction {
            port: IntOrString::String("svc".into()),
            host: None,
        };
        assert!(run_tcp(t, &a, Duration::from_secs(1)).await.is_success());
        drop(l);
        assert!(!run_tcp(t, &a, Duration::from_secs(1)).await.is_success());
    }

    #[tokio::test]
    async fn grpc_probe_reads_the_serving_status() {
        use tonic_health::server::health_reporter;
        let (reporter, service) = health_reporter();
        reporter
            .set_service_status("ready", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("sick", tonic_health::ServingStatus::NotServing)
            .await;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let incoming = tokio_stream_from(l);
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
        let c = Container::default();
        let t = Target {
            container_id: "x",
            container: &c,
            pod_ip: "127.0.0.1",
        };
        let probe = |svc: &str| GRPCAction {
            port: i32::from(port),
            service: Some(svc.into()),
            ..Default::default()
        };
        let second = Duration::from_secs(2);
        assert!(run_grpc(t, &probe("ready"), second).await.is_success());
        let sick = run_grpc(t, &probe("sick"), second).await;
        assert_eq!(
            sick,
            Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
        assert!(matches!(
            run_grpc(t, &probe("unknown"), second).await,
            Outcome::Failure(_)
        ));
    }

    fn tokio_stream_from(
        l: TcpListener,
    ) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
        futures::stream::unfold(l, |l| async move {
            let r = l.accept().await.map(|(s, _)| s);
            Some((r, l))
        })
    }
}
