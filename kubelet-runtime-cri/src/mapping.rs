//! Pure mappings between kubelet-core's runtime types and CRI v1 messages, following the Go
//! kubelet's `kuberuntime` package (`generatePodSandboxConfig`, `generateContainerConfig`,
//! label and annotation helpers, QoS-derived cgroup settings), one seam per submodule:
//! labels and annotations, security (namespaces, security contexts), sandbox and container
//! configs, statuses, stats and events. The cgroup resource mapping (cpu shares and quota,
//! OOM score) is here.
//!
//! Nothing here does I/O, so everything is unit-tested table by table.

mod container;
mod events;
#[cfg(test)]
mod fixtures;
mod labels;
mod sandbox;
mod security;
mod stats;
mod status;

pub use container::{container_config, log_symlink_name};
pub use events::{container_event, container_event_kind};
pub(crate) use labels::parse_hash;
pub use labels::{
    container_annotations, container_labels, hash_from_annotations, pod_ref_from_labels,
    sandbox_labels,
};
pub use sandbox::{port_mappings, sandbox_config};
pub use security::{apparmor_profile, seccomp_profile};
pub use security::{container_security_context, namespace_options, ImageUser};
pub use stats::{container_stats, image_fs_info};
pub use status::{
    container_state, container_status, container_summary, sandbox_state, sandbox_status,
    sandbox_summary,
};

use std::path::PathBuf;

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod};
use kubelet_core::qos::{pod_qos, QosClass};
use kubelet_core::resources::{milli_value, value};
use kubelet_core::runtime::RuntimeError;

/// Label with the pod's name, on sandboxes and containers.
pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
/// Label with the pod's namespace, on sandboxes and containers.
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
/// Label with the pod's uid, on sandboxes and containers (the listing selector).
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// Label with the container's name in the pod spec.
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotation with the container spec hash (lower-case hex, as the Go kubelet writes it).
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
/// Annotation with the container's restart count.
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// Annotation with the container's terminationMessagePath.
pub const CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePath";
/// Annotation with the container's terminationMessagePolicy.
pub const CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION: &str =
    "io.kubernetes.container.terminationMessagePolicy";
/// Annotation with the container's ports (JSON array of ContainerPort).
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";
/// Annotation with the pod's termination grace period in seconds.
pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
/// Annotation with the pod's deletion grace period in seconds, when it is being deleted.
pub const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str = "io.kubernetes.pod.deletionGracePeriod";

/// CFS period the kubelet uses for quotas (100ms).
pub const QUOTA_PERIOD: i64 = kubelet_core::cpu::QUOTA_PERIOD;
/// Smallest CFS quota the kernel accepts (1ms).
pub const MIN_QUOTA: i64 = kubelet_core::cpu::MIN_QUOTA_PERIOD;
// cpu.shares/quota conversions (Go `MilliCPUToShares`/`MilliCPUToQuota`) are the core's.
pub use kubelet_core::cpu::{milli_cpu_to_quota, milli_cpu_to_shares, MAX_SHARES, MIN_SHARES};

/// The kubelet settings the mapping follows (the fields of Go's kuberuntime manager).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The node's memory in bytes (Burstable OOM scores); 0: unknown.
    pub memory_capacity: i64,
    /// Where `Localhost` seccomp profiles live: `<root-dir>/seccomp`.
    pub seccomp_profile_root: PathBuf,
    /// `seccompDefault`: containers without a seccomp profile get `RuntimeDefault` instead of
    /// `Unconfined`.
    pub seccomp_default: bool,
    /// `cpuCFSQuota`: enforce cpu limits with a CFS quota.
    pub cpu_cfs_quota: bool,
    /// `cpuCFSQuotaPeriod` in microseconds.
    pub cpu_cfs_quota_period_us: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory_capacity: 0,
            seccomp_profile_root: PathBuf::from("/var/lib/kubelet/seccomp"),
            seccomp_default: false,
            cpu_cfs_quota: true,
            cpu_cfs_quota_period_us: QUOTA_PERIOD,
        }
    }
}

/// OOM score adjustment the Go kubelet gives Guaranteed containers.
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// OOM score adjustment of BestEffort containers.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// The Go kubelet's OOM score adjustment for a container (`GetContainerOOMScoreAdjust`),
/// before the clamp: Guaranteed −997, BestEffort 1000, Burstable
/// `1000 − 1000·memoryRequest/memoryCapacity` kept within [3, 999].
pub fn go_oom_score_adj(qos: QosClass, memory_request: i64, memory_capacity: i64) -> i64 {
    match qos {
        QosClass::Guaranteed => GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {
            let adj = if memory_capacity <= 0 {
                BEST_EFFORT_OOM_SCORE_ADJ
            } else {
                let used = (i128::from(memory_request.max(0)) * 1000) / i128::from(memory_capacity);
                1000 - i64::try_from(used).unwrap_or(1000)
            };
            let floor = 1000 + GUARANTEED_OOM_SCORE_ADJ;
            if adj < floor {
                floor
            } else if adj == BEST_EFFORT_OOM_SCORE_ADJ {
                adj - 1
            } else {
                adj
            }
        }
    }
}

/// The OOM score adjustment this backend sends: Go's value, never negative (the runtime here
/// cannot lower scores below its own: no CAP_SYS_RESOURCE, `restrict_oom_score_adj`).
pub fn oom_score_adj(qos: QosClass, memory_request: i64, memory_capacity: i64) -> i64 {
    go_oom_score_adj(qos, memory_request, memory_capacity).max(0)
}

fn quantity(c: &Container, which: &str, name: &str, milli: bool) -> Result<i64, RuntimeError> {
    let list = c.resources.as_ref().and_then(|r| {
        if which == "limits" {
            r.limits.as_ref()
        } else {
            r.requests.as_ref()
        }
    });
    let Some(q) = list.and_then(|l| l.get(name)) else {
        return Ok(0);
    };
    let parsed = if milli { milli_value(q) } else { value(q) };
    parsed.map_err(|e| RuntimeError::InvalidInput {
        what: format!("container {:?} resources.{which}.{name}", c.name),
        message: e.to_string(),
    })
}

/// Linux resources of a container (Go `generateLinuxContainerResources`): cpu shares from the
/// request (the limit when no request), quota over `cpuCFSQuotaPeriod` from the cpu limit
/// (none with `cpuCFSQuota: false`), the memory limit, and the (non-negative) OOM score
/// adjustment.
pub fn container_resources(
    pod: &Pod,
    container: &Container,
    opts: &Options,
) -> Result<cri::LinuxContainerResources, RuntimeError> {
    let memory_capacity = opts.memory_capacity;
    let cpu_request = quantity(container, "requests", "cpu", true)?;
    let cpu_limit = quantity(container, "limits", "cpu", true)?;
    let memory_limit = quantity(container, "limits", "memory", false)?;
    let mut memory_request = quantity(container, "requests", "memory", false)?;
    if memory_request == 0 {
        memory_request = memory_limit;
    }
    let shares = if cpu_request == 0 && cpu_limit != 0 {
        milli_cpu_to_shares(cpu_limit)
    } else {
        milli_cpu_to_shares(cpu_request)
    };
    let mut resources = cri::LinuxContainerResources {
        cpu_shares: i64::try_from(shares).unwrap_or(i64::MAX),
        memory_limit_in_bytes: memory_limit.max(0),
        oom_score_adj: oom_score_adj(pod_qos(pod), memory_request, memory_capacity),
        ..Default::default()
    };
    if cpu_limit > 0 && opts.cpu_cfs_quota {
        let period = opts.cpu_cfs_quota_period_us;
        resources.cpu_period = period;
        resources.cpu_quota = milli_cpu_to_quota(cpu_limit, period);
    }
    Ok(resources)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::fixtures::{container, pod_with, GI};
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    #[test]
    fn shares_and_quota_table() {
        // (milli, shares, quota)
        let cases = [
            (0, 2, 0),
            (1, 2, 1000),
            (5, 5, 1000),
            (10, 10, 1000),
            (100, 102, 10_000),
            (250, 256, 25_000),
            (1000, 1024, 100_000),
            (1500, 1536, 150_000),
            (1_000_000, MAX_SHARES, 100_000_000),
        ];
        for (milli, shares, quota) in cases {
            assert_eq!(milli_cpu_to_shares(milli), shares, "shares of {milli}m");
            assert_eq!(
                milli_cpu_to_quota(milli, QUOTA_PERIOD),
                quota,
                "quota of {milli}m"
            );
        }
    }

    #[test]
    fn oom_score_table() {
        // (qos, request, capacity, go value, sent value)
        let cases = [
            (QosClass::Guaranteed, GI, 4 * GI, -997, 0),
            (QosClass::BestEffort, 0, 4 * GI, 1000, 1000),
            (QosClass::Burstable, GI, 4 * GI, 750, 750),
            (QosClass::Burstable, 0, 4 * GI, 999, 999),
            (QosClass::Burstable, 4 * GI, 4 * GI, 3, 3),
            (QosClass::Burstable, 8 * GI, 4 * GI, 3, 3),
            (QosClass::Burstable, GI / 1000, 4 * GI, 999, 999),
            (QosClass::Burstable, GI, 0, 999, 999),
        ];
        for (i, (qos, req, cap, go, sent)) in cases.into_iter().enumerate() {
            assert_eq!(go_oom_score_adj(qos, req, cap), go, "case {i} go");
            assert_eq!(oom_score_adj(qos, req, cap), sent, "case {i} sent");
        }
    }

    #[test]
    fn container_resources_table() {
        let cases: Vec<(Container, i64, i64, i64, i64)> = vec![
            // container, shares, quota, period, memory
            (container("a", &[], &[]), 2, 0, 0, 0),
            (container("a", &[("cpu", "250m")], &[]), 256, 0, 0, 0),
            (
                container("a", &[], &[("cpu", "500m"), ("memory", "64Mi")]),
                512,
                50_000,
                100_000,
                64 << 20,
            ),
            (
                container("a", &[("cpu", "100m")], &[("cpu", "2")]),
                102,
                200_000,
                100_000,
                0,
            ),
        ];
        for (i, (c, shares, quota, period, mem)) in cases.into_iter().enumerate() {
            let pod = pod_with(vec![c.clone()], PodSpec::default());
            let opts = Options {
                memory_capacity: 4 * GI,
                ..Default::default()
            };
            let r = container_resources(&pod, &c, &opts).unwrap();
            assert_eq!(r.cpu_shares, shares, "case {i}");
            assert_eq!(r.cpu_quota, quota, "case {i}");
            assert_eq!(r.cpu_period, period, "case {i}");
            assert_eq!(r.memory_limit_in_bytes, mem, "case {i}");
            assert!(r.oom_score_adj >= 0, "case {i}");
        }
        let bad = container("a", &[("cpu", "lots")], &[]);
        let pod = pod_with(vec![bad.clone()], PodSpec::default());
        assert!(matches!(
            container_resources(&pod, &bad, &Options::default()),
            Err(RuntimeError::InvalidInput { .. })
        ));
    }

    #[test]
    fn cfs_quota_follows_the_configuration() {
        let c = container("a", &[], &[("cpu", "500m")]);
        let pod = pod_with(vec![c.clone()], PodSpec::default());
        let custom = Options {
            cpu_cfs_quota_period_us: 50_000,
            ..Default::default()
        };
        let r = container_resources(&pod, &c, &custom).unwrap();
        assert_eq!((r.cpu_quota, r.cpu_period), (25_000, 50_000));
        let off = Options {
            cpu_cfs_quota: false,
            ..Default::default()
        };
        let r = container_resources(&pod, &c, &off).unwrap();
        assert_eq!((r.cpu_quota, r.cpu_period), (0, 0));
        assert_eq!(r.cpu_shares, 512);
    }
}
