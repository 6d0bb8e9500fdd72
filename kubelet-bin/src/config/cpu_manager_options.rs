//! `cpuManagerPolicyOptions` (`--cpu-manager-policy-options`) as Go v1.25 checks them
//! (`CheckPolicyOptionAvailable`, `NewStaticPolicyOptions`): a known option, its maturity's
//! feature gate on (`CPUManagerPolicyAlphaOptions` off by default,
//! `CPUManagerPolicyBetaOptions` on), a boolean value. `full-pcpus-only` (beta) is honoured;
//! the alpha options (`distribute-cpus-across-numa`, `align-by-socket`) are accepted as Go
//! accepts them and reported at start-up as not supported by kubelet-rs.

use std::collections::BTreeMap;

use kubelet_core::cpumanager::StaticPolicyOptions;

use crate::feature_gates::FeatureGates;

const FULL_PCPUS_ONLY: &str = "full-pcpus-only";
const ALPHA: [&str; 2] = ["distribute-cpus-across-numa", "align-by-socket"];

/// The options the static policy honours and the warnings for those it does not, or
/// Go's error for the first bad option.
pub fn policy_options(
    options: &BTreeMap<String, String>,
    gates: &FeatureGates,
) -> Result<(StaticPolicyOptions, Vec<String>), String> {
    let mut out = StaticPolicyOptions::default();
    let mut warnings = Vec::new();
    for (name, value) in options {
        let alpha = ALPHA.contains(&name.as_str());
        if !alpha && name != FULL_PCPUS_ONLY {
            return Err(format!("unknown CPU Manager Policy option: {name:?}"));
        }
        if alpha && !gates.enabled("CPUManagerPolicyAlphaOptions") {
            return Err(format!(
                "CPU Manager Policy Alpha-level Options not enabled, but option {name:?} provided"
            ));
        }
        if !alpha && !gates.enabled("CPUManagerPolicyBetaOptions") {
            return Err(format!(
                "CPU Manager Policy Beta-level Options not enabled, but option {name:?} provided"
            ));
        }
        let on = option_bool("cpu-manager-policy-options", name, value)?;
        if alpha {
            if on {
                warnings.push(format!("cpuManagerPolicyOptions option {name:?} is not supported by kubelet-rs; it is ignored"));
            }
        } else {
            out.full_pcpus_only = on;
        }
    }
    Ok((out, warnings))
}

/// A boolean policy option's value, or Go's error for it (`strconv.ParseBool`'s words), as
/// both managers' option parsers give it.
pub(super) fn option_bool(flag: &'static str, name: &str, value: &str) -> Result<bool, String> {
    crate::go_flags::parse_go_bool(flag, value).map_err(|_| {
        format!(
            "bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(pairs: &[(&str, bool)]) -> BTreeMap<String, bool> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn options_as_go_checks_them() {
        let none = gates(&[]);
        let (o, w) = policy_options(
            &opts(&[("full-pcpus-only", "true")]),
            &FeatureGates::new(&none),
        )
        .unwrap();
        assert!(o.full_pcpus_only && w.is_empty());
        let (o, _) = policy_options(
            &opts(&[("full-pcpus-only", "false")]),
            &FeatureGates::new(&none),
        )
        .unwrap();
        assert!(!o.full_pcpus_only);
        for (options, g, want) in [
            (
                opts(&[("bogus", "true")]),
                gates(&[]),
                r#"unknown CPU Manager Policy option: "bogus""#,
            ),
            (
                opts(&[("align-by-socket", "true")]),
                gates(&[]),
                r#"CPU Manager Policy Alpha-level Options not enabled, but option "align-by-socket" provided"#,
            ),
            (
                opts(&[("full-pcpus-only", "true")]),
                gates(&[("CPUManagerPolicyBetaOptions", false)]),
                r#"CPU Manager Policy Beta-level Options not enabled, but option "full-pcpus-only" provided"#,
            ),
            (
                opts(&[("full-pcpus-only", "yes")]),
                gates(&[]),
                r#"bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax"#,
            ),
        ] {
            assert_eq!(
                policy_options(&options, &FeatureGates::new(&g)).unwrap_err(),
                want
            );
        }
        let (o, w) = policy_options(
            &opts(&[("distribute-cpus-across-numa", "true")]),
            &FeatureGates::new(&gates(&[("CPUManagerPolicyAlphaOptions", true)])),
        )
        .unwrap();
        assert!(!o.full_pcpus_only);
        assert!(w[0].contains("not supported by kubelet-rs"), "{w:?}");
    }
}
