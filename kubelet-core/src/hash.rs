//! The container spec hash: a change of hash means the container must be re-created.

use k8s_openapi::api::core::v1::Container;
use sha2::{Digest, Sha256};

/// A stable 64-bit hash of a container spec (its canonical JSON form). Two specs that
/// serialize identically hash identically across kubelet restarts.
pub fn container_hash(container: &Container) -> u64 {
    let mut hasher = Sha256::new();
    // Serializing a k8s-openapi struct cannot fail (no maps with non-string keys); fall back
    // to the name alone if it ever did, which still yields a stable value.
    match serde_json::to_vec(container) {
        Ok(bytes) => hasher.update(&bytes),
        Err(_) => hasher.update(container.name.as_bytes()),
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_changes_with_spec_and_is_stable() {
        let a = Container {
            name: "web".into(),
            image: Some("busybox".into()),
            ..Default::default()
        };
        let mut b = a.clone();
        assert_eq!(container_hash(&a), container_hash(&b));
        b.image = Some("busybox:2".into());
        assert_ne!(container_hash(&a), container_hash(&b));
    }
}
