//! Pure mappings between kubelet-core's runtime types and CRI v1 messages, following the Go
//! kubelet's `kuberuntime` package (`generatePodSandboxConfig`, `generateContainerConfig`,
//! label and annotation helpers, QoS-derived cgroup settings).
//!
//! Nothing here does I/O, so everything is unit-tested table by table.

use std::collections::HashMap;

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};
use kubelet_core::qos::{pod_qos, QosClass};
use kubelet_core::resources::{milli_value, value};
use kubelet_core::runtime::{
    ContainerConfig, ContainerState, ContainerStatus, ContainerSummary, MountPropagation, PodRef,
    RuntimeError, SandboxConfig, SandboxState, SandboxStatus, SandboxSummary,
};

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

/// CRI namespace options for a pod: network NODE with hostNetwork else POD; pid NODE with
/// hostPID, POD with shareProcessNamespace, else CONTAINER (always explicit); ipc NODE with
/// hostIPC else POD.
pub fn namespace_options(pod: &Pod) -> cri::NamespaceOption {
    let spec = pod.spec.as_ref();
    let flag = |f: fn(&k8s_openapi::api::core::v1::PodSpec) -> Option<bool>| {
        spec.and_then(f).unwrap_or(false)
    };
    let network = if flag(|s| s.host_network) {
        cri::NamespaceMode::Node
    } else {
        cri::NamespaceMode::Pod
    };
    let pid = if flag(|s| s.host_pid) {
        cri::NamespaceMode::Node
    } else if flag(|s| s.share_process_namespace) {
        cri::NamespaceMode::Pod
    } else {
        cri::NamespaceMode::Container
    };
    let ipc = if flag(|s| s.host_ipc) {
        cri::NamespaceMode::Node
    } else {
        cri::NamespaceMode::Pod
    };
    cri::NamespaceOption {
        network: network as i32,
        pid: pid as i32,
        ipc: ipc as i32,
        ..Default::default()
    }
}

fn pod_ref_of(pod: &Pod) -> PodRef {
    PodRef {
        uid: kubelet_core::pod::uid(pod).to_string(),
        name: kubelet_core::pod::name(pod).to_string(),
        namespace: kubelet_core::pod::namespace(pod).to_string(),
    }
}

/// Sandbox labels: the pod's labels plus the three pod identity labels (Go `newPodLabels`).
pub fn sandbox_labels(pod: &Pod) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = pod
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let r = pod_ref_of(pod);
    labels.insert(POD_NAME_LABEL.into(), r.name);
    labels.insert(POD_NAMESPACE_LABEL.into(), r.namespace);
    labels.insert(POD_UID_LABEL.into(), r.uid);
    labels
}

/// Container labels: container name plus the pod identity labels (Go `newContainerLabels`).
pub fn container_labels(pod: &Pod, container_name: &str) -> HashMap<String, String> {
    let r = pod_ref_of(pod);
    HashMap::from([
        (CONTAINER_NAME_LABEL.to_string(), container_name.to_string()),
        (POD_NAME_LABEL.to_string(), r.name),
        (POD_NAMESPACE_LABEL.to_string(), r.namespace),
        (POD_UID_LABEL.to_string(), r.uid),
    ])
}

/// Container annotations (Go `newContainerAnnotations`): hash (hex), restart count,
/// termination message path/policy, ports (JSON) and the pod's grace periods.
pub fn container_annotations(config: &ContainerConfig) -> HashMap<String, String> {
    let c = &config.container;
    let mut a = HashMap::from([
        (
            CONTAINER_HASH_ANNOTATION.to_string(),
            format!("{:x}", config.hash),
        ),
        (
            CONTAINER_RESTART_COUNT_ANNOTATION.to_string(),
            config.restart_count.to_string(),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION.to_string(),
            c.termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".to_string()),
        ),
        (
            CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION.to_string(),
            c.termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".to_string()),
        ),
    ]);
    if let Some(ports) = c.ports.as_ref().filter(|p| !p.is_empty()) {
        if let Ok(json) = serde_json::to_string(ports) {
            a.insert(CONTAINER_PORTS_ANNOTATION.to_string(), json);
        }
    }
    let pod = &config.pod;
    if let Some(g) = pod.metadata.deletion_grace_period_seconds {
        a.insert(
            POD_DELETION_GRACE_PERIOD_ANNOTATION.to_string(),
            g.to_string(),
        );
    }
    if let Some(g) = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
    {
        a.insert(
            POD_TERMINATION_GRACE_PERIOD_ANNOTATION.to_string(),
            g.to_string(),
        );
    }
    a
}

/// The pod identity from kubelet labels; `None` when the object was not made by a kubelet.
pub fn pod_ref_from_labels(labels: &HashMap<String, String>) -> Option<PodRef> {
    Some(PodRef {
        uid: labels.get(POD_UID_LABEL)?.clone(),
        name: labels.get(POD_NAME_LABEL).cloned().unwrap_or_default(),
        namespace: labels.get(POD_NAMESPACE_LABEL).cloned().unwrap_or_default(),
    })
}

/// Parses the hash annotation (hex, as written by [`container_annotations`]); 0 when absent
/// or malformed (such a container never matches a spec and is re-created).
pub fn hash_from_annotations(annotations: &HashMap<String, String>) -> u64 {
    annotations
        .get(CONTAINER_HASH_ANNOTATION)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

fn protocol(p: Option<&str>) -> i32 {
    match p {
        Some("UDP") => cri::Protocol::Udp as i32,
        Some("SCTP") => cri::Protocol::Sctp as i32,
        _ => cri::Protocol::Tcp as i32,
    }
}

/// Port mappings of every container port that asks for a host port.
pub fn port_mappings(pod: &Pod) -> Vec<cri::PortMapping> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.unwrap_or(0) > 0)
        .map(|p| cri::PortMapping {
            protocol: protocol(p.protocol.as_deref()),
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: p.host_ip.clone().unwrap_or_default(),
        })
        .collect()
}

fn pod_security_context(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref().and_then(|s| s.security_context.as_ref())
}

fn all_containers(pod: &Pod) -> impl Iterator<Item = &Container> {
    pod.spec.iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    })
}

fn has_privileged_container(pod: &Pod) -> bool {
    all_containers(pod).any(|c| {
        c.security_context
            .as_ref()
            .and_then(|s| s.privileged)
            .unwrap_or(false)
    })
}

fn seccomp_profile(
    pod_sc: Option<&PodSecurityContext>,
    sc: Option<&SecurityContext>,
) -> cri::SecurityProfile {
    let profile = sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .or_else(|| pod_sc.and_then(|s| s.seccomp_profile.as_ref()));
    match profile {
        Some(p) if p.type_ == "RuntimeDefault" => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        },
        Some(p) if p.type_ == "Localhost" => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::Localhost as i32,
            localhost_ref: p.localhost_profile.clone().unwrap_or_default(),
        },
        // Go's default without the SeccompDefault feature: unconfined.
        _ => cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::Unconfined as i32,
            localhost_ref: String::new(),
        },
    }
}

fn supplemental_groups(pod_sc: Option<&PodSecurityContext>) -> Vec<i64> {
    let mut groups: Vec<i64> = pod_sc
        .and_then(|s| s.supplemental_groups.clone())
        .unwrap_or_default();
    if let Some(fs_group) = pod_sc.and_then(|s| s.fs_group) {
        if !groups.contains(&fs_group) {
            groups.push(fs_group);
        }
    }
    groups
}

/// The CRI sandbox config for a pod (Go `generatePodSandboxConfig` +
/// `generatePodSandboxLinuxConfig`).
pub fn sandbox_config(config: &SandboxConfig) -> cri::PodSandboxConfig {
    let pod = &config.pod;
    let r = pod_ref_of(pod);
    let pod_sc = pod_security_context(pod);
    let sysctls = pod_sc
        .and_then(|s| s.sysctls.as_ref())
        .map(|v| {
            v.iter()
                .map(|s| (s.name.clone(), s.value.clone()))
                .collect()
        })
        .unwrap_or_default();
    let security_context = cri::LinuxSandboxSecurityContext {
        namespace_options: Some(namespace_options(pod)),
        run_as_user: pod_sc
            .and_then(|s| s.run_as_user)
            .map(|value| cri::Int64Value { value }),
        run_as_group: pod_sc
            .and_then(|s| s.run_as_group)
            .map(|value| cri::Int64Value { value }),
        supplemental_groups: supplemental_groups(pod_sc),
        privileged: has_privileged_container(pod),
        seccomp: Some(seccomp_profile(pod_sc, None)),
        ..Default::default()
    };
    cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: r.name,
            uid: r.uid,
            namespace: r.namespace,
            attempt: config.attempt,
        }),
        // As Go: a hostNetwork pod keeps the node's UTS namespace and hostname.
        hostname: if kubelet_core::pod::host_network(pod) {
            String::new()
        } else {
            config.hostname.clone()
        },
        log_directory: config.log_directory.to_string_lossy().into_owned(),
        dns_config: config.dns.as_ref().map(|d| cri::DnsConfig {
            servers: d.servers.clone(),
            searches: d.searches.clone(),
            options: d.options.clone(),
        }),
        port_mappings: port_mappings(pod),
        labels: sandbox_labels(pod),
        annotations: pod
            .metadata
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        linux: Some(cri::LinuxPodSandboxConfig {
            cgroup_parent: config.cgroup_parent.clone().unwrap_or_default(),
            security_context: Some(security_context),
            sysctls,
            ..Default::default()
        }),
        windows: None,
    }
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
/// request (the limit when no request), quota/period from the cpu limit, the memory limit, and
/// the (non-negative) OOM score adjustment.
pub fn container_resources(
    pod: &Pod,
    container: &Container,
    memory_capacity: i64,
) -> Result<cri::LinuxContainerResources, RuntimeError> {
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
    if cpu_limit > 0 {
        resources.cpu_period = QUOTA_PERIOD;
        resources.cpu_quota = milli_cpu_to_quota(cpu_limit, QUOTA_PERIOD);
    }
    Ok(resources)
}

/// The user an image runs as, from CRI ImageStatus (`uid` when numeric, else `username`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageUser {
    /// Numeric uid, when the image's user is numeric (or empty: 0).
    pub uid: Option<i64>,
    /// User name, when the image's user is a name.
    pub username: String,
}

/// The container's security context merged over the pod's (Go
/// `determineEffectiveSecurityContext`), with the runAsNonRoot check (`verifyRunAsNonRoot`).
pub fn container_security_context(
    pod: &Pod,
    container: &Container,
    image_user: &ImageUser,
) -> Result<cri::LinuxContainerSecurityContext, RuntimeError> {
    let pod_sc = pod_security_context(pod);
    let sc = container.security_context.as_ref();
    let run_as_user = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user));
    let run_as_group = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group));
    let run_as_non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);

    if run_as_non_root {
        verify_run_as_non_root(&container.name, run_as_user, image_user)?;
    }

    let mut out = cri::LinuxContainerSecurityContext {
        privileged,
        namespace_options: Some(namespace_options(pod)),
        run_as_group: run_as_group.map(|value| cri::Int64Value { value }),
        readonly_rootfs: sc
            .and_then(|s| s.read_only_root_filesystem)
            .unwrap_or(false),
        supplemental_groups: supplemental_groups(pod_sc),
        no_new_privs: sc
            .and_then(|s| s.allow_privilege_escalation)
            .map(|allow| !allow)
            .unwrap_or(false),
        seccomp: Some(seccomp_profile(pod_sc, sc)),
        ..Default::default()
    };
    match (run_as_user, image_user.uid) {
        (Some(value), _) | (None, Some(value)) => {
            out.run_as_user = Some(cri::Int64Value { value });
        }
        (None, None) => out.run_as_username = image_user.username.clone(),
    }
    if let Some(caps) = sc.and_then(|s| s.capabilities.as_ref()) {
        out.capabilities = Some(cri::Capability {
            add_capabilities: caps.add.clone().unwrap_or_default(),
            drop_capabilities: caps.drop.clone().unwrap_or_default(),
            add_ambient_capabilities: Vec::new(),
        });
    }
    Ok(out)
}

fn verify_run_as_non_root(
    container: &str,
    run_as_user: Option<i64>,
    image_user: &ImageUser,
) -> Result<(), RuntimeError> {
    let fail = |message: String| RuntimeError::InvalidInput {
        what: format!("container {container:?} securityContext.runAsNonRoot"),
        message,
    };
    if let Some(uid) = run_as_user {
        if uid == 0 {
            return Err(fail("container's runAsUser breaks non-root policy".into()));
        }
        return Ok(());
    }
    match image_user.uid {
        Some(0) => Err(fail("container has runAsNonRoot and image will run as root".into())),
        Some(_) => Ok(()),
        None if !image_user.username.is_empty() => Err(fail(format!(
            "container has runAsNonRoot and image has non-numeric user ({}), cannot verify user is non-root",
            image_user.username
        ))),
        None => Err(fail(
            "container has runAsNonRoot and the image's user is unknown".into(),
        )),
    }
}

fn propagation(p: MountPropagation) -> i32 {
    match p {
        MountPropagation::Private => cri::MountPropagation::PropagationPrivate as i32,
        MountPropagation::HostToContainer => {
            cri::MountPropagation::PropagationHostToContainer as i32
        }
        MountPropagation::Bidirectional => cri::MountPropagation::PropagationBidirectional as i32,
    }
}

/// The CRI container config (Go `generateContainerConfig` + `generateLinuxContainerConfig`).
pub fn container_config(
    config: &ContainerConfig,
    image_user: &ImageUser,
    memory_capacity: i64,
) -> Result<cri::ContainerConfig, RuntimeError> {
    let c = &config.container;
    let resources = container_resources(&config.pod, c, memory_capacity)?;
    let security_context = container_security_context(&config.pod, c, image_user)?;
    Ok(cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: c.name.clone(),
            attempt: config.restart_count,
        }),
        image: Some(cri::ImageSpec {
            image: config.image_ref.clone(),
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command: config.command.clone(),
        args: config.args.clone(),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: config
            .env
            .iter()
            .map(|e| cri::KeyValue {
                key: e.name.clone(),
                value: e.value.clone(),
            })
            .collect(),
        mounts: config
            .mounts
            .iter()
            .map(|m| cri::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.to_string_lossy().into_owned(),
                readonly: m.read_only,
                propagation: propagation(m.propagation),
                ..Default::default()
            })
            .collect(),
        labels: container_labels(&config.pod, &c.name),
        annotations: container_annotations(config),
        log_path: config.log_path.to_string_lossy().into_owned(),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(cri::LinuxContainerConfig {
            resources: Some(resources),
            security_context: Some(security_context),
        }),
        ..Default::default()
    })
}

/// Maps a CRI sandbox state.
pub fn sandbox_state(state: i32) -> SandboxState {
    if state == cri::PodSandboxState::SandboxReady as i32 {
        SandboxState::Ready
    } else {
        SandboxState::NotReady
    }
}

/// Maps a CRI container state.
pub fn container_state(state: i32) -> ContainerState {
    match cri::ContainerState::try_from(state) {
        Ok(cri::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(cri::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(cri::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    }
}

/// A listed sandbox; `None` when it carries no kubelet labels.
pub fn sandbox_summary(s: &cri::PodSandbox) -> Option<SandboxSummary> {
    let pod = pod_ref_from_labels(&s.labels)?;
    Some(SandboxSummary {
        id: s.id.clone(),
        pod,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        state: sandbox_state(s.state),
        created_at: s.created_at,
    })
}

/// A sandbox status; `None` when it carries no kubelet labels.
pub fn sandbox_status(s: &cri::PodSandboxStatus) -> Option<SandboxStatus> {
    let mut pod = pod_ref_from_labels(&s.labels)?;
    if let Some(m) = s.metadata.as_ref() {
        if pod.name.is_empty() {
            pod.name = m.name.clone();
        }
        if pod.namespace.is_empty() {
            pod.namespace = m.namespace.clone();
        }
    }
    let network = s.network.as_ref();
    let host_network = s
        .linux
        .as_ref()
        .and_then(|l| l.namespaces.as_ref())
        .and_then(|n| n.options.as_ref())
        .map(|o| o.network == cri::NamespaceMode::Node as i32)
        .unwrap_or(false);
    Some(SandboxStatus {
        id: s.id.clone(),
        pod,
        attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        state: sandbox_state(s.state),
        created_at: s.created_at,
        ip: network.map(|n| n.ip.clone()).filter(|ip| !ip.is_empty()),
        additional_ips: network
            .map(|n| {
                n.additional_ips
                    .iter()
                    .map(|ip| ip.ip.clone())
                    .filter(|ip| !ip.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        host_network,
    })
}

/// A listed container; `None` when it carries no kubelet labels.
pub fn container_summary(c: &cri::Container) -> Option<ContainerSummary> {
    let pod = pod_ref_from_labels(&c.labels)?;
    let name = c
        .labels
        .get(CONTAINER_NAME_LABEL)
        .cloned()
        .or_else(|| c.metadata.as_ref().map(|m| m.name.clone()))?;
    Some(ContainerSummary {
        id: c.id.clone(),
        sandbox_id: c.pod_sandbox_id.clone(),
        pod,
        name,
        attempt: c.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
        hash: hash_from_annotations(&c.annotations),
        image: c
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default(),
        image_ref: c.image_ref.clone(),
        state: container_state(c.state),
        created_at: c.created_at,
    })
}

/// A container status; `None` when it carries no kubelet labels. `sandbox_id` comes from the
/// caller (CRI's status does not carry it).
pub fn container_status(s: &cri::ContainerStatus, sandbox_id: &str) -> Option<ContainerStatus> {
    let pod = pod_ref_from_labels(&s.labels)?;
    let name = s
        .labels
        .get(CONTAINER_NAME_LABEL)
        .cloned()
        .or_else(|| s.metadata.as_ref().map(|m| m.name.clone()))?;
    Some(ContainerStatus {
        summary: ContainerSummary {
            id: s.id.clone(),
            sandbox_id: sandbox_id.to_string(),
            pod,
            name,
            attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
            hash: hash_from_annotations(&s.annotations),
            image: s
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            image_ref: s.image_ref.clone(),
            state: container_state(s.state),
            created_at: s.created_at,
        },
        started_at: s.started_at,
        finished_at: s.finished_at,
        exit_code: s.exit_code,
        reason: s.reason.clone(),
        message: s.message.clone(),
        log_path: (!s.log_path.is_empty()).then(|| s.log_path.clone().into()),
    })
}

/// The legacy `/var/log/containers` symlink name for a container (Go `logSymlink`):
/// `<pod>_<namespace>_<container>-<id>.log`, cut to 255 bytes.
pub fn log_symlink_name(pod: &str, namespace: &str, container: &str, id: &str) -> String {
    const SUFFIX: &str = ".log";
    const MAX: usize = 255;
    let mut base = format!("{pod}_{namespace}_{container}-{id}");
    if base.len() > MAX - SUFFIX.len() {
        let mut cut = MAX - SUFFIX.len();
        while !base.is_char_boundary(cut) {
            cut -= 1;
        }
        base.truncate(cut);
    }
    base.push_str(SUFFIX);
    base
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        Capabilities, ContainerPort, PodSpec, ResourceRequirements, Sysctl,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kubelet_core::runtime::{ContainerKind, DnsConfig, EnvVar, Mount};

    const GI: i64 = 1 << 30;

    fn res(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        (!pairs.is_empty()).then(|| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect()
        })
    }

    fn container(name: &str, req: &[(&str, &str)], lim: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            image: Some("kubelet-rs.local/busybox:1.0".into()),
            resources: Some(ResourceRequirements {
                requests: res(req),
                limits: res(lim),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod_with(containers: Vec<Container>, spec: PodSpec) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("prod".into()),
                uid: Some("uid-1".into()),
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                annotations: Some(BTreeMap::from([("note".to_string(), "x".to_string())])),
                ..Default::default()
            },
            spec: Some(PodSpec { containers, ..spec }),
            ..Default::default()
        }
    }

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
            let r = container_resources(&pod, &c, 4 * GI).unwrap();
            assert_eq!(r.cpu_shares, shares, "case {i}");
            assert_eq!(r.cpu_quota, quota, "case {i}");
            assert_eq!(r.cpu_period, period, "case {i}");
            assert_eq!(r.memory_limit_in_bytes, mem, "case {i}");
            assert!(r.oom_score_adj >= 0, "case {i}");
        }
        let bad = container("a", &[("cpu", "lots")], &[]);
        let pod = pod_with(vec![bad.clone()], PodSpec::default());
        assert!(matches!(
            container_resources(&pod, &bad, GI),
            Err(RuntimeError::InvalidInput { .. })
        ));
    }

    #[test]
    fn namespace_options_table() {
        use cri::NamespaceMode::*;
        let cases = [
            // host_network, host_pid, host_ipc, share_pid -> (net, pid, ipc)
            ((false, false, false, false), (Pod, Container, Pod)),
            ((true, false, false, false), (Node, Container, Pod)),
            ((false, true, false, false), (Pod, Node, Pod)),
            ((false, false, true, false), (Pod, Container, Node)),
            ((false, false, false, true), (Pod, Pod, Pod)),
            ((true, true, true, false), (Node, Node, Node)),
        ];
        for ((hn, hp, hi, sp), (net, pid, ipc)) in cases {
            let pod = pod_with(
                vec![],
                PodSpec {
                    host_network: Some(hn),
                    host_pid: Some(hp),
                    host_ipc: Some(hi),
                    share_process_namespace: Some(sp),
                    ..Default::default()
                },
            );
            let o = namespace_options(&pod);
            assert_eq!(
                (o.network, o.pid, o.ipc),
                (net as i32, pid as i32, ipc as i32),
                "{hn} {hp} {hi} {sp}"
            );
        }
        // Nothing set: pid is CONTAINER, explicitly (not the zero value POD).
        let o = namespace_options(&k8s_openapi::api::core::v1::Pod::default());
        assert_eq!(o.pid, Container as i32);
    }

    fn sandbox_cfg(pod: Pod) -> SandboxConfig {
        SandboxConfig {
            pod: Arc::new(pod),
            attempt: 2,
            hostname: "web".into(),
            log_directory: PathBuf::from("/var/log/pods/prod_web_uid-1"),
            cgroup_parent: Some("/kubelet-rs-test/poduid-1".into()),
            dns: Some(DnsConfig {
                servers: vec!["10.0.0.10".into()],
                searches: vec!["prod.svc".into()],
                options: vec!["ndots:5".into()],
            }),
        }
    }

    #[test]
    fn sandbox_config_maps_pod() {
        let mut c = container("app", &[], &[]);
        c.ports = Some(vec![
            ContainerPort {
                container_port: 80,
                host_port: Some(8080),
                protocol: Some("TCP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 53,
                host_port: Some(5353),
                protocol: Some("UDP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 9090,
                ..Default::default()
            },
        ]);
        let mut priv_c = container("priv", &[], &[]);
        priv_c.security_context = Some(SecurityContext {
            privileged: Some(true),
            ..Default::default()
        });
        let pod = pod_with(
            vec![c, priv_c],
            PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_user: Some(1000),
                    run_as_group: Some(2000),
                    fs_group: Some(3000),
                    sysctls: Some(vec![Sysctl {
                        name: "net.ipv4.ip_unprivileged_port_start".into(),
                        value: "0".into(),
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let cfg = sandbox_config(&sandbox_cfg(pod));
        let md = cfg.metadata.unwrap();
        assert_eq!(
            (
                md.name.as_str(),
                md.namespace.as_str(),
                md.uid.as_str(),
                md.attempt
            ),
            ("web", "prod", "uid-1", 2)
        );
        assert_eq!(cfg.hostname, "web");
        assert_eq!(cfg.log_directory, "/var/log/pods/prod_web_uid-1");
        assert_eq!(cfg.dns_config.unwrap().servers, vec!["10.0.0.10"]);
        assert_eq!(cfg.port_mappings.len(), 2);
        assert_eq!(cfg.port_mappings[1].protocol, cri::Protocol::Udp as i32);
        assert_eq!(cfg.port_mappings[0].host_port, 8080);
        assert_eq!(cfg.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(
            cfg.labels.get(POD_UID_LABEL).map(String::as_str),
            Some("uid-1")
        );
        assert_eq!(cfg.annotations.get("note").map(String::as_str), Some("x"));
        let linux = cfg.linux.unwrap();
        assert_eq!(linux.cgroup_parent, "/kubelet-rs-test/poduid-1");
        assert_eq!(
            linux
                .sysctls
                .get("net.ipv4.ip_unprivileged_port_start")
                .map(String::as_str),
            Some("0")
        );
        let sc = linux.security_context.unwrap();
        assert!(sc.privileged);
        assert_eq!(sc.run_as_user.unwrap().value, 1000);
        assert_eq!(sc.run_as_group.unwrap().value, 2000);
        assert_eq!(sc.supplemental_groups, vec![3000]);
        assert_eq!(
            sc.namespace_options.unwrap().pid,
            cri::NamespaceMode::Container as i32
        );

        // hostNetwork: no hostname (the node's UTS namespace), network NODE.
        let host = pod_with(
            vec![],
            PodSpec {
                host_network: Some(true),
                ..Default::default()
            },
        );
        let cfg = sandbox_config(&sandbox_cfg(host));
        assert_eq!(cfg.hostname, "");
        let opts = cfg
            .linux
            .unwrap()
            .security_context
            .unwrap()
            .namespace_options
            .unwrap();
        assert_eq!(opts.network, cri::NamespaceMode::Node as i32);
    }

    fn container_cfg(pod: Pod, c: Container) -> ContainerConfig {
        ContainerConfig {
            pod: Arc::new(pod),
            container: c,
            kind: ContainerKind::Regular,
            restart_count: 3,
            hash: 0xdead_beef_0123_4567,
            image_ref: "sha256:abc".into(),
            command: vec!["sh".into()],
            args: vec!["-c".into(), "echo hi".into()],
            env: vec![EnvVar {
                name: "A".into(),
                value: "1".into(),
            }],
            mounts: vec![Mount {
                container_path: "/data".into(),
                host_path: "/tmp/data".into(),
                read_only: true,
                propagation: MountPropagation::HostToContainer,
            }],
            log_path: PathBuf::from("app/3.log"),
        }
    }

    #[test]
    fn container_config_labels_annotations_round_trip() {
        let mut c = container("app", &[], &[]);
        c.ports = Some(vec![ContainerPort {
            container_port: 80,
            name: Some("http".into()),
            ..Default::default()
        }]);
        c.working_dir = Some("/work".into());
        c.tty = Some(true);
        let pod = pod_with(
            vec![c.clone()],
            PodSpec {
                termination_grace_period_seconds: Some(7),
                ..Default::default()
            },
        );
        let cfg = container_cfg(pod, c);
        let out = container_config(&cfg, &ImageUser::default(), 4 * GI).unwrap();
        assert_eq!(out.metadata.as_ref().unwrap().attempt, 3);
        assert_eq!(out.image.as_ref().unwrap().image, "sha256:abc");
        assert_eq!(out.command, vec!["sh"]);
        assert_eq!(out.args, vec!["-c", "echo hi"]);
        assert_eq!(out.envs[0].key, "A");
        assert_eq!(out.mounts[0].host_path, "/tmp/data");
        assert!(out.mounts[0].readonly);
        assert_eq!(
            out.mounts[0].propagation,
            cri::MountPropagation::PropagationHostToContainer as i32
        );
        assert_eq!(out.working_dir, "/work");
        assert_eq!(out.log_path, "app/3.log");
        assert!(out.tty);
        let a = &out.annotations;
        assert_eq!(a[CONTAINER_HASH_ANNOTATION], "deadbeef01234567");
        assert_eq!(a[CONTAINER_RESTART_COUNT_ANNOTATION], "3");
        assert_eq!(
            a[CONTAINER_TERMINATION_MESSAGE_PATH_ANNOTATION],
            "/dev/termination-log"
        );
        assert_eq!(a[CONTAINER_TERMINATION_MESSAGE_POLICY_ANNOTATION], "File");
        assert_eq!(a[POD_TERMINATION_GRACE_PERIOD_ANNOTATION], "7");
        let ports: Vec<ContainerPort> =
            serde_json::from_str(&a[CONTAINER_PORTS_ANNOTATION]).unwrap();
        assert_eq!(ports[0].container_port, 80);

        // Round trip through a listing.
        let listed = cri::Container {
            id: "cid".into(),
            pod_sandbox_id: "sid".into(),
            metadata: out.metadata.clone(),
            image: out.image.clone(),
            image_ref: "sha256:abc".into(),
            state: cri::ContainerState::ContainerRunning as i32,
            created_at: 42,
            labels: out.labels.clone(),
            annotations: out.annotations.clone(),
            image_id: String::new(),
        };
        let s = container_summary(&listed).unwrap();
        assert_eq!(s.hash, cfg.hash);
        assert_eq!(s.name, "app");
        assert_eq!(s.attempt, 3);
        assert_eq!(s.state, ContainerState::Running);
        assert_eq!(
            s.pod,
            PodRef {
                uid: "uid-1".into(),
                name: "web".into(),
                namespace: "prod".into()
            }
        );
        // Objects without kubelet labels are not ours.
        let foreign = cri::Container {
            labels: HashMap::new(),
            ..listed
        };
        assert!(container_summary(&foreign).is_none());
    }

    /// (pod runAsNonRoot, pod runAsUser, container runAsUser, image user, accepted, uid sent)
    type NonRootCase<'a> = (
        Option<bool>,
        Option<i64>,
        Option<i64>,
        &'a ImageUser,
        bool,
        Option<i64>,
    );

    #[test]
    fn security_context_merge_and_non_root_table() {
        let root = ImageUser {
            uid: Some(0),
            username: String::new(),
        };
        let named = ImageUser {
            uid: None,
            username: "app".into(),
        };
        let uid_1000 = ImageUser {
            uid: Some(1000),
            username: String::new(),
        };
        // (pod runAsNonRoot, pod runAsUser, container runAsUser, image user, ok, effective uid)
        let cases: Vec<NonRootCase> = vec![
            (None, None, None, &root, true, Some(0)),
            (Some(true), None, None, &root, false, None),
            (Some(true), None, None, &named, false, None),
            (Some(true), None, None, &uid_1000, true, Some(1000)),
            (Some(true), Some(1000), None, &root, true, Some(1000)),
            (Some(true), Some(1000), Some(0), &root, false, None),
            (None, Some(5), Some(6), &root, true, Some(6)),
            (None, None, None, &named, true, None),
        ];
        for (i, (non_root, pod_uid, c_uid, image, ok, uid)) in cases.into_iter().enumerate() {
            let mut c = container("app", &[], &[]);
            c.security_context = Some(SecurityContext {
                run_as_user: c_uid,
                allow_privilege_escalation: Some(false),
                capabilities: Some(Capabilities {
                    add: Some(vec!["NET_ADMIN".into()]),
                    drop: Some(vec!["ALL".into()]),
                }),
                read_only_root_filesystem: Some(true),
                ..Default::default()
            });
            let pod = pod_with(
                vec![c.clone()],
                PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: non_root,
                        run_as_user: pod_uid,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            );
            let got = container_security_context(&pod, &c, image);
            assert_eq!(got.is_ok(), ok, "case {i}: {got:?}");
            if let Ok(sc) = got {
                assert_eq!(sc.run_as_user.map(|v| v.value), uid, "case {i}");
                if uid.is_none() {
                    assert_eq!(sc.run_as_username, image.username, "case {i}");
                }
                assert!(sc.no_new_privs);
                assert!(sc.readonly_rootfs);
                let caps = sc.capabilities.unwrap();
                assert_eq!(caps.add_capabilities, vec!["NET_ADMIN"]);
                assert_eq!(caps.drop_capabilities, vec!["ALL"]);
                assert_eq!(
                    sc.namespace_options.unwrap().pid,
                    cri::NamespaceMode::Container as i32
                );
            }
        }
        // allowPrivilegeEscalation unset: no_new_privs false (Go's AddNoNewPrivileges).
        let c = container("app", &[], &[]);
        let pod = pod_with(vec![c.clone()], PodSpec::default());
        let sc = container_security_context(&pod, &c, &root).unwrap();
        assert!(!sc.no_new_privs);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            cri::security_profile::ProfileType::Unconfined as i32
        );
    }

    #[test]
    fn status_mapping_table() {
        let states = [
            (0, ContainerState::Created),
            (1, ContainerState::Running),
            (2, ContainerState::Exited),
            (3, ContainerState::Unknown),
            (99, ContainerState::Unknown),
        ];
        for (raw, want) in states {
            assert_eq!(container_state(raw), want);
        }
        assert_eq!(sandbox_state(0), SandboxState::Ready);
        assert_eq!(sandbox_state(1), SandboxState::NotReady);

        let labels = container_labels(&pod_with(vec![], PodSpec::default()), "app");
        let status = cri::ContainerStatus {
            id: "cid".into(),
            metadata: Some(cri::ContainerMetadata {
                name: "app".into(),
                attempt: 1,
            }),
            state: 2,
            created_at: 1,
            started_at: 2,
            finished_at: 3,
            exit_code: 3,
            reason: "Error".into(),
            message: "boom".into(),
            labels,
            annotations: HashMap::from([(CONTAINER_HASH_ANNOTATION.into(), "ff".into())]),
            log_path: "/var/log/pods/x/app/1.log".into(),
            ..Default::default()
        };
        let s = container_status(&status, "sid").unwrap();
        assert_eq!(s.summary.state, ContainerState::Exited);
        assert_eq!(s.summary.hash, 255);
        assert_eq!(s.summary.sandbox_id, "sid");
        assert_eq!((s.started_at, s.finished_at, s.exit_code), (2, 3, 3));
        assert_eq!(s.reason, "Error");
        assert_eq!(s.log_path, Some(PathBuf::from("/var/log/pods/x/app/1.log")));

        let sandbox = cri::PodSandboxStatus {
            id: "sid".into(),
            metadata: Some(cri::PodSandboxMetadata {
                name: "web".into(),
                uid: "uid-1".into(),
                namespace: "prod".into(),
                attempt: 1,
            }),
            state: 0,
            created_at: 9,
            network: Some(cri::PodSandboxNetworkStatus {
                ip: "10.88.0.5".into(),
                additional_ips: vec![cri::PodIp {
                    ip: "fd00::5".into(),
                }],
            }),
            linux: Some(cri::LinuxPodSandboxStatus {
                namespaces: Some(cri::Namespace {
                    options: Some(cri::NamespaceOption {
                        network: cri::NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                }),
            }),
            labels: sandbox_labels(&pod_with(vec![], PodSpec::default())),
            ..Default::default()
        };
        let s = sandbox_status(&sandbox).unwrap();
        assert_eq!(s.ip.as_deref(), Some("10.88.0.5"));
        assert_eq!(s.additional_ips, vec!["fd00::5"]);
        assert!(s.host_network);
        assert_eq!(s.attempt, 1);
        assert_eq!(s.state, SandboxState::Ready);
    }

    #[test]
    fn log_symlink_names() {
        assert_eq!(
            log_symlink_name("web", "prod", "app", "abc"),
            "web_prod_app-abc.log"
        );
        let long = "x".repeat(300);
        let name = log_symlink_name(&long, "ns", "c", "id");
        assert_eq!(name.len(), 255);
        assert!(name.ends_with(".log"));
    }
}
