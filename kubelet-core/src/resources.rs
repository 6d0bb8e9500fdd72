//! Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as exact integers, and the
//! per-pod request sums that admission and QoS use.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::ResourceList;

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {value:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed to parse (at most [`MAX_QUANTITY_LEN`] bytes of it).
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The message the API server gives for a quantity it cannot parse (Go's `ErrFormatWrong`).
pub const QUANTITY_FORMAT_MESSAGE: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Longest quantity text accepted (Go's quantities are at most a few dozen characters).
pub const MAX_QUANTITY_LEN: usize = 128;

/// Largest magnitude accepted: values of 10^40 and more (`1e2147483647`) are refused rather
/// than saturated (every resource the kubelet counts fits in an `i64`, below 10^19).
const MAX_DECIMAL_DIGITS: i64 = 40;
/// Smallest magnitude accepted for a non-zero value: 10^-40 (nano units are 10^-9).
const MIN_DECIMAL_EXPONENT: i64 = -40;

const OUT_OF_RANGE_LARGE: &str = "out of range: the value is too large";
const OUT_OF_RANGE_SMALL: &str = "out of range: the value is too small";

impl QuantityError {
    /// Is the text malformed (as opposed to well-formed but out of range)?
    pub fn is_format(&self) -> bool {
        !self.reason.starts_with("out of range")
    }

    /// What the API server would say: Go's format message for a malformed quantity, the
    /// reason for an out-of-range one.
    pub fn detail(&self) -> &'static str {
        if self.is_format() {
            QUANTITY_FORMAT_MESSAGE
        } else {
            self.reason
        }
    }
}

/// A parsed quantity: `mantissa × 10^exp10 × 2^exp2`, exact, with `exp10` bounded so that
/// scaling takes a few dozen steps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

fn parse(text: &str) -> Result<Parsed, QuantityError> {
    let err = |reason| QuantityError {
        value: text.chars().take(MAX_QUANTITY_LEN).collect(),
        reason,
    };
    if text.len() > MAX_QUANTITY_LEN {
        return Err(err("too long"));
    }
    let s = text.trim();
    let (negative, s) = match s.as_bytes().first() {
        None => return Err(err("empty")),
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        Some(_) => (false, s),
    };
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(num_end);
    if number.is_empty() || number == "." {
        return Err(err("no digits"));
    }
    let mut parts = number.splitn(2, '.');
    let whole = parts.next().unwrap_or("");
    let frac = parts.next().unwrap_or("");
    if frac.contains('.') {
        return Err(err("more than one decimal point"));
    }
    let digits = format!("{whole}{frac}");
    let significant = digits.trim_start_matches('0');
    if significant.len() > 38 {
        return Err(err("too many digits"));
    }
    let mantissa: u128 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| err("number too large"))?
    };
    // Bounded by the length check above: at most 128 fractional digits.
    let mut exp10 = -(frac.len() as i64);
    let mut exp2 = 0u32;
    match suffix {
        "" => {}
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        other => {
            let rest = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))
                .ok_or_else(|| err("unknown suffix"))?;
            let e: i32 = rest.parse().map_err(|_| err("bad exponent"))?;
            exp10 += i64::from(e);
        }
    }
    if mantissa == 0 {
        exp10 = 0;
    } else {
        // The value's decimal magnitude: the significant digits left of the point.
        let magnitude = significant.len() as i64 + exp10;
        if magnitude > MAX_DECIMAL_DIGITS {
            return Err(err(OUT_OF_RANGE_LARGE));
        }
        if magnitude < MIN_DECIMAL_EXPONENT {
            return Err(err(OUT_OF_RANGE_SMALL));
        }
    }
    let exp10 = i32::try_from(exp10).map_err(|_| err(OUT_OF_RANGE_LARGE))?;
    Ok(Parsed {
        negative,
        mantissa,
        exp10,
        exp2,
    })
}

/// The value scaled by `10^scale`, rounded up (away from zero for positives) as Kubernetes'
/// `ScaledValue` does, saturating at `i64` bounds. `exp10` is bounded by [`parse`], so the
/// loops below run at most about 80 times.
fn scaled(p: Parsed, scale: i32) -> i64 {
    let mut value = p.mantissa;
    let mut exp = p.exp10.saturating_add(scale);
    value = value.saturating_mul(1u128 << p.exp2.min(100));
    while exp > 0 && value != 0 && value != u128::MAX {
        value = value.saturating_mul(10);
        exp -= 1;
    }
    let mut remainder = false;
    while exp < 0 && value != 0 {
        if value % 10 != 0 {
            remainder = true;
        }
        value /= 10;
        exp += 1;
    }
    if exp < 0 && p.mantissa != 0 {
        remainder = true;
    }
    if remainder && !p.negative {
        value = value.saturating_add(1);
    }
    let v = i64::try_from(value).unwrap_or(i64::MAX);
    if p.negative {
        -v
    } else {
        v
    }
}

/// The quantity in thousandths, rounded up: "100m" → 100, "2" → 2000 (CPU in millicores).
pub fn milli_value(q: &Quantity) -> Result<i64, QuantityError> {
    parse(&q.0).map(|p| scaled(p, 3))
}

/// The quantity as a whole number, rounded up: "1Ki" → 1024, "1.5" → 2 (bytes, counts).
pub fn value(q: &Quantity) -> Result<i64, QuantityError> {
    parse(&q.0).map(|p| scaled(p, 0))
}

/// Reads `name` from a resource list in the unit the resource uses (millicores for "cpu",
/// whole units for everything else). Absent resources are 0.
pub fn amount(list: &ResourceList, name: &str) -> Result<i64, QuantityError> {
    match list.get(name) {
        None => Ok(0),
        Some(q) if name == "cpu" => milli_value(q),
        Some(q) => value(q),
    }
}

fn container_request(c: &Container, name: &str) -> Result<i64, QuantityError> {
    let Some(res) = c.resources.as_ref() else {
        return Ok(0);
    };
    // As API defaulting does: a limit without a request makes the request equal to the limit.
    if let Some(req) = res.requests.as_ref().filter(|r| r.contains_key(name)) {
        return amount(req, name);
    }
    match res.limits.as_ref() {
        Some(lim) => amount(lim, name),
        None => Ok(0),
    }
}

/// The pod's effective request of a resource, as the scheduler and kubelet admission see it:
/// max(sum over app containers, max over init containers) + pod overhead.
pub fn pod_request(pod: &Pod, name: &str) -> Result<i64, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(0);
    };
    let mut sum = 0i64;
    for c in &spec.containers {
        sum = sum.saturating_add(container_request(c, name)?);
    }
    let mut init_max = 0i64;
    for c in spec.init_containers.iter().flatten() {
        init_max = init_max.max(container_request(c, name)?);
    }
    let overhead = match spec.overhead.as_ref() {
        Some(o) => amount(o, name)?,
        None => 0,
    };
    Ok(sum.max(init_max).saturating_add(overhead))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_table() {
        let cases: &[(&str, Option<i64>, Option<i64>)] = &[
            // text, milli, value
            ("100m", Some(100), Some(1)),
            ("1", Some(1000), Some(1)),
            ("1.5", Some(1500), Some(2)),
            ("1Ki", Some(1_024_000), Some(1024)),
            ("128Mi", Some(134_217_728_000), Some(134_217_728)),
            ("1G", Some(1_000_000_000_000), Some(1_000_000_000)),
            ("2e3", Some(2_000_000), Some(2000)),
            ("0.1", Some(100), Some(1)),
            ("1n", Some(1), Some(1)),
            ("-1", Some(-1000), Some(-1)),
            ("", None, None),
            ("abc", None, None),
            ("1Zi", None, None),
            ("1.2.3", None, None),
            ("0e2147483647", Some(0), Some(0)),
            ("1e18", Some(i64::MAX), Some(1_000_000_000_000_000_000)),
            ("1e39", Some(i64::MAX), Some(i64::MAX)),
            ("1e2147483647", None, None),
            ("1e-2147483647", None, None),
            ("1e-30", Some(1), Some(1)),
            ("-1e-30", Some(0), Some(0)),
            (
                "000000000000000000000000000000000000000000001",
                Some(1000),
                Some(1),
            ),
            ("1e99999999999", None, None),
        ];
        for (text, milli, val) in cases {
            let q = Quantity(text.to_string());
            assert_eq!(milli_value(&q).ok(), *milli, "milli of {text:?}");
            assert_eq!(value(&q).ok(), *val, "value of {text:?}");
        }
        let err = value(&Quantity("1e2147483647".into())).unwrap_err();
        assert!(!err.is_format());
        assert_eq!(err.detail(), "out of range: the value is too large");
        assert!(value(&Quantity("12Xi".into())).unwrap_err().is_format());
        let long = "9".repeat(10_000);
        assert_eq!(
            value(&Quantity(long)).unwrap_err().value.len(),
            MAX_QUANTITY_LEN
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any text: a value or an error, never a panic, at once.
        #[test]
        fn any_text_parses_or_fails_quickly(text in "\\PC{0,40}") {
            let started = crate::clock::monotonic_now();
            let _ = value(&Quantity(text.clone()));
            let _ = milli_value(&Quantity(text));
            proptest::prop_assert!(crate::clock::elapsed(started) < std::time::Duration::from_millis(50));
        }

        /// Quantity-shaped text with any exponent: bounded time, a sane sign.
        #[test]
        fn shaped_quantities(
            sign in "[+-]?",
            whole in "[0-9]{0,45}",
            frac in "(\\.[0-9]{0,45})?",
            suffix in "(|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|e-?[0-9]{1,12}|E[0-9]{1,12})",
        ) {
            let text = format!("{sign}{whole}{frac}{suffix}");
            let started = crate::clock::monotonic_now();
            if let Ok(v) = value(&Quantity(text.clone())) {
                if sign != "-" {
                    proptest::prop_assert!(v >= 0, "{} -> {}", text, v);
                }
            }
            let _ = milli_value(&Quantity(text));
            proptest::prop_assert!(crate::clock::elapsed(started) < std::time::Duration::from_millis(50));
        }
    }
}
