//! Joining a cluster as kubeadm nodes do, against the join tests' control plane (bootstrap
//! tokens, kubeadm's RBAC, the controller-manager signing with the cluster CA): a kubelet
//! started with the Go kubelet's own command line (`--bootstrap-kubeconfig`, `--kubeconfig`,
//! `--config`, `--container-runtime-endpoint`, `--node-labels`; paths adapted) gets its
//! client certificate from an auto-approved CSR, registers as `system:node:<name>` and turns
//! Ready; a restart reuses the certificate; a valid `--kubeconfig` skips bootstrapping; with
//! `serverTLSBootstrap` the secure port serves `kubectl logs`/`exec` once the
//! `kubernetes.io/kubelet-serving` CSR is approved.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod join_common;

use std::time::Duration;

use join_common::{
    audit_of, cleanup, command_line, create_namespace, csrs_of, eventually, free_port,
    join_control_plane, join_setup, pod, start, token_id, wait_ready, write_config, JoinSetup,
    CLIENT_SIGNER, SERVING_SIGNER,
};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::PostParams;
use kube::Api;
use kubelet_sources::apiserver::certificate::bootstrap::Outcome;
use kubelet_sources::apiserver::certificate::CertPair;
use kubelet_tests::cri::BUSYBOX_IMAGE;
use kubelet_tests::engine::EngineTest;

fn approved_and_issued(c: &CertificateSigningRequest) -> bool {
    let st = c.status.as_ref();
    st.and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Approved"))
        && st.and_then(|s| s.certificate.as_ref()).is_some()
}

async fn wait_running(pods: &Api<Pod>, name: &str) -> Pod {
    eventually(Duration::from_secs(90), "pod Running", || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let p = pods.get(&name).await.ok()?;
            (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_from_a_token_then_restart_reuses_the_certificate() {
    let Some(et) = EngineTest::new("join-bootstrap").await else {
        return;
    };
    let Some(cp) = join_control_plane("join-bootstrap").await else {
        return;
    };
    let admin = cp.admin_client().await.unwrap();
    let node = format!("n-{}", et.namespace);
    create_namespace(&admin, &et.namespace).await;
    let etc = et.dir.path().join("etc-kubernetes");
    std::fs::create_dir_all(&etc).unwrap();
    let token = cp.bootstrap_kubeconfig("1h").await.unwrap();
    std::fs::copy(&token, etc.join("bootstrap-kubelet.kubeconfig")).unwrap();
    write_config(&etc, &cp, "");
    let root = et.dir.path().join("kubelet");
    let args = command_line(&etc, &root, &node);
    assert!(!etc.join("kubelet.kubeconfig").exists());

    // No kubeconfig at start: bootstrap, register, Ready.
    let t0 = kubelet_core::clock::monotonic_now();
    let k = start(&et, &args, false).await;
    assert_eq!(k.bootstrap, Some(Outcome::Bootstrapped));
    let nodes: Api<Node> = Api::all(admin.clone());
    let n = wait_ready(&nodes, &node).await;
    let join_time = kubelet_core::clock::elapsed(t0);
    eprintln!(
        "JOIN TIME {node}: bootstrap token to node Ready in {:.3}s (TLS bootstrap {:.3}s)",
        join_time.as_secs_f64(),
        k.cluster_setup.as_secs_f64()
    );
    assert_eq!(
        n.metadata.labels.as_ref().unwrap()["node.kubernetes.io/node"],
        "",
        "--node-labels with an empty value"
    );
    let bootstrap_user = format!("system:bootstrap:{}", token_id(&token));
    let csrs = csrs_of(&admin, CLIENT_SIGNER, &bootstrap_user).await;
    assert_eq!(csrs.len(), 1, "one CSR of the token");
    let csr = &csrs[0];
    assert!(csr
        .metadata
        .name
        .as_deref()
        .unwrap()
        .starts_with("node-csr-"));
    assert!(approved_and_issued(csr), "{:?}", csr.status);
    assert_eq!(
        csr.spec.usages.clone().unwrap(),
        ["digital signature", "key encipherment", "client auth"]
    );
    // The certificate in the cert dir, the kubeconfig pointing at it.
    let pem = std::fs::read_to_string(root.join("pki/kubelet-client-current.pem")).unwrap();
    let pair = CertPair::from_combined_pem(&pem, "current").unwrap();
    assert_eq!(pair.common_name, format!("system:node:{node}"));
    assert_eq!(pair.organizations, ["system:nodes"]);
    let kubeconfig = std::fs::read_to_string(etc.join("kubelet.kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains("kubelet-client-current.pem"),
        "{kubeconfig}"
    );
    assert!(!root.join("pki/kubelet-client.key.tmp").exists());
    // It registered as system:node:<name> (the Node authorizer and NodeRestriction let it).
    let user = format!("system:node:{node}");
    let audit = eventually(Duration::from_secs(10), "audit entries", || {
        let a = audit_of(&cp, &user);
        async move {
            a.iter()
                .any(|(v, r, c)| v == "create" && r == "nodes" && *c == 201)
                .then_some(a)
        }
    })
    .await;
    assert!(
        audit.iter().all(|(_, _, c)| *c != 401 && *c != 403),
        "{audit:?}"
    );
    // Pods run on it.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &et.namespace);
    pods.create(
        &PostParams::default(),
        &pod(&et.namespace, &node, "p1", BUSYBOX_IMAGE, "exec sleep 3600"),
    )
    .await
    .unwrap();
    wait_running(&pods, "p1").await;
    k.stop().await;

    // A restart reuses the certificate: no new CSR.
    let k = start(&et, &args, false).await;
    assert_eq!(k.bootstrap, Some(Outcome::KubeconfigValid));
    wait_ready(&nodes, &node).await;
    assert_eq!(
        csrs_of(&admin, CLIENT_SIGNER, &bootstrap_user).await.len(),
        1
    );
    assert!(csrs_of(&admin, CLIENT_SIGNER, &user).await.is_empty());
    k.stop().await;

    // A valid --kubeconfig next to --bootstrap-kubeconfig: no bootstrap at all.
    let other = format!("m-{}", et.namespace);
    let etc2 = et.dir.path().join("etc2");
    std::fs::create_dir_all(&etc2).unwrap();
    let token2 = cp.bootstrap_kubeconfig("1h").await.unwrap();
    std::fs::copy(&token2, etc2.join("bootstrap-kubelet.kubeconfig")).unwrap();
    std::fs::copy(
        cp.node_kubeconfig(&other).await.unwrap(),
        etc2.join("kubelet.kubeconfig"),
    )
    .unwrap();
    write_config(&etc2, &cp, "");
    let k = start(
        &et,
        &command_line(&etc2, &et.dir.path().join("kubelet2"), &other),
        false,
    )
    .await;
    assert_eq!(k.bootstrap, Some(Outcome::KubeconfigValid));
    wait_ready(&nodes, &other).await;
    let user2 = format!("system:bootstrap:{}", token_id(&token2));
    assert!(csrs_of(&admin, CLIENT_SIGNER, &user2).await.is_empty());
    assert!(!et
        .dir
        .path()
        .join("kubelet2/pki/kubelet-client-current.pem")
        .exists());
    k.stop().await;
    cleanup(&cp, &other, "");
    cleanup(&cp, &node, &et.namespace);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_certificate_is_issued_on_approval_and_serves_logs_and_exec() {
    let Some(JoinSetup {
        et,
        cp,
        admin,
        node,
        etc,
    }) = join_setup("join-serving", true, "serverTLSBootstrap: true\n").await
    else {
        return;
    };
    let port = free_port();
    let mut args = command_line(&etc, &et.dir.path().join("kubelet"), &node);
    args.push(format!("--port={port}"));
    args.push("--address=127.0.0.1".into());
    let k = start(&et, &args, true).await;
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
    wait_running(&pods, "talker").await;

    // Before approval: a kubelet-serving CSR waits, and the secure port has no certificate.
    let user = format!("system:node:{node}");
    let csr = eventually(Duration::from_secs(30), "the serving CSR", || {
        let admin = admin.clone();
        let user = user.clone();
        async move {
            csrs_of(&admin, SERVING_SIGNER, &user)
                .await
                .into_iter()
                .next()
        }
    })
    .await;
    assert!(!approved_and_issued(&csr));
    assert_eq!(
        csr.spec.usages.clone().unwrap(),
        ["digital signature", "key encipherment", "server auth"]
    );
    let ns = et.namespace.as_str();
    let logs = cp.kubectl(&["-n", ns, "logs", "talker"]).await.unwrap();
    assert!(!logs.status.success(), "no serving certificate yet");

    let name = csr.metadata.name.clone().unwrap();
    let approve = cp
        .kubectl(&["certificate", "approve", &name])
        .await
        .unwrap();
    assert!(approve.status.success(), "{approve:?}");
    // kubectl logs and exec through the issued certificate, verified by the apiserver's
    // --kubelet-certificate-authority.
    let logs = eventually(Duration::from_secs(30), "kubectl logs", || async {
        let out = cp.kubectl(&["-n", ns, "logs", "talker"]).await.ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    })
    .await;
    assert_eq!(logs.trim(), "hello-from-talker");
    let exec = cp
        .kubectl(&["-n", ns, "exec", "talker", "--", "sh", "-c", "echo exec-ok"])
        .await
        .unwrap();
    assert!(exec.status.success(), "{exec:?}");
    assert_eq!(String::from_utf8_lossy(&exec.stdout).trim(), "exec-ok");
    let metrics = cp
        .kubectl(&[
            "get",
            "--raw",
            &format!("/api/v1/nodes/{node}/proxy/metrics"),
        ])
        .await
        .unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    let ttl: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kubelet_certificate_manager_server_ttl_seconds "))
        .expect("server ttl gauge")
        .parse()
        .unwrap();
    assert!(ttl > 0.0 && ttl.is_finite(), "{ttl}");
    // The certificate in the cert dir names the node's addresses.
    let pem = std::fs::read_to_string(et.dir.path().join("kubelet/pki/kubelet-server-current.pem"))
        .unwrap();
    let pair = CertPair::from_combined_pem(&pem, "serving").unwrap();
    assert_eq!(pair.dns_names, std::slice::from_ref(&node));
    assert_eq!(pair.ips, ["127.0.0.1".parse::<std::net::IpAddr>().unwrap()]);
    k.stop().await;
    cleanup(&cp, &node, &et.namespace);
}
