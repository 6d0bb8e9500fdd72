//! Request routing: a pure function from method and path to a reply, so it is tested
//! without sockets.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;

use crate::host::Host;

/// Which set of endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoints {
    /// Only `/healthz*` (the healthz listener, 127.0.0.1:10248 by default).
    Healthz,
    /// The read-only endpoints (`readOnlyPort`): `/healthz*` and `/pods`.
    ReadOnly,
}

/// An HTTP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Content type.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

fn text(status: u16, body: impl Into<String>) -> Reply {
    Reply {
        status,
        content_type: "text/plain; charset=utf-8",
        body: body.into().into_bytes(),
    }
}

fn pod_list(host: &dyn Host) -> Reply {
    let items: Vec<Pod> = host
        .pods()
        .into_iter()
        .map(|(p, status)| {
            let mut pod = (*p).clone();
            pod.status = status;
            pod
        })
        .collect();
    let list = k8s_openapi::List {
        items,
        metadata: ListMeta::default(),
    };
    match serde_json::to_vec(&list) {
        Ok(body) => Reply {
            status: 200,
            content_type: "application/json",
            body,
        },
        Err(e) => text(500, format!("encoding pods: {e}")),
    }
}

/// Answers one request.
pub fn respond(host: &dyn Host, endpoints: Endpoints, method: &str, path: &str) -> Reply {
    if method != "GET" && method != "HEAD" {
        return text(405, "405 method not allowed\n");
    }
    match path {
        "/healthz/ping" => text(200, "ok"),
        "/healthz" | "/healthz/syncloop" => match host.health() {
            Ok(()) => text(200, "ok"),
            Err(reason) => text(
                500,
                format!("[-]syncloop failed: {reason}\nhealthz check failed\n"),
            ),
        },
        "/pods" | "/pods/" if endpoints == Endpoints::ReadOnly => pod_list(host),
        _ => text(404, "404 page not found\n"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::PodStatus;
    use kubelet_core::testing::{container, pod};

    use super::*;

    struct FakeHost {
        healthy: bool,
    }

    impl Host for FakeHost {
        fn health(&self) -> Result<(), String> {
            if self.healthy {
                Ok(())
            } else {
                Err("PLEG is not healthy".into())
            }
        }
        fn pods(&self) -> Vec<(Arc<k8s_openapi::api::core::v1::Pod>, Option<PodStatus>)> {
            vec![(
                Arc::new(pod("web", "u1", vec![container("c", "img:1")])),
                Some(PodStatus {
                    phase: Some("Running".into()),
                    ..Default::default()
                }),
            )]
        }
    }

    #[test]
    fn routes_table() {
        let ok = FakeHost { healthy: true };
        let bad = FakeHost { healthy: false };
        let cases: [(&FakeHost, Endpoints, &str, &str, u16); 8] = [
            (&ok, Endpoints::Healthz, "GET", "/healthz", 200),
            (&bad, Endpoints::Healthz, "GET", "/healthz", 500),
            (&bad, Endpoints::Healthz, "GET", "/healthz/ping", 200),
            (&ok, Endpoints::Healthz, "GET", "/pods", 404),
            (&ok, Endpoints::ReadOnly, "GET", "/pods", 200),
            (&ok, Endpoints::ReadOnly, "POST", "/pods", 405),
            (&ok, Endpoints::ReadOnly, "GET", "/nope", 404),
            (&bad, Endpoints::ReadOnly, "GET", "/healthz/syncloop", 500),
        ];
        for (host, eps, method, path, want) in cases {
            assert_eq!(
                respond(host, eps, method, path).status,
                want,
                "{method} {path}"
            );
        }
        let body = respond(&ok, Endpoints::ReadOnly, "GET", "/pods").body;
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(v["kind"], "PodList");
        assert_eq!(v["items"][0]["metadata"]["name"], "web");
        assert_eq!(v["items"][0]["status"]["phase"], "Running");
    }
}
