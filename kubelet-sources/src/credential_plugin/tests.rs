//! The plugin protocol against a real executable (a shell script), the cache and the
//! coalescing of concurrent requests.

use std::path::Path;
use std::time::Duration;

use super::*;

const V1: &str = "credentialprovider.kubelet.k8s.io/v1";

/// A plugin script in `dir`: it appends its stdin, argument and `$TOKEN` to `calls` (one
/// line per run), sleeps `$SLEEP`, and prints `response` (or fails when it is "FAIL").
fn write_plugin(dir: &Path, name: &str, response: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let calls = dir.join("calls");
    let body = if response == "FAIL" {
        "echo 'registry said no' >&2; exit 3".to_string()
    } else {
        format!("cat <<'JSON'\n{response}\nJSON")
    };
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nreq=$(cat)\necho \"$req $1 $TOKEN\" >> {}\nsleep ${{SLEEP:-0}}\n{body}\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn response(key_type: &str, duration: Option<&str>) -> String {
    let duration = duration
        .map(|d| format!(r#""cacheDuration":"{d}","#))
        .unwrap_or_default();
    format!(
        r#"{{"apiVersion":"{V1}","kind":"CredentialProviderResponse","cacheKeyType":"{key_type}",{duration}"auth":{{"127.0.0.1:5443":{{"username":"plugin-user","password":"plugin-pw"}}}}}}"#
    )
}

fn provider(dir: &Path, response: &str, env: &[(&str, &str)]) -> PluginProvider {
    let bin = write_plugin(dir, "test-plugin", response);
    PluginProvider::new(
        ProviderConfig {
            name: "test-plugin".into(),
            match_images: vec!["127.0.0.1:5443".into(), "*.example.io".into()],
            default_cache_duration: Duration::from_secs(600),
            api_version: V1.into(),
            args: vec!["--arg".into()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
        bin,
    )
}

#[tokio::test]
async fn the_protocol_and_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), &response("Image", None), &[("TOKEN", "tok")]);
    let got = p.provide("127.0.0.1:5443/team/app").await;
    assert_eq!(got["127.0.0.1:5443"].username, "plugin-user");
    assert_eq!(got["127.0.0.1:5443"].password, "plugin-pw");
    let c = calls(dir.path());
    assert_eq!(c.len(), 1);
    let (req, rest) = c[0].split_once(' ').unwrap();
    let req: serde_json::Value = serde_json::from_str(req).unwrap();
    assert_eq!(req["apiVersion"], V1);
    assert_eq!(req["kind"], "CredentialProviderRequest");
    assert_eq!(req["image"], "127.0.0.1:5443/team/app");
    assert_eq!(rest, "--arg tok", "argument and configured env");
    // Cached for the image (defaultCacheDuration); another image runs again.
    p.provide("127.0.0.1:5443/team/app").await;
    assert_eq!(calls(dir.path()).len(), 1);
    p.provide("127.0.0.1:5443/team/other").await;
    assert_eq!(calls(dir.path()).len(), 2);
    // Not matching: never run.
    assert!(p.provide("docker.io/library/busybox").await.is_empty());
    assert!(p.provide("a.b.example.io/x").await.is_empty());
    assert_eq!(calls(dir.path()).len(), 2);
    assert!(p.matches("registry.example.io/x"));
}

#[tokio::test]
async fn registry_keys_zero_durations_and_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), &response("Registry", Some("1m")), &[]);
    p.provide("127.0.0.1:5443/a").await;
    p.provide("127.0.0.1:5443/b").await;
    assert_eq!(calls(dir.path()).len(), 1, "one run per registry");

    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), &response("Image", Some("0s")), &[]);
    p.provide("127.0.0.1:5443/a").await;
    p.provide("127.0.0.1:5443/a").await;
    assert_eq!(calls(dir.path()).len(), 2, "cacheDuration 0: never cached");

    let dir = tempfile::tempdir().unwrap();
    let p = Arc::new(provider(
        dir.path(),
        &response("Image", None),
        &[("SLEEP", "0.3")],
    ));
    let tasks: Vec<_> = (0..5)
        .map(|_| {
            let p = p.clone();
            tokio::spawn(async move { p.provide("127.0.0.1:5443/a").await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().len(), 1);
    }
    assert_eq!(
        calls(dir.path()).len(),
        1,
        "concurrent requests share one run"
    );
    assert!(p.in_flight.lock().unwrap().is_empty());
}

#[tokio::test]
async fn failures_answer_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), "FAIL", &[]);
    let e = p
        .credentials("127.0.0.1:5443/a")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("registry said no"), "stderr in the error: {e}");
    assert!(p.provide("127.0.0.1:5443/a").await.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), &response("Image", None), &[("SLEEP", "5")])
        .with_timeout(Duration::from_millis(200));
    let e = p
        .credentials("127.0.0.1:5443/a")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("timed out"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let p = provider(dir.path(), "not json", &[]);
    let e = p
        .credentials("127.0.0.1:5443/a")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("error decoding"), "{e}");
}

#[test]
fn load_finds_the_executables() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: test-plugin\n  matchImages: [\"127.0.0.1:5443\"]\n  defaultCacheDuration: 1m\n  apiVersion: {V1}\n"
        ),
    )
    .unwrap();
    let bins = dir.path().join("bin");
    std::fs::create_dir(&bins).unwrap();
    let e = load(&config, &bins).unwrap_err();
    assert!(matches!(e, PluginError::Binary { .. }), "{e}");
    std::fs::write(bins.join("test-plugin"), "#!/bin/sh\n").unwrap();
    let e = load(&config, &bins).unwrap_err().to_string();
    assert!(e.contains("not executable"), "{e}");
    write_plugin(&bins, "test-plugin", &response("Image", None));
    let loaded = load(&config, &bins).unwrap();
    assert_eq!(loaded.len(), 1);
    assert_eq!(loaded[0].name(), "test-plugin");
    assert!(load(&dir.path().join("missing.yaml"), &bins).is_err());
}
