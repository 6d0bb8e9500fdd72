//! Node capacity and allocatable, as Go's kubelet computes them.
//!
//! - capacity = cpu (logical CPUs), memory (`MemTotal`), pods (`maxPods`), ephemeral-storage
//!   (size of the kubelet root dir's filesystem), `hugepages-<size>` (pages × size);
//! - allocatable = capacity − systemReserved − kubeReserved − hard eviction reservation, never
//!   below zero, and memory additionally minus every hugepages capacity;
//! - the hard eviction reservation only counts `memory.available` (against memory) and
//!   `nodefs.available` (against ephemeral-storage), percentages taken of capacity;
//! - the `kubepods` cgroup limit (when `enforceNodeAllocatable` has `pods`) is capacity −
//!   systemReserved − kubeReserved, **without** the eviction reservation.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubelet_core::cpu::parse_cpuset;
use kubelet_core::resources::{milli_value, value};
use kubelet_core::ResourceList;

use crate::error::Error;
use crate::machine::{hugepage_resource_name, MachineInfo};
use crate::quantity::{binary, decimal, decimal_from_milli};

/// The internal-only resource name Go uses for the node's PID limit (`pid`).
pub const RESOURCE_PID: &str = "pid";

/// Amounts per resource name: millicores for `cpu`, whole units for everything else.
pub type Amounts = BTreeMap<String, i64>;

/// Signals accepted in `evictionHard` (Go's `signalToResource` keys).
const VALID_SIGNALS: [&str; 9] = [
    "memory.available",
    "allocatableMemory.available",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "nodefs.available",
    "nodefs.inodesFree",
    "pid.available",
];

/// The value of an eviction threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThresholdValue {
    /// An absolute amount (bytes, inodes, pids), rounded up to a whole number.
    Quantity(i64),
    /// A fraction of capacity (Go keeps it as a `float32`).
    Percentage(f32),
}

/// One parsed hard eviction threshold (`signal < value`).
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionThreshold {
    /// The signal, e.g. `memory.available`.
    pub signal: String,
    /// The threshold.
    pub value: ThresholdValue,
}

impl EvictionThreshold {
    /// The threshold as an amount of `capacity`: `int64(float64(capacity) × percentage)` for
    /// percentages, exactly as Go's `GetThresholdQuantity`.
    pub fn amount_of(&self, capacity: i64) -> i64 {
        match self.value {
            ThresholdValue::Quantity(q) => q,
            ThresholdValue::Percentage(p) => (capacity as f64 * f64::from(p)) as i64,
        }
    }
}

/// Parses `evictionHard` as Go's `parseThresholdStatement`: `0%` and `100%` are ignored,
/// percentages must be within 0–100 %, quantities must be positive, unknown signals fail.
pub fn parse_eviction_hard(
    map: &BTreeMap<String, String>,
) -> Result<Vec<EvictionThreshold>, Error> {
    let mut out = Vec::new();
    for (signal, val) in map {
        let bad = |reason: String| Error::InvalidEvictionThreshold {
            signal: signal.clone(),
            value: val.clone(),
            reason,
        };
        if !VALID_SIGNALS.contains(&signal.as_str()) {
            return Err(bad(format!("unsupported eviction signal {signal}")));
        }
        let v = val.trim();
        if let Some(num) = v.strip_suffix('%') {
            if v == "0%" || v == "100%" {
                continue;
            }
            let parsed: f32 = num
                .trim()
                .parse()
                .map_err(|_| bad(format!("{num:?} is not a number")))?;
            let percentage = parsed / 100.0;
            if !percentage.is_finite() || percentage < 0.0 {
                return Err(bad(format!(
                    "eviction percentage threshold {signal} must be >= 0%"
                )));
            }
            if percentage > 1.0 {
                return Err(bad(format!(
                    "eviction percentage threshold {signal} must be <= 100%"
                )));
            }
            out.push(EvictionThreshold {
                signal: signal.clone(),
                value: ThresholdValue::Percentage(percentage),
            });
            continue;
        }
        let q = value(&Quantity(v.to_string())).map_err(|e| bad(e.to_string()))?;
        if q <= 0 {
            return Err(bad(format!("eviction threshold {signal} must be positive")));
        }
        out.push(EvictionThreshold {
            signal: signal.clone(),
            value: ThresholdValue::Quantity(q),
        });
    }
    Ok(out)
}

/// Parses a `kubeReserved` / `systemReserved` map. Only `cpu`, `memory`,
/// `ephemeral-storage` and `pid` may be reserved (as Go); quantities must not be negative.
/// `field` names the setting in error messages.
pub fn parse_reserved(field: &str, map: &BTreeMap<String, String>) -> Result<Amounts, Error> {
    let mut out = Amounts::new();
    for (name, text) in map {
        let bad = |reason: String| Error::InvalidQuantity {
            field: format!("{field}[{name}]"),
            value: text.clone(),
            reason,
        };
        let q = Quantity(text.trim().to_string());
        let amount = match name.as_str() {
            "cpu" => milli_value(&q),
            "memory" | "ephemeral-storage" | RESOURCE_PID => value(&q),
            _ => return Err(bad(format!("cannot reserve {name:?} resource"))),
        }
        .map_err(|e| bad(e.reason.to_string()))?;
        if amount < 0 {
            return Err(bad("resource quantity cannot be negative".to_string()));
        }
        out.insert(name.clone(), amount);
    }
    Ok(out)
}

/// Applies `reservedSystemCPUs` as Go's kubelet does: the cpu entry of kubeReserved is
/// dropped and systemReserved cpu becomes the number of reserved CPUs. The CPUs must exist.
pub fn apply_reserved_cpus(
    reserved_cpus: &str,
    machine: &MachineInfo,
    kube_reserved: &mut Amounts,
    system_reserved: &mut Amounts,
) -> Result<(), Error> {
    if reserved_cpus.trim().is_empty() {
        return Ok(());
    }
    let set = parse_cpuset(reserved_cpus).map_err(|e| Error::InvalidCpuSet {
        value: reserved_cpus.to_string(),
        reason: e.to_string(),
    })?;
    if set.is_empty() {
        return Ok(());
    }
    let online: std::collections::BTreeSet<u32> = machine.topology.iter().map(|t| t.cpu).collect();
    let missing: Vec<String> = set
        .iter()
        .filter(|c| !online.contains(c))
        .map(u32::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(Error::InvalidCpuSet {
            value: reserved_cpus.to_string(),
            reason: format!("cpus {} are not online on this machine", missing.join(",")),
        });
    }
    kube_reserved.remove("cpu");
    system_reserved.insert("cpu".to_string(), set.len() as i64 * 1000);
    Ok(())
}

/// The node's capacity in amounts (cpu in millicores).
pub fn capacity_amounts(machine: &MachineInfo, max_pods: u32) -> Amounts {
    let mut c = Amounts::new();
    c.insert("cpu".into(), i64::from(machine.num_cores) * 1000);
    c.insert("memory".into(), to_i64(machine.memory_capacity));
    c.insert("pods".into(), i64::from(max_pods));
    c.insert(
        "ephemeral-storage".into(),
        to_i64(machine.ephemeral_storage_capacity),
    );
    for h in &machine.hugepages {
        c.insert(hugepage_resource_name(h), to_i64(h.total_bytes()));
    }
    c
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The hard eviction reservation: memory from `memory.available`, ephemeral-storage from
/// `nodefs.available`; other signals reserve nothing.
pub fn hard_eviction_reservation(thresholds: &[EvictionThreshold], capacity: &Amounts) -> Amounts {
    let mut out = Amounts::new();
    for t in thresholds {
        let resource = match t.signal.as_str() {
            "memory.available" => "memory",
            "nodefs.available" => "ephemeral-storage",
            _ => continue,
        };
        let cap = capacity.get(resource).copied().unwrap_or(0);
        out.insert(resource.to_string(), t.amount_of(cap));
    }
    out
}

/// Sum of system, kube and eviction reservations per capacity resource (Go's
/// `GetNodeAllocatableReservation`); zero entries are left out.
pub fn node_allocatable_reservation(
    capacity: &Amounts,
    system_reserved: &Amounts,
    kube_reserved: &Amounts,
    thresholds: &[EvictionThreshold],
) -> Amounts {
    let eviction = hard_eviction_reservation(thresholds, capacity);
    let mut out = Amounts::new();
    for k in capacity.keys() {
        let v = [system_reserved, kube_reserved, &eviction]
            .iter()
            .map(|m| m.get(k).copied().unwrap_or(0))
            .fold(0i64, i64::saturating_add);
        if v != 0 {
            out.insert(k.clone(), v);
        }
    }
    out
}

/// Go's `validateNodeAllocatable`: a reservation larger than capacity is a configuration error.
pub fn validate_reservation(capacity: &Amounts, reservation: &Amounts) -> Result<(), Error> {
    let mut problems = Vec::new();
    for (k, v) in reservation {
        let cap = capacity.get(k).copied().unwrap_or(0);
        if cap.saturating_sub(*v) < 0 {
            problems.push(format!(
                "Resource {k:?} has a reservation of {} but capacity of {}. Expected capacity >= reservation.",
                format_amount(k, *v).0,
                format_amount(k, cap).0
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "invalid Node Allocatable configuration. {}",
            problems.join(" ")
        )))
    }
}

/// Allocatable amounts: capacity − reservation (never below zero), then memory minus every
/// hugepages capacity (never below zero).
pub fn allocatable_amounts(capacity: &Amounts, reservation: &Amounts) -> Amounts {
    let mut out = Amounts::new();
    for (k, v) in capacity {
        let r = reservation.get(k).copied().unwrap_or(0);
        out.insert(k.clone(), v.saturating_sub(r).max(0));
    }
    let hugepages: i64 = capacity
        .iter()
        .filter(|(k, _)| k.starts_with("hugepages-"))
        .map(|(_, v)| *v)
        .fold(0, i64::saturating_add);
    if let Some(mem) = out.get_mut("memory") {
        *mem = mem.saturating_sub(hugepages).max(0);
    }
    out
}

/// Capacity − systemReserved − kubeReserved (never below zero): the absolute node allocatable
/// Go enforces on the `kubepods` cgroup.
pub fn node_allocatable_absolute(
    capacity: &Amounts,
    system_reserved: &Amounts,
    kube_reserved: &Amounts,
) -> Amounts {
    capacity
        .iter()
        .map(|(k, v)| {
            let r = system_reserved
                .get(k)
                .copied()
                .unwrap_or(0)
                .saturating_add(kube_reserved.get(k).copied().unwrap_or(0));
            (k.clone(), v.saturating_sub(r).max(0))
        })
        .collect()
}

/// Formats an amount the way Go's quantity for that resource prints: `DecimalSI` for cpu
/// (from millicores), pods and pid, `BinarySI` for memory, storage and hugepages.
pub fn format_amount(name: &str, amount: i64) -> Quantity {
    match name {
        "cpu" => decimal_from_milli(amount),
        "pods" | RESOURCE_PID => decimal(amount),
        _ => binary(amount),
    }
}

/// Amounts as a [`ResourceList`] of canonical quantity strings (internal `pid` dropped).
pub fn to_resource_list(amounts: &Amounts) -> ResourceList {
    amounts
        .iter()
        .filter(|(k, _)| k.as_str() != RESOURCE_PID)
        .map(|(k, v)| (k.clone(), format_amount(k, *v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{CpuTopology, HugePages};

    const GI: i64 = 1 << 30;
    const MI: i64 = 1 << 20;

    fn machine() -> MachineInfo {
        MachineInfo {
            num_cores: 4,
            num_physical_cores: 4,
            num_sockets: 1,
            topology: (0..4)
                .map(|cpu| CpuTopology {
                    cpu,
                    core: cpu,
                    socket: 0,
                    numa_node: 0,
                })
                .collect(),
            memory_capacity: 16 * GI as u64,
            hugepages: vec![HugePages {
                page_size_kb: 2048,
                num_pages: 512,
            }],
            numa_memory: Vec::new(),
            boot_id: String::new(),
            machine_id: String::new(),
            system_uuid: String::new(),
            kernel_version: String::new(),
            os_image: String::new(),
            max_pids: 32768,
            ephemeral_storage_capacity: 100 * GI as u64,
            ephemeral_storage_inodes: 1000,
            boot_time_seconds: 0,
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn go_default_eviction() -> BTreeMap<String, String> {
        map(&[
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("imagefs.available", "15%"),
            ("nodefs.inodesFree", "5%"),
        ])
    }

    #[test]
    fn capacity_of_machine() {
        let cap = to_resource_list(&capacity_amounts(&machine(), 110));
        let got: Vec<(&str, &str)> = cap
            .iter()
            .map(|(k, v)| (k.as_str(), v.0.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("cpu", "4"),
                ("ephemeral-storage", "100Gi"),
                ("hugepages-2Mi", "1Gi"),
                ("memory", "16Gi"),
                ("pods", "110"),
            ]
        );
    }

    struct Case {
        name: &'static str,
        kube: BTreeMap<String, String>,
        system: BTreeMap<String, String>,
        eviction: BTreeMap<String, String>,
        reserved_cpus: &'static str,
        want: Vec<(&'static str, i64)>,
    }

    #[test]
    fn allocatable_table() {
        // ephemeral 100Gi × float32(0.1) truncated, as Go computes it.
        let ten_pct = (100.0 * GI as f64 * f64::from(0.1f32)) as i64;
        let cases = vec![
            Case {
                name: "go defaults",
                kube: map(&[]),
                system: map(&[]),
                eviction: go_default_eviction(),
                reserved_cpus: "",
                want: vec![
                    ("cpu", 4000),
                    ("memory", 16 * GI - 100 * MI - GI),
                    ("ephemeral-storage", 100 * GI - ten_pct),
                    ("pods", 110),
                    ("hugepages-2Mi", GI),
                ],
            },
            Case {
                name: "reserved",
                kube: map(&[("cpu", "500m"), ("memory", "1Gi")]),
                system: map(&[("cpu", "250m"), ("ephemeral-storage", "10Gi")]),
                eviction: map(&[("memory.available", "1Gi")]),
                reserved_cpus: "",
                want: vec![
                    ("cpu", 3250),
                    ("memory", 16 * GI - GI - GI - GI),
                    ("ephemeral-storage", 90 * GI),
                    ("pods", 110),
                ],
            },
            Case {
                name: "eviction percentages",
                kube: map(&[]),
                system: map(&[]),
                eviction: map(&[("memory.available", "50%"), ("nodefs.available", "25%")]),
                reserved_cpus: "",
                want: vec![("memory", 8 * GI - GI), ("ephemeral-storage", 75 * GI)],
            },
            Case {
                name: "0% and 100% are ignored",
                kube: map(&[]),
                system: map(&[]),
                eviction: map(&[("memory.available", "0%"), ("nodefs.available", "100%")]),
                reserved_cpus: "",
                want: vec![("memory", 15 * GI), ("ephemeral-storage", 100 * GI)],
            },
            Case {
                name: "reserved cpus override kube and system cpu",
                kube: map(&[("cpu", "1")]),
                system: map(&[("cpu", "1")]),
                eviction: map(&[]),
                reserved_cpus: "0-1,3",
                want: vec![("cpu", 1000)],
            },
        ];
        for c in cases {
            let m = machine();
            let cap = capacity_amounts(&m, 110);
            let mut kube = parse_reserved("kubeReserved", &c.kube).unwrap();
            let mut system = parse_reserved("systemReserved", &c.system).unwrap();
            apply_reserved_cpus(c.reserved_cpus, &m, &mut kube, &mut system).unwrap();
            let thresholds = parse_eviction_hard(&c.eviction).unwrap();
            let reservation = node_allocatable_reservation(&cap, &system, &kube, &thresholds);
            validate_reservation(&cap, &reservation).unwrap();
            let alloc = allocatable_amounts(&cap, &reservation);
            for (k, v) in &c.want {
                assert_eq!(alloc.get(*k), Some(v), "{}: {k}", c.name);
            }
        }
    }

    #[test]
    fn over_reservation_is_rejected_and_clamped() {
        let cap = capacity_amounts(&machine(), 110);
        let kube = parse_reserved("kubeReserved", &map(&[("cpu", "5")])).unwrap();
        let reservation = node_allocatable_reservation(&cap, &Amounts::new(), &kube, &[]);
        let err = validate_reservation(&cap, &reservation).unwrap_err();
        assert!(
            err.to_string()
                .contains("Resource \"cpu\" has a reservation of 5 but capacity of 4"),
            "{err}"
        );
        assert_eq!(allocatable_amounts(&cap, &reservation)["cpu"], 0);
    }

    #[test]
    fn kubepods_limit_excludes_eviction() {
        let mut cap = capacity_amounts(&machine(), 110);
        cap.insert(RESOURCE_PID.into(), 32768);
        let kube =
            parse_reserved("kubeReserved", &map(&[("memory", "1Gi"), ("pid", "1000")])).unwrap();
        let abs = node_allocatable_absolute(&cap, &Amounts::new(), &kube);
        assert_eq!(abs["memory"], 15 * GI);
        assert_eq!(abs[RESOURCE_PID], 31768);
        assert_eq!(abs["cpu"], 4000);
    }

    #[test]
    fn huge_reservations_saturate() {
        let cap = capacity_amounts(&machine(), 110);
        let huge = parse_reserved("kubeReserved", &map(&[("memory", "8E")])).unwrap();
        let abs = node_allocatable_absolute(&cap, &huge, &huge);
        assert_eq!(abs["memory"], 0);
        let reservation = node_allocatable_reservation(&cap, &huge, &huge, &[]);
        assert!(validate_reservation(&cap, &reservation).is_err());
        assert_eq!(allocatable_amounts(&cap, &reservation)["memory"], 0);
    }

    #[test]
    fn bad_values_name_the_field() {
        let err = parse_reserved("kubeReserved", &map(&[("memory", "1Zi")])).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("kubeReserved[memory]") && msg.contains("1Zi"),
            "{msg}"
        );
        let err = parse_reserved("systemReserved", &map(&[("gpu", "1")])).unwrap_err();
        assert!(err.to_string().contains("cannot reserve \"gpu\""), "{err}");
        let err = parse_reserved("systemReserved", &map(&[("cpu", "-1")])).unwrap_err();
        assert!(err.to_string().contains("negative"), "{err}");

        for (signal, val, needle) in [
            ("memory.available", "-5%", ">= 0%"),
            ("memory.available", "150%", "<= 100%"),
            ("memory.available", "abc", "abc"),
            ("memory.available", "0", "positive"),
            ("bogus.signal", "1Gi", "unsupported eviction signal"),
        ] {
            let err = parse_eviction_hard(&map(&[(signal, val)])).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(signal) && msg.contains(needle), "{msg}");
        }

        let m = machine();
        let mut k = Amounts::new();
        let mut s = Amounts::new();
        assert!(apply_reserved_cpus("7", &m, &mut k, &mut s)
            .unwrap_err()
            .to_string()
            .contains("not online"));
        assert!(apply_reserved_cpus("x", &m, &mut k, &mut s).is_err());
    }
}
