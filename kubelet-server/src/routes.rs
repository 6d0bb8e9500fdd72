//! Request routing: which endpoints a listener serves and what each answers.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kubelet_core::runtime::{
    AttachRequest, ContainerState, ContainerSummary, ExecRequest, ListFilter, SandboxState,
};
use tokio_util::sync::CancellationToken;

use crate::host::Host;
use crate::logs::{self, query_pairs, LogOptions};
use crate::reply::{channel_body, full, json_reply, status_error, text, with_type, Body};
use crate::streaming;

/// Which set of endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoints {
    /// Only `/healthz*` (the healthz listener, 127.0.0.1:10248 by default).
    Healthz,
    /// The read-only endpoints (`readOnlyPort`): `/healthz*`, `/pods`, `/spec/`,
    /// `/stats/summary`, `/metrics*`.
    ReadOnly,
    /// Everything (the secure port): also logs, exec/attach/port-forward/run,
    /// `/runningpods/`, `/configz`, `/logs/`.
    Full,
}

/// Per-server settings of the handlers.
#[derive(Debug, Clone)]
pub struct HandlerOptions {
    /// Serve `/logs/` directory listings.
    pub list_node_log_dirs: bool,
    /// `enableDebuggingHandlers`: `/run`, `/exec`, `/attach`, `/portForward`,
    /// `/containerLogs`, `/runningpods/`, `/configz`, and the handlers below; when off, those
    /// paths answer 405 "Debug endpoints are disabled." as Go's do.
    pub debugging_handlers: bool,
    /// `enableSystemLogHandler`: `/logs/` (405 "logs endpoint is disabled." when off).
    pub system_log_handler: bool,
    /// `enableProfilingHandler`: `/debug/pprof/` (405 "profiling endpoint is disabled." when
    /// off; kubelet-rs has no Go profiler, so when on it answers 501).
    pub profiling_handler: bool,
    /// `enableDebugFlagsHandler`: `/debug/flags/v` (405 "flags endpoint is disabled." when
    /// off; 501 when on: the log level is not changeable at run time yet).
    pub debug_flags_handler: bool,
    /// Idle timeout of exec/attach/port-forward streams (`streamingConnectionIdleTimeout`).
    pub streaming_idle_timeout: Duration,
    /// Timeout of `/run` commands.
    pub run_timeout: Duration,
}

impl Default for HandlerOptions {
    fn default() -> Self {
        HandlerOptions {
            list_node_log_dirs: true,
            debugging_handlers: true,
            system_log_handler: true,
            profiling_handler: true,
            debug_flags_handler: true,
            streaming_idle_timeout: Duration::from_secs(4 * 3600),
            run_timeout: Duration::from_secs(120),
        }
    }
}

/// What the handlers share.
pub(crate) struct Ctx {
    pub host: Arc<dyn Host>,
    pub endpoints: Endpoints,
    pub options: HandlerOptions,
    pub shutdown: CancellationToken,
}

fn not_found() -> Response<Body> {
    status_error(StatusCode::NOT_FOUND, "404 page not found")
}

fn method_not_allowed() -> Response<Body> {
    status_error(StatusCode::METHOD_NOT_ALLOWED, "405 method not allowed")
}

/// Go's answers for handlers switched off (`InstallDebuggingDisabledHandlers` and the
/// `enable*Handler` settings): 405 with Go's text; the debug handlers kubelet-rs does not
/// have answer 501 when switched on.
fn disabled_handler(o: &HandlerOptions, segs: &[&str]) -> Option<Response<Body>> {
    let first = segs.first().copied().unwrap_or_default();
    let second = segs.get(1).copied().unwrap_or_default();
    let debug = matches!(
        first,
        "run" | "exec" | "attach" | "portForward" | "containerLogs" | "runningpods" | "logs"
    ) || (first == "debug" && second == "pprof");
    let off = |msg: &str| Some(text(StatusCode::METHOD_NOT_ALLOWED, format!("{msg}\n")));
    if !o.debugging_handlers {
        if debug {
            return off("Debug endpoints are disabled.");
        }
        if first == "configz" || first == "debug" {
            return Some(not_found());
        }
        return None;
    }
    match (first, second) {
        ("logs", _) if !o.system_log_handler => off("logs endpoint is disabled."),
        ("debug", "pprof") if !o.profiling_handler => off("profiling endpoint is disabled."),
        ("debug", "pprof") => Some(text(
            StatusCode::NOT_IMPLEMENTED,
            "profiling is not available in kubelet-rs\n",
        )),
        ("debug", "flags") if segs.get(2) == Some(&"v") && !o.debug_flags_handler => {
            off("flags endpoint is disabled.")
        }
        ("debug", "flags") if segs.get(2) == Some(&"v") => Some(text(
            StatusCode::NOT_IMPLEMENTED,
            "changing the log level at run time is not available in kubelet-rs\n",
        )),
        _ => None,
    }
}

fn is_get(m: &Method) -> bool {
    m == Method::GET || m == Method::HEAD
}

/// Answers one (authenticated and authorized) request.
pub(crate) async fn route(ctx: &Ctx, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let method = req.method().clone();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let full_api = ctx.endpoints == Endpoints::Full;
    let read_only = ctx.endpoints != Endpoints::Healthz;
    if full_api {
        if let Some(disabled) = disabled_handler(&ctx.options, &segs) {
            return disabled;
        }
    }
    match (segs.first().copied().unwrap_or_default(), segs.len()) {
        ("healthz", _) => {
            if !is_get(&method) {
                return method_not_allowed();
            }
            match path.as_str() {
                "/healthz/ping" => text(StatusCode::OK, "ok"),
                "/healthz" | "/healthz/" => healthz(ctx.host.as_ref(), false),
                "/healthz/syncloop" => healthz(ctx.host.as_ref(), true),
                "/healthz/log" => text(StatusCode::OK, "ok"),
                _ => not_found(),
            }
        }
        ("pods", 1) | ("pods", 2) if read_only && (path == "/pods" || path == "/pods/") => {
            if !is_get(&method) {
                return method_not_allowed();
            }
            pod_list(ctx.host.as_ref())
        }
        ("spec", _) if read_only && (path == "/spec" || path == "/spec/") => {
            match ctx.host.machine_spec() {
                Some(v) => json_reply(&v),
                None => status_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "machine info is not available",
                ),
            }
        }
        ("stats", _) if read_only => {
            if path != "/stats/summary" && path != "/stats/summary/" {
                return not_found();
            }
            let only = query_pairs(&query)
                .iter()
                .any(|(k, v)| k == "only_cpu_and_memory" && (v == "true" || v == "1"));
            match ctx.host.stats_summary(only).await {
                Ok(s) => json_reply(&s),
                Err(e) => status_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("failed to get stats summary: {e}"),
                ),
            }
        }
        ("metrics", _) if read_only => match path.as_str() {
            "/metrics" => match ctx.host.metrics_text() {
                Some(t) => with_type(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    full(t),
                ),
                None => not_found(),
            },
            "/metrics/resource" => match ctx.host.stats_summary(true).await {
                Ok(s) => with_type(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    full(crate::stats::resource_metrics(&s)),
                ),
                Err(e) => status_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("failed to get resource metrics: {e}"),
                ),
            },
            "/metrics/cadvisor" => match ctx.host.cadvisor_metrics_text().await {
                Ok(text) => with_type(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    full(text),
                ),
                Err(e) => status_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("failed to get cadvisor metrics: {e}"),
                ),
            },
            "/metrics/probes" => match ctx.host.probe_metrics_text() {
                Some(t) => with_type(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    full(t),
                ),
                None => not_found(),
            },
            _ => not_found(),
        },
        ("runningpods", _) if full_api && (path == "/runningpods" || path == "/runningpods/") => {
            running_pods(ctx.host.as_ref()).await
        }
        ("configz", 1) if full_api => match ctx.host.configz() {
            Some(v) => json_reply(&serde_json::json!({ "kubeletconfig": v })),
            None => status_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the configuration is not available",
            ),
        },
        ("logs", _) if full_api => {
            if !is_get(&method) {
                return method_not_allowed();
            }
            let Some(root) = ctx.host.node_logs_dir() else {
                return not_found();
            };
            if path == "/logs" {
                let mut r = with_type(StatusCode::MOVED_PERMANENTLY, "text/plain", full(""));
                r.headers_mut().insert(
                    hyper::header::LOCATION,
                    hyper::header::HeaderValue::from_static("/logs/"),
                );
                return r;
            }
            let rel = path.strip_prefix("/logs/").unwrap_or_default();
            crate::node_logs::serve(&root, rel, ctx.options.list_node_log_dirs).await
        }
        ("containerLogs", 4) if full_api => {
            if !is_get(&method) {
                return method_not_allowed();
            }
            container_logs(ctx, segs[1], segs[2], segs[3], &query).await
        }
        ("exec", 4) | ("exec", 5) | ("attach", 4) | ("attach", 5) if full_api => {
            if method != Method::GET && method != Method::POST {
                return method_not_allowed();
            }
            let kind = segs[0] == "exec";
            let (ns, name, uid, container) = if segs.len() == 5 {
                (segs[1], segs[2], Some(segs[3]), segs[4])
            } else {
                (segs[1], segs[2], None, segs[3])
            };
            exec_or_attach(ctx, req, kind, ns, name, uid, container).await
        }
        ("portForward", 3) | ("portForward", 4) if full_api => {
            if method != Method::GET && method != Method::POST {
                return method_not_allowed();
            }
            let uid = segs.get(3).copied();
            port_forward(ctx, req, segs[1], segs[2], uid).await
        }
        ("run", 4) | ("run", 5) if full_api => {
            if method != Method::POST {
                return method_not_allowed();
            }
            let (ns, name, uid, container) = if segs.len() == 5 {
                (segs[1], segs[2], Some(segs[3]), segs[4])
            } else {
                (segs[1], segs[2], None, segs[3])
            };
            run_in_container(ctx, ns, name, uid, container, &query).await
        }
        _ => not_found(),
    }
}

fn healthz(host: &dyn Host, syncloop_only: bool) -> Response<Body> {
    match host.health() {
        Ok(()) => text(StatusCode::OK, "ok"),
        Err(reason) if syncloop_only => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
        Err(reason) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[+]ping ok\n[+]log ok\n[-]syncloop failed: {reason}\nhealthz check failed\n"),
        ),
    }
}

fn pod_list(host: &dyn Host) -> Response<Body> {
    let items: Vec<Pod> = host
        .pods()
        .into_iter()
        .map(|(p, status)| {
            let mut pod = (*p).clone();
            pod.status = status;
            pod
        })
        .collect();
    json_reply(&k8s_openapi::List {
        items,
        metadata: ListMeta::default(),
    })
}

/// Go's `/runningpods/`: pods as the runtime sees them (running sandboxes and their
/// running containers), with names and images only.
async fn running_pods(host: &dyn Host) -> Response<Body> {
    let rt = host.runtime();
    let filter = ListFilter::all();
    let (sandboxes, containers) =
        match tokio::try_join!(rt.list_pod_sandboxes(&filter), rt.list_containers(&filter)) {
            Ok(x) => x,
            Err(e) => {
                return status_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("listing the runtime's pods: {e}"),
                )
            }
        };
    let mut pods: std::collections::BTreeMap<String, Pod> = Default::default();
    for s in sandboxes.iter().filter(|s| s.state == SandboxState::Ready) {
        pods.entry(s.pod.uid.clone()).or_insert_with(|| Pod {
            metadata: ObjectMeta {
                name: Some(s.pod.name.clone()),
                namespace: Some(s.pod.namespace.clone()),
                uid: Some(s.pod.uid.clone()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            ..Default::default()
        });
    }
    for c in containers
        .iter()
        .filter(|c| c.state == ContainerState::Running)
    {
        if let Some(spec) = pods.get_mut(&c.pod.uid).and_then(|p| p.spec.as_mut()) {
            spec.containers.push(Container {
                name: c.name.clone(),
                image: Some(c.image.clone()),
                ..Default::default()
            });
        }
    }
    let mut items: Vec<Pod> = pods.into_values().collect();
    items.sort_by_key(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()));
    json_reply(&k8s_openapi::List {
        items,
        metadata: ListMeta::default(),
    })
}

/// The pod `ns/name` (and uid, when given), or a 404.
#[allow(clippy::result_large_err)]
fn find_pod(
    host: &dyn Host,
    ns: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<Arc<Pod>, Response<Body>> {
    match host.pod_by_name(ns, name) {
        Some(p) if uid.is_none_or(|u| kubelet_core::pod::uid(&p) == u) => Ok(p),
        _ => Err(status_error(
            StatusCode::NOT_FOUND,
            &format!("pod {ns}/{name} not found"),
        )),
    }
}

fn in_spec(pod: &Pod, container: &str) -> bool {
    pod.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
            .any(|c| c.name == container)
            || s.ephemeral_containers
                .iter()
                .flatten()
                .any(|c| c.name == container)
    })
}

/// The pod's instances of `container`, newest first.
#[allow(clippy::result_large_err)]
async fn instances(
    host: &dyn Host,
    pod: &Pod,
    container: &str,
) -> Result<Vec<ContainerSummary>, Response<Body>> {
    let uid = kubelet_core::pod::uid(pod);
    let mut list = host
        .runtime()
        .list_containers(&ListFilter::pod(uid))
        .await
        .map_err(|e| {
            status_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("listing containers: {e}"),
            )
        })?;
    list.retain(|c| c.name == container && c.pod.uid == uid);
    list.sort_by_key(|c| std::cmp::Reverse((c.attempt, c.created_at)));
    Ok(list)
}

async fn container_logs(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    container: &str,
    query: &str,
) -> Response<Body> {
    let host = ctx.host.as_ref();
    let opts = match LogOptions::from_query(query, kubelet_core::clock::now_unix_nanos()) {
        Ok(o) => o,
        Err(e) => return status_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let pod = match find_pod(host, ns, name, None) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !in_spec(&pod, container) {
        return status_error(
            StatusCode::NOT_FOUND,
            &format!("container {container:?} not found in pod {ns}/{name}"),
        );
    }
    let list = match instances(host, &pod, container).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    // As Go: the previous instance is the pod status's lastState.terminated container (the
    // newest exited one while the container waits to restart); otherwise the one before the
    // newest.
    let last_terminated = host
        .pods()
        .into_iter()
        .find(|(p, _)| kubelet_core::pod::uid(p) == kubelet_core::pod::uid(&pod))
        .and_then(|(_, s)| s)
        .and_then(|s| {
            s.container_statuses
                .into_iter()
                .chain(s.init_container_statuses)
                .flatten()
                .find(|c| c.name == container)
        })
        .and_then(|c| c.last_state?.terminated?.container_id)
        .map(|id| {
            id.split_once("://")
                .map_or(id.clone(), |(_, id)| id.to_string())
        });
    let chosen = if opts.previous {
        last_terminated
            .as_deref()
            .and_then(|id| list.iter().find(|c| c.id == id))
            .or_else(|| list.get(1))
    } else {
        list.first()
    };
    let Some(chosen) = chosen else {
        let msg = if opts.previous {
            format!("previous terminated container {container:?} in pod {name:?} not found")
        } else {
            format!("container {container:?} in pod {name:?} is waiting to start")
        };
        return status_error(StatusCode::BAD_REQUEST, &msg);
    };
    let rt = host.runtime();
    let path = match rt.container_status(&chosen.id).await {
        Ok(s) => s.log_path,
        Err(e) => {
            return status_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("container status: {e}"),
            )
        }
    };
    let path = path.unwrap_or_else(|| {
        host.pod_logs_dir()
            .join(format!("{ns}_{name}_{}", kubelet_core::pod::uid(&pod)))
            .join(container)
            .join(format!("{}.log", chosen.attempt))
    });
    let files = logs::log_files(&path).await;
    let follow = opts.follow && !opts.previous && chosen.state == ContainerState::Running;
    // Zero means no limit, as Go's zero streamingConnectionIdleTimeout.
    let idle = match ctx.options.streaming_idle_timeout {
        d if d.is_zero() => Duration::MAX,
        d => d,
    };
    if !follow {
        // Streamed as read (bounded memory); a client that stops reading ends it after the
        // streaming idle timeout.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(logs::stream_logs(files, opts, tx, idle));
        return with_type(StatusCode::OK, "text/plain", channel_body(rx));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let id = chosen.id.clone();
    let limits = logs::FollowLimits {
        idle_timeout: idle,
        ..logs::FollowLimits::default()
    };
    tokio::spawn(logs::follow_with(
        files,
        path,
        opts,
        tx,
        move || {
            let (rt, id) = (rt.clone(), id.clone());
            async move {
                rt.container_status(&id)
                    .await
                    .map(|s| s.summary.state == ContainerState::Running)
                    .unwrap_or(false)
            }
        },
        ctx.shutdown.clone(),
        limits,
    ));
    with_type(StatusCode::OK, "text/plain", channel_body(rx))
}

/// The running instance of `container` (its runtime id), or an error reply.
#[allow(clippy::result_large_err)]
async fn running_container(
    host: &dyn Host,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    container: &str,
) -> Result<(Arc<Pod>, String), Response<Body>> {
    let pod = find_pod(host, ns, name, uid)?;
    if !in_spec(&pod, container) {
        return Err(status_error(
            StatusCode::NOT_FOUND,
            &format!("container {container:?} not found in pod {ns}/{name}"),
        ));
    }
    let list = instances(host, &pod, container).await?;
    match list
        .into_iter()
        .find(|c| c.state == ContainerState::Running)
    {
        Some(c) => Ok((pod, c.id)),
        None => Err(status_error(
            StatusCode::BAD_REQUEST,
            &format!("container {container:?} in pod {ns}/{name} is not running"),
        )),
    }
}

fn flag(pairs: &[(String, String)], names: &[&str]) -> bool {
    pairs.iter().any(|(k, v)| {
        names.contains(&k.as_str()) && matches!(v.as_str(), "1" | "true" | "True" | "")
    })
}

async fn exec_or_attach(
    ctx: &Ctx,
    req: Request<Incoming>,
    exec: bool,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    container: &str,
) -> Response<Body> {
    if !streaming::is_upgrade(&req) {
        return status_error(StatusCode::BAD_REQUEST, "Upgrade request required");
    }
    let host = ctx.host.as_ref();
    let (_, id) = match running_container(host, ns, name, uid, container).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let pairs = query_pairs(req.uri().query().unwrap_or_default());
    let (stdin, stdout, stderr, tty) = (
        flag(&pairs, &["stdin", "input"]),
        flag(&pairs, &["stdout", "output"]),
        flag(&pairs, &["stderr", "error"]),
        flag(&pairs, &["tty"]),
    );
    let rt = host.runtime();
    let url = if exec {
        let cmd: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| k == "command")
            .map(|(_, v)| v.clone())
            .collect();
        if cmd.is_empty() {
            return status_error(
                StatusCode::BAD_REQUEST,
                "you must specify at least one command for the container",
            );
        }
        rt.exec_url(&ExecRequest {
            container_id: id,
            cmd,
            tty,
            stdin,
            stdout,
            stderr: stderr && !tty,
        })
        .await
    } else {
        rt.attach_url(&AttachRequest {
            container_id: id,
            tty,
            stdin,
            stdout,
            stderr: stderr && !tty,
        })
        .await
    };
    match url {
        Ok(url) => {
            streaming::proxy(
                req,
                &url,
                ctx.options.streaming_idle_timeout,
                ctx.shutdown.clone(),
            )
            .await
        }
        Err(e) => status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("getting the streaming URL: {e}"),
        ),
    }
}

async fn port_forward(
    ctx: &Ctx,
    req: Request<Incoming>,
    ns: &str,
    name: &str,
    uid: Option<&str>,
) -> Response<Body> {
    if !streaming::is_upgrade(&req) {
        return status_error(StatusCode::BAD_REQUEST, "Upgrade request required");
    }
    let host = ctx.host.as_ref();
    let pod = match find_pod(host, ns, name, uid) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let pod_uid = kubelet_core::pod::uid(&pod);
    let rt = host.runtime();
    let sandboxes = match rt.list_pod_sandboxes(&ListFilter::pod(pod_uid)).await {
        Ok(s) => s,
        Err(e) => {
            return status_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("listing sandboxes: {e}"),
            )
        }
    };
    let Some(sandbox) = sandboxes
        .iter()
        .filter(|s| s.state == SandboxState::Ready && s.pod.uid == pod_uid)
        .max_by_key(|s| s.created_at)
    else {
        return status_error(
            StatusCode::BAD_REQUEST,
            &format!("pod {ns}/{name} has no running sandbox"),
        );
    };
    let mut ports = Vec::new();
    for (k, v) in query_pairs(req.uri().query().unwrap_or_default()) {
        if k == "port" || k == "ports" {
            for p in v.split(',') {
                match p.trim().parse::<u16>() {
                    Ok(n) if n > 0 => ports.push(i32::from(n)),
                    _ => {
                        return status_error(
                            StatusCode::BAD_REQUEST,
                            &format!("invalid port {p:?}"),
                        )
                    }
                }
            }
        }
    }
    match rt.port_forward_url(&sandbox.id, &ports).await {
        Ok(url) => {
            streaming::proxy(
                req,
                &url,
                ctx.options.streaming_idle_timeout,
                ctx.shutdown.clone(),
            )
            .await
        }
        Err(e) => status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("getting the port-forward URL: {e}"),
        ),
    }
}

async fn run_in_container(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    container: &str,
    query: &str,
) -> Response<Body> {
    let host = ctx.host.as_ref();
    let cmd: Vec<String> = query_pairs(query)
        .into_iter()
        .filter(|(k, _)| k == "cmd")
        .flat_map(|(_, v)| v.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    if cmd.is_empty() {
        return status_error(StatusCode::BAD_REQUEST, "missing the cmd query parameter");
    }
    let (_, id) = match running_container(host, ns, name, uid, container).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match host
        .runtime()
        .exec_sync(&id, &cmd, ctx.options.run_timeout)
        .await
    {
        Ok(out) => {
            let mut body = out.stdout;
            body.extend_from_slice(&out.stderr);
            let mut r = with_type(StatusCode::OK, "text/plain", full(body));
            if let Ok(v) = hyper::header::HeaderValue::from_str(&out.exit_code.to_string()) {
                r.headers_mut().insert("X-Exit-Code", v);
            }
            r
        }
        Err(e) => status_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("running the command: {e}"),
        ),
    }
}
