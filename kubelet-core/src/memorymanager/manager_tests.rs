#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const GI: u64 = 1 << 30;

fn machine() -> Vec<NumaMemory> {
    (0..2)
        .map(|node| NumaMemory {
            node,
            memory_bytes: 4 * GI,
            hugepages: Vec::new(),
        })
        .collect()
}

fn reservation() -> BTreeMap<String, u64> {
    BTreeMap::from([("memory".to_string(), GI)])
}

fn config(policy: MemoryManagerPolicy) -> MemoryManagerConfig {
    MemoryManagerConfig {
        policy,
        reserved_memory: BTreeMap::from([(0, BTreeMap::from([("memory".to_string(), GI)]))]),
    }
}

fn guaranteed(uid: &str, memory: &[(&str, &str)], init: &[(&str, &str)]) -> Pod {
    let c = |(name, mem): &(&str, &str)| {
        let list: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), Quantity("1".into())),
            ("memory".to_string(), Quantity(mem.to_string())),
        ]
        .into();
        Container {
            name: name.to_string(),
            resources: Some(ResourceRequirements {
                requests: Some(list.clone()),
                limits: Some(list),
                ..Default::default()
            }),
            ..Default::default()
        }
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(uid.into()),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: memory.iter().map(c).collect(),
            init_containers: (!init.is_empty()).then(|| init.iter().map(c).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A started manager of `policy` on [`machine`] with 1 GiB reserved on node 0, its state
/// file in `dir` (`""`: none).
async fn started(policy: MemoryManagerPolicy, dir: &Path) -> MemoryManager {
    let m = MemoryManager::new(config(policy), machine(), &reservation(), dir).unwrap();
    m.start().await.unwrap();
    m
}

fn admit(m: &MemoryManager, pod: &Pod) -> Result<(), AllocateError> {
    for c in pod::all_containers(pod) {
        m.allocate(pod, c, &TopologyHint::default())?;
    }
    Ok(())
}

#[tokio::test]
async fn none_writes_gos_file_and_pins_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(MemoryManagerPolicy::None, dir.path()).await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap(),
        r#"{"policyName":"None","machineState":{},"checksum":4236770233}"#
    );
    let p = guaranteed("a", &[("c", "1Gi")], &[]);
    admit(&m, &p).unwrap();
    assert!(m.container_numa_nodes("a", "c").is_none());
    assert!(m.allocatable_memory().is_empty());
    assert!(m
        .container_hints(&p, &p.spec.as_ref().unwrap().containers[0])
        .is_empty());
}

#[tokio::test]
async fn static_pins_persists_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let m = started(MemoryManagerPolicy::Static, dir.path()).await;
    let big = guaranteed("big", &[("c", "5Gi")], &[]);
    admit(&m, &big).unwrap();
    assert_eq!(m.container_numa_nodes("big", "c").as_deref(), Some("0,1"));
    m.persist().await.unwrap();

    // A restart reads the same state back, and it adds up.
    let again = started(MemoryManagerPolicy::Static, dir.path()).await;
    assert_eq!(again.state(), m.state());
    assert_eq!(again.container_memory("big", "c")[0].size, 5 * GI);

    // Another policy, or another reservation: Go's messages.
    let none = MemoryManager::new(
        config(MemoryManagerPolicy::None),
        machine(),
        &reservation(),
        dir.path(),
    )
    .unwrap();
    let err = none.start().await.unwrap_err().to_string();
    assert!(
        err.contains(r#"[memorymanager] configured policy "None" differs from state checkpoint policy "Static""#)
            && err.contains("please drain this node and delete the memory manager checkpoint file"),
        "{err}"
    );
    let mut other = config(MemoryManagerPolicy::Static);
    other.reserved_memory = BTreeMap::from([(1, BTreeMap::from([("memory".to_string(), GI)]))]);
    let moved = MemoryManager::new(other, machine(), &reservation(), dir.path()).unwrap();
    assert_eq!(
        moved.start().await.unwrap_err().to_string(),
        "[memorymanager] the expected machine state is different from the real one"
    );
}

#[tokio::test]
async fn stale_pods_and_finished_init_containers_give_memory_back() {
    let m = started(MemoryManagerPolicy::Static, Path::new("")).await;
    let a = guaranteed("a", &[("c", "3Gi")], &[]);
    admit(&m, &a).unwrap();
    let b = guaranteed("b", &[("c", "3Gi")], &[]);
    // Until the sources are seen nothing is released; then a's memory comes back.
    m.release_stale(&b, None);
    assert_eq!(m.container_memory("a", "c").len(), 1);
    m.release_stale(&b, Some(&[]));
    assert!(m.container_memory("a", "c").is_empty());
    assert_eq!(m.state().machine_state[&0].memory_map["memory"].reserved, 0);

    let with_init = guaranteed("i", &[("app", "1Gi")], &[("init", "2Gi")]);
    admit(&m, &with_init).unwrap();
    assert_eq!(
        m.container_memory("i", "init")[0].size,
        GI,
        "1 GiB reused by app"
    );
    m.container_started(&with_init, "app");
    assert!(m.container_memory("i", "init").is_empty());
    let node = m.container_memory("i", "app")[0].numa_affinity[0];
    assert_eq!(
        m.state().machine_state[&node].memory_map["memory"].reserved,
        GI
    );
}

#[test]
fn build_errors_say_what_is_wrong() {
    let mut c = config(MemoryManagerPolicy::Static);
    c.reserved_memory
        .insert(3, BTreeMap::from([("memory".to_string(), GI)]));
    assert_eq!(
        MemoryManager::new(c, machine(), &reservation(), Path::new("")).unwrap_err().to_string(),
        "the reserved memory configuration references a NUMA node 3 that does not exist on this machine"
    );
    let mut c = config(MemoryManagerPolicy::Static);
    c.reserved_memory
        .insert(1, BTreeMap::from([("memory".to_string(), 100 << 20)]));
    assert_eq!(
        MemoryManager::new(c, machine(), &reservation(), Path::new(""))
            .unwrap_err()
            .to_string(),
        r#"the total amount "1124Mi" of type "memory" is not equal to the value "1Gi" determined by Node Allocatable feature"#
    );
    let mut c = config(MemoryManagerPolicy::Static);
    c.reserved_memory.clear();
    assert_eq!(
        MemoryManager::new(c, machine(), &BTreeMap::new(), Path::new(""))
            .unwrap_err()
            .to_string(),
        "[memorymanager] you should specify the system reserved memory"
    );
    assert_eq!(
        MemoryManagerPolicy::parse("static")
            .unwrap_err()
            .to_string(),
        r#"unknown policy: "static""#
    );
}

#[test]
fn the_reservation_is_gos_without_the_huge_pages() {
    // 16Gi with 1Gi of 2Mi pages; 100Mi kube-reserved + 100Mi hard eviction: allocatable
    // memory is 16Gi - 200Mi - 1Gi (huge pages leave it too), the reservation 200Mi.
    let list = |pairs: &[(&str, &str)]| -> crate::cm::ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    };
    let capacity = list(&[("cpu", "4"), ("memory", "16Gi"), ("hugepages-2Mi", "1Gi")]);
    let allocatable = list(&[
        ("cpu", "4"),
        ("memory", &format!("{}", 16 * GI - 200 * (1 << 20) - GI)),
        ("hugepages-2Mi", "1Gi"),
    ]);
    assert_eq!(
        node_allocatable_reservation(&capacity, &allocatable),
        BTreeMap::from([("memory".to_string(), 200 << 20)])
    );
}

#[tokio::test]
async fn sidecars_keep_their_memory_and_count_in_the_pod_request() {
    let m = started(MemoryManagerPolicy::Static, Path::new("")).await;
    // A sidecar, then a regular init container, then the app: 1 GiB each.
    let mut p = guaranteed(
        "s",
        &[("app", "1Gi")],
        &[("sidecar", "1Gi"), ("init", "1Gi")],
    );
    p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].restart_policy =
        Some("Always".into());
    let pod_hints = m.pod_hints(&p);
    let memory = pod_hints["memory"].as_ref().unwrap();
    // Go's formula: app + sidecars = 2 GiB (also the init peak: sidecar + init), which fits
    // node 1 (4 GiB) and node 0 (3 GiB after the reservation).
    assert!(memory.contains(&TopologyHint::on(&[0], true)), "{memory:?}");
    admit(&m, &p).unwrap();
    m.container_started(&p, "init");
    m.container_started(&p, "app");
    assert_eq!(
        m.container_memory("s", "sidecar")[0].size,
        GI,
        "the sidecar keeps its memory"
    );
    assert!(m.container_memory("s", "init").is_empty());
    let node = m.container_memory("s", "app")[0].numa_affinity[0];
    // The sidecar's 1 GiB plus the init container's, reused by the app container.
    assert_eq!(
        m.state().machine_state[&node].memory_map["memory"].reserved,
        2 * GI
    );
}
