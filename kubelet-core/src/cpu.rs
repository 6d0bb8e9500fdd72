//! CPU resource arithmetic shared by every backend: Go's `MilliCPUToShares` and
//! `MilliCPUToQuota` (used for pod and QoS cgroups by the container manager and for container
//! resources by the runtime backend), and the Linux cpuset list parser (`reservedSystemCPUs`,
//! `/sys/devices/system/cpu/online`).
//!
//! The cpuset parser is bounded: a CPU id above [`MAX_CPU_ID`] is an error at once, so a list
//! such as `0-4000000000` is refused without allocating or looping over the range. The cap is
//! the largest number of CPUs a Linux kernel can be built for (`NR_CPUS` is at most 8192 with
//! `CONFIG_MAXSMP`), so no real cpuset is refused.

use std::collections::BTreeSet;

/// Smallest `cpu.shares` the kernel accepts (and what BestEffort gets).
pub const MIN_SHARES: u64 = 2;
/// Largest `cpu.shares` the kernel accepts.
pub const MAX_SHARES: u64 = 262_144;
/// `cpu.shares` per whole CPU.
pub const SHARES_PER_CPU: u64 = 1024;
/// Millicores per CPU.
pub const MILLI_CPU_TO_CPU: i64 = 1000;
/// The smallest CFS quota the kubelet sets, in µs (1ms).
pub const MIN_QUOTA_PERIOD: i64 = 1000;
/// The default CFS period, in µs (100ms).
pub const QUOTA_PERIOD: i64 = 100_000;
/// Most CPUs a Linux kernel supports (`NR_CPUS` with `CONFIG_MAXSMP`).
pub const MAX_CPUS: u32 = 8192;
/// The largest CPU id a cpuset may name.
pub const MAX_CPU_ID: u32 = MAX_CPUS - 1;

/// Millicores → `cpu.shares` (Go's `MilliCPUToShares`): 1024 per CPU, 0 (or less) → 2,
/// clamped to [[`MIN_SHARES`], [`MAX_SHARES`]].
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let milli = u64::try_from(milli_cpu).unwrap_or(0);
    let shares = milli.saturating_mul(SHARES_PER_CPU) / 1000;
    shares.clamp(MIN_SHARES, MAX_SHARES)
}

/// Millicores → CFS quota in µs for a period of `period_us` (Go's `MilliCPUToQuota`):
/// `milli × period / 1000`, at least [`MIN_QUOTA_PERIOD`]; 0 (no quota) for 0 or less.
pub fn milli_cpu_to_quota(milli_cpu: i64, period_us: i64) -> i64 {
    if milli_cpu <= 0 {
        return 0;
    }
    let quota = milli_cpu.saturating_mul(period_us) / MILLI_CPU_TO_CPU;
    quota.max(MIN_QUOTA_PERIOD)
}

/// A cpuset list that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// A CPU is not a non-negative integer.
    #[error("bad CPU {value:?} in {part:?}: not a CPU number")]
    BadCpu {
        /// The list element (`"0-x"`).
        part: String,
        /// The offending text (`"x"`).
        value: String,
    },
    /// A range ends before it starts.
    #[error("bad CPU range {part:?}: {first} is greater than {last}")]
    Reversed {
        /// The list element.
        part: String,
        /// Its first CPU.
        first: u64,
        /// Its last CPU.
        last: u64,
    },
    /// A CPU id is beyond what Linux supports.
    #[error("bad CPU {cpu} in {part:?}: CPU ids go up to {max} (Linux supports at most {cpus} CPUs)", max = MAX_CPU_ID, cpus = MAX_CPUS)]
    TooLarge {
        /// The list element.
        part: String,
        /// The CPU id named.
        cpu: String,
    },
}

/// Parses a Linux cpuset list (`"0-1,3"`; `""` is the empty set; whitespace around elements
/// is ignored) into the set of CPU ids. Ids above [`MAX_CPU_ID`] are refused before any range
/// is expanded, and overlapping ranges are merged before they are, so the work is bounded by
/// the list's length and [`MAX_CPUS`], however often a range repeats.
pub fn parse_cpuset(text: &str) -> Result<BTreeSet<u32>, CpuSetError> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo = cpu_id(part, lo)?;
        let hi = cpu_id(part, hi)?;
        if lo > hi {
            return Err(CpuSetError::Reversed {
                part: part.to_string(),
                first: lo.into(),
                last: hi.into(),
            });
        }
        ranges.push((lo, hi));
    }
    ranges.sort_unstable();
    let mut out = BTreeSet::new();
    // Every id is inserted once: each range starts after the last id expanded.
    let mut next = 0u32;
    for (lo, hi) in ranges {
        let from = lo.max(next);
        if from <= hi {
            out.extend(from..=hi);
            next = hi.saturating_add(1);
        }
    }
    Ok(out)
}

/// One CPU id of a list element, within [`MAX_CPU_ID`].
fn cpu_id(part: &str, text: &str) -> Result<u32, CpuSetError> {
    let too_large = || CpuSetError::TooLarge {
        part: part.to_string(),
        cpu: text.to_string(),
    };
    match text.parse::<u64>() {
        Ok(cpu) => match u32::try_from(cpu) {
            Ok(c) if c <= MAX_CPU_ID => Ok(c),
            _ => Err(too_large()),
        },
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(too_large()),
        Err(_) => Err(CpuSetError::BadCpu {
            part: part.to_string(),
            value: text.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_table() {
        let cases: &[(i64, u64)] = &[
            (0, 2),
            (1, 2),
            (1, MIN_SHARES),
            (2, 2),
            (3, 3),
            (5, 5),
            (10, 10),
            (100, 102),
            (250, 256),
            (500, 512),
            (1000, 1024),
            (1500, 1536),
            (256_000, 262_144),
            (1_000_000, MAX_SHARES),
            (-5, 2),
            (i64::MAX, MAX_SHARES),
        ];
        for (milli, want) in cases {
            assert_eq!(milli_cpu_to_shares(*milli), *want, "milli {milli}");
        }
    }

    #[test]
    fn quota_table() {
        let cases: &[(i64, i64, i64)] = &[
            (0, 100_000, 0),
            (1, 100_000, 1000),
            (5, 100_000, 1000),
            (9, 100_000, 1000),
            (10, 100_000, 1000),
            (11, 100_000, 1100),
            (100, 100_000, 10_000),
            (200, 100_000, 20_000),
            (250, 100_000, 25_000),
            (500, 100_000, 50_000),
            (1000, 100_000, 100_000),
            (1500, 100_000, 150_000),
            (1_000_000, QUOTA_PERIOD, 100_000_000),
            (200, 50_000, 10_000),
            (10, 50_000, 1000),
            (-5, 100_000, 0),
        ];
        for (milli, period, want) in cases {
            assert_eq!(
                milli_cpu_to_quota(*milli, *period),
                *want,
                "milli {milli} period {period}"
            );
        }
    }

    #[test]
    fn cpuset_table() {
        let ok: &[(&str, &[u32])] = &[
            ("", &[]),
            ("0", &[0]),
            ("0-1,3", &[0, 1, 3]),
            (" 2 , 0-1 ", &[0, 1, 2]),
            ("0-3\n", &[0, 1, 2, 3]),
            ("3,3,2-3", &[2, 3]),
            ("8191", &[8191]),
        ];
        for (text, want) in ok {
            let got: Vec<u32> = parse_cpuset(text).unwrap().into_iter().collect();
            assert_eq!(got, *want, "{text:?}");
        }
        assert_eq!(parse_cpuset("0-8191").unwrap().len(), 8192);
        for bad in ["a", "1-", "-1", "3-1", "0,x", "0-x", "1-2-3", " - "] {
            assert!(parse_cpuset(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn repeated_ranges_cost_their_length_not_their_expansion() {
        // 1.6 billion insertions if each range were expanded: minutes, not milliseconds.
        let text = "0-8191,".repeat(200_000);
        assert_eq!(parse_cpuset(&text).unwrap().len(), 8192);
        let got: Vec<u32> = parse_cpuset("5-9,0-2,1-6,20")
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20]);
    }

    #[test]
    fn cpuset_bounds() {
        // A huge range is refused at once, before anything is expanded.
        let start = crate::clock::monotonic_now();
        let err = parse_cpuset("0-4000000000").unwrap_err();
        assert!(crate::clock::elapsed(start) < std::time::Duration::from_secs(1));
        assert_eq!(
            err,
            CpuSetError::TooLarge {
                part: "0-4000000000".into(),
                cpu: "4000000000".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "bad CPU 4000000000 in \"0-4000000000\": CPU ids go up to 8191 (Linux supports at most 8192 CPUs)"
        );
        assert!(matches!(
            parse_cpuset("8192"),
            Err(CpuSetError::TooLarge { .. })
        ));
        assert!(matches!(
            parse_cpuset("0-99999999999999999999999"),
            Err(CpuSetError::TooLarge { .. })
        ));
        assert_eq!(
            parse_cpuset("0-x").unwrap_err().to_string(),
            "bad CPU \"x\" in \"0-x\": not a CPU number"
        );
        assert_eq!(
            parse_cpuset("3-1").unwrap_err().to_string(),
            "bad CPU range \"3-1\": 3 is greater than 1"
        );
    }
}
