//! The memory manager's `Static` policy on this machine (one NUMA node), with real
//! containerd and the real container manager: a Guaranteed pod's container is created with
//! `cpuset.mems` `0` (in the OCI spec containerd hands runc) and its memory is accounted on
//! node 0 in a state file of Go's format; a Burstable pod gets neither; a restarted kubelet
//! keeps the assignment; a pod that is gone gives its memory back at the next admission;
//! a reservation that no longer adds up stops the memory manager with Go's message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kubelet_core::memorymanager::{
    MemoryManager, MemoryManagerConfig, MemoryManagerPolicy, MemoryManagerState, STATE_FILE,
};
use kubelet_core::runtime::ContainerState;
use kubelet_core::testing::StaticSource;
use kubelet_core::PodSource;
use kubelet_tests::engine::{busybox, resources, wait_running, EngineTest};

const MI: u64 = 1 << 20;

fn state(t: &EngineTest) -> MemoryManagerState {
    let bytes = std::fs::read(t.root_dir().join(STATE_FILE)).expect("the state file");
    MemoryManagerState::from_json(&bytes, "Static").expect("Go's format and checksum")
}

/// `linux.resources.cpu.mems` of the OCI spec of the pod's running container, as containerd
/// wrote it in the task's bundle (`""` when not set).
async fn spec_mems(t: &EngineTest, uid: &str) -> String {
    let c = t
        .containers(uid)
        .await
        .into_iter()
        .find(|c| c.state == ContainerState::Running)
        .expect("a running container");
    // Every node environment's containerd keeps its state under /var/lib/kubelet-rs/node*.
    let bundles: Vec<_> = std::fs::read_dir("/var/lib/kubelet-rs")
        .unwrap()
        .flatten()
        .map(|e| {
            e.path()
                .join("containerd/state/io.containerd.runtime.v2.task/k8s.io")
                .join(&c.id)
                .join("config.json")
        })
        .filter(|p| p.exists())
        .collect();
    let path = bundles.first().unwrap_or_else(|| {
        panic!(
            "no bundle of container {} under /var/lib/kubelet-rs/node*",
            c.id
        )
    });
    let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    spec.pointer("/linux/resources/cpu/mems")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn guaranteed_memory_is_pinned_to_numa_node_0_and_accounted_in_gos_state_file() {
    let Some(mut t) = EngineTest::new("memorymanager").await else {
        return;
    };
    // kube-reserved 128Mi + the default hard eviction threshold 100Mi: what reservedMemory
    // must add up to.
    t.new_container_manager_with(|c| {
        c.kube_reserved.insert("memory".into(), "128Mi".into());
    })
    .await;
    let mut config = t.config();
    config.memory_manager = MemoryManagerConfig {
        policy: MemoryManagerPolicy::Static,
        reserved_memory: BTreeMap::from([(0, BTreeMap::from([("memory".to_string(), 228 * MI)]))]),
    };
    let guaranteed_container = |name: &str| {
        let mut c = busybox(name, "exec sleep 3600");
        c.resources = Some(resources(
            &[("cpu", "100m"), ("memory", "64Mi")],
            &[("cpu", "100m"), ("memory", "64Mi")],
        ));
        c
    };
    let (g, b, g2) = (t.uid("guaranteed"), t.uid("burstable"), t.uid("second"));
    let g_pod = t.pod("guaranteed", &g, vec![guaranteed_container("c")]);
    let b_pod = t.pod("burstable", &b, vec![busybox("c", "exec sleep 3600")]);
    let g2_pod = t.pod("second", &g2, vec![guaranteed_container("c")]);

    let source = Arc::new(StaticSource::new(
        "file",
        vec![g_pod.clone(), b_pod.clone()],
    ));
    let k = t.start_with(config.clone(), vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &g, Duration::from_secs(60)).await;
    wait_running(&k.handle, &b, Duration::from_secs(60)).await;
    assert_eq!(
        spec_mems(&t, &g).await,
        "0",
        "the Guaranteed container's cpuset.mems"
    );
    assert_eq!(
        spec_mems(&t, &b).await,
        "",
        "the Burstable container's: the runtime's default"
    );

    let st = state(&t);
    let block = &st.entries[&g]["c"][0];
    assert_eq!(
        (
            block.resource.as_str(),
            block.size,
            block.numa_affinity.clone()
        ),
        ("memory", 64 * MI, vec![0])
    );
    assert!(!st.entries.contains_key(&b), "{:?}", st.entries);
    let node0 = &st.machine_state[&0].memory_map["memory"];
    assert_eq!((node0.system_reserved, node0.reserved), (228 * MI, 64 * MI));
    assert_eq!(k.handle.container_memory(&g, "c")[0].size, 64 * MI);

    // A restarted kubelet reads the file back (it adds up) and keeps the assignment.
    k.stop().await;
    let k = t.start_with(config.clone(), vec![source.clone() as Arc<dyn PodSource>]);
    wait_running(&k.handle, &g, Duration::from_secs(60)).await;
    assert_eq!(state(&t).entries[&g]["c"][0].size, 64 * MI);

    // The first pod goes, a second Guaranteed pod comes: its admission releases the first
    // pod's memory (lazily, as Go) and pins its own.
    source.set(vec![b_pod.clone(), g2_pod.clone()]);
    wait_running(&k.handle, &g2, Duration::from_secs(60)).await;
    assert_eq!(spec_mems(&t, &g2).await, "0");
    let st = state(&t);
    assert!(!st.entries.contains_key(&g), "{:?}", st.entries);
    assert_eq!(st.machine_state[&0].memory_map["memory"].reserved, 64 * MI);
    k.stop().await;

    // Another reservation no longer adds up to the file: Go's refusal.
    let other = MemoryManagerConfig {
        policy: MemoryManagerPolicy::Static,
        reserved_memory: BTreeMap::from([(0, BTreeMap::from([("memory".to_string(), 200 * MI)]))]),
    };
    let machine = kubelet_cm::machine::read_machine_info(std::path::Path::new("/"), &t.root_dir())
        .unwrap()
        .numa_memory;
    let m = MemoryManager::new(
        other,
        machine,
        &BTreeMap::from([("memory".to_string(), 200 * MI)]),
        &t.root_dir(),
    )
    .unwrap();
    assert_eq!(
        m.start().await.unwrap_err().to_string(),
        "[memorymanager] the expected machine state is different from the real one"
    );
}
