//! One probe worker: the loop described in the module docs of [`super`].

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, Probe};
use tokio_util::sync::CancellationToken;

use super::probe::{self, Outcome, Target};
use super::{ProbeCountKey, ProbeResult, ProbeType, ProberManager};
use crate::pod;
use crate::sink::{Event, EventType};

/// Go's defaults and minimums.
fn secs(v: Option<i32>, default: i32, min: i32) -> Duration {
    let s = v.unwrap_or(default).max(min);
    Duration::from_secs(u64::try_from(s).unwrap_or(1))
}

fn threshold(v: Option<i32>, default: i32) -> u32 {
    u32::try_from(v.unwrap_or(default).max(1)).unwrap_or(1)
}

pub(super) struct Worker {
    manager: Arc<ProberManager>,
    pod: Arc<Pod>,
    container: Container,
    kind: ProbeType,
    probe: Probe,
    container_id: Option<String>,
    last: Option<ProbeResult>,
    run: u32,
    on_hold: bool,
}

fn strip_runtime(id: &str) -> &str {
    id.split_once("://").map_or(id, |(_, id)| id)
}

impl Worker {
    pub(super) fn new(
        manager: Arc<ProberManager>,
        pod: Arc<Pod>,
        container: Container,
        kind: ProbeType,
        probe: Probe,
    ) -> Self {
        Worker {
            manager,
            pod,
            container,
            kind,
            probe,
            container_id: None,
            last: None,
            run: 0,
            on_hold: false,
        }
    }

    fn initial(&self) -> ProbeResult {
        match self.kind {
            ProbeType::Readiness => ProbeResult::Failure,
            ProbeType::Liveness => ProbeResult::Success,
            ProbeType::Startup => ProbeResult::Unknown,
        }
    }

    pub(super) async fn run(mut self, token: CancellationToken) {
        let period = secs(self.probe.period_seconds, 10, 1);
        tracing::debug!(pod = %pod::full_name(&self.pod), container = %self.container.name, probe = self.kind.as_str(), "probe worker started");
        loop {
            if !self.do_probe().await {
                break;
            }
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tokio::time::sleep(period) => {}
            }
        }
        if let Some(id) = self.container_id.take() {
            self.manager.forget_result(&id, self.kind);
        }
        tracing::debug!(pod = %pod::full_name(&self.pod), container = %self.container.name, probe = self.kind.as_str(), "probe worker stopped");
    }

    /// The container's latest status, the pod IP and whether the pod is in a terminal phase.
    fn status(&self) -> Option<(ContainerStatus, String, bool)> {
        let st = self.manager.status.get(pod::uid(&self.pod))?;
        let pod_ip = st.pod_ip.clone().unwrap_or_default();
        let find = |v: &Option<Vec<ContainerStatus>>| {
            v.as_ref()
                .and_then(|v| v.iter().find(|c| c.name == self.container.name).cloned())
        };
        let c = find(&st.container_statuses).or_else(|| find(&st.init_container_statuses))?;
        let terminal = matches!(st.phase.as_deref(), Some("Failed") | Some("Succeeded"));
        Some((c, pod_ip, terminal))
    }

    /// One period's work; false ends the worker.
    async fn do_probe(&mut self) -> bool {
        let Some((status, pod_ip, terminal)) = self.status() else {
            return true;
        };
        if terminal {
            return false;
        }
        let Some(id) = status.container_id.as_deref().map(strip_runtime) else {
            return true;
        };
        let uid = pod::uid(&self.pod).to_string();
        if self.container_id.as_deref() != Some(id) {
            if let Some(old) = self.container_id.take() {
                self.manager.forget_result(&old, self.kind);
            }
            self.container_id = Some(id.to_string());
            self.manager.set_result(&uid, id, self.kind, self.initial());
            self.last = None;
            self.run = 0;
            self.on_hold = false;
        }
        if self.on_hold {
            return true;
        }
        let state = status.state.clone().unwrap_or_default();
        let Some(running) = state.running else {
            self.manager
                .set_result(&uid, id, self.kind, ProbeResult::Failure);
            return state.terminated.is_none() || pod::restart_policy(&self.pod) != "Never";
        };
        let started = status.started.unwrap_or(false);
        if self.kind != ProbeType::Startup && !started {
            return true;
        }
        if self.kind == ProbeType::Startup && started {
            return true;
        }
        let delay =
            u64::try_from(self.probe.initial_delay_seconds.unwrap_or(0).max(0)).unwrap_or(0);
        if let Some(at) = running.started_at.as_ref() {
            let started_ns = at.0.as_nanosecond();
            let now = i128::from(crate::clock::now_unix_nanos());
            if now - started_ns < i128::from(delay) * 1_000_000_000 {
                return true;
            }
        }
        let outcome = self.execute(id, &pod_ip).await;
        let (result, label) = match &outcome {
            Outcome::Success(_) | Outcome::Warning(_) => (ProbeResult::Success, "successful"),
            Outcome::Failure(_) => (ProbeResult::Failure, "failed"),
            Outcome::Unknown(_) => (ProbeResult::Unknown, "unknown"),
        };
        self.manager.count(ProbeCountKey {
            probe_type: self.kind.as_str(),
            result: label,
            container: self.container.name.clone(),
            pod: pod::name(&self.pod).to_string(),
            namespace: pod::namespace(&self.pod).to_string(),
            pod_uid: uid.clone(),
        });
        match &outcome {
            Outcome::Unknown(e) => {
                tracing::debug!(pod = %pod::full_name(&self.pod), container = %self.container.name, probe = self.kind.as_str(), error = %e, "probe errored; result ignored");
                return true;
            }
            Outcome::Failure(msg) => {
                tracing::info!(pod = %pod::full_name(&self.pod), uid, container = %self.container.name, probe = self.kind.as_str(), output = %msg, "probe failed");
                self.event(
                    EventType::Warning,
                    "Unhealthy",
                    format!("{} probe failed: {msg}", self.kind.as_str()),
                );
            }
            Outcome::Warning(msg) => {
                self.event(
                    EventType::Warning,
                    "ProbeWarning",
                    format!("{} probe warning: {msg}", self.kind.as_str()),
                );
            }
            Outcome::Success(_) => {}
        }
        if self.last == Some(result) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(result);
            self.run = 1;
        }
        let failure_threshold = threshold(self.probe.failure_threshold, 3);
        let success_threshold = match self.kind {
            // Liveness and startup probes must use 1 (API validation); enforce it.
            ProbeType::Readiness => threshold(self.probe.success_threshold, 1),
            _ => 1,
        };
        if (result == ProbeResult::Failure && self.run < failure_threshold)
            || (result == ProbeResult::Success && self.run < success_threshold)
        {
            return true;
        }
        self.manager.set_result(&uid, id, self.kind, result);
        if result == ProbeResult::Failure && self.kind != ProbeType::Readiness {
            // The container will be killed; wait for its successor.
            self.on_hold = true;
            self.run = 0;
        }
        true
    }

    async fn execute(&self, container_id: &str, pod_ip: &str) -> Outcome {
        let timeout = secs(self.probe.timeout_seconds, 1, 1);
        let target = Target {
            container_id,
            container: &self.container,
            pod_ip,
        };
        let p = &self.probe;
        if let Some(exec) = p.exec.as_ref() {
            probe::run_exec(self.manager.runtime.as_ref(), target, exec, timeout).await
        } else if let Some(http) = p.http_get.as_ref() {
            match self.manager.http.as_ref() {
                Some(client) => probe::run_http(client, target, http, timeout).await,
                None => Outcome::Unknown("HTTP prober unavailable".into()),
            }
        } else if let Some(tcp) = p.tcp_socket.as_ref() {
            probe::run_tcp(target, tcp, timeout).await
        } else if let Some(grpc) = p.grpc.as_ref() {
            probe::run_grpc(target, grpc, timeout).await
        } else {
            Outcome::Unknown("probe has no action".into())
        }
    }

    fn event(&self, t: EventType, reason: &str, message: String) {
        self.manager.sink.record_event(Event::for_pod(
            &self.pod,
            Some(&self.container.name),
            t,
            reason,
            message,
        ));
    }
}
