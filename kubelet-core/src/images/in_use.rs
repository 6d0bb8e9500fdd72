//! The images the node's pods name, as image garbage collection protects them.
//!
//! Go's image GC counts an image as in use only while a container of it exists
//! (`imagesInUse`), and is kept from removing the images of pods that are about to start by
//! timing alone: its first collection fails for want of stats, the next is five minutes
//! later. kubelet-rs protects them by construction: an image that a pod which may still
//! start containers names in its spec — a container, an init container (sidecars are init
//! containers) or an ephemeral container — is in use whether or not a container of it
//! exists yet ([`ImageRefs::of_pods`], over the pods [`may_start_containers`] selects).
//! The runtime's sandbox image is protected as pinned (CRI's `pinned`, and the kubelet's
//! `--pod-infra-container-image`).
//!
//! References are compared normalized as the runtime stores them ([`normalize`]): `busybox`
//! is `docker.io/library/busybox:latest`, a digest reference is `repository@digest` (a tag
//! beside a digest is dropped, as containerd's `ParseDockerRef` drops it), and an image id
//! (`sha256:…`) is itself.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::Pod;

use crate::keyring::image_name;
use crate::runtime::ImageInfo;

/// An image reference normalized as the runtime lists it (see the module docs); a reference
/// that is not valid stays as it is (it can then only match itself).
pub fn normalize(image: &str) -> String {
    let image = image.trim();
    if image.starts_with("sha256:") {
        return image.to_string();
    }
    let Ok(repository) = image_name::repository(image) else {
        return image.to_string();
    };
    if let Some((_, digest)) = image.split_once('@') {
        return format!("{repository}@{digest}");
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) if !tag.is_empty() => format!("{repository}:{tag}"),
        _ => format!("{repository}:latest"),
    }
}

/// A set of normalized image references. See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageRefs(HashSet<String>);

impl ImageRefs {
    /// The set of `refs`, normalized; empty ones are left out.
    pub fn new<'a>(refs: impl IntoIterator<Item = &'a str>) -> Self {
        ImageRefs(
            refs.into_iter()
                .filter(|r| !r.trim().is_empty())
                .map(normalize)
                .collect(),
        )
    }

    /// Every image the pods' specs name: containers, init containers (sidecars included)
    /// and ephemeral containers.
    pub fn of_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        let mut refs = Vec::new();
        for p in pods {
            let Some(spec) = p.spec.as_ref() else {
                continue;
            };
            let containers = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .map(|c| c.image.as_deref());
            let ephemeral = spec
                .ephemeral_containers
                .iter()
                .flatten()
                .map(|c| c.image.as_deref());
            refs.extend(containers.chain(ephemeral).flatten());
        }
        Self::new(refs)
    }

    /// Whether the set names `image`: its id, one of its tags or one of its digests.
    pub fn matches(&self, image: &ImageInfo) -> bool {
        !self.0.is_empty()
            && (self.0.contains(&image.id)
                || image
                    .repo_tags
                    .iter()
                    .chain(&image.repo_digests)
                    .any(|r| self.0.contains(&normalize(r))))
    }

    /// How many references the set holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether the kubelet may still start containers of `p`: it is not being deleted and has
/// not reached a terminal phase (`is_terminal`, the status manager's word). A pod that is
/// terminating keeps the images of its containers through the containers themselves.
pub fn may_start_containers(p: &Pod, is_terminal: impl Fn(&str) -> bool) -> bool {
    !crate::pod::is_deleted(p) && !is_terminal(crate::pod::uid(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{container, pod};
    use k8s_openapi::api::core::v1::{Container, EphemeralContainer};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn info(id: &str, tags: &[&str], digests: &[&str]) -> ImageInfo {
        ImageInfo {
            id: id.into(),
            repo_tags: tags.iter().map(|s| s.to_string()).collect(),
            repo_digests: digests.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn references_normalize_as_the_runtime_stores_them() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        for (image, want) in [
            ("busybox", "docker.io/library/busybox:latest".to_string()),
            ("busybox:1.36", "docker.io/library/busybox:1.36".into()),
            (
                "docker.io/library/busybox:1.36",
                "docker.io/library/busybox:1.36".into(),
            ),
            ("library/busybox", "docker.io/library/busybox:latest".into()),
            ("localhost:5000/a/b", "localhost:5000/a/b:latest".into()),
            ("localhost:5000/a/b:v2", "localhost:5000/a/b:v2".into()),
            (
                "kubelet-rs.local/busybox:1.0",
                "kubelet-rs.local/busybox:1.0".into(),
            ),
            (
                &format!("quay.io/x/y@{digest}"),
                format!("quay.io/x/y@{digest}"),
            ),
            // A tag beside a digest is dropped.
            (
                &format!("quay.io/x/y:t@{digest}"),
                format!("quay.io/x/y@{digest}"),
            ),
            (digest, digest.into()),
            // Invalid: itself.
            ("Not/Valid", "Not/Valid".into()),
        ] {
            assert_eq!(normalize(image), want, "{image}");
        }
    }

    #[test]
    fn images_named_by_tag_by_digest_or_by_id_match() {
        let digest = "sha256:aaaa";
        let listed = info(
            "sha256:1111",
            &["docker.io/library/busybox:1.36"],
            &[&format!("docker.io/library/busybox@{digest}")],
        );
        let other = info("sha256:2222", &["docker.io/library/busybox:1.37"], &[]);
        for (refs, want) in [
            (vec!["busybox:1.36"], true),
            (vec!["docker.io/library/busybox:1.36"], true),
            (vec!["busybox"], false),
            (vec!["busybox:1.37"], false),
            (vec![&format!("busybox@{digest}") as &str], true),
            (vec![&format!("busybox:9@{digest}") as &str], true),
            (vec!["sha256:1111"], true),
            (vec![], false),
        ] {
            let set = ImageRefs::new(refs.iter().copied());
            assert_eq!(set.matches(&listed), want, "{refs:?}");
        }
        assert!(!ImageRefs::new(["busybox:1.36"]).matches(&other));
    }

    #[test]
    fn a_pod_names_its_containers_init_containers_and_ephemeral_containers() {
        let mut p = pod("p", "u1", vec![container("app", "app:1")]);
        let spec = p.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![
            container("init", "init:1"),
            Container {
                restart_policy: Some("Always".into()),
                ..container("sidecar", "sidecar:1")
            },
        ]);
        spec.ephemeral_containers = Some(vec![EphemeralContainer {
            name: "debug".into(),
            image: Some("debug:1".into()),
            ..Default::default()
        }]);
        let refs = ImageRefs::of_pods([&p]);
        assert_eq!(refs.len(), 4);
        for tag in ["app:1", "init:1", "sidecar:1", "debug:1"] {
            let image = info("x", &[&format!("docker.io/library/{tag}")], &[]);
            assert!(refs.matches(&image), "{tag}");
        }
        assert!(!refs.matches(&info("x", &["docker.io/library/other:1"], &[])));
    }

    #[test]
    fn pods_that_may_still_start_containers() {
        let desired = pod("p", "u1", vec![container("app", "app:1")]);
        let mut deleted = pod("d", "u2", vec![container("app", "app:1")]);
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let never_terminal = |_: &str| false;
        // Desired but not yet started: protected (no container needs to exist).
        assert!(may_start_containers(&desired, never_terminal));
        // Being deleted: it starts nothing more; its containers protect their images.
        assert!(!may_start_containers(&deleted, never_terminal));
        // Terminal (completed or failed): nothing more starts.
        assert!(!may_start_containers(&desired, |uid| uid == "u1"));
    }
}
