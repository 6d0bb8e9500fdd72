//! A hostile manifest corpus dropped beside good static pods, on the real file source, engine
//! and containerd: the good pods keep running and keep being synced, every bad file gets one
//! clear error (logged once), nothing of the bad files reaches the runtime, and the process's
//! peak memory stays bounded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_core::runtime::{ContainerRuntime, ListFilter};
use kubelet_core::PodSource;
use kubelet_sources::file::{Config as FileConfig, FileSource};
use kubelet_sources::static_pod::{parse_manifest, Context, FILE_SOURCE};
use kubelet_tests::engine::{running_and_ready, wait_until, EngineTest, NODE_NAME};

/// Log lines captured from the whole test process.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn good(namespace: &str, name: &str, greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: kubelet-rs.local/busybox:1.0\n    imagePullPolicy: IfNotPresent\n    command: [sh, -c, 'echo {greeting}; exec sleep 3600']\n"
    )
}

fn alias_bomb(namespace: &str) -> String {
    let mut s = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\n  namespace: {namespace}\n  labels:\n    l0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
    for i in 1..10 {
        let p = i - 1;
        s.push_str(&format!(
            "    l{i}: &l{i} [*l{p},*l{p},*l{p},*l{p},*l{p},*l{p},*l{p},*l{p},*l{p},*l{p}]\n"
        ));
    }
    s.push_str("spec:\n  containers: [{name: c, image: kubelet-rs.local/busybox:1.0}]\n");
    s
}

/// (file, content, the one error it must get)
fn corpus(namespace: &str) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let big_annotation = "x".repeat(3 << 20);
    vec![
        ("alias-bomb.yaml", alias_bomb(namespace).into_bytes(), "YAML aliases expand the document beyond"),
        (
            "huge-annotations.yaml",
            format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: huge\n  namespace: {namespace}\n  annotations:\n    big: {big_annotation}\nspec:\n  containers: [{{name: c, image: kubelet-rs.local/busybox:1.0}}]\n").into_bytes(),
            "metadata.annotations: Too long: must have at most 262144 bytes",
        ),
        (
            "path-volume.yaml",
            format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: pathvol, namespace: {namespace}}}\nspec:\n  volumes: [{{name: /tmp/x, emptyDir: {{}}}}, {{name: ../x, emptyDir: {{}}}}]\n  containers:\n  - name: c\n    image: kubelet-rs.local/busybox:1.0\n    volumeMounts: [{{name: /tmp/x, mountPath: /a}}, {{name: ../x, mountPath: /b}}]\n").into_bytes(),
            "spec.volumes[0].name: Invalid value: \"/tmp/x\"",
        ),
        (
            "absurd-quantity.yaml",
            format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: absurd, namespace: {namespace}}}\nspec:\n  containers:\n  - name: c\n    image: kubelet-rs.local/busybox:1.0\n    resources: {{limits: {{memory: 1e2147483647, cpu: 1e-2147483647}}}}\n").into_bytes(),
            "Invalid value: \"1e2147483647\": out of range: the value is too large",
        ),
        (
            "deep-nesting.json",
            format!("{{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{{\"name\":\"deep\"}},\"spec\":{}0{}}}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            "nested deeper than 64 levels",
        ),
        ("non-utf8.yaml", b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff\xfe}\n".to_vec(), "not UTF-8"),
        (
            "bad-fields.yaml",
            format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: Bad_Name, namespace: {namespace}}}\nspec:\n  restartPolicy: Sometimes\n  containers: [{{name: c, image: ''}}]\n").into_bytes(),
            "spec.containers[0].image: Required value",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_manifests_beside_good_pods() {
    let captured = Captured::default();
    let writer = captured.clone();
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kubelet_sources=debug,warn")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init();
    let Some(t) = EngineTest::new("hostile").await else {
        return;
    };
    let ns = t.namespace.clone();
    let manifests = tempfile::tempdir().unwrap();
    let dir = manifests.path();
    std::fs::write(dir.join("good-a.yaml"), good(&ns, "good-a", "one")).unwrap();
    std::fs::write(dir.join("good-b.yaml"), good(&ns, "good-b", "one")).unwrap();
    // Accepted with its unknown fields dropped (Go does the same).
    std::fs::write(
        dir.join("typo.yaml"),
        good(&ns, "typo", "one").replace(
            "    imagePullPolicy:",
            "    imagePulPolicy: Never\n    imagePullPolicy:",
        ),
    )
    .unwrap();
    let corpus = corpus(&ns);
    for (file, bytes, _) in &corpus {
        std::fs::write(dir.join(file), bytes).unwrap();
    }
    // File-system hostilities: a FIFO, an endless device, a loop, a dangling link, a file
    // over the size limit, and a link to a good manifest elsewhere (followed, as Go does).
    let fifo = dir.join("fifo.yaml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.join("loop.yaml"), dir.join("loop.yaml")).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling.yaml")).unwrap();
    std::fs::File::create(dir.join("oversized.yaml"))
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("l.yaml"), good(&ns, "linked", "one")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("l.yaml"), dir.join("linked.yaml")).unwrap();

    let rss_before = peak_rss_kib();
    let started = kubelet_core::clock::monotonic_now();
    let source: Arc<dyn PodSource> = Arc::new(FileSource::new(FileConfig {
        check_frequency: Duration::from_secs(1),
        ..FileConfig::new(dir, NODE_NAME)
    }));
    let k = t.start(vec![source]);
    let full = |name: &str| format!("{ns}/{name}-{NODE_NAME}");
    let goods = ["good-a", "good-b", "typo", "linked"];
    let uids = wait_until(Duration::from_secs(90), "the good pods Running", || {
        let mut uids = Vec::new();
        for g in goods {
            let p = k.handle.pod_by_full_name(&full(g))?;
            let uid = p.metadata.uid.clone()?;
            k.handle.pod_status(&uid).filter(running_and_ready)?;
            uids.push(uid);
        }
        Some(uids)
    })
    .await;
    let to_running = kubelet_core::clock::elapsed(started);

    // Only the good pods exist, in the engine and in the runtime.
    let mut names: Vec<String> = k
        .handle
        .pods()
        .iter()
        .map(|p| kubelet_core::pod::full_name(p))
        .collect();
    names.sort();
    let mut want: Vec<String> = goods.iter().map(|g| full(g)).collect();
    want.sort();
    assert_eq!(names, want);
    let sandboxes = t
        .runtime
        .list_pod_sandboxes(&ListFilter::all())
        .await
        .unwrap();
    assert_eq!(sandboxes.len(), goods.len(), "{sandboxes:#?}");

    // Rescans (every second) go on; the good pods keep being synced: an edit replaces one,
    // a removal stops one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    std::fs::write(dir.join("good-a.yaml"), good(&ns, "good-a", "two")).unwrap();
    std::fs::remove_file(dir.join("good-b.yaml")).unwrap();
    let old_a = uids[0].clone();
    wait_until(
        Duration::from_secs(90),
        "good-a replaced, good-b gone",
        || {
            let p = k.handle.pod_by_full_name(&full("good-a"))?;
            let uid = p.metadata.uid.clone()?;
            if uid == old_a || k.handle.pod_by_full_name(&full("good-b")).is_some() {
                return None;
            }
            k.handle.pod_status(&uid).filter(running_and_ready)
        },
    )
    .await;
    let rss_after = peak_rss_kib();

    // Every bad file: exactly one clear error, logged once across all the rescans.
    let logs = captured.text();
    let mut table = Vec::new();
    for (file, bytes, want) in &corpus {
        let origin = dir.join(file).display().to_string();
        let ctx = Context {
            source: FILE_SOURCE,
            origin: &origin,
            node_name: NODE_NAME,
        };
        let m = parse_manifest(bytes, &ctx);
        assert!(m.pods.is_empty(), "{file}");
        assert_eq!(m.errors.len(), 1, "{file}: {:?}", m.errors);
        let msg = m.errors[0].to_string();
        assert!(msg.contains(want), "{file}: {msg}");
        let logged = logs
            .lines()
            .filter(|l| l.contains(&origin) && l.contains("WARN"))
            .count();
        assert_eq!(logged, 1, "{file} logged {logged} times:\n{logs}");
        table.push(format!("{file}: {}", &msg[..msg.len().min(200)]));
    }
    for file in ["oversized.yaml", "zero.yaml", "fifo.yaml"] {
        let path = dir.join(file).display().to_string();
        let logged = logs
            .lines()
            .filter(|l| l.contains(&path) && l.contains("cannot use manifest file"))
            .count();
        assert!(logged <= 1, "{file} logged {logged} times");
        table.push(format!("{file}: {logged} warning(s)"));
    }
    let typo = logs
        .lines()
        .find(|l| l.contains("unknown fields") && l.contains("imagePulPolicy"))
        .unwrap_or_else(|| panic!("no unknown-field warning:\n{logs}"));
    assert!(typo.contains("spec.containers[0].imagePulPolicy"), "{typo}");

    let grown = rss_after.saturating_sub(rss_before);
    println!(
        "hostile corpus: good pods Running in {to_running:?}; peak RSS {rss_before} KiB -> {rss_after} KiB (+{grown} KiB)\n{}",
        table.join("\n")
    );
    assert!(grown < 200 * 1024, "peak RSS grew by {grown} KiB");
    k.stop().await;
}
