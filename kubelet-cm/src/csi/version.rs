//! Which CSI versions a driver may register with (Go's `highestSupportedVersion`): the
//! highest 1.x among the versions it lists; 2.x and above are ignored (not promised to be
//! compatible), 0.x is refused (unsupported since Kubernetes 1.17).

use std::fmt;

/// A version as Go's `ParseGeneric` reads it: `v` optional, two or more numeric parts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(Vec<u64>);

impl Version {
    /// Parses `1.2.0`, `v1.0`, …; `None` for anything else.
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let parts: Option<Vec<u64>> = s.split('.').map(|p| p.parse().ok()).collect();
        parts.filter(|p| p.len() >= 2).map(Version)
    }

    /// The major version.
    pub fn major(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// The highest supported version among `versions`, or Go's reason there is none.
pub fn highest_supported(versions: &[String]) -> Result<Version, String> {
    if versions.is_empty() {
        return Err(
            "kubernetes.io/csi: CSI driver reporting empty array for supported versions".into(),
        );
    }
    let mut best: Option<Version> = None;
    let mut last_error = None;
    for v in versions.iter().rev() {
        let Some(parsed) = Version::parse(v) else {
            last_error = Some(format!("could not parse {v:?} as version"));
            continue;
        };
        if parsed.major() > 1 {
            continue;
        }
        if best.as_ref().is_none_or(|b| *b < parsed) {
            best = Some(parsed);
        }
    }
    let Some(best) = best else {
        return Err(format!(
            "could not find a highest supported version from versions ({}) reported by this driver: {}",
            format_list(versions),
            last_error.unwrap_or_else(|| "<nil>".into())
        ));
    };
    if best.major() != 1 {
        return Err(format!(
            "highest supported version reported by driver is {best}, must be v1.x"
        ));
    }
    Ok(best)
}

/// A list as Go's `%v` prints a `[]string`.
pub(crate) fn format_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_highest_1x_wins() {
        let table: [(&[&str], Result<&str, &str>); 7] = [
            (&["1.0.0"], Ok("1.0.0")),
            (&["v1.0.0", "1.2.0", "1.1"], Ok("1.2.0")),
            (&["1.0.0", "2.0.0"], Ok("1.0.0")),
            (&["0.3.0"], Err("highest supported version reported by driver is 0.3.0, must be v1.x")),
            (&["2.0.0"], Err("could not find a highest supported version from versions ([2.0.0]) reported by this driver: <nil>")),
            (&["x"], Err("could not find a highest supported version from versions ([x]) reported by this driver: could not parse \"x\" as version")),
            (&[], Err("kubernetes.io/csi: CSI driver reporting empty array for supported versions")),
        ];
        for (versions, want) in table {
            let got = highest_supported(&list(versions)).map(|v| v.to_string());
            assert_eq!(
                got,
                want.map(str::to_string).map_err(str::to_string),
                "{versions:?}"
            );
        }
    }
}
