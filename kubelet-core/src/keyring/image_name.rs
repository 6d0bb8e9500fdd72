//! The repository an image is pulled from, normalized as docker's reference library does
//! (Go's `parsers.ParseImageName` → `ParseNormalizedNamed(...).Name()`): the tag and digest
//! are dropped, a name without a registry host is on `docker.io` (`busybox` →
//! `docker.io/library/busybox`), and `index.docker.io` is `docker.io`.

/// Why an image name is not a valid reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageNameError {
    /// Not a reference at all.
    #[error("invalid reference format: {0:?}")]
    InvalidFormat(String),
    /// The repository has upper-case letters.
    #[error("invalid reference format: repository name must be lowercase: {0:?}")]
    Uppercase(String),
}

/// The repository to pull `image` from (see the module docs).
pub fn repository(image: &str) -> Result<String, ImageNameError> {
    let invalid = || ImageNameError::InvalidFormat(image.to_string());
    if image.is_empty() || image.chars().any(char::is_whitespace) {
        return Err(invalid());
    }
    // The digest, then the tag (a ':' after the last '/').
    let name = image.split('@').next().unwrap_or_default();
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    let (domain, rest) = match name.find('/') {
        Some(i) if name[..i].contains(['.', ':']) || &name[..i] == "localhost" => {
            (&name[..i], &name[i + 1..])
        }
        _ => ("docker.io", name),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    if rest.is_empty() || rest.split('/').any(str::is_empty) || domain.is_empty() {
        return Err(invalid());
    }
    if rest.to_lowercase() != rest {
        return Err(ImageNameError::Uppercase(image.to_string()));
    }
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c);
    if !rest.chars().all(|c| valid(c) || c == '/') {
        return Err(invalid());
    }
    if domain == "docker.io" && !rest.contains('/') {
        return Ok(format!("docker.io/library/{rest}"));
    }
    Ok(format!("{domain}/{rest}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_repositories() {
        for (image, want) in [
            ("busybox", "docker.io/library/busybox"),
            ("busybox:1.36", "docker.io/library/busybox"),
            ("library/busybox", "docker.io/library/busybox"),
            ("docker.io/busybox", "docker.io/library/busybox"),
            ("index.docker.io/team/app:v1", "docker.io/team/app"),
            ("team/app", "docker.io/team/app"),
            ("localhost/app", "localhost/app"),
            ("localhost:5000/a/b:tag", "localhost:5000/a/b"),
            (
                "127.0.0.1:5443/kubelet-rs/busybox:1.0",
                "127.0.0.1:5443/kubelet-rs/busybox",
            ),
            (
                "quay.io/coreos/etcd@sha256:0123456789abcdef",
                "quay.io/coreos/etcd",
            ),
            ("reg.io/a/b:t@sha256:00", "reg.io/a/b"),
            ("kubelet-rs.local/busybox:1.0", "kubelet-rs.local/busybox"),
        ] {
            assert_eq!(repository(image).as_deref(), Ok(want), "{image}");
        }
        for bad in ["", "Busybox", "reg.io/", "a b", "reg.io//x", "reg.io/x$"] {
            assert!(repository(bad).is_err(), "{bad:?}");
        }
    }
}
