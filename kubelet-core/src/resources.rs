//! Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as exact integers, and the
//! per-pod request sums that admission and QoS use.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::cm::ResourceList;

/// A quantity string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {value:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed to parse.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A parsed quantity: `mantissa × 10^exp10 × 2^exp2`, exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Parsed {
    negative: bool,
    mantissa: u128,
    exp10: i32,
    exp2: u32,
}

fn parse(text: &str) -> Result<Parsed, QuantityError> {
    let err = |reason| QuantityError {
        value: text.to_string(),
        reason,
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    let (negative, s) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
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
    let mantissa: u128 = digits.parse().map_err(|_| err("number too large"))?;
    let mut exp10 = -(frac.len() as i32);
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
            exp10 = exp10.checked_add(e).ok_or_else(|| err("bad exponent"))?;
        }
    }
    Ok(Parsed {
        negative,
        mantissa,
        exp10,
        exp2,
    })
}

/// The value scaled by `10^scale`, rounded up (away from zero for positives) as Kubernetes'
/// `ScaledValue` does, saturating at `i64` bounds.
fn scaled(p: Parsed, scale: i32) -> i64 {
    let mut value = p.mantissa;
    let mut exp = p.exp10 + scale;
    value = value.saturating_mul(1u128 << p.exp2.min(100));
    while exp > 0 {
        value = value.saturating_mul(10);
        exp -= 1;
    }
    let mut remainder = false;
    while exp < 0 {
        if value % 10 != 0 {
            remainder = true;
        }
        value /= 10;
        exp += 1;
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
        ];
        for (text, milli, val) in cases {
            let q = Quantity(text.to_string());
            assert_eq!(milli_value(&q).ok(), *milli, "milli of {text:?}");
            assert_eq!(value(&q).ok(), *val, "value of {text:?}");
        }
    }
}
