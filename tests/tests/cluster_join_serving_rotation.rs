//! Serving certificate rotation (`serverTLSBootstrap: true`) with the join control plane's
//! short-lived certificates (signed for 8 minutes, backdated 5: rotated 0.6–2.2 minutes after
//! issuance): the first `kubernetes.io/kubelet-serving` CSR is approved, then at least one
//! rotation follows (a new CSR, approved); the secure port then serves the new certificate
//! (its serial, read by a TLS client, is the new one's), `kubectl logs`/`exec` through the
//! apiserver keep working, and `kubelet_certificate_manager_server_ttl_seconds` moves up.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use join_common::{
    cleanup, command_line, eventually, free_port, join_setup, pod, start, wait_ready, JoinSetup,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::PostParams;
use kube::Api;
use kubelet_tests::cri::BUSYBOX_IMAGE;

const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// The serial of the certificate `127.0.0.1:port` serves (a TLS client: `openssl s_client`),
/// `None` when the handshake fails.
fn served_serial(port: u16) -> Option<String> {
    served_certificate(port).map(|(serial, _)| serial)
}

/// The serial and the expiry (seconds since the epoch) of the certificate `127.0.0.1:port`
/// serves, `None` when the handshake fails.
fn served_certificate(port: u16) -> Option<(String, i64)> {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} </dev/null 2>/dev/null \
             | openssl x509 -noout -serial -enddate"
        ))
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(&out.stdout);
    let serial = s
        .lines()
        .find_map(|l| l.trim().strip_prefix("serial="))?
        .to_ascii_uppercase();
    let not_after = s.lines().find_map(|l| l.trim().strip_prefix("notAfter="))?;
    let epoch = std::process::Command::new("date")
        .args(["-u", "+%s", "-d", not_after])
        .output()
        .ok()?;
    let epoch = String::from_utf8_lossy(&epoch.stdout).trim().parse().ok()?;
    Some((serial, epoch))
}

/// Seconds from now (wall clock) until `not_after` (seconds since the epoch).
fn seconds_until(not_after: i64) -> f64 {
    let now = kubelet_core::clock::wall_now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    not_after as f64 - now
}

/// The serial of the first certificate of a PEM file.
fn file_serial(path: &std::path::Path) -> String {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-in"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches("serial=")
        .to_ascii_uppercase()
}

/// `kubelet_certificate_manager_server_ttl_seconds` from the node's /metrics through the
/// apiserver's proxy.
async fn server_ttl(cp: &kubelet_tests::cluster::ControlPlane, node: &str) -> Option<f64> {
    let out = cp
        .kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/nodes/{node}/proxy/metrics"),
        ])
        .await
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("kubelet_certificate_manager_server_ttl_seconds "))?
        .trim()
        .parse()
        .ok()
}

/// The ttl gauge is the served certificate's remaining life (whole seconds, read a moment
/// apart: within 5 s).
fn assert_gauge_follows(ttl: f64, not_after: i64, what: &str) {
    let remaining = seconds_until(not_after);
    assert!(
        (ttl - remaining).abs() <= 5.0,
        "the ttl gauge ({ttl}s) is {what}'s remaining life ({remaining:.0}s)"
    );
}

async fn logs_and_exec_work(cp: &kubelet_tests::cluster::ControlPlane, ns: &str) {
    let logs = cp.kubectl(&["-n", ns, "logs", "talker"]).await.unwrap();
    assert!(logs.status.success(), "{logs:?}");
    assert!(
        String::from_utf8_lossy(&logs.stdout).contains("hello-from-talker"),
        "{logs:?}"
    );
    let exec = cp
        .kubectl(&["-n", ns, "exec", "talker", "--", "sh", "-c", "echo exec-ok"])
        .await
        .unwrap();
    assert!(exec.status.success(), "{exec:?}");
    assert_eq!(String::from_utf8_lossy(&exec.stdout).trim(), "exec-ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_certificate_rotates_and_the_port_serves_the_new_one() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-serving-rot", true, "serverTLSBootstrap: true\n").await
    else {
        return;
    };
    let port = free_port();
    let root = et.dir.path().join("kubelet");
    let mut args = command_line(&etc, &root, &node);
    args.extend([format!("--port={port}"), "--address=127.0.0.1".into()]);
    let k = start(&et, &args, true).await;

    // An operator approving every serving CSR of the node as it comes.
    let user = format!("system:node:{node}");
    let stop = Arc::new(AtomicBool::new(false));
    let approved = Arc::new(Mutex::new(Vec::<String>::new()));
    let approver = {
        let (stop, approved, admin, cp, user) = (
            stop.clone(),
            approved.clone(),
            admin.clone(),
            cp.clone(),
            user.clone(),
        );
        tokio::spawn(async move {
            let csrs: Api<CertificateSigningRequest> = Api::all(admin);
            while !stop.load(Ordering::SeqCst) {
                let pending: Vec<String> = csrs
                    .list(&Default::default())
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| {
                        c.spec.signer_name == SERVING_SIGNER
                            && c.spec.username.as_deref() == Some(user.as_str())
                            && c.status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_none_or(|cs| cs.is_empty())
                    })
                    .filter_map(|c| c.metadata.name)
                    .collect();
                for name in pending {
                    let out = cp.kubectl(&["certificate", "approve", &name]).await;
                    if out.is_ok_and(|o| o.status.success()) {
                        eprintln!("approved serving CSR {name}");
                        approved.lock().unwrap().push(name);
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };

    let nodes: Api<Node> = Api::all(admin.clone());
    wait_ready(&nodes, &node).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &et.namespace);
    pods.create(
        &PostParams::default(),
        &pod(
            &et.namespace,
            &node,
            "talker",
            BUSYBOX_IMAGE,
            "echo hello-from-talker; exec sleep 3600",
        ),
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(90), "pod Running", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("talker").await.ok()?;
            (p.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;

    // The first serving certificate: issued on approval and served.
    let current = root.join("pki/kubelet-server-current.pem");
    let first = eventually(
        Duration::from_secs(60),
        "the first serving certificate",
        || {
            let current = current.clone();
            async move {
                let served = tokio::task::spawn_blocking(move || served_serial(port))
                    .await
                    .ok()??;
                (current.exists() && file_serial(&current) == served).then_some(served)
            }
        },
    )
    .await;
    let t_first = kubelet_core::clock::monotonic_now();
    eprintln!("first serving certificate served: serial {first}");
    logs_and_exec_work(&cp, &et.namespace).await;
    let ttl_first = server_ttl(&cp, &node).await.expect("server ttl gauge");
    let (_, first_not_after) = tokio::task::spawn_blocking(move || served_certificate(port))
        .await
        .unwrap()
        .expect("the served certificate");
    assert_gauge_follows(ttl_first, first_not_after, "the first certificate");

    // A rotation: a second CSR approved, the port serving a new certificate.
    let second = eventually(
        Duration::from_secs(300),
        "a rotated serving certificate",
        || {
            let current = current.clone();
            let first = first.clone();
            async move {
                let served = tokio::task::spawn_blocking(move || served_serial(port))
                    .await
                    .ok()??;
                (served != first && file_serial(&current) == served).then_some(served)
            }
        },
    )
    .await;
    eprintln!(
        "rotated {:.0}s after the first was served: serial {second}",
        kubelet_core::clock::elapsed(t_first).as_secs_f64()
    );
    let names: BTreeSet<String> = approved.lock().unwrap().iter().cloned().collect();
    assert!(names.len() >= 2, "two serving CSRs approved: {names:?}");
    // Through the apiserver (verifying the kubelet with --kubelet-certificate-authority).
    logs_and_exec_work(&cp, &et.namespace).await;
    let ttl_after = server_ttl(&cp, &node).await.expect("server ttl gauge");
    let (served, second_not_after) = tokio::task::spawn_blocking(move || served_certificate(port))
        .await
        .unwrap()
        .expect("the served certificate");
    assert_eq!(served, second);
    eprintln!(
        "server ttl: {ttl_first}s at first, {ttl_after}s after the rotation \
         (the second certificate expires {}s after the first)",
        second_not_after - first_not_after
    );
    assert!(
        second_not_after > first_not_after,
        "the rotated certificate lives longer"
    );
    assert_gauge_follows(ttl_after, second_not_after, "the rotated certificate");
    // New connections keep getting the new one.
    let again = tokio::task::spawn_blocking(move || served_serial(port))
        .await
        .unwrap();
    assert!(again.is_some_and(|s| s != first));
    stop.store(true, Ordering::SeqCst);
    approver.await.unwrap();
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}
