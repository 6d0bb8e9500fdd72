//! Static pods: the real file source on a temporary manifest directory, the real engine and
//! containerd.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::PodSource;
use kubelet_sources::file::{Config as FileConfig, FileSource};
use kubelet_tests::engine::{
    container_status, eventually, running_and_ready, wait_until, EngineTest, NODE_NAME,
};

fn manifest(namespace: &str, name: &str, greeting: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {namespace}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: kubelet-rs.local/busybox:1.0
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo greeting=$GREETING; exec sleep 3600"]
    env:
    - name: GREETING
      value: "{greeting}"
"#
    )
}

/// Writes a manifest the way tools do: a hidden temp file (ignored by the source), renamed.
fn write_manifest(dir: &Path, file: &str, text: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

fn file_source(dir: &Path) -> Arc<dyn PodSource> {
    Arc::new(FileSource::new(FileConfig::new(dir, NODE_NAME)))
}

#[tokio::test(flavor = "multi_thread")]
async fn static_pod_lifecycle_from_manifest_files() {
    let Some(t) = EngineTest::new("staticpods").await else {
        return;
    };
    let manifests = tempfile::tempdir().unwrap();
    let dir = manifests.path();
    let k = t.start(vec![file_source(dir)]);
    wait_until(Duration::from_secs(10), "file source seen", || {
        k.handle.sources_ready().then_some(())
    })
    .await;

    // Drop a manifest → Running.
    let full_name = format!("{}/web-{NODE_NAME}", t.namespace);
    write_manifest(dir, "web.yaml", &manifest(&t.namespace, "web", "one"));
    let (uid1, s) = wait_until(Duration::from_secs(60), "web Running", || {
        let p = k.handle.pod_by_full_name(&full_name)?;
        let uid = p.metadata.uid.clone()?;
        let s = k.handle.pod_status(&uid).filter(running_and_ready)?;
        Some((uid, s))
    })
    .await;
    let id1 = container_status(&s, "c").unwrap().container_id.clone();

    // Edit it → re-created with the new spec under a new uid; the old pod is gone.
    write_manifest(dir, "web.yaml", &manifest(&t.namespace, "web", "two"));
    let (uid2, s) = wait_until(Duration::from_secs(60), "edited web Running", || {
        let p = k.handle.pod_by_full_name(&full_name)?;
        let uid = p.metadata.uid.clone()?;
        if uid == uid1 {
            return None;
        }
        let s = k.handle.pod_status(&uid).filter(running_and_ready)?;
        Some((uid, s))
    })
    .await;
    assert_ne!(container_status(&s, "c").unwrap().container_id, id1);
    eventually(Duration::from_secs(30), "old pod removed", || async {
        (t.sandboxes(&uid1).await.is_empty() && t.containers(&uid1).await.is_empty()).then_some(())
    })
    .await;
    let c2 = container_status(&s, "c").unwrap();
    let id2 = c2.container_id.clone().unwrap();
    // Restarts before this point are the runtime's (a start that failed under load), not
    // the broken manifest's: what follows compares against this container and count.
    let restarts2 = c2.restart_count;
    if restarts2 != 0 {
        eprintln!("the edited pod's container restarted before the checks: {c2:?}");
    }
    let out = k
        .handle
        .runtime()
        .exec_sync(
            id2.split("://").last().unwrap(),
            &["sh".into(), "-c".into(), "echo $GREETING".into()],
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "two");

    // A broken file beside a good one: the good one runs.
    std::fs::write(
        dir.join("broken.yaml"),
        "apiVersion: v1\nkind: Pod\nspec: [::: {",
    )
    .unwrap();
    let good_name = format!("{}/good-{NODE_NAME}", t.namespace);
    write_manifest(dir, "good.yaml", &manifest(&t.namespace, "good", "g"));
    let good_uid = wait_until(Duration::from_secs(60), "good Running", || {
        let uid = k
            .handle
            .pod_by_full_name(&good_name)?
            .metadata
            .uid
            .clone()?;
        k.handle.pod_status(&uid).filter(running_and_ready)?;
        Some(uid)
    })
    .await;
    // The edited pod is still running, untouched: the same container, no restart since.
    let s = k.handle.pod_status(&uid2).unwrap();
    assert!(running_and_ready(&s));
    let c2 = container_status(&s, "c").unwrap();
    assert_eq!(c2.container_id.as_deref(), Some(id2.as_str()), "{c2:?}");
    assert_eq!(c2.restart_count, restarts2, "{c2:?}");

    // Remove the files → stopped and cleaned up.
    std::fs::remove_file(dir.join("web.yaml")).unwrap();
    std::fs::remove_file(dir.join("good.yaml")).unwrap();
    eventually(Duration::from_secs(30), "static pods removed", || async {
        for uid in [&uid2, &good_uid] {
            if !t.sandboxes(uid).await.is_empty() || !t.pod_cgroup_dirs(uid).is_empty() {
                return None;
            }
        }
        Some(())
    })
    .await;
    assert!(k.handle.pod_by_full_name(&full_name).is_none());
    k.stop().await;
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_manifests_at_once_time_to_running() {
    let Some(t) = EngineTest::new("static20").await else {
        return;
    };
    let manifests = tempfile::tempdir().unwrap();
    let dir = manifests.path();
    let k = t.start(vec![file_source(dir)]);
    wait_until(Duration::from_secs(10), "file source seen", || {
        k.handle.sources_ready().then_some(())
    })
    .await;

    const N: usize = 20;
    let names: Vec<String> = (0..N).map(|i| format!("p{i:02}")).collect();
    let written = kubelet_core::clock::monotonic_now();
    for n in &names {
        write_manifest(dir, &format!("{n}.yaml"), &manifest(&t.namespace, n, n));
    }
    let mut latency: Vec<Option<Duration>> = vec![None; N];
    let mut uids = vec![String::new(); N];
    wait_until(Duration::from_secs(150), "20 static pods Running", || {
        for (i, n) in names.iter().enumerate() {
            if latency[i].is_some() {
                continue;
            }
            let full = format!("{}/{n}-{NODE_NAME}", t.namespace);
            let Some(uid) = k
                .handle
                .pod_by_full_name(&full)
                .and_then(|p| p.metadata.uid.clone())
            else {
                continue;
            };
            if k.handle
                .pod_status(&uid)
                .is_some_and(|s| running_and_ready(&s))
            {
                latency[i] = Some(kubelet_core::clock::elapsed(written));
                uids[i] = uid;
            }
        }
        latency.iter().all(Option::is_some).then_some(())
    })
    .await;
    let mut sorted: Vec<Duration> = latency.into_iter().flatten().collect();
    sorted.sort();
    println!(
        "static pods: manifest write → Running for {N} pods written at once: p50 {:?}, p99 {:?}, min {:?}, max {:?}",
        percentile(&sorted, 50.0),
        percentile(&sorted, 99.0),
        sorted[0],
        sorted[N - 1]
    );

    for n in &names {
        std::fs::remove_file(dir.join(format!("{n}.yaml"))).unwrap();
    }
    eventually(
        Duration::from_secs(60),
        "20 static pods removed",
        || async {
            for uid in &uids {
                if !t.sandboxes(uid).await.is_empty() {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    k.stop().await;
}
