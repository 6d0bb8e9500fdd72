#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::stats::HugePages;

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

/// A machine of `nodes` NUMA nodes of 4 GiB each, node 0 with 16 huge pages of 2 MiB, and
/// 512 MiB of memory reserved on node 0.
fn policy(nodes: u32) -> StaticPolicy {
    let machine = (0..nodes)
        .map(|node| NumaMemory {
            node,
            memory_bytes: 4 * GI,
            hugepages: vec![HugePages {
                page_size_kb: 2048,
                num_pages: if node == 0 { 16 } else { 0 },
            }],
        })
        .collect();
    let reserved = BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_string(), 512 * MI)]))]);
    StaticPolicy::new(machine, reserved).unwrap()
}

fn started(p: &StaticPolicy) -> MemoryManagerState {
    let mut s = MemoryManagerState {
        policy_name: "Static".into(),
        ..Default::default()
    };
    p.start(&mut s).unwrap();
    s
}

fn container(name: &str, memory: &str, hugepages: Option<&str>) -> Container {
    let mut list: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity("1".into())),
        ("memory".to_string(), Quantity(memory.into())),
    ]
    .into();
    if let Some(h) = hugepages {
        list.insert("hugepages-2Mi".into(), Quantity(h.into()));
    }
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            requests: Some(list.clone()),
            limits: Some(list),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pod(uid: &str, containers: Vec<Container>, init: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(uid.into()),
            uid: Some(uid.into()),
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

fn any() -> TopologyHint {
    TopologyHint::default()
}

fn table(s: &MemoryManagerState, node: u32, r: &str) -> MemoryTable {
    s.machine_state[&node].memory_map[r]
}

#[test]
fn the_machine_state_of_a_fresh_machine() {
    let p = policy(2);
    let s = started(&p);
    assert_eq!(
        table(&s, 0, MEMORY),
        MemoryTable {
            total: 4 * GI,
            system_reserved: 512 * MI,
            allocatable: 4 * GI - 512 * MI - 32 * MI,
            reserved: 0,
            free: 4 * GI - 512 * MI - 32 * MI,
        },
        "memory loses the reservation and the node's huge pages"
    );
    assert_eq!(table(&s, 0, "hugepages-2Mi").allocatable, 32 * MI);
    assert_eq!(table(&s, 1, "hugepages-2Mi"), MemoryTable::default());
    assert_eq!(s.machine_state[&1].cells, [1]);
    assert_eq!(
        StaticPolicy::allocatable_memory(&s),
        vec![
            Block {
                numa_affinity: vec![0],
                resource: "hugepages-2Mi".into(),
                size: 32 * MI
            },
            Block {
                numa_affinity: vec![0],
                resource: MEMORY.into(),
                size: 4 * GI - 544 * MI
            },
            Block {
                numa_affinity: vec![1],
                resource: MEMORY.into(),
                size: 4 * GI
            },
        ]
    );
    assert_eq!(
        StaticPolicy::new(Vec::new(), ReservedMemory::new()).unwrap_err(),
        PolicyError::NoReservedMemory
    );
}

/// Table: pods allocated in turn on a fresh two-node machine, under the given topology
/// hint; the nodes each container gets (or the error).
#[test]
fn allocation_table() {
    struct Case {
        name: &'static str,
        pods: Vec<(Pod, TopologyHint)>,
        want: Vec<Result<Vec<u32>, PolicyError>>,
    }
    let cases = [
        Case {
            name: "no topology preference: the narrowest preferred hint, node 0",
            pods: vec![(pod("a", vec![container("c", "1Gi", None)], vec![]), any())],
            want: vec![Ok(vec![0])],
        },
        Case {
            name: "the topology manager's node",
            pods: vec![(
                pod("a", vec![container("c", "1Gi", None)], vec![]),
                TopologyHint::on(&[1], true),
            )],
            want: vec![Ok(vec![1])],
        },
        Case {
            name: "more than a node: both, as a group",
            pods: vec![(pod("a", vec![container("c", "5Gi", None)], vec![]), any())],
            want: vec![Ok(vec![0, 1])],
        },
        Case {
            name: "a hint without the free memory is extended to a superset",
            pods: vec![
                (
                    pod("a", vec![container("c", "3Gi", None)], vec![]),
                    TopologyHint::on(&[1], true),
                ),
                (
                    pod("b", vec![container("c", "2Gi", None)], vec![]),
                    TopologyHint::on(&[1], false),
                ),
            ],
            // Node 1 has 1 GiB left; {0,1} is no group either (node 1 is used alone):
            // nothing can be extended to.
            want: vec![Ok(vec![1]), Err(PolicyError::NoExtension)],
        },
        Case {
            name: "a hint on a full node of a group is extended to the group",
            pods: vec![
                (pod("a", vec![container("c", "5Gi", None)], vec![]), any()),
                (
                    pod("b", vec![container("c", "1Gi", None)], vec![]),
                    TopologyHint::on(&[0], false),
                ),
            ],
            want: vec![Ok(vec![0, 1]), Ok(vec![0, 1])],
        },
        Case {
            name: "a single-node assignment keeps its node out of groups",
            pods: vec![
                (pod("a", vec![container("c", "1Gi", None)], vec![]), any()),
                (pod("b", vec![container("c", "6Gi", None)], vec![]), any()),
            ],
            want: vec![Ok(vec![0]), Err(PolicyError::NoDefaultAffinity)],
        },
        Case {
            name: "a group's nodes take no single-node assignment; the group grows",
            pods: vec![
                (pod("a", vec![container("c", "5Gi", None)], vec![]), any()),
                (pod("b", vec![container("c", "1Gi", None)], vec![]), any()),
            ],
            want: vec![Ok(vec![0, 1]), Ok(vec![0, 1])],
        },
        Case {
            name: "huge pages only where the node has them",
            pods: vec![(
                pod("a", vec![container("c", "1Gi", Some("8Mi"))], vec![]),
                any(),
            )],
            want: vec![Ok(vec![0])],
        },
    ];
    for case in cases {
        let mut p = policy(2);
        let mut s = started(&p);
        for ((pod, hint), want) in case.pods.iter().zip(&case.want) {
            let c = &pod.spec.as_ref().unwrap().containers[0];
            let got = p.allocate(&mut s, pod, c, hint).map(|()| {
                s.blocks(pod::uid(pod), &c.name).unwrap()[0]
                    .numa_affinity
                    .clone()
            });
            assert_eq!(&got, want, "{}: pod {}", case.name, pod::uid(pod));
        }
        // Whatever was allocated replays to the same machine (what a restart checks).
        let mut restored = s.clone();
        p.start(&mut restored)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    }
}

#[test]
fn accounting_of_a_group_and_its_release() {
    let mut p = policy(2);
    let mut s = started(&p);
    let a = pod("a", vec![container("c", "5Gi", Some("4Mi"))], vec![]);
    let c = &a.spec.as_ref().unwrap().containers[0];
    p.allocate(&mut s, &a, c, &any()).unwrap();
    // First fit: node 0's memory is used up, the rest from node 1.
    let node0 = table(&s, 0, MEMORY);
    assert_eq!((node0.free, node0.reserved), (0, node0.allocatable));
    assert_eq!(table(&s, 1, MEMORY).reserved, 5 * GI - node0.allocatable);
    assert_eq!(table(&s, 0, "hugepages-2Mi").reserved, 4 * MI);
    // Two blocks (memory and huge pages) on each node of the group.
    assert_eq!(s.machine_state[&0].number_of_assignments, 2);
    assert_eq!(s.machine_state[&1].cells, [0, 1]);
    assert_eq!(
        s.blocks("a", "c")
            .unwrap()
            .iter()
            .map(|b| b.resource.as_str())
            .collect::<Vec<_>>(),
        ["hugepages-2Mi", "memory"]
    );
    // Allocating again changes nothing; the hints are the blocks' own.
    let before = s.clone();
    p.allocate(&mut s, &a, c, &any()).unwrap();
    assert_eq!(s, before);
    let hints = p.container_hints(&s, &a, c).unwrap().unwrap();
    assert_eq!(hints[MEMORY], [TopologyHint::on(&[0, 1], true)]);

    p.remove_container(&mut s, "a", "c");
    assert_eq!(s, started(&p), "everything back, nodes alone again");
    p.remove_container(&mut s, "a", "c");
}

#[test]
fn hints_follow_gos_calculate_hints() {
    let p = policy(2);
    let s = started(&p);
    let masks = |h: &MemoryHints| -> Vec<(String, bool)> {
        h[MEMORY]
            .iter()
            .map(|h| (h.affinity.unwrap().to_string(), h.preferred))
            .collect()
    };
    let small = pod("a", vec![container("c", "1Gi", None)], vec![]);
    let hints = p
        .container_hints(&s, &small, &small.spec.as_ref().unwrap().containers[0])
        .unwrap()
        .unwrap();
    assert_eq!(
        masks(&hints),
        [
            ("[0]".into(), true),
            ("[1]".into(), true),
            ("[0,1]".into(), false)
        ]
    );
    let big = pod("b", vec![container("c", "5Gi", None)], vec![]);
    let hints = p
        .container_hints(&s, &big, &big.spec.as_ref().unwrap().containers[0])
        .unwrap()
        .unwrap();
    assert_eq!(masks(&hints), [("[0,1]".into(), true)]);
    // Pod scope: the app containers' sum (3 GiB) fits one node.
    let two = pod(
        "c",
        vec![
            container("x", "1536Mi", None),
            container("y", "1536Mi", None),
        ],
        vec![container("i", "1Gi", None)],
    );
    let hints = p.pod_hints(&s, &two).unwrap().unwrap();
    assert_eq!(masks(&hints)[0], ("[0]".into(), true));
    // Not Guaranteed: no preference, nothing allocated.
    let mut burstable = pod("d", vec![container("c", "1Gi", None)], vec![]);
    burstable.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .limits = None;
    let c = burstable.spec.as_ref().unwrap().containers[0].clone();
    assert_eq!(p.container_hints(&s, &burstable, &c).unwrap(), None);
    let mut p = p;
    let mut s2 = s.clone();
    p.allocate(&mut s2, &burstable, &c, &any()).unwrap();
    assert_eq!(s2, s);
}

#[test]
fn app_containers_reuse_what_init_containers_hold() {
    let mut p = policy(2);
    let mut s = started(&p);
    let pod = pod(
        "a",
        vec![container("app", "2Gi", None)],
        vec![container("init", "2Gi", None)],
    );
    let spec = pod.spec.clone().unwrap();
    let hint = TopologyHint::on(&[1], true);
    p.allocate(&mut s, &pod, &spec.init_containers.unwrap()[0], &hint)
        .unwrap();
    p.allocate(&mut s, &pod, &spec.containers[0], &hint)
        .unwrap();
    assert_eq!(table(&s, 1, MEMORY).reserved, 2 * GI, "not 4 GiB");
    assert_eq!(s.blocks("a", "init").unwrap()[0].size, 0);
    assert_eq!(s.blocks("a", "app").unwrap()[0].size, 2 * GI);
    // The state replays to the same machine.
    p.start(&mut s.clone()).unwrap();
}

#[test]
fn start_checks_the_restored_state_against_the_machine() {
    let mut p = policy(2);
    let mut s = started(&p);
    let a = pod("a", vec![container("c", "1Gi", None)], vec![]);
    p.allocate(&mut s, &a, &a.spec.as_ref().unwrap().containers[0], &any())
        .unwrap();
    p.start(&mut s.clone()).unwrap();

    // Another reservation: the machine no longer adds up.
    let other = StaticPolicy::new(
        p.machine.clone(),
        BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_string(), GI)]))]),
    )
    .unwrap();
    assert_eq!(
        other.start(&mut s.clone()).unwrap_err().to_string(),
        "[memorymanager] the expected machine state is different from the real one"
    );
    // Assignments without a machine; a block on a node that does not exist.
    let mut no_machine = s.clone();
    no_machine.machine_state.clear();
    assert_eq!(
        p.start(&mut no_machine).unwrap_err(),
        PolicyError::EmptyMachineState
    );
    let mut ghost = s.clone();
    ghost.entries.get_mut("a").unwrap().get_mut("c").unwrap()[0].numa_affinity = vec![7];
    assert_eq!(
        p.start(&mut ghost).unwrap_err().to_string(),
        "[memorymanager] (pod: a, container: c) the memory assignment uses the NUMA that does not exist"
    );
}
