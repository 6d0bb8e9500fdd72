//! Go's merge tables (policy_test.go and the per-policy tests, v1.20.2) on two NUMA nodes.

use super::*;
use crate::topologymanager::TopologyHint as H;

const NODES: [u32; 2] = [0, 1];

fn p(resources: &[(&str, Option<&[H]>)]) -> ProviderHints {
    resources
        .iter()
        .map(|(r, h)| (r.to_string(), h.map(<[H]>::to_vec)))
        .collect()
}

fn on(nodes: &[u32], preferred: bool) -> H {
    H::on(nodes, preferred)
}

/// (name, providers, best-effort result, restricted admits, single-numa-node result)
type Case = (&'static str, Vec<ProviderHints>, H, H);

fn cases() -> Vec<Case> {
    let all_pref = on(&[0, 1], true);
    let all_not = on(&[0, 1], false);
    vec![
        ("no providers", vec![], all_pref, H::any(true)),
        ("an empty map", vec![p(&[])], all_pref, H::any(true)),
        (
            "a resource with no preference",
            vec![p(&[("r", None)])],
            all_pref,
            H::any(true),
        ),
        (
            "a resource with no possible affinity",
            vec![p(&[("r", Some(&[]))])],
            all_not,
            H::any(false),
        ),
        (
            "one nil preferred hint",
            vec![p(&[("r", Some(&[H::any(true)]))])],
            all_pref,
            H::any(true),
        ),
        (
            "one nil non-preferred hint",
            vec![p(&[("r", Some(&[H::any(false)]))])],
            all_not,
            H::any(false),
        ),
        (
            "same mask, both preferred",
            vec![
                p(&[("r1", Some(&[on(&[0], true)]))]),
                p(&[("r2", Some(&[on(&[0], true)]))]),
            ],
            on(&[0], true),
            on(&[0], true),
        ),
        (
            "same mask (1), both preferred",
            vec![
                p(&[("r1", Some(&[on(&[1], true)]))]),
                p(&[("r2", Some(&[on(&[1], true)]))]),
            ],
            on(&[1], true),
            on(&[1], true),
        ),
        (
            "one no hints, one single preferred",
            vec![p(&[]), p(&[("r", Some(&[on(&[0], true)]))])],
            on(&[0], true),
            on(&[0], true),
        ),
        (
            "two hints and a matching single",
            vec![
                p(&[("r1", Some(&[on(&[0], true), on(&[1], true)]))]),
                p(&[("r2", Some(&[on(&[0], true)]))]),
            ],
            on(&[0], true),
            on(&[0], true),
        ),
        (
            "both with two hints: the narrower preferred",
            vec![
                p(&[("r1", Some(&[on(&[0], true), on(&[1], true)]))]),
                p(&[("r2", Some(&[on(&[0], true), on(&[0, 1], false)]))]),
            ],
            on(&[0], true),
            on(&[0], true),
        ),
        (
            "a wider preferred over a narrower non-preferred",
            vec![
                p(&[("r1", Some(&[on(&[1], true), on(&[0, 1], false)]))]),
                p(&[(
                    "r2",
                    Some(&[on(&[0], true), on(&[1], true), on(&[0, 1], false)]),
                )]),
            ],
            on(&[1], true),
            on(&[1], true),
        ),
        (
            "multiple resources of one provider",
            vec![p(&[
                ("r1", Some(&[on(&[1], true), on(&[0, 1], false)])),
                (
                    "r2",
                    Some(&[on(&[0], true), on(&[1], true), on(&[0, 1], false)]),
                ),
            ])],
            on(&[1], true),
            on(&[1], true),
        ),
        (
            "no common mask",
            vec![
                p(&[("r1", Some(&[on(&[0], true)]))]),
                p(&[("r2", Some(&[on(&[1], true)]))]),
            ],
            all_not,
            H::any(false),
        ),
        (
            "same mask, one not preferred",
            vec![
                p(&[("r1", Some(&[on(&[0], true)]))]),
                p(&[("r2", Some(&[on(&[0], false)]))]),
            ],
            on(&[0], false),
            H::any(false),
        ),
        (
            "a wider mask, both preferred",
            vec![
                p(&[("r1", Some(&[on(&[0], true)]))]),
                p(&[("r2", Some(&[on(&[0, 1], true)]))]),
            ],
            on(&[0], true),
            H::any(false),
        ),
        (
            "two hints and a matching non-preferred single",
            vec![
                p(&[(
                    "r1",
                    Some(&[on(&[0], true), on(&[1], true), on(&[0, 1], false)]),
                )]),
                p(&[("r2", Some(&[on(&[0], false)]))]),
            ],
            on(&[0], false),
            H::any(false),
        ),
        (
            "one no-preference provider",
            vec![
                p(&[(
                    "r1",
                    Some(&[on(&[0], true), on(&[1], true), on(&[0, 1], false)]),
                )]),
                p(&[("r2", None)]),
            ],
            on(&[0], true),
            on(&[0], true),
        ),
    ]
}

#[test]
fn merges_as_go() {
    for (name, providers, best_effort, single) in cases() {
        let (hint, admit) = merge(TopologyPolicy::BestEffort, &NODES, &providers);
        assert_eq!((hint, admit), (best_effort, true), "best-effort: {name}");
        let (hint, admit) = merge(TopologyPolicy::Restricted, &NODES, &providers);
        assert_eq!(
            (hint, admit),
            (best_effort, best_effort.preferred),
            "restricted: {name}"
        );
        let (hint, admit) = merge(TopologyPolicy::SingleNumaNode, &NODES, &providers);
        assert_eq!(
            (hint, admit),
            (single, single.preferred),
            "single-numa-node: {name}"
        );
        let (hint, admit) = merge(TopologyPolicy::None, &NODES, &providers);
        assert_eq!((hint, admit), (H::default(), true), "none: {name}");
    }
}

#[test]
fn single_numa_node_ignores_wide_hints() {
    // Go's "Single NUMA hint generation": a provider with only a two-node preferred hint
    // leaves nothing to merge.
    let providers = vec![
        p(&[("r1", Some(&[on(&[0, 1], true)]))]),
        p(&[(
            "r2",
            Some(&[on(&[0], true), on(&[1], true), on(&[0, 1], false)]),
        )]),
    ];
    assert_eq!(
        merge(TopologyPolicy::SingleNumaNode, &NODES, &providers),
        (H::any(false), false)
    );
}

#[test]
fn policy_names() {
    for (name, want) in [
        ("none", TopologyPolicy::None),
        ("best-effort", TopologyPolicy::BestEffort),
        ("restricted", TopologyPolicy::Restricted),
        ("single-numa-node", TopologyPolicy::SingleNumaNode),
    ] {
        assert_eq!(TopologyPolicy::parse(name), Ok(want));
    }
    assert_eq!(
        TopologyPolicy::parse("numa"),
        Err("unknown policy: \"numa\"".into())
    );
}
