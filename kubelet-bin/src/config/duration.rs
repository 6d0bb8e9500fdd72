//! Go-format durations (`metav1.Duration`): "1m0s", "20s", "100ms", "1h30m", "1.5s".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration text that Go's `time.ParseDuration` would not accept (or a negative one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: {reason}")]
pub struct DurationError {
    /// The text that failed to parse.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// A [`Duration`] that reads and writes Go's duration format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// From whole seconds.
    pub const fn from_secs(s: u64) -> Self {
        GoDuration(Duration::from_secs(s))
    }

    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        GoDuration(Duration::from_millis(ms))
    }
}

impl From<GoDuration> for Duration {
    fn from(d: GoDuration) -> Duration {
        d.0
    }
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

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_go_duration(self.0))
    }
}

impl std::str::FromStr for GoDuration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(GoDuration)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_go_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_go_duration(&text)
            .map(GoDuration)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let ms = Duration::from_millis;
        let cases: &[(&str, Option<Duration>)] = &[
            ("0", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("1m0s", Some(ms(60_000))),
            ("20s", Some(ms(20_000))),
            ("100ms", Some(ms(100))),
            ("1h30m", Some(ms(5_400_000))),
            ("1.5s", Some(ms(1_500))),
            (".5s", Some(ms(500))),
            ("2h0m0s", Some(ms(7_200_000))),
            ("10us", Some(Duration::from_micros(10))),
            ("10µs", Some(Duration::from_micros(10))),
            ("7ns", Some(Duration::from_nanos(7))),
            ("+3s", Some(ms(3_000))),
            ("", None),
            ("10", None),
            ("1d", None),
            ("-1s", None),
            ("s", None),
            ("1.s", Some(ms(1_000))),
            ("99999999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text).ok(), *want, "{text:?}");
        }
    }

    #[test]
    fn format_table() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_secs(60), "1m0s"),
            (Duration::from_secs(20), "20s"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(7_200), "2h0m0s"),
            (Duration::from_secs(3_723), "1h2m3s"),
            (Duration::from_micros(1_500), "1.5ms"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_nanos(5), "5ns"),
        ];
        for (d, want) in cases {
            assert_eq!(format_go_duration(*d), *want);
            assert_eq!(parse_go_duration(want).unwrap(), *d, "round trip {want}");
        }
    }

    #[test]
    fn huge_numbers_overflow_cleanly() {
        for text in [
            "340282366920938463463374607431768211455ns",
            "94522879700260684295381835397713392h.999999999999",
            "9223372036854775807ns1ns",
            "99999999999999999999999999999999999999999999999h",
        ] {
            assert!(parse_go_duration(text).is_err(), "{text}");
        }
        assert_eq!(
            parse_go_duration("9223372036854775807ns").unwrap(),
            Duration::from_nanos(i64::MAX as u64)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn any_text_parses_or_fails(text in "\\PC{0,40}") {
            let _ = parse_go_duration(&text);
        }

        #[test]
        fn duration_shaped_text(parts in proptest::collection::vec(("[0-9]{0,25}", "(\\.[0-9]{0,40})?", "(ns|us|µs|ms|s|m|h|x|)"), 0..8)) {
            let text: String = parts.iter().map(|(a, b, c)| format!("{a}{b}{c}")).collect();
            if let Ok(d) = parse_go_duration(&text) {
                proptest::prop_assert!(d.as_nanos() <= i64::MAX as u128);
                // What is printed parses back to the same value.
                proptest::prop_assert_eq!(parse_go_duration(&format_go_duration(d)).unwrap(), d);
            }
        }
    }
}
