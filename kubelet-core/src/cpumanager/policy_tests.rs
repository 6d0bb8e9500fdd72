#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::cpumanager::topology::fixtures::{dual_socket_ht, dual_socket_no_ht, single_socket_ht};

fn set(s: &str) -> CpuSet {
    CpuSet::parse(s).unwrap()
}

fn container(name: &str, request: &str, limit: &str) -> Container {
    let list = |cpu: &str| {
        [
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity("1G".into())),
        ]
        .into_iter()
        .collect()
    };
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: Some(list(request)),
            limits: Some(list(limit)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Go's `makePod`: pod `fakePod` with one container.
fn pod_of(containers: Vec<Container>, init: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("fakePod".into()),
            uid: Some("fakePod".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers,
            init_containers: (!init.is_empty()).then_some(init),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn state(default: &str, entries: &[(&str, &str, &str)]) -> CpuManagerCheckpoint {
    let mut s = CpuManagerCheckpoint {
        policy_name: "static".into(),
        default_cpu_set: set(default),
        ..Default::default()
    };
    for (pod, c, cpus) in entries {
        s.entries
            .entry(pod.to_string())
            .or_default()
            .insert(c.to_string(), set(cpus));
    }
    s
}

/// Go's `TestStaticPolicyAdd` (policy_static_test.go, v1.20.2): one reserved CPU (taken by
/// topology), the state as given, one container allocated.
#[test]
fn allocates_as_go() {
    type Case<'a> = (
        &'a str,
        fn() -> CpuTopology,
        &'a str,
        &'a [(&'a str, &'a str, &'a str)],
        (&'a str, &'a str, &'a str),
        Result<Option<&'a str>, &'a str>,
    );
    let cases: [Case<'_>; 12] = [
        (
            "one core, error",
            single_socket_ht,
            "0-7",
            &[],
            ("c2", "8000m", "8000m"),
            Err("not enough cpus available to satisfy request"),
        ),
        (
            "one CPU: the sibling of the partly reserved core",
            single_socket_ht,
            "0-7",
            &[],
            ("c2", "1000m", "1000m"),
            Ok(Some("4")),
        ),
        (
            "one core",
            single_socket_ht,
            "0-1,4-5",
            &[("fakePod", "c100", "2-3,6-7")],
            ("c3", "2000m", "2000m"),
            Ok(Some("1,5")),
        ),
        (
            "already assigned: the same",
            single_socket_ht,
            "0-1,4-5",
            &[("fakePod", "c3", "2-3,6-7")],
            ("c3", "4000m", "4000m"),
            Ok(Some("2-3,6-7")),
        ),
        (
            "dual HT: a socket",
            dual_socket_ht,
            "0-1,3-11",
            &[("fakePod", "c100", "2")],
            ("c3", "6000m", "6000m"),
            Ok(Some("1,3,5,7,9,11")),
        ),
        (
            "dual HT: three cores",
            dual_socket_ht,
            "0,2-4,6-11",
            &[("fakePod", "c100", "1,5")],
            ("c3", "6000m", "6000m"),
            Ok(Some("2-4,8-10")),
        ),
        (
            "dual no HT: a socket",
            dual_socket_no_ht,
            "0-1,3-7",
            &[("fakePod", "c100", "2")],
            ("c1", "4000m", "4000m"),
            Ok(Some("4-7")),
        ),
        (
            "dual no HT: four cores",
            dual_socket_no_ht,
            "0-1,3,6-7",
            &[("fakePod", "c100", "2,4-5")],
            ("c1", "4000m", "4000m"),
            Ok(Some("1,3,6-7")),
        ),
        (
            "dual HT: a socket and a core",
            dual_socket_ht,
            "0-1,3-11",
            &[("fakePod", "c100", "2")],
            ("c3", "8000m", "8000m"),
            Ok(Some("1,3-5,7,9-11")),
        ),
        (
            "not Guaranteed: shared",
            single_socket_ht,
            "0-7",
            &[],
            ("c1", "1000m", "2000m"),
            Ok(None),
        ),
        (
            "not whole CPUs: shared",
            single_socket_ht,
            "0-7",
            &[],
            ("c4", "977m", "977m"),
            Ok(None),
        ),
        (
            "too few left",
            single_socket_ht,
            "0,7",
            &[("fakePod", "c100", "1-6")],
            ("c5", "2000m", "2000m"),
            Err("not enough cpus available to satisfy request"),
        ),
    ];
    for (name, topo, default, entries, (c, req, lim), want) in cases {
        let mut policy = StaticPolicy::new(topo(), 1, None).unwrap();
        let mut st = state(default, entries);
        let before = st.default_cpu_set.clone();
        let cont = container(c, req, lim);
        let got = policy.allocate(
            &mut st,
            &pod_of(vec![cont], vec![]),
            &container(c, req, lim),
            None,
        );
        match want {
            Err(message) => assert_eq!(got.unwrap_err().to_string(), message, "{name}"),
            Ok(cpus) => {
                got.unwrap();
                let assigned = st
                    .entries
                    .get("fakePod")
                    .and_then(|m| m.get(c))
                    .map(ToString::to_string);
                assert_eq!(assigned.as_deref(), cpus, "{name}");
                if let Some(cpus) = cpus {
                    if !entries.iter().any(|(_, e, _)| *e == c) {
                        assert_eq!(
                            st.default_cpu_set,
                            before.difference(&set(cpus)),
                            "{name}: taken from the shared pool"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reservation_by_count_or_by_list() {
    // Go: 2 reserved on single_socket_ht = the first core's threads.
    let p = StaticPolicy::new(single_socket_ht(), 2, None).unwrap();
    assert_eq!(p.reserved().to_string(), "0,4");
    let p = StaticPolicy::new(single_socket_ht(), 2, Some(set("1,3"))).unwrap();
    assert_eq!(p.reserved().to_string(), "1,3");
    assert_eq!(
        StaticPolicy::new(single_socket_ht(), 0, None).unwrap_err(),
        PolicyError::NoReservation
    );
    assert_eq!(
        StaticPolicy::new(single_socket_ht(), 2, Some(set("1")))
            .unwrap_err()
            .to_string(),
        "unable to reserve the required amount of CPUs (size of 1 did not equal 2)"
    );
    assert!(matches!(
        StaticPolicy::new(single_socket_ht(), 1, Some(set("9"))),
        Err(PolicyError::ReservedNotOnMachine { .. })
    ));
    assert!(matches!(
        StaticPolicy::new(single_socket_ht(), 9, None),
        Err(PolicyError::Reserve { .. })
    ));
}

/// Go's `TestStaticPolicyStart` cases.
#[test]
fn start_validates_the_restored_state() {
    let p = StaticPolicy::new(single_socket_ht(), 1, None).unwrap();
    let mut empty = state("", &[]);
    p.start(&mut empty).unwrap();
    assert_eq!(empty.default_cpu_set.to_string(), "0-7");
    let cases: [(&str, CpuManagerCheckpoint, Option<&str>); 5] = [
        (
            "restored, fine",
            state("0-3,6-7", &[("p", "c", "4-5")]),
            None,
        ),
        (
            "empty default with assignments",
            state("", &[("p", "c", "0-7")]),
            Some("default cpuset cannot be empty"),
        ),
        (
            "reserved not in the default",
            state("1-7", &[("p", "c", "0")]),
            Some("not all reserved cpus: \"0\" are present in defaultCpuSet: \"1-7\""),
        ),
        (
            "overlap",
            state("0-5", &[("p", "c", "5-7")]),
            Some("pod: p, container: c cpuset: \"5-7\" overlaps with default cpuset \"0-5\""),
        ),
        (
            "CPUs went away",
            state("0-9", &[]),
            Some("current set of available CPUs \"0-7\" doesn't match with CPUs in state \"0-9\""),
        ),
    ];
    for (name, mut st, want) in cases {
        let got = p.start(&mut st).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{name}");
    }
}

#[test]
fn released_cpus_return_to_the_shared_pool() {
    let mut p = StaticPolicy::new(single_socket_ht(), 1, None).unwrap();
    let mut st = state("0-7", &[]);
    let c = container("app", "2", "2");
    p.allocate(&mut st, &pod_of(vec![c.clone()], vec![]), &c, None)
        .unwrap();
    assert_eq!(st.default_cpu_set.to_string(), "0,2-4,6-7");
    p.remove_container(&mut st, "fakePod", "app");
    assert_eq!(st.default_cpu_set.to_string(), "0-7");
    assert!(st.entries.is_empty());
    p.remove_container(&mut st, "fakePod", "app");
}

#[test]
fn an_init_containers_cpus_are_reused_by_the_app_container() {
    let mut p = StaticPolicy::new(single_socket_ht(), 1, None).unwrap();
    let mut st = state("0-7", &[]);
    let init = container("init", "2", "2");
    let app = container("app", "2", "2");
    let pod = pod_of(vec![app.clone()], vec![init.clone()]);
    p.allocate(&mut st, &pod, &init, None).unwrap();
    p.allocate(&mut st, &pod, &app, None).unwrap();
    let assigned = &st.entries["fakePod"];
    assert_eq!(
        assigned["init"], assigned["app"],
        "the app reuses the init container's CPUs"
    );
}

#[test]
fn numa_affinity_is_preferred() {
    let mut p = StaticPolicy::new(dual_socket_ht(), 1, None).unwrap();
    let mut st = state("0-11", &[]);
    let c = container("app", "2", "2");
    p.allocate(&mut st, &pod_of(vec![c.clone()], vec![]), &c, Some(&[1]))
        .unwrap();
    assert_eq!(st.entries["fakePod"]["app"].to_string(), "1,7");
}

/// Go's `TestGetTopologyHints` idea on the dual-socket machine (a NUMA node per socket,
/// 6 CPUs each, CPU 0 reserved).
#[test]
fn hints_prefer_the_fewest_numa_nodes_that_can_hold_the_request() {
    let p = StaticPolicy::new(dual_socket_ht(), 1, None).unwrap();
    let st = state("0-11", &[]);
    let hints = |cpu: &str| {
        let c = container("app", cpu, cpu);
        p.container_hints(&st, &pod_of(vec![c.clone()], vec![]), &c)
            .map(|hs| {
                hs.iter()
                    .map(|h| (h.affinity.unwrap().to_string(), h.preferred))
                    .collect::<Vec<_>>()
            })
    };
    let s = |m: &str, p: bool| (m.to_string(), p);
    assert_eq!(
        hints("2"),
        Some(vec![s("[0]", true), s("[1]", true), s("[0,1]", false)])
    );
    // Node 0 has 5 assignable CPUs (0 is reserved): 6 fit only node 1 or both.
    assert_eq!(hints("6"), Some(vec![s("[1]", true), s("[0,1]", false)]));
    assert_eq!(hints("8"), Some(vec![s("[0,1]", true)]));
    assert_eq!(
        hints("12"),
        Some(vec![]),
        "more than is assignable: no placement"
    );
    assert_eq!(hints("500m"), None, "shared: no preference");
    // An existing assignment of another size: no placement fits.
    let mut st = state("0,2-11", &[("fakePod", "app", "1")]);
    st.default_cpu_set = set("0,2-11");
    let c = container("app", "2", "2");
    assert_eq!(
        p.container_hints(&st, &pod_of(vec![c.clone()], vec![]), &c),
        Some(vec![])
    );
    assert_eq!(
        pod_guaranteed_cpus(&pod_of(
            vec![container("a", "2", "2"), container("b", "1", "1")],
            vec![container("i", "4", "4")]
        )),
        4
    );
}

#[test]
fn full_pcpus_only_admits_whole_cores_only() {
    // Go's "GuPodSingleCore, SingleSocketHT, ExpectError" under full-pcpus-only: two
    // threads per core, so 1 CPU is refused and 2 (one core) are given.
    let options = StaticPolicyOptions {
        full_pcpus_only: true,
    };
    let mut p = StaticPolicy::new(single_socket_ht(), 1, None)
        .unwrap()
        .with_options(options);
    let mut s = state("", &[]);
    p.start(&mut s).unwrap();
    let one = pod_of(vec![container("c", "1", "1")], vec![]);
    let err = p
        .allocate(
            &mut s,
            &one,
            &one.spec.as_ref().unwrap().containers[0],
            None,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"
    );
    assert!(s.entries.is_empty());
    let two = pod_of(vec![container("c", "2", "2")], vec![]);
    p.allocate(
        &mut s,
        &two,
        &two.spec.as_ref().unwrap().containers[0],
        None,
    )
    .unwrap();
    let cpus = s.entries["fakePod"]["c"].clone();
    assert_eq!(cpus.len(), 2);
    // Both threads of one core.
    let cores: std::collections::BTreeSet<u32> = cpus
        .iter()
        .map(|c| single_socket_ht().info(c).unwrap().core)
        .collect();
    assert_eq!(cores.len(), 1, "{cpus}");
}
