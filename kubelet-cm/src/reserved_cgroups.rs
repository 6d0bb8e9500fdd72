//! `enforceNodeAllocatable` beyond `pods` (Go's `enforceNodeAllocatableCgroups` and
//! `enforceExistingCgroup`): the reservations put as limits on the cgroups the operator made
//! for the system's and the Kubernetes daemons.
//!
//! | key | cgroup | limits |
//! |---|---|---|
//! | `system-reserved` | `systemReservedCgroup` | `systemReserved`: cpu → shares, memory → limit, pid → pids limit, hugepages |
//! | `kube-reserved` | `kubeReservedCgroup` | `kubeReserved`, the same |
//! | `system-reserved-compressible` | `systemReservedCgroup` | the cpu of `systemReserved` only |
//! | `kube-reserved-compressible` | `kubeReservedCgroup` | the cpu of `kubeReserved` only |
//!
//! The cgroups are the operator's: the kubelet never creates them (Go validates that they
//! exist and fails its start otherwise, with "Failed to enforce System Reserved Cgroup Limits
//! on …"). A key needs its cgroup named; a key and its compressible variant exclude each
//! other (Go's configuration validation). Applied once, when the container manager starts.

use crate::allocatable::Amounts;
use crate::cgroups::CgroupManager;
use crate::error::Error;

/// `enforceNodeAllocatable` key: limit `systemReservedCgroup` to `systemReserved`.
pub const ENFORCE_SYSTEM_RESERVED: &str = "system-reserved";
/// `enforceNodeAllocatable` key: limit `kubeReservedCgroup` to `kubeReserved`.
pub const ENFORCE_KUBE_RESERVED: &str = "kube-reserved";
/// `enforceNodeAllocatable` key: the cpu of `systemReserved` only.
pub const ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE: &str = "system-reserved-compressible";
/// `enforceNodeAllocatable` key: the cpu of `kubeReserved` only.
pub const ENFORCE_KUBE_RESERVED_COMPRESSIBLE: &str = "kube-reserved-compressible";

/// One reserved cgroup to limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedEnforcement {
    /// "System Reserved" or "Kube Reserved" (Go's words in its messages).
    pub what: &'static str,
    /// The cgroup, as configured (cgroupfs form, e.g. `/system-reserved`).
    pub cgroup: String,
    /// The limits: the reservation, or only its cpu for a compressible key.
    pub limits: Amounts,
}

/// The enforcements `keys` ask for, checked as Go's configuration validation checks them: a
/// reserved key needs its cgroup; a key and its compressible variant not both.
pub fn plan(
    keys: &[String],
    system_reserved_cgroup: &str,
    kube_reserved_cgroup: &str,
    system_reserved: &Amounts,
    kube_reserved: &Amounts,
) -> Result<Vec<ReservedEnforcement>, Error> {
    let has = |k: &str| keys.iter().any(|x| x == k);
    let mut out = Vec::new();
    let sides = [
        (
            "System Reserved",
            ENFORCE_SYSTEM_RESERVED,
            ENFORCE_SYSTEM_RESERVED_COMPRESSIBLE,
            "systemReservedCgroup (--system-reserved-cgroup)",
            system_reserved_cgroup,
            system_reserved,
        ),
        (
            "Kube Reserved",
            ENFORCE_KUBE_RESERVED,
            ENFORCE_KUBE_RESERVED_COMPRESSIBLE,
            "kubeReservedCgroup (--kube-reserved-cgroup)",
            kube_reserved_cgroup,
            kube_reserved,
        ),
    ];
    for (what, key, compressible, field, cgroup, reserved) in sides {
        let (whole, cpu_only) = (has(key), has(compressible));
        if whole && cpu_only {
            return Err(Error::InvalidConfig(format!(
                "enforceNodeAllocatable (--enforce-node-allocatable) may not contain both {key:?} and {compressible:?}"
            )));
        }
        if !whole && !cpu_only {
            continue;
        }
        let asked = if whole { key } else { compressible };
        if cgroup.trim().is_empty() {
            return Err(Error::InvalidConfig(format!(
                "{field} must be specified when {asked:?} contained in enforceNodeAllocatable (--enforce-node-allocatable)"
            )));
        }
        let limits = if whole {
            reserved.clone()
        } else {
            reserved
                .iter()
                .filter(|(k, _)| k.as_str() == "cpu")
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        out.push(ReservedEnforcement {
            what,
            cgroup: cgroup.to_string(),
            limits,
        });
    }
    Ok(out)
}

/// Puts each planned enforcement's limits on its cgroup, which must exist (Go's
/// `enforceExistingCgroup`: validate, then update). The error names the cgroup in Go's words.
pub fn enforce(cgroups: &dyn CgroupManager, planned: &[ReservedEnforcement]) -> Result<(), Error> {
    for e in planned {
        let name = cgroups.cgroup_name(&e.cgroup);
        let failed = |reason: String| {
            Error::InvalidConfig(format!(
                "Failed to enforce {} Cgroup Limits on {:?}: {reason}",
                e.what, e.cgroup
            ))
        };
        if !cgroups.exists(&name) {
            return Err(failed(format!("cgroup {name} does not exist")));
        }
        let rc = crate::manager::cgroup_config_from_amounts(&e.limits);
        cgroups
            .update(&name, &rc)
            .map_err(|err| failed(err.to_string()))?;
        tracing::info!(cgroup = %name, config = ?rc, "updated limits on the {} cgroup", e.what.to_lowercase());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn plans_as_go_validates() {
        let system = amounts(&[("cpu", 100), ("memory", 100 << 20), ("pid", 1000)]);
        let kube = amounts(&[("cpu", 200), ("memory", 50 << 20)]);
        let keys = |k: &[&str]| k.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // pods alone: nothing.
        assert!(plan(&keys(&["pods"]), "", "", &system, &kube)
            .unwrap()
            .is_empty());
        // Both reserved keys: the whole reservations, each on its cgroup.
        let p = plan(
            &keys(&["pods", "system-reserved", "kube-reserved"]),
            "/system-reserved",
            "/kube-reserved",
            &system,
            &kube,
        )
        .unwrap();
        assert_eq!(
            p,
            vec![
                ReservedEnforcement {
                    what: "System Reserved",
                    cgroup: "/system-reserved".into(),
                    limits: system.clone(),
                },
                ReservedEnforcement {
                    what: "Kube Reserved",
                    cgroup: "/kube-reserved".into(),
                    limits: kube.clone(),
                },
            ]
        );
        // Compressible: cpu only.
        let p = plan(
            &keys(&["system-reserved-compressible"]),
            "/sys",
            "",
            &system,
            &kube,
        )
        .unwrap();
        assert_eq!(p[0].limits, amounts(&[("cpu", 100)]));
        // Refusals, in Go's words.
        let err = plan(&keys(&["kube-reserved"]), "", "", &system, &kube)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kubeReservedCgroup (--kube-reserved-cgroup) must be specified when \"kube-reserved\" contained in enforceNodeAllocatable"),
            "{err}"
        );
        let err = plan(
            &keys(&["system-reserved", "system-reserved-compressible"]),
            "/sys",
            "",
            &system,
            &kube,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("may not contain both"), "{err}");
    }
}
