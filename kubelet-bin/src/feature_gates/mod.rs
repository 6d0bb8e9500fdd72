//! `featureGates` (and `--feature-gates`) checked as the Go kubelet's feature gate checks them
//! (component-base `featuregate`'s `SetFromMap`), against every gate a Go kubelet from 1.25
//! to 1.37 knows ([`known::GATES`]).
//!
//! For each gate set, in name order:
//! - a name no Go kubelet of those releases knows is refused: `unrecognized feature gate: X`;
//! - a gate locked to its default and set to the other value is refused: `cannot set feature
//!   gate X to V, feature is locked to D`;
//! - a GA or deprecated gate warns as Go does (`Setting GA feature gate X=V. It will be
//!   removed in a future release.`);
//! - a gate Go has removed since (it was accepted by the node's older kubelet) warns that it
//!   has no effect;
//! - a gate kubelet-rs does not implement ([`IMPLEMENTED`]) set to other than its default is
//!   reported as not supported.
//!
//! The policy for a node moving from an older Go kubelet: what cannot be honoured any more is
//! refused (a value against the newest lock: that feature can no longer be turned off or
//! on), what has merely become meaningless is accepted with a warning (a gate Go has since
//! removed, set to the value it was locked to or to any value when it was not locked).
//!
//! `AllAlpha` / `AllBeta` set every alpha / beta gate not set explicitly ([`FeatureGates::enabled`]).
//! Refusals are collected and returned together, each in Go's words; the caller wraps them as
//! Go does (`failed to set feature gates from initial flags-based config: …`).

use std::collections::BTreeMap;

mod known;

pub use known::GATES;

/// A gate's pre-release stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default.
    Beta,
    /// Generally available: usually locked on, removed a few releases later.
    Ga,
    /// On its way out.
    Deprecated,
}

/// One feature gate of the Go kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// The gate's name.
    pub name: &'static str,
    /// Its default.
    pub default: bool,
    /// Its stage.
    pub stage: Stage,
    /// Whether it is locked to its default (setting the other value is an error).
    pub locked: bool,
    /// The first release (from 1.25) whose kubelet knows it.
    pub since: &'static str,
    /// The first release whose kubelet no longer knows it.
    pub removed_in: Option<&'static str>,
}

/// A row of [`GATES`].
pub(crate) const fn gate(
    name: &'static str,
    default: bool,
    stage: Stage,
    locked: bool,
    since: &'static str,
    removed_in: Option<&'static str>,
) -> Gate {
    Gate {
        name,
        default,
        stage,
        locked,
        since,
        removed_in,
    }
}

/// The gates kubelet-rs acts on.
pub const IMPLEMENTED: &[&str] = &["EventedPLEG", "KubeletTracing", "LoggingAlphaOptions"];

/// The gate of that name, if a Go kubelet from 1.25 on knows it.
pub fn lookup(name: &str) -> Option<&'static Gate> {
    GATES
        .binary_search_by(|g| g.name.cmp(name))
        .ok()
        .and_then(|i| GATES.get(i))
}

/// The outcome of checking a configuration's gates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Refusals, each in Go's words.
    pub errors: Vec<String>,
    /// Warnings: Go's for GA and deprecated gates, and what kubelet-rs does not act on.
    pub warnings: Vec<String>,
}

/// Checks `set` (the merged `featureGates`) as described in the module docs.
pub fn check(set: &BTreeMap<String, bool>) -> Checked {
    let mut out = Checked::default();
    for (name, &value) in set {
        let Some(g) = lookup(name) else {
            out.errors
                .push(format!("unrecognized feature gate: {name}"));
            continue;
        };
        if g.locked && g.default != value {
            out.errors.push(format!(
                "cannot set feature gate {name} to {value}, feature is locked to {}",
                g.default
            ));
            continue;
        }
        match g.stage {
            Stage::Ga => out.warnings.push(format!(
                "Setting GA feature gate {name}={value}. It will be removed in a future release."
            )),
            Stage::Deprecated => out.warnings.push(format!(
                "Setting deprecated feature gate {name}={value}. It will be removed in a future release."
            )),
            Stage::Alpha | Stage::Beta => {}
        }
        if let Some(v) = g.removed_in {
            out.warnings.push(format!(
                "feature gate {name}={value}: the Go kubelet has no such gate since {v}; it has no effect"
            ));
        } else if value != g.default && !IMPLEMENTED.contains(&g.name) {
            out.warnings.push(match name.as_str() {
                "AllAlpha" | "AllBeta" => format!(
                    "feature gate {name}={value}: of the gates it sets, kubelet-rs acts only on {}",
                    IMPLEMENTED.join(", ")
                ),
                _ => format!(
                    "feature gate {name}={value} is not supported by kubelet-rs; it has no effect"
                ),
            });
        }
    }
    out
}

/// The effective gates of a configuration.
#[derive(Debug, Clone, Copy)]
pub struct FeatureGates<'a> {
    set: &'a BTreeMap<String, bool>,
}

impl<'a> FeatureGates<'a> {
    /// The gates of `featureGates` (checked with [`check`]).
    pub fn new(set: &'a BTreeMap<String, bool>) -> Self {
        FeatureGates { set }
    }

    /// Whether gate `name` is on: as set; else on when `AllAlpha` (`AllBeta`) is set and it
    /// is an alpha (beta) gate; else its default (off for a name not known).
    pub fn enabled(&self, name: &str) -> bool {
        if let Some(&v) = self.set.get(name) {
            return v;
        }
        let Some(g) = lookup(name) else {
            return false;
        };
        let all = |key: &str| self.set.get(key).copied().unwrap_or(false);
        match g.stage {
            Stage::Alpha if all("AllAlpha") => true,
            Stage::Beta if all("AllBeta") => true,
            _ => g.default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(list: &[(&str, bool)]) -> BTreeMap<String, bool> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn the_table_is_sorted_unique_and_its_versions_are_releases() {
        for w in GATES.windows(2) {
            assert!(w[0].name < w[1].name, "{} then {}", w[0].name, w[1].name);
        }
        let release = |v: &str| {
            v.strip_prefix("1.")
                .and_then(|m| m.parse::<u32>().ok())
                .is_some_and(|m| (25..=38).contains(&m))
        };
        for g in GATES {
            assert!(release(g.since), "{g:?}");
            assert!(g.removed_in.is_none_or(release), "{g:?}");
            assert!(
                !g.locked || g.stage != Stage::Alpha,
                "an alpha gate is never locked: {g:?}"
            );
        }
        for name in IMPLEMENTED {
            let g = lookup(name).expect("implemented gates are Go's");
            assert!(g.removed_in.is_none(), "{g:?}");
        }
    }

    #[test]
    fn checks_follow_gos_set_from_map() {
        // (gates, errors, warnings that must appear)
        type Case<'a> = (&'a [(&'a str, bool)], &'a [&'a str], &'a [&'a str]);
        let cases: &[Case] = &[
            (&[("NoSuchGate", true)], &["unrecognized feature gate: NoSuchGate"], &[]),
            // EventedPLEG: alpha, implemented: nothing to say.
            (&[("EventedPLEG", true)], &[], &[]),
            (
                &[("KubeletTracing", false)],
                &["cannot set feature gate KubeletTracing to false, feature is locked to true"],
                &[],
            ),
            (
                &[("KubeletTracing", true)],
                &[],
                &["Setting GA feature gate KubeletTracing=true. It will be removed in a future release."],
            ),
            // Removed since 1.27, locked on: true was accepted by 1.25's kubelet.
            (
                &[("EphemeralContainers", true)],
                &[],
                &["feature gate EphemeralContainers=true: the Go kubelet has no such gate since 1.27; it has no effect"],
            ),
            (
                &[("EphemeralContainers", false)],
                &["cannot set feature gate EphemeralContainers to false, feature is locked to true"],
                &[],
            ),
            // A beta gate kubelet-rs does not implement, set off.
            (
                &[("GracefulNodeShutdown", false)],
                &[],
                &["feature gate GracefulNodeShutdown=false is not supported by kubelet-rs; it has no effect"],
            ),
            // At its default: no effect to report.
            (&[("GracefulNodeShutdown", true)], &[], &[]),
            (
                &[("AllAlpha", true)],
                &[],
                &["feature gate AllAlpha=true: of the gates it sets, kubelet-rs acts only on EventedPLEG, KubeletTracing, LoggingAlphaOptions"],
            ),
        ];
        for (set, errors, warnings) in cases {
            let c = check(&gates(set));
            assert_eq!(c.errors, *errors, "{set:?}");
            for w in *warnings {
                assert!(
                    c.warnings.iter().any(|x| x == w),
                    "{set:?}: {w} in {:?}",
                    c.warnings
                );
            }
            if warnings.is_empty() {
                assert!(c.warnings.is_empty(), "{set:?}: {:?}", c.warnings);
            }
        }
        // Every refusal is reported, in name order.
        let c = check(&gates(&[("Zzz", true), ("Aaa", false)]));
        assert_eq!(
            c.errors,
            [
                "unrecognized feature gate: Aaa",
                "unrecognized feature gate: Zzz"
            ]
        );
    }

    #[test]
    fn all_alpha_and_all_beta_set_what_is_not_set_explicitly() {
        let set = gates(&[("AllAlpha", true)]);
        assert!(FeatureGates::new(&set).enabled("EventedPLEG"));
        let set = gates(&[("AllAlpha", true), ("EventedPLEG", false)]);
        assert!(
            !FeatureGates::new(&set).enabled("EventedPLEG"),
            "explicit wins"
        );
        let none = BTreeMap::new();
        let g = FeatureGates::new(&none);
        assert!(!g.enabled("EventedPLEG") && g.enabled("KubeletTracing"));
        assert!(!g.enabled("NoSuchGate"));
        let set = gates(&[("AllBeta", true)]);
        assert!(
            !FeatureGates::new(&set).enabled("EventedPLEG"),
            "alpha, not beta"
        );
    }
}
