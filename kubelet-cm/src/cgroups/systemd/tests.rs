use std::sync::{Arc, Mutex};

use super::bus::{BusError, SystemdBus, NO_SUCH_UNIT, UNIT_EXISTS};
use super::properties::{PropertyValue, UnitProperty};
use super::*;
use crate::cgroups::V2Manager;

/// What the fake systemd was asked, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Call {
    Start(String, Vec<UnitProperty>),
    Set(String, Vec<UnitProperty>),
    Stop(String),
    ResetFailed(String),
}

/// A systemd that records calls and creates/removes the slice directories as systemd would.
#[derive(Debug, Clone)]
pub(crate) struct FakeSystemd {
    calls: Arc<Mutex<Vec<Call>>>,
    mount: PathBuf,
    start_error: Option<BusError>,
    stop_error: Option<BusError>,
}

impl FakeSystemd {
    pub(crate) fn new(mount: &std::path::Path) -> FakeSystemd {
        FakeSystemd {
            calls: Arc::default(),
            mount: mount.to_path_buf(),
            start_error: None,
            stop_error: None,
        }
    }
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    fn dir(&self, unit: &str) -> PathBuf {
        let path = names::expand_slice(unit).unwrap();
        self.mount.join(path.trim_start_matches('/'))
    }
}

fn call_error(name: &str) -> BusError {
    BusError::Call {
        method: "test",
        unit: "u".into(),
        name: name.into(),
        message: "m".into(),
    }
}

impl SystemdBus for FakeSystemd {
    fn version(&self) -> Result<String, BusError> {
        Ok("252.30-1~deb12u2".into())
    }
    fn start_transient_unit(
        &self,
        unit: &str,
        properties: &[UnitProperty],
    ) -> Result<(), BusError> {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Start(unit.into(), properties.to_vec()));
        if let Some(e) = &self.start_error {
            return Err(e.clone());
        }
        std::fs::create_dir_all(self.dir(unit)).unwrap();
        Ok(())
    }
    fn set_unit_properties(&self, unit: &str, properties: &[UnitProperty]) -> Result<(), BusError> {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Set(unit.into(), properties.to_vec()));
        Ok(())
    }
    fn stop_unit(&self, unit: &str) -> Result<(), BusError> {
        self.calls.lock().unwrap().push(Call::Stop(unit.into()));
        self.stop_error.clone().map_or(Ok(()), Err)
    }
    fn reset_failed_unit(&self, unit: &str) -> Result<(), BusError> {
        self.calls
            .lock()
            .unwrap()
            .push(Call::ResetFailed(unit.into()));
        Ok(())
    }
}

fn manager(bus: &FakeSystemd, dir: &std::path::Path) -> SystemdCgroupManager {
    let fs = V2Manager::new(dir, dir.join("sys/fs/cgroup"));
    SystemdCgroupManager::new(Box::new(fs), Box::new(bus.clone()))
}

fn pod_name() -> CgroupName {
    CgroupName::from_cgroupfs("/kubepods/burstable/pod1234-abcd")
}

fn value<'a>(props: &'a [UnitProperty], name: &str) -> Option<&'a PropertyValue> {
    props.iter().find(|p| p.name == name).map(|p| &p.value)
}

#[test]
fn create_starts_the_slice_and_writes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(&mount).unwrap();
    let bus = FakeSystemd::new(&mount);
    let m = manager(&bus, dir.path());
    let config = ResourceConfig {
        memory: Some(64 << 20),
        cpu_shares: Some(102),
        ..Default::default()
    };
    m.create(&pod_name(), &config).unwrap();

    let calls = bus.calls();
    let [Call::Start(unit, props)] = calls.as_slice() else {
        panic!("one StartTransientUnit, got {calls:?}");
    };
    assert_eq!(unit, "kubepods-burstable-pod1234_abcd.slice");
    assert_eq!(
        value(props, "Wants"),
        Some(&PropertyValue::Strs(
            vec!["kubepods-burstable.slice".into()]
        ))
    );
    assert_eq!(
        value(props, "MemoryMax"),
        Some(&PropertyValue::U64(64 << 20))
    );
    let slice_dir =
        mount.join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice");
    assert_eq!(
        std::fs::read_to_string(slice_dir.join("memory.max")).unwrap(),
        (64u64 << 20).to_string()
    );
    assert!(m.exists(&pod_name()));
    assert_eq!(m.paths(&pod_name()), vec![slice_dir]);
    assert_eq!(
        m.runtime_name(&pod_name()),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice"
    );
}

#[test]
fn an_existing_unit_is_not_an_error_but_a_failed_job_is() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(&mount).unwrap();
    let mut bus = FakeSystemd::new(&mount);
    bus.start_error = Some(call_error(UNIT_EXISTS));
    manager(&bus, dir.path())
        .create(
            &CgroupName::from_cgroupfs("/kubepods"),
            &ResourceConfig::default(),
        )
        .unwrap();

    let mut bus = FakeSystemd::new(&mount);
    bus.start_error = Some(BusError::Job {
        unit: "kubepods-besteffort.slice".into(),
        result: "failed".into(),
    });
    let err = manager(&bus, dir.path())
        .create(
            &CgroupName::from_cgroupfs("/kubepods/besteffort"),
            &ResourceConfig::default(),
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("systemd unit kubepods-besteffort.slice: systemd job for kubepods-besteffort.slice ended \"failed\""),
        "{err}"
    );
    assert_eq!(
        bus.calls().last(),
        Some(&Call::ResetFailed("kubepods-besteffort.slice".into()))
    );
}

#[test]
fn update_sets_unit_properties_then_files() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(&mount).unwrap();
    let bus = FakeSystemd::new(&mount);
    let m = manager(&bus, dir.path());
    let name = CgroupName::from_cgroupfs("/kubepods/burstable");
    assert!(
        m.update(&name, &ResourceConfig::default()).is_err(),
        "missing slice"
    );
    m.create(&name, &ResourceConfig::default()).unwrap();
    m.update(
        &name,
        &ResourceConfig {
            cpu_shares: Some(2048),
            ..Default::default()
        },
    )
    .unwrap();
    let Some(Call::Set(unit, props)) = bus.calls().last().cloned() else {
        panic!("no SetUnitProperties: {:?}", bus.calls());
    };
    assert_eq!(unit, "kubepods-burstable.slice");
    assert_eq!(value(&props, "CPUWeight"), Some(&PropertyValue::U64(79)));
    assert_eq!(
        std::fs::read_to_string(mount.join("kubepods.slice/kubepods-burstable.slice/cpu.weight"))
            .unwrap(),
        "79"
    );
}

#[test]
fn destroy_stops_the_unit_and_removes_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("sys/fs/cgroup");
    std::fs::create_dir_all(&mount).unwrap();
    let mut bus = FakeSystemd::new(&mount);
    bus.stop_error = Some(call_error(NO_SUCH_UNIT));
    let m = manager(&bus, dir.path());
    m.create(&pod_name(), &ResourceConfig::default()).unwrap();
    m.destroy(&pod_name()).unwrap();
    assert!(!m.exists(&pod_name()));
    assert_eq!(
        bus.calls().last(),
        Some(&Call::Stop("kubepods-burstable-pod1234_abcd.slice".into()))
    );
}

#[test]
fn children_are_the_kubelets_names() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("sys/fs/cgroup");
    let qos = mount.join("kubepods.slice/kubepods-burstable.slice");
    for child in [
        "kubepods-burstable-pod1234_abcd.slice",
        "kubepods-burstable-pod9_8.slice",
        "cri-containerd-0123.scope",
    ] {
        std::fs::create_dir_all(qos.join(child)).unwrap();
    }
    let bus = FakeSystemd::new(&mount);
    let m = manager(&bus, dir.path());
    assert_eq!(
        m.children(&CgroupName::from_cgroupfs("/kubepods/burstable"))
            .unwrap(),
        ["pod1234-abcd", "pod9-8"]
    );
    assert_eq!(
        m.cgroup_name("/system.slice"),
        CgroupName::from_cgroupfs("/system")
    );
    assert_eq!(
        m.container_cgroups(&pod_name(), "c0")[0].to_cgroupfs(),
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice/cri-containerd-c0.scope"
    );
}
