//! Go-format durations (`metav1.Duration`): "1m0s", "20s", "100ms", "1h30m", "1.5s".

use std::fmt;
use std::time::Duration;

pub use kubelet_core::duration::{format_go_duration, parse_go_duration, DurationError};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
