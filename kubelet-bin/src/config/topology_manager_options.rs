//! `topologyManagerPolicyOptions` (`--topology-manager-policy-options`) as Go checks them
//! (`CheckPolicyOptionAvailable`, `NewPolicyOptions`; both options are GA since 1.32 and
//! checked here as the current Go kubelet checks them, without the maturity gates earlier
//! releases had): `max-allowable-numa-nodes` is honoured (a topology policy may then run on
//! a machine with more than 8 NUMA nodes, up to the 64 kubelet-rs's NUMA masks hold);
//! `prefer-closest-numa-nodes` is accepted as Go accepts it and reported at start-up as not
//! supported by kubelet-rs.

use std::collections::BTreeMap;

use kubelet_core::topologymanager::MAX_NUMA_NODES;

const PREFER_CLOSEST: &str = "prefer-closest-numa-nodes";
const MAX_ALLOWABLE: &str = "max-allowable-numa-nodes";

/// The most NUMA nodes a policy may work on and the warnings for the options kubelet-rs
/// does not act on, or Go's error for the first bad option.
pub fn policy_options(options: &BTreeMap<String, String>) -> Result<(usize, Vec<String>), String> {
    let mut max = MAX_NUMA_NODES;
    let mut warnings = Vec::new();
    for (name, value) in options {
        match name.as_str() {
            PREFER_CLOSEST => {
                let on = super::cpu_manager_options::option_bool(
                    "topology-manager-policy-options",
                    name,
                    value,
                )?;
                if on {
                    warnings.push(format!("topologyManagerPolicyOptions option {name:?} is not supported by kubelet-rs; it is ignored"));
                }
            }
            MAX_ALLOWABLE => {
                let n: i64 = value.parse().map_err(|_| {
                    format!("unable to convert policy option to integer {name:?}: strconv.Atoi: parsing {value:?}: invalid syntax")
                })?;
                if n < MAX_NUMA_NODES as i64 {
                    return Err(format!(
                        "the minimum value of {name:?} should not be less than {MAX_NUMA_NODES}"
                    ));
                }
                if n > 64 {
                    return Err(format!(
                        "the value of {name:?} may not be more than 64 in kubelet-rs (its NUMA node masks hold nodes 0-63)"
                    ));
                }
                max = usize::try_from(n).unwrap_or(usize::MAX);
            }
            _ => return Err(format!("unknown Topology Manager Policy option: {name:?}")),
        }
    }
    Ok((max, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn options_as_go_checks_them() {
        assert_eq!(policy_options(&opts(&[])).unwrap(), (8, vec![]));
        assert_eq!(
            policy_options(&opts(&[("max-allowable-numa-nodes", "16")])).unwrap(),
            (16, vec![])
        );
        let (_, w) = policy_options(&opts(&[("prefer-closest-numa-nodes", "true")])).unwrap();
        assert!(w[0].contains("not supported by kubelet-rs"), "{w:?}");
        for (options, want) in [
            (
                opts(&[("bogus", "1")]),
                r#"unknown Topology Manager Policy option: "bogus""#,
            ),
            (
                opts(&[("max-allowable-numa-nodes", "4")]),
                r#"the minimum value of "max-allowable-numa-nodes" should not be less than 8"#,
            ),
            (
                opts(&[("max-allowable-numa-nodes", "65")]),
                r#"the value of "max-allowable-numa-nodes" may not be more than 64 in kubelet-rs (its NUMA node masks hold nodes 0-63)"#,
            ),
            (
                opts(&[("max-allowable-numa-nodes", "many")]),
                r#"unable to convert policy option to integer "max-allowable-numa-nodes": strconv.Atoi: parsing "many": invalid syntax"#,
            ),
            (
                opts(&[("prefer-closest-numa-nodes", "yes")]),
                r#"bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "yes": invalid syntax"#,
            ),
        ] {
            assert_eq!(policy_options(&options).unwrap_err(), want);
        }
    }
}
