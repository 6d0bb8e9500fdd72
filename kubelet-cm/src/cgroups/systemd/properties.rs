//! The unit properties a slice is created and updated with: runc's systemd managers
//! (`Apply` and `gen{V1,V2}ResourcesProperties`, as the Go kubelet v1.20 vendors them),
//! computed from a [`ResourceConfig`] without any I/O.

use super::super::{shares_to_weight, CgroupMode, ResourceConfig};

/// systemd's `USEC_INFINITY` / "no limit" for `t` properties.
pub const INFINITY: u64 = u64::MAX;

/// The first systemd with `CPUQuotaPeriodUSec` (runc checks the same version).
pub const CPU_QUOTA_PERIOD_SINCE: u32 = 242;

/// The value of a unit property, in the D-Bus type systemd declares for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyValue {
    /// `b`.
    Bool(bool),
    /// `t`.
    U64(u64),
    /// `s`.
    Str(String),
    /// `as`.
    Strs(Vec<String>),
    /// `au`.
    U32s(Vec<u32>),
    /// `a(ss)` (`DeviceAllow`: path, permissions).
    StrPairs(Vec<(String, String)>),
}

/// One `(name, value)` of `StartTransientUnit` / `SetUnitProperties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitProperty {
    /// The property, e.g. `MemoryMax`.
    pub name: &'static str,
    /// Its value.
    pub value: PropertyValue,
}

fn prop(name: &'static str, value: PropertyValue) -> UnitProperty {
    UnitProperty { name, value }
}

/// What a new slice is started with: runc's `Apply(-1)` for a `.slice` unit — description,
/// `Wants=` the parent slice, accounting on, no default dependencies — then the resources.
pub fn slice_properties(
    unit: &str,
    parent: &str,
    config: &ResourceConfig,
    mode: CgroupMode,
    systemd_version: Option<u32>,
) -> Vec<UnitProperty> {
    let io_accounting = match mode {
        CgroupMode::V2 => "IOAccounting",
        CgroupMode::V1 | CgroupMode::Hybrid => "BlockIOAccounting",
    };
    let mut out = vec![
        prop(
            "Description",
            PropertyValue::Str(format!("libcontainer container {unit}")),
        ),
        prop("Wants", PropertyValue::Strs(vec![parent.to_string()])),
        prop("MemoryAccounting", PropertyValue::Bool(true)),
        prop("CPUAccounting", PropertyValue::Bool(true)),
        prop(io_accounting, PropertyValue::Bool(true)),
        prop("DefaultDependencies", PropertyValue::Bool(false)),
    ];
    out.extend(resource_properties(config, mode, systemd_version));
    out
}

/// runc's `gen{V1,V2}ResourcesProperties` for the kubelet's resources: devices allowed (the
/// kubelet's allow-all rule is `DevicePolicy=auto` with no `DeviceAllow`), the memory limit,
/// the CPU weight or shares, the CPU quota, the task limit. Huge pages have no property; they
/// are written to the cgroup files.
pub fn resource_properties(
    config: &ResourceConfig,
    mode: CgroupMode,
    systemd_version: Option<u32>,
) -> Vec<UnitProperty> {
    let v2 = mode == CgroupMode::V2;
    let mut out = vec![
        prop("DevicePolicy", PropertyValue::Str("auto".into())),
        prop("DeviceAllow", PropertyValue::StrPairs(Vec::new())),
    ];
    if let Some(memory) = config.memory.filter(|m| *m != 0) {
        let name = if v2 { "MemoryMax" } else { "MemoryLimit" };
        out.push(prop(name, PropertyValue::U64(limit(memory))));
    }
    if let Some(shares) = config.cpu_shares.filter(|s| *s != 0) {
        if v2 {
            out.push(prop(
                "CPUWeight",
                PropertyValue::U64(shares_to_weight(shares)),
            ));
        } else {
            out.push(prop("CPUShares", PropertyValue::U64(shares)));
        }
    }
    out.extend(cpu_quota_properties(
        config.cpu_quota.unwrap_or(0),
        config.cpu_period.unwrap_or(0),
        systemd_version,
    ));
    if let Some(pids) = config.pids_limit.filter(|p| *p > 0 || *p == -1) {
        out.push(prop("TasksAccounting", PropertyValue::Bool(true)));
        out.push(prop("TasksMax", PropertyValue::U64(limit(pids))));
    }
    out
}

/// `-1` (unlimited) is systemd's infinity; other values as they are.
fn limit(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(INFINITY)
}

/// runc's `addCpuQuota`: the period where systemd knows it, and the quota per second of CPU
/// time, rounded up to 10 ms (systemd keeps whole percents), infinity for no quota.
fn cpu_quota_properties(
    quota: i64,
    period: u64,
    systemd_version: Option<u32>,
) -> Vec<UnitProperty> {
    let mut out = Vec::new();
    if period != 0 && systemd_version.is_some_and(|v| v >= CPU_QUOTA_PERIOD_SINCE) {
        out.push(prop("CPUQuotaPeriodUSec", PropertyValue::U64(period)));
    }
    if quota != 0 || period != 0 {
        let mut per_sec = INFINITY;
        if let Ok(quota) = u64::try_from(quota) {
            if quota > 0 {
                let period = if period == 0 { 100_000 } else { period };
                per_sec = quota.saturating_mul(1_000_000) / period;
                if per_sec % 10_000 != 0 {
                    per_sec = (per_sec / 10_000 + 1) * 10_000;
                }
            }
        }
        out.push(prop("CPUQuotaPerSecUSec", PropertyValue::U64(per_sec)));
    }
    out
}

/// The major version in systemd's `Version` property (`"252.30-1~deb12u2"`, `"v245.4"`),
/// as runc's `systemdVersionAtoi`.
pub fn parse_version(text: &str) -> Option<u32> {
    let t = text.trim().trim_start_matches('"').trim_start_matches('v');
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(props: &[UnitProperty]) -> Vec<&'static str> {
        props.iter().map(|p| p.name).collect()
    }

    fn get<'a>(props: &'a [UnitProperty], name: &str) -> Option<&'a PropertyValue> {
        props.iter().find(|p| p.name == name).map(|p| &p.value)
    }

    #[test]
    fn a_new_pod_slice_on_v2() {
        let config = ResourceConfig {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory: Some(128 << 20),
            pids_limit: Some(1024),
            ..Default::default()
        };
        let props = slice_properties(
            "kubepods-burstable-podx.slice",
            "kubepods-burstable.slice",
            &config,
            CgroupMode::V2,
            Some(252),
        );
        assert_eq!(
            names(&props),
            [
                "Description",
                "Wants",
                "MemoryAccounting",
                "CPUAccounting",
                "IOAccounting",
                "DefaultDependencies",
                "DevicePolicy",
                "DeviceAllow",
                "MemoryMax",
                "CPUWeight",
                "CPUQuotaPeriodUSec",
                "CPUQuotaPerSecUSec",
                "TasksAccounting",
                "TasksMax",
            ]
        );
        assert_eq!(
            get(&props, "Wants"),
            Some(&PropertyValue::Strs(
                vec!["kubepods-burstable.slice".into()]
            ))
        );
        assert_eq!(
            get(&props, "MemoryMax"),
            Some(&PropertyValue::U64(128 << 20))
        );
        // Go's getCpuWeight(512) = 1 + (510 * 9999) / 262142 = 20.
        assert_eq!(get(&props, "CPUWeight"), Some(&PropertyValue::U64(20)));
        assert_eq!(
            get(&props, "CPUQuotaPerSecUSec"),
            Some(&PropertyValue::U64(500_000))
        );
        assert_eq!(get(&props, "TasksMax"), Some(&PropertyValue::U64(1024)));
    }

    #[test]
    fn v1_names_and_unlimited_values() {
        let config = ResourceConfig {
            cpu_shares: Some(2),
            cpu_quota: Some(-1),
            memory: Some(-1),
            pids_limit: Some(-1),
            ..Default::default()
        };
        let props = resource_properties(&config, CgroupMode::Hybrid, Some(252));
        assert_eq!(
            get(&props, "MemoryLimit"),
            Some(&PropertyValue::U64(INFINITY))
        );
        assert_eq!(get(&props, "CPUShares"), Some(&PropertyValue::U64(2)));
        assert_eq!(get(&props, "CPUWeight"), None);
        assert_eq!(
            get(&props, "CPUQuotaPerSecUSec"),
            Some(&PropertyValue::U64(INFINITY))
        );
        assert_eq!(get(&props, "CPUQuotaPeriodUSec"), None, "no period given");
        assert_eq!(get(&props, "TasksMax"), Some(&PropertyValue::U64(INFINITY)));
        let accounting = slice_properties("a.slice", "-.slice", &config, CgroupMode::V1, None);
        assert!(names(&accounting).contains(&"BlockIOAccounting"));
    }

    #[test]
    fn quota_rounding_and_old_systemd() {
        // 0.25 CPU at a 30 ms period: 250000 µs/s exactly; 1 m at 100 ms: 10000 µs/s.
        let table: &[(i64, u64, u64)] = &[
            (7_500, 30_000, 250_000),
            (1_000, 100_000, 10_000),
            (1_001, 100_000, 20_000),
            (1_000, 0, 10_000),
        ];
        for (quota, period, want) in table {
            let props = cpu_quota_properties(*quota, *period, Some(241));
            assert_eq!(
                props,
                vec![prop("CPUQuotaPerSecUSec", PropertyValue::U64(*want))],
                "{quota}/{period} on systemd 241 has no CPUQuotaPeriodUSec"
            );
        }
        assert!(cpu_quota_properties(0, 0, Some(252)).is_empty());
    }

    #[test]
    fn nothing_set_is_nothing_sent() {
        let props = resource_properties(&ResourceConfig::default(), CgroupMode::V2, Some(252));
        assert_eq!(names(&props), ["DevicePolicy", "DeviceAllow"]);
    }

    #[test]
    fn versions() {
        for (text, want) in [
            ("252.30-1~deb12u2", Some(252)),
            ("\"v245.4-1.fc32\"", Some(245)),
            ("245", Some(245)),
            ("unknown", None),
        ] {
            assert_eq!(parse_version(text), want, "{text}");
        }
    }
}
