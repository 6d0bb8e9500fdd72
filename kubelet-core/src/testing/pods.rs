//! The tests' shared vocabulary: builders for pods and containers, and [`eventually`], the
//! one way a test waits for something (in virtual time on a paused tokio clock, in real time
//! otherwise).
//!
//! ```
//! use kubelet_core::testing::{ContainerBuilder, PodBuilder};
//!
//! let pod = PodBuilder::new("web", "uid-1")
//!     .namespace("demo")
//!     .restart_policy("Never")
//!     .container(
//!         ContainerBuilder::new("app", "busybox:1.36")
//!             .command(&["sh", "-c", "echo hi"])
//!             .env(&[("GREETING", "hi")])
//!             .requests(&[("cpu", "100m"), ("memory", "64Mi")])
//!             .build(),
//!     )
//!     .build();
//! assert_eq!(pod.spec.unwrap().containers[0].name, "app");
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, Pod, PodSpec, Probe, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A container with a name and an image (pull policy `IfNotPresent`).
pub fn container(name: &str, image: &str) -> Container {
    ContainerBuilder::new(name, image).build()
}

/// A pod in namespace "default" with the given uid and containers.
pub fn pod(name: &str, uid: &str, containers: Vec<Container>) -> Pod {
    containers
        .into_iter()
        .fold(PodBuilder::new(name, uid), PodBuilder::container)
        .build()
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// Builds a [`Pod`]: namespace "default", no containers until added.
#[derive(Debug, Clone)]
pub struct PodBuilder(Pod);

impl PodBuilder {
    /// A pod named `name` with uid `uid` in namespace "default".
    pub fn new(name: &str, uid: &str) -> Self {
        PodBuilder(Pod {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some("default".to_string()),
                uid: Some(uid.to_string()),
                ..Default::default()
            },
            spec: Some(PodSpec::default()),
            ..Default::default()
        })
    }

    fn spec_mut(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_with(PodSpec::default)
    }

    /// Sets the namespace.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an app container.
    pub fn container(mut self, c: Container) -> Self {
        self.spec_mut().containers.push(c);
        self
    }

    /// Adds an init container.
    pub fn init_container(mut self, c: Container) -> Self {
        self.spec_mut()
            .init_containers
            .get_or_insert_with(Vec::new)
            .push(c);
        self
    }

    /// Adds a volume.
    pub fn volume(mut self, v: Volume) -> Self {
        self.spec_mut().volumes.get_or_insert_with(Vec::new).push(v);
        self
    }

    /// Sets `spec.restartPolicy`.
    pub fn restart_policy(mut self, policy: &str) -> Self {
        self.spec_mut().restart_policy = Some(policy.to_string());
        self
    }

    /// Sets `spec.terminationGracePeriodSeconds`.
    pub fn grace_period(mut self, seconds: i64) -> Self {
        self.spec_mut().termination_grace_period_seconds = Some(seconds);
        self
    }

    /// Sets `spec.priority` (what the admission plugin resolves a priority class to).
    pub fn priority(mut self, priority: i32) -> Self {
        self.spec_mut().priority = Some(priority);
        self
    }

    /// Sets `spec.nodeName`.
    pub fn node_name(mut self, node: &str) -> Self {
        self.spec_mut().node_name = Some(node.to_string());
        self
    }

    /// Sets `spec.hostNetwork`.
    pub fn host_network(mut self, on: bool) -> Self {
        self.spec_mut().host_network = Some(on);
        self
    }

    /// Changes anything else in the spec.
    pub fn spec(mut self, f: impl FnOnce(&mut PodSpec)) -> Self {
        f(self.spec_mut());
        self
    }

    /// Changes anything in the whole pod.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.0
    }
}

/// Builds a [`Container`]: pull policy `IfNotPresent` unless changed.
#[derive(Debug, Clone)]
pub struct ContainerBuilder(Container);

impl ContainerBuilder {
    /// A container named `name` running `image`.
    pub fn new(name: &str, image: &str) -> Self {
        ContainerBuilder(Container {
            name: name.to_string(),
            image: Some(image.to_string()),
            image_pull_policy: Some("IfNotPresent".to_string()),
            ..Default::default()
        })
    }

    /// Sets the command.
    pub fn command(mut self, command: &[&str]) -> Self {
        self.0.command = Some(command.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Sets the args.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.0.args = Some(args.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Adds literal environment variables.
    pub fn env(mut self, pairs: &[(&str, &str)]) -> Self {
        let env = self.0.env.get_or_insert_with(Vec::new);
        env.extend(pairs.iter().map(|(k, v)| EnvVar {
            name: k.to_string(),
            value: Some(v.to_string()),
            ..Default::default()
        }));
        self
    }

    /// Sets resource requests, e.g. `&[("cpu", "100m")]`.
    pub fn requests(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .requests = Some(quantities(pairs));
        self
    }

    /// Sets resource limits.
    pub fn limits(mut self, pairs: &[(&str, &str)]) -> Self {
        self.0
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .limits = Some(quantities(pairs));
        self
    }

    /// Mounts volume `name` at `path`.
    pub fn mount(mut self, name: &str, path: &str) -> Self {
        self.0
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: name.to_string(),
                mount_path: path.to_string(),
                ..Default::default()
            });
        self
    }

    /// Sets the image pull policy.
    pub fn pull_policy(mut self, policy: &str) -> Self {
        self.0.image_pull_policy = Some(policy.to_string());
        self
    }

    /// Sets the readiness probe.
    pub fn readiness(mut self, probe: Probe) -> Self {
        self.0.readiness_probe = Some(probe);
        self
    }

    /// Sets the liveness probe.
    pub fn liveness(mut self, probe: Probe) -> Self {
        self.0.liveness_probe = Some(probe);
        self
    }

    /// Sets the startup probe.
    pub fn startup(mut self, probe: Probe) -> Self {
        self.0.startup_probe = Some(probe);
        self
    }

    /// Makes an init container a sidecar (`restartPolicy: Always`).
    pub fn sidecar(mut self) -> Self {
        self.0.restart_policy = Some("Always".to_string());
        self
    }

    /// Changes anything else.
    pub fn with(mut self, f: impl FnOnce(&mut Container)) -> Self {
        f(&mut self.0);
        self
    }

    /// The container.
    pub fn build(self) -> Container {
        self.0
    }
}

/// How often [`eventually`] checks again.
const POLL: Duration = Duration::from_millis(100);

/// Checks `check` every 100ms until it answers `Some`, and returns that; `None` once `limit`
/// has passed. Time is tokio's: on a paused clock the wait is virtual. The one polling loop
/// of every crate's tests ([`eventually`] is this with a panic).
pub async fn poll_until<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Checks `check` every 100ms until it answers `Some`, and returns that; panics after
/// `limit` naming `what`. Time is tokio's: on a paused clock the wait is virtual. This is the
/// tests' one way to wait for a condition.
///
/// # Panics
/// When `limit` passes first (it is a test helper).
#[allow(clippy::panic)]
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll_until(limit, check).await {
        Some(v) => v,
        None => panic!("timed out after {limit:?} waiting for: {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn eventually_waits_in_virtual_time() {
        let start = tokio::time::Instant::now();
        let v = eventually(Duration::from_secs(10), "three seconds", || async {
            (start.elapsed() >= Duration::from_secs(3)).then_some(7)
        })
        .await;
        assert_eq!(v, 7);
        assert!(start.elapsed() < Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 1s waiting for: never")]
    async fn eventually_names_what_it_waited_for() {
        eventually(Duration::from_secs(1), "never", || async { None::<()> }).await;
    }

    #[test]
    fn builders_set_what_they_say() {
        let p = PodBuilder::new("p", "u")
            .namespace("ns")
            .label("app", "x")
            .grace_period(3)
            .init_container(ContainerBuilder::new("side", "img").sidecar().build())
            .container(
                ContainerBuilder::new("c", "img")
                    .limits(&[("memory", "16Mi")])
                    .mount("data", "/data")
                    .build(),
            )
            .build();
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(p.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(spec.termination_grace_period_seconds, Some(3));
        assert_eq!(
            spec.init_containers.as_ref().unwrap()[0]
                .restart_policy
                .as_deref(),
            Some("Always")
        );
        let c = &spec.containers[0];
        assert_eq!(
            c.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"],
            Quantity("16Mi".into())
        );
        assert_eq!(c.volume_mounts.as_ref().unwrap()[0].mount_path, "/data");
        assert_eq!(pod("a", "b", vec![container("c", "i")]), {
            PodBuilder::new("a", "b")
                .container(ContainerBuilder::new("c", "i").build())
                .build()
        });
    }
}
