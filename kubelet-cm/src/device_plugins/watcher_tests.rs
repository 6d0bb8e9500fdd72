//! Device plugins registering through the plugin manager (`plugins_registry`), end to end:
//! a started registry's [`DevicePluginHandler`] in a real [`PluginManager`], and a fake
//! device plugin serving `DevicePlugin` and `pluginregistration.Registration` on one socket,
//! as Go's device plugin stub does.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kubelet_core::devices::{Device, DevicePluginEvent, DevicePluginOptions, DevicePluginRegistry};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_plugin::{FakePlugin, FakeState};
use super::*;
use crate::plugin_manager::fake_plugin::{self as registrar, Statuses};
use crate::plugin_manager::{plugins_registry_dir, PluginManager, DEVICE_PLUGIN};

/// The longest any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(15);

struct Harness {
    _root: tempfile::TempDir,
    registry: GrpcDevicePluginRegistry,
    manager: PluginManager,
    events: mpsc::Receiver<DevicePluginEvent>,
    shutdown: CancellationToken,
}

async fn start() -> Harness {
    start_with(|r| r).await
}

async fn start_with(
    configure: impl FnOnce(GrpcDevicePluginRegistry) -> GrpcDevicePluginRegistry,
) -> Harness {
    let root = tempfile::tempdir().unwrap();
    let registry = configure(GrpcDevicePluginRegistry::new(
        root.path().join("device-plugins"),
    ));
    assert!(
        registry.watcher_handler().await.is_none(),
        "a handler before start"
    );
    let (tx, events) = mpsc::channel(16);
    let shutdown = CancellationToken::new();
    registry.start(tx, shutdown.clone()).await.unwrap();
    assert!(tokio::time::timeout(WAIT, registry.wait_started())
        .await
        .unwrap());
    let handler = registry
        .watcher_handler()
        .await
        .expect("no handler once started");
    let manager = PluginManager::new(
        plugins_registry_dir(root.path()),
        BTreeMap::from([(DEVICE_PLUGIN.to_string(), handler)]),
    );
    manager.start(shutdown.clone()).await.unwrap();
    Harness {
        _root: root,
        registry,
        manager,
        events,
        shutdown,
    }
}

impl Harness {
    async fn next(&mut self) -> DevicePluginEvent {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .expect("no event in time")
            .expect("the event channel closed")
    }

    /// A fake device plugin for `resource` on `<plugins_registry>/<name>`, announcing
    /// itself with `versions` and no endpoint (its socket is its endpoint).
    async fn plugin(
        &self,
        name: &str,
        resource: &str,
        versions: &[&str],
        options: api::DevicePluginOptions,
    ) -> (FakePlugin, Statuses) {
        let socket = self.manager.dir().join(name);
        let info = registrar::info(DEVICE_PLUGIN, resource, "", versions);
        let (service, statuses) = registrar::service(info);
        let state = FakeState::default();
        *state.options.lock().unwrap() = options;
        let plugin =
            FakePlugin::serve_with(socket, state, |router| router.add_service(service)).await;
        (plugin, statuses)
    }

    async fn shutdown(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, async {
            self.manager.stopped().await;
            self.registry.stopped().await;
        })
        .await
        .expect("the registry or the plugin manager did not stop");
    }
}

fn two_devices() -> Vec<Device> {
    vec![
        Device {
            id: "dev-0".into(),
            healthy: true,
            numa_nodes: vec![],
        },
        Device {
            id: "dev-1".into(),
            healthy: false,
            numa_nodes: vec![1],
        },
    ]
}

#[tokio::test]
async fn a_plugin_registers_through_the_watcher_and_is_stopped_when_its_socket_goes() {
    let mut h = start().await;
    let deprecation = h.registry.socket_dir().join(DEPRECATION_FILE);
    assert_eq!(std::fs::read(&deprecation).unwrap(), b"");

    let resource = "example.com/watched";
    let options = api::DevicePluginOptions {
        pre_start_required: true,
        get_preferred_allocation_available: false,
    };
    let (plugin, mut statuses) = h
        .plugin("watched.sock", resource, &["v1beta1"], options)
        .await;

    let endpoint = match h.next().await {
        DevicePluginEvent::Registered {
            resource: r,
            endpoint,
            options,
            plugin: client,
        } => {
            assert_eq!(r, resource);
            // From GetDevicePluginOptions.
            assert_eq!(
                options,
                DevicePluginOptions {
                    pre_start_required: true,
                    get_preferred_allocation_available: false,
                }
            );
            // The calls go to the plugin's socket.
            client
                .pre_start_container(&["dev-0".to_string()])
                .await
                .unwrap();
            endpoint
        }
        other => panic!("expected Registered, got {other:?}"),
    };
    match h.next().await {
        DevicePluginEvent::Devices {
            resource: r,
            endpoint: e,
            devices,
        } => {
            assert_eq!((r.as_str(), e), (resource, endpoint));
            assert_eq!(devices, two_devices());
        }
        other => panic!("expected Devices, got {other:?}"),
    }
    let status = statuses.next().await;
    assert!(status.plugin_registered, "{status:?}");
    assert_eq!(plugin.state.pre_start_requests.lock().unwrap().len(), 1);

    // The socket file goes while the plugin still serves its open stream: the plugin
    // manager deregisters it, which stops the endpoint.
    std::fs::remove_file(&plugin.socket).unwrap();
    match h.next().await {
        DevicePluginEvent::Stopped {
            resource: r,
            endpoint: e,
        } => assert_eq!((r.as_str(), e), (resource, endpoint)),
        other => panic!("expected Stopped, got {other:?}"),
    }
    tokio::time::timeout(WAIT, async {
        while plugin.state.open_watchers() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the kubelet kept reading the stream");
    plugin.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn invalid_plugins_are_refused_with_gos_messages() {
    let mut h = start().await;
    let (bad_name, mut bad_name_statuses) = h
        .plugin("bad-name.sock", "gpu", &["v1beta1"], Default::default())
        .await;
    let status = bad_name_statuses.next().await;
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        "RegisterPlugin error -- plugin validation failed with err: \
         invalid name of device plugin socket: the ResourceName \"gpu\" is invalid"
    );

    let (bad_version, mut bad_version_statuses) = h
        .plugin(
            "bad-version.sock",
            "example.com/old",
            &["v1alpha", "v0"],
            Default::default(),
        )
        .await;
    let status = bad_version_statuses.next().await;
    assert!(!status.plugin_registered);
    assert_eq!(
        status.error,
        "RegisterPlugin error -- plugin validation failed with err: \
         manager version, v1beta1, is not among plugin supported versions [v1alpha v0]"
    );
    // Nothing reached the device manager.
    assert!(h.events.try_recv().is_err());
    bad_name.stop().await;
    bad_version.stop().await;
    h.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_the_registration() {
    let mut h = start_with(|r| r.with_dial_timeout(Duration::from_millis(500))).await;
    let socket = h.manager.dir().join("registrar.sock");
    let missing = PathBuf::from("/nonexistent/device-plugin.sock");
    let info = registrar::info(
        DEVICE_PLUGIN,
        "example.com/elsewhere",
        &missing.display().to_string(),
        &["v1beta1"],
    );
    let mut registrar = registrar::FakeRegistrar::serve(socket, info).await;
    // The registry dials for its whole dial timeout before giving up.
    let status = registrar.statuses.next().await;
    assert!(!status.plugin_registered);
    assert!(
        status.error.starts_with(
            "RegisterPlugin error -- plugin registration failed with err: \
             failed to dial device plugin with socketPath /nonexistent/device-plugin.sock: "
        ),
        "{}",
        status.error
    );
    assert!(h.events.try_recv().is_err());
    registrar.stop().await;
    h.shutdown().await;
}
