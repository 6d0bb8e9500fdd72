//! Published probe results and what they mean for a container (Go's `prober/results`):
//! the probe types, a result, the [`ProbeLookup`] that status generation and action
//! computation read, and the started/ready rules built on it. The prober writes results;
//! everything else only reads them through [`ProbeLookup`], so it stays testable without a
//! prober.

use k8s_openapi::api::core::v1::{Container, Probe};

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeType {
    /// `livenessProbe`: failure restarts the container.
    Liveness,
    /// `readinessProbe`: drives the container's `ready`.
    Readiness,
    /// `startupProbe`: gates the other two; failure restarts the container.
    Startup,
}

impl ProbeType {
    /// Go's label value ("Liveness", "Readiness", "Startup").
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The container's probe of this type.
    pub fn of(self, c: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => c.liveness_probe.as_ref(),
            ProbeType::Readiness => c.readiness_probe.as_ref(),
            ProbeType::Startup => c.startup_probe.as_ref(),
        }
    }

    pub(crate) const ALL: [ProbeType; 3] = [
        ProbeType::Liveness,
        ProbeType::Readiness,
        ProbeType::Startup,
    ];
}

/// A published probe result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeResult {
    /// Passing.
    Success,
    /// Failing.
    Failure,
    /// Not known yet (startup probes before their first verdict).
    Unknown,
}

/// Reads published results by container id (status generation and action computation
/// depend on this only, so they stay testable without a manager).
pub trait ProbeLookup: Send + Sync {
    /// The result of the probe of `kind` for the container with runtime id `container_id`.
    fn result(&self, container_id: &str, kind: ProbeType) -> Option<ProbeResult>;
}

#[cfg(test)]
/// No probe results at all (every lookup answers `None`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProbes;

#[cfg(test)]
impl ProbeLookup for NoProbes {
    fn result(&self, _container_id: &str, _kind: ProbeType) -> Option<ProbeResult> {
        None
    }
}

/// Whether a running container counts as started: it has no startup probe or it passed.
pub fn container_started(c: &Container, container_id: &str, probes: &dyn ProbeLookup) -> bool {
    c.startup_probe.is_none()
        || probes.result(container_id, ProbeType::Startup) == Some(ProbeResult::Success)
}

/// Whether a running, started container is ready: no readiness probe or it passes.
pub fn container_ready(c: &Container, container_id: &str, probes: &dyn ProbeLookup) -> bool {
    container_started(c, container_id, probes)
        && (c.readiness_probe.is_none()
            || probes.result(container_id, ProbeType::Readiness) == Some(ProbeResult::Success))
}
