//! Formatting integers as canonical Kubernetes quantity strings.
//!
//! Go's `resource.Quantity` prints in the format it was created with: `DecimalSI` for cpu and
//! pods (`"2"`, `"1500m"`, `"110"`, `"1k"`), `BinarySI` for memory, storage and hugepages
//! (`"24684084Ki"`, `"2Gi"`, or plain bytes when not a multiple of 1024).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

const DECIMAL_SUFFIXES: [(i32, &str); 9] = [
    (-9, "n"),
    (-6, "u"),
    (-3, "m"),
    (0, ""),
    (3, "k"),
    (6, "M"),
    (9, "G"),
    (12, "T"),
    (15, "P"),
];

/// A `DecimalSI` quantity from a value in thousandths (millicores for cpu): 2000 → `"2"`,
/// 1500 → `"1500m"`, 110000 → `"110"`, 1_000_000 → `"1k"`.
pub fn decimal_from_milli(milli: i64) -> Quantity {
    Quantity(format_decimal(milli as i128, -3))
}

/// A `DecimalSI` quantity from a whole number: 110 → `"110"`, 1000 → `"1k"`.
pub fn decimal(value: i64) -> Quantity {
    Quantity(format_decimal(value as i128, 0))
}

fn format_decimal(mantissa: i128, exponent: i32) -> String {
    if mantissa == 0 {
        return "0".to_string();
    }
    let mut m = mantissa;
    let mut e = exponent;
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    // The exponent must be a multiple of 3 (rem_euclid keeps negatives right).
    while e.rem_euclid(3) != 0 {
        m *= 10;
        e -= 1;
    }
    // Exponents beyond the largest suffix are folded back into the mantissa.
    while e > 18 {
        m *= 1000;
        e -= 3;
    }
    let suffix = match e {
        18 => "E",
        _ => DECIMAL_SUFFIXES
            .iter()
            .find(|(x, _)| *x == e)
            .map(|(_, s)| *s)
            .unwrap_or(""),
    };
    format!("{m}{suffix}")
}

/// A `BinarySI` quantity from bytes: 2048 → `"2Ki"`, 1536 → `"1536"`; below 1024 Go switches
/// to `DecimalSI`, so 1000 → `"1k"`.
pub fn binary(bytes: i64) -> Quantity {
    Quantity(format_binary(bytes))
}

fn format_binary(bytes: i64) -> String {
    // Go prints values with |v| < 1024 as DecimalSI (1000 → "1k").
    if bytes.unsigned_abs() < 1024 {
        return format_decimal(bytes as i128, 0);
    }
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut m = bytes;
    let mut i = 0;
    while i < SUFFIXES.len() - 1 && m % 1024 == 0 {
        m /= 1024;
        i += 1;
    }
    format!("{m}{}", SUFFIXES[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_table() {
        let cases: &[(i64, &str)] = &[
            (0, "0"),
            (2000, "2"),
            (1500, "1500m"),
            (100, "100m"),
            (110_000, "110"),
            (1_000_000, "1k"),
            (1, "1m"),
            (-500, "-500m"),
            (2_500_000, "2500"),
        ];
        for (milli, want) in cases {
            assert_eq!(decimal_from_milli(*milli).0, *want, "milli {milli}");
        }
        assert_eq!(decimal(110).0, "110");
        assert_eq!(decimal(1000).0, "1k");
        assert_eq!(decimal(250).0, "250");
    }

    #[test]
    fn binary_table() {
        let cases: &[(i64, &str)] = &[
            (0, "0"),
            (1000, "1k"),
            (500, "500"),
            (1024, "1Ki"),
            (1536, "1536"),
            (2 * 1024 * 1024, "2Mi"),
            (1 << 30, "1Gi"),
            (25_276_502_016, "24684084Ki"),
            (104_857_600, "100Mi"),
            (123_456_789, "123456789"),
        ];
        for (bytes, want) in cases {
            assert_eq!(binary(*bytes).0, *want, "bytes {bytes}");
        }
    }
}
