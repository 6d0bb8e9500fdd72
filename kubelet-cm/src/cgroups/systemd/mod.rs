//! The systemd cgroup driver (`cgroupDriver: systemd`), as the Go kubelet's
//! `cgroupManagerImpl` with libcontainer's systemd managers.
//!
//! The kubelet names its cgroups the same way under both drivers (`["kubepods", "burstable",
//! "pod<uid>"]`); this driver maps each name to a systemd slice ([`names`]) and lets systemd
//! own the slice's life:
//!
//! - **create**: `StartTransientUnit` of the slice (`kubepods-burstable-pod<uid>.slice`,
//!   `Wants=` its parent slice) with the limits as unit properties ([`properties`]); a unit
//!   that already exists is fine (as runc). Then the limits are also written to the cgroup
//!   files, which covers what systemd has no property for (huge pages, v1 cpuset/hugetlb
//!   hierarchies systemd does not create).
//! - **update**: `SetUnitProperties` (so a `daemon-reload` keeps them), then the files.
//! - **destroy**: `StopUnit` (an unknown unit is fine), then whatever directories are left.
//! - **reads** (exists, children, pids, usage): the slice's cgroup directories, through the
//!   cgroupfs manager of the same hierarchy; [`children`](CgroupManager::children) gives
//!   the kubelet's names back (`pod<uid>`), as Go's `CgroupName(path)` does.
//!
//! The cgroup parent handed to the runtime is the slice's cgroupfs path
//! (`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`, Go's
//! `Name`); containerd with `SystemdCgroup = true` takes its last element. Operator-given
//! cgroups (`systemReservedCgroup`, …) are read as systemd names ([`names::parse_systemd`]),
//! as Go's `CgroupName(string)` does.

pub mod bus;
pub mod dbus_client;
pub mod names;
pub mod properties;

use std::path::PathBuf;

use super::{CgroupError, CgroupManager, CgroupMode, CgroupName, ResourceConfig, Usage};
use bus::{BusError, SystemdBus, NO_SUCH_UNIT, UNIT_EXISTS};

/// The systemd driver over a cgroupfs manager of the host's hierarchy (which it uses for the
/// slices' directories and files) and a connection to systemd.
#[derive(Debug)]
pub struct SystemdCgroupManager {
    fs: Box<dyn CgroupManager>,
    bus: Box<dyn SystemdBus>,
    version: Option<u32>,
}

impl SystemdCgroupManager {
    /// The driver; systemd's version is read once (it decides whether `CPUQuotaPeriodUSec`
    /// is sent, as runc).
    pub fn new(fs: Box<dyn CgroupManager>, bus: Box<dyn SystemdBus>) -> SystemdCgroupManager {
        let version = match bus.version() {
            Ok(v) => properties::parse_version(&v),
            Err(e) => {
                tracing::warn!(error = %e, "reading systemd's version failed; CPUQuotaPeriodUSec is not sent");
                None
            }
        };
        tracing::info!(systemd_version = ?version, mode = ?fs.mode(), "using the systemd cgroup driver");
        SystemdCgroupManager { fs, bus, version }
    }

    fn slice(&self, name: &CgroupName) -> Result<CgroupName, CgroupError> {
        Ok(names::slice_cgroup(name)?)
    }

    fn unit(&self, name: &CgroupName) -> Result<(String, String), CgroupError> {
        Ok(names::unit_and_parent(name)?)
    }
}

impl From<names::SliceNameError> for CgroupError {
    fn from(e: names::SliceNameError) -> Self {
        CgroupError::Parse {
            path: PathBuf::from(&e.name),
            message: e.to_string(),
        }
    }
}

/// A systemd call's failure as a cgroup error naming the unit.
fn bus_error(unit: &str, e: BusError) -> CgroupError {
    CgroupError::Systemd {
        unit: unit.to_string(),
        error: e,
    }
}

impl CgroupManager for SystemdCgroupManager {
    fn mode(&self) -> CgroupMode {
        self.fs.mode()
    }

    fn exists(&self, name: &CgroupName) -> bool {
        self.slice(name).is_ok_and(|s| self.fs.exists(&s))
    }

    fn validate(&self, name: &CgroupName) -> Result<(), CgroupError> {
        self.fs.validate(&self.slice(name)?)
    }

    fn create(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        let slice = self.slice(name)?;
        if !name.components().is_empty() {
            let (unit, parent) = self.unit(name)?;
            let props =
                properties::slice_properties(&unit, &parent, config, self.mode(), self.version);
            match self.bus.start_transient_unit(&unit, &props) {
                Ok(()) => {}
                Err(e) if e.error_name() == Some(UNIT_EXISTS) => {}
                Err(e @ BusError::Timeout { .. }) => {
                    // runc continues when the job's completion is late; the files below
                    // make the cgroup usable either way.
                    tracing::warn!(unit, error = %e, "systemd slice creation not confirmed in time; continuing");
                }
                Err(e) => {
                    if matches!(e, BusError::Job { .. }) {
                        let _ = self.bus.reset_failed_unit(&unit);
                    }
                    return Err(bus_error(&unit, e));
                }
            }
        }
        self.fs.create(&slice, config)
    }

    fn update(&self, name: &CgroupName, config: &ResourceConfig) -> Result<(), CgroupError> {
        let slice = self.slice(name)?;
        self.fs.validate(&slice)?;
        if !name.components().is_empty() {
            let (unit, _) = self.unit(name)?;
            let props = properties::resource_properties(config, self.mode(), self.version);
            self.bus
                .set_unit_properties(&unit, &props)
                .map_err(|e| bus_error(&unit, e))?;
        }
        self.fs.update(&slice, config)
    }

    fn destroy(&self, name: &CgroupName) -> Result<(), CgroupError> {
        let slice = self.slice(name)?;
        if !name.components().is_empty() {
            let (unit, _) = self.unit(name)?;
            match self.bus.stop_unit(&unit) {
                Ok(()) => {}
                Err(e) if e.error_name() == Some(NO_SUCH_UNIT) => {}
                // runc logs and goes on; a cgroup still in use fails below.
                Err(e) => tracing::warn!(unit, error = %e, "stopping systemd slice failed"),
            }
        }
        self.fs.destroy(&slice)
    }

    fn children(&self, name: &CgroupName) -> Result<Vec<String>, CgroupError> {
        let slice = self.slice(name)?;
        let mut out: Vec<String> = self
            .fs
            .children(&slice)?
            .iter()
            .filter(|c| c.ends_with(names::SLICE_SUFFIX))
            .filter_map(|c| names::parse_systemd(c).components().last().cloned())
            .collect();
        out.sort();
        Ok(out)
    }

    fn pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        self.fs.pids(&self.slice(name)?)
    }

    fn usage(&self, name: &CgroupName) -> Result<Usage, CgroupError> {
        self.fs.usage(&self.slice(name)?)
    }

    fn paths(&self, name: &CgroupName) -> Vec<PathBuf> {
        self.slice(name)
            .map(|s| self.fs.paths(&s))
            .unwrap_or_default()
    }

    fn attach(&self, name: &CgroupName, pid: u32) -> Result<(), CgroupError> {
        self.fs.attach(&self.slice(name)?, pid)
    }

    fn own_pids(&self, name: &CgroupName) -> Result<Vec<u32>, CgroupError> {
        self.fs.own_pids(&self.slice(name)?)
    }

    fn cgroup_name(&self, configured: &str) -> CgroupName {
        names::parse_systemd(configured)
    }

    fn runtime_name(&self, name: &CgroupName) -> String {
        names::to_systemd(name).unwrap_or_else(|_| name.to_cgroupfs())
    }

    fn literal(&self, name: &CgroupName) -> CgroupName {
        self.slice(name).unwrap_or_else(|_| name.clone())
    }

    fn container_cgroups(&self, pod: &CgroupName, container_id: &str) -> Vec<CgroupName> {
        let pod = self.literal(pod);
        // runc's systemd scopes: `<prefix>-<id>.scope` (containerd's prefix, CRI-O's).
        ["cri-containerd", "crio"]
            .iter()
            .map(|prefix| pod.child(&format!("{prefix}-{container_id}.scope")))
            .collect()
    }

    fn cgroupfs(&self) -> &dyn CgroupManager {
        self.fs.as_ref()
    }
}

#[cfg(test)]
pub(crate) mod tests;
