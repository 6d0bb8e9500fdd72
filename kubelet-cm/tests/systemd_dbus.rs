//! The systemd driver's D-Bus client on the wire: a real `dbus-daemon` (a private bus) with a
//! stand-in for `org.freedesktop.systemd1` that declares systemd's method signatures
//! (`StartTransientUnit` `ssa(sv)a(sa(sv))` → `o`, `SetUnitProperties` `sba(sv)`, `StopUnit`
//! `ss` → `o`, `ResetFailedUnit` `s`, the `Version` property, `JobRemoved`), so a call
//! with a wrongly typed argument fails here as it would against systemd. What systemd then
//! does with the slices is tested on a systemd host (the VM tier).
//!
//! Needs `dbus-daemon` (Debian's `dbus-daemon`, installed by `scripts/node-env.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::daemon;
use kubelet_cm::cgroups::systemd::bus::{BusError, SystemdBus, NO_SUCH_UNIT};
use kubelet_cm::cgroups::systemd::dbus_client::DbusSystemd;
use kubelet_cm::cgroups::systemd::properties::slice_properties;
use kubelet_cm::cgroups::CgroupMode;
use kubelet_cm::ResourceConfig;
use zbus::object_server::SignalEmitter;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue};

/// Each property received: name → D-Bus signature of its value.
type Seen = Arc<Mutex<Vec<(String, String, BTreeMap<String, String>)>>>;

#[derive(Debug, zbus::DBusError)]
#[zbus(prefix = "org.freedesktop.systemd1")]
enum SystemdError {
    #[zbus(error)]
    ZBus(zbus::Error),
    NoSuchUnit(String),
}

struct Manager {
    seen: Seen,
    units: Mutex<Vec<String>>,
    next_job: Mutex<u32>,
}

impl Manager {
    fn job(&self) -> (u32, OwnedObjectPath) {
        let mut n = self.next_job.lock().unwrap();
        *n += 1;
        let path = format!("/org/freedesktop/systemd1/job/{n}");
        (*n, ObjectPath::try_from(path).unwrap().into())
    }

    fn record(&self, method: &str, unit: &str, properties: &[(String, OwnedValue)]) {
        let props = properties
            .iter()
            .map(|(k, v)| (k.clone(), v.value_signature().to_string()))
            .collect();
        self.seen
            .lock()
            .unwrap()
            .push((method.into(), unit.into(), props));
    }
}

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    async fn subscribe(&self) {}

    async fn start_transient_unit(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        name: String,
        mode: String,
        properties: Vec<(String, OwnedValue)>,
        aux: Vec<(String, Vec<(String, OwnedValue)>)>,
    ) -> zbus::fdo::Result<OwnedObjectPath> {
        assert_eq!(mode, "replace");
        assert!(aux.is_empty());
        self.record("StartTransientUnit", &name, &properties);
        self.units.lock().unwrap().push(name.clone());
        let (id, job) = self.job();
        // A unit named `fail-*` fails its job; `slow-*` never finishes.
        let result = if name.starts_with("fail-") {
            "failed"
        } else {
            "done"
        };
        if !name.starts_with("slow-") {
            Self::job_removed(&emitter, id, job.as_ref(), &name, result)
                .await
                .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        }
        Ok(job)
    }

    async fn set_unit_properties(
        &self,
        name: String,
        runtime: bool,
        properties: Vec<(String, OwnedValue)>,
    ) {
        assert!(runtime);
        self.record("SetUnitProperties", &name, &properties);
    }

    async fn stop_unit(
        &self,
        #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        name: String,
        mode: String,
    ) -> Result<OwnedObjectPath, SystemdError> {
        assert_eq!(mode, "replace");
        let known = {
            let mut units = self.units.lock().unwrap();
            let before = units.len();
            units.retain(|u| *u != name);
            units.len() != before
        };
        if !known {
            return Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded.")));
        }
        let (id, job) = self.job();
        Self::job_removed(&emitter, id, job.as_ref(), &name, "done").await?;
        Ok(job)
    }

    async fn reset_failed_unit(&self, name: String) {
        self.record("ResetFailedUnit", &name, &[]);
    }

    #[zbus(property)]
    async fn version(&self) -> String {
        "252.30-1~deb12u2".into()
    }

    #[zbus(signal)]
    async fn job_removed(
        emitter: &SignalEmitter<'_>,
        id: u32,
        job: ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

fn serve(address: &str, seen: Seen) -> zbus::Connection {
    let manager = Manager {
        seen,
        units: Mutex::default(),
        next_job: Mutex::default(),
    };
    zbus::block_on(async {
        zbus::connection::Builder::address(address)
            .unwrap()
            .name("org.freedesktop.systemd1")
            .unwrap()
            .serve_at("/org/freedesktop/systemd1", manager)
            .unwrap()
            .build()
            .await
            .unwrap()
    })
}

#[test]
fn the_client_speaks_systemds_signatures() {
    let bus = daemon();
    let seen = Seen::default();
    let _server = serve(&bus.address, seen.clone());
    let client = DbusSystemd::connect(&bus.address, Duration::from_secs(2)).unwrap();

    assert_eq!(client.version().unwrap(), "252.30-1~deb12u2");

    let config = ResourceConfig {
        cpu_shares: Some(512),
        cpu_quota: Some(50_000),
        cpu_period: Some(100_000),
        memory: Some(128 << 20),
        pids_limit: Some(-1),
        ..Default::default()
    };
    let unit = "kubepods-burstable-pod1234_abcd.slice";
    let props = slice_properties(
        unit,
        "kubepods-burstable.slice",
        &config,
        CgroupMode::V2,
        Some(252),
    );
    client.start_transient_unit(unit, &props).unwrap();
    client.set_unit_properties(unit, &props[6..]).unwrap();
    client.stop_unit(unit).unwrap();

    // What systemd declares for each property (systemd.resource-control, org.freedesktop.systemd1).
    let want: BTreeMap<String, String> = [
        ("Description", "s"),
        ("Wants", "as"),
        ("MemoryAccounting", "b"),
        ("CPUAccounting", "b"),
        ("IOAccounting", "b"),
        ("DefaultDependencies", "b"),
        ("DevicePolicy", "s"),
        ("DeviceAllow", "a(ss)"),
        ("MemoryMax", "t"),
        ("CPUWeight", "t"),
        ("CPUQuotaPeriodUSec", "t"),
        ("CPUQuotaPerSecUSec", "t"),
        ("TasksAccounting", "b"),
        ("TasksMax", "t"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0].0, "StartTransientUnit");
    assert_eq!(seen[0].1, unit);
    assert_eq!(seen[0].2, want);
    assert_eq!(seen[1].0, "SetUnitProperties");
    assert_eq!(seen[1].2.len(), want.len() - 6);
}

#[test]
fn systemds_errors_and_job_results_reach_the_caller() {
    let bus = daemon();
    let _server = serve(&bus.address, Seen::default());
    let client = DbusSystemd::connect(&bus.address, Duration::from_secs(1)).unwrap();

    let err = client.stop_unit("never-started.slice").unwrap_err();
    assert_eq!(err.error_name(), Some(NO_SUCH_UNIT), "{err}");

    let err = client
        .start_transient_unit("fail-x.slice", &[])
        .unwrap_err();
    assert_eq!(
        err,
        BusError::Job {
            unit: "fail-x.slice".into(),
            result: "failed".into()
        }
    );
    client.reset_failed_unit("fail-x.slice").unwrap();

    let err = client
        .start_transient_unit("slow-x.slice", &[])
        .unwrap_err();
    assert!(matches!(err, BusError::Timeout { .. }), "{err}");
    // The connection is still usable after a timeout.
    client.start_transient_unit("ok.slice", &[]).unwrap();
}

#[test]
fn no_bus_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let address = format!("unix:path={}", dir.path().join("none").display());
    let err = DbusSystemd::connect(&address, Duration::from_secs(1)).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "connecting to systemd over D-Bus ({address}) failed"
        )),
        "{err}"
    );
}
