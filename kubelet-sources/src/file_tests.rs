//! Tests of `file`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use kubelet_core::pod as podutil;

const WAIT: Duration = Duration::from_secs(10);

fn pod_yaml(name: &str, image: &str) -> String {
    format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
}

struct Running {
    rx: mpsc::Receiver<PodUpdate>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), SourceError>>,
}

impl Running {
    fn start(path: PathBuf, check_frequency: Duration) -> Running {
        let source = FileSource::new(Config {
            path,
            node_name: "node-a".into(),
            check_frequency,
        });
        let (tx, rx) = mpsc::channel(8);
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move { source.run(tx, token).await });
        Running { rx, shutdown, task }
    }

    async fn next(&mut self) -> PodUpdate {
        let update = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("timed out waiting for an update")
            .expect("source stopped");
        assert_eq!(update.op, PodOperation::Set);
        assert_eq!(update.source, "file");
        update
    }

    /// Waits for the first update whose pod names match `names`.
    async fn until_names(&mut self, names: &[&str]) -> PodUpdate {
        loop {
            let update = self.next().await;
            if names_of(&update) == names {
                return update;
            }
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let res = tokio::time::timeout(WAIT, self.task)
            .await
            .unwrap()
            .unwrap();
        assert!(res.is_ok(), "{res:?}");
    }
}

fn names_of(update: &PodUpdate) -> Vec<String> {
    let mut v: Vec<String> = update
        .pods
        .iter()
        .map(|p| podutil::name(p).to_string())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_lifecycle_add_edit_remove() {
    let dir = tempfile::tempdir().unwrap();
    // A long check frequency: changes must be seen through inotify.
    let mut src = Running::start(dir.path().to_path_buf(), Duration::from_secs(3600));
    let first = src.next().await;
    assert!(
        first.pods.is_empty(),
        "first snapshot is sent even when empty"
    );

    tokio::fs::write(dir.path().join("web.yaml"), pod_yaml("web", "busybox:1"))
        .await
        .unwrap();
    let added = src.until_names(&["web-node-a"]).await;
    let uid1 = podutil::uid(&added.pods[0]).to_string();
    assert!(!uid1.is_empty());
    assert_eq!(podutil::source(&added.pods[0]), "file");

    tokio::fs::write(dir.path().join("web.yaml"), pod_yaml("web", "busybox:2"))
        .await
        .unwrap();
    let edited = loop {
        let u = src.next().await;
        if u.pods.len() == 1 && podutil::uid(&u.pods[0]) != uid1 {
            break u;
        }
    };
    let image = edited.pods[0].spec.as_ref().unwrap().containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("busybox:2"));

    tokio::fs::remove_file(dir.path().join("web.yaml"))
        .await
        .unwrap();
    src.until_names(&[]).await;
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_and_hidden_files_do_not_affect_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, pod_yaml("good", "busybox:1")).unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".hidden.yaml"),
        pod_yaml("hidden", "busybox:1"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(
        dir.path().join("sub/nested.yaml"),
        pod_yaml("nested", "busybox:1"),
    )
    .unwrap();
    let mut src = Running::start(dir.path().to_path_buf(), Duration::from_secs(3600));
    let first = src.next().await;
    assert_eq!(names_of(&first), ["good-node-a"]);
    let good_uid = podutil::uid(&first.pods[0]).to_string();

    // A second file with two pods; then it becomes partially written: its pods stay.
    let two = dir.path().join("two.yaml");
    tokio::fs::write(
        &two,
        format!(
            "{}---\n{}",
            pod_yaml("a", "busybox:1"),
            pod_yaml("b", "busybox:1")
        ),
    )
    .await
    .unwrap();
    let u = src
        .until_names(&["a-node-a", "b-node-a", "good-node-a"])
        .await;
    let before = u.pods.clone();
    tokio::fs::write(&two, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    imag")
            .await
            .unwrap();
    // Removing `good.yaml` then proves the broken file's last good pods stayed.
    tokio::fs::remove_file(&good).await.unwrap();
    let u = src.until_names(&["a-node-a", "b-node-a"]).await;
    for p in &u.pods {
        assert!(before.contains(p), "pods of the broken file changed: {p:?}");
    }
    assert!(u.pods.iter().all(|p| podutil::uid(p) != good_uid));
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_file_path_and_missing_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.json");
    // A long check frequency: the parent directory's watch must notice the new file.
    let mut src = Running::start(file.clone(), Duration::from_secs(3600));
    // Missing path: an empty snapshot marks the source as seen.
    assert!(src.next().await.pods.is_empty());
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox:1"}]}}"#;
    // Written elsewhere and renamed into place, as editors and config tools do.
    let tmp = dir.path().join(".pod.json.tmp");
    tokio::fs::write(&tmp, json).await.unwrap();
    tokio::fs::rename(&tmp, &file).await.unwrap();
    let u = src.until_names(&["j-node-a"]).await;
    let uid = podutil::uid(&u.pods[0]).to_string();
    src.stop().await;

    // A restart with the unchanged manifest yields the same UID.
    let mut again = Running::start(file.clone(), Duration::from_secs(3600));
    let u = again.next().await;
    assert_eq!(names_of(&u), ["j-node-a"]);
    assert_eq!(podutil::uid(&u.pods[0]), uid);
    // Removing the file empties the set (noticed through the parent's watch).
    tokio::fs::remove_file(&file).await.unwrap();
    again.until_names(&[]).await;
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_created_after_start_is_picked_up() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("manifests");
    let mut src = Running::start(dir.clone(), Duration::from_millis(100));
    assert!(src.next().await.pods.is_empty());
    tokio::fs::create_dir(&dir).await.unwrap();
    tokio::fs::write(dir.join("a.yaml"), pod_yaml("a", "busybox:1"))
        .await
        .unwrap();
    src.until_names(&["a-node-a"]).await;
    // Once the directory is watched, later files are seen too.
    tokio::fs::write(dir.join("b.yaml"), pod_yaml("b", "busybox:1"))
        .await
        .unwrap();
    src.until_names(&["a-node-a", "b-node-a"]).await;
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_full_names_across_files_keep_the_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), pod_yaml("same", "busybox:1")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), pod_yaml("same", "busybox:2")).unwrap();
    let mut src = Running::start(dir.path().to_path_buf(), Duration::from_secs(3600));
    let u = src.next().await;
    assert_eq!(names_of(&u), ["same-node-a"]);
    let image = u.pods[0].spec.as_ref().unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("busybox:1"));
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_rescans_send_nothing_new() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), pod_yaml("a", "busybox:1")).unwrap();
    let mut src = Running::start(dir.path().to_path_buf(), Duration::from_millis(20));
    let first = src.next().await;
    assert_eq!(first.pods.len(), 1);
    // Many rescans happen meanwhile; a touch without content change sends nothing either.
    std::fs::write(dir.path().join("a.yaml"), pod_yaml("a", "busybox:1")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), pod_yaml("b", "busybox:1")).unwrap();
    let next = src.next().await;
    assert_eq!(names_of(&next), ["a-node-a", "b-node-a"]);
    // The unchanged pod is identical, config.seen included.
    assert!(next.pods.contains(&first.pods[0]));
    src.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_entries_are_skipped_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("good.yaml"), pod_yaml("good", "busybox:1")).unwrap();
    // A FIFO: opening it for reading would block forever.
    let fifo = d.join("fifo.yaml");
    let ok = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(ok.is_ok_and(|s| s.success()), "mkfifo");
    // Symlinks: to an endless device, a loop, a dangling target, a good manifest elsewhere.
    std::os::unix::fs::symlink("/dev/zero", d.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink(d.join("loop.yaml"), d.join("loop.yaml")).unwrap();
    std::os::unix::fs::symlink(d.join("missing"), d.join("dangling.yaml")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("l.yaml"),
        pod_yaml("linked", "busybox:1"),
    )
    .unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("l.yaml"), d.join("linked.yaml")).unwrap();
    // A file over the size limit (sparse: no disk used).
    let big = std::fs::File::create(d.join("big.yaml")).unwrap();
    big.set_len(MAX_MANIFEST_BYTES + 1).unwrap();
    // Not UTF-8.
    std::fs::write(d.join("binary.yaml"), [0xffu8, 0xfe, 0x00, 0x80]).unwrap();
    let mut src = Running::start(d.to_path_buf(), Duration::from_secs(3600));
    let first = src.next().await;
    assert_eq!(names_of(&first), ["good-node-a", "linked-node-a"]);
    src.stop().await;

    // A single-file path that is a FIFO is refused, not opened.
    let mut single = Running::start(fifo, Duration::from_secs(3600));
    assert!(single.next().await.pods.is_empty());
    single.stop().await;
}

/// Writes `content` to `path` and dates its modification an hour back (a settled file: see
/// `RACY_STAMP`).
fn write_settled(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(kubelet_core::clock::wall_now() - Duration::from_secs(3600))
        .unwrap();
}

/// The periodic check reads only what changed: an unchanged directory costs a `stat` per
/// file and reports nothing; a touched file is read again but reports nothing either (same
/// bytes); an edit, a removal and a new file are reported; a file modified just now is read
/// every time until its stamp has settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rescans_read_only_files_whose_stamp_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
    write_settled(&a, &pod_yaml("a", "busybox:1"));
    write_settled(&b, &pod_yaml("b", "busybox:1"));
    let mut scanner = Scanner::new(
        Config {
            path: dir.path().to_path_buf(),
            node_name: "node-a".into(),
            check_frequency: Duration::from_secs(3600),
        },
        None,
    );
    let names = |pods: &[Pod]| -> Vec<String> {
        let mut v: Vec<String> = pods.iter().map(|p| podutil::name(p).to_string()).collect();
        v.sort();
        v
    };
    let image = |pods: &[Pod], name: &str| -> String {
        let p = pods.iter().find(|p| podutil::name(p) == name).unwrap();
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    let first = scanner.scan().await.expect("the first scan reports");
    assert_eq!(names(&first), ["a-node-a", "b-node-a"]);
    assert_eq!(scanner.files_read, 2);

    assert!(scanner.scan().await.is_none(), "nothing changed");
    assert_eq!(scanner.files_read, 2, "unchanged files are not read");

    write_settled(&a, &pod_yaml("a", "busybox:1"));
    assert!(scanner.scan().await.is_none(), "same bytes written again");
    assert_eq!(scanner.files_read, 3, "the rewritten file was read");

    write_settled(&b, &pod_yaml("b", "busybox:2"));
    let edited = scanner.scan().await.expect("an edit is reported");
    assert_eq!(image(&edited, "b-node-a"), "busybox:2");
    assert_eq!(scanner.files_read, 4);

    std::fs::remove_file(&a).unwrap();
    let removed = scanner.scan().await.expect("a removal is reported");
    assert_eq!(names(&removed), ["b-node-a"]);
    assert_eq!(scanner.files_read, 4);

    // Just written: read at every scan until settled; a second same-size write within the
    // file-time tick of the first is therefore not missed.
    let c = dir.path().join("c.yaml");
    std::fs::write(&c, pod_yaml("c", "busybox:1")).unwrap();
    let added = scanner.scan().await.expect("a new file is reported");
    assert_eq!(names(&added), ["b-node-a", "c-node-a"]);
    assert_eq!(scanner.files_read, 5);
    std::fs::write(&c, pod_yaml("c", "busybox:3")).unwrap();
    let rewritten = scanner
        .scan()
        .await
        .expect("a quick second write is reported");
    assert_eq!(image(&rewritten, "c-node-a"), "busybox:3");
    assert!(scanner.scan().await.is_none());
    assert_eq!(
        scanner.files_read, 7,
        "the recent file is read at every scan"
    );
}
