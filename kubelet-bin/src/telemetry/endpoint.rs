//! The OTLP collector endpoint of `tracing.endpoint`, as grpc-go reads a dial target
//! (component-base's `validateEndpoint`): `host:port` or `dns://[authority]/host:port`, or
//! `unix:path` / `unix:///path`.

use std::fmt;
use std::io;
use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

/// Go's default collector endpoint (otlptracegrpc's).
pub const DEFAULT_ENDPOINT: &str = "localhost:4317";

/// Where spans are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OtlpEndpoint {
    /// A TCP `host:port`, plain text (Go dials it insecure).
    Tcp(String),
    /// A unix socket path.
    Unix(PathBuf),
}

impl fmt::Display for OtlpEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OtlpEndpoint::Tcp(a) => f.write_str(a),
            OtlpEndpoint::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// Parses `tracing.endpoint` (`None`: [`DEFAULT_ENDPOINT`]); the error says what is wrong.
pub fn parse_endpoint(endpoint: Option<&str>) -> Result<OtlpEndpoint, String> {
    let raw = endpoint.unwrap_or(DEFAULT_ENDPOINT);
    // grpc-go: a target without "//" is a DNS name.
    let target = if raw.contains("//") {
        raw.to_string()
    } else {
        format!("dns://{raw}")
    };
    let Some((scheme, rest)) = target.split_once(':') else {
        return Err(format!("{raw:?}: not a valid target"));
    };
    match scheme {
        "dns" => {
            let rest = rest.strip_prefix("//").unwrap_or(rest);
            // dns://authority/host:port names the DNS server first; dns://host:port is a host.
            let host_port = match rest.split_once('/') {
                Some((_, hp)) => hp,
                None => rest,
            };
            tcp_address(raw, host_port)
        }
        "unix" => {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if !path.starts_with('/') {
                return Err(format!("{raw:?}: the unix socket path must be absolute"));
            }
            Ok(OtlpEndpoint::Unix(PathBuf::from(path)))
        }
        "unix-abstract" => Err(format!(
            "{raw:?}: abstract unix sockets are not supported by kubelet-rs (use dns or unix)"
        )),
        other => Err(format!(
            "{raw:?}: unsupported scheme: {other}.  Options are none, dns, unix, or unix-abstract"
        )),
    }
}

fn tcp_address(raw: &str, host_port: &str) -> Result<OtlpEndpoint, String> {
    let Some((host, port)) = host_port.rsplit_once(':') else {
        return Err(format!("{raw:?}: missing port (host:port)"));
    };
    let host_ok = !host.is_empty()
        && !host.contains(['/', '?', '#', '@', ' '])
        && (host.starts_with('[') == host.ends_with(']'));
    if !host_ok {
        return Err(format!("{raw:?}: invalid host {host:?}"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(OtlpEndpoint::Tcp(host_port.to_string())),
        _ => Err(format!("{raw:?}: invalid port {port:?}")),
    }
}

impl OtlpEndpoint {
    /// A channel that connects on first use (on the current tokio runtime) and again after a
    /// disconnect.
    pub(crate) fn lazy_channel(&self) -> Result<Channel, tonic::transport::Error> {
        match self {
            OtlpEndpoint::Tcp(addr) => Ok(Endpoint::from_shared(format!("http://{addr}"))?
                .connect_timeout(std::time::Duration::from_secs(5))
                .connect_lazy()),
            OtlpEndpoint::Unix(path) => {
                let path = path.clone();
                Ok(
                    Endpoint::from_static("http://otlp.local").connect_with_connector_lazy(
                        tower::service_fn(move |_: Uri| {
                            let path = path.clone();
                            async move {
                                Ok::<_, io::Error>(TokioIo::new(
                                    tokio::net::UnixStream::connect(path).await?,
                                ))
                            }
                        }),
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_as_grpc_go_reads_them() {
        let tcp = |s: &str| Ok(OtlpEndpoint::Tcp(s.into()));
        let cases: Vec<(Option<&str>, Result<OtlpEndpoint, String>)> = vec![
            (None, tcp("localhost:4317")),
            (
                Some("collector.monitoring:4317"),
                tcp("collector.monitoring:4317"),
            ),
            (Some("127.0.0.1:55680"), tcp("127.0.0.1:55680")),
            (Some("[::1]:4317"), tcp("[::1]:4317")),
            (Some("dns:///otel:4317"), tcp("otel:4317")),
            (Some("dns://8.8.8.8/otel:4317"), tcp("otel:4317")),
            (
                Some("unix:///run/otel.sock"),
                Ok(OtlpEndpoint::Unix("/run/otel.sock".into())),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse_endpoint(input), want, "{input:?}");
        }
        for bad in [
            "http://collector:4317",
            "collector",
            "collector:notaport",
            "collector:0",
            ":4317",
            "unix://relative",
            "unix-abstract://name",
        ] {
            let err = parse_endpoint(Some(bad)).unwrap_err();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        assert!(parse_endpoint(Some("http://c:1"))
            .unwrap_err()
            .contains("unsupported scheme: http"));
    }
}
