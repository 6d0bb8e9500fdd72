//! TLS bootstrap whose CSR is not auto-approved (a bootstrap token of a group without
//! kubeadm's auto-approval binding), against the join tests' control plane: the kubelet
//! logs where its CSR stands while it waits and, when the wait times out, fails with an
//! error naming the CSR (the binary prints it and exits with status 1, as Go's "failed to
//! run Kubelet: timed out waiting for the condition"), leaving no kubeconfig behind; a CSR
//! approved late with `kubectl certificate approve` (within the wait) completes the join.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::time::Duration;

use join_common::{
    cleanup, command_line, eventually, join_control_plane, join_setup, log_lines_with,
    manual_bootstrap_kubeconfig, start, wait_ready, write_config, JoinSetup,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kubelet_sources::apiserver::certificate::bootstrap::Outcome;
use kubelet_sources::apiserver::certificate::{CertError, ClientCertificates};
use kubelet_tests::engine::EngineTest;

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The CSR of the token `id`, once it exists.
async fn csr_of_token(admin: &kube::Client, id: &str) -> CertificateSigningRequest {
    let user = format!("system:bootstrap:{id}");
    eventually(Duration::from_secs(30), "the bootstrap CSR", || {
        let admin = admin.clone();
        let user = user.clone();
        async move {
            Api::<CertificateSigningRequest>::all(admin)
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|c| {
                    c.spec.signer_name == CLIENT_SIGNER && c.spec.username.as_deref() == Some(&user)
                })
        }
    })
    .await
}

fn conditions(c: &CertificateSigningRequest) -> Vec<(String, Option<String>)> {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.type_, c.reason))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unapproved_csr_times_out_with_clear_logs_and_an_error() {
    join_common::captured_logs();
    let Some(et) = EngineTest::new("join-csr-timeout").await else {
        return;
    };
    let Some(cp) = join_control_plane("join-csr-timeout").await else {
        return;
    };
    let admin = cp.admin_client().await.unwrap();
    let node = format!("n-{}", et.namespace);
    let etc = et.dir.path().join("etc-kubernetes");
    std::fs::create_dir_all(&etc).unwrap();
    let (_, id) = manual_bootstrap_kubeconfig(&cp, &etc).await;
    write_config(&etc, &cp, "");
    let root = et.dir.path().join("kubelet");
    let loaded = join_common::load(&command_line(&etc, &root, &node));
    // The binary's set-up, with a wait of 40s instead of Go's hour (long enough for one
    // progress line: they come every 30s).
    let mut cfg = kubelet_bin::certificates::client_cert_config(&loaded).unwrap();
    assert_eq!(
        cfg.bootstrap_timeout,
        Duration::from_secs(3600),
        "Go's wait"
    );
    cfg.bootstrap_timeout = Duration::from_secs(40);
    let t0 = kubelet_core::clock::monotonic_now();
    let err = ClientCertificates::load(&cfg)
        .await
        .expect_err("no approval: the wait times out");
    let waited = kubelet_core::clock::elapsed(t0);
    eprintln!(
        "bootstrap gave up after {:.1}s: {err}",
        waited.as_secs_f64()
    );
    let csr = csr_of_token(&admin, &id).await;
    let name = csr.metadata.name.clone().unwrap();
    assert!(
        matches!(&err, CertError::Timeout { name: n, timeout } if *n == name && *timeout == Duration::from_secs(40)),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&name) && message.contains("timed out"),
        "{message}"
    );
    assert!(
        waited >= Duration::from_secs(40) && waited < Duration::from_secs(55),
        "{waited:?}"
    );
    // Still pending: nobody approved it, and the kubelet wrote no kubeconfig.
    assert!(conditions(&csr).is_empty(), "{:?}", csr.status);
    assert!(!etc.join("kubelet.kubeconfig").exists());
    assert!(!root.join("pki/kubelet-client-current.pem").exists());
    assert!(
        root.join("pki/kubelet-client.key.tmp").exists(),
        "key kept for a restart"
    );
    // What the log said while waiting.
    let lines = log_lines_with(&name);
    eprintln!("{}", lines.join("\n"));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("waiting for it to be approved and issued")),
        "{lines:?}"
    );
    let progress: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("is not approved yet"))
        .collect();
    assert_eq!(progress.len(), 1, "one progress line in 40s: {lines:?}");
    assert!(
        progress[0].contains("waited_seconds=30")
            && progress[0].contains("kubectl certificate approve"),
        "{progress:?}"
    );
    // The binary's error path: `kubelet_bin::app::run` returns this error and `main` prints
    // `kubelet: --kubeconfig ...: <error>` and exits with status 1.
    let _ = Api::<CertificateSigningRequest>::all(admin.clone())
        .delete(&name, &Default::default())
        .await;
    cleanup(&cp, &node, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csr_approved_late_completes_the_join() {
    join_common::captured_logs();
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-csr-late", false, "").await
    else {
        return;
    };
    let (_, id) = manual_bootstrap_kubeconfig(&cp, &etc).await;
    let root = et.dir.path().join("kubelet");
    let args = command_line(&etc, &root, &node);

    // An operator approves the CSR 35s after it appears (past one progress line).
    let approver = {
        let (admin, cp, id) = (admin.clone(), cp.clone(), id.clone());
        tokio::spawn(async move {
            let csr = csr_of_token(&admin, &id).await;
            let name = csr.metadata.name.clone().unwrap();
            tokio::time::sleep(Duration::from_secs(35)).await;
            let still = Api::<CertificateSigningRequest>::all(admin)
                .get(&name)
                .await
                .unwrap();
            assert!(conditions(&still).is_empty(), "not auto-approved");
            let out = cp
                .kubectl(&["certificate", "approve", &name])
                .await
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            (name, kubelet_core::clock::monotonic_now())
        })
    };
    let t0 = kubelet_core::clock::monotonic_now();
    let k = start(&et, &args, false).await;
    let (name, approved_at) = approver.await.unwrap();
    assert_eq!(k.bootstrap, Some(Outcome::Bootstrapped));
    eprintln!(
        "bootstrap done {:.1}s after start, {:.2}s after the approval",
        kubelet_core::clock::elapsed(t0).as_secs_f64(),
        kubelet_core::clock::elapsed(approved_at).as_secs_f64()
    );
    assert!(kubelet_core::clock::elapsed(t0) >= Duration::from_secs(35));
    let csr = Api::<CertificateSigningRequest>::all(admin.clone())
        .get(&name)
        .await
        .unwrap();
    assert!(
        conditions(&csr)
            .iter()
            .any(|(t, r)| t == "Approved" && r.as_deref() == Some("KubectlApprove")),
        "{:?}",
        csr.status
    );
    let lines = log_lines_with(&name);
    assert!(
        lines.iter().any(|l| l.contains("is not approved yet")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("approved and issued")),
        "{lines:?}"
    );
    let nodes: Api<Node> = Api::all(admin.clone());
    wait_ready(&nodes, &node).await;
    assert!(root.join("pki/kubelet-client-current.pem").exists());
    assert!(!root.join("pki/kubelet-client.key.tmp").exists());
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}
