//! Go's mapping between the kubelet's cgroup names and systemd slices
//! (`pkg/kubelet/cm/cgroup_manager_linux.go`, runc's `ExpandSlice`).
//!
//! A name `["kubepods", "burstable", "pod1234-abcd"]` is the slice
//! `kubepods-burstable-pod1234_abcd.slice`, whose cgroup is
//! `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd.slice`:
//! each component has its `-` turned into `_` (systemd uses `-` for nesting), the components
//! are joined with `-`, and the slice is expanded into the path of its ancestors.

use super::super::CgroupName;

/// The suffix of a slice unit.
pub const SLICE_SUFFIX: &str = ".slice";

/// Why a cgroup name has no systemd slice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cgroup name {name} has no systemd slice: {reason}")]
pub struct SliceNameError {
    /// The name, in cgroupfs form.
    pub name: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Go's `escapeSystemdCgroupName`: `-` becomes `_`.
pub fn escape(component: &str) -> String {
    component.replace('-', "_")
}

/// Go's `unescapeSystemdCgroupName`: `_` becomes `-`.
pub fn unescape(component: &str) -> String {
    component.replace('_', "-")
}

/// runc's `ExpandSlice`: `a-b-c.slice` → `/a.slice/a-b.slice/a-b-c.slice`; `-.slice` → `/`.
pub fn expand_slice(slice: &str) -> Result<String, String> {
    let invalid = || format!("invalid slice name {slice:?}");
    let Some(stem) = slice.strip_suffix(SLICE_SUFFIX) else {
        return Err(invalid());
    };
    if slice.contains('/') {
        return Err(invalid());
    }
    if stem == "-" {
        return Ok("/".to_string());
    }
    let mut path = String::new();
    let mut prefix = String::new();
    for component in stem.split('-') {
        if component.is_empty() {
            return Err(invalid());
        }
        path.push('/');
        path.push_str(&prefix);
        path.push_str(component);
        path.push_str(SLICE_SUFFIX);
        prefix.push_str(component);
        prefix.push('-');
    }
    Ok(path)
}

/// Go's `CgroupName.ToSystemd`: the cgroupfs path of the name's slice
/// (`/kubepods.slice/kubepods-burstable.slice`), `/` for the root.
pub fn to_systemd(name: &CgroupName) -> Result<String, SliceNameError> {
    let parts = name.components();
    if parts.is_empty() || (parts.len() == 1 && parts[0].is_empty()) {
        return Ok("/".to_string());
    }
    let joined: Vec<String> = parts.iter().map(|p| escape(p)).collect();
    expand_slice(&format!("{}{SLICE_SUFFIX}", joined.join("-"))).map_err(|reason| SliceNameError {
        name: name.to_cgroupfs(),
        reason,
    })
}

/// The literal cgroup (path components below the hierarchy root) of the name's slice.
pub fn slice_cgroup(name: &CgroupName) -> Result<CgroupName, SliceNameError> {
    to_systemd(name).map(|path| CgroupName::from_cgroupfs(&path))
}

/// Go's `ParseSystemdToCgroupName`: the last element of a systemd path back to a name
/// (`…/kubepods-burstable-pod1234_abcd.slice` → `["kubepods", "burstable", "pod1234-abcd"]`).
pub fn parse_systemd(path: &str) -> CgroupName {
    let base = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    let stem = base.strip_suffix(SLICE_SUFFIX).unwrap_or(base);
    let mut name = CgroupName::root();
    for part in stem.split('-') {
        name = name.child(&unescape(part));
    }
    name
}

/// The unit of a name and the slice it goes in (Go's `updateSystemdCgroupInfo`):
/// `("kubepods-burstable.slice", "kubepods.slice")`; the top slices' parent is `-.slice`.
pub fn unit_and_parent(name: &CgroupName) -> Result<(String, String), SliceNameError> {
    let path = to_systemd(name)?;
    let (dir, base) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
    let parent = match dir.rsplit('/').next() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => format!("-{SLICE_SUFFIX}"),
    };
    if base.is_empty() {
        return Err(SliceNameError {
            name: name.to_cgroupfs(),
            reason: "the root cgroup is not a unit".into(),
        });
    }
    Ok((base.to_string(), parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(parts: &[&str]) -> CgroupName {
        parts.iter().fold(CgroupName::root(), |n, p| n.child(p))
    }

    #[test]
    fn to_systemd_table() {
        let cases: &[(&[&str], &str)] = &[
            (&[], "/"),
            (&[""], "/"),
            (&["kubepods"], "/kubepods.slice"),
            (
                &["kubepods", "burstable"],
                "/kubepods.slice/kubepods-burstable.slice",
            ),
            (
                &["kubepods", "burstable", "pod1234-abcd-5678-efgh"],
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234_abcd_5678_efgh.slice",
            ),
            (
                &["kubepods", "pod6a2c0f4e-0b7e-4d1a"],
                "/kubepods.slice/kubepods-pod6a2c0f4e_0b7e_4d1a.slice",
            ),
            (&["system"], "/system.slice"),
        ];
        for (parts, want) in cases {
            assert_eq!(to_systemd(&name(parts)).unwrap(), *want, "{parts:?}");
        }
    }

    #[test]
    fn bad_names_are_errors_not_panics() {
        // An empty middle component makes `a--b`, which systemd does not allow.
        assert!(to_systemd(&name(&["kubepods", "", "x"])).is_err());
        assert!(expand_slice("kubepods").is_err());
        assert!(expand_slice("a/b.slice").is_err());
        assert!(expand_slice("-a.slice").is_err());
        assert_eq!(expand_slice("-.slice").unwrap(), "/");
    }

    #[test]
    fn parse_is_the_inverse_of_to_systemd() {
        let n = name(&["kubepods", "besteffort", "pod0b1c-22"]);
        assert_eq!(parse_systemd(&to_systemd(&n).unwrap()), n);
        assert_eq!(
            parse_systemd("kubepods-burstable-pod1234_abcd.slice"),
            name(&["kubepods", "burstable", "pod1234-abcd"])
        );
        // Go takes only the last element.
        assert_eq!(parse_systemd("/system.slice"), name(&["system"]));
    }

    #[test]
    fn units_and_parents() {
        let cases: &[(&[&str], &str, &str)] = &[
            (&["kubepods"], "kubepods.slice", "-.slice"),
            (
                &["kubepods", "burstable"],
                "kubepods-burstable.slice",
                "kubepods.slice",
            ),
            (
                &["kubepods", "burstable", "podx-y"],
                "kubepods-burstable-podx_y.slice",
                "kubepods-burstable.slice",
            ),
        ];
        for (parts, unit, parent) in cases {
            let (u, p) = unit_and_parent(&name(parts)).unwrap();
            assert_eq!((u.as_str(), p.as_str()), (*unit, *parent), "{parts:?}");
        }
        assert!(unit_and_parent(&CgroupName::root()).is_err());
    }
}
