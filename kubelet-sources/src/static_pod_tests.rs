//! Tests of `static_pod`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

/// This package's directory in the checkout being tested: cargo's run-time
/// `CARGO_MANIFEST_DIR`, not the compile-time one (a build cache shared by checkouts may run
/// a test binary another checkout compiled, whose path is baked into `env!`).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .unwrap_or_default()
        .into()
}

const NODE: &str = "Node-1";

fn ctx(origin: &str) -> Context<'_> {
    Context {
        source: FILE_SOURCE,
        origin,
        node_name: NODE,
    }
}

const WEB: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: kubelet-rs.local/busybox:1.0
    resources:
      limits:
        cpu: 100m
        memory: 64Mi
"#;

#[test]
fn defaults_are_applied() {
    let m = parse_manifest(WEB.as_bytes(), &ctx("/etc/m/web.yaml"));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    assert_eq!(m.pods.len(), 1);
    let pod = &m.pods[0];
    assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    assert_eq!(uid.len(), 32);
    assert_eq!(
        podutil::annotation(pod, CONFIG_HASH_ANNOTATION),
        Some(&*uid)
    );
    assert_eq!(
        podutil::annotation(pod, CONFIG_SOURCE_ANNOTATION),
        Some("file")
    );
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    let tol = spec.tolerations.as_ref().unwrap();
    assert_eq!(tol.len(), 1);
    assert_eq!(tol[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tol[0].effect.as_deref(), Some("NoExecute"));
    let c = &spec.containers[0];
    assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        c.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    let req = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
    assert_eq!(req.get("cpu").map(|q| q.0.as_str()), Some("100m"));
    assert_eq!(req.get("memory").map(|q| q.0.as_str()), Some("64Mi"));
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
}

#[test]
fn uid_is_stable_and_changes_with_content_node_and_origin() {
    let uid = |text: &str, origin: &str, node: &str| {
        let c = Context {
            source: FILE_SOURCE,
            origin,
            node_name: node,
        };
        let m = parse_manifest(text.as_bytes(), &c);
        assert!(m.errors.is_empty(), "{:?}", m.errors);
        m.pods[0].metadata.uid.clone().unwrap()
    };
    let base = uid(WEB, "/m/web.yaml", "n1");
    // Same object, different formatting and comments: same UID.
    let reformatted = format!("# a comment\n{}", WEB.replace("cpu: 100m", "cpu: \"100m\""));
    assert_eq!(uid(&reformatted, "/m/web.yaml", "n1"), base);
    assert_eq!(uid(WEB, "/m/web.yaml", "n1"), base);
    assert_ne!(uid(&WEB.replace("64Mi", "65Mi"), "/m/web.yaml", "n1"), base);
    assert_ne!(uid(WEB, "/m/web.yaml", "n2"), base);
    assert_ne!(uid(WEB, "/m/other.yaml", "n1"), base);
    // A UID written in the manifest is kept.
    let with_uid = WEB.replace("name: web\nspec", "name: web\n  uid: abc\nspec");
    assert_eq!(uid(&with_uid, "/m/web.yaml", "n1"), "abc");
}

#[test]
fn duplicates_are_rejected_after_the_first() {
    let m = parse_manifest(format!("{WEB}---\n{WEB}").as_bytes(), &ctx("/m/web.yaml"));
    assert_eq!(m.pods.len(), 2);
    let pods = m.pods.into_iter().map(|p| ("/m/web.yaml".to_string(), p));
    let (keep, errs) = reject_duplicates(pods.collect(), FILE_SOURCE);
    assert_eq!(keep.len(), 1);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].to_string().contains("default/web-node-1"));
}

#[test]
fn seen_is_stable_per_uid() {
    let mut tracker = SeenTracker::new();
    let mut pods = parse_manifest(WEB.as_bytes(), &ctx("/m/web.yaml")).pods;
    tracker.stamp(&mut pods);
    let first = podutil::annotation(&pods[0], CONFIG_SEEN_ANNOTATION)
        .unwrap()
        .to_string();
    assert!(first.parse::<jiff::Timestamp>().is_ok(), "{first}");
    let mut again = parse_manifest(WEB.as_bytes(), &ctx("/m/web.yaml")).pods;
    tracker.stamp(&mut again);
    assert_eq!(again, pods);
}

#[test]
fn http_pods_get_no_toleration_and_url_hash() {
    let c = Context {
        source: HTTP_SOURCE,
        origin: "http://x/pods",
        node_name: "n",
    };
    let m = parse_manifest(WEB.as_bytes(), &c);
    let pod = &m.pods[0];
    assert!(pod.spec.as_ref().unwrap().tolerations.is_none());
    assert_eq!(
        podutil::annotation(pod, CONFIG_SOURCE_ANNOTATION),
        Some("http")
    );
}

fn corpus(kind: &str) -> Vec<(std::path::PathBuf, String, String)> {
    let dir = manifest_dir().join("tests/corpus").join(kind);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "expect") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let sidecar = path.with_file_name(format!(
            "{}.expect",
            path.file_name().unwrap().to_string_lossy()
        ));
        let expect = if sidecar.exists() {
            std::fs::read_to_string(&sidecar)
                .unwrap()
                .trim()
                .to_string()
        } else {
            let first = text.lines().next().unwrap();
            first
                .strip_prefix("# expect: ")
                .or_else(|| first.strip_prefix("# expect-pods: "))
                .unwrap_or_else(|| panic!("{} has no expectation line", path.display()))
                .to_string()
        };
        out.push((path, text, expect));
    }
    out.sort();
    assert!(!out.is_empty());
    out
}

#[test]
fn bad_corpus_is_rejected_with_the_expected_error() {
    for (path, text, expect) in corpus("bad") {
        let origin = path.display().to_string();
        let m = parse_manifest(text.as_bytes(), &ctx(&origin));
        assert!(m.pods.is_empty(), "{origin}: unexpected pods");
        assert_eq!(m.errors.len(), 1, "{origin}: {:?}", m.errors);
        let msg = m.errors[0].to_string();
        assert!(msg.contains(&expect), "{origin}: {msg:?} lacks {expect:?}");
        assert!(
            msg.starts_with(&origin),
            "{origin}: error does not name the file: {msg}"
        );
    }
}

#[test]
fn good_corpus_is_accepted() {
    for (path, text, expect) in corpus("good") {
        let origin = path.display().to_string();
        let m = parse_manifest(text.as_bytes(), &ctx(&origin));
        assert!(m.errors.is_empty(), "{origin}: {:?}", m.errors);
        let names: Vec<String> = m
            .pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        let want: Vec<String> = expect.split(',').map(|n| format!("{n}-node-1")).collect();
        assert_eq!(names, want, "{origin}");
        for pod in &m.pods {
            assert_eq!(
                podutil::annotation(pod, CONFIG_HASH_ANNOTATION),
                pod.metadata.uid.as_deref()
            );
        }
    }
}

#[test]
fn full_manifest_keeps_fields_and_explicit_values() {
    let path = manifest_dir().join("tests/corpus/good/full.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let m = parse_manifest(text.as_bytes(), &ctx("full.yaml"));
    let pod = &m.pods[0];
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("OnFailure"));
    assert_eq!(spec.termination_grace_period_seconds, Some(5));
    assert_eq!(spec.host_network, Some(true));
    let main = &spec.containers[0];
    assert_eq!(main.image_pull_policy.as_deref(), Some("Never"));
    let res = main.resources.as_ref().unwrap();
    assert_eq!(res.requests.as_ref().unwrap()["cpu"].0, "100m");
    assert_eq!(res.limits.as_ref().unwrap()["memory"].0, "1Gi");
    let init = &spec.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.image_pull_policy.as_deref(), Some("IfNotPresent"));
}

#[test]
fn unknown_fields_are_dropped_with_a_warning() {
    let text =
        std::fs::read_to_string(manifest_dir().join("tests/corpus/good/unknown-fields.yaml"))
            .unwrap();
    let m = parse_manifest(text.as_bytes(), &ctx("u.yaml"));
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    assert_eq!(m.warnings.len(), 1);
    let w = &m.warnings[0];
    assert_eq!(
        w.unknown_fields,
        ["metadata.lables", "spec.containers[0].imagePullPolicyy"]
    );
    assert_eq!(w.pod, "default/web-node-1");
    assert_eq!(Some(w.uid.as_str()), m.pods[0].metadata.uid.as_deref());
    assert!(w
        .to_string()
        .starts_with("u.yaml: pod default/web-node-1: unknown fields dropped"));
    // The UID is the one of the same manifest without the unknown fields.
    let clean = text
        .replace(", lables: {a: b}", "")
        .replace(", imagePullPolicyy: Always", "");
    let c = parse_manifest(clean.as_bytes(), &ctx("u.yaml"));
    assert_eq!(c.pods[0].metadata.uid, m.pods[0].metadata.uid);
    assert!(c.warnings.is_empty());
    // In a list, the paths name the item.
    let list = "apiVersion: v1\nkind: PodList\nextra: 1\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: i, x: 1}]}\n";
    let l = parse_manifest(list.as_bytes(), &ctx("l.yaml"));
    assert!(l.errors.is_empty(), "{:?}", l.errors);
    assert_eq!(
        l.warnings[0].unknown_fields,
        ["extra", "items[0].spec.containers[0].x"]
    );
}

#[test]
fn example_manifests_are_valid() {
    let dir = manifest_dir().join("../examples/manifests");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let origin = path.display().to_string();
        let m = parse_manifest(text.as_bytes(), &ctx(&origin));
        assert!(m.errors.is_empty(), "{origin}: {:?}", m.errors);
        assert_eq!(m.pods.len(), 1, "{origin}");
        let c = &m.pods[0].spec.as_ref().unwrap().containers[0];
        assert_eq!(c.image.as_deref(), Some("kubelet-rs.local/busybox:1.0"));
        assert_eq!(c.image_pull_policy.as_deref(), Some("IfNotPresent"));
        count += 1;
    }
    assert!(count >= 2);
}
