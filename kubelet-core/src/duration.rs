//! Go-format durations (`time.ParseDuration` / `Duration.String()`): "1m0s", "20s", "100ms",
//! "1h30m", "1.5s" — the text form of every duration in Kubernetes configuration files and
//! plugin protocols (`metav1.Duration`).

use std::time::Duration;

/// A duration text that Go's `time.ParseDuration` would not accept (or a negative one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationError {
    /// The text that failed to parse.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses a Go duration: an optional sign (negative values are rejected: no kubelet duration
/// may be negative) and a sequence of decimal numbers, each with an optional fraction and a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`); "0" alone is zero.
pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    let err = |reason| DurationError {
        text: text.to_string(),
        reason,
    };
    let mut s = text;
    if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    } else if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total_ns: u128 = 0;
    while !s.is_empty() {
        let int_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (int_part, rest) = s.split_at(int_end);
        let (frac_part, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                r.split_at(end)
            }
            None => ("", rest),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_end);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit (use ns, us, ms, s, m or h)")),
            _ => return Err(err("unknown unit (use ns, us, ms, s, m or h)")),
        };
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| err("number too large"))?
        };
        let mut value = int.checked_mul(unit_ns).ok_or_else(|| err("overflow"))?;
        // Fraction: digits / 10^len × unit, truncated to whole nanoseconds (as Go does).
        let mut scale = unit_ns;
        for d in frac_part.bytes().take(30) {
            scale /= 10;
            value = value
                .checked_add(u128::from(d - b'0') * scale)
                .ok_or_else(|| err("overflow"))?;
        }
        total_ns = total_ns.checked_add(value).ok_or_else(|| err("overflow"))?;
        // Go durations are int64 nanoseconds: stop at the first part past that.
        if total_ns > i64::MAX as u128 {
            return Err(err("overflow"));
        }
        s = rest;
    }
    // Go durations are int64 nanoseconds.
    if total_ns > i64::MAX as u128 {
        return Err(err("overflow"));
    }
    let secs = (total_ns / 1_000_000_000) as u64;
    let nanos = (total_ns % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

fn frac(value: u128, unit: u128) -> String {
    let whole = value / unit;
    let rem = value % unit;
    if rem == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{rem:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Formats as Go's `Duration.String()`: "0s", "100ms", "1.5µs", "20s", "1m0s", "1h2m3.5s".
pub fn format_go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", frac(ns, 1_000));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", frac(ns, 1_000_000));
    }
    let hours = ns / 3_600_000_000_000;
    let minutes = (ns / 60_000_000_000) % 60;
    let secs_ns = ns % 60_000_000_000;
    let secs = frac(secs_ns, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{secs}s")
    } else if minutes > 0 {
        format!("{minutes}m{secs}s")
    } else {
        format!("{secs}s")
    }
}
