//! The plugin manager over real sockets, real inotify and a temporary directory, with fake
//! plugins ([`super::fake_plugin`]) and a handler that records its calls.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_plugin::{self, FakeRegistrar};
use super::*;

/// The longest any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(15);
/// How long "nothing happens" is watched for: more than a reconcile period.
const QUIET: Duration = Duration::from_millis(1500);

const TYPE: &str = "TestPlugin";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Validate {
        name: String,
        endpoint: String,
        versions: Vec<String>,
    },
    Register {
        name: String,
        endpoint: String,
        versions: Vec<String>,
    },
    Deregister {
        name: String,
    },
}

/// Records every call; refuses or fails as told.
struct FakeHandler {
    calls: mpsc::Sender<Call>,
    refuse: Mutex<Option<String>>,
    /// The next this many registrations fail.
    failures: Mutex<usize>,
}

#[async_trait]
impl PluginHandler for FakeHandler {
    fn validate_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        self.calls
            .try_send(Call::Validate {
                name: name.into(),
                endpoint: endpoint.into(),
                versions: versions.to_vec(),
            })
            .unwrap();
        match self.refuse.lock().unwrap().clone() {
            Some(message) => Err(message),
            None => Ok(()),
        }
    }

    async fn register_plugin(
        &self,
        name: &str,
        endpoint: &str,
        versions: &[String],
    ) -> Result<(), String> {
        self.calls
            .try_send(Call::Register {
                name: name.into(),
                endpoint: endpoint.into(),
                versions: versions.to_vec(),
            })
            .unwrap();
        let mut failures = self.failures.lock().unwrap();
        if *failures > 0 {
            *failures -= 1;
            return Err("the handler is not ready".to_string());
        }
        Ok(())
    }

    fn deregister_plugin(&self, name: &str) {
        self.calls
            .try_send(Call::Deregister { name: name.into() })
            .unwrap();
    }
}

struct Harness {
    _root: tempfile::TempDir,
    dir: PathBuf,
    manager: PluginManager,
    handler: Arc<FakeHandler>,
    calls: mpsc::Receiver<Call>,
    shutdown: CancellationToken,
}

/// A manager of `<root>/plugins_registry` with the fake handler for [`TYPE`], not started.
fn harness(root: tempfile::TempDir) -> Harness {
    let dir = plugins_registry_dir(root.path());
    let (tx, calls) = mpsc::channel(64);
    let handler = Arc::new(FakeHandler {
        calls: tx,
        refuse: Mutex::new(None),
        failures: Mutex::new(0),
    });
    let handlers = BTreeMap::from([(TYPE.to_string(), handler.clone() as Arc<dyn PluginHandler>)]);
    let manager =
        PluginManager::new(dir.clone(), handlers).with_dial_timeout(Duration::from_secs(2));
    Harness {
        _root: root,
        dir,
        manager,
        handler,
        calls,
        shutdown: CancellationToken::new(),
    }
}

async fn started() -> Harness {
    let h = harness(tempfile::tempdir().unwrap());
    h.manager.start(h.shutdown.clone()).await.unwrap();
    h
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Harness {
    async fn next_call(&mut self) -> Call {
        tokio::time::timeout(WAIT, self.calls.recv())
            .await
            .expect("no handler call in time")
            .expect("the handler is gone")
    }

    /// The validation and registration of `name` at `endpoint`.
    async fn expect_registration(&mut self, name: &str, endpoint: &Path, versions: &[&str]) {
        let endpoint = endpoint.display().to_string();
        assert_eq!(
            self.next_call().await,
            Call::Validate {
                name: name.into(),
                endpoint: endpoint.clone(),
                versions: strings(versions),
            }
        );
        assert_eq!(
            self.next_call().await,
            Call::Register {
                name: name.into(),
                endpoint,
                versions: strings(versions),
            }
        );
    }

    async fn no_call(&mut self) {
        tokio::time::sleep(QUIET).await;
        if let Ok(call) = self.calls.try_recv() {
            panic!("unexpected handler call: {call:?}");
        }
    }

    async fn plugin(&self, relative: &str, name: &str) -> FakeRegistrar {
        let info = fake_plugin::info(TYPE, name, "", &["v1", "v2"]);
        FakeRegistrar::serve(self.dir.join(relative), info).await
    }

    async fn shutdown(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.manager.stopped())
            .await
            .expect("the plugin manager did not stop");
    }
}

#[tokio::test]
async fn a_plugin_is_registered_deregistered_and_registered_again() {
    let mut h = started().await;
    let mode = std::fs::metadata(&h.dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o750);

    let mut plugin = h.plugin("example.sock", "example").await;
    let socket = plugin.socket.clone();
    h.expect_registration("example", &socket, &["v1", "v2"])
        .await;
    let status = plugin.statuses.next().await;
    assert!(status.plugin_registered, "{status:?}");
    assert_eq!(status.error, "");

    // The socket goes: the handler deregisters the plugin, once.
    plugin.stop().await;
    assert_eq!(
        h.next_call().await,
        Call::Deregister {
            name: "example".into()
        }
    );
    h.no_call().await;

    // It comes back.
    let mut plugin = h.plugin("example.sock", "example").await;
    h.expect_registration("example", &socket, &["v1", "v2"])
        .await;
    assert!(plugin.statuses.next().await.plugin_registered);
    h.no_call().await;
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn plugins_in_new_subdirectories_are_found() {
    let mut h = started().await;
    let nested = h.dir.join("vendor/driver");
    std::fs::create_dir_all(&nested).unwrap();
    let mut plugin = h.plugin("vendor/driver/deep.sock", "deep").await;
    h.expect_registration("deep", &nested.join("deep.sock"), &["v1", "v2"])
        .await;
    assert!(plugin.statuses.next().await.plugin_registered);

    // Removing the whole directory deregisters it.
    std::fs::remove_dir_all(h.dir.join("vendor")).unwrap();
    assert_eq!(
        h.next_call().await,
        Call::Deregister {
            name: "deep".into()
        }
    );
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn sockets_present_before_start_are_found() {
    let root = tempfile::tempdir().unwrap();
    let dir = plugins_registry_dir(root.path());
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let mut top = FakeRegistrar::serve(
        dir.join("top.sock"),
        fake_plugin::info(TYPE, "top", "", &["v1"]),
    )
    .await;
    let mut below = FakeRegistrar::serve(
        dir.join("sub/below.sock"),
        fake_plugin::info(TYPE, "below", "", &["v1"]),
    )
    .await;

    let mut h = harness(root);
    h.manager.start(h.shutdown.clone()).await.unwrap();

    let mut registered = Vec::new();
    for _ in 0..4 {
        if let Call::Register { name, endpoint, .. } = h.next_call().await {
            registered.push((name, endpoint));
        }
    }
    registered.sort();
    assert_eq!(
        registered,
        vec![
            (
                "below".to_string(),
                dir.join("sub/below.sock").display().to_string()
            ),
            (
                "top".to_string(),
                dir.join("top.sock").display().to_string()
            ),
        ]
    );
    assert!(top.statuses.next().await.plugin_registered);
    assert!(below.statuses.next().await.plugin_registered);
    h.no_call().await;
    top.stop().await;
    below.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn the_endpoint_a_plugin_gives_is_handed_over() {
    let mut h = started().await;
    let info = fake_plugin::info(TYPE, "csi.example.com", "/run/csi/driver.sock", &["1.0.0"]);
    let mut plugin = FakeRegistrar::serve(h.dir.join("registrar.sock"), info).await;
    h.expect_registration(
        "csi.example.com",
        Path::new("/run/csi/driver.sock"),
        &["1.0.0"],
    )
    .await;
    assert!(plugin.statuses.next().await.plugin_registered);
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn an_unknown_type_is_refused_with_gos_message() {
    let mut h = started().await;
    let info = fake_plugin::info("NoSuchPlugin", "mystery", "", &["v1"]);
    let mut plugin = FakeRegistrar::serve(h.dir.join("mystery.sock"), info).await;
    let status = plugin.statuses.next().await;
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        format!(
            "RegisterPlugin error -- no handler registered for plugin type: NoSuchPlugin at socket {}",
            plugin.socket.display()
        )
    );
    // No handler was asked, and the socket is tried again after the back-off.
    let again = plugin.statuses.next().await;
    assert_eq!(again, status);
    h.no_call().await;
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_refused_plugin_is_notified_and_tried_again() {
    let mut h = started().await;
    *h.handler.refuse.lock().unwrap() = Some("bad name".to_string());
    let mut plugin = h.plugin("refused.sock", "refused").await;
    let status = plugin.statuses.next().await;
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        "RegisterPlugin error -- plugin validation failed with err: bad name"
    );
    assert!(matches!(h.next_call().await, Call::Validate { .. }));

    // Accepted on a later try (after the back-off); never deregistered, as never registered.
    *h.handler.refuse.lock().unwrap() = None;
    let socket = plugin.socket.clone();
    loop {
        let status = plugin.statuses.next().await;
        if status.plugin_registered {
            break;
        }
    }
    let mut calls = Vec::new();
    while let Ok(call) = h.calls.try_recv() {
        calls.push(call);
    }
    assert_eq!(
        calls.last(),
        Some(&Call::Register {
            name: "refused".into(),
            endpoint: socket.display().to_string(),
            versions: strings(&["v1", "v2"]),
        })
    );
    assert!(!calls.iter().any(|c| matches!(c, Call::Deregister { .. })));
    plugin.stop().await;
    assert!(matches!(h.next_call().await, Call::Deregister { .. }));
    h.shutdown().await;
}

#[tokio::test]
async fn a_failed_registration_is_notified_and_retried_after_a_back_off() {
    let mut h = started().await;
    *h.handler.failures.lock().unwrap() = 1;
    let mut plugin = h.plugin("flaky.sock", "flaky").await;
    let socket = plugin.socket.clone();
    h.expect_registration("flaky", &socket, &["v1", "v2"]).await;
    let failed_at = kubelet_core::clock::monotonic_now();
    let status = plugin.statuses.next().await;
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        "RegisterPlugin error -- plugin registration failed with err: the handler is not ready"
    );
    h.expect_registration("flaky", &socket, &["v1", "v2"]).await;
    assert!(kubelet_core::clock::elapsed(failed_at) >= BACKOFF_INITIAL - Duration::from_millis(50));
    assert!(plugin.statuses.next().await.plugin_registered);
    plugin.stop().await;
    assert_eq!(
        h.next_call().await,
        Call::Deregister {
            name: "flaky".into()
        }
    );
    h.shutdown().await;
}

#[tokio::test]
async fn hidden_names_and_other_files_are_ignored() {
    let mut h = started().await;
    // A plugin behind a hidden name, in a hidden directory, and plain files.
    let mut hidden = h.plugin(".hidden.sock", "hidden").await;
    std::fs::create_dir(h.dir.join(".cache")).unwrap();
    let mut in_hidden_dir = h.plugin(".cache/inner.sock", "inner").await;
    std::fs::write(h.dir.join("notes.sock"), b"not a socket").unwrap();
    std::fs::create_dir(h.dir.join("empty")).unwrap();
    h.no_call().await;
    assert!(hidden.statuses.none_yet());
    assert!(in_hidden_dir.statuses.none_yet());

    // The watcher still works.
    let mut plugin = h.plugin("visible.sock", "visible").await;
    let socket = plugin.socket.clone();
    h.expect_registration("visible", &socket, &["v1", "v2"])
        .await;
    assert!(plugin.statuses.next().await.plugin_registered);
    // Removing the ignored ones changes nothing.
    hidden.stop().await;
    in_hidden_dir.stop().await;
    std::fs::remove_file(h.dir.join("notes.sock")).unwrap();
    h.no_call().await;
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_socket_nobody_serves_is_tried_again_without_calling_a_handler() {
    let mut h = started().await;
    // Bound but never accepting: no plugin answers.
    let path = h.dir.join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    h.no_call().await;
    drop(listener);
    std::fs::remove_file(&path).unwrap();
    h.no_call().await;
    h.shutdown().await;
}

#[tokio::test]
async fn start_is_once_and_stop_ends_everything() {
    let h = started().await;
    assert!(matches!(
        h.manager.start(h.shutdown.clone()).await,
        Err(PluginManagerError::AlreadyStarted)
    ));
    h.shutdown().await;

    // A directory that cannot be made.
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let manager = PluginManager::new(file.join("plugins_registry"), BTreeMap::new());
    let err = manager.start(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, PluginManagerError::Directory { .. }), "{err}");
    // Over at once.
    tokio::time::timeout(WAIT, manager.stopped()).await.unwrap();
}
