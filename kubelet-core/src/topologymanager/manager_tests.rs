#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::testing::{ContainerBuilder, PodBuilder};

/// Hints from a table; records what it was asked to allocate.
#[derive(Default)]
struct Fake {
    hints: Vec<TopologyHint>,
    fail: bool,
    /// Fails with an admission error of its own kind.
    refuse: bool,
    allocated: Mutex<Vec<(String, Option<String>)>>,
    asked_pod: Mutex<u32>,
}

impl HintProvider for Fake {
    fn container_hints(&self, _: &Pod, _: &Container) -> ProviderHints {
        [("r".to_string(), Some(self.hints.clone()))].into()
    }
    fn pod_hints(&self, _: &Pod) -> ProviderHints {
        *self.asked_pod.lock().unwrap() += 1;
        self.container_hints(&Pod::default(), &Container::default())
    }
    fn allocate(
        &self,
        _: &Pod,
        c: &Container,
        affinity: &TopologyHint,
    ) -> Result<(), AllocateError> {
        if self.refuse {
            return Err(AllocateError::Admission {
                reason: "SMTAlignmentError".into(),
                message: "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2"
                    .into(),
            });
        }
        if self.fail {
            return Err(AllocateError::Unexpected(
                "not enough cpus available to satisfy request".into(),
            ));
        }
        self.allocated
            .lock()
            .unwrap()
            .push((c.name.clone(), affinity.affinity.map(|m| m.to_string())));
        Ok(())
    }
}

fn two_containers() -> Pod {
    PodBuilder::new("p", "uid-p")
        .init_container(ContainerBuilder::new("init", "busybox").build())
        .container(ContainerBuilder::new("app", "busybox").build())
        .build()
}

fn manager(policy: TopologyPolicy, scope: TopologyScope, fake: Arc<Fake>) -> TopologyManager {
    let mut m = TopologyManager::new(policy, scope, vec![0, 1]).unwrap();
    m.add_provider(fake);
    m
}

#[test]
fn none_allocates_every_container_without_a_preference() {
    let fake = Arc::new(Fake::default());
    let m = manager(TopologyPolicy::None, TopologyScope::Container, fake.clone());
    m.admit(&two_containers()).unwrap();
    assert_eq!(
        *fake.allocated.lock().unwrap(),
        [("init".to_string(), None), ("app".to_string(), None)]
    );
    assert_eq!(m.affinity("uid-p", "app"), None, "none keeps no affinity");
}

#[test]
fn the_chosen_affinity_is_allocated_and_remembered() {
    let fake = Arc::new(Fake {
        hints: vec![
            TopologyHint::on(&[1], true),
            TopologyHint::on(&[0, 1], false),
        ],
        ..Default::default()
    });
    let m = manager(
        TopologyPolicy::SingleNumaNode,
        TopologyScope::Container,
        fake.clone(),
    );
    m.admit(&two_containers()).unwrap();
    assert_eq!(
        *fake.allocated.lock().unwrap(),
        [
            ("init".to_string(), Some("[1]".to_string())),
            ("app".to_string(), Some("[1]".to_string()))
        ]
    );
    assert_eq!(
        m.affinity("uid-p", "app"),
        Some(TopologyHint::on(&[1], true))
    );
    m.retain_pods(&HashSet::new());
    assert_eq!(m.affinity("uid-p", "app"), None);
}

#[test]
fn pod_scope_asks_once_for_the_whole_pod() {
    let fake = Arc::new(Fake {
        hints: vec![TopologyHint::on(&[0], true)],
        ..Default::default()
    });
    let m = manager(TopologyPolicy::Restricted, TopologyScope::Pod, fake.clone());
    m.admit(&two_containers()).unwrap();
    assert_eq!(*fake.asked_pod.lock().unwrap(), 1);
    assert_eq!(fake.allocated.lock().unwrap().len(), 2);
}

#[test]
fn rejections_carry_gos_reasons() {
    let fake = Arc::new(Fake {
        hints: vec![TopologyHint::on(&[0, 1], false)],
        ..Default::default()
    });
    let m = manager(
        TopologyPolicy::Restricted,
        TopologyScope::Container,
        fake.clone(),
    );
    assert_eq!(
        m.admit(&two_containers()).unwrap_err(),
        (
            "TopologyAffinityError".to_string(),
            "Resources cannot be allocated with Topology locality".to_string()
        )
    );
    assert!(fake.allocated.lock().unwrap().is_empty());
    // best-effort admits the same, and the provider's failure is Go's unexpected error.
    let failing = Arc::new(Fake {
        hints: vec![TopologyHint::on(&[0, 1], false)],
        fail: true,
        ..Default::default()
    });
    let m = manager(
        TopologyPolicy::BestEffort,
        TopologyScope::Container,
        failing,
    );
    assert_eq!(
        m.admit(&two_containers()).unwrap_err(),
        (
            "UnexpectedAdmissionError".to_string(),
            "Allocate failed due to not enough cpus available to satisfy request, which is unexpected".to_string()
        )
    );
}

#[test]
fn more_than_eight_numa_nodes_only_with_none() {
    let nodes: Vec<u32> = (0..9).collect();
    assert_eq!(
        TopologyManager::new(
            TopologyPolicy::BestEffort,
            TopologyScope::Container,
            nodes.clone()
        )
        .unwrap_err(),
        "unsupported on machines with more than 8 NUMA Nodes"
    );
    assert!(TopologyManager::with_max_numa_nodes(
        TopologyPolicy::BestEffort,
        TopologyScope::Container,
        nodes.clone(),
        9
    )
    .is_ok());
    assert!(TopologyManager::new(TopologyPolicy::None, TopologyScope::Container, nodes).is_ok());
    assert_eq!(TopologyScope::parse("pod"), Ok(TopologyScope::Pod));
    assert_eq!(
        TopologyScope::parse("node"),
        Err("unknown scope: \"node\"".into())
    );
}

#[test]
fn a_providers_own_admission_error_keeps_its_reason() {
    let refusing = Arc::new(Fake {
        refuse: true,
        ..Default::default()
    });
    let m = manager(TopologyPolicy::None, TopologyScope::Container, refusing);
    assert_eq!(
        m.admit(&two_containers()).unwrap_err(),
        (
            "SMTAlignmentError".to_string(),
            "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2".to_string()
        )
    );
}
