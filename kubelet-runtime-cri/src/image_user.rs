//! The user an image runs as (Go's `getImageUser`), asked of the runtime once per image id.
//!
//! An image id (`sha256:…`) names the image's content, and with it the configured user, which
//! therefore cannot change: [`ImageUsers`] keeps the answer per id, so creating a container
//! from an image already seen costs no second `ImageStatus` (the engine has just asked for
//! the image's status to resolve it, and the Go kubelet asks twice). Names and tags are never
//! kept: they can move to another image.

use std::collections::HashMap;
use std::sync::Mutex;

use kubelet_core::runtime::{ContainerConfig, RuntimeResult};

use crate::image::raw_image_status;
use crate::{CriRuntime, ImageUser};

/// Image ids kept at most; the map is emptied when full (a node runs a few hundred images at
/// the very most, and a miss only costs the `ImageStatus` call).
const MAX_KEPT: usize = 512;

/// The users of the images seen so far, by image id.
#[derive(Debug, Default)]
pub(crate) struct ImageUsers(Mutex<HashMap<String, ImageUser>>);

impl ImageUsers {
    fn get(&self, image_id: &str) -> Option<ImageUser> {
        self.0.lock().ok()?.get(image_id).cloned()
    }

    /// Keeps `user` for `image_id` when it is a content id.
    fn keep(&self, image_id: &str, user: &ImageUser) {
        if !is_content_id(image_id) {
            return;
        }
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= MAX_KEPT && !m.contains_key(image_id) {
                m.clear();
            }
            m.insert(image_id.to_string(), user.clone());
        }
    }
}

/// `sha256:` and 64 hex digits: an id, not a name.
fn is_content_id(image: &str) -> bool {
    image
        .strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The user the container's image runs as: a numeric uid, a user name, or root when the
/// image names no user (or is not found).
pub(crate) async fn image_user(
    rt: &CriRuntime,
    config: &ContainerConfig,
) -> RuntimeResult<ImageUser> {
    if let Some(user) = rt.image_users.get(&config.image_ref) {
        return Ok(user);
    }
    let mut image = raw_image_status(rt, &config.image_ref).await?;
    let by_ref = image.as_ref().is_some_and(|i| i.id == config.image_ref);
    if image.is_none() {
        if let Some(spec_image) = config.container.image.as_deref() {
            image = raw_image_status(rt, spec_image).await?;
        }
    }
    // As Go: a numeric uid, else a user name, else (no user, or no image) root.
    let root = ImageUser {
        uid: Some(0),
        username: String::new(),
    };
    let user = match image {
        Some(i) => match i.uid {
            Some(uid) => ImageUser {
                uid: Some(uid.value),
                username: String::new(),
            },
            None if !i.username.is_empty() => ImageUser {
                uid: None,
                username: i.username,
            },
            None => root,
        },
        None => root,
    };
    if by_ref {
        rt.image_users.keep(&config.image_ref, &user);
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_content_ids_are_kept_and_the_map_stays_bounded() {
        let id = |n: usize| format!("sha256:{n:064x}");
        let user = |uid| ImageUser {
            uid: Some(uid),
            username: String::new(),
        };
        let users = ImageUsers::default();
        for name in [
            "busybox:1.36",
            "docker.io/library/busybox@sha256:0000",
            "sha256:short",
            &format!("sha256:{}", "g".repeat(64)),
        ] {
            users.keep(name, &user(1));
            assert_eq!(users.get(name), None, "{name} is not an id");
        }
        users.keep(&id(0), &user(7));
        assert_eq!(users.get(&id(0)), Some(user(7)));
        for n in 1..MAX_KEPT {
            users.keep(&id(n), &user(n as i64));
        }
        assert_eq!(users.get(&id(0)), Some(user(7)), "full, not over");
        users.keep(&id(MAX_KEPT), &user(1));
        assert_eq!(users.get(&id(0)), None, "emptied when over the bound");
        assert_eq!(users.get(&id(MAX_KEPT)), Some(user(1)));
        assert!(users.0.lock().unwrap().len() <= MAX_KEPT);
    }
}
