//! The registry and the plugin client over real gRPC on unix sockets in a temporary
//! directory, against the fake plugin of [`super::fake_plugin`].

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::devices::{
    ContainerAllocation, Device, DeviceMount, DeviceNode, DevicePlugin, DevicePluginError,
    DevicePluginEvent, DevicePluginOptions, DevicePluginRegistry,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fake_plugin::{self, FakePlugin};
use super::*;

/// The longest any wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

struct Harness {
    _dir: tempfile::TempDir,
    registry: GrpcDevicePluginRegistry,
    events: mpsc::Receiver<DevicePluginEvent>,
    shutdown: CancellationToken,
}

async fn start(capacity: usize) -> Harness {
    start_with(capacity, |r| r).await
}

async fn start_with(
    capacity: usize,
    configure: impl FnOnce(GrpcDevicePluginRegistry) -> GrpcDevicePluginRegistry,
) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let registry = configure(GrpcDevicePluginRegistry::new(
        dir.path().join("device-plugins"),
    ));
    let (tx, events) = mpsc::channel(capacity);
    let shutdown = CancellationToken::new();
    registry.start(tx, shutdown.clone()).await.unwrap();
    Harness {
        _dir: dir,
        registry,
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

    async fn no_event_for(&mut self, quiet: Duration) {
        tokio::time::sleep(quiet).await;
        match self.events.try_recv() {
            Err(mpsc::error::TryRecvError::Empty) => {}
            other => panic!("unexpected event: {other:?}"),
        }
    }

    async fn plugin(&self, name: &str) -> FakePlugin {
        FakePlugin::serve(self.registry.socket_dir().join(name)).await
    }

    async fn register(&self, resource: &str, endpoint: &str) -> Result<(), tonic::Status> {
        let request = fake_plugin::register_request(resource, endpoint);
        fake_plugin::register(&self.registry.socket_path(), request).await
    }

    /// Registers `resource` on a new fake plugin and reads its first two events.
    async fn registered(
        &mut self,
        resource: &str,
        socket: &str,
    ) -> (FakePlugin, u64, Arc<dyn DevicePlugin>) {
        let plugin = self.plugin(socket).await;
        self.register(resource, socket).await.unwrap();
        let (r, endpoint, _, handle) = registered(self.next().await);
        assert_eq!(r, resource);
        let (r, e, _) = devices(self.next().await);
        assert_eq!((r.as_str(), e), (resource, endpoint));
        (plugin, endpoint, handle)
    }

    async fn shutdown(self) {
        let socket = self.registry.socket_path();
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.registry.stopped())
            .await
            .expect("the registry did not stop");
        assert!(!socket.exists(), "the kubelet socket is left behind");
    }
}

fn registered(
    event: DevicePluginEvent,
) -> (String, u64, DevicePluginOptions, Arc<dyn DevicePlugin>) {
    match event {
        DevicePluginEvent::Registered {
            resource,
            endpoint,
            options,
            plugin,
        } => (resource, endpoint, options, plugin),
        other => panic!("expected Registered, got {other:?}"),
    }
}

fn devices(event: DevicePluginEvent) -> (String, u64, Vec<Device>) {
    match event {
        DevicePluginEvent::Devices {
            resource,
            endpoint,
            devices,
        } => (resource, endpoint, devices),
        other => panic!("expected Devices, got {other:?}"),
    }
}

fn stopped(event: DevicePluginEvent) -> (String, u64) {
    match event {
        DevicePluginEvent::Stopped { resource, endpoint } => (resource, endpoint),
        other => panic!("expected Stopped, got {other:?}"),
    }
}

fn ids(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn registrations(resource: &str) -> u64 {
    kubelet_core::metrics::global()
        .device_plugin_registrations
        .get(resource)
}

#[tokio::test]
async fn a_registration_reports_registered_then_every_device_list() {
    let mut h = start(16).await;
    let resource = "example.com/registered";
    let plugin = h.plugin("registered.sock").await;
    h.register(resource, "registered.sock").await.unwrap();

    let (r, endpoint, options, _) = registered(h.next().await);
    assert_eq!(r, resource);
    assert_eq!(
        options,
        DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        }
    );
    let want = vec![
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
    ];
    assert_eq!(
        devices(h.next().await),
        (resource.to_string(), endpoint, want)
    );

    plugin
        .push(vec![fake_plugin::device("dev-2", "Healthy", &[0, 1])])
        .await;
    let want = vec![Device {
        id: "dev-2".into(),
        healthy: true,
        numa_nodes: vec![0, 1],
    }];
    assert_eq!(
        devices(h.next().await),
        (resource.to_string(), endpoint, want)
    );
    assert_eq!(registrations(resource), 1);

    h.shutdown().await;
    plugin.stop().await;
}

#[tokio::test]
async fn options_are_the_default_when_the_request_has_none() {
    let mut h = start(16).await;
    let plugin = h.plugin("plain.sock").await;
    let mut request = fake_plugin::register_request("example.com/plain", "plain.sock");
    request.options = None;
    fake_plugin::register(&h.registry.socket_path(), request)
        .await
        .unwrap();
    let (_, _, options, _) = registered(h.next().await);
    assert_eq!(options, DevicePluginOptions::default());
    h.shutdown().await;
    plugin.stop().await;
}

#[tokio::test]
async fn plugin_calls_round_trip() {
    let mut h = start(16).await;
    let (plugin, _, handle) = h.registered("example.com/calls", "calls.sock").await;

    let got = handle.allocate(&ids(&["dev-0", "dev-1"])).await.unwrap();
    let want = ContainerAllocation {
        envs: [("FAKE_DEVICES".to_string(), "dev-0,dev-1".to_string())].into(),
        mounts: vec![DeviceMount {
            container_path: "/var/fake".into(),
            host_path: "/srv/fake".into(),
            read_only: true,
        }],
        devices: vec![
            DeviceNode {
                container_path: "/dev/dev-0".into(),
                host_path: "/dev/fake-dev-0".into(),
                permissions: "rw".into(),
            },
            DeviceNode {
                container_path: "/dev/dev-1".into(),
                host_path: "/dev/fake-dev-1".into(),
                permissions: "rw".into(),
            },
        ],
        annotations: [(
            "fake.example/devices".to_string(),
            "dev-0,dev-1".to_string(),
        )]
        .into(),
        cdi_devices: ids(&["fake.example/gpu=dev-0", "fake.example/gpu=dev-1"]),
    };
    assert_eq!(got, want);
    let asked = plugin.state.allocate_requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].container_requests.len(), 1);
    assert_eq!(
        asked[0].container_requests[0].devices_ids,
        ids(&["dev-0", "dev-1"])
    );

    handle.pre_start_container(&ids(&["dev-1"])).await.unwrap();
    let asked = plugin.state.pre_start_requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].devices_ids, ids(&["dev-1"]));

    let preferred = handle
        .preferred_allocation(&ids(&["a", "b", "c"]), &ids(&["c"]), 2)
        .await
        .unwrap();
    assert_eq!(preferred, ids(&["c", "a"]));
    let asked = plugin.state.preferred_requests.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    let c = &asked[0].container_requests[0];
    assert_eq!(c.available_device_i_ds, ids(&["a", "b", "c"]));
    assert_eq!(c.must_include_device_i_ds, ids(&["c"]));
    assert_eq!(c.allocation_size, 2);

    // Failures keep the call's name and the plugin's message.
    plugin.state.fail_pre_start.store(true, Ordering::SeqCst);
    match handle.pre_start_container(&ids(&["dev-0"])).await {
        Err(DevicePluginError::Rpc {
            resource,
            call,
            message,
        }) => {
            assert_eq!(resource, "example.com/calls");
            assert_eq!(call, "PreStartContainer");
            assert_eq!(
                message,
                "rpc error: code = Internal desc = pre-start refused"
            );
        }
        other => panic!("unexpected: {other:?}"),
    }
    plugin.state.empty_allocate.store(true, Ordering::SeqCst);
    match handle.allocate(&ids(&["dev-0"])).await {
        Err(DevicePluginError::Rpc { call, message, .. }) => {
            assert_eq!(call, "Allocate");
            assert!(
                message.starts_with("no containers return in allocation response"),
                "{message}"
            );
        }
        other => panic!("unexpected: {other:?}"),
    }

    h.shutdown().await;
    plugin.stop().await;
}

#[tokio::test]
async fn bad_registrations_get_gos_messages_and_report_nothing() {
    let mut h = start(16).await;
    let plugin = h.plugin("bad.sock").await;

    let mut request = fake_plugin::register_request("example.com/bad-version", "bad.sock");
    request.version = "v1alpha".to_string();
    let status = fake_plugin::register(&h.registry.socket_path(), request)
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    assert_eq!(
        status.message(),
        "requested API version \"v1alpha\" is not supported by kubelet. \
         Supported version is [\"v1beta1\"]"
    );

    let status = h.register("bad-resource", "bad.sock").await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unknown);
    assert_eq!(
        status.message(),
        "the ResourceName \"bad-resource\" is invalid"
    );
    let status = h
        .register("kubernetes.io/bad-resource", "bad.sock")
        .await
        .unwrap_err();
    assert_eq!(
        status.message(),
        "the ResourceName \"kubernetes.io/bad-resource\" is invalid"
    );

    h.no_event_for(Duration::from_millis(300)).await;
    assert_eq!(plugin.state.open_watchers(), 0, "the plugin was dialled");
    // Refused requests are counted too.
    assert_eq!(registrations("example.com/bad-version"), 1);
    assert_eq!(registrations("bad-resource"), 1);
    h.shutdown().await;
    plugin.stop().await;
}

#[tokio::test]
async fn start_removes_stale_files_but_keeps_the_checkpoint_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let socket_dir = dir.path().join("device-plugins");
    std::fs::create_dir(&socket_dir).unwrap();
    std::fs::write(socket_dir.join(CHECKPOINT_FILE), b"{}").unwrap();
    std::fs::write(socket_dir.join(KUBELET_SOCKET), b"").unwrap();
    std::fs::write(socket_dir.join("stale-file"), b"").unwrap();
    let stale = std::os::unix::net::UnixListener::bind(socket_dir.join("stale.sock")).unwrap();
    drop(stale);
    std::fs::create_dir(socket_dir.join("subdir")).unwrap();
    std::fs::write(socket_dir.join("subdir/kept"), b"").unwrap();

    let registry = GrpcDevicePluginRegistry::new(socket_dir.clone());
    let (tx, _rx) = mpsc::channel(4);
    let shutdown = CancellationToken::new();
    registry.start(tx, shutdown.clone()).await.unwrap();

    let mut names: Vec<String> = std::fs::read_dir(&socket_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, [KUBELET_SOCKET, CHECKPOINT_FILE, "subdir"]);
    assert!(socket_dir.join("subdir/kept").exists());
    let kind = std::fs::metadata(registry.socket_path())
        .unwrap()
        .file_type();
    assert!(kind.is_socket(), "{kind:?}");

    shutdown.cancel();
    tokio::time::timeout(WAIT, registry.stopped())
        .await
        .unwrap();
    assert!(!registry.socket_path().exists());
    assert!(socket_dir.join(CHECKPOINT_FILE).exists());
}

#[tokio::test]
async fn start_makes_the_directory_0750_and_fails_when_it_cannot() {
    let h = start(4).await;
    let mode = std::fs::metadata(h.registry.socket_dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777 & !0o750, 0, "{mode:o}");
    assert_eq!(mode & 0o700, 0o700, "{mode:o}");

    // A second start of the same registry is refused.
    let (tx, _rx) = mpsc::channel(4);
    let err = h.registry.start(tx, CancellationToken::new()).await;
    assert!(
        matches!(err, Err(DevicePluginError::Serve { ref message, .. }) if message == "already started"),
        "{err:?}"
    );
    h.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), b"").unwrap();
    let registry = GrpcDevicePluginRegistry::new(dir.path().join("file/device-plugins"));
    let (tx, _rx) = mpsc::channel(4);
    let err = registry.start(tx, CancellationToken::new()).await;
    assert!(
        matches!(err, Err(DevicePluginError::Serve { .. })),
        "{err:?}"
    );
    // Nothing to wait for.
    tokio::time::timeout(WAIT, registry.stopped())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_plugin_going_away_is_reported_stopped_and_its_calls_fail() {
    let mut h = start(16).await;
    let resource = "example.com/going";
    let (plugin, endpoint, handle) = h.registered(resource, "going.sock").await;
    plugin.stop().await;
    assert_eq!(stopped(h.next().await), (resource.to_string(), endpoint));

    match handle.allocate(&ids(&["dev-0"])).await {
        Err(DevicePluginError::Rpc { message, .. }) => {
            assert!(message.contains("has been stopped"), "{message}")
        }
        other => panic!("unexpected: {other:?}"),
    }
    assert!(format!("{handle:?}").contains("stopped: true"));
    h.no_event_for(Duration::from_millis(200)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn registering_again_gets_a_higher_endpoint_and_both_are_reported() {
    let mut h = start(16).await;
    let resource = "example.com/again";
    let (first, e1, _) = h.registered(resource, "again-1.sock").await;
    let (second, e2, _) = h.registered(resource, "again-2.sock").await;
    assert!(e2 > e1, "{e2} <= {e1}");

    // The old endpoint's end is reported under its own number; the new one goes on.
    first.stop().await;
    assert_eq!(stopped(h.next().await), (resource.to_string(), e1));
    second
        .push(vec![fake_plugin::device("dev-9", "Healthy", &[])])
        .await;
    let (_, e, list) = devices(h.next().await);
    assert_eq!((e, list.len()), (e2, 1));

    h.shutdown().await;
    second.stop().await;
}

#[tokio::test]
async fn an_unreachable_plugin_reports_nothing_and_a_late_one_is_dialled() {
    let mut h = start_with(16, |r| r.with_dial_timeout(Duration::from_secs(1))).await;
    h.register("example.com/missing", "missing.sock")
        .await
        .unwrap();
    h.no_event_for(Duration::from_millis(1500)).await;

    // The kubelet keeps trying until the plugin listens.
    h.register("example.com/late", "late.sock").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let plugin = h.plugin("late.sock").await;
    let (resource, _, _, _) = registered(h.next().await);
    assert_eq!(resource, "example.com/late");

    h.shutdown().await;
    plugin.stop().await;
}

#[tokio::test]
async fn shutdown_ends_every_task_even_on_a_full_channel() {
    // Room for Registered only: the task then waits to send Devices.
    let mut h = start(1).await;
    let plugin = h.plugin("full.sock").await;
    h.register("example.com/full", "full.sock").await.unwrap();
    // Wait until the plugin's stream is open, so the task is past Registered.
    tokio::time::timeout(WAIT, async {
        while plugin.state.open_watchers() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();

    let socket = h.registry.socket_path();
    h.shutdown.cancel();
    tokio::time::timeout(WAIT, h.registry.stopped())
        .await
        .expect("a task outlived shutdown");
    assert!(!socket.exists());
    // The stream was dropped with its task.
    tokio::time::timeout(WAIT, async {
        while plugin.state.open_watchers() != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the plugin's stream is still read");
    // Only what was sent before shutdown is there.
    registered(h.events.recv().await.unwrap());
    assert!(h.events.try_recv().is_err());
    plugin.stop().await;
}

#[tokio::test]
async fn a_slow_plugin_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakePlugin::serve(dir.path().join("slow.sock")).await;
    fake.state.pre_start_delay_ms.store(5_000, Ordering::SeqCst);
    let plugin = GrpcDevicePlugin::connect("example.com/slow", 7, &fake.socket)
        .await
        .unwrap();
    assert_eq!(
        (plugin.resource(), plugin.endpoint()),
        ("example.com/slow", 7)
    );

    let deadline = Duration::from_millis(200);
    let request = super::api::PreStartContainerRequest {
        devices_ids: ids(&["dev-0"]),
    };
    let mut client = plugin.client();
    let started = tokio::time::Instant::now();
    let result = plugin
        .call(
            "PreStartContainer",
            deadline,
            client.pre_start_container(GrpcDevicePlugin::request(request, deadline)),
        )
        .await;
    assert!(
        matches!(
            result,
            Err(DevicePluginError::Timeout { ref resource, call: "PreStartContainer", .. })
                if resource == "example.com/slow"
        ),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));

    // Nothing listens: connecting gives up with a dial error.
    fake.stop().await;
    let missing = dir.path().join("missing.sock");
    let dial = tokio::time::timeout(
        WAIT,
        super::endpoint::dial(&missing, Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let message = dial.unwrap_err();
    assert!(
        message.starts_with("failed to dial device plugin"),
        "{message}"
    );
}
