//! Client certificate rotation with short-lived certificates (the join control plane signs
//! for 8 minutes, backdated 5: each certificate has 3 minutes left when issued and is
//! rotated 0.6–2.2 minutes after): at least two rotations while pods run, the node Ready
//! throughout, the lease renewed without a gap, the pod watch serving new pods after each
//! rotation, and no request of the node refused.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use join_common::{
    audit_of, cleanup, command_line, eventually, join_setup, pod, ready, start, wait_ready,
    JoinSetup,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::PostParams;
use kube::Api;
use kubelet_tests::cri::BUSYBOX_IMAGE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_rotations_while_pods_run_without_a_gap() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-rotation", true, "rotateCertificates: true\n").await
    else {
        return;
    };
    let args = command_line(&etc, &et.dir.path().join("kubelet"), &node);
    let k = start(&et, &args, false).await;
    let manager = k.client_manager.clone().expect("rotation is on");
    let first = manager.current().expect("a certificate");
    let nodes: Api<Node> = Api::all(admin.clone());
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &et.namespace);
    wait_ready(&nodes, &node).await;
    pods.create(
        &PostParams::default(),
        &pod(
            &et.namespace,
            &node,
            "ticker",
            BUSYBOX_IMAGE,
            "while true; do echo tick; sleep 1; done",
        ),
    )
    .await
    .unwrap();

    // Watch the node and its lease every second for the whole test.
    let stop = Arc::new(AtomicBool::new(false));
    let not_ready = Arc::new(Mutex::new(Vec::<String>::new()));
    let renewals = Arc::new(Mutex::new(Vec::<String>::new()));
    let monitor = {
        let (stop, not_ready, renewals) = (stop.clone(), not_ready.clone(), renewals.clone());
        let (nodes, node) = (nodes.clone(), node.clone());
        let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-node-lease");
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(n) = nodes.get(&node).await {
                    if ready(&n).as_deref() != Some("True") {
                        not_ready.lock().unwrap().push(format!("{:?}", ready(&n)));
                    }
                }
                if let Ok(l) = leases.get(&node).await {
                    if let Some(t) = l.spec.and_then(|s| s.renew_time) {
                        let t = t.0.to_string();
                        let mut r = renewals.lock().unwrap();
                        if r.last() != Some(&t) {
                            r.push(t);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let mut rx = manager.subscribe();
    let mut seen = vec![first.not_after];
    let t0 = kubelet_core::clock::monotonic_now();
    for round in 1..=2 {
        tokio::time::timeout(Duration::from_secs(300), rx.changed())
            .await
            .unwrap_or_else(|_| panic!("rotation {round} within 5 minutes"))
            .unwrap();
        let now = rx.borrow_and_update().clone().unwrap();
        eprintln!(
            "rotation {round} after {:.0}s: new certificate valid until {}",
            kubelet_core::clock::elapsed(t0).as_secs_f64(),
            now.not_after
        );
        assert!(now.not_after > *seen.last().unwrap());
        assert_eq!(now.common_name, format!("system:node:{node}"));
        seen.push(now.not_after);
        // The pod watch keeps serving: a pod created now starts.
        let name = format!("after-{round}");
        let created = kubelet_core::clock::monotonic_now();
        pods.create(
            &PostParams::default(),
            &pod(
                &et.namespace,
                &node,
                &name,
                BUSYBOX_IMAGE,
                "exec sleep 3600",
            ),
        )
        .await
        .unwrap();
        eventually(Duration::from_secs(30), "the new pod Running", || {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let p = pods.get(&name).await.ok()?;
                (p.status?.phase.as_deref() == Some("Running")).then_some(())
            }
        })
        .await;
        eprintln!(
            "pod {name} Running {:.1}s after creation",
            kubelet_core::clock::elapsed(created).as_secs_f64()
        );
    }
    // Past the first certificate's expiry, still working (the lease keeps being renewed).
    let first_expiry = u64::try_from(first.not_after).unwrap();
    loop {
        let now = kubelet_core::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        if now > first_expiry + 15 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    stop.store(true, Ordering::SeqCst);
    monitor.await.unwrap();

    let not_ready = not_ready.lock().unwrap().clone();
    assert!(not_ready.is_empty(), "the node left Ready: {not_ready:?}");
    let renewals = renewals.lock().unwrap().clone();
    let times: Vec<k8s_openapi::jiff::Timestamp> =
        renewals.iter().map(|t| t.parse().unwrap()).collect();
    let max_gap = times
        .windows(2)
        .map(|w| w[1].as_second() - w[0].as_second())
        .max()
        .unwrap_or(0);
    eprintln!("{} lease renewals, largest gap {max_gap}s", times.len());
    assert!(times.len() >= 10, "{renewals:?}");
    assert!(max_gap <= 20, "a lease gap of {max_gap}s: {renewals:?}");
    let user = format!("system:node:{node}");
    let audit = audit_of(&cp, &user);
    let refused: Vec<_> = audit
        .iter()
        .filter(|(_, _, c)| *c == 401 || *c == 403)
        .collect();
    assert!(refused.is_empty(), "refused requests: {refused:?}");
    let rotation_csrs = audit
        .iter()
        .filter(|(v, r, c)| v == "create" && r == "certificatesigningrequests" && *c == 201)
        .count();
    assert!(rotation_csrs >= 2, "{audit:?}");
    let m = &kubelet_core::metrics::global().client_certificate;
    assert_eq!(m.renew_errors(), 0);
    let now_s = i64::try_from(
        kubelet_core::clock::wall_now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    assert!(m.ttl_seconds(now_s) > 0.0);
    // The ticker ran on through both rotations.
    let ticker = pods.get("ticker").await.unwrap();
    let cs = &ticker.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(cs.restart_count, 0);
    assert!(cs.state.as_ref().unwrap().running.is_some());
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}
