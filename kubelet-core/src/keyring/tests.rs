//! The keyring against Go's `keyring_test.go` tables, and the pod-level composition.

use super::*;
use crate::objects::MemoryObjectStore;
use crate::testing::PodBuilder;
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LocalObjectReference, Secret};
use k8s_openapi::ByteString;

fn entry(user: &str, password: &str, email: &str) -> DockerConfigEntry {
    DockerConfigEntry {
        username: user.into(),
        password: password.into(),
        email: email.into(),
    }
}

/// A keyring from one dockercfg document with `auth` (foo:bar) for `location`.
fn keyring_for(location: &str) -> Keyring {
    let json = format!(r#"{{"{location}": {{"email": "foo@bar.baz", "auth": "Zm9vOmJhcg=="}}}}"#);
    let mut k = Keyring::new();
    k.add(&docker_config::parse_dockercfg(json.as_bytes(), "test").unwrap());
    k
}

/// Go's `TestDockerKeyringForGlob`: each pattern finds `target/foo/bar`.
#[test]
fn go_keyring_for_glob() {
    for (glob, target) in [
        ("https://hello.kubernetes.io", "hello.kubernetes.io"),
        ("https://*.docker.io", "prefix.docker.io"),
        ("https://prefix.*.io", "prefix.docker.io"),
        ("https://prefix.docker.*", "prefix.docker.io"),
        ("https://*.docker.io/path", "prefix.docker.io/path"),
        ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
        ("https://prefix.docker.*/path", "prefix.docker.io/path"),
        ("https://*.docker.io:8888", "prefix.docker.io:8888"),
        ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
        ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
        (
            "https://*.docker.io/path:1111",
            "prefix.docker.io/path:1111",
        ),
        ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
        ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
        (
            "https://prefix.docker.*/path:1111",
            "prefix.docker.io/path:1111",
        ),
        ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
        ("*.docker.io:1111", "prefix.docker.io:1111/path"),
    ] {
        let found = keyring_for(glob).lookup(&format!("{target}/foo/bar"));
        assert_eq!(
            found.first(),
            Some(&entry("foo", "bar", "foo@bar.baz")),
            "{glob} should find {target}"
        );
    }
}

/// Go's `TestKeyringMiss`.
#[test]
fn go_keyring_miss() {
    for (glob, lookup) in [
        ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
        ("https://*.docker.com", "prefix.docker.io"),
        ("https://suffix.*.io", "prefix.docker.io"),
        ("https://prefix.docker.c*", "prefix.docker.io"),
        (
            "https://prefix.*.io/path:1111",
            "prefix.docker.io/path/subpath:1111",
        ),
        ("suffix.*.io", "prefix.docker.io"),
    ] {
        assert!(
            keyring_for(glob)
                .lookup(&format!("{lookup}/foo/bar"))
                .is_empty(),
            "{glob} must not find {lookup}"
        );
    }
}

/// Go's Docker Hub cases: `https://index.docker.io/v1/` credentials serve unqualified and
/// Docker Hub images only.
#[test]
fn go_docker_hub_credentials() {
    let k = keyring_for("https://index.docker.io/v1/");
    assert!(k.lookup("world.mesos.org/foo/bar").is_empty());
    for image in [
        "google/docker-registry",
        "jenkins",
        "index.docker.io/v1//google/docker-registry",
    ] {
        let found = k.lookup(image);
        assert_eq!(found.len(), 1, "{image}: {found:?}");
        assert_eq!(found[0], entry("foo", "bar", "foo@bar.baz"));
    }
    // Through the normalized repository, as the puller asks.
    let repo = image_name::repository("busybox:1.36").unwrap();
    assert_eq!(k.lookup(&repo).len(), 1);
}

/// Go's `TestIsDefaultRegistryMatch`.
#[test]
fn go_is_default_registry_match() {
    for (image, want) in [
        ("foo/bar", true),
        ("docker.io/foo/bar", true),
        ("index.docker.io/foo/bar", true),
        ("foo", true),
        ("", false),
        ("registry.tld/foo/bar", false),
        ("registry:5000/foo/bar", false),
        ("myhostdocker.io/foo/bar", false),
    ] {
        assert_eq!(is_default_registry_match(image), want, "{image:?}");
    }
}

/// Go's `TestDockerKeyringLookup`: the deeper pattern first, path prefixes as strings.
#[test]
fn go_keyring_lookup_order() {
    let ada = entry("ada", "smash", "ada@example.com");
    let grace = entry("grace", "squash", "grace@example.com");
    let mut k = Keyring::new();
    k.add(
        &[
            ("bar.example.com/pong".to_string(), grace.clone()),
            ("bar.example.com".to_string(), ada.clone()),
        ]
        .into_iter()
        .collect(),
    );
    for (image, want) in [
        ("bar.example.com", vec![ada.clone()]),
        ("bar.example.com/pong", vec![grace.clone(), ada.clone()]),
        ("bar.example.com/ping", vec![ada.clone()]),
        ("bar.example.com/pongz", vec![grace.clone(), ada.clone()]),
        (
            "bar.example.com/pong/pang",
            vec![grace.clone(), ada.clone()],
        ),
        ("example.com", vec![]),
        ("foo.example.com", vec![]),
    ] {
        assert_eq!(k.lookup(image), want, "{image}");
    }
}

/// Go's `TestIssue3797`: a location with scheme and `/v1/` matches by host.
#[test]
fn go_issue_3797() {
    let rex = entry("rex", "tiny arms", "rex@example.com");
    let mut k = Keyring::new();
    k.add(
        &[("https://quay.io/v1/".to_string(), rex.clone())]
            .into_iter()
            .collect(),
    );
    for image in ["quay.io", "quay.io/foo", "quay.io/foo/bar"] {
        assert_eq!(k.lookup(image), vec![rex.clone()], "{image}");
    }
}

/// Several entries for one location (two secrets naming the same registry) are all tried,
/// in the order they were added.
#[test]
fn several_secrets_for_one_registry() {
    let mut k = Keyring::new();
    k.add(
        &[("reg.io".to_string(), entry("a", "1", ""))]
            .into_iter()
            .collect(),
    );
    k.add(
        &[("https://reg.io".to_string(), entry("b", "2", ""))]
            .into_iter()
            .collect(),
    );
    let users: Vec<String> = k
        .lookup("reg.io/x")
        .into_iter()
        .map(|e| e.username)
        .collect();
    assert_eq!(users, ["a", "b"]);
    // An unparsable location is skipped.
    let mut bad = Keyring::new();
    bad.add(
        &[("reg.io:port".to_string(), entry("a", "1", ""))]
            .into_iter()
            .collect(),
    );
    assert!(bad.is_empty());
}

struct Fixed(DockerConfig);

#[async_trait]
impl CredentialProvider for Fixed {
    fn name(&self) -> &str {
        "fixed"
    }
    async fn provide(&self, image: &str) -> DockerConfig {
        assert_eq!(image, "127.0.0.1:5443/team/app", "the repository is asked");
        self.0.clone()
    }
}

fn pull_secret(name: &str, registry: &str, user: &str) -> Secret {
    let json = format!(r#"{{"auths":{{"{registry}":{{"username":"{user}","password":"pw"}}}}}}"#);
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        type_: Some(docker_config::DOCKER_CONFIG_JSON_TYPE.into()),
        data: Some(
            [(
                ".dockerconfigjson".to_string(),
                ByteString(json.into_bytes()),
            )]
            .into_iter()
            .collect(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn pod_secrets_then_providers_in_order() {
    let store = MemoryObjectStore::new();
    store.put_secret(pull_secret("team", "127.0.0.1:5443/team", "team-user"));
    store.put_secret(pull_secret("host", "127.0.0.1:5443", "host-user"));
    store.put_secret(pull_secret("elsewhere", "other.io", "other-user"));
    let mut pod = PodBuilder::new("p", "uid-1").namespace("ns").build();
    if let Some(spec) = pod.spec.as_mut() {
        spec.image_pull_secrets = Some(
            ["host", "missing", "team", "elsewhere"]
                .iter()
                .map(|n| LocalObjectReference {
                    name: n.to_string(),
                })
                .collect(),
        );
    }
    let secrets = pod_secrets(&pod, &store).await.unwrap();
    assert_eq!(secrets.missing.len(), 1, "{:?}", secrets.missing);
    assert!(
        secrets.missing[0].starts_with("missing: "),
        "{:?}",
        secrets.missing
    );
    let plugin: Arc<dyn CredentialProvider> = Arc::new(Fixed(
        [("*.0.0.1:5443".to_string(), entry("plugin-user", "pw", ""))]
            .into_iter()
            .collect(),
    ));
    let found = lookup(
        "127.0.0.1:5443/team/app:1.0",
        &secrets.keyring,
        std::slice::from_ref(&plugin),
    )
    .await;
    let users: Vec<&str> = found.iter().map(|a| a.username.as_str()).collect();
    assert_eq!(users, ["team-user", "host-user", "plugin-user"]);
    // No secrets, no providers: an anonymous pull.
    assert!(lookup("127.0.0.1:5443/team/app", &Keyring::new(), &[])
        .await
        .is_empty());
}

#[tokio::test]
async fn a_broken_pull_secret_fails_the_lookup() {
    let store = MemoryObjectStore::new();
    let mut s = pull_secret("bad", "reg.io", "u");
    s.data = Some(
        [(".dockerconfigjson".to_string(), ByteString(b"{".to_vec()))]
            .into_iter()
            .collect(),
    );
    store.put_secret(s);
    let mut pod = PodBuilder::new("p", "uid-1").namespace("ns").build();
    if let Some(spec) = pod.spec.as_mut() {
        spec.image_pull_secrets = Some(vec![LocalObjectReference { name: "bad".into() }]);
    }
    let err = pod_secrets(&pod, &store).await.unwrap_err();
    assert!(err.to_string().contains("secret ns/bad"), "{err}");
}
